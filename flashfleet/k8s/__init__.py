"""Kubernetes manifests for a stack on the ``kubernetes`` node source (pure: no pulumi import).

``plan_kubernetes`` renders the recipe for the cluster, takes its container launches as they are
and returns plain manifest dicts; ``flashfleet.components.kubernetes`` creates them with
pulumi-kubernetes.
"""

from flashfleet.k8s.errors import KubernetesRenderError
from flashfleet.k8s.manifests import KubernetesPlan, plan_kubernetes
from flashfleet.k8s.workloads import rank_addresses

__all__ = ["KubernetesPlan", "KubernetesRenderError", "plan_kubernetes", "rank_addresses"]
