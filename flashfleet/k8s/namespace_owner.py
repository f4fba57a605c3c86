"""A namespace a stack creates (`createNamespace: true`) is deleted by its `down`, with everything
in it. So a stack may only take a namespace that does not exist yet, or one it created itself.

pulumi-kubernetes 4.25 creates with a server-side apply, which takes over an existing object
silently: without this check, a namespace the user made (or another stack's) would be adopted and
deleted later. The evidence travels with the namespace: flashfleet annotates the one it creates
with the creating stack's name (CREATED_BY), and before the first resource the program reads the
namespace and refuses one without that mark. A namespace `down` kept (`teardown.keepCaches`)
carries the mark, so the next `up` takes it over again.
"""

from __future__ import annotations

from typing import Any

CREATED_BY = "flashfleet.dev/created-by"
FIELD = "flashfleet:stack.nodes.source.namespace"


class NamespaceRefused(Exception):
    """One line naming the namespace and the rule."""


def mark(stack: str) -> dict[str, str]:
    """The annotations of a namespace `stack` creates."""
    return {CREATED_BY: stack}


def refusal(stack: str, namespace: str, found: dict[str, Any] | None) -> str | None:
    """Why `stack` must not create `namespace` as the API server holds it (None: absent, or its own)."""
    if found is None:
        return None
    creator = ((found.get("metadata") or {}).get("annotations") or {}).get(CREATED_BY)
    if creator == stack:
        return None
    who = f"stack {creator} created it, not {stack}" if creator else "flashfleet did not create it"
    return (
        f"{FIELD}: namespace {namespace} already exists and {who}; with createNamespace: true "
        f"`down` would delete it and everything in it: set createNamespace: false to deploy into it, "
        f"or name a namespace that does not exist (if this stack did create it, "
        f"`kubectl annotate namespace {namespace} {CREATED_BY}={stack}`) [rule: namespace-not-ours]"
    )


def read_namespace(context: str | None, namespace: str) -> dict[str, Any] | None:
    """The namespace as the API server holds it (JSON), None when there is none. Through the
    kubeconfig context the provider uses; raises when it cannot be read."""
    import json

    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    core = client.CoreV1Api(config.new_client_from_config(context=context))  # type: ignore[no-untyped-call]
    try:
        resp: Any = core.read_namespace(namespace, _preload_content=False, _request_timeout=15)  # raw JSON
    except ApiException as err:
        if err.status == 404:
            return None
        raise
    found: dict[str, Any] = json.loads(resp.data)
    return found


def check(stack: str, source: Any) -> None:
    """Before any resource: a stack that creates its namespace finds none, or its own."""
    from flashfleet.stack.kubernetes_source import KubernetesSource

    if not isinstance(source, KubernetesSource) or not source.create_namespace:
        return
    try:
        found = read_namespace(source.context, source.namespace)
    except Exception as err:  # no kubeconfig, no access, no answer: no evidence either way
        first = (str(err).strip().splitlines() or [""])[0][:160]
        raise NamespaceRefused(
            f"{FIELD}: namespace {source.namespace} cannot be read ({type(err).__name__}: {first}); "
            "createNamespace: true needs to know whether it exists and who made it "
            "[rule: namespace-unreadable]"
        ) from None
    why = refusal(stack, source.namespace, found)
    if why:
        raise NamespaceRefused(why)
