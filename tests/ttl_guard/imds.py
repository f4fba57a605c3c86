"""A stand-in EC2 instance metadata service (IMDSv2): a GET without the session token from
PUT /latest/api/token is refused (401) as on EC2 with http_tokens=required; instance tags
can be turned off (404 under tags/instance/, as with instance_metadata_tags disabled)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from flashfleet.components.tags import iso_utc

TOKEN = "stand-in-token"


@dataclass
class Imds:
    tags: dict[str, str] = field(default_factory=dict)
    tags_enabled: bool = True
    launched: datetime = field(default_factory=lambda: datetime.now(UTC) - timedelta(minutes=2))
    url: str = ""


class Handler(BaseHTTPRequestHandler):
    imds: Imds

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, code: int, body: str = "") -> None:
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_PUT(self) -> None:
        if self.path != "/latest/api/token" or not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
            return self._send(400)
        return self._send(200, TOKEN)

    def do_GET(self) -> None:
        if self.headers.get("X-aws-ec2-metadata-token") != TOKEN:
            return self._send(401)  # IMDSv2 required, as the launch template sets it
        prefix = "/latest/meta-data/tags/instance/"
        if self.path.startswith(prefix):
            key = self.path[len(prefix) :]
            if not self.imds.tags_enabled or key not in self.imds.tags:
                return self._send(404)
            return self._send(200, self.imds.tags[key])
        if self.path == "/latest/dynamic/instance-identity/document":
            return self._send(200, json.dumps({"pendingTime": iso_utc(self.imds.launched)}))
        return self._send(404)


@contextmanager
def serve_imds(address: str) -> Iterator[Imds]:
    state = Imds()
    handler = type("H", (Handler,), {"imds": state})
    server = ThreadingHTTPServer((address, 0), handler)
    state.url = f"http://{address}:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
