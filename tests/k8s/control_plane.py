"""A real Kubernetes control plane on loopback, with simulated GPU nodes.

etcd, kube-apiserver (TLS, a token kubeconfig, RBAC), kube-scheduler, kube-controller-manager and
kwok, as scripts/setup.d/45-kube.sh builds them, and the LeaderWorkerSet controller manager with
its webhooks, as scripts/setup.d/46-lws.sh builds it (lws_manager.py). The API server, the
scheduler and the controllers are the real ones: they validate, admit, schedule, roll out, make a
LeaderWorkerSet's groups of pods, bind volumes and fill EndpointSlices. Only the kubelet is simulated: kwok marks the pods bound to its nodes Running and Ready (and a
Job's pods Succeeded), so no container runs and no pod IP answers. Talk only to the API server.
"""

from __future__ import annotations

import ctypes
import json
import os
import secrets
import signal
import socket
import subprocess
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lws_manager

# Kubernetes v1.36's Workload API (alpha, off by default): a PodGroup with a gang policy, which
# pods join by spec.schedulingGroup; the scheduler binds none of them until all can be placed.
GATES = "GenericWorkload=true,GangScheduling=true"
WORKLOAD_API = "scheduling.k8s.io/v1alpha2"
CACHE = Path(os.environ.get("FLASHFLEET_KUBE_CACHE", "/var/cache/flashfleet/kube"))
FAKE_NODE = {"kwok.x-k8s.io/node": "fake"}  # the annotation kwok manages nodes by
PR_SET_PDEATHSIG = 1  # prctl(2)


class KubectlError(RuntimeError):
    def __init__(self, argv: Sequence[str], stderr: str) -> None:
        super().__init__(f"kubectl {' '.join(argv)}: {stderr.strip()}")
        self.stderr = stderr


def ready() -> bool:
    return (CACHE / ".stamp").is_file() and lws_manager.ready()


def _die_with_parent() -> None:
    """A worker killed mid-run (no fixture teardown) takes its control plane with it."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _pki(d: Path) -> None:
    """A CA, the API server's certificate for 127.0.0.1, and the service-account key pair."""
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=flashfleet-test-ca",
             "-keyout", "ca.key", "-out", "ca.crt", cwd=d)  # fmt: skip
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=kube-apiserver",
             "-keyout", "apiserver.key", "-out", "apiserver.csr", cwd=d)  # fmt: skip
    (d / "san.ext").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n"
    )
    _openssl("x509", "-req", "-in", "apiserver.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-days", "2", "-extfile", "san.ext", "-out", "apiserver.crt", cwd=d)  # fmt: skip
    # the LeaderWorkerSet webhooks' own serving certificate (controller-runtime reads tls.crt/.key)
    (d / "lws-certs").mkdir()
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=lws-webhook",
             "-keyout", "lws-certs/tls.key", "-out", "lws.csr", cwd=d)  # fmt: skip
    (d / "lws-san.ext").write_text("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    _openssl("x509", "-req", "-in", "lws.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-days", "2", "-extfile", "lws-san.ext", "-out", "lws-certs/tls.crt", cwd=d)  # fmt: skip
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=d)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=d)


