"""A new user's first hour, timed: from a clone to a stack of their own on two existing hosts,
planned and validated, following only the README's top (set-up and quick start).

Usage: python3 benchmarks/newcomer_path.py [--keep]
Clones this checkout's HEAD into a scratch folder (what `git clone` gives a user), then runs the
README's own commands there in order, each timed, with the machine's own `python3` and whatever
`uv` is on PATH (scripts/install.sh finds or installs one). The one step a person does by hand,
putting their hosts' addresses into the example stack, is a `sed`. Prints each step's wall time
and the total; exit 1 if a step fails. Reading time is not measured: the README's top is printed
as a word count, for an estimate. tests/readme/test_newcomer_path.py keeps STEPS in the README.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HOSTS = ("10.20.0.11", "10.20.0.12")  # "your" two H200 hosts
# (what the README says, as typed; the command run for it when a person's hand is needed)
STEPS: tuple[tuple[str, str | None], ...] = (
    ("scripts/install.sh && . .venv/bin/activate && flashfleet plan gb300-lowlat", None),
    ("flashfleet check", None),
    ("mkdir -p my-stacks && cp examples/stacks/Pulumi.h200-pair.yaml my-stacks/", None),
    (
        "then put your hosts in it",
        f"sed -i -e 's/192\\.0\\.2\\.10/{HOSTS[0]}/' -e 's/192\\.0\\.2\\.11/{HOSTS[1]}/' "
        "my-stacks/Pulumi.h200-pair.yaml",
    ),
    ("flashfleet validate --stacks-dir my-stacks", None),
    ("flashfleet plan my-stacks/Pulumi.h200-pair.yaml", None),
    # or have one written, as the README offers next
    ("flashfleet new mine --hardware h200 --replicas 2 --hosts ADDR1,ADDR2 --stacks-dir my-stacks", None),
    ("flashfleet validate --stacks-dir my-stacks", None),
)
# `check` exits 1 while the Pulumi CLI or its login is missing: an answer, not a failure
ANSWERS = {"flashfleet check": (0, 1)}


def readme_words(until: str) -> int:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    return len(text[: text.index(until)].split())


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keep", action="store_true", help="keep the scratch clone")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="newcomer-"))
    clone = scratch / "flashfleet"
    total = 0.0
    try:
        start = time.perf_counter()
        subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
        took = time.perf_counter() - start
        total += took
        print(f"{took:7.1f} s  git clone")
        # one shell, as a person's terminal: the venv activated in step 1 stays active
        script = ["set -e", "cd " + str(clone)]
        for said, run in STEPS:
            command = (run or said).replace("ADDR1,ADDR2", ",".join(HOSTS))
            ok = " ".join(map(str, ANSWERS.get(command, (0,))))
            err = scratch / "step.err"  # outside the clone: its status must show nothing new
            script += [
                "s=$EPOCHREALTIME",
                f"set +e; ( {command} ) > /dev/null 2> {err}; rc=$?; set -e",
                f'case " {ok} " in *" $rc "*) ;; *) echo "FAILED ($rc): {said}"; cat {err}; exit 1;; esac',
                f'echo "$s $EPOCHREALTIME {said}"',
            ]
            if said.startswith("scripts/install.sh"):
                script.append(". .venv/bin/activate")  # the subshell's activation, kept for the rest
        proc = subprocess.run(["bash", "-c", "\n".join(script)], capture_output=True, text=True, check=False)
        for line in proc.stdout.splitlines():
            if line.startswith("FAILED"):
                print(line)
                continue
            began, ended, said = line.split(" ", 2)
            seconds = float(ended) - float(began)
            total += seconds
            print(f"{seconds:7.1f} s  {said}")
        if proc.returncode != 0:
            print(proc.stdout[-2000:], proc.stderr[-2000:], sep="\n")
            return 1
        untracked = subprocess.run(
            ["git", "-C", str(clone), "status", "--porcelain"], capture_output=True, text=True, check=True
        ).stdout.strip()
        print(f"{total:7.1f} s  in all (commands only); the checkout shows: {untracked or 'nothing new'}")
        # what this path needs: up to the quick start's Pulumi step (the rest is for `up`)
        needed, top = readme_words("### Pulumi: install"), readme_words("## The cloud path")
        print(
            f"reading, at 200 words a minute: {needed} words to here (about {needed / 200:.1f} min), "
            f"{top} for the whole quick start (about {top / 200:.1f} min)"
        )
        return 0 if not re.search(r"\S", untracked) else 1
    finally:
        if args.keep:
            print(f"kept: {clone}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
