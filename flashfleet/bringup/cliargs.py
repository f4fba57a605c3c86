"""Arguments and inputs shared by `flashfleet configure` and `flashfleet down --inventory`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import yaml

from flashfleet.bringup.errors import BringupInputError
from flashfleet.bringup.project import DEFAULT_PROJECT, Project


def add_run_args(parser: argparse.ArgumentParser, playbook: str) -> None:
    parser.add_argument("stack", help="stack name (the inventory's flashfleet_stack must match)")
    parser.add_argument(
        "--inventory", type=Path, default=None, metavar="FILE",
        help="YAML/JSON inventory of existing hosts, shaped like the stack's `inventory` output "
        "(without it: the stack's outputs, through Pulumi)",
    )  # fmt: skip
    parser.add_argument(
        "--playbook", default=playbook, help="playbook under playbooks/ (default: %(default)s)"
    )
    parser.add_argument(
        "--project", type=Path, default=None, metavar="DIR",
        help="take playbooks/ and roles/ from DIR instead of this checkout",
    )  # fmt: skip
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
        data = yaml.safe_load(path.read_text(encoding="utf-8"))  # JSON is YAML too
    except OSError as err:
        raise BringupInputError(f"--inventory {path}: {err.strerror}") from None
    except yaml.YAMLError as err:
        raise BringupInputError(f"--inventory {path}: not YAML or JSON ({err})".replace("\n", " ")) from None
    if not isinstance(data, dict):
        raise BringupInputError(f"--inventory {path}: expected a mapping with an `all` group")
    return data


def parse_extravars(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip().isidentifier():
            raise BringupInputError(f"--extra-var wants NAME=VALUE, not {item!r}")
        out[name.strip()] = yaml.safe_load(value) if value else ""
    return out
