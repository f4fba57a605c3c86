"""Whether the bring-up role of the play being run must run on this node, and the digest its
record will hold (roles/converge/tasks/check.yml).

The digest covers the role's salt from flashfleet (``flashfleet_converge.salt``), every
``<role>_*`` variable as the play gives it to the role (its arguments, whatever set them) and the
role's own watch list (``_<role>_watch``). A template among them counts by its text and by the
value of every variable it names, followed to the values that are not templates (inventory facts,
extra variables), so an input changes the digest exactly when what it renders from changes. The
texts are parsed once per run, never rendered: every play of a re-run evaluates this on every node,
and rendering each input there compiled its template again each time (Ansible keeps no compiled
template), which cost more than the rest of a no-change re-run. A template that reads something
no variable holds (a lookup, another host's variables, the time) is rendered instead.

Returns one mapping: ``role``, ``reason`` (why the role runs here; "" where it does not) and
``digest``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleError
from ansible.plugins.lookup import LookupBase
from ansible.template import is_trusted_as_template

DOCUMENTATION = """
name: converge_check
short_description: whether the bring-up role of this play runs on this node, and its digest
description:
  - The role is the play's one role besides converge. Its digest is the sha256 of its salt, every
    variable named C(<role>_*) as the play gives it and its watch list C(_<role>_watch), each
    template by its text and the values of the variables it names.
  - The reason is empty where the role's record on the node (C(converge_node)) holds this digest
    and reports no drift, no full converge was asked for and no role ran before it in this run.
"""

RETURN = """
_raw:
  description: One mapping with keys role, reason and digest.
  type: list
  elements: dict
"""

# names a template can read that no variable holds, or that change on their own: rendered instead
_RENDER = frozenset({"lookup", "query", "q", "now", "hostvars", "vars", "undef"})
# template text -> the variables it names (parsed once per run, in this process)
_NAMES: dict[str, frozenset[str] | None] = {}


def _names(text: str) -> frozenset[str] | None:
    """The variables a template names; None where it cannot be parsed here."""
    if text not in _NAMES:
        from jinja2 import Environment, TemplateSyntaxError, meta

        try:
            ast = Environment(extensions=["jinja2.ext.do", "jinja2.ext.loopcontrols"]).parse(text)
            _NAMES[text] = frozenset(meta.find_undeclared_variables(ast))
        except TemplateSyntaxError:  # Ansible's own syntax: rendered instead
            _NAMES[text] = None
    return _NAMES[text]


class LookupModule(LookupBase):
    def run(self, terms: list[Any], variables: Mapping[str, Any] | None = None, **kwargs: Any) -> list[Any]:
        if variables is None or terms:
            raise AnsibleError("converge_check takes no terms, in a play")
        role = next(r for r in variables["ansible_play_role_names"] if r != "converge")
        digest = self._digest(role, variables)
        return [{"role": role, "reason": self._reason(role, digest, variables), "digest": digest}]

    def _plain(self, name: str, variables: Mapping[str, Any]) -> Any:
        """A variable the converge role itself keeps (facts, extra variables): its value."""
        return self._templar.template(variables.get(name))

    def _reason(self, role: str, digest: str, variables: Mapping[str, Any]) -> str:
        ran = self._plain("converge_ran", variables) or {}
        if variables.get("converge_part") == "rest":
            return str(ran[role]["reason"]) if role in ran else ""
        if (self._plain("flashfleet_converge", variables) or {}).get("reconverge"):
            return "a full converge was asked for"
        if self._plain("converge_cascade", variables):
            return "a role before it ran here"
        record = (self._plain("converge_node", variables) or {}).get(role)
        if record is None:
            return "never converged here"
        if record["digest"] != digest:
            return "its inputs changed"
        return f"drift: {record['drift']}" if record.get("drift") else ""

    def _digest(self, role: str, variables: Mapping[str, Any]) -> str:
        names = sorted(n for n in variables if n.startswith(f"{role}_"))
        inputs = {n: self._input(variables[n], variables, set()) for n in names}
        watch = self._input(variables.get(f"_{role}_watch", {}), variables, set())
        salt = (self._plain("flashfleet_converge", variables) or {}).get("salt", {}).get(role, "")
        text = json.dumps([salt, inputs, watch], sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()

    def _input(self, value: Any, variables: Mapping[str, Any], seen: set[str]) -> Any:
        """What an input renders from: its own value, or a template's text and the inputs of the
        variables it names."""
        if isinstance(value, Mapping):
            return {str(k): self._input(v, variables, seen) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self._input(v, variables, seen) for v in value]
        template = isinstance(value, str) and is_trusted_as_template(value)
        if not (template and self._templar.is_possibly_template(value)):
            return value
        names = _names(value)
        if names is None or names & _RENDER or names & seen:
            return self._templar.template(value)
        named = {n: self._input(variables[n], variables, seen | {n}) for n in sorted(names) if n in variables}
        return [str(value), named]
