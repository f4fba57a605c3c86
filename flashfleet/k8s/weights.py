"""Weight pre-download: the checkpoint (and the gated DFlash2 draft) into the model cache once.

With a ReadWriteMany claim one Job fills the shared cache and the servers are created after it
completes, so no server pulls several hundred GB itself. A host path or a ReadWriteOnce claim is
local to a node: there each server pod downloads into it in an init container, before its model
processes start (``hf download`` skips files the cache already has).
"""

from __future__ import annotations

from typing import Any

from flashfleet.catalog import DFLASH2_DRAFT
from flashfleet.k8s.containers import CACHE_VOLUME
from flashfleet.launch import CONTAINER_HF_CACHE, SECRET_ENV_NAMES
from flashfleet.recipes import Recipe

# huggingface_hub's CLI, in the SGLang images (huggingface_hub 1.x comes with Transformers 5).
HF_DOWNLOAD = ("hf", "download")


def repositories(recipe: Recipe) -> list[str]:
    """What the servers load: the checkpoint, and the DFlash2 draft beside it when selected."""
    repos = [recipe.model]
    if recipe.options.speculative == "dflash2":
        repos.append(DFLASH2_DRAFT)
    return repos


def _slug(repo: str) -> str:
    return repo.lower().replace("/", "-").replace(".", "-").replace("_", "-")[:50].strip("-")


def download_containers(recipe: Recipe, image: str, secret_name: str) -> list[dict[str, Any]]:
    env = [
        {"name": name, "valueFrom": {"secretKeyRef": {"name": secret_name, "key": name, "optional": True}}}
        for name in SECRET_ENV_NAMES
    ]
    return [
        {
            "name": f"weights-{_slug(repo)}"[:63].rstrip("-"),
            "image": image,
            "imagePullPolicy": "IfNotPresent",
            "command": [*HF_DOWNLOAD, repo],
            "env": env,
            "volumeMounts": [{"name": CACHE_VOLUME, "mountPath": CONTAINER_HF_CACHE}],
        }
        for repo in repositories(recipe)
    ]


def download_job(
    name: str,
    namespace: str,
    job_labels: dict[str, str],
    *,
    containers: list[dict[str, Any]],
    cache_volume: dict[str, Any],
    placement: dict[str, Any],
) -> dict[str, Any]:
    """A Job whose containers download one repository each, side by side."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": job_labels},
        "spec": {
            "backoffLimit": 4,
            "template": {
                "metadata": {"labels": job_labels},
                "spec": {
                    "restartPolicy": "OnFailure",
                    "containers": containers,
                    "volumes": [cache_volume],
                    **placement,
                },
            },
        },
    }
