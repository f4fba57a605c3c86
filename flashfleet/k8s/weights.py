"""Weight pre-download: the checkpoint (and the gated DFlash2 draft) into the model cache once.

With a ReadWriteMany claim one Job fills the shared cache and the servers are created after it
completes, so no server pulls several hundred GB itself. A host path or a ReadWriteOnce claim is
local to a node: there each server pod downloads into it in an init container, before its model
processes start (``hf download`` skips files the cache already has).

The downloads run on the source's small ``downloadImage``, never on the serving image: an init
container's image is pulled when the container starts, so a download on the serving image would
wait for the whole serving-image pull (75 GB for ROCm). A first init container installs the
pinned huggingface_hub release (the catalog's, which hosts install too) into a pod-local
directory with pip; each download then runs its ``hf`` with the host role's arguments. Both are
argv lists: no shell, and a repository name is one argv word. The token reaches ``hf`` as the
host role hands it over: a read-only file named by ``HF_TOKEN_PATH``, never an environment value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flashfleet.catalog import download_client
from flashfleet.k8s import resources
from flashfleet.k8s.containers import CACHE_VOLUME, TOKEN_MOUNT, token_env, token_volume
from flashfleet.launch import CONTAINER_HF_CACHE, SECRET_ENV_NAMES
from flashfleet.recipes import Recipe

CLIENT_VOLUME = "hf-client"
CLIENT_DIR = "/opt/flashfleet/hf-client"  # pip --target: packages here, console scripts in bin/
CLIENT_CONTAINER = "weights-client"
# The servers read HF_HOME's hub/ (the default cache): the downloads write exactly there.
HUB_DIR = f"{CONTAINER_HF_CACHE}/hub"
# As the host role runs it: no telemetry, no progress bars in the logs.
_QUIET = {"HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}


@dataclass(frozen=True)
class Downloads:
    """What a pod that downloads needs: the client install, one download per repository, and
    the pod-local volume between them."""

    install: dict[str, Any]  # an init container: before every download
    containers: list[dict[str, Any]]
    client_volume: dict[str, Any]
    token_volume: dict[str, Any]  # the stack's Secret as files (server pods mount it too)


def _slug(repo: str) -> str:
    return repo.lower().replace("/", "-").replace(".", "-").replace("_", "-")[:50].strip("-")


def download_argv(repo: str, revision: str | None = None) -> list[str]:
    """``hf download`` as roles/model_weights/tasks/start.yml runs it, from the same catalog facts;
    `revision`: the stack's locked commit of the repository (None: the catalog's revision)."""
    client = download_client()
    return [
        "python",  # the console script's own shebang is the image's Python anyway
        f"{CLIENT_DIR}/bin/hf",
        "download",
        repo,
        "--revision",
        revision or client.revision,
        "--cache-dir",
        HUB_DIR,
        "--max-workers",
        str(client.max_workers),
    ]


def install_argv() -> list[str]:
    return [
        "python",
        "-m",
        "pip",
        "install",
        "--no-cache-dir",
        "--disable-pip-version-check",
        "--target",
        CLIENT_DIR,
        f"huggingface_hub=={download_client().hub_version}",
    ]


def downloads(
    recipe: Recipe, image: str, secret_name: str, revisions: Mapping[str, str] | None = None
) -> Downloads:
    """The download containers on ``image`` (the source's downloadImage); ``revisions``: the
    stack's lock, repository -> commit (the files' hashes are checked on hosts only)."""
    revisions = revisions or {}
    client_mount = {"name": CLIENT_VOLUME, "mountPath": CLIENT_DIR}
    env: list[dict[str, Any]] = [
        {"name": "PYTHONPATH", "value": CLIENT_DIR},
        *({"name": k, "value": v} for k, v in _QUIET.items()),
        *token_env(SECRET_ENV_NAMES, "weights download"),
    ]
    install = {
        "name": CLIENT_CONTAINER,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": install_argv(),
        "resources": resources.CLIENT_INSTALL,
        "volumeMounts": [client_mount],
    }
    containers = [
        {
            "name": f"weights-{_slug(repo)}"[:63].rstrip("-"),
            "image": image,
            "imagePullPolicy": "IfNotPresent",
            "command": download_argv(repo, revisions.get(repo)),
            "env": env,
            "resources": resources.DOWNLOAD,
            "volumeMounts": [
                {"name": CACHE_VOLUME, "mountPath": CONTAINER_HF_CACHE},
                client_mount,
                dict(TOKEN_MOUNT),
            ],
        }
        for repo in recipe.repositories
    ]
    return Downloads(install, containers, {"name": CLIENT_VOLUME, "emptyDir": {}}, token_volume(secret_name))


def download_job(
    name: str,
    namespace: str,
    job_labels: dict[str, str],
    *,
    downloads: Downloads,
    cache_volume: dict[str, Any],
    placement: dict[str, Any],
) -> dict[str, Any]:
    """A Job whose containers download one repository each, side by side, after the client install."""
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
                    "initContainers": [downloads.install],
                    "containers": downloads.containers,
                    "volumes": [cache_volume, downloads.client_volume, downloads.token_volume],
                    "automountServiceAccountToken": False,
                    **placement,
                },
            },
        },
    }
