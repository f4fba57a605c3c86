#!/usr/bin/env python3
"""Which of flashfleet's modules and functions run for one command, in every Python process it
starts (the CLI, the Pulumi program, the bring-up provider, ansible-runner's callers).

    scripts/call_trace.py OUT -- flashfleet up mi355x-lowlat
    scripts/call_trace.py OUT -- pulumi preview --stack mi355x-lowlat
    scripts/call_trace.py --summary OUT [--count check_secret --count resolve_spec ...]

Each process started with the environment this sets loads a `sitecustomize` that records every
call of a function defined under the project (sys.setprofile, and threading.setprofile for the
threads it starts) and writes one JSON file per process to OUT when it exits or is told to stop.
The summary prints modules and functions that ran, per process and in all, and how often the
named functions were called. The profile hook slows what it traces: these are counts, not times.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENV_OUT = "FLASHFLEET_CALL_TRACE"
ENV_ROOT = "FLASHFLEET_CALL_TRACE_ROOT"
COUNTED = ("check_secret", "check_role_vars", "resolve_spec", "load_stack", "render", "render_argv")

SITECUSTOMIZE = r"""
import atexit, json, os, signal, sys, threading
_out, _root = os.environ.get("FLASHFLEET_CALL_TRACE"), os.environ.get("FLASHFLEET_CALL_TRACE_ROOT")
if _out and _root:
    _roots = _root.split(os.pathsep)  # the project, and where its package is installed from
    _calls = {}
    _mine = {}

    def _hook(frame, event, arg):
        if event != "call":
            return
        code = frame.f_code
        rel = _mine.get(code.co_filename, 0)
        if rel == 0:
            f, rel = code.co_filename, None
            for root in _roots:
                if f.startswith(root + "/") and "/.venv" not in f and "/tests/" not in f:
                    rel = f[len(root) + 1:]
            _mine[code.co_filename] = rel
        if rel is not None:
            key = (rel, code.co_qualname)
            _calls[key] = _calls.get(key, 0) + 1

    def _dump(*_):
        sys.setprofile(None)
        path = os.path.join(_out, f"{os.getpid()}.json")
        rows = [[f, q, n] for (f, q), n in _calls.items()]
        with open(path, "w") as fh:
            json.dump({"argv": sys.argv, "calls": rows}, fh)

    def _on_term(signum, frame):
        _dump()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    atexit.register(_dump)
    try:
        signal.signal(signal.SIGTERM, _on_term)
    except ValueError:
        pass
    sys.setprofile(_hook)
    threading.setprofile(_hook)
"""


def run(out: Path, command: list[str]) -> int:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as site:
        Path(site, "sitecustomize.py").write_text(SITECUSTOMIZE)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (site, env.get("PYTHONPATH")) if p)
        roots = {str(Path.cwd().resolve()), str(ROOT), os.environ.get("FLASHFLEET_PULUMI_PROJECT", "")}
        env[ENV_OUT], env[ENV_ROOT] = str(out.resolve()), os.pathsep.join(sorted(r for r in roots if r))
        return subprocess.run(command, env=env, check=False).returncode


def _shape(calls: Counter[tuple[str, str]]) -> dict[str, int]:
    """Modules imported, modules with a function that ran, and functions that ran (a module's
    own top level counts as loading it, not as a function)."""
    run = {key for key in calls if key[1] != "<module>"}
    return {
        "modules_loaded": len({f for f, _ in calls}),
        "modules_run": len({f for f, _ in run}),
        "functions": len(run),
    }


def summary(out: Path, counted: list[str]) -> dict[str, object]:
    processes = []
    every: Counter[tuple[str, str]] = Counter()
    for path in sorted(out.glob("*.json")):
        data = json.loads(path.read_text())
        calls = Counter({(f, q): n for f, q, n in data["calls"]})
        if not calls:
            continue
        every.update(calls)
        argv = " ".join(Path(a).name if i == 0 else a for i, a in enumerate(data["argv"][:3]))
        processes.append({"argv": argv, **_shape(calls)})

    def count(name: str) -> int:
        return sum(n for (_, q), n in every.items() if q == name or q.endswith("." + name))

    return {"processes": processes, "all": _shape(every), "calls": {name: count(name) for name in counted}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--summary", action="store_true", help="summarise OUT instead of running")
    parser.add_argument("--count", action="append", help="a function name to count (repeatable)")
    parser.add_argument("out", type=Path)
    parser.add_argument("command", nargs="*")
    args = parser.parse_args()
    if not args.summary:
        if not args.command:
            parser.error("command: required unless --summary")
        return run(args.out, args.command)
    print(json.dumps(summary(args.out, args.count or list(COUNTED)), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
