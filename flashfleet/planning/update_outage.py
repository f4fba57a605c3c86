"""What an update of options, image or weights does to the endpoint, said by `plan` and `up`
before it is made (the playbooks do it: serve.yml and sglang_serve's cut.yml).

- Replicas behind a router: one instance at a time, out of the router and back once ready; the
  endpoint keeps serving.
- PD (prefill and decode): the whole group is cut. A prefill hands its KV to a decode, and two of
  different versions would exchange layouts they do not share (silent garbage, not an error), so
  every prefill and decode stops before any starts again: the endpoint is down for a server's
  restart.
- One instance: it restarts in place; the endpoint is down for its restart.

The restart's length is the time to the first token's phases after the transfers (the image and
the weights are on the node): load, JIT builds, capture, readiness, as the second bring-up has
them (measured where a recorded bring-up gave them).
"""

from __future__ import annotations

from typing import Literal

from flashfleet.planning.critical_path import critical_path
from flashfleet.planning.plan_model import TimeToFirstToken, UpdateView
from flashfleet.planning.resolve import StackPlan
from flashfleet.planning.time_to_first_token import time_to_first_token
from flashfleet.stack.kubernetes_source import KubernetesSource

RESTART_PHASES = ("load", "jit", "capture", "ready")


def update_view(plan: StackPlan, ttft: TimeToFirstToken | None = None) -> UpdateView | None:
    """What an update does to the endpoint. On Kubernetes the cluster recreates each workload
    (strategy Recreate), not the playbooks: None, but for PD, whose group the Pulumi program cuts
    (flashfleet/k8s/replicas.py pd_version). `ttft`: `plan`'s own, else modeled here (the Pulumi
    program says it without the recorded runs)."""
    kube = isinstance(plan.spec.nodes.source, KubernetesSource)
    if kube and plan.spec.topology != "pd":
        return None
    if ttft is None:
        ttft = time_to_first_token(plan, critical_path(plan))
    phases = [p for p in ttft.phases if p.name in RESTART_PHASES]
    unknown = [p.name for p in phases if p.second_s is None]
    known = round(sum(float(p.second_s or 0) for p in phases), 1)
    basis = (
        f"measured in run {ttft.measured.run}, the JIT builds modeled"
        if ttft.measured is not None
        else "modeled as the second bring-up's load, JIT, capture and readiness"
    )
    instances = {p.instance for p in plan.recipe.processes if p.instance and p.role != "router"}
    how: Literal["rolling", "pd-cut", "in-place"] = (
        "pd-cut" if plan.spec.topology == "pd" else "rolling" if len(instances) > 1 else "in-place"
    )
    return UpdateView(
        how=how,
        outage=how != "rolling",
        restart_s=None if unknown else known,
        restart_known_s=known,
        unknown=unknown,
        basis=basis,
        kubernetes=kube,
    )
