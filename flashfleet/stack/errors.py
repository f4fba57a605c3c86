"""Stack errors: every problem names its YAML path (``flashfleet:stack.options.kv_dsa``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

STACK_KEY = "flashfleet:stack"


@dataclass(frozen=True)
class Problem:
    path: str  # full YAML path, starting with the config key
    message: str
    rule: str = ""

    def __str__(self) -> str:
        rule = f" [rule: {self.rule}]" if self.rule else ""
        return f"{self.path}: {self.message}{rule}"


class StackError(ValueError):
    """A stack file that is refused; ``problems`` lists every reason with its path."""

    def __init__(self, stack: str, problems: Sequence[Problem]) -> None:
        self.stack = stack
        self.problems = tuple(problems)
        super().__init__(str(self))

    def __str__(self) -> str:
        if len(self.problems) == 1:
            return f"stack {self.stack}: {self.problems[0]}"
        lines = [f"stack {self.stack}: {len(self.problems)} problems"]
        lines += [f"  {p}" for p in self.problems]
        return "\n".join(lines)

    def paths(self) -> list[str]:
        return [p.path for p in self.problems]


def join_path(base: str, parts: Iterable[str | int]) -> str:
    out = base
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _yaml_loc(loc: tuple[str | int, ...], data: Any) -> list[str | int]:
    """Drop the discriminator tags pydantic inserts into a union's location.

    ``('nodes', 'source', 'aws', 'network', 'existing', 'vpcId')`` becomes
    ``nodes.source.network.vpcId``: a tag is the ``kind`` value of the mapping at that level.
    """
    out: list[str | int] = []
    node = data
    for part in loc:
        is_tag = isinstance(node, dict) and isinstance(part, str) and part not in node
        if is_tag and isinstance(node, dict) and node.get("kind") == part:
            continue
        out.append(part)
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        else:
            node = None
    return out


def plain_message(item: Any) -> str:
    """One pydantic error in the project's words: no `Value error, ` prefix, no
    `after validation` jargon."""
    msg = str(item["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    ctx = item.get("ctx") or {}
    bound = {"greater_than_equal": (">=", "ge"), "greater_than": (">", "gt"),
             "less_than_equal": ("<=", "le"), "less_than": ("<", "lt")}.get(item["type"])  # fmt: skip
    if bound is not None and bound[1] in ctx:
        return f"must be {bound[0]} {ctx[bound[1]]}"
    kinds = {"int_parsing": "a whole number", "int_type": "a whole number", "float_parsing": "a number",
             "float_type": "a number", "string_type": "text", "bool_parsing": "true or false",
             "dict_type": "a mapping", "list_type": "a list", "tuple_type": "a list"}  # fmt: skip
    if item["type"] in kinds:
        return f"must be {kinds[item['type']]}, not {item.get('input')!r}"
    if item["type"] == "literal_error" and "expected" in ctx:
        return f"must be {ctx['expected'].replace(' or ', ', ')}"
    if item["type"] == "too_short":
        n = ctx.get("min_length", 1)
        return f"needs at least {n} item{'s' if n != 1 else ''}"
    if item["type"] == "too_long":
        n = ctx.get("max_length")
        return f"takes at most {n} item{'s' if n != 1 else ''}"
    return msg.replace(" after validation", "")


# pydantic's error types, in the project's rule names (kebab-case, like every other rule):
# its own names (`value_error`, `missing`) are its internals, not a rule a user can look up.
_RULES = {
    "missing": "required",
    "extra_forbidden": "unknown-key",
    **dict.fromkeys(("greater_than", "greater_than_equal", "less_than", "less_than_equal"), "range"),
    **dict.fromkeys(("literal_error", "enum"), "choice"),
    **dict.fromkeys(("too_short", "too_long", "string_too_short", "string_too_long"), "length"),
    "string_pattern_mismatch": "pattern",
    **dict.fromkeys(("union_tag_invalid", "union_tag_not_found"), "kind"),
}


def rule_name(pydantic_type: str) -> str:
    """The rule a pydantic error breaks; a validator's own refusal says its rule in its message."""
    if pydantic_type in _RULES:
        return _RULES[pydantic_type]
    if pydantic_type.endswith(("_type", "_parsing")):
        return "type"
    return "invalid-value"


def from_validation_error(err: ValidationError, data: Any, base: str = STACK_KEY) -> list[Problem]:
    problems = []
    items = err.errors(include_url=False)
    # A refused item of a list with a minimum length also fails the length ("at least 1 item
    # after validation, not 0"): an echo of the first problem, not a second one.
    inner = [tuple(i["loc"]) for i in items]
    for item in items:
        loc_t = tuple(item["loc"])
        if item["type"] == "too_short" and any(o[: len(loc_t)] == loc_t and o != loc_t for o in inner):
            continue
        loc = _yaml_loc(loc_t, data)
        # Model-level validators report without a field; their message names the key.
        message = plain_message(item)
        if item["type"] == "extra_forbidden":
            message = "unknown key (not part of the stack spec; check its spelling)"
        problems.append(Problem(join_path(base, loc), message, rule_name(item["type"])))
    return problems
