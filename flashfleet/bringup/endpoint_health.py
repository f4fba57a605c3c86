"""Is a cluster's endpoint serving with every instance, from its inventory: the router's own list
(`GET /workers`) and each worker's `/health`, asked from where flashfleet runs.

The router keeps listing a dead worker as healthy until its health checks fail several times in a
row (sglang-router 0.3.2: every 60 s, 3 failures), and its retries hide the failures from
clients; each worker's own answer is what shows an instance down. A worker port the firewall
keeps closed to this machine is reported as not reachable from here, never as healthy.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from flashfleet.polling import http_get
from flashfleet.recipes.layouts import server_root

Fetch = Callable[[str, float], tuple[int, str]]


class InstanceHealth(BaseModel):
    model_config = ConfigDict(frozen=True)

    instance: str  # replica-1, prefill-0
    role: str = ""  # server, prefill, decode (the launch's)
    url: str  # as the router lists it
    listed: bool  # the router lists it healthy
    health: str  # its own /health: "ok", or why not

    def why_down(self) -> str:
        return self.health if self.health != "ok" else "the router does not list it healthy"


class EndpointHealth(BaseModel):
    model_config = ConfigDict(frozen=True)

    router: str  # the router's URL from here
    router_answer: str  # "ok", or why its /workers did not answer
    instances: tuple[InstanceHealth, ...]

    @property
    def down(self) -> list[InstanceHealth]:
        return [i for i in self.instances if not i.listed or i.health != "ok"]

    @property
    def missing_role(self) -> str | None:
        """PD: the side (prefill or decode) none of whose instances is up; no request is served
        without one of each, whatever the others."""
        down = {i.instance for i in self.down}
        for role in ("prefill", "decode"):
            mine = [i for i in self.instances if i.role == role]
            if mine and all(i.instance in down for i in mine):
                return role
        return None

    @property
    def state(self) -> str:
        if self.router_answer != "ok" or self.missing_role:
            return "down"
        return "degraded" if self.down else "serving"

    def line(self) -> str:
        """One line for `flashfleet status`."""
        total = len(self.instances)
        names = ", ".join(f"{i.instance} ({i.url}: {i.why_down()})" for i in self.down)
        if self.router_answer != "ok":
            return f"endpoint: down: the router at {self.router} does not answer ({self.router_answer})"
        if self.missing_role:
            return f"endpoint: down: no {self.missing_role} instance is up; down: {names}"
        if self.state == "serving":
            return (
                f"endpoint: serving: {total} of {total} instances healthy behind the router at {self.router}"
            )
        return f"endpoint: degraded: {total - len(self.down)} of {total} instances healthy; down: {names}"


def _hosts(inventory: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return dict((inventory.get("all") or {}).get("hosts") or {})


def endpoint_health(inventory: Mapping[str, Any], fetch: Fetch = http_get) -> EndpointHealth | None:
    """The cluster's health, or None when the inventory has no cluster router."""
    hosts = _hosts(inventory)
    router = next(
        ((h, p) for h, v in hosts.items() for p in v.get("flashfleet_processes") or [] if p.get("workers")),
        None,
    )
    if router is None:
        return None
    host, launch = router
    router_url = f"http://{hosts[host]['ansible_host']}:{launch['port']}"
    status, body = fetch(f"{router_url}/workers", 10.0)
    healthy: set[str] = set()
    answer = "ok"
    try:
        if status != 200:
            raise ValueError(f"/workers answered {status or body}")
        healthy = {w["url"] for w in json.loads(body).get("workers", []) if w.get("is_healthy")}
    except (ValueError, TypeError, KeyError) as err:
        answer = str(err)
    instances = []
    for name, vars_ in hosts.items():
        for p in vars_.get("flashfleet_processes") or []:
            entry = p.get("router_entry") or {}
            if not entry:
                continue
            # The worker as this machine reaches its node (its SSH address), on the worker's port.
            code, text = fetch(f"http://{vars_['ansible_host']}:{p['port']}/health", 10.0)
            health = (
                "ok"
                if code == 200
                else f"/health answered {code}"
                if code
                else f"not reachable from here ({text})"
            )
            instances.append(
                InstanceHealth(
                    instance=p.get("instance") or name,
                    role=p.get("role") or "",
                    url=entry["url"],
                    listed=entry["url"] in healthy,
                    health=health,
                )
            )
    return EndpointHealth(router=router_url, router_answer=answer, instances=tuple(instances))


# --- stacks without a cluster router: every API server's own /health --------------------------


class ServerHealth(BaseModel):
    model_config = ConfigDict(frozen=True)

    server: str  # the host (or the endpoint) that serves the API
    url: str  # its /health, as asked from here
    health: str  # "ok", or why not


class ServersHealth(BaseModel):
    """A stack's API servers without a router in front: each one's own /health (a Kubernetes
    stack's one endpoint Service counts as one server)."""

    model_config = ConfigDict(frozen=True)

    servers: tuple[ServerHealth, ...]
    not_probed: str | None = None  # why nothing was asked (an address only the cluster resolves)

    @property
    def state(self) -> str:
        if self.not_probed:
            return "not probed"
        ok = sum(s.health == "ok" for s in self.servers)
        return "serving" if ok == len(self.servers) else "down" if ok == 0 else "degraded"

    def line(self) -> str:
        if self.not_probed:
            return f"endpoint: not probed: {self.not_probed}"
        total, down = len(self.servers), [s for s in self.servers if s.health != "ok"]
        if self.state == "serving":
            urls = ", ".join(s.url for s in self.servers)
            return f"endpoint: serving: {total} of {total} servers healthy ({urls})"
        names = ", ".join(f"{s.server} ({s.url}: {s.health})" for s in down)
        return f"endpoint: {self.state}: {total - len(down)} of {total} servers healthy; down: {names}"


def _health_of(code: int, text: str) -> str:
    if code == 200:
        return "ok"
    return f"/health answered {code}" if code else f"not reachable from here ({text})"


def servers_health(inventory: Mapping[str, Any], fetch: Fetch = http_get) -> ServersHealth | None:
    """Each host that serves clients the API (`flashfleet_api_port`), asked at its SSH address;
    None when none does."""
    servers = []
    for name, vars_ in _hosts(inventory).items():
        port = vars_.get("flashfleet_api_port")
        if port is None:
            continue
        url = f"http://{vars_['ansible_host']}:{port}/health"
        servers.append(ServerHealth(server=name, url=url, health=_health_of(*fetch(url, 10.0))))
    return ServersHealth(servers=tuple(servers)) if servers else None


def url_health(endpoint: str, fetch: Fetch = http_get) -> ServersHealth:
    """A stack's `endpoint` output (`http://HOST:PORT/v1`): its server's /health."""
    from urllib.parse import urlsplit

    url = server_root(endpoint) + "/health"
    host = urlsplit(url).hostname or ""
    if host.endswith((".svc", ".svc.cluster.local")):
        # a ClusterIP Service's name resolves inside the cluster only: asking it here says nothing
        return ServersHealth(
            servers=(), not_probed=f"{url} resolves inside the cluster only (kubectl port-forward reaches it)"
        )
    return ServersHealth(
        servers=(ServerHealth(server="endpoint", url=url, health=_health_of(*fetch(url, 10.0))),)
    )
