"""Secrets out of run events: every form a secret can take in Ansible's output, replaced in the
decoded event, never in its serialised text (a search through JSON text misses a key that JSON
escapes, and a short key rewrites the event's own words).

What counts as a copy of a secret (docs/security.md lists the same):
- the secret as it is, its Python repr and ascii() bodies in both quote styles (SGLang logs
  `server_args` as a repr), and each of these JSON-escaped (ASCII-only and not) up to four times
  over (a JSON or repr line quoted in a module's JSON output, printed by the callback as JSON);
- its URL-encoded forms (`quote` with and without `/` kept, `quote_plus`; upper- and lower-case
  hex);
- its base64, standard and URL-safe alphabets, with and without padding, and inside a longer
  base64 text at each of the three byte alignments: there the one or two bytes at either end
  that share a base64 character with their neighbours can stay encoded, never more;
- each of these split by whitespace anywhere (a wrapped line, a base64 block at 76 columns), and
  by up to four escaped line breaks (`\\n`, `\\r`, `\\t`) at each point but just before a
  backslash of the form.
A secret's own whitespace counts as optional: `ab cd` also hides `abcd` (more is hidden, never less).
"""

from __future__ import annotations

import base64
import json
import re
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

REDACTED = "<redacted>"

# Ansible and ansible-runner's own words: event names, the keys of an event and of a task result,
# the JSON and YAML literals. A secret inside one of them would rewrite what the runner reads.
EVENT_VOCABULARY = (
    *(
        f"playbook_on_{name}"
        for name in (
            "start", "notify", "include", "no_hosts_matched", "no_hosts_remaining", "task_start",
            "vars_prompt", "setup", "import_for_host", "not_import_for_host", "play_start", "stats",
            "handler_task_start", "cleanup_task_start",
        )
    ),
    *(
        f"runner_{name}"
        for name in (
            "on_failed", "on_start", "on_ok", "on_error", "on_skipped", "on_unreachable", "on_no_hosts",
            "on_async_poll", "on_async_ok", "on_async_failed", "on_file_diff", "item_on_ok",
            "item_on_failed", "item_on_skipped", "retry",
        )
    ),
    "verbose", "error", "debug", "warning", "deprecated", "system_warning", "event", "event_data",
    "uuid", "parent_uuid", "counter", "stdout", "stderr", "stdout_lines", "stderr_lines", "start_line",
    "end_line", "runner_ident", "created", "pid", "host", "remote_addr", "task", "task_uuid",
    "task_action", "task_args", "task_path", "resolved_action", "role", "play", "play_uuid",
    "play_pattern", "playbook", "playbook_uuid", "res", "msg", "rc", "censored", "ignore_errors",
    "changed", "failed", "failures", "skipped", "unreachable", "dark", "ignored", "processed",
    "rescued", "ok", "item", "results", "invocation", "module_args", "_ansible_no_log",
    "ansible_facts", "duration", "start", "end", "delta", "true", "false", "null", "none",
    "True", "False", "None", "yes", "no",
)  # fmt: skip

# What a wrapped copy may hold between any two characters: any whitespace, and up to four
# escaped line breaks. Possessive and bounded where a separator could be read as the secret's own
# characters, so that matching stays linear in the text whatever the secret holds.
_SPLIT = r"\s*+"
_SPLIT_OR_ESCAPED = r"\s*+(?:\\[nrt]\s*+){0,4}+"


def _repr_bodies(text: str) -> set[str]:
    """The body of `repr`/`ascii` in both quote styles: `'` escaped (single quotes) or not."""
    out = set()
    for show in (repr, ascii):
        single = show(text + "'\"")[1:-4]  # with both quotes in it Python quotes with `'`
        out |= {single, single.replace("\\'", "'")}
    return out


def _json_bodies(text: str) -> set[str]:
    return {json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]}


def _url_forms(text: str) -> set[str]:
    out = {urllib.parse.quote(text, safe=""), urllib.parse.quote(text), urllib.parse.quote_plus(text)}
    return out | {re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), form) for form in out}


def _base64_forms(text: str) -> set[str]:
    """Whole-secret encodings, and the characters that encode only the secret's bytes when it
    sits at byte offset 0, 1 or 2 of a longer encoded text."""
    raw = text.encode("utf-8")
    out = set()
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        whole = encode(raw).decode("ascii")
        out |= {whole, whole.rstrip("=")}
        for offset in range(3):
            full_groups = (offset + len(raw)) // 3
            core = encode(b"\0" * offset + raw).decode("ascii")[4 if offset else 0 : 4 * full_groups]
            out.add(core)
    return out


# JSON inside JSON inside an event: a filter's `to_json | to_json` printed by the callback is three.
JSON_DEPTH = 4


def secret_forms(secret: str) -> set[str]:
    """Every text that counts as a copy of `secret` (the module docstring lists them)."""
    level = {secret} | _repr_bodies(secret)
    forms = set(level)
    for _ in range(JSON_DEPTH):
        level = {body for form in level for body in _json_bodies(form)} - forms
        forms |= level
    return {f for f in forms | _url_forms(secret) | _base64_forms(secret) if f}


def visible(form: str) -> str:
    """The characters a match must hold: a copy may differ from the form only in whitespace."""
    return "".join(c for c in form if not c.isspace())


def _pattern(form: str) -> str:
    chars = visible(form)
    out = [re.escape(chars[0])] if chars else []
    for char in chars[1:]:
        out += [_SPLIT if char == "\\" else _SPLIT_OR_ESCAPED, re.escape(char)]
    return "".join(out)


@dataclass(frozen=True)
class Redactor:
    """Replaces every copy of the given secrets in a decoded event: string values and mapping keys;
    numbers, booleans, nesting and the order of keys stay as they are."""

    pattern: re.Pattern[str] | None
    shortest: int  # no string shorter than this can hold a copy

    @classmethod
    def of(cls, secrets: Iterable[str | None]) -> Redactor:
        forms = {visible(f) for s in secrets if s for f in secret_forms(s)} - {""}
        if not forms:
            return cls(None, 0)
        # longest first: a whole form wins over the shorter form it contains
        alternatives = sorted(forms, key=lambda f: (-len(f), f))
        return cls(re.compile("|".join(_pattern(f) for f in alternatives)), min(map(len, forms)))

    def text(self, value: str) -> str:
        if self.pattern is None or len(value) < self.shortest:
            return value
        return self.pattern.sub(REDACTED, value)

    def finds(self, value: Any) -> bool:
        """Whether any string of `value` (keys included) holds a copy."""
        if self.pattern is None:
            return False
        if isinstance(value, dict):
            return any(self.finds(k) or self.finds(v) for k, v in value.items())
        if isinstance(value, list | tuple):
            return any(self.finds(v) for v in value)
        if value is None or isinstance(value, bool | int | float):
            return False
        return self.text(str(value)) != str(value)

    def __call__(self, value: Any) -> Any:
        if self.pattern is None or value is None or isinstance(value, bool | int | float):
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {(self.text(k) if isinstance(k, str) else k): self(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self(v) for v in value]
        return self.text(str(value))  # what the event log's `default=str` would write


def redact(event: dict[str, Any], secrets: Iterable[str | None]) -> dict[str, Any]:
    """The event with every copy of every secret replaced (one-off; a run builds one Redactor)."""
    redacted: dict[str, Any] = Redactor.of(secrets)(event)
    return redacted
