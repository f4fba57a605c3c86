"""The strict ``kubernetes`` source model, and every catalog stack rendered onto it (issue 9's
contract: the container spec carries the launch's image, argv and environment names)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from k8s_cases import POOLS, containers, pod_specs, source
from k8s_schema import validate
from pydantic import ValidationError

from flashfleet.catalog import download_client, hardware_catalog
from flashfleet.k8s import plan_kubernetes
from flashfleet.k8s.containers import MOONCAKE_HOSTNAME_ENV, TOKEN_FILE_ENV
from flashfleet.planning import load_stack
from flashfleet.stack import list_stacks, safe_values
from flashfleet.stack.kubernetes_source import HostPathCache, KubernetesSource, PvcCache


def test_minimal_source() -> None:
    src = source()
    assert src.context is None
    assert src.create_namespace
    assert not src.leader_worker_set
    assert isinstance(src.model_cache, PvcCache)
    assert src.model_cache.access_mode == "ReadWriteMany"
    assert isinstance(
        source(modelCache={"kind": "hostPath", "path": "/mnt/nvme/hf-cache"}).model_cache, HostPathCache
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"namespce": "glm"}, "namespce"),
        ({"namespace": "GLM_models"}, "DNS label"),
        ({"nodePools": {"b200": POOLS["gb300"]}}, "unknown hardware b200"),
        ({"nodePools": {}}, "at least 1"),
        ({"modelCache": {"kind": "pvc", "storageClass": "x", "size": "800GB"}}, "Gi or Ti"),
        ({"modelCache": {"kind": "hostPath", "path": "relative/dir"}}, "absolute"),
        ({"modelCache": {"kind": "nfs", "path": "/x"}}, "kind"),
        ({"serviceType": "NodePort"}, "serviceType"),
        (
            {"nodePools": {"gb300": {"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}}},
            "no value",
        ),
        ({"nodePools": {"gb300": {"nodeSelector": {"bad key!": "x"}}}}, "label key"),
        ({"nodePools": {"gb300": {"rdmaResources": {"efa": 1}}}}, "domain/name"),
        # the API server refuses the quota prefix (tests/k8s/cluster/test_api_server.py); no
        # device plugin registers a kubernetes.io resource
        (
            {"nodePools": {"gb300": {"rdmaResources": {"requests.example.com/efa": 1}}}},
            "not an extended resource",
        ),
        ({"nodePools": {"gb300": {"rdmaResources": {"kubernetes.io/efa": 1}}}}, "not an extended resource"),
        (
            {"nodePools": {"gb300": {"rdmaResources": {"rdma.kubernetes.io/hca": 1}}}},
            "not an extended resource",
        ),
        ({"nodePools": {"gb300": {"gpusPerNode": 0}}}, "gpusPerNode"),
        ({"nodePools": {"gb300": {"node_selector": {}}}}, "node_selector"),
    ],
)
def test_refused(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        source(**change)


def test_frozen() -> None:
    with pytest.raises(ValidationError):
        source().namespace = "other"  # type: ignore[misc]


def _kubernetes_source(nodes: int) -> KubernetesSource:
    return KubernetesSource.model_validate(
        {
            "kind": "kubernetes",
            "namespace": "glm",
            "nodePools": POOLS,
            "modelCache": {"kind": "pvc", "storageClass": "fsx", "size": "2Ti"},
            "leaderWorkerSet": nodes > 1,
        }
    )


@pytest.mark.parametrize("stack", list_stacks())
def test_every_catalog_stack_on_kubernetes(stack: str) -> None:
    """The same bring-up, moved onto a Kubernetes source: containers are the launches."""
    b = load_stack(stack)
    settings = b.launch_settings()
    settings = settings.model_copy(update={"image": settings.image.model_copy(update={"derived": False})})
    plan = plan_kubernetes(
        stack,
        _kubernetes_source(b.spec.nodes.count),
        hardware=b.spec.hardware,
        nodes=b.spec.nodes.count,
        recipe_for=b.recipe_for,
        settings=settings,
        mooncake=b.spec.mooncake,
    )
    seen: dict[str, dict[str, Any]] = {}
    for obj in plan.objects:
        validate(obj)
        for pod in pod_specs(obj):
            seen.update(containers(pod))
    for launch in plan.launches:
        # An LWS worker template carries rank 1's name (server-1, replica-0-rank-1).
        c = seen[launch.name] if launch.name in seen else seen[re.sub(r"\d+$", "1", launch.name)]
        assert c["image"] == launch.image == settings.image.ref(hardware_catalog()[b.spec.hardware])
        words = [w.replace("$(LWS_WORKER_INDEX)", str(launch.rank)) for w in c["command"]]
        assert words == list(launch.argv)
        names = [e["name"] for e in c["env"]]
        extra = [MOONCAKE_HOSTNAME_ENV] if b.spec.mooncake else []
        assert names == [*launch.env, *(TOKEN_FILE_ENV[n] for n in launch.secret_env_names), *extra]


def test_download_and_pause_images_default_to_the_catalogs_pins() -> None:
    src = source()
    client = download_client()
    assert (src.download_image, src.pause_image) == (client.download_image, client.pause_image)
    # the catalog's own values pass the rule a stack's would
    for image in (client.download_image, client.pause_image):
        assert safe_values.pinned_image(image) == image


@pytest.mark.parametrize(
    "image",
    [
        "python:3.12.12-slim-bookworm",
        "mirror.example.com:5000/library/python:3.12.12-slim",
        "python@sha256:" + "a" * 64,
        "python:3.12-slim@sha256:" + "0" * 64,
    ],
)
def test_pinned_download_images_are_accepted(image: str) -> None:
    assert source(downloadImage=image).download_image == image


@pytest.mark.parametrize(
    ("field", "image", "rule"),
    [
        ("downloadImage", "python", "floats"),
        ("downloadImage", "python:latest", "floats"),
        ("downloadImage", "mirror.example.com:5000/python", "floats"),
        ("downloadImage", "python:3.12@sha256:abc", "digest"),
        ("downloadImage", "Python:3.12", "not a pinned image"),
        ("downloadImage", "python:3.12; rm -rf /", "not a pinned image"),
        ("pauseImage", "registry.k8s.io/pause", "floats"),
    ],
)
def test_floating_or_malformed_images_are_refused(field: str, image: str, rule: str) -> None:
    with pytest.raises(ValidationError) as err:
        source(**{field: image})
    (error,) = err.value.errors()
    assert error["loc"] == (field,)
    assert rule in error["msg"]
