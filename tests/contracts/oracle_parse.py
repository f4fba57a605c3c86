"""Runs inside the oracle venv: parse argv lists with sglang's own parser, and a router's with
the parser of the program its argv names: SMG's for `smg launch ...` (what `smg launch` hands its
words to), sglang-router's for `python -m sglang_router.launch_router ...`. Kind "smg" reads a
sglang-router argv's words with SMG's parser (the words both take).

stdin: {"id": {"kind": "server"|"router"|"smg", "argv": [...], "expect": {...}?}}; stdout: {"id": null |
"error text"}. ``expect`` (routers): what the router's parser must read, e.g. {"worker_urls": [...],
"prefill_urls": [[url, port], ...], "decode_urls": [...], "policy": "...", "port": 30000}.
"""

import argparse
import contextlib
import io
import json
import sys

from sglang.srt.server_args import ServerArgs
from sglang_router.launch_router import parse_router_args
from smg.launch_router import parse_router_args as parse_smg_args


class _Raising(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise ValueError(message)


def _server_parser() -> argparse.ArgumentParser:
    parser = _Raising(prog="sglang serve", exit_on_error=False)
    ServerArgs.add_cli_args(parser)
    return parser


def main() -> None:
    cases = json.load(sys.stdin)
    server = _server_parser()
    out: dict[str, str | None] = {}
    for key, case in cases.items():
        argv = case["argv"]
        try:
            if case["kind"] == "server":
                assert argv[:2] == ["sglang", "serve"], argv[:2]
                server.parse_args(argv[2:])
            else:
                if argv[:2] == ["smg", "launch"]:
                    parse, words = parse_smg_args, argv[2:]
                else:
                    assert argv[:3] == ["python", "-m", "sglang_router.launch_router"], argv[:3]
                    words = argv[3:]
                    parse = parse_smg_args if case["kind"] == "smg" else parse_router_args
                with contextlib.redirect_stderr(io.StringIO()) as err:
                    try:
                        args = parse(words)
                    except SystemExit as exc:
                        raise ValueError(err.getvalue().strip() or f"exit {exc.code}") from None
                for name, want in case.get("expect", {}).items():
                    got = getattr(args, name)
                    got = (
                        [list(u) if isinstance(u, tuple) else u for u in got]
                        if isinstance(got, list)
                        else got
                    )
                    if got != want:
                        raise ValueError(f"the router reads {name} = {got!r}, expected {want!r}")
            out[key] = None
        except (ValueError, AssertionError, argparse.ArgumentError) as exc:
            out[key] = str(exc) or type(exc).__name__
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
