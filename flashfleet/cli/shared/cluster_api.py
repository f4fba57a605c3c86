"""A Kubernetes stack's cluster, read through the kubeconfig context the provider uses (the
kubernetes client, imported here only: `up` of a Kubernetes stack is its one user). Objects come
back as the API server's JSON, which flashfleet.k8s reads."""

from __future__ import annotations

import json
from typing import Any


def _core(context: str | None) -> Any:
    from kubernetes import client, config

    return client.CoreV1Api(config.new_client_from_config(context=context))  # type: ignore[no-untyped-call]


def _items(resp: Any) -> list[dict[str, Any]]:
    return list(json.loads(resp.data)["items"])  # raw JSON (_preload_content=False)


def nodes(context: str | None) -> list[dict[str, Any]]:
    """Every node (raises on no kubeconfig, no access, or no answer)."""
    return _items(_core(context).list_node(_preload_content=False, _request_timeout=15))


class Pods:
    """One namespace's pods by label, from one client (the pending watch polls it)."""

    def __init__(self, context: str | None, namespace: str, selector: str) -> None:
        self._core, self.namespace, self.selector = _core(context), namespace, selector

    def list(self) -> list[dict[str, Any]]:
        resp = self._core.list_namespaced_pod(
            self.namespace, label_selector=self.selector, _preload_content=False, _request_timeout=10
        )
        return _items(resp)


def serving_objects(
    context: str | None, namespace: str, selector: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The namespace's Deployments, StatefulSets and LeaderWorkerSets (each with its ``kind``)
    and pods, by label (`status` judges them: flashfleet.k8s.readiness)."""
    from kubernetes import client, config

    api = config.new_client_from_config(context=context)  # type: ignore[no-untyped-call]
    apps, custom = client.AppsV1Api(api), client.CustomObjectsApi(api)
    opts: dict[str, Any] = {"label_selector": selector, "_preload_content": False, "_request_timeout": 15}
    objects: list[dict[str, Any]] = []
    for kind, items in (
        ("Deployment", _items(apps.list_namespaced_deployment(namespace, **opts))),
        ("StatefulSet", _items(apps.list_namespaced_stateful_set(namespace, **opts))),
    ):
        objects += [{**item, "kind": kind} for item in items]
    try:
        sets = custom.list_namespaced_custom_object(
            "leaderworkerset.x-k8s.io", "v1", namespace, "leaderworkersets", **opts
        )
        objects += [{**item, "kind": "LeaderWorkerSet"} for item in _items(sets)]
    except client.ApiException as err:
        if err.status != 404:  # no LeaderWorkerSet CRD: the stack has none either
            raise
    pods = Pods(context, namespace, selector).list()
    return objects, pods
