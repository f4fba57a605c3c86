"""A real OCI registry for the tests: Debian's `docker-registry` (distribution 2.8), installed by
scripts/setup.d/20-test-hosts.sh, serving from a temporary folder.

On loopback it speaks plain HTTP, as Docker and flashfleet expect of a loopback registry; on the
test network's gateway it serves TLS with a certificate made here, which the test hosts' Docker
engines trust through `/etc/docker/certs.d/<host:port>/ca.crt` and flashfleet through
$SSL_CERT_FILE, as a private registry is trusted. Images are pushed either by a host's Docker
engine (`docker push`) or here, through the registry's own upload API (`push`): a config blob, a
one-file layer and a manifest, enough for the registry to serve and resolve the tag."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
import socket
import subprocess
import tarfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

BINARY = shutil.which("docker-registry")
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
INDEX = "application/vnd.oci.image.index.v1+json"
UBUNTU_LABELS = {"org.opencontainers.image.ref.name": "ubuntu", "org.opencontainers.image.version": "24.04"}
# what Docker's own engine pushes; a client that does not accept it gets distribution's schema-1
# conversion, under another digest
DOCKER_TYPES = "application/vnd.docker.distribution.manifest.v2+json, application/vnd.docker.distribution.manifest.list.v2+json"


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class Registry:
    def __init__(self, root: Path, host: str = "127.0.0.1", tls: bool = False) -> None:
        self.root, self.host, self.tls = root, host, tls
        self.port = _free_port(host)
        self.proc: subprocess.Popen[bytes] | None = None
        self.ca = root / "ca.crt"

    @property
    def address(self) -> str:
        """host:port, as an image reference names the registry."""
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.address}"

    def start(self) -> Registry:
        if BINARY is None:
            raise RuntimeError("no docker-registry: run scripts/setup.d/20-test-hosts.sh")
        self.root.mkdir(parents=True, exist_ok=True)
        http: dict[str, Any] = {"addr": self.address}
        if self.tls:
            key = self.root / "registry.key"
            subprocess.run(
                ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
                 "-out", str(self.ca), "-days", "2", "-subj", f"/CN={self.host}",
                 "-addext", f"subjectAltName=IP:{self.host}"],
                check=True, capture_output=True,
            )  # fmt: skip
            http["tls"] = {"certificate": str(self.ca), "key": str(key)}
        config = {
            "version": 0.1,
            "log": {"level": "warn"},
            "storage": {
                "filesystem": {"rootdirectory": str(self.root / "data")},
                "delete": {"enabled": True},
            },
            "http": http,
        }
        (self.root / "config.yml").write_text(json.dumps(config))  # JSON is YAML
        log = (self.root / "registry.log").open("wb")
        self.proc = subprocess.Popen([BINARY, "serve", str(self.root / "config.yml")], stdout=log, stderr=log)
        deadline = time.monotonic() + 30
        while True:
            try:
                if self._request("GET", "/v2/")[0] == 200:
                    return self
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"docker-registry did not start: {(self.root / 'registry.log').read_text()}"
                )
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)

    def _request(
        self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        import ssl

        context = ssl.create_default_context(cafile=str(self.ca)) if self.tls else None
        req = urllib.request.Request(self.url + path, data=body, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=10, context=context) as resp:
                return resp.status, dict(resp.headers), resp.read()
        except urllib.error.HTTPError as err:
            return err.code, dict(err.headers), err.read()

    def _blob(self, name: str, data: bytes) -> str:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        status, headers, _ = self._request("POST", f"/v2/{name}/blobs/uploads/")
        assert status == 202, status
        location = headers["Location"]
        location = location.removeprefix(self.url)
        sep = "&" if "?" in location else "?"
        status, _, text = self._request(
            "PUT", f"{location}{sep}digest={digest}", data, {"Content-Type": "application/octet-stream"}
        )
        assert status == 201, (status, text)
        return digest

    def _manifest(self, name: str, reference: str, doc: dict[str, Any], media_type: str) -> str:
        body = json.dumps(doc).encode()
        status, _, text = self._request(
            "PUT", f"/v2/{name}/manifests/{reference}", body, {"Content-Type": media_type}
        )
        assert status == 201, (status, text)
        return "sha256:" + hashlib.sha256(body).hexdigest()

    def push(
        self,
        name: str,
        tag: str,
        arch: str = "amd64",
        content: bytes = b"stand-in",
        labels: dict[str, str] | None = None,
    ) -> str:
        """An image of one layer (a file holding `content`) under `name:tag`; its manifest digest.
        Its labels name its distribution (Ubuntu 24.04) as Ubuntu's images and those built on them
        do, unless `labels` are given."""
        layer = io.BytesIO()
        with tarfile.open(fileobj=layer, mode="w") as tar:
            info = tarfile.TarInfo("stand-in")
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
        raw = layer.getvalue()
        packed = gzip.compress(raw, mtime=0)
        config = json.dumps({
            "architecture": arch, "os": "linux",
            "config": {"Cmd": ["sglang"], "Labels": UBUNTU_LABELS if labels is None else labels},
            "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(raw).hexdigest()]},
        }).encode()  # fmt: skip
        manifest = {
            "schemaVersion": 2,
            "mediaType": MANIFEST,
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                       "digest": self._blob(name, config), "size": len(config)},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                        "digest": self._blob(name, packed), "size": len(packed)}],
        }  # fmt: skip
        return self._manifest(name, tag, manifest, MANIFEST)

    def push_index(self, name: str, tag: str, platforms: dict[str, str]) -> str:
        """An image index under `name:tag` over manifests already pushed (arch -> digest)."""
        manifests = []
        for arch, digest in platforms.items():
            status, _, body = self._request(
                "GET", f"/v2/{name}/manifests/{digest}", headers={"Accept": MANIFEST}
            )
            assert status == 200, status
            manifests.append({"mediaType": MANIFEST, "digest": digest, "size": len(body),
                              "platform": {"os": "linux", "architecture": arch}})  # fmt: skip
        return self._manifest(
            name, tag, {"schemaVersion": 2, "mediaType": INDEX, "manifests": manifests}, INDEX
        )

    def tag_digest(self, name: str, tag: str) -> str:
        """What the registry says `name:tag` names now."""
        status, headers, _ = self._request(
            "HEAD", f"/v2/{name}/manifests/{tag}", headers={"Accept": f"{INDEX}, {MANIFEST}, {DOCKER_TYPES}"}
        )
        assert status == 200, status
        return headers["Docker-Content-Digest"]

    def delete(self, name: str, digest: str) -> None:
        status, _, text = self._request("DELETE", f"/v2/{name}/manifests/{digest}")
        assert status == 202, (status, text)
