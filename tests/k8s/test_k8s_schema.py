"""Every rendered manifest validates against the Kubernetes 1.37 OpenAPI schema, offline and
strict; the same check rejects broken manifests."""

from __future__ import annotations

import copy
from typing import Any

import jsonschema
import pytest
from k8s_cases import ALL, GB300_LOWLAT, H200_L3, Case, objects_of
from k8s_schema import validate


def _ids(case: Case) -> str:
    return case.stack


@pytest.mark.parametrize("case", ALL, ids=_ids)
def test_every_manifest_validates(case: Case) -> None:
    objects = case.plan().objects
    assert objects
    for manifest in objects:
        validate(manifest)


def _server_container(manifest: dict[str, Any]) -> dict[str, Any]:
    return manifest["spec"]["template"]["spec"]["containers"][0]  # type: ignore[no-any-return]


def _deployment() -> dict[str, Any]:
    return copy.deepcopy(objects_of(GB300_LOWLAT.plan(), "Deployment")[0])


def test_string_where_an_int_is_required_is_rejected() -> None:
    broken = _deployment()
    _server_container(broken)["ports"][0]["containerPort"] = "30000"
    with pytest.raises(jsonschema.ValidationError, match="30000"):
        validate(broken)


def test_unknown_field_is_rejected() -> None:
    broken = _deployment()
    _server_container(broken)["shmSize"] = "32g"  # a docker option, not a container field
    with pytest.raises(jsonschema.ValidationError, match="shmSize"):
        validate(broken)


def test_probe_threshold_must_be_an_integer() -> None:
    broken = _deployment()
    _server_container(broken)["startupProbe"]["failureThreshold"] = 720.5
    with pytest.raises(jsonschema.ValidationError):
        validate(broken)


def test_leader_worker_set_templates_are_checked_as_pod_templates() -> None:
    (lws,) = objects_of(H200_L3.plan(), "LeaderWorkerSet")
    validate(lws)
    broken = copy.deepcopy(lws)
    worker = broken["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    worker["command"] = "sglang serve"  # a shell string, not an argv list
    with pytest.raises(jsonschema.ValidationError, match="sglang serve"):
        validate(broken)
