"""Stand-in vendor apt repositories for `flashfleet lock`: repository directories, by their path below
one HTTP root on loopback (flat ones as NVIDIA lays out its CUDA and container toolkit
repositories, <root>/<distribution>/<arch>/, and suites' dists/<suite>/<component>/binary-<arch>/
as Docker and AMD do), whose Packages index lists the packages given here, with a record of every
request.

The index is written as apt-ftparchive writes one (Package, Version, Depends, Filename, Size,
SHA256), from the bytes each package's file holds here; `Packages.gz` too where asked, as
repositories that compress their index serve it. A directory not listed answers 404, as a
repository that does not serve that distribution does. The node side (apt on test hosts against
a signed repository of real .deb files) is tests/hosts/aptrepo.py's.
"""

from __future__ import annotations

import gzip
import hashlib
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flashfleet.stack.spec import StackSpec


@dataclass
class Deb:
    package: str
    version: str
    depends: str = ""
    body: bytes = b""  # the file's bytes (their hash is what the index lists)

    @property
    def filename(self) -> str:
        return f"./{self.package}_{self.version.split(':')[-1]}_amd64.deb"

    def data(self) -> bytes:
        return self.body or f"{self.package} {self.version}".encode()


def packages_text(debs: list[Deb]) -> str:
    out = []
    for deb in debs:
        data = deb.data()
        lines = [f"Package: {deb.package}", f"Version: {deb.version}", "Architecture: amd64"]
        lines += [f"Depends: {deb.depends}"] if deb.depends else []
        lines += [
            f"Filename: {deb.filename}", f"Size: {len(data)}",
            f"MD5sum: {hashlib.md5(data).hexdigest()}",
            f"SHA256: {hashlib.sha256(data).hexdigest()}", f"Description: stand-in for {deb.package}",
        ]  # fmt: skip
        out.append("\n".join(lines) + "\n")
    return "\n".join(out)


