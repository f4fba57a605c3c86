"""`flashfleet status` probes the endpoint of every kind of stack, not only clusters: a stack of
one server (each API server's own /health, from its inventory), a Kubernetes stack (its
`endpoint` output); and a stack never brought up is an answer (`not deployed`, exit 0)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from flashfleet.bringup.endpoint_health import servers_health, url_health
from flashfleet.cli import main
from flashfleet.inventory import build_inventory
from flashfleet.planning import load_stack


def test_each_api_server_of_a_stack_without_router_is_asked() -> None:
    inv = build_inventory(load_stack("mi355x-throughput"), ["192.0.2.10"], ["10.1.0.10"])
    asked: list[str] = []

    def fetch(url: str, timeout: float) -> tuple[int, str]:
        asked.append(url)
        return (200, "")

    health = servers_health(inv, fetch)
    assert health is not None
    assert health.state == "serving"
    assert asked == ["http://192.0.2.10:30000/health"]
    assert health.line() == "endpoint: serving: 1 of 1 servers healthy (http://192.0.2.10:30000/health)"
    down = servers_health(inv, lambda url, timeout: (0, "Connection refused"))
    assert down is not None
    assert down.state == "down"
    assert "not reachable from here (Connection refused)" in down.line()


def test_a_kubernetes_endpoint_is_asked_unless_only_the_cluster_resolves_it() -> None:
    health = url_health("http://203.0.113.5:30000/v1", lambda url, timeout: (503, ""))
    assert (health.state, health.servers[0].url) == ("down", "http://203.0.113.5:30000/health")
    inside = url_health("http://mi355x-k8s.mi355x-k8s.svc:30000/v1", lambda url, timeout: (200, ""))
    assert inside.state == "not probed"
    assert "inside the cluster" in inside.line()


class _Health(BaseHTTPRequestHandler):
    code = 200

    def do_GET(self) -> None:
        self.send_response(self.code if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd
    httpd.shutdown()


@pytest.mark.parametrize(("code", "exit_code", "state"), [(200, 0, "serving"), (503, 1, "down")])
def test_status_of_a_one_server_stack_shows_its_health(
    tmp_path: Path, server: ThreadingHTTPServer, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch, code: int, exit_code: int, state: str,
) -> None:  # fmt: skip
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))  # no Pulumi CLI: the inventory is the source
    monkeypatch.setattr(_Health, "code", code)
    inv = build_inventory(load_stack("mi355x-throughput"), ["127.0.0.1"], ["10.1.0.10"])
    port = server.server_address[1]
    for hvars in inv["all"]["hosts"].values():
        hvars["flashfleet_api_port"] = port
    path = tmp_path / "inv.json"
    path.write_text(json.dumps(inv))
    argv = ["status", "mi355x-throughput", "--inventory", str(path), "--runs-dir", str(tmp_path / "runs")]
    assert main([*argv, "--format", "json"]) == exit_code
    report = json.loads(capsys.readouterr().out)
    assert report["endpoint"]["state"] == state
    assert report["endpoint"]["servers"][0]["url"] == f"http://127.0.0.1:{port}/health"
    assert main(argv) == exit_code
    assert f"endpoint: {state}: " in capsys.readouterr().out


def test_a_stack_never_brought_up_is_not_deployed_with_exit_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    assert main(["status", "h200-replicas", "--runs-dir", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert "state: not deployed (" in out
    assert "`flashfleet up h200-replicas` brings it up" in out
    assert main(["status", "h200-replica", "--runs-dir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert "no such stack" in err
    assert len(err.strip().splitlines()) == 1


def _objects(plan: Any, not_ready: str | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The plan's workloads as the API server would hold them, every one ready but ``not_ready``."""
    objects = []
    for name in plan.workloads:
        (obj,) = [o for o in plan.objects if o["metadata"]["name"] == name and o["kind"] != "Service"]
        ready = 0 if name == not_ready else 1
        objects.append({**obj, "status": {"readyReplicas": ready}})
    return objects, []


@pytest.mark.parametrize(
    ("stack", "down", "exit_code", "state"),
    [("mi355x-k8s-replicas", None, 0, "serving"), ("mi355x-k8s-replicas", "replica-1", 1, "degraded"),
     ("mi355x-k8s-replicas", "router", 1, "down")],
)  # fmt: skip
def test_status_of_a_kubernetes_stack_reads_its_workloads_readiness(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    stack: str, down: str | None, exit_code: int, state: str,
) -> None:  # fmt: skip
    """Nothing answers HTTP from here on a cluster (a ClusterIP Service): `status` reads the
    serving workloads from the API server and names the one not ready."""
    from flashfleet.cli.shared import cluster_api
    from flashfleet.planning.stack_recipe import kubernetes_plan

    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    plan = kubernetes_plan(stack, load_stack(stack).spec)
    asked: list[tuple[str | None, str, str]] = []

    def serving_objects(context: str | None, namespace: str, selector: str) -> Any:
        asked.append((context, namespace, selector))
        return _objects(plan, f"{stack}-{down}" if down else None)

    monkeypatch.setattr(cluster_api, "serving_objects", serving_objects)
    run = tmp_path / "runs" / stack / "20261207T000000Z"
    run.mkdir(parents=True)
    (run / "summary.txt").write_text("up; recorded here\n")
    argv = ["status", stack, "--runs-dir", str(tmp_path / "runs")]
    assert main(argv) == exit_code
    out = capsys.readouterr().out
    assert asked == [("mi355x-cluster", "glm-replicas", f"app.kubernetes.io/instance={stack}")]
    (line,) = [x for x in out.splitlines() if x.startswith("endpoint: ")]
    assert line.startswith(f"endpoint: {state}: ")
    if down:
        assert f"not ready: {down} (Deployment glm-replicas/{stack}-{down}: 0 of 1 replicas ready)" in line


def test_a_pd_side_with_no_instance_ready_is_down_not_degraded() -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "k8s"))
    from k8s_cases import GB300_2P1D

    from flashfleet.k8s import readiness

    plan = GB300_2P1D.plan()
    decode = next(w for w in plan.workloads if "-decode-0-" in w)
    prefill = next(w for w in plan.workloads if "-prefill-1-" in w)
    assert readiness.health(plan, *_objects(plan, prefill)).state == "degraded"  # prefill-0 still up
    assert readiness.health(plan, *_objects(plan, decode)).state == "down"  # the only decode
    assert readiness.health(plan, [], []).line().startswith("endpoint: down: 0 of 4 workloads ready")
