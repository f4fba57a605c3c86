"""`flashfleet new NAME`: a stack file to start from, for every node source and hardware, that
`validate` and `plan` accept as written; refused cleanly (exit 2, one line) where the request
itself is wrong, with nothing written; never over an existing file."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from flashfleet.cli import main


def _new(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["new", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize(
    ("args", "badge"),
    [
        (["--hardware", "h200"], "Final Verification In Progress"),
        (["--hardware", "gb300", "--source", "aws"], "Verified"),
        (["--hardware", "h200", "--source", "aws", "--strategy", "high-throughput"], None),
        (["--hardware", "mi355x", "--source", "kubernetes"], "Not Verified"),
        (["--hardware", "h200", "--replicas", "2", "--hosts", "10.0.0.1,10.0.0.2"], "Not Verified"),
        (
            ["--hardware", "gb300", "--source", "aws", "--topology", "pd", "--strategy", "high-throughput"],
            "Preview",
        ),
    ],
)
def test_each_scaffold_validates_and_plans(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], badge: str | None
) -> None:
    folder = tmp_path / "mine"
    rc, out, err = _new(capsys, "first", *args, "--stacks-dir", str(folder))
    assert rc == 0, err
    written = folder / "Pulumi.first.yaml"
    assert out.startswith(f"wrote {written}: "), out
    if badge:
        assert out.splitlines()[0].endswith(f", {badge}"), out
    doc = yaml.safe_load(written.read_text())
    stack = doc["config"]["flashfleet:stack"]
    hardware = args[args.index("--hardware") + 1]
    assert stack["hardware"] == hardware
    # the file is the user's to fill in: placeholders are marked on their lines
    assert "# yours" in written.read_text()
    assert main(["validate", "first", "--stacks-dir", str(folder)]) == 0
    assert capsys.readouterr().out.startswith("ok   first: ")
    assert main(["plan", "first", "--stacks-dir", str(folder)]) == 0
    assert capsys.readouterr().out.startswith("stack first: ")


def test_existing_hosts_are_written_as_given_with_the_hardware_gpus(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, _, err = _new(capsys, "pair", "--hardware", "h200", "--replicas", "2", "--hosts",
                      "10.1.0.5, gpu-b.example", "--ssh-user", "ops", "--stacks-dir", str(tmp_path))  # fmt: skip
    assert rc == 0, err
    stack = yaml.safe_load((tmp_path / "Pulumi.pair.yaml").read_text())["config"]["flashfleet:stack"]
    hosts = stack["nodes"]["source"]["hosts"]
    assert [h["address"] for h in hosts] == ["10.1.0.5", "gpu-b.example"]
    assert {h["sshUser"] for h in hosts} == {"ops"}
    assert {(h["gpus"]["model"], h["gpus"]["count"]) for h in hosts} == {("h200", 8)}
    assert stack["cluster"]["replicas"] == 2
    assert stack["nodes"]["count"] == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["bad/name"], "a stack file is named for the stack alone (Pulumi.<stack>.yaml)"),
        (["../up"], "is not a stack name"),
        (
            ["x", "--replicas", "2"],
            "--hosts: 1 address(es) for 2 node(s); give one per node [rule: nodes-count]",
        ),
        (["x", "--replicas", "1"], "--replicas: at least 2"),
        (["x", "--hosts", "a b"], "hosts[0].address: 'a b': must be an IP address or a DNS name"),
        # the recipe's own refusal, as validate would give it: PD runs no speculative decoding
        (["x", "--hardware", "gb300", "--topology", "pd"], "[rule: speculative-pd]"),
        (["x", "--ssh-user", "root;rm"], "sshUser"),
    ],
)
def test_a_wrong_request_is_refused_in_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    rc, out, err = _new(capsys, *args, "--stacks-dir", str(tmp_path / "out"))
    assert rc == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("flashfleet new: "), err
    assert message in err, err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_an_existing_stack_file_is_never_overwritten(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = tmp_path / "Pulumi.taken.yaml"
    mine.write_text("# the user's own\n")
    rc, _, err = _new(capsys, "taken", "--stacks-dir", str(tmp_path))
    assert rc == 2
    assert "already exists" in err
    assert mine.read_text() == "# the user's own\n"
    # nor a link there (it would be written through to wherever it points)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep\n")
    (tmp_path / "Pulumi.linked.yaml").symlink_to(victim)
    rc, _, err = _new(capsys, "linked", "--stacks-dir", str(tmp_path))
    assert rc == 2
    assert victim.read_text() == "keep\n"