def release_text(moment: str, indexes: dict[str, bytes]) -> str:
    """A suite's InRelease as an archive publishes it (unsigned here: `flashfleet lock` hashes it,
    apt on a node verifies a signed one, tests/hosts/aptrepo.py): the moment, and each index's hash."""
    from datetime import UTC, datetime
    from email.utils import format_datetime

    published = datetime.strptime(moment, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    lines = [f"Date: {format_datetime(published, usegmt=True)}", "SHA256:"]
    lines += [f" {hashlib.sha256(b).hexdigest()} {len(b)} {path}" for path, b in sorted(indexes.items())]
    return "\n".join(lines) + "\n"


@dataclass
class Snapshot:
    """One moment of a distribution archive as a snapshot service keeps it: suite directories
    (``dists/<suite>/<component>/binary-<arch>``) -> packages."""

    moment: str  # YYYYMMDDTHHMMSSZ
    dirs: dict[str, list[Deb]]

    def release(self, suite: str) -> bytes | None:
        indexes = {
            d.removeprefix(f"dists/{suite}/") + "/Packages": packages_text(debs).encode()
            for d, debs in self.dirs.items()
            if d.startswith(f"dists/{suite}/")
        }
        return release_text(self.moment, indexes).encode() if indexes else None


@dataclass
class AptIndex:
    dirs: dict[str, list[Deb]] = field(default_factory=dict)  # "cuda/repos/ubuntu2404/x86_64" -> packages
    gzipped: bool = False
    requests: list[str] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None
    # a snapshot service's archives ("snapshot/ubuntu") -> its moments, oldest first: a moment
    # asked for is served as the newest one at or before it, as snapshot.ubuntu.com serves it; one
    # before the first answers 404
    snapshots: dict[str, list[Snapshot]] = field(default_factory=dict)

    def _snapshot_file(self, path: str) -> bytes | None:
        import re

        m = re.fullmatch(r"(?P<archive>.+)/(?P<moment>\d{8}T\d{6}Z)/(?P<rest>dists/.+)", path)
        if m is None or m["archive"] not in self.snapshots:
            return None
        held = [s for s in self.snapshots[m["archive"]] if s.moment <= m["moment"]]
        if not held:
            return None
        where, _, name = m["rest"].rpartition("/")
        if name == "InRelease":
            return held[-1].release(where.removeprefix("dists/"))
        debs = held[-1].dirs.get(where)
        return packages_text(debs).encode() if debs is not None and name == "Packages" else None

    @property
    def root(self) -> str:
        assert self.server is not None
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def url(self) -> str:
        """NVIDIA's CUDA repository here."""
        return f"{self.root}/cuda/repos"

    def site_apt(self) -> dict[str, str]:
        """A stack's `site.apt` mirrors that name these repositories."""
        return {
            "cuda": self.url,
            "docker": f"{self.root}/docker/linux",
            "nvidiaContainer": f"{self.root}/libnvidia-container",
            "amdgpu": f"{self.root}/amdgpu",
            "rocm": f"{self.root}/rocm/apt",
            "ubuntuSnapshots": f"{self.root}/{UBUNTU_SNAPSHOTS}",
        }

    def sha256(self, where: str, package: str, version: str) -> str:
        [deb] = [d for d in self.dirs[where] if (d.package, d.version) == (package, version)]
        return hashlib.sha256(deb.data()).hexdigest()

    def start(self, address: str = "127.0.0.1") -> AptIndex:
        index = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                index.requests.append(self.path)
                where, _, name = self.path.lstrip("/").rpartition("/")
                debs = index.dirs.get(where)
                body = index._snapshot_file(self.path.lstrip("/"))
                if debs is not None and name == "Packages" and not index.gzipped:
                    body = packages_text(debs).encode()
                elif debs is not None and name == "Packages.gz" and index.gzipped:
                    body = gzip.compress(packages_text(debs).encode())
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer((address, 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


UBUNTU_SNAPSHOTS = "snapshot/ubuntu"
FIRST_MOMENT = "20260101T000000Z"
FFMPEG = "7:6.1.1-3ubuntu5"  # noble's release; its -updates suite holds a newer build


def ubuntu_snapshot(moment: str = FIRST_MOMENT, codename: str = "noble", updates: str = "") -> Snapshot:
    """Ubuntu's archive at `moment` as its snapshot service serves it: every suite and component
    the catalog reads, for amd64 and arm64, with FFmpeg in universe (the release's, and `updates`
    in -updates when given) and a library it needs in main."""
    dirs: dict[str, list[Deb]] = {}
    for arch in ("amd64", "arm64"):
        for suite in (codename, f"{codename}-updates", f"{codename}-security"):
            for component in ("main", "universe"):
                dirs[f"dists/{suite}/{component}/binary-{arch}"] = []
        dirs[f"dists/{codename}/universe/binary-{arch}"] = [Deb("ffmpeg", FFMPEG, "libavcodec60 (>= 7:6.1)")]
        dirs[f"dists/{codename}/main/binary-{arch}"] = [Deb("libavcodec60", FFMPEG)]
        if updates:
            dirs[f"dists/{codename}-updates/universe/binary-{arch}"] = [Deb("ffmpeg", updates)]
    return Snapshot(moment, dirs)


def of_catalog() -> AptIndex:
    """The catalog's vendor packages in the directories AWS nodes name (Ubuntu 24.04, x86_64 and
    arm64): the driver (its branch and version, and a newer release the pin must keep out), Docker
    Engine and the NVIDIA container toolkit (each also with a newer release), and AMD's amdgpu and
    ROCm (ROCm depends on a library of amdgpu's repository) for Ubuntu 22.04 and 24.04."""
    from flashfleet.catalog import hardware_catalog, node_packages

    driver = hardware_catalog()["h200"].driver
    assert driver is not None
    pkgs = node_packages()
    cuda = [
        Deb(f"{name}-{driver.branch}{suffix}", f"{version}-1")
        for name, suffix in (("nvidia-driver", "-open"), ("nvidia-fabricmanager", ""), ("nvidia-imex", ""))
        for version in (driver.version, f"{driver.branch}.99.01")
    ]
    docker = (
        [
            Deb(
                "docker-ce",
                f"5:{v}-1~ubuntu.24.04~noble",
                "docker-ce-cli, containerd.io (>= 1.7.27), iptables",
            )
            for v in (pkgs.docker_version, "29.9.9")
        ]
        + [Deb("docker-ce-cli", f"5:{v}-1~ubuntu.24.04~noble") for v in (pkgs.docker_version, "29.9.9")]
        + [Deb("containerd.io", "2.1.5-1~ubuntu.24.04~noble")]
    )
    toolkit = [
        Deb(name, f"{v}-1", deps)
        for v in (pkgs.toolkit_version, "1.99.0")
        for name, deps in (
            (
                "nvidia-container-toolkit",
                f"nvidia-container-toolkit-base (= {v}-1), libnvidia-container-tools (>= {v}-1)",
            ),
            ("nvidia-container-toolkit-base", ""),
            ("libnvidia-container-tools", f"libnvidia-container1 (>= {v}-1)"),
            ("libnvidia-container1", ""),
        )
    ]
    dirs: dict[str, list[Deb]] = {}
    for cuda_arch, deb_arch in (("x86_64", "amd64"), ("sbsa", "arm64")):
        dirs[f"cuda/repos/ubuntu2404/{cuda_arch}"] = list(cuda)
        dirs[f"docker/linux/ubuntu/dists/noble/stable/binary-{deb_arch}"] = list(docker)
        dirs[f"libnvidia-container/stable/deb/{deb_arch}"] = list(toolkit)
    for suite in ("jammy", "noble"):
        dirs[f"amdgpu/{pkgs.amdgpu_version}/ubuntu/dists/{suite}/main/binary-amd64"] = [
            Deb(
                "amdgpu-dkms",
                "1:6.14.14.30100200-2212064",
                "amdgpu-dkms-firmware (= 1:6.14.14.30100200-2212064)",
            ),
            Deb("amdgpu-dkms-firmware", "1:6.14.14.30100200-2212064"),
            Deb("libdrm-amdgpu-common", "1.0.0.30100200-2212064"),
        ]
        dirs[f"rocm/apt/{pkgs.rocm_version}/dists/{suite}/main/binary-amd64"] = [
            Deb("rocm", f"{pkgs.rocm_version}.70002-56", "amd-smi-lib"),
            Deb("amd-smi-lib", f"{pkgs.rocm_version}.70002-56", "libdrm-amdgpu-common, libc6"),
        ]
    return AptIndex(dirs=dirs, snapshots={UBUNTU_SNAPSHOTS: [ubuntu_snapshot()]})


def existing_spec(hardware: str) -> StackSpec:
    """The catalog's low-latency stack of this hardware on one existing host, which may run any
    distribution preflight accepts."""
    from flashfleet.catalog import hardware_catalog
    from flashfleet.planning import parse_spec
    from flashfleet.stack import DEFAULT_STACKS_DIR, read_stack_file

    stack = f"{hardware}-lowlat"
    data = dict(read_stack_file(stack, DEFAULT_STACKS_DIR).spec_data)
    count = hardware_catalog()[hardware].gpus_per_node
    data["nodes"] = {"count": 1, "source": {"kind": "existing", "hosts": [
        {"address": "192.0.2.10", "sshUser": "ubuntu", "gpus": {"model": hardware, "count": count},
         "hostMemoryGib": 2048}]}}  # fmt: skip
    return parse_spec(stack, data)


def role_locks_of(role_vars: dict[str, Any], hardware: str) -> dict[str, dict[str, dict[str, Any]]]:
    """`flashfleet lock`'s resolution of the repositories `role_vars` name for one existing host of
    this hardware, as the inventory hands it to the roles (flashfleet_apt_lock)."""
    from flashfleet.cli.lock import resolve_apt
    from flashfleet.planning.apt_packages import node_apt, role_locks

    held = resolve_apt(node_apt(existing_spec(hardware), role_vars))
    locks = role_locks(node_apt(existing_spec(hardware)), held)
    return {role: {d: {n: deb.model_dump() for n, deb in debs.items()} for d, debs in dirs.items()}
            for role, dirs in locks.items()}  # fmt: skip
