"""The LeaderWorkerSet controller manager beside the test control plane, as scripts/setup.d/46-lws.sh
builds it: it runs on the host (there is no pod network), serves its webhooks on loopback with a
certificate from the test CA, and the API server calls them by URL. Its own certificate
management (a Secret and the webhook configurations' caBundle, rotated in the cluster) is off:
the fixture writes both instead.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import yaml

CACHE = Path(os.environ.get("FLASHFLEET_LWS_CACHE", "/var/cache/flashfleet/lws"))


def ready() -> bool:
    return (CACHE / ".stamp").is_file()


def crds() -> list[Path]:
    return sorted((CACHE / "crds").glob("*.yaml"))


def config(*, webhook_port: int, cert_dir: Path, metrics_port: int, health_port: int) -> str:
    """The manager's Configuration: no leader election, no in-cluster cert rotation, loopback only."""
    return json.dumps({
        "apiVersion": "config.lws.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        "metrics": {"bindAddress": f"127.0.0.1:{metrics_port}"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
    })  # fmt: skip


def _patched(doc: dict[str, Any], patch: list[dict[str, Any]]) -> dict[str, Any]:
    """The release's kustomize patches: `replace /webhooks/N` (adds the pod webhooks'
    objectSelector, so that only LeaderWorkerSet pods go through them)."""
    for op in patch:
        if op["op"] != "replace" or not op["path"].startswith("/webhooks/"):
            raise ValueError(f"unexpected patch {op['op']} {op['path']}")
        doc["webhooks"][int(op["path"].rsplit("/", 1)[1])] = op["value"]
    return doc


def webhook_configurations(port: int, ca_pem: bytes) -> list[dict[str, Any]]:
    """The released webhook configurations, each service reference turned into a URL on loopback."""
    d = CACHE / "webhook"
    patches = {
        "MutatingWebhookConfiguration": yaml.safe_load((d / "mutating-patch.yaml").read_text()),
        "ValidatingWebhookConfiguration": yaml.safe_load((d / "validating-patch.yaml").read_text()),
    }
    ca = base64.b64encode(ca_pem).decode()
    out = []
    for released in yaml.safe_load_all((d / "manifests.yaml").read_text()):
        if not released:
            continue
        doc = _patched(released, patches[released["kind"]])
        doc["metadata"]["name"] = f"lws-{doc['metadata']['name']}"
        for hook in doc["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca}
        out.append(doc)
    return out
