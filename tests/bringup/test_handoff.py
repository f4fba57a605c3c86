"""The hand-off's checks before the run (nothing touched when they refuse), and its progress."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from flashfleet.bringup import handoff, input_check
from flashfleet.bringup.errors import BringupInputError
from flashfleet.bringup.progress import PhaseProgress
from flashfleet.bringup.project import Project

from .inventories import PROJECT, TOKEN, launch

TEST_PROJECT = Project(PROJECT)


def _broken(inv: dict[str, Any], host: str, **facts: Any) -> dict[str, Any]:
    inv = copy.deepcopy(inv)
    for k, v in facts.items():
        if v is None:
            inv["all"]["hosts"][host].pop(k)
        else:
            inv["all"]["hosts"][host][k] = v
    return inv


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"flashfleet_gpu_count": "eight"}, "all.hosts.node-1.flashfleet_gpu_count: expected int, got str"),
        ({"flashfleet_gpu_count": True}, "all.hosts.node-1.flashfleet_gpu_count: expected int, got bool"),
        ({"flashfleet_model": None}, "all.hosts.node-1.flashfleet_model: missing"),
        ({"flashfleet_hardware": "b200"}, "all.hosts.node-1.flashfleet_hardware: 'b200' is not one of"),
        ({"flashfleet_gpu_cuont": 8}, "all.hosts.node-1.flashfleet_gpu_cuont: unknown fact"),
        ({"marker_mode": "quick"}, "all.hosts.node-1.marker_mode: not an inventory fact"),
        ({"flashfleet_hf_token": "x"}, "all.hosts.node-1.flashfleet_hf_token: secrets never go in the inventory"),
        ({"flashfleet_model": TOKEN}, "all: a value looks like a Hugging Face token"),
        ({"flashfleet_stack": "other"}, "all.hosts.*.flashfleet_stack: several stacks"),
        ({"flashfleet_processes": [{**launch(["sglang"]), "argv": "sglang serve"}]},
         "all.hosts.node-1.flashfleet_processes[0].argv: expected list, got str 'sglang serve'"),
        ({"flashfleet_processes": [{**launch(["sglang"]), "serves_api": None}]},
         "all.hosts.node-1.flashfleet_processes[0].serves_api: expected bool, got NoneType None"),
        ({"flashfleet_vendor": "intel"}, "all.hosts.node-1.flashfleet_vendor: 'intel' is not one of 'nvidia' or 'amd'"),
    ],
)  # fmt: skip
def test_a_broken_inventory_is_refused_naming_the_field_before_any_host_is_touched(
    tmp_path: Path, two_local_nodes: dict[str, Any], change: dict[str, Any], field: str
) -> None:
    with pytest.raises(BringupInputError) as err:
        handoff.run_recorded("site.yml", _broken(two_local_nodes, "node-1", **change), project=TEST_PROJECT,
                    runs_root=tmp_path / "runs", hf_token=TOKEN)  # fmt: skip
    assert str(err.value).startswith(field)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "runs").exists()
    assert not (tmp_path / "n0").exists()


def test_group_membership_must_match_the_facts(two_local_nodes: dict[str, Any]) -> None:
    children = two_local_nodes["all"]["children"]
    children["vendor_amd"] = children.pop("vendor_nvidia")
    with pytest.raises(
        BringupInputError,
        match=r"^all\.children\.vendor_amd\.hosts\.node-0: the host's flashfleet_vendor is 'nvidia'",
    ):
        input_check.validate(TEST_PROJECT, "site.yml", two_local_nodes, {})
    del children["vendor_amd"]
    children["flashfleet"]["hosts"].pop("node-1")
    with pytest.raises(BringupInputError, match=r"^all\.children\.flashfleet\.hosts: misses node-1"):
        input_check.validate(TEST_PROJECT, "site.yml", two_local_nodes, {})


@pytest.mark.parametrize(
    ("extravars", "message"),
    [
        ({"marker_mode": "reckless"},
         "site.yml play 'Site | deploy the recipe marker' role marker host node-0: value of marker_mode must be one of: quick, careful, got: reckless"),
        ({"marker_colour": "red"}, "extra variable marker_colour: not an argument of role marker"),
    ],
)  # fmt: skip
def test_role_arguments_are_checked_against_argument_specs(
    two_local_nodes: dict[str, Any], extravars: dict[str, Any], message: str
) -> None:
    with pytest.raises(BringupInputError) as err:
        input_check.validate(TEST_PROJECT, "site.yml", two_local_nodes, extravars)
    assert str(err.value) == message
    input_check.validate(TEST_PROJECT, "site.yml", two_local_nodes, {"marker_mode": "careful"})


def test_a_fact_mapped_onto_a_role_argument_is_type_checked_per_host(
    tmp_path: Path, two_local_nodes: dict[str, Any]
) -> None:
    project = tmp_path / "project"
    import shutil

    shutil.copytree(PROJECT, project)
    site = project / "playbooks" / "site.yml"
    # a playbook that maps the wrong fact onto an int argument
    site.write_text(site.read_text().replace("{{ flashfleet_gpu_count }}", "{{ flashfleet_gpu_model }}"))
    with pytest.raises(
        BringupInputError, match=r"role marker host node-0: argument 'marker_gpu_count' is of type str"
    ):
        input_check.validate(Project(project), "site.yml", two_local_nodes, {})
    site.write_text(site.read_text().replace("marker_gpu_count:", "marker_gpus:"))
    with pytest.raises(BringupInputError, match=r"role marker: marker_gpus is not an argument of the role"):
        input_check.validate(Project(project), "site.yml", two_local_nodes, {})


def test_an_unknown_playbook_is_refused(two_local_nodes: dict[str, Any]) -> None:
    with pytest.raises(BringupInputError, match=r"^playbook: no playbook 'nope.yml'"):
        input_check.validate(TEST_PROJECT, "nope.yml", two_local_nodes, {})


def test_the_token_in_extra_variables_is_refused(two_local_nodes: dict[str, Any]) -> None:
    with pytest.raises(BringupInputError, match="contain the HF token"):
        input_check.validate(TEST_PROJECT, "site.yml", two_local_nodes, {"note": f"x{TOKEN}"}, hf_token=TOKEN)


def test_a_key_with_a_quote_in_extra_variables_is_refused_in_any_form(
    two_local_nodes: dict[str, Any],
) -> None:
    key = 'sk-"quoted\\key-Zq9v4T2mWc8'  # JSON escapes it: a search through JSON text missed it
    for shape in (key, repr(key), key[:6] + "\n" + key[6:]):
        with pytest.raises(BringupInputError, match="contain the API key"):
            input_check.validate(TEST_PROJECT, "site.yml", two_local_nodes, {"note": shape}, api_key=key)


def test_progress_lines_per_host_and_phase(tmp_path: Path, two_local_nodes: dict[str, Any]) -> None:
    lines: list[str] = []
    result = handoff.run_recorded("site.yml", two_local_nodes, project=TEST_PROJECT, runs_root=tmp_path / "runs",
                         hf_token=TOKEN, emit=lines.append)  # fmt: skip
    assert result.ok, result.summary()
    assert result.run_dir.parent == tmp_path / "runs" / "t1"
    for host in ("node-0", "node-1"):
        mine = [ln for ln in lines if ln.startswith(f"[{host}] ")]
        assert [ln.split(" ")[1] for ln in mine] == ["marker_prep", "marker_prep:", "marker", "marker:"]
        assert mine[3].endswith("(4 tasks, 2 changed)")
    assert (result.run_dir / "progress.log").read_text().splitlines() == lines


def test_progress_reports_a_failure_at_once_with_its_message() -> None:
    lines: list[str] = []
    ticks = iter(range(100))
    progress = PhaseProgress(lines.append, clock=lambda: float(next(ticks)))
    data = {"host": "n0", "role": "sglang_serve", "task": "Health | wait for /health"}
    progress({"event": "runner_on_start", "event_data": data})
    progress({"event": "runner_on_failed", "event_data": {**data, "res": {"msg": "timed out after 1800 s"}}})
    progress.finish()
    assert lines == [
        "[n0] sglang_serve ...",
        "[n0] sglang_serve: FAILED wait for /health: timed out after 1800 s",
        "[n0] sglang_serve: FAILED in 1.0s (1 tasks, 0 changed)",
    ]


def test_roles_included_inside_blocks_are_checked_too(
    tmp_path: Path, two_local_nodes: dict[str, Any]
) -> None:
    # teardown.yml includes the roles' remove entry points inside block/always sections: an
    # argument there is checked like one at the top of the play.
    import shutil

    project = tmp_path / "project"
    shutil.copytree(PROJECT, project)
    (project / "playbooks" / "blocks.yml").write_text(
        "- hosts: all\n  tasks:\n    - block:\n        - ansible.builtin.debug:\n      always:\n"
        "        - block:\n            - ansible.builtin.include_role:\n                name: marker\n"
        "              vars:\n                marker_gpus: 8\n"
    )
    with pytest.raises(BringupInputError, match=r"role marker: marker_gpus is not an argument of the role"):
        input_check.validate(Project(project), "blocks.yml", two_local_nodes, {})
