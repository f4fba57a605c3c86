"""Careless files and arguments, fed to every command: exit 2, one line on stderr that starts
with `flashfleet COMMAND:` and names the problem, never a traceback, and nothing done.

Each case runs `flashfleet` in-process (an uncaught exception fails the test with its traceback)
and again, for the file cases, as a real process where stdin is not a terminal.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from flashfleet.cli import COMMANDS, main
from flashfleet.cli.common import UsageError

REPO = Path(__file__).resolve().parents[2]
STACKS = REPO / "stacks"


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """Careless inputs a newcomer makes, as files."""
    good = (STACKS / "Pulumi.mi355x-lowlat.yaml").read_text(encoding="utf-8")
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    (stacks / "Pulumi.ok.yaml").write_text(good, encoding="utf-8")
    (stacks / "Pulumi.latin1.yaml").write_bytes(("# caf\xe9 au lait\n" + good).encode("latin-1"))
    (stacks / "Pulumi.utf16.yaml").write_bytes(good.encode("utf-16"))
    (stacks / "Pulumi.binary.yaml").write_bytes(bytes(range(256)))
    assert "strategy: low-latency" in good
    dup = good.replace("strategy: low-latency", "strategy: low-latency\n    strategy: high-throughput", 1)
    (stacks / "Pulumi.dup.yaml").write_text(dup, encoding="utf-8")
    assert "ttl: 8h" in good
    (stacks / "Pulumi.ttl.yaml").write_text(good.replace("ttl: 8h", "ttl: 99999999999h"), encoding="utf-8")
    (stacks / "Pulumi.nohosts.yaml").write_text(good.replace("count: 1", "count: 0"), encoding="utf-8")
    doc = yaml.safe_load(good)
    doc["config"]["flashfleet:stack"]["nodes"]["source"]["hosts"] = []
    (stacks / "Pulumi.emptyhosts.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    doc = yaml.safe_load(good)
    doc["config"]["flashfleet:stack"]["nodes"]["count"] = "two"
    (stacks / "Pulumi.words.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    one_bad = tmp_path / "one-bad"
    one_bad.mkdir()
    for name in ("ok", "latin1"):
        (one_bad / f"Pulumi.{name}.yaml").write_bytes((stacks / f"Pulumi.{name}.yaml").read_bytes())
    (tmp_path / "empty").mkdir()
    for name, summary in (
        ("run-obj", "{}"),
        ("run-list", "[]"),
        ("run-levels", '{"stack": "s", "profile": {"name": "p"}, "levels": [{"concurrency": 1}]}'),
    ):
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(summary)
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "ordinary.yaml").write_text(
        "all:\n  vars: {ansible_user: ubuntu}\n  children:\n    gpu:\n      hosts:\n        n0: {ansible_host: 192.0.2.7}\n"
    )
    (tmp_path / "events").mkdir()
    boot = REPO / "tests" / "sizing" / "logs" / "mla_fp8_tp8_worked_example.log"
    return {
        "stacks": stacks, "one_bad": one_bad, "empty": tmp_path / "empty", "tmp": tmp_path, "boot": boot,
        "latin1": stacks / "Pulumi.latin1.yaml", "utf16": stacks / "Pulumi.utf16.yaml",
        "binary": stacks / "Pulumi.binary.yaml", "file": tmp_path / "a-file",
        "ordinary": tmp_path / "ordinary.yaml",
    }  # fmt: skip


@pytest.fixture
def failing_pulumi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `pulumi` on PATH whose every stack operation fails (a wrong passphrase); it logs what
    it was asked, so a test can tell nothing was attempted."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "pulumi-calls.log"
    (bin_dir / "pulumi").write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {log}\n'
        'if [ "$1" = "version" ]; then echo v3.274.1; exit 0; fi\n'
        'echo "error: failed to decrypt configuration: incorrect passphrase" >&2\n'
        "exit 255\n"
    )
    (bin_dir / "pulumi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return log


@pytest.fixture
def no_pulumi(monkeypatch: pytest.MonkeyPatch) -> None:
    dirs = [
        d for d in os.environ.get("PATH", "").split(os.pathsep) if d and not (Path(d) / "pulumi").exists()
    ]
    monkeypatch.setenv("PATH", os.pathsep.join(dirs))


F = dict[str, Path]
# (command, argv from the files, what the one line must say)
CASES: list[tuple[str, Callable[[F], list[str]], str]] = [
    ("matrix", lambda f: ["matrix", "--format", "yaml"], "invalid choice: 'yaml'"),
    ("matrix", lambda f: ["matrix", "--hardware"], "unrecognized arguments"),
    ("render", lambda f: ["render", "--hardware", "b200", "--strategy", "low-latency"], "b200"),
    ("render", lambda f: ["render", "--hardware", "gb300", "--strategy", "low-latency", "--set", "tp=4", "--set", "tp=2"], "--set tp given twice"),
    ("render", lambda f: ["render", "--hardware", "gb300", "--strategy", "low-latency", "--set", "tp=3"], "ranks per node must divide its GPUs (1, 2, 4) [rule: tp-fits]"),
    ("render", lambda f: ["render", "--hardware", "gb300", "--strategy", "low-latency", "--set", "reasoning_parser=yes"], "reasoning_parser='yes': must be one of off|on"),
    ("render", lambda f: ["render", "--hardware", "gb300", "--strategy", "low-latency", "--image-version", "v0.5.23"], "--image-version applies to --format docker only"),
    ("render", lambda f: ["render", "--hardware", "gb300", "--strategy", "low-latency", "--format", "docker", "--image-version", "latest"], "--image-version: 'latest' is not a release version"),
    ("render", lambda f: ["render", "--hardware", "gb300", "--strategy", "low-latency", "--set", "tp"], "expected NAME=VALUE"),
    ("render", lambda f: ["render", "--hardware", "gb300", "--strategy", "low-latency", "--extra-args", "--x 'unclosed"], "cannot split"),
    ("render", lambda f: ["render", "--hardware", "gb300", "--strategy", "low-latency", "--set", "mm_transport=tcp"], "mm_transport='tcp': must be one of auto|cpu|cuda_ipc|cuda_vmm"),
    ("diff", lambda f: ["diff", "--hardware", "gb300", "--strategy", "low-latency", "--set", "speculative=maybe"], "speculative='maybe'"),
    ("options", lambda f: ["options", "--format", "xml"], "invalid choice: 'xml'"),
    ("size", lambda f: ["size", "--boot-log", str(f["tmp"] / "nope.log"), "--avg-request-len", "9216"], "cannot read boot log"),
    ("size", lambda f: ["size", "--boot-log", str(f["boot"]), "--avg-request-len", "lots"], "--avg-request-len 'lots': must be a number"),
    ("size", lambda f: ["size", "--boot-log", str(f["boot"]), "--avg-request-len", "9216", "--draft-tokens", "-1"], "--draft-tokens '-1': must be >= 0"),
    ("size", lambda f: ["size", "--boot-log", str(f["boot"]), "--avg-request-len", "9216", "--write"], "--write needs --stack NAME"),
    ("size", lambda f: ["size", "--boot-log", str(f["boot"]), "--avg-request-len", "9216", "--strategy", "low-latency", "--stack", "latin1", "--stacks-dir", str(f["stacks"]), "--write"], "not UTF-8 text (byte 0xe9"),
    ("size", lambda f: ["size", "--boot-log", str(f["boot"]), "--avg-request-len", "9216", "--strategy", "low-latency", "--stack", str(f["stacks"] / "Pulumi.utf16.yaml"), "--write"], "not UTF-8 text (byte 0xff"),
    ("size", lambda f: ["size", "--boot-log", str(f["boot"]), "--avg-request-len", "9216", "--strategy", "low-latency", "--stack", "dup", "--stacks-dir", str(f["stacks"]), "--write"], "key 'strategy' appears twice"),
    ("plan", lambda f: ["plan", str(f["latin1"])], "Pulumi.latin1.yaml: not UTF-8 text (byte 0xe9"),
    ("plan", lambda f: ["plan", str(f["utf16"])], "Pulumi.utf16.yaml: not UTF-8 text (byte 0xff at offset 0)"),
    ("plan", lambda f: ["plan", "binary", "--stacks-dir", str(f["stacks"])], "Pulumi.binary.yaml: not UTF-8 text"),
    ("plan", lambda f: ["plan", "dup", "--stacks-dir", str(f["stacks"])], "key 'strategy' appears twice in one mapping (line"),
    ("plan", lambda f: ["plan", "ttl", "--stacks-dir", str(f["stacks"])], "flashfleet:stack.ttl: must be between 15m and 14d"),
    ("plan", lambda f: ["plan", "nohosts", "--stacks-dir", str(f["stacks"])], "flashfleet:stack.nodes.count"),
    ("plan", lambda f: ["plan", "no-such-stack"], "no such stack (known:"),
    ("plan", lambda f: ["plan", "emptyhosts", "--stacks-dir", str(f["stacks"])], "flashfleet:stack.nodes.source.hosts: needs at least 1 item"),
    ("plan", lambda f: ["plan", "words", "--stacks-dir", str(f["stacks"])], "flashfleet:stack.nodes.count: must be a whole number, not 'two'"),
    ("plan", lambda f: ["plan", "gb300-lowlat.yaml"], "a stack file is named Pulumi.<stack>.yaml"),
    ("plan", lambda f: ["plan", "Pulumi.nothere.yaml"], "Pulumi.nothere.yaml: no such file"),
    ("plan", lambda f: ["plan", str(f["tmp"] / "Pulumi.nothere.yaml")], "Pulumi.nothere.yaml: no such file"),
    ("lock", lambda f: ["lock", str(f["latin1"])], "Pulumi.latin1.yaml: not UTF-8 text (byte 0xe9"),
    ("lock", lambda f: ["lock", "no-such-stack"], "no such stack (known:"),
    ("lock", lambda f: ["lock", "ttl", "--stacks-dir", str(f["stacks"])], "flashfleet:stack.ttl: must be between 15m and 14d"),
    ("validate", lambda f: ["validate", "--stacks-dir", str(f["empty"])], "no stack files (Pulumi.<stack>.yaml) in "),
    ("validate", lambda f: ["validate", "--stacks-dir", str(f["tmp"] / "missing")], "no such folder"),
    ("validate", lambda f: ["validate", str(f["latin1"])], "not UTF-8 text"),
    ("validate", lambda f: ["validate", "ttl", "--stacks-dir", str(f["stacks"])], "ttl: must be between"),
    ("inventory", lambda f: ["inventory", "gb300-lowlat"], "AWS nodes get their addresses at `flashfleet up gb300-lowlat`"),
    ("inventory", lambda f: ["inventory", "mi355x-k8s"], "a Kubernetes stack has no hosts"),
    ("inventory", lambda f: ["inventory", str(f["latin1"])], "not UTF-8 text"),
    ("check", lambda f: ["check", str(f["latin1"])], "not UTF-8 text"),
    ("check", lambda f: ["check", "Pulumi.nothere.yaml"], "Pulumi.nothere.yaml: no such file"),
    ("check", lambda f: ["check", "mi355x-agentx", "--ssh-port", "70000"], "--ssh-port 70000"),
    ("bench", lambda f: ["bench"], "which stack?"),
    ("bench", lambda f: ["bench", "s", "--results", str(f["file"]), "--endpoint", "http://127.0.0.1:9"], "--results"),
    ("bench", lambda f: ["bench", "s", "--concurrency", "0"], "--concurrency values must be at least 1"),
    ("bench", lambda f: ["bench", "s", "--threshold", "fast"], "--threshold wants NAME=NUMBER"),
    ("bench", lambda f: ["bench", "s", "--threshold", "max_p99_ttft_ms=-5"], "max_p99_ttft_ms: must be >= 0"),
    ("bench", lambda f: ["bench", "s", "--profile", "nosuch"], "nosuch"),
    ("bench", lambda f: ["bench", "s", "--hardware", "gb300"], "--hardware and --strategy go together"),
    ("bench", lambda f: ["bench", "s", "--results", str(f["tmp"] / "r"), "--hardware", "gb300", "--strategy", "low-latency", "--set", "tp=3"], "tp-fits"),
    ("compare", lambda f: ["compare", str(f["tmp"] / "run-obj"), str(f["tmp"] / "run-list")], "summary.json: `stack` is missing"),
    ("compare", lambda f: ["compare", str(f["tmp"] / "run-list"), str(f["tmp"] / "run-obj")], "summary.json: expected a JSON object, found list"),
    ("compare", lambda f: ["compare", str(f["tmp"] / "run-levels"), str(f["tmp"] / "run-levels")], "a level row is incomplete"),
    ("compare", lambda f: ["compare", str(f["tmp"] / "run-obj")], "give at least two runs"),
    ("compare", lambda f: ["compare", str(f["tmp"] / "run-obj"), str(f["tmp"] / "run-obj"), "--out", str(f["file"])], "--out"),
    ("compare", lambda f: ["compare", str(f["tmp"] / "run-obj"), str(f["tmp"] / "run-obj"), "--out", str(f["file"] / "sub")], "--out"),
    ("sweep", lambda f: ["sweep", "--skip", "bogus"], "argument --skip: invalid choice: 'bogus'"),
    ("sweep", lambda f: ["sweep", "--format", "yaml"], "invalid choice: 'yaml'"),
    ("capacity", lambda f: ["capacity", "offers", "no-such-stack", "--hours", "48"], "no such stack (known:"),
    ("capacity", lambda f: ["capacity", "offers", "mi355x-lowlat", "--hours", "48"], "Capacity Blocks are for AWS stacks"),
    ("capacity", lambda f: ["capacity", "buy", "gb300-lowlat", "--hours", "48"], "--offering"),
    ("up", lambda f: ["up", "no-such-stack"], "no such stack"),
    ("down", lambda f: ["down", "s", "--inventory", str(f["binary"])], "--inventory"),
    ("down", lambda f: ["down", "mi355x-lowlat", "--inventory", str(f["latin1"])], "not UTF-8 text"),
    ("down", lambda f: ["down", "mi355x-lowlat", "--inventory", str(f["ordinary"])], "all.hosts.n0: has no flashfleet_* facts"),
    ("status", lambda f: ["status", "mi355x-lowlat", "--runs-dir", str(f["empty"]), "--format", "yaml"], "invalid choice"),
    ("configure", lambda f: ["configure", "mi355x-lowlat", "--inventory", str(f["utf16"])], "not UTF-8 text (byte 0xff"),
    ("configure", lambda f: ["configure", "mi355x-lowlat", "--inventory", str(f["ordinary"])], "has no flashfleet_* facts"),
    ("configure", lambda f: ["configure", "mi355x-lowlat", "--inventory", str(f["ordinary"]), "-e", "not a var"], "--extra-var wants NAME=VALUE"),
    ("manifest", lambda f: ["manifest", "h200-lowlat"], "nodes.source.kind: manifest prints a kubernetes"),
    ("manifest", lambda f: ["manifest", "mi355x-k8s", "--format", "text"], "invalid choice: 'text'"),
    ("ls", lambda f: ["ls", "--format", "yaml"], "invalid choice: 'yaml'"),
    ("ls", lambda f: ["ls", "--all"], "unrecognized arguments: --all"),
    ("logs", lambda f: ["logs", "mi355x-lowlat", "--lines", "-5"], "--lines -5: must be at least 1"),
    ("logs", lambda f: ["logs", "mi355x-lowlat", "--inventory", str(f["tmp"] / "nowhere.yml")], "--inventory"),
    ("timeline", lambda f: ["timeline", str(f["tmp"] / "events")], "no events.jsonl"),
    ("timeline", lambda f: ["timeline", str(f["tmp"] / "nowhere")], "no events.jsonl"),
    ("new", lambda f: ["new", "x", "--replicas", "1", "--stacks-dir", str(f["tmp"] / "n")], "--replicas: at least 2"),
    ("new", lambda f: ["new", "org/x", "--stacks-dir", str(f["tmp"] / "n")], "named for the stack alone"),
    ("offers", lambda f: ["offers", "--gpu", "h20"], "--gpu h20: no such hardware"),
    ("offers", lambda f: ["offers", "--format", "yaml"], "invalid choice: 'yaml'"),
    ("logs", lambda f: ["logs", "mi355x-agentx", "--follow", "--lines", "0"], "--lines 0: must be at least 1"),
]  # fmt: skip


def _one_line(capsys: Any, command: str) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, f"not one line on stderr:\n{captured.err}"
    # validate reports each stack file it checks as `ok` or `FAIL stack NAME: ...`
    prefix = (
        "FAIL stack " if command == "validate" and lines[0].startswith("FAIL") else f"flashfleet {command}: "
    )
    assert lines[0].startswith(prefix), lines[0]
    assert "Traceback" not in captured.err
    assert "Value error" not in captured.err
    assert "after validation" not in captured.err
    return lines[0]


@pytest.mark.parametrize(("command", "argv", "says"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_careless_input_is_one_line_and_exit_2(
    command: str, argv: Callable[[F], list[str]], says: str, files: F, no_pulumi: None, capsys: Any
) -> None:
    assert main(argv(files)) == 2
    assert says in _one_line(capsys, command)


def test_every_command_gets_careless_input() -> None:
    assert {c[0] for c in CASES} | {"status", "configure", "up", "down"} >= set(COMMANDS)
    assert set(COMMANDS) <= {c[0] for c in CASES}


def test_validate_names_each_bad_file_among_good_ones(files: F, capsys: Any) -> None:
    assert main(["validate", "--stacks-dir", str(files["one_bad"])]) == 2
    out = capsys.readouterr()
    assert out.out == "ok   ok: mi355x / low-latency / unified, Not Verified\n"
    assert out.err.strip().splitlines() == [
        "FAIL stack latin1: Pulumi.latin1.yaml: not UTF-8 text (byte 0xe9 at offset 5); save it as UTF-8 [rule: yaml]"
    ]


def test_the_same_stack_without_the_duplicate_key_is_accepted(files: F, capsys: Any) -> None:
    # the refusal is about the repeated key, not the content around it
    assert main(["validate", "ok", "dup", "--stacks-dir", str(files["stacks"])]) == 2
    out = capsys.readouterr()
    assert out.out.startswith("ok   ok:")
    dup_line = (files["stacks"] / "Pulumi.dup.yaml").read_text().splitlines().index(
        "    strategy: high-throughput"
    ) + 1
    assert f"key 'strategy' appears twice in one mapping (line {dup_line})" in out.err


@pytest.mark.parametrize("argv", [["status", "mi355x-lowlat"], ["configure", "mi355x-lowlat"]])
def test_a_failing_stack_selection_is_one_line(
    argv: list[str], files: F, failing_pulumi: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLASHFLEET_RUNS_DIR", str(files["empty"]))
    assert main(argv) == 2
    line = _one_line(capsys, argv[0])
    assert "incorrect passphrase" in line


def test_status_without_pulumi_shows_the_runs_recorded_here(files: F, no_pulumi: None, capsys: Any) -> None:
    run = files["tmp"] / "runs" / "mi355x-lowlat" / "20261201T000000Z-site"
    run.mkdir(parents=True)
    (run / "summary.txt").write_text("playbook successful (rc 0); events: x\n")
    assert main(["status", "mi355x-lowlat", "--runs-dir", str(files["tmp"] / "runs")]) == 0
    captured = capsys.readouterr()
    assert captured.out == (
        "stack: mi355x-lowlat\nrun 20261201T000000Z-site: playbook successful (rc 0)\nevidence: no evidence\n"
    )
    assert "the Pulumi CLI is not installed" in captured.err
    # a stack of the project never brought up is an answer (exit 0), not bad input
    assert main(["status", "mi355x-lowlat", "--runs-dir", str(files["empty"])]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines()[:2] == [
        "stack: mi355x-lowlat",
        f"state: not deployed (no run of it is recorded under {files['empty']}; without the Pulumi CLI a "
        "deployment made from elsewhere cannot be read); `flashfleet up mi355x-lowlat` brings it up",
    ]
    # a stack the project does not have is bad input
    assert main(["status", "mi355x-lowlatt", "--runs-dir", str(files["empty"])]) == 2
    line = _one_line(capsys, "status")
    assert "stack 'mi355x-lowlatt': no such stack" in line
    assert "did you mean mi355x-lowlat?" in line


def test_status_of_a_stack_pulumi_never_made_is_not_deployed(files: F) -> None:
    from flashfleet.cli.shared import stackops
    from flashfleet.cli.status import _never_deployed

    unknown = stackops.UnknownStack("stack 'h200-lowlat': not initialised (pulumi stack init h200-lowlat)")
    reason = _never_deployed("h200-lowlat", unknown, files["empty"])
    assert reason == f"Pulumi has no stack h200-lowlat, and no run of it is recorded under {files['empty']}"
    # any other Pulumi failure is no answer: refused, naming it
    with pytest.raises(UsageError, match="incorrect passphrase"):
        _never_deployed("h200-lowlat", stackops.PulumiError("incorrect passphrase"), files["empty"])


@pytest.mark.parametrize("argv", [["up", "mi355x-lowlat"], ["down", "mi355x-lowlat"]])
def test_up_and_down_refuse_without_a_terminal_or_yes(
    argv: list[str], failing_pulumi: Path, capsys: Any
) -> None:
    assert main(argv) == 2
    assert "no terminal to ask on: pass --yes" in _one_line(capsys, argv[0])
    assert not failing_pulumi.exists()  # Pulumi was not even asked for a preview


def test_down_with_an_inventory_refuses_without_a_terminal_before_any_host(files: F, capsys: Any) -> None:
    inv = files["tmp"] / "inv.json"
    assert main(["inventory", "mi355x-lowlat", "--format", "json"]) == 0
    inv.write_text(capsys.readouterr().out)
    runs = files["tmp"] / "runs-down"
    assert main(["down", "mi355x-lowlat", "--inventory", str(inv), "--runs-dir", str(runs)]) == 2
    assert "pass --yes" in _one_line(capsys, "down")
    assert not runs.exists()  # no run directory: no playbook started


def test_confirm_asks_and_only_yes_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    from flashfleet.cli.common import UsageError, confirm

    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    answers = iter(["y", "", "no"])
    monkeypatch.setattr("builtins.input", lambda prompt: next(answers))
    confirm("go?", yes=False)
    for _ in range(2):
        with pytest.raises(UsageError, match="not confirmed"):
            confirm("go?", yes=False)
    confirm("go?", yes=True)  # --yes: no question asked (the iterator is spent)


def test_careless_files_as_a_real_process_without_a_terminal(files: F) -> None:
    """The same refusals from the installed command, stdin not a terminal, nothing on stdout."""
    exe = Path(sys.executable).with_name("flashfleet")
    for argv in (["plan", str(files["latin1"])], ["validate", "dup", "--stacks-dir", str(files["stacks"])],
                 ["up", "mi355x-lowlat"], ["compare", str(files["tmp"] / "run-list"), str(files["tmp"] / "run-obj")]):  # fmt: skip
        proc = subprocess.run(
            [str(exe), *argv], capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False
        )
        assert proc.returncode == 2, (argv, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert "Traceback" not in proc.stderr
        assert proc.stdout == ""


def test_validate_names_the_folder_it_looked_in(files: F, capsys: Any) -> None:
    assert main(["validate", "--stacks-dir", str(files["empty"])]) == 2
    assert _one_line(capsys, "validate").endswith(f"in {files['empty']}")


def test_documented_values_are_accepted(files: F, capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the README documents must not be refused: `--draft-tokens 0`, `mm_transport=auto`
    (GB300's default, so the render is unchanged), a stack named by its file's path."""
    base = ["size", "--boot-log", str(files["boot"]), "--avg-request-len", "9216"]
    assert main([*base, "--draft-tokens", "0"]) == 0
    assert "D=0" in capsys.readouterr().out
    recipe = ["render", "--hardware", "gb300", "--strategy", "low-latency"]
    assert main(recipe) == 0
    default = capsys.readouterr().out
    assert main([*recipe, "--set", "mm_transport=auto"]) == 0
    assert capsys.readouterr().out == default
    monkeypatch.chdir(REPO)
    assert main(["plan", "stacks/Pulumi.mi355x-lowlat.yaml"]) == 0
    assert capsys.readouterr().out.startswith("stack mi355x-lowlat: ")
    monkeypatch.chdir(files["tmp"])  # `size --stack NAME` finds the repository's stacks/, as plan does
    assert main([*base, "--strategy", "low-latency", "--stack", "mi355x-lowlat"]) == 0
    assert f"in {STACKS / 'Pulumi.mi355x-lowlat.yaml'}" in capsys.readouterr().out


def test_a_name_in_the_users_own_stacks_folder_is_found_from_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """Run from the user's own project: ./stacks/Pulumi.mine.yaml is the stack `mine`; a catalog
    name that folder does not hold still comes from the catalog."""
    (tmp_path / "stacks").mkdir()
    catalog = Path(__file__).parents[2] / "stacks" / "Pulumi.gb300-lowlat.yaml"
    mine = catalog.read_text().replace('description: "', 'description: "mine: ', 1)
    (tmp_path / "stacks" / "Pulumi.mine.yaml").write_text(mine)
    monkeypatch.chdir(tmp_path)
    assert main(["plan", "mine"]) == 0
    assert capsys.readouterr().out.startswith("stack mine: mine: ")
    assert main(["plan", "gb300-lowlat"]) == 0
    assert capsys.readouterr().out.startswith("stack gb300-lowlat: GB300")
