"""Playbooks and roles take what Python decided; they never compute it again from an argv list,
a URL string or a hard-coded default (grep-level: the text of every playbook, task file, vars
file and template). And the derived image is named once: the ref the sglang_image role builds is
the ref the serving units run, by construction."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from flashfleet.inventory import build_inventory
from flashfleet.planning import load_stack
from flashfleet.stack import KubernetesSource, list_stacks

ROOT = Path(__file__).resolve().parents[2]
ANSIBLE_FILES = sorted(
    p
    for p in [*ROOT.glob("playbooks/*.yml"), *ROOT.glob("roles/*/*/*.yml"), *ROOT.glob("roles/*/templates/*")]
)
HOST_STACKS = [s for s in list_stacks() if not isinstance(load_stack(s).spec.nodes.source, KubernetesSource)]

# What re-deriving a Python fact looks like in Jinja, and which fact it re-derives.
REPARSING = {
    r"argv\.index\(": "a value found by its position in an argv list (rank, port...)",
    r"'--node-rank'|\"--node-rank\"": "the rank, from argv (launch.rank / serves_http)",
    r"'--encoder-only'|\"--encoder-only\"": "the encoder role, from argv (launch.serves_api)",
    r"'--reasoning-parser'|'--tool-call-parser'": "a parser switch, from argv (flashfleet_reasoning...)",
    r"(address|server|url)\.rsplit\(": "a port or host, split out of an address (flashfleet_mooncake_layout)",
    r"regex_replace\([^)]*\\\\d\+": "a number, regexed out of a URL (flashfleet_mooncake_layout)",
    r"MC_STORE_USE_HUGEPAGE": "hugepages, from a process environment (mooncake_layout.hugepages_gib)",
    r"\b9003\b": "the Mooncake metrics port, hard-coded (mooncake_layout.metrics_port)",
    r"_driver_profiles": "the driver profile per hardware (the hardware catalog, flashfleet_driver)",
    r"regex_search\('\^v\(": "the SGLang release, regexed out of the image tag (flashfleet_image_derived.release)",
}


def findings(files: list[Path]) -> list[str]:
    out = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        for pattern, what in REPARSING.items():
            for match in re.finditer(pattern, text):
                line = text.count("\n", 0, match.start()) + 1
                out.append(f"{path.relative_to(path.parents[2])}:{line}: {what}")
    return out


def test_no_playbook_or_role_reparses_what_python_decided() -> None:
    # Role defaults and argument specs may document a default; they compute nothing.
    computed = [p for p in ANSIBLE_FILES if p.parent.name not in ("defaults", "meta")]
    assert findings(computed) == []


@pytest.mark.parametrize(
    "text",
    [
        "when: \"'--node-rank' not in __launch.argv\"",
        "port: \"{{ _layout.master_server_address.rsplit(':', 1) | last }}\"",
        "_metrics: 9003",
        "_v: \"{{ _tag | regex_search('^v(\\\\d+)', '\\\\1') }}\"",
        "x: \"{{ url | regex_replace('^.*:(\\\\d+)/.*$', '\\\\1') }}\"",
    ],
)
def test_the_grep_finds_what_it_is_meant_to(tmp_path: Path, text: str) -> None:
    path = tmp_path / "a" / "b" / "tasks.yml"
    path.parent.mkdir(parents=True)
    path.write_text(text + "\n")
    assert len(findings([path])) >= 1


def _role_vars(playbook: str, role: str) -> dict[str, str]:
    """What the first play of `playbook` that applies `role` gives it (its vars: one role a play)."""
    from flashfleet.bringup.playbook_walk import role_uses
    from flashfleet.bringup.project import DEFAULT_PROJECT

    for use in role_uses(DEFAULT_PROJECT, playbook):
        if use.role == role:
            return dict(use.variables)
    raise AssertionError(f"{playbook} runs no {role}")


@pytest.mark.parametrize("stack", HOST_STACKS)
def test_the_role_builds_the_image_the_units_run(stack: str) -> None:
    plan = load_stack(stack)
    inventory = build_inventory(plan, ["192.0.2.1"] * len(plan.nodes), ["10.0.0.1"] * len(plan.nodes))
    # prepare.yml hands the role the inventory's ref as it is; the role builds its argument as given.
    assert (
        _role_vars("prepare.yml", "sglang_image")["sglang_image_derived"]
        == "{{ flashfleet_image_derived.ref }}"
    )
    assert (
        _role_vars("prepare.yml", "sglang_image")["sglang_image_release"]
        == "{{ flashfleet_image_derived.release }}"
    )
    build = (ROOT / "roles/sglang_image/tasks/build.yml").read_text()
    # (the build's argv is one expression: pip's location joins it as build arguments)
    assert re.search(r"\['docker', 'build', '-t', sglang_image_derived,", build)
    for hvars in inventory["all"]["hosts"].values():
        derived = hvars["flashfleet_image_derived"]
        assert derived is not None  # every host stack of the catalog runs the derived image
        assert derived["release"] == plan.spec.image.version  # the role checks flashfleet's release
        assert {launch["image"] for launch in hvars["flashfleet_processes"]} == {derived["ref"]}
        assert all(launch["docker_run"][-len(launch["argv"]) - 1] == derived["ref"]
                   for launch in hvars["flashfleet_processes"])  # fmt: skip


def test_the_driver_profile_comes_from_the_catalog() -> None:
    mapped = _role_vars("prepare.yml", "nvidia_driver")
    for arg in ("branch", "version", "open_kernel_modules", "fabricmanager", "imex"):
        assert mapped[f"nvidia_driver_{arg}"] == f"{{{{ _driver.{arg} }}}}"


def test_the_download_client_is_the_catalogs_on_hosts_and_on_clusters() -> None:
    # One pin (flashfleet/catalog/downloads.toml): prepare.yml maps it onto model_weights from the
    # inventory, the role's own defaults agree with it, and the Kubernetes downloads run it.
    from flashfleet.catalog import download_client
    from flashfleet.k8s.weights import fetch_request
    from flashfleet.launch import LaunchSettings

    client = download_client()
    defaults = yaml.safe_load((ROOT / "roles/model_weights/defaults/main.yml").read_text())
    assert (
        defaults["model_weights_hub_version"],
        defaults["model_weights_revision"],
        defaults["model_weights_max_workers"],
    ) == (client.hub_version, client.revision, client.max_workers)
    mapped = _role_vars("prepare.yml", "model_weights")
    assert mapped["model_weights_hub_version"] == "{{ flashfleet_weights_client.hub_version }}"
    assert mapped["model_weights_revision"] == "{{ flashfleet_weights_client.revision }}"
    assert mapped["model_weights_max_workers"] == "{{ flashfleet_weights_client.max_workers }}"
    one_node = next(s for s in HOST_STACKS if load_stack(s).spec.nodes.count == 1)
    hosts = build_inventory(load_stack(one_node), ["198.51.100.1"], ["10.0.0.1"])
    (facts,) = [h["flashfleet_weights_client"] for h in hosts["all"]["hosts"].values()][:1]
    assert facts == {
        "hub_version": client.hub_version,
        "revision": client.revision,
        "max_workers": client.max_workers,
        "lock": None,  # the catalog stack has no lock: the client is pinned by version alone
    }
    # the Kubernetes downloads run the role's own program, with the same request
    request = fetch_request(["org/repo"], LaunchSettings())
    assert (request["hub_version"], request["revision"], request["max_workers"]) == (
        client.hub_version,
        client.revision,
        client.max_workers,
    )
