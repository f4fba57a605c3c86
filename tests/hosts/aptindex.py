"""A stand-in vendor apt repository for `flashfleet lock`: flat repository directories (as NVIDIA's
CUDA repository lays them out, <root>/<distribution>/<arch>/) whose Packages index lists the
packages given here, over HTTP on loopback, with a record of every request.

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


@dataclass
class AptIndex:
    dirs: dict[str, list[Deb]] = field(default_factory=dict)  # "ubuntu2404/x86_64" -> packages
    gzipped: bool = False
    requests: list[str] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}/cuda/repos"

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
                where, _, name = self.path.removeprefix("/cuda/repos/").rpartition("/")
                debs = index.dirs.get(where)
                body = None
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


def of_catalog_driver() -> AptIndex:
    """The catalog's driver packages (its branch and version, and a newer release the pin must keep
    out) in the directories AWS nodes name: Ubuntu 24.04 on x86_64 and on arm64 (sbsa)."""
    from flashfleet.catalog import hardware_catalog

    driver = hardware_catalog()["h200"].driver
    assert driver is not None
    debs = [
        Deb(f"{name}-{driver.branch}{suffix}", f"{version}-1")
        for name, suffix in (("nvidia-driver", "-open"), ("nvidia-fabricmanager", ""), ("nvidia-imex", ""))
        for version in (driver.version, f"{driver.branch}.99.01")
    ]
    return AptIndex(dirs={"ubuntu2404/x86_64": debs, "ubuntu2404/sbsa": list(debs)})
