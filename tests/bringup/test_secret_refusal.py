"""A secret too short or too common to hide from the run events is refused through the CLI with
exit 2 and one line naming where it came from and the rule, before any run directory or host."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from flashfleet.cli import main
from flashfleet.cli.shared import stackops

from .inventories import PROJECT, TOKEN


def one_line(capsys: Any, command: str, source: str, rule: str) -> None:
    err = capsys.readouterr().err
    assert err.startswith(f"flashfleet {command}: {source}: "), err
    assert err.rstrip().endswith(f"[rule: {rule}]"), err
    assert len(err.strip().splitlines()) == 1


REFUSED = [
    ("FLASHFLEET_API_KEY", "true", "secret-not-event-word"),  # made run_playbook raise half-way
    ("FLASHFLEET_API_KEY", "failed", "secret-not-event-word"),  # renamed the failing task's event
    ("FLASHFLEET_HF_TOKEN", "changed", "secret-not-event-word"),
    ("FLASHFLEET_API_KEY", "Zq9v4T2m", "secret-min-length"),
    ("FLASHFLEET_HF_TOKEN", "hf_Zq9v4T2m", "secret-min-length"),
]


@pytest.mark.parametrize(("variable", "value", "rule"), REFUSED)
def test_configure_refuses_an_unsafe_secret_before_touching_a_host(
    tmp_path: Path, two_local_nodes: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: Any,
    variable: str, value: str, rule: str,
) -> None:  # fmt: skip
    monkeypatch.setenv(variable, value)
    inv = tmp_path / "inv.yml"
    inv.write_text(yaml.safe_dump(two_local_nodes))
    rc = main(["configure", "t1", "--inventory", str(inv), "--project", str(PROJECT),
               "--runs-dir", str(tmp_path / "runs")])  # fmt: skip
    assert rc == 2
    one_line(capsys, "configure", variable, rule)
    assert not (tmp_path / "runs").exists()
    assert not (tmp_path / "n0").exists()


@pytest.mark.parametrize(("variable", "value", "rule"), REFUSED[:1] + REFUSED[3:4])
@pytest.mark.parametrize(
    "argv", [["up", "h200-lowlat", "--yes"], ["bench", "h200-lowlat", "--results", "RES"]]
)
def test_up_and_bench_refuse_an_unsafe_secret_of_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any, argv: list[str], variable: str,
    value: str, rule: str,
) -> None:  # fmt: skip
    monkeypatch.setenv(variable, value)
    monkeypatch.setattr(stackops, "preview", lambda *a: pytest.fail("the preview ran"))
    argv = [str(tmp_path / "results") if a == "RES" else a for a in argv]
    assert main(argv) == 2
    one_line(capsys, argv[0], variable, rule)
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize(
    ("output", "source"), [("hfToken", "flashfleet:hfToken"), ("apiKey", "flashfleet:apiKey")]
)
def test_configure_names_the_stack_secret_it_refuses(
    tmp_path: Path, two_local_nodes: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: Any,
    output: str, source: str,
) -> None:  # fmt: skip
    # The Pulumi CLI cannot run here: the stack's outputs are what it would return.
    outs = {
        "inventoryJson": stackops.StackOutput(json.dumps(two_local_nodes), False),
        "hfToken": stackops.StackOutput(TOKEN, True),
    }
    outs[output] = stackops.StackOutput("ok", True)
    monkeypatch.setattr(stackops, "outputs", lambda stack: outs)
    monkeypatch.delenv("FLASHFLEET_API_KEY", raising=False)
    rc = main(["configure", "t1", "--project", str(PROJECT), "--runs-dir", str(tmp_path / "runs")])
    assert rc == 2
    one_line(capsys, "configure", source, "secret-not-event-word")
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("prop", "source"), [("hfToken", "flashfleet:hfToken"), ("apiKey", "flashfleet:apiKey")]
)
def test_the_provider_check_refuses_an_unsafe_secret_before_any_run(
    tmp_path: Path, two_local_nodes: dict[str, Any], prop: str, source: str
) -> None:
    from pulumi.runtime.rpc import wrap_rpc_secret  # how the engine hands a secret input over

    from flashfleet.bringup.provider import PlaybookRunProvider

    from .conftest import resource_inputs

    provider = PlaybookRunProvider()
    assert provider.check({}, resource_inputs(tmp_path, two_local_nodes)).failures == []
    bad = resource_inputs(tmp_path, two_local_nodes, **{prop: wrap_rpc_secret("true")})
    failures = provider.check({}, bad).failures
    assert [f.property for f in failures] == [prop]
    assert failures[0].reason.startswith(f"{source}: ")
    assert failures[0].reason.endswith("[rule: secret-not-event-word]")
    assert not (tmp_path / "runs").exists()
