"""Run in the oracle venv: parse bench_serving argv lists with sglang 0.5.23's own parser.

stdin: JSON list of argv lists (without `python -m MODULE`); stdout: JSON list of the parsed
namespaces (as dicts), or {"error": ...} for an argv the parser rejects. Nothing is sent anywhere:
run_benchmark is replaced by a function that returns the parsed arguments.
"""

import contextlib
import io
import json
import sys

from sglang.benchmark import serving


class Parsed(Exception):
    pass


def capture(args):
    raise Parsed(vars(args))


serving.run_benchmark = capture
out = []
for argv in json.load(sys.stdin):
    sys.argv = ["serving", *argv]
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            serving.cli_main()
    except Parsed as parsed:
        out.append(
            {
                k: v
                for k, v in parsed.args[0].items()
                if isinstance(v, (str, int, float, bool, list, type(None)))
            }
        )
    except SystemExit:
        out.append({"error": err.getvalue().strip().splitlines()[-1]})
json.dump(out, sys.stdout)
