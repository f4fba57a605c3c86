"""The weights download on a small image of its own and the serving image pre-pulled beside it,
in both cache modes: placement as the servers', flashfleet's labels, no token but by reference."""

from __future__ import annotations

import json
from typing import Any

import pytest
from k8s_cases import (
    ALL,
    GB300_LOWLAT,
    HOST_PATH,
    MI355X_AGENTX,
    Case,
    containers,
    objects_of,
    pod_specs,
    source,
)

from flashfleet.catalog import download_client
from flashfleet.k8s import names
from flashfleet.k8s.weights import CLIENT_CONTAINER

SERVING_KINDS = ("Deployment", "StatefulSet", "LeaderWorkerSet")


def _servers(case: Case) -> list[dict[str, Any]]:
    plan = case.plan()
    return [
        pod
        for obj in plan.objects
        if obj["kind"] in SERVING_KINDS and obj["metadata"]["name"] in plan.workloads
        for pod in pod_specs(obj)
    ]


def _download_containers(case: Case) -> list[dict[str, Any]]:
    """Every container that installs the client or downloads weights (Job or server init containers)."""
    out = []
    for obj in case.plan().objects:
        for pod in pod_specs(obj):
            out += [c for n, c in containers(pod).items() if n.startswith("weights-")]
    return out


@pytest.mark.parametrize("case", ALL, ids=lambda c: c.stack)
def test_downloads_never_run_the_serving_image(case: Case) -> None:
    serving = {launch.image for launch in case.plan().launches}
    found = _download_containers(case)
    assert found
    assert {c["image"] for c in found} == {download_client().download_image}
    assert not {c["image"] for c in found} & serving
    assert [c["name"] for c in found if c["name"] == CLIENT_CONTAINER]  # the install comes too


@pytest.mark.parametrize("case", ALL, ids=lambda c: c.stack)
def test_the_pre_pull_runs_the_serving_image_where_the_servers_run(case: Case) -> None:
    plan = case.plan()
    (ds,) = objects_of(plan, "DaemonSet")
    assert ds["metadata"]["name"] == names.pre_pull(case.stack)
    assert ds["metadata"]["labels"] == names.labels(case.stack, "prepull")
    template = ds["spec"]["template"]
    assert (
        template["metadata"]["labels"] | ds["spec"]["selector"]["matchLabels"]
        == template["metadata"]["labels"]
    )
    pod = template["spec"]
    pulls = pod["initContainers"]
    assert sorted(c["image"] for c in pulls) == sorted({launch.image for launch in plan.launches})
    assert all(c["command"] == ["true"] for c in pulls)
    (pause,) = pod["containers"]
    assert pause["image"] == download_client().pause_image
    for c in [*pulls, pause]:
        assert "env" not in c
        assert "volumeMounts" not in c
        assert set(c["resources"]["limits"]) == {"cpu", "memory"}  # no GPU: the servers keep every one
    assert "volumes" not in pod
    for server in _servers(case):
        for key in ("nodeSelector", "tolerations", "affinity"):
            assert pod.get(key) == server.get(key), key
    # Not selected by any Service or serving workload: its pods are not the servers'.
    for obj in plan.objects:
        selector = obj.get("spec", {}).get("selector", {})
        selector = selector.get("matchLabels", selector)
        if obj is not ds and selector:
            assert not selector.items() <= template["metadata"]["labels"].items(), obj["metadata"]["name"]


@pytest.mark.parametrize("case", [GB300_LOWLAT, MI355X_AGENTX], ids=["ReadWriteMany Job", "hostPath init"])
def test_download_image_is_the_sources_option(case: Case) -> None:
    mirror = "mirror.example.com/library/python:3.12.12-slim-bookworm"
    pause = "mirror.example.com/pause:3.10.1"
    changed = Case(
        case.stack,
        case.hardware,
        case.strategy,
        options=case.options,
        source=source(
            modelCache=case.source.model_cache.model_dump(by_alias=True),
            downloadImage=mirror,
            pauseImage=pause,
        ),
    )
    assert {c["image"] for c in _download_containers(changed)} == {mirror}
    (ds,) = objects_of(changed.plan(), "DaemonSet")
    assert ds["spec"]["template"]["spec"]["containers"][0]["image"] == pause


def test_the_client_install_runs_before_every_download_in_both_modes() -> None:
    for case in (GB300_LOWLAT, Case("h", "gb300", "low-latency", source=source(modelCache=HOST_PATH))):
        plan = case.plan()
        pods = [
            p
            for o in plan.objects
            for p in pod_specs(o)
            if any(n.startswith("weights-") for n in containers(p))
        ]
        (pod,) = pods
        first = pod["initContainers"][0]
        assert first["name"] == CLIENT_CONTAINER
        request = json.loads(first["command"][3])
        assert (request["repos"], request["hub_version"]) == ([], download_client().hub_version)
        assert "env" not in first  # pip needs no token
        client = {m["mountPath"] for m in first["volumeMounts"]}
        for c in containers(pod).values():
            if c["name"].startswith("weights-") and c is not first:
                assert client <= {m["mountPath"] for m in c["volumeMounts"]}
                assert c["command"][:2] == first["command"][:2]  # the same program
                assert json.loads(c["command"][3])["venv"] == request["venv"]  # its client
