"""Kubernetes node source: the stack's recipe served on a GPU cluster the user already has.

One ComponentResource; it creates the objects ``flashfleet.k8s.plan_kubernetes`` renders, plus
the Secret made from the Pulumi secret HF token, with pulumi-kubernetes. The provider (kubeconfig
context) comes through ``opts`` and reaches every child through ``parent=self``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from flashfleet.k8s import KubernetesPlan, names, plan_kubernetes
from flashfleet.k8s.manifests import RecipeFor
from flashfleet.launch import LaunchSettings
from flashfleet.recipes.layouts import api_base
from flashfleet.stack.kubernetes_source import KubernetesSource
from flashfleet.stack.spec import Mooncake

# Weight download and model loading take far longer than pulumi-kubernetes' default 10 minutes.
SERVE_TIMEOUTS = pulumi.CustomTimeouts(create="3h", update="3h")

_Factory = Callable[[str, dict[str, Any], pulumi.ResourceOptions], pulumi.CustomResource]


def _typed(cls: Any) -> _Factory:
    def make(name: str, obj: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
        fields = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
        return cls(name, **fields, opts=opts)  # type: ignore[no-any-return]

    return make


def _custom(name: str, obj: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    return k8s.apiextensions.CustomResource(
        name,
        api_version=obj["apiVersion"],
        kind=obj["kind"],
        metadata=obj["metadata"],
        spec=obj["spec"],
        opts=opts,
    )


_FACTORIES: dict[str, _Factory] = {
    "Namespace": _typed(k8s.core.v1.Namespace),
    "PersistentVolumeClaim": _typed(k8s.core.v1.PersistentVolumeClaim),
    "ConfigMap": _typed(k8s.core.v1.ConfigMap),
    "Service": _typed(k8s.core.v1.Service),
    "Deployment": _typed(k8s.apps.v1.Deployment),
    "StatefulSet": _typed(k8s.apps.v1.StatefulSet),
    "DaemonSet": _typed(k8s.apps.v1.DaemonSet),
    "Job": _typed(k8s.batch.v1.Job),
    "NetworkPolicy": _typed(k8s.networking.v1.NetworkPolicy),
    # resource.k8s.io/v1 (DRA, GA in Kubernetes 1.34) postdates the typed SDK of the pinned
    # provider; its generic resource sends the object as rendered
    "ResourceClaimTemplate": _custom,
    "LeaderWorkerSet": _custom,
    "PodGroup": _custom,  # the Workload API's (scheduling.k8s.io/v1alpha2), gang scheduling
}
_AWAITED = {"Deployment", "StatefulSet", "Job"}
# The pre-pull DaemonSet only saves time: `up` never waits for it (nor for a pool node that cannot
# take its pod), and nothing depends on it. A server pulls its image itself if it must.
_NOT_AWAITED = {"DaemonSet"}
SKIP_AWAIT = "pulumi.com/skipAwait"


@dataclass(frozen=True)
class KubernetesClusterArgs:
    source: KubernetesSource
    hardware: str
    nodes: int
    recipe_for: RecipeFor
    """``StackPlan.recipe_for``: the stack's recipe with the ranks' addresses."""
    launch_settings: LaunchSettings
    mooncake: Mooncake | None = None
    hf_token: pulumi.Input[str] | None = None
    """The ``flashfleet:hfToken`` secret; it only ever reaches the cluster as a Secret."""
    keep_cache: bool = True
    """``teardown.keepCaches``: `down` leaves the model cache claim (and the namespace the stack
    made, whose deletion would take the claim with it); the next `up` takes them over again."""


def kubernetes_provider(name: str, source: KubernetesSource) -> k8s.Provider | None:
    """The provider for the source's kubeconfig context, or None for the default provider."""
    if source.context is None:
        return None
    return k8s.Provider(f"{name}-k8s", context=source.context)


