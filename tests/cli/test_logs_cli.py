"""`flashfleet logs` refusals: bad input exits 2 with one line, before any host is touched
(tests/serve/test_site.py reads real units' journals on test hosts)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flashfleet.cli import main
from flashfleet.cli.logs import node_hosts


def _inventory(*nodes: tuple[str, int, bool]) -> dict[str, object]:
    hosts = {
        name: {
            "flashfleet_node_index": index,
            "flashfleet_processes": [{"container_name": f"c-{name}"}] if serves else [],
        }
        for name, index, serves in nodes
    }
    return {"all": {"hosts": hosts}}


def test_node_selects_that_nodes_serving_hosts_only() -> None:
    inv = _inventory(("a", 0, True), ("b", 1, True), ("m", 2, False))
    assert node_hosts(inv, None) == ["a", "b"]
    assert node_hosts(inv, 1) == ["b"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--lines", "0"], "--lines 0: must be at least 1"),
        (["--node", "2"], "--node 2: no such serving node (the stack's: 0, 1)"),
        (["--node", "x"], "argument --node: invalid int value: 'x'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    path = tmp_path / "inv.json"
    path.write_text(json.dumps(_inventory(("a", 0, True), ("b", 1, True), ("m", 2, False))))
    assert main(["logs", "t1", "--inventory", str(path), "--runs-dir", str(tmp_path / "runs"), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "runs").exists()  # no run was started


def test_without_pulumi_the_last_configure_run_gives_the_hosts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))  # no Pulumi CLI to read outputs
    runs = tmp_path / "runs"
    assert main(["logs", "t1", "--runs-dir", str(runs)]) == 2
    err = capsys.readouterr().err
    assert "no Pulumi CLI" in err
    assert "no `flashfleet configure t1` run recorded" in err
    assert len(err.strip().splitlines()) == 1, err
    # a recorded configure run (and a later teardown, which is not a deployment) gives the nodes
    for name, nodes in (("20261201T100000Z-site", 2), ("20261201T110000Z-teardown", 1)):
        run = runs / "t1" / name
        run.mkdir(parents=True)
        listed = [(f"n{i}", i, True) for i in range(nodes)]
        (run / "inventory.json").write_text(json.dumps(_inventory(*listed)))
    assert main(["logs", "t1", "--runs-dir", str(runs), "--node", "5"]) == 2
    assert "--node 5: no such serving node (the stack's: 0, 1)" in capsys.readouterr().err


def test_without_runs_dir_the_default_runs_root_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # `flashfleet logs STACK` with no --runs-dir reads where `configure` records by default
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    monkeypatch.setenv("FLASHFLEET_RUNS_DIR", str(tmp_path / "default-runs"))
    assert main(["logs", "t1"]) == 2
    err = capsys.readouterr().err
    assert f"no `flashfleet configure t1` run recorded under {tmp_path / 'default-runs'}" in err, err
    assert len(err.strip().splitlines()) == 1, err
    run = tmp_path / "default-runs" / "t1" / "20261201T100000Z-site"
    run.mkdir(parents=True)
    (run / "inventory.json").write_text(json.dumps(_inventory(("n0", 0, True))))
    assert main(["logs", "t1", "--node", "3"]) == 2
    assert "--node 3: no such serving node (the stack's: 0)" in capsys.readouterr().err
