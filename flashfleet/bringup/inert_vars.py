"""Variables as Ansible must read them: data, never templates.

Every string flashfleet hands to Ansible (the inventory's host variables and the extra variables)
came from somewhere a user or a server controls: a stack file, a lock, a Hub or registry answer,
the environment, a hand-written inventory. Ansible renders any string it trusts that holds
`{{ ... }}`, on the controller, with lookups that run commands and read its environment. So both
files are written here as YAML with Ansible's `!unsafe` tag on every string, keys included: the
playbooks still use the values, but Ansible never evaluates what is inside them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import yaml

UNSAFE_TAG = "!unsafe"


class _UnsafeDumper(yaml.SafeDumper):
    """Dumps every string as `!unsafe '...'`; numbers, booleans and null as they are."""


_STR = "tag:yaml.org,2002:str"


def _unsafe_str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    # Ansible reads `!unsafe X` by resolving X's type again as if it were unquoted: `!unsafe '8'`
    # would come back as the number 8, `!unsafe '='` fail the whole file. A string that would not
    # read back as a string is a number, a boolean, a null, a date or `=`, never a template: it
    # goes quoted, untagged.
    if dumper.resolve(yaml.ScalarNode, value, (True, False)) != _STR:  # type: ignore[no-untyped-call]
        return dumper.represent_scalar(_STR, value, style="'" if value.isprintable() else '"')
    # the emitter picks a quoting style that reads back as the same characters
    return dumper.represent_scalar(UNSAFE_TAG, value)


_UnsafeDumper.add_representer(str, _unsafe_str)


def plain(data: Mapping[str, Any]) -> Any:
    """`data` as JSON types (tuples as lists, Pulumi's or pydantic's own mappings as dicts)."""
    return json.loads(json.dumps(data, default=str))


def inert_yaml(data: Mapping[str, Any]) -> str:
    """`data` as YAML whose every string Ansible reads as unsafe (never templated)."""
    return yaml.dump(plain(data), Dumper=_UnsafeDumper, sort_keys=False, allow_unicode=False, width=2**31)
