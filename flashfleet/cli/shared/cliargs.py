"""Arguments and inputs shared by `flashfleet configure` and `flashfleet down --inventory`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import yaml

from flashfleet.bringup.errors import BringupInputError
from flashfleet.bringup.project import DEFAULT_PROJECT, Project
from flashfleet.stack.yamlfile import YamlFileError, load_yaml_file


def add_run_args(parser: argparse.ArgumentParser, playbook: str) -> None:
    """The run options; the command adds its STACK (``flashfleet.cli.common.add_stack``)."""
    add_inventory_arg(parser)
    parser.add_argument(
        "--playbook", default=playbook, help="playbook under playbooks/ (default: %(default)s)"
    )
    parser.add_argument(
        "--project", type=Path, default=None, metavar="DIR",
        help="take playbooks/ and roles/ from DIR instead of this checkout",
    )  # fmt: skip
    add_runs_dir_arg(parser)


def add_inventory_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--inventory", type=Path, default=None, metavar="FILE",
        help="YAML/JSON inventory of existing hosts, shaped like the stack's `inventory` output "
        "(without it: the stack's outputs, through Pulumi)",
    )  # fmt: skip


def add_runs_dir_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--runs-dir", type=Path, default=None, metavar="DIR",
        help="where run directories go (default: $FLASHFLEET_RUNS_DIR or ./.runner)",
    )  # fmt: skip


def project_of(args: argparse.Namespace) -> Project:
    if args.project is None:
        return DEFAULT_PROJECT
    root = Path(args.project).resolve()
    if not (root / "playbooks").is_dir():
        raise BringupInputError(f"--project {args.project}: has no playbooks/ directory")
    return Project(root)


def load_inventory(path: Path) -> dict[str, Any]:
    try:
        data = load_yaml_file(path)  # JSON is YAML too
    except YamlFileError as err:
        raise BringupInputError(f"--inventory {path}: {err}") from None
    if not isinstance(data, dict) or not isinstance(data.get("all"), dict):
        raise BringupInputError(
            f"--inventory {path}: expected a mapping with an `all` group "
            "(`flashfleet inventory STACK` prints the one a stack's hosts get)"
        )
    return {**data, "all": _hoist_group_hosts(path, data["all"])}


def _hoist_group_hosts(path: Path, root: dict[str, Any]) -> dict[str, Any]:
    """An ordinary Ansible layout (hosts and their vars under `children`, group `vars`) becomes
    flashfleet's: every host's variables under `all.hosts`, groups naming members only. Host
    variables win over group ones, as in Ansible; one host given two different values is refused."""

    def bad(where: str, what: str) -> BringupInputError:
        return BringupInputError(f"--inventory {path}: {where}: {what}")

    own: dict[str, dict[str, Any]] = {}  # variables written on the host
    inherited_by: dict[str, dict[str, Any]] = {}  # variables of its groups
    groups: dict[str, set[str]] = {}

    def walk(where: str, group: Any, inherited: dict[str, Any], chain: list[str]) -> None:
        if group is None:
            return
        if not isinstance(group, dict):
            raise bad(where, "expected a mapping with `hosts`, `children` or `vars`")
        gvars = group.get("vars") or {}
        members = group.get("hosts") or {}
        children = group.get("children") or {}
        for key, value in (("vars", gvars), ("hosts", members), ("children", children)):
            if not isinstance(value, dict):
                raise bad(f"{where}.{key}", "expected a mapping")
        gvars = {**inherited, **gvars}
        for name, hvars in members.items():
            if hvars is not None and not isinstance(hvars, dict):
                raise bad(f"{where}.hosts.{name}", "expected a mapping of host variables")
            for level, values in ((own, hvars or {}), (inherited_by, gvars)):
                known = level.setdefault(str(name), {})
                for key, value in values.items():
                    if key in known and known[key] != value:
                        raise bad(f"{where}.hosts.{name}.{key}", "differs from the value another group gives")
                    known[key] = value
            for g in chain:
                groups[g].add(str(name))
        for child, sub in children.items():
            groups.setdefault(str(child), set())
            walk(f"{where}.children.{child}", sub, gvars, [*chain, str(child)])

    walk("all", root, {}, [])
    hosts = {h: {**inherited_by[h], **own[h]} for h in own}
    for name, hvars in hosts.items():
        if not any(str(k).startswith("flashfleet_") for k in hvars):
            raise bad(
                f"all.hosts.{name}",
                "has no flashfleet_* facts (only how to reach it); write the file with "
                "`flashfleet inventory STACK` and keep its facts",
            )
    out: dict[str, Any] = {"hosts": hosts}
    if groups:
        out["children"] = {g: {"hosts": {h: {} for h in sorted(m)}} for g, m in groups.items()}
    return out


def parse_extravars(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip().isidentifier():
            raise BringupInputError(f"--extra-var wants NAME=VALUE, not {item!r}")
        out[name.strip()] = yaml.safe_load(value) if value else ""
    return out
