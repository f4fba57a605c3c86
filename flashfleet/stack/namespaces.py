"""Kubernetes stacks of one project that would delete each other's objects.

A stack that creates its namespace deletes it on `down`, and with it every object in it: another
stack's too. Two stack files beside each other that deploy to the same namespace of the same
kubeconfig context, where either creates it, are refused; stacks that share a namespace must
both leave it to its owner (`createNamespace: false`). Only the files are read (no cluster).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from flashfleet.stack.errors import STACK_KEY
from flashfleet.stack.files import StackFile, list_stacks, stack_path
from flashfleet.stack.yamlfile import YamlFileError, load_yaml_file


def _target(spec_data: Any) -> tuple[str | None, str, bool] | None:
    """(context, namespace, creates it) of a Kubernetes stack's raw spec; None for any other."""
    source = ((spec_data or {}).get("nodes") or {}).get("source") if isinstance(spec_data, dict) else None
    if not isinstance(source, dict) or source.get("kind") != "kubernetes":
        return None
    namespace = source.get("namespace")
    if not isinstance(namespace, str):
        return None
    return source.get("context"), namespace, source.get("createNamespace", True) is not False


@lru_cache(maxsize=256)
def _file_target(path: Path, mtime_ns: int, size: int) -> tuple[str | None, str, bool] | None:
    """A sibling's target, read once a process for each version of the file: `ls` checks every
    Kubernetes stack against every other file."""
    doc = load_yaml_file(path)
    return _target(((doc or {}).get("config") or {}).get(STACK_KEY) if isinstance(doc, dict) else None)


def namespace_clash(sf: StackFile) -> str | None:
    """The problem, or None: another stack beside ``sf`` in its namespace, where one creates it."""
    mine = _target(sf.spec_data)
    if mine is None:
        return None
    context, namespace, creates = mine
    for other in list_stacks(sf.path.parent):
        if other == sf.name:
            continue
        path = stack_path(other, sf.path.parent)
        try:
            stat = path.stat()
            theirs = _file_target(path, stat.st_mtime_ns, stat.st_size)
        except (OSError, YamlFileError):
            continue  # refused on its own
        if theirs is None or theirs[:2] != (context, namespace) or not (creates or theirs[2]):
            continue
        where = f"namespace {namespace}" + (f" of context {context}" if context else "")
        return (
            f"stack {other} also deploys to {where}, and {'this stack' if creates else other} creates it: "
            "its `down` would delete the namespace with the other stack's objects in it; give each stack a "
            "namespace of its own, or set createNamespace: false on both"
        )
    return None
