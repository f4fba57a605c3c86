"""`flashfleet up/down/status/configure` without the Pulumi CLI (as on these machines), and
`configure`/`down --inventory` against this machine and an unreachable node."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from flashfleet.bringup.handoff import TeardownError
from flashfleet.cli import main
from flashfleet.cli.shared.stack_cluster import StackCluster

from .inventories import PROJECT, TOKEN, inventory, local_host, unreachable_host

NO_CLI = "the Pulumi CLI is not installed"


@pytest.fixture
def no_pulumi(monkeypatch: pytest.MonkeyPatch) -> None:
    """PATH without any directory that holds a `pulumi` (there is none on these machines)."""
    dirs = [
        d for d in os.environ.get("PATH", "").split(os.pathsep) if d and not (Path(d) / "pulumi").exists()
    ]
    monkeypatch.setenv("PATH", os.pathsep.join(dirs))
    assert shutil.which("pulumi") is None


# (`status` answers "not deployed" instead, saying on stderr why Pulumi was not read:
# tests/cli/test_careless_cli.py)
@pytest.mark.parametrize("argv", [["up", "h200-lowlat"], ["down", "h200-lowlat"],
                                  ["configure", "h200-lowlat"]])  # fmt: skip
def test_pulumi_commands_say_the_cli_is_missing(no_pulumi: None, argv: list[str], capsys: Any) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"flashfleet {argv[0]}: {NO_CLI}")
    assert "--inventory FILE" in err
    assert len(err.strip().splitlines()) == 1


def _write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def _configure(tmp_path: Path, inv_file: Path, *extra: str) -> int:
    return main(["configure", "t1", "--inventory", str(inv_file), "--project", str(PROJECT),
                 "--runs-dir", str(tmp_path / "runs"), *extra])  # fmt: skip


def test_configure_runs_the_playbook_on_existing_hosts(
    no_pulumi: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    two_local_nodes: dict[str, Any],
    capsys: Any,
) -> None:
    monkeypatch.setenv("FLASHFLEET_HF_TOKEN", TOKEN)
    inv_file = _write(tmp_path / "inventory.yml", two_local_nodes)

    assert _configure(tmp_path, inv_file, "-e", "marker_mode=careful") == 0

    out, err = capsys.readouterr()
    assert out.startswith("playbook successful (rc 0)")
    assert "[node-1] marker: done" in err
    assert json.loads((tmp_path / "n1" / "deployed.json").read_text())["mode"] == "careful"
    assert (tmp_path / "n0" / "token.sha256").read_text().strip() == hashlib.sha256(
        TOKEN.encode()
    ).hexdigest()
    run_dirs = list((tmp_path / "runs" / "t1").iterdir())
    assert len(run_dirs) == 1
    assert (run_dirs[0] / "timeline.png").is_file()
    leaks = [p for p in (tmp_path / "runs").rglob("*") if p.is_file() and TOKEN.encode() in p.read_bytes()]
    assert leaks == []
    assert TOKEN not in out + err


def test_configure_check_mode_changes_nothing(
    no_pulumi: None, tmp_path: Path, two_local_nodes: dict[str, Any], capsys: Any
) -> None:
    assert _configure(tmp_path, _write(tmp_path / "inv.yml", two_local_nodes), "--check") == 0
    assert not (tmp_path / "n0" / "deployed.json").exists()


@pytest.mark.parametrize(
    ("break_it", "message"),
    [
        (lambda inv: inv["all"]["hosts"]["node-0"].update(flashfleet_gpu_count="8"),
         "all.hosts.node-0.flashfleet_gpu_count: expected int, got str '8'"),
        (lambda inv: inv["all"]["hosts"]["node-1"].pop("ansible_host"), "all.hosts.node-1.ansible_host: missing"),
        (lambda inv: inv["all"]["hosts"]["node-0"].update(flashfleet_stack="t2"),
         "all.hosts.*.flashfleet_stack: several stacks"),
        (lambda inv: [h.update(flashfleet_stack="t2") for h in inv["all"]["hosts"].values()],
         "all.hosts.*.flashfleet_stack: the inventory is for 't2', not 't1'"),
    ],
)  # fmt: skip
def test_configure_refuses_a_broken_inventory_before_touching_a_host(
    no_pulumi: None, tmp_path: Path, two_local_nodes: dict[str, Any], capsys: Any, break_it: Any, message: str
) -> None:
    break_it(two_local_nodes)
    assert _configure(tmp_path, _write(tmp_path / "inv.yml", two_local_nodes)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"flashfleet configure: {message}")
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()
    assert not (tmp_path / "n0").exists()


def test_configure_refuses_an_unreadable_inventory_file(no_pulumi: None, tmp_path: Path, capsys: Any) -> None:
    assert _configure(tmp_path, tmp_path / "missing.yml") == 2
    assert "--inventory" in capsys.readouterr().err
    (tmp_path / "bad.yml").write_text("all: [unclosed\n")
    assert _configure(tmp_path, tmp_path / "bad.yml") == 2
    assert "not valid YAML (line 2)" in capsys.readouterr().err


def test_configure_exits_1_with_the_failure_summary_when_a_host_is_unreachable(
    no_pulumi: None, tmp_path: Path, capsys: Any
) -> None:
    inv = inventory(
        "t1", {"node-0": (local_host(), tmp_path / "n0"), "dead": (unreachable_host(), tmp_path / "d")}
    )
    assert _configure(tmp_path, _write(tmp_path / "inv.yml", inv)) == 1
    out = capsys.readouterr().out
    assert out.startswith("playbook failed (rc 4)")
    assert "  dead: marker_prep: marker directory" in out


def test_down_with_an_inventory_runs_teardown_and_warns_about_unreachable_hosts(
    no_pulumi: None, tmp_path: Path, capsys: Any
) -> None:
    up = inventory("t1", {"node-0": (local_host(), tmp_path / "n0")})
    assert _configure(tmp_path, _write(tmp_path / "up.yml", up)) == 0
    gone = inventory(
        "t1", {"node-0": (local_host(), tmp_path / "n0"), "dead": (unreachable_host(), tmp_path / "d")}
    )
    rc = main(["down", "t1", "--yes", "--inventory", str(_write(tmp_path / "down.yml", gone)), "--project", str(PROJECT),
               "--runs-dir", str(tmp_path / "runs")])  # fmt: skip
    assert rc == 0
    assert not (tmp_path / "n0" / "deployed.json").exists()
    seen = capsys.readouterr()
    assert "warning: teardown: unreachable, left as they are: dead" in seen.err
    # the last line says plainly what was and was not torn down
    assert (
        seen.out.splitlines()[-1]
        == "flashfleet down t1: torn down on node-0; unreachable, left as they are: dead"
    )

    # every host gone: exit 0 as documented, and the last line says nothing was torn down
    dark = inventory("t1", {"dead": (unreachable_host(), tmp_path / "d")})
    rc = main(["down", "t1", "--yes", "--inventory", str(_write(tmp_path / "dark.yml", dark)), "--project", str(PROJECT),
               "--runs-dir", str(tmp_path / "runs")])  # fmt: skip
    assert rc == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last == "flashfleet down t1: torn down on no host; unreachable, left as they are: dead"


def test_bench_cluster_tears_down_what_configure_brought_up(
    no_pulumi: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, two_local_nodes: dict[str, Any]
) -> None:
    monkeypatch.chdir(tmp_path)  # runs go to ./.runner, where the cluster looks for them
    monkeypatch.delenv("FLASHFLEET_RUNS_DIR", raising=False)
    cluster = StackCluster()
    with pytest.raises(TeardownError, match=f"{NO_CLI}.*no `flashfleet configure` run of t1"):
        cluster.teardown("t1")

    inv_file = _write(tmp_path / "inv.yml", two_local_nodes)
    assert main(["configure", "t1", "--inventory", str(inv_file), "--project", str(PROJECT)]) == 0
    assert (tmp_path / "n0" / "deployed.json").exists()
    cluster.teardown("t1")
    assert not (tmp_path / "n0" / "deployed.json").exists()
    assert not (tmp_path / "n1" / "deployed.json").exists()


def test_down_of_a_stack_with_no_resources_asks_nothing_and_destroys_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    from flashfleet.cli.shared import stackops

    def never(*_: Any, **__: Any) -> Any:
        raise AssertionError("called for an empty stack")

    monkeypatch.setattr(stackops, "cli_available", lambda: True)
    monkeypatch.setattr(stackops, "resources", lambda stack: [])
    monkeypatch.setattr(stackops, "destroy", never)
    monkeypatch.setattr("flashfleet.cli.down.can_ask", lambda yes: None)  # a terminal is there to ask on
    monkeypatch.setattr("flashfleet.cli.down.confirm", never)
    assert main(["down", "t1"]) == 0
    assert capsys.readouterr().out == "flashfleet down t1: the stack holds no resources; nothing to delete\n"


def test_down_keeps_the_caches_unless_told_to_purge_them(
    no_pulumi: None, tmp_path: Path, capsys: Any
) -> None:
    up = inventory("t1", {"node-0": (local_host(), tmp_path / "n0")})
    inv_file = _write(tmp_path / "up.yml", up)
    down = ["down", "t1", "--yes", "--inventory", str(inv_file), "--project", str(PROJECT),
            "--runs-dir", str(tmp_path / "runs")]  # fmt: skip
    cache = tmp_path / "n0" / "cache"
    for purge in (False, True):
        assert _configure(tmp_path, inv_file) == 0
        cache.mkdir(exist_ok=True)
        (cache / "shard.safetensors").write_bytes(b"w" * 64)
        capsys.readouterr()
        assert main([*down, *(["--purge-caches"] if purge else [])]) == 0
        out = capsys.readouterr().out
        assert not (tmp_path / "n0" / "deployed.json").exists()
        assert cache.exists() is not purge
        where = f"the weight and compile caches in {tmp_path / 'n0'} on node-0"
        if purge:
            assert f"  deletes {where}\n" in out
        else:
            assert f"  keeps {where} (--purge-caches deletes them)\n" in out
    # the inventory file itself is left as it was
    assert yaml.safe_load(inv_file.read_text()) == up


def test_purge_caches_without_an_inventory_is_refused_before_pulumi(no_pulumi: None, capsys: Any) -> None:
    assert main(["down", "h200-lowlat", "--purge-caches", "--yes"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("flashfleet down: --purge-caches: needs --inventory")
    assert "teardown.keepCaches: false" in err
    assert len(err.splitlines()) == 1
