"""A stand-in Python package index: the simple API pip and `flashfleet lock` read, over files
held in memory, and a record of every request.

As PyPI answers it: `/simple/<project>/` in JSON (PEP 691) when the client's Accept asks for
`application/vnd.pypi.simple.v1+json`, else HTML (PEP 503) whose links carry `#sha256=`; a name
that is not normalized (PEP 503) is redirected to the normalized one; a project it does not have
is 404; a yanked file is marked (`yanked` / `data-yanked`). `/files/<name>` serves a file's bytes,
or the bytes `tampered` names instead (a mirror that changed a file after it was locked).
`/find-links/` is a plain folder listing of every file with no hash, as `python -m http.server`
serves a wheel folder (pip's --find-links, which `flashfleet lock` hashes by fetching).
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_JSON = "application/vnd.pypi.simple.v1+json"


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def project_of(filename: str) -> str:
    """The project a distribution file belongs to, from its name (wheel or sdist)."""
    stem = filename.removesuffix(".whl").removesuffix(".tar.gz")
    return normalized(stem.split("-")[0])


@dataclass
class PackageIndex:
    files: dict[str, bytes] = field(default_factory=dict)  # file name -> bytes
    yanked: set[str] = field(default_factory=set)
    tampered: dict[str, bytes] = field(default_factory=dict)  # file name -> the bytes served instead
    requests: list[str] = field(default_factory=list)
    json_api: bool = True  # False: an index that answers in HTML alone (PEP 503, as many mirrors)
    server: ThreadingHTTPServer | None = None
    url: str = ""

    @classmethod
    def of_catalog_pins(cls) -> PackageIndex:
        """One file of each version the catalog pins (what the derived images add to the default
        release, the weights client, each Mooncake wheel, the router's smg): enough for `flashfleet lock` of any catalog stack."""
        from packaging.requirements import Requirement

        from flashfleet.catalog import download_client, hardware_catalog, pip_packages
        from flashfleet.catalog.multimodal_packages import image_packages_catalog
        from flashfleet.stack.image import ImageSpec
        from flashfleet.stack.image_packages import image_packages

        catalog = pip_packages()
        wanted = sorted(
            {
                pin.requirement
                for hw in hardware_catalog().values()
                for pin in image_packages(ImageSpec().version, hw).installs
            }
        )
        wanted += [*catalog["mooncake"].values(), f"huggingface_hub=={download_client().hub_version}"]
        wanted.append(f"smg=={image_packages_catalog().router.smg}")  # where a cluster's router is smg
        files = {}
        for text in wanted:
            req = Requirement(text)
            version = next(iter(req.specifier)).version
            name = f"{normalized(req.name).replace('-', '_')}-{version}-py3-none-any.whl"
            files[name] = f"{name} as the index holds it".encode()
        return cls(files=files)

    def start(self, address: str = "127.0.0.1") -> PackageIndex:
        index = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                index.serve(self)

        self.server = ThreadingHTTPServer((address, 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://{address}:{self.server.server_address[1]}"
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    @property
    def simple(self) -> str:
        return f"{self.url}/simple/"

    @property
    def find_links(self) -> str:
        return f"{self.url}/find-links/"

    def sha256(self, filename: str) -> str:
        return hashlib.sha256(self.files[filename]).hexdigest()

    def serve(self, h: BaseHTTPRequestHandler) -> None:
        self.requests.append(h.path)
        path = h.path.split("?", 1)[0]
        if path == "/find-links/":
            names = sorted(self.files)
            links = "".join(f'<a href="/files/{html.escape(n)}">{html.escape(n)}</a><br>\n' for n in names)
            return self._send(h, 200, "text/html", f"<html><body>\n{links}</body></html>\n".encode())
        m = re.fullmatch(r"/files/([^/]+)", path)
        if m and m.group(1) in self.files:
            name = m.group(1)
            return self._send(h, 200, "application/octet-stream", self.tampered.get(name, self.files[name]))
        m = re.fullmatch(r"/simple/([^/]+)/?", path)
        if not m:
            return self._send(h, 404, "text/plain", b"not found\n")
        project = m.group(1)
        if project != normalized(project) or not path.endswith("/"):
            h.send_response(301)
            h.send_header("Location", f"/simple/{normalized(project)}/")
            h.end_headers()
            return None
        mine = sorted(n for n in self.files if project_of(n) == project)
        if not mine:
            return self._send(h, 404, "text/plain", b"not found\n")
        if self.json_api and _JSON in h.headers.get("Accept", ""):
            doc = {
                "meta": {"api-version": "1.1"},
                "name": project,
                "files": [
                    {"filename": n, "url": f"/files/{n}", "hashes": {"sha256": self.sha256(n)},
                     "yanked": n in self.yanked}
                    for n in mine
                ],
            }  # fmt: skip
            return self._send(h, 200, _JSON, json.dumps(doc).encode())
        yanked = ' data-yanked=""'
        links = "".join(
            f'<a href="/files/{html.escape(n)}#sha256={self.sha256(n)}"'
            f"{yanked if n in self.yanked else ''}>{html.escape(n)}</a><br>\n"
            for n in mine
        )
        return self._send(h, 200, "text/html", f"<html><body>\n{links}</body></html>\n".encode())

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, code: int, kind: str, data: bytes) -> None:
        h.send_response(code)
        h.send_header("Content-Type", kind)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)


def wheel(name: str, version: str, *, requires: tuple[str, ...] = (), marker: str = "") -> tuple[str, bytes]:
    """A small real wheel pip installs: `name` as an importable package, `requires` its
    dependencies; `marker` varies its bytes (a rebuild of the same version)."""
    import base64
    import io
    import zipfile

    module = normalized(name).replace("-", "_")
    dist = f"{module}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    entries = {
        f"{module}/__init__.py": f"__version__ = {version!r}\n# {marker}\n",
        f"{dist}/METADATA": metadata,
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: flashfleet-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in entries.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    entries[f"{dist}/RECORD"] = "\n".join([*record, f"{dist}/RECORD,,"]) + "\n"
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        for path, text in entries.items():
            zf.writestr(zipfile.ZipInfo(path, date_time=(2026, 1, 1, 0, 0, 0)), text)
    return f"{module}-{version}-py3-none-any.whl", out.getvalue()
