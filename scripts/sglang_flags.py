"""Write flashfleet/catalog/sglang_flags.txt: every option string of the pinned `sglang serve`.

Run with the oracle venv's interpreter (scripts/setup.d/10-sglang-oracle.sh builds it):
    .venv-oracle/bin/python scripts/sglang_flags.py [OUT]
The recipe engine checks `--extra-args` flags against this list offline; tests/contracts checks
that the shipped list is what the pinned sglang's parser accepts.
"""

import argparse
import sys
from importlib.metadata import version
from pathlib import Path

from sglang.srt.server_args import ServerArgs

OUT = Path(__file__).resolve().parents[1] / "flashfleet" / "catalog" / "sglang_flags.txt"


def flag_list() -> str:
    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    actions = [a for a in parser._actions if a.dest != "help"]
    flags = sorted({s for a in actions for s in a.option_strings if s.startswith("--")})
    header = f"# `sglang serve` option strings of sglang {version('sglang')} (scripts/sglang_flags.py)\n"
    return header + "".join(f"{f}\n" for f in flags)


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else OUT
    out.write_text(flag_list(), encoding="utf-8")
    print(f"wrote {out}")
