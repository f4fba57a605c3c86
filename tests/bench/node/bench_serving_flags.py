"""Writes the option strings of the pinned sglang's `python -m sglang.benchmark.serving` parser
(switches, value flags and their choices) as JSON, for the bench client stand-in
(bench_client.py) to parse its argv as the real one does. Run with the oracle venv's python (and tests/bench/oracle_site on PYTHONPATH, as the bench
tests run it): `PYTHONPATH=tests/bench/oracle_site .venv-oracle/bin/python
tests/bench/node/bench_serving_flags.py tests/bench/node/bench_serving_flags.json`;
tests/bench/test_bench_client_parser.py checks the shipped file against the real parser."""

import argparse
import contextlib
import json
import sys

from sglang.benchmark import serving


class _Caught(Exception):
    pass


def main(dest: str) -> None:
    caught: list[argparse.ArgumentParser] = []

    class Capture(argparse.ArgumentParser):
        def parse_args(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            caught.append(self)
            raise _Caught

    serving.ArgumentParser = Capture  # type: ignore[misc]
    with contextlib.suppress(_Caught):
        serving.cli_main()
    (parser,) = caught
    flags = {}
    for action in parser._actions:
        for option in action.option_strings:
            if option.startswith("--") and option != "--help":
                flags[option] = {
                    "switch": action.nargs == 0,
                    "nargs": None if action.nargs == 0 else action.nargs,
                    "choices": [str(c) for c in action.choices] if action.choices else None,
                }
    with open(dest, "w") as f:
        json.dump(dict(sorted(flags.items())), f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
