"""Weight pre-download: the checkpoint (and the gated DFlash2 draft) into the model cache once.

With a ReadWriteMany claim one Job fills the shared cache and the servers are created after it
completes, so no server pulls several hundred GB itself. A host path or a ReadWriteOnce claim is
local to a node: there each server pod downloads into it in an init container, before its model
processes start (``hf download`` skips files the cache already has).

The downloads run on the source's small ``downloadImage``, never on the serving image: an init
container's image is pulled when the container starts, so a download on the serving image would
wait for the whole serving-image pull (75 GB for ROCm). Every container runs the hosts' own
download program (roles/model_weights/files/weights_fetch.py), its request as an argument,
from one ConfigMap of the stack mounted read-only (named, not inlined in every container's argv),
so pods and hosts enforce the stack's lock alike: a first init container installs the pinned
huggingface_hub release into a pod-local venv (from the lock's files, in pip's hash-checking
mode, when the stack is locked); each download then fetches its repository at the locked commit
and checks every file against the lock, and a file that differs fails the container, named. Both
are argv lists: no shell, and a repository name is one JSON string. The token reaches ``hf`` as
the host role hands it over: the Secret's read-only file, named by ``HF_TOKEN_PATH``, never an
environment value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from flashfleet.catalog import download_client
from flashfleet.k8s import names, resources
from flashfleet.k8s.containers import CACHE_VOLUME, TOKEN_DIR, TOKEN_MOUNT, token_env, token_volume
from flashfleet.k8s.pod_security import restricted
from flashfleet.launch import CONTAINER_HF_CACHE, SECRET_ENV_NAMES, LaunchSettings
from flashfleet.recipes import Recipe

CLIENT_VOLUME = "hf-client"
CLIENT_DIR = "/opt/flashfleet/hf-client"  # the client's venv, pod-local
CLIENT_CONTAINER = "weights-client"
# The servers read HF_HOME's hub/ (the default cache): the downloads write exactly there.
HUB_DIR = f"{CONTAINER_HF_CACHE}/hub"
HUB_ENDPOINT = "https://huggingface.co"
# As the hosts' role gives it (model_weights_timeout_s): the program stops its downloads then.
TIMEOUT_S = 14400
# The hosts' download program, run by every download container as it is, from a ConfigMap.
FETCH_PROGRAM = Path(__file__).resolve().parents[2] / "roles/model_weights/files/weights_fetch.py"
PROGRAM_KEY = FETCH_PROGRAM.name
PROGRAM_VOLUME = "weights-fetch"
PROGRAM_DIR = "/opt/flashfleet/weights-fetch"


@dataclass(frozen=True)
class Downloads:
    """What a pod that downloads needs: the client install, one download per repository, and
    the pod-local volume between them."""

    install: dict[str, Any]  # an init container: before every download
    containers: list[dict[str, Any]]
    client_volume: dict[str, Any]
    program_volume: dict[str, Any]  # the download program's ConfigMap, read-only
    token_volume: dict[str, Any]  # the stack's Secret as files (server pods mount it too)


def _slug(repo: str) -> str:
    return repo.lower().replace("/", "-").replace(".", "-").replace("_", "-")[:50].strip("-")


def fetch_request(repos: list[str], settings: LaunchSettings) -> dict[str, Any]:
    """The request weights_fetch.py takes, as roles/model_weights/tasks/start.yml builds it on a
    host, from the same catalog facts and the stack's lock; [] repositories: the client only."""
    client, locked = download_client(), settings.client_lock
    weights = {r: e.model_dump(mode="json") for r, e in settings.weights_lock.items() if r in repos}
    return {
        "repos": repos,
        "revision": client.revision,
        "lock": weights,
        "cache_dir": CONTAINER_HF_CACHE,
        "hub_dir": HUB_DIR,
        "marker_dir": f"{CONTAINER_HF_CACHE}/.flashfleet-complete",
        "venv": CLIENT_DIR,
        "hub_version": locked.version if locked is not None else client.hub_version,
        "hub_sha256": locked.sha256s if locked is not None else [],
        "pip_args": [],
        "endpoint": HUB_ENDPOINT,
        "max_workers": client.max_workers,
        "token_file": f"{TOKEN_DIR}/HF_TOKEN",
        "keep_token_file": True,  # the Secret's read-only file, not the program's to remove
        "timeout_s": TIMEOUT_S,
    }


@cache
def _program() -> str:
    """The download program's text: read once, however many containers and views use it."""
    return FETCH_PROGRAM.read_text()


def fetch_command(request: dict[str, Any]) -> list[str]:
    """The container's argv: the download program, from its ConfigMap, and its request (python:
    the image's own)."""
    return ["python", f"{PROGRAM_DIR}/{PROGRAM_KEY}", "--request", json.dumps(request, sort_keys=True)]


def program_config(stack: str, namespace: str) -> dict[str, Any]:
    """The ConfigMap that holds the download program once for every container that runs it."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": names.weights_program(stack),
            "namespace": namespace,
            "labels": names.labels(stack, "weights"),
        },
        "data": {PROGRAM_KEY: _program()},
    }


def downloads(
    recipe: Recipe, image: str, secret_name: str, settings: LaunchSettings, program: str
) -> Downloads:
    """The download containers on ``image`` (the source's downloadImage), with the stack's lock
    as ``settings`` carries it; ``program``: the name of the ConfigMap of ``program_config``."""
    client_mount = {"name": CLIENT_VOLUME, "mountPath": CLIENT_DIR}
    program_mount = {"name": PROGRAM_VOLUME, "mountPath": PROGRAM_DIR, "readOnly": True}
    install = {
        "name": CLIENT_CONTAINER,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": fetch_command(fetch_request([], settings)),
        "resources": resources.CLIENT_INSTALL,
        "volumeMounts": [client_mount, program_mount],
        "securityContext": restricted(),
    }
    containers = [
        {
            "name": f"weights-{_slug(repo)}"[:63].rstrip("-"),
            "image": image,
            "imagePullPolicy": "IfNotPresent",
            "command": fetch_command(fetch_request([repo], settings)),
            "env": token_env(SECRET_ENV_NAMES, "weights download"),
            "resources": resources.DOWNLOAD,
            "securityContext": restricted(),
            "volumeMounts": [
                {"name": CACHE_VOLUME, "mountPath": CONTAINER_HF_CACHE},
                client_mount,
                program_mount,
                dict(TOKEN_MOUNT),
            ],
        }
        for repo in recipe.repositories
    ]
    program_volume = {"name": PROGRAM_VOLUME, "configMap": {"name": program, "defaultMode": 0o444}}
    return Downloads(
        install,
        containers,
        {"name": CLIENT_VOLUME, "emptyDir": {}},
        program_volume,
        token_volume(secret_name),
    )


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
                    "volumes": [
                        cache_volume,
                        downloads.client_volume,
                        downloads.program_volume,
                        downloads.token_volume,
                    ],
                    "automountServiceAccountToken": False,
                    **placement,
                },
            },
        },
    }
