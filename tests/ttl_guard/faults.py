"""Runs the node's guard script (as cut from the user data) with one fault injected, in its own
python3 process: ``python faults.py FAULT SCRIPT [guard arguments...]``.

- ``disk-full``: every write fails with ENOSPC, as on a node whose root volume the weights
  filled: opening a file for writing (builtin ``open`` and ``os.open``), renaming, and making
  a directory. Reads still work. The fake shutdown command runs in a child process, unaffected.
- ``bug``: the clock step raises an error nobody foresaw (a stand-in for a bug in the guard).
"""

from __future__ import annotations

import builtins
import errno
import io
import os
import sys
from importlib.machinery import SourceFileLoader
from types import ModuleType
from typing import Any, NoReturn


def _no_space(*_args: Any, **_kwargs: Any) -> NoReturn:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def disk_full(_guard: ModuleType) -> None:
    real_open, real_os_open = builtins.open, os.open

    def open_(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if set(mode) & set("wax+"):
            _no_space()
        return real_open(file, mode, *args, **kwargs)

    def os_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND):
            _no_space()
        return real_os_open(path, flags, *args, **kwargs)

    builtins.open = io.open = open_
    os.open = os_open
    os.replace = os.rename = os.mkdir = os.makedirs = _no_space


def bug(guard: ModuleType) -> None:
    def broken(*_args: Any, **_kwargs: Any) -> NoReturn:
        raise RuntimeError("injected: a bug in the clock step")

    guard.trusted_now = broken  # type: ignore[attr-defined]


FAULTS = {"disk-full": disk_full, "bug": bug}

if __name__ == "__main__":
    fault, script, *guard_args = sys.argv[1:]
    module = ModuleType("ttl_guard_under_test")
    module.__file__ = script
    SourceFileLoader(module.__name__, script).exec_module(module)
    FAULTS[fault](module)
    sys.exit(module.main(guard_args))