@dataclass
class ControlPlane:
    root: Path
    kubeconfig: Path = field(init=False)
    _procs: list[tuple[str, subprocess.Popen[bytes]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.kubeconfig = self.root / "kubeconfig"

    # -- lifecycle -----------------------------------------------------------------------------
    def _start(self, name: str, argv: list[str], *, cache: Path = CACHE,
               env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:  # fmt: skip
        log = open(self.root / f"{name}.log", "wb")  # noqa: SIM115 - the process keeps it
        proc = subprocess.Popen([str(cache / "bin" / argv[0]), *argv[1:]], stdout=log, stderr=log,
                                env={**os.environ, **(env or {})},
                                start_new_session=True, preexec_fn=_die_with_parent)  # noqa: PLW1509  # fmt: skip
        self._procs.append((name, proc))
        return proc

    def log(self, name: str) -> str:
        return (self.root / f"{name}.log").read_text(errors="replace")

    def start(self) -> None:
        d = self.root
        _pki(d)
        token = secrets.token_hex(16)
        (d / "tokens.csv").write_text(f'{token},flashfleet-test,flashfleet-test,"system:masters"\n')
        client, peer, api = _free_port(), _free_port(), _free_port()
        self._start("etcd", [
            "etcd", "--data-dir", str(d / "etcd"), "--name", "test",
            "--listen-client-urls", f"http://127.0.0.1:{client}", "--advertise-client-urls", f"http://127.0.0.1:{client}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer}", "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"test=http://127.0.0.1:{peer}", "--log-level", "warn",
        ])  # fmt: skip
        self._start("kube-apiserver", [
            "kube-apiserver", "--etcd-servers", f"http://127.0.0.1:{client}",
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", str(api),
            "--tls-cert-file", str(d / "apiserver.crt"), "--tls-private-key-file", str(d / "apiserver.key"),
            "--client-ca-file", str(d / "ca.crt"), "--token-auth-file", str(d / "tokens.csv"),
            "--service-account-issuer", "https://kubernetes.default.svc",
            "--service-account-key-file", str(d / "sa.pub"), "--service-account-signing-key-file", str(d / "sa.key"),
            "--authorization-mode", "Node,RBAC", "--service-cluster-ip-range", "10.96.0.0/16",
            "--allow-privileged=true", f"--feature-gates={GATES}", f"--runtime-config={WORKLOAD_API}=true",
        ])  # fmt: skip
        self.kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "test",
            "clusters": [{"name": "test", "cluster": {
                "server": f"https://127.0.0.1:{api}", "certificate-authority": str(d / "ca.crt")}}],
            "users": [{"name": "test", "user": {"token": token}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
        }))  # fmt: skip
        self._wait_ready()
        kc = ["--kubeconfig", str(self.kubeconfig), "--leader-elect=false", "--bind-address", "127.0.0.1"]
        self._start("kube-scheduler", [
            "kube-scheduler", *kc, "--secure-port", str(_free_port()), f"--feature-gates={GATES}",
        ])  # fmt: skip
        self._start("kube-controller-manager", [
            "kube-controller-manager", *kc, "--secure-port", str(_free_port()),
            "--service-account-private-key-file", str(d / "sa.key"), "--root-ca-file", str(d / "ca.crt"),
            "--use-service-account-credentials=false", "--controllers", "*", f"--feature-gates={GATES}",
        ])  # fmt: skip
        stages = [a for p in sorted((CACHE / "stages").glob("*.yaml")) for a in ("--config", str(p))]
        self._start("kwok", [
            "kwok", "--kubeconfig", str(self.kubeconfig), *stages,
            "--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            "--server-address", f"127.0.0.1:{_free_port()}",
        ])  # fmt: skip
        # the LeaderWorkerSet controller's own release of its CRDs replaces any older copy
        lws_crds = lws_manager.crds()
        replaced = {p.name for p in lws_crds}
        crds = [p for p in sorted((CACHE / "crds").glob("*.yaml")) if p.name not in replaced]
        for crd in [*crds, *lws_crds]:
            self.kubectl("apply", "--server-side", "-f", str(crd))
        self.wait_for(
            lambda: all(_condition(c, "Established") for c in self.items("crd")), what="CRDs established"
        )
        self._start_lws()
        # the controller-manager makes each namespace's `default` ServiceAccount, without which
        # the ServiceAccount admission plugin refuses pods
        self.wait_for(lambda: self.get("serviceaccount", "default", namespace="default"), what="default SA")

    def _start_lws(self) -> None:
        """The LeaderWorkerSet manager, then its webhooks (failurePolicy Fail: registered only once
        it serves them), checked through a server-side dry run of a set, which passes both."""
        port = _free_port()
        conf = self.root / "lws-config.yaml"
        conf.write_text(lws_manager.config(webhook_port=port, cert_dir=self.root / "lws-certs",
                                           metrics_port=_free_port(), health_port=_free_port()))  # fmt: skip
        self._start("lws-manager", ["lws-manager", "--config", str(conf)], cache=lws_manager.CACHE,
                    env={"KUBECONFIG": str(self.kubeconfig)})  # fmt: skip

        def serving() -> bool:
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0

        self.wait_for(serving, what="the LeaderWorkerSet webhook server", timeout_s=60)
        ca = (self.root / "ca.crt").read_bytes()
        self.apply(lws_manager.webhook_configurations(port, ca))
        probe = json.dumps({
            "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "webhook-probe", "namespace": "default"},
            "spec": {"leaderWorkerTemplate": {"size": 2, "workerTemplate": {"spec": {
                "containers": [{"name": "c", "image": "probe"}]}}}},
        })  # fmt: skip

        def admitted() -> bool:
            r = subprocess.run(self._kubectl_argv("create", "--dry-run=server", "-f", "-"), input=probe,
                               check=False, capture_output=True, text=True)  # fmt: skip
            return r.returncode == 0

        self.wait_for(admitted, what="the LeaderWorkerSet webhooks admitting a set", timeout_s=60)

    def _wait_ready(self, timeout_s: float = 90) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self._check_alive()
            r = subprocess.run(
                self._kubectl_argv("get", "--raw", "/readyz"), check=False, capture_output=True, text=True
            )
            if r.returncode == 0 and r.stdout.strip() == "ok":
                return
            time.sleep(0.5)
        raise TimeoutError(
            f"kube-apiserver not ready in {timeout_s} s:\n{self.log('kube-apiserver')[-3000:]}"
        )

    def _check_alive(self) -> None:
        for name, proc in self._procs:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited {proc.returncode}:\n{self.log(name)[-3000:]}")

    def stop(self) -> None:
        # the API server before etcd (it hangs on shutdown without etcd), everything else first
        for _, proc in reversed(self._procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    # -- kubectl -------------------------------------------------------------------------------
    def _kubectl_argv(self, *args: str) -> list[str]:
        return [str(CACHE / "bin" / "kubectl"), "--kubeconfig", str(self.kubeconfig), *args]

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        r = subprocess.run(
            self._kubectl_argv(*args), check=False, input=stdin, capture_output=True, text=True
        )
        if check and r.returncode != 0:
            raise KubectlError(args, r.stderr)
        return r.stdout

    def apply(self, objects: Iterable[Mapping[str, Any]], *, dry_run: bool = False) -> str:
        """Server-side apply, as pulumi-kubernetes does, under one field manager."""
        doc = json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)})
        extra = ["--dry-run=server"] if dry_run else []
        return self.kubectl(
            "apply", "--server-side", "--field-manager=flashfleet", *extra, "-f", "-", stdin=doc
        )

    def get(self, kind: str, name: str | None = None, *, namespace: str | None = None,
            selector: str | None = None) -> Any:  # fmt: skip
        args = ["get", kind, *([name] if name else []), "-o", "json"]
        args += ["-n", namespace] if namespace else ["-A"] if not name else []
        args += ["-l", selector] if selector else []
        r = subprocess.run(self._kubectl_argv(*args), check=False, capture_output=True, text=True)
        if r.returncode != 0:
            if "NotFound" in r.stderr:
                return None
            raise KubectlError(args, r.stderr)
        return json.loads(r.stdout)

    def items(self, kind: str, *, namespace: str | None = None, selector: str | None = None) -> list[Any]:
        return list(self.get(kind, namespace=namespace, selector=selector)["items"])

    def wait_for(self, probe: Any, *, what: str, timeout_s: float = 60, namespace: str | None = None) -> Any:
        deadline = time.monotonic() + timeout_s
        while True:
            got = probe()
            if got:
                return got
            if time.monotonic() > deadline:
                report = self.pods_report(namespace) if namespace else ""
                raise TimeoutError(f"{what}: not within {timeout_s} s{report}")
            self._check_alive()
            time.sleep(0.3)

    def pods_report(self, namespace: str) -> str:
        """Each pod's phase, node and scheduling verdict: what a wait that timed out saw."""
        lines = []
        for pod in self.items("pods", namespace=namespace):
            sched = next((c for c in pod["status"].get("conditions", []) if c["type"] == "PodScheduled"), {})
            lines.append(
                f"\n  pod {pod['metadata']['name']}: {pod['status'].get('phase')} on "
                f"{pod['spec'].get('nodeName')} {sched.get('reason', '')} {sched.get('message', '')}"
            )
        return "".join(lines)

    # -- simulated nodes -----------------------------------------------------------------------
    def add_node(self, name: str, *, arch: str, labels: Mapping[str, str], taints: Sequence[Mapping[str, str]],
                 capacity: Mapping[str, str]) -> None:  # fmt: skip
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "annotations": FAKE_NODE,
                "labels": {
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": arch,
                    "type": "kwok",
                    **labels,
                },
            },
            "spec": {"taints": [dict(t) for t in taints]},
            "status": {"capacity": {"pods": "110", **capacity}, "allocatable": {"pods": "110", **capacity}},
        }
        self.kubectl("create", "-f", "-", stdin=json.dumps(node))
        self.wait_for(lambda: _node_ready(self.get("node", name)), what=f"node {name} Ready", timeout_s=30)

    def reset(self) -> None:
        """Back to an empty cluster between tests: the stacks' namespaces, volumes, DRA objects
        and simulated nodes go."""
        self.kubectl(
            "delete",
            "namespace",
            "-l",
            "app.kubernetes.io/managed-by=flashfleet",
            "--wait=true",
            "--timeout=120s",
        )
        self.kubectl("delete", "persistentvolumes,storageclasses,deviceclasses,resourceslices", "--all")
        self.kubectl("delete", "node", "-l", "type=kwok", "--wait=true")


def _condition(obj: Any, kind: str) -> bool:
    conds = (obj or {}).get("status", {}).get("conditions") or []
    return any(c["type"] == kind and c["status"] == "True" for c in conds)


def _node_ready(node: Any) -> bool:
    return _condition(node, "Ready")


@contextmanager
def control_plane(root: Path) -> Iterator[ControlPlane]:
    cp = ControlPlane(root)
    try:
        cp.start()
        yield cp
    finally:
        cp.stop()