class KubernetesCluster(pulumi.ComponentResource):
    endpoint: pulumi.Output[str]
    """The OpenAI-compatible base URL (``.../v1``): in-cluster DNS, or the load balancer."""
    namespace: pulumi.Output[str]
    workloads: pulumi.Output[list[str]]
    """The Deployments, StatefulSets or LeaderWorkerSets that serve the model (a cluster's router last)."""

    def __init__(
        self, name: str, args: KubernetesClusterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("flashfleet:nodes:KubernetesCluster", name, {}, opts)
        self.plan: KubernetesPlan = plan_kubernetes(
            name,
            args.source,
            hardware=args.hardware,
            nodes=args.nodes,
            recipe_for=args.recipe_for,
            settings=args.launch_settings,
            mooncake=args.mooncake,
        )
        plan = self.plan
        self.resources: dict[str, pulumi.CustomResource] = {}
        namespace: list[pulumi.Resource] = []
        before_serving: list[pulumi.Resource] = []
        instances: list[pulumi.Resource] = []  # a cluster's workloads, which its router lists
        claim = next((o for o in plan.objects if o["kind"] == "PersistentVolumeClaim"), None)
        keep = args.keep_cache and claim is not None
        if plan.objects and plan.objects[0]["kind"] == "Namespace":
            opts = pulumi.ResourceOptions(parent=self, retain_on_delete=keep)
            namespace.append(self._create(name, plan.objects[0], opts))
        # The token is in place before anything that downloads starts (its reference is optional).
        self.secret = self._secret(name, plan, args.hf_token, namespace)
        for obj in plan.objects[len(namespace) :]:
            kind = obj["kind"]
            deps = [*namespace, *([self.secret] if self.secret else [])]
            serves = kind in ("Deployment", "StatefulSet", "LeaderWorkerSet") and _serves(obj)
            if serves:
                deps += before_serving  # the weights are in the cache before any server starts
            object_name = obj["metadata"]["name"]
            if plan.router is not None and kind == "Deployment" and object_name == plan.router:
                deps += instances  # Pulumi awaits each instance's Deployment: serving before the router
            if plan.router is not None and kind == "Service" and object_name == plan.endpoint_service:
                deps.append(self.resources[f"Deployment/{plan.router}"])  # its endpoints: the router's pod
            # A PD instance's objects are named after the group's version but keyed by the name
            # without it: a new version replaces each, and the old one goes first. The old router
            # names only old pods, which go; the new router only new ones (pd_version).
            versioned = names.unversioned(object_name, plan.pd_version) != object_name
            child = pulumi.ResourceOptions(
                parent=self,
                depends_on=deps,
                custom_timeouts=SERVE_TIMEOUTS if kind in _AWAITED else None,
                retain_on_delete=keep and obj is claim,
                delete_before_replace=versioned or None,
            )
            resource = self._create(name, obj, child)
            if kind == "Job":
                before_serving.append(resource)
            if serves and plan.router is not None:
                instances.append(resource)
        self.namespace = pulumi.Output.from_input(plan.namespace)
        self.workloads = pulumi.Output.from_input(list(plan.workloads))
        self.endpoint = self._endpoint(plan, args.source)
        self.register_outputs(
            {"endpoint": self.endpoint, "namespace": self.namespace, "workloads": self.workloads}
        )

    def _create(self, name: str, obj: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
        kind, object_name = obj["kind"], obj["metadata"]["name"]
        if kind in _NOT_AWAITED:
            annotations = {**obj["metadata"].get("annotations", {}), SKIP_AWAIT: "true"}
            obj = {**obj, "metadata": {**obj["metadata"], "annotations": annotations}}
        key = names.unversioned(object_name, self.plan.pd_version)
        resource = _FACTORIES[kind](f"{name}-{kind.lower()}-{key}", obj, opts)
        self.resources[f"{kind}/{object_name}"] = resource
        return resource

    def _secret(
        self,
        name: str,
        plan: KubernetesPlan,
        token: pulumi.Input[str] | None,
        namespace: list[pulumi.Resource],
    ) -> k8s.core.v1.Secret | None:
        if token is None:
            return None
        manifest = plan.token_secret(pulumi.Output.secret(token))
        return k8s.core.v1.Secret(
            f"{name}-secret",
            metadata=manifest["metadata"],
            type=manifest["type"],
            string_data=manifest["stringData"],
            opts=pulumi.ResourceOptions(parent=self, depends_on=namespace),
        )

    def _endpoint(self, plan: KubernetesPlan, source: KubernetesSource) -> pulumi.Output[str]:
        if source.service_type != "LoadBalancer":
            return pulumi.Output.from_input(plan.endpoint)
        service = self.resources[f"Service/{plan.endpoint_service}"]
        assert isinstance(service, k8s.core.v1.Service)
        return service.status.apply(_load_balancer_url)


def _serves(obj: dict[str, Any]) -> bool:
    labels = obj["metadata"].get("labels", {})
    return bool(labels.get("app.kubernetes.io/component") == "serve")


def _load_balancer_url(status: Any) -> str:
    balancer = getattr(status, "load_balancer", None)
    ingress = (getattr(balancer, "ingress", None) or [None])[0]
    host = getattr(ingress, "hostname", None) or getattr(ingress, "ip", None) or ""
    return api_base(host)
