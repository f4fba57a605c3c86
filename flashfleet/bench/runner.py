"""Where bench_serving runs: the runner seam.

The driver hands a runner one ``Invocation`` (an argv list, never a shell string, whose
``--output-file`` is the relative name ``output_name``) and gets back a ``Completed``: the exit
status, the console log and the text of the JSONL file. ``LocalRunner`` runs it here in a
scratch directory; the bring-up provides one that runs it inside the serving image on a node
(e.g. ``docker run --rm --network host IMAGE`` + argv, then reads the file back).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from flashfleet.bringup.secret_env import API_KEY_ENV

BENCH_KEY_ENV = "OPENAI_API_KEY"  # what sglang.benchmark.serving sends as the Bearer token


@dataclass(frozen=True)
class Invocation:
    argv: tuple[str, ...]
    output_name: str  # relative to the runner's working directory
    timeout_s: float | None = None
    env: Mapping[str, str] = field(default_factory=dict)  # added to the runner's environment


@dataclass(frozen=True)
class Completed:
    returncode: int
    log: str  # stdout and stderr, interleaved
    jsonl: str  # the output file's text; "" when the benchmark wrote none
    timed_out: bool = False
    runner_error: str | None = None  # the runner could not run the command at all


class Runner(Protocol):
    def __call__(self, invocation: Invocation) -> Completed: ...


class LocalRunner:
    """Runs bench_serving as a child process of flashfleet, in a fresh scratch directory."""

    def __init__(self, base_env: Mapping[str, str] | None = None) -> None:
        self._base_env = dict(os.environ if base_env is None else base_env)

    def __call__(self, invocation: Invocation) -> Completed:
        env = {**self._base_env, **invocation.env}
        # bench_serving sends `Authorization: Bearer $OPENAI_API_KEY`: the serving key, if any.
        if env.get(API_KEY_ENV) and not env.get(BENCH_KEY_ENV):
            env[BENCH_KEY_ENV] = env[API_KEY_ENV]
        argv = list(invocation.argv)
        if os.sep in argv[0] and not os.path.isabs(argv[0]):
            argv[0] = os.path.abspath(argv[0])  # the child runs in the scratch directory
        with tempfile.TemporaryDirectory(prefix="flashfleet-bench-") as scratch:
            try:
                proc = subprocess.run(
                    argv,
                    cwd=scratch,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    timeout=invocation.timeout_s,
                    check=False,
                )
            except subprocess.TimeoutExpired as err:
                return Completed(-9, _text(err.stdout), _read(Path(scratch), invocation.output_name), True)
            except OSError as err:  # e.g. the interpreter does not exist
                return Completed(127, "", "", runner_error=f"cannot run {invocation.argv[0]}: {err}")
            return Completed(
                proc.returncode, _text(proc.stdout), _read(Path(scratch), invocation.output_name)
            )


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


def _read(scratch: Path, name: str) -> str:
    path = scratch / name
    return path.read_text(errors="replace") if path.is_file() else ""


def command(python: str, module: str, args: Sequence[str]) -> tuple[str, ...]:
    return (python, "-m", module, *args)
