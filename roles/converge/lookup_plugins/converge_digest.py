"""The converge digest of the bring-up role of the play being run (roles/converge/vars/main.yml).

It covers the role's salt from flashfleet (``flashfleet_converge.salt``), every ``<role>_*``
variable as the play gives it to the role (its arguments, whatever set them), and the role's own
watch list (``_<role>_watch``). Here rather than in Jinja because every play of a re-run pays for
it: each value is templated once, in one pass, where the expression in Jinja re-templated the
role's name and its inputs for every reference.
"""

from __future__ import annotations

import hashlib
import json

from ansible.errors import AnsibleError
from ansible.plugins.lookup import LookupBase

DOCUMENTATION = """
name: converge_digest
short_description: the converge digest of a bring-up role in its play
description:
  - The sha256 of the role's salt, every variable named C(<role>_*) as the play gives it, and the
    role's watch list C(_<role>_watch), serialized with sorted keys.
options:
  _terms:
    description: The role's name.
    required: true
"""

RETURN = """
_raw:
  description: One sha256, hex.
  type: list
  elements: str
"""


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        if variables is None or len(terms) != 1:
            raise AnsibleError("converge_digest takes one role name, in a play")
        role = str(terms[0])
        names = sorted(n for n in variables if n.startswith(f"{role}_"))
        inputs, watch = self._templar.template(
            [[variables[n] for n in names], variables.get(f"_{role}_watch", {})]
        )
        salt = (variables.get("flashfleet_converge") or {}).get("salt", {}).get(role, "")
        text = json.dumps([salt, dict(zip(names, inputs, strict=True)), watch], sort_keys=True, default=str)
        return [hashlib.sha256(text.encode()).hexdigest()]
