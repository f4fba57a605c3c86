"""The record of a bought Capacity Block, kept apart from the stack file.

A block cannot be cancelled, so its record must outlive whatever happens to the stack file (a
full disk, a hand edit, a `git checkout`). It goes to its own file under the runs folder,
`<runs>/<stack>/capacity/<time>-<reservation>.yaml`, written whole or not at all; when that
fails the CLI prints the same text instead.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

from ruamel.yaml import YAML

from flashfleet.capacity.offers import iso
from flashfleet.capacity.purchase import Purchase, capacity_section
from flashfleet.user_files import UserFileError, write_text_atomically

FOLDER = "capacity"
# EC2's id shape; anything else never becomes part of a file name.
_RESERVATION_ID = re.compile(r"cr-[0-9a-z]{1,40}")


def receipt_path(runs_root: Path, stack: str, purchase: Purchase) -> Path:
    stamp = purchase.bought_at.strftime("%Y%m%dT%H%M%SZ")
    rid = purchase.reservation_id
    name = f"{stamp}-{rid}.yaml" if _RESERVATION_ID.fullmatch(rid) else f"{stamp}-block.yaml"
    return runs_root / stack / FOLDER / name


def receipt_text(purchase: Purchase, *, stack: str, region: str, stack_file: Path) -> str:
    """The purchase as YAML: who, where and when, then the stack file's `capacity` section."""
    record = {
        "stack": stack,
        "stackFile": str(stack_file),
        "region": region,
        "instanceType": purchase.instance_type,
        "state": purchase.state,
        "boughtAt": iso(purchase.bought_at),
        **capacity_section(purchase),
    }
    out = io.StringIO()
    out.write("# A Capacity Block bought with `flashfleet capacity buy`: it cannot be cancelled.\n")
    YAML(typ="safe", pure=True).dump(record, out)
    return out.getvalue()


def write_receipt(path: Path, text: str) -> None:
    """Write the record whole or not at all (UserFileError, one line naming the path)."""
    try:  # owner-only like the run directories beside it (and without loading the runner)
        for folder in reversed([p for p in (path.parent, *path.parent.parents) if not p.is_dir()]):
            folder.mkdir(mode=0o700, exist_ok=True)
    except OSError as err:
        raise UserFileError(f"{path}: not written ({err.strerror or err})") from None
    write_text_atomically(path, text)
