"""The README, walked: every command block runs, in order, and prints what the README shows.

Convention (the README's set-up section states it too):
- a fenced block whose info string is `console` is a walk: each `$ ` line is a command (a line
  ending in `\\` continues on the next), the lines under it are output that must appear, in
  order, as whole lines (`...` alone skips lines, `...` inside a line stands for any text), and a
  trailing `# exit N` comment expects that exit status (else 0; 2 also means one line on stderr);
- `console setup` runs only the `flashfleet` parts of its commands: CI (scripts/test.sh) has
  already done the installing and is what runs this test;
- `console cloud`, `console hosts` and `console pulumi` need an AWS account, reachable GPU hosts
  or the Pulumi CLI plus a state folder: they are not run, but each of their `flashfleet`
  commands must be accepted by the CLI's own argument parser (`[...]` marks optional arguments);
- no other block may hold shell commands (`sh`, `bash`, `shell`): a command the walk does not
  know about could rot unseen.

Commands run with `bash` in a scratch folder whose entries link to the repository's, so relative
paths in the README resolve and anything a command writes stays out of the checkout.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.M | re.S)
EXIT = re.compile(r"#\s*exit\s+(\d+)\s*$")
SKIPPED = {
    "cloud": "needs an AWS account and credentials",
    "hosts": "needs reachable GPU hosts (tests/bringup runs configure/down on systemd-nspawn hosts)",
    "pulumi": "needs the Pulumi CLI and writes an encryption salt and a secret into stacks/ "
    "(tests/e2e drives the engine)",
}
KINDS = {"", "setup", *SKIPPED}


@dataclass(frozen=True)
class Command:
    line: int
    text: str
    expected: tuple[str, ...]

    @property
    def status(self) -> int:
        match = EXIT.search(self.text)
        return int(match.group(1)) if match else 0


@dataclass(frozen=True)
class Block:
    line: int
    kind: str
    commands: tuple[Command, ...]


def _commands(body: str, first_line: int) -> tuple[Command, ...]:
    out: list[Command] = []
    text: str | None = None
    start, expected = 0, list[str]()
    lines = body.splitlines()
    i = 0
    while i < len(lines):
        ln = lines[i]
        if ln.startswith("$ "):
            if text is not None:
                out.append(Command(start, text, tuple(expected)))
            start, text, expected = first_line + i, ln[2:], []
            while text.endswith("\\") and i + 1 < len(lines):
                i += 1
                text = text + "\n" + lines[i]
        elif text is not None:
            expected.append(ln)
        i += 1
    if text is not None:
        out.append(Command(start, text, tuple(expected)))
    return tuple(out)


def readme_blocks() -> list[Block]:
    text = README.read_text(encoding="utf-8")
    blocks = []
    for m in FENCE.finditer(text):
        info = m.group(1).split()
        if not info or info[0] != "console":
            continue
        line = text.count("\n", 0, m.start()) + 2  # the block's first line
        blocks.append(Block(line - 1, " ".join(info[1:]), _commands(m.group(2), line)))
    return blocks


def _line_matches(pattern: str, line: str) -> bool:
    parts = [re.escape(p) for p in pattern.split("...")]
    return re.fullmatch(".*".join(parts), line.rstrip()) is not None


def check_output(expected: tuple[str, ...], actual: list[str]) -> str | None:
    """None when `actual` shows `expected` (README order, `...` skips); else what is missing."""
    pos, skipping = 0, False
    for pattern in expected:
        if pattern.strip() == "...":
            skipping = True
            continue
        if skipping:
            while pos < len(actual) and not _line_matches(pattern, actual[pos]):
                pos += 1
        if pos >= len(actual) or not _line_matches(pattern, actual[pos]):
            got = actual[pos] if pos < len(actual) else "(end of output)"
            return f"expected {pattern!r}, got {got!r}"
        pos, skipping = pos + 1, False
    return None


BLOCKS = readme_blocks()


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("readme-walk")
    for entry in REPO.iterdir():
        if entry.name == ".git" or entry.name.startswith(".venv") or entry.name == ".runner":
            continue
        (root / entry.name).symlink_to(entry)
    return root


def _env(scratch: Path) -> dict[str, str]:
    env = dict(os.environ)
    # `flashfleet` on PATH, as the README's set-up leaves it (the activated project venv)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["FLASHFLEET_RUNS_DIR"] = str(scratch / ".runner")
    env.pop("FLASHFLEET_HF_TOKEN", None)
    return env


def _runnable(block: Block, cmd: Command) -> str | None:
    if block.kind != "setup":
        return cmd.text
    parts = [p.strip() for p in cmd.text.split("&&")]
    ours = [p for p in parts if p.startswith("flashfleet ")]
    return " && ".join(ours) or None


def test_readme_blocks_follow_the_convention() -> None:
    text = README.read_text(encoding="utf-8")
    for m in FENCE.finditer(text):
        info = m.group(1).split()
        line = text.count("\n", 0, m.start()) + 1
        assert not info or info[0] not in {"sh", "bash", "shell", "zsh"}, (
            f"README line {line}: a `{info[0]}` block; mark commands `console` so the walk runs them"
        )
        if info and info[0] == "console":
            kind = " ".join(info[1:])
            assert kind in KINDS, f"README line {line}: unknown walk kind {kind!r} (known: {sorted(KINDS)})"
    assert any(b.kind == "setup" for b in BLOCKS), "the set-up block is gone"
    setup = next(b for b in BLOCKS if b.kind == "setup")
    assert [c.text.split()[0] for c in setup.commands][-1] == "scripts/test.sh", (
        "the second set-up command runs the tests"
    )
    assert len(setup.commands) == 2, "the set-up is two commands"
    assert "scripts/test.sh" in (REPO / ".ci" / "run").read_text(), "CI runs the README's test command"


RUN = [b for b in BLOCKS if b.kind not in SKIPPED]
NOT_RUN = [c for b in BLOCKS if b.kind in SKIPPED for c in b.commands if c.text.startswith("flashfleet ")]


@pytest.mark.parametrize("cmd", NOT_RUN, ids=[f"line{c.line}" for c in NOT_RUN])
def test_readme_command_that_cannot_run_here_parses(cmd: Command) -> None:
    # An AWS account or GPU hosts are needed to run it (SKIPPED says which); its arguments must
    # still be ones the CLI accepts, or the README documents a command that does not exist.
    from flashfleet.cli import COMMANDS, _parser
    from flashfleet.cli.common import UsageError

    words = shlex.split(cmd.text.split(">")[0], comments=True)[1:]
    assert words[0] in COMMANDS, cmd.text
    try:
        args = _parser(words[0]).parse_args(words)
    except (SystemExit, UsageError) as err:
        raise AssertionError(f"README line {cmd.line}: the CLI refuses {cmd.text!r}") from err
    assert getattr(args, "func", None), cmd.text


def test_no_command_line_holds_a_glob_bash_would_expand() -> None:
    # `[--wait]` is a bracket glob: pasted into bash it matches a file named `-` or `w`...
    for cmd in (c for b in BLOCKS for c in b.commands):
        words = shlex.split(cmd.text, comments=True)
        assert not [w for w in words if any(ch in w for ch in "[]*?")], f"README line {cmd.line}: {cmd.text}"


def test_the_blocks_not_run_still_have_their_commands_checked() -> None:
    assert NOT_RUN, "no flashfleet command in the cloud/hosts blocks: the parse check above checks nothing"


def _checkout_status() -> set[str] | None:
    """The checkout's untracked and changed paths (git's own view); None outside a git checkout."""
    proc = subprocess.run(
        ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=all"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return set(proc.stdout.splitlines()) if proc.returncode == 0 else None


def _not_ignored(scratch: Path) -> list[str]:
    """What the walk wrote at the scratch folder's top (where a user's own checkout root is) that
    git would show as untracked in a real checkout."""
    written = [
        e.name + "/" * e.is_dir() for e in scratch.iterdir() if not e.is_symlink() and e.name != ".runner"
    ]
    shown = []
    for name in written:
        ignored = (
            subprocess.run(
                ["git", "-C", str(REPO), "check-ignore", "-q", "--no-index", name], check=False
            ).returncode
            == 0
        )
        if not ignored:
            shown.append(name)
    return shown


@pytest.mark.parametrize("block", RUN, ids=[f"line{b.line}-{b.kind or 'run'}" for b in RUN])
def test_readme_block(block: Block, scratch: Path) -> None:
    assert block.commands, f"README line {block.line}: a console block without a `$ ` command"
    env = _env(scratch)
    before = _checkout_status()
    for cmd in block.commands:
        script = _runnable(block, cmd)
        if script is None:
            continue  # installing, or the test suite itself: what CI is running now
        proc = subprocess.run(
            ["bash", "-c", script], cwd=scratch, env=env, capture_output=True, text=True,
            stdin=subprocess.DEVNULL, timeout=300, check=False,
        )  # fmt: skip
        where = f"README line {cmd.line}: `{cmd.text.splitlines()[0]}`"
        assert "Traceback" not in proc.stderr, f"{where}: a traceback\n{proc.stderr[-2000:]}"
        assert proc.returncode == cmd.status, (
            f"{where} exited {proc.returncode}, the README says {cmd.status}\n{proc.stderr[-1000:]}"
        )
        if cmd.status == 2:
            assert len(proc.stderr.strip().splitlines()) == 1, f"{where}: not one line\n{proc.stderr}"
        missing = check_output(cmd.expected, (proc.stdout + proc.stderr).splitlines())
        assert missing is None, f"{where}: {missing}"
    # A user who follows the README keeps a clean checkout: nothing written through a link into
    # the repository, and what the walk writes at its top is what git ignores (my-stacks/).
    if before is not None:
        after = _checkout_status()
        assert after is not None
        assert after <= before, (
            f"README line {block.line}: the checkout now shows {sorted((after or set()) - before)}"
        )
        assert not _not_ignored(scratch), (
            f"README line {block.line}: untracked in a checkout: {_not_ignored(scratch)}"
        )


def test_output_check_refuses_what_the_readme_does_not_show() -> None:
    out = ["stack x: one", "  a", "  b", "end"]
    assert check_output(("stack x: ...", "...", "end"), out) is None
    assert check_output(("stack x: one", "  b"), out) is not None  # `  a` sits between: needs `...`
    assert check_output(("stack y: ...",), out) is not None
    assert check_output(("...", "missing"), out) is not None
