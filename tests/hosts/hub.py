"""A stand-in Hugging Face Hub: the HTTP endpoints `hf download` uses (repo info, file tree,
resolve with ETag/X-Repo-Commit/Range), a gated repository that answers 401 without a
token, and a record of every request so tests can see what a client sent and resumed.

Revisions as the Hub has them: `main` names a repository's current commit, and a commit sha
names that commit, also after `main` moved on (`Repo.move_main`). With `?blobs=true` the repo
info lists each file's size and blob id, and an LFS file's sha256, as `HfApi.model_info(...,
files_metadata=True)` (what `flashfleet lock` calls) reads them.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

# What the Hub stores in LFS (a checkpoint's shards); other files are plain git blobs.
_LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")


def commit_sha(files: dict[str, bytes]) -> str:
    digest = hashlib.sha1()
    for path in sorted(files):
        digest.update(path.encode() + files[path])
    return digest.hexdigest()


def git_oid(content: bytes) -> str:
    """git's blob id: what the Hub lists as a file's blobId."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def sibling(path: str, content: bytes) -> dict[str, Any]:
    """One file of the repo info with blobs=true, as the Hub lists it."""
    entry: dict[str, Any] = {"rfilename": path, "size": len(content), "blobId": git_oid(content)}
    if path.endswith(_LFS_SUFFIXES):
        entry["lfs"] = {
            "size": len(content),
            "sha256": hashlib.sha256(content).hexdigest(),
            "pointerSize": 134,
        }
    return entry


@dataclass
class Repo:
    files: dict[str, bytes]  # main's commit
    gated: bool = False
    history: dict[str, dict[str, bytes]] = field(default_factory=dict)  # earlier commits of main, by sha

    @property
    def sha(self) -> str:
        return commit_sha(self.files)

    def move_main(self, files: dict[str, bytes]) -> str:
        """A new commit on main; the old one stays downloadable by its sha. Returns the new sha."""
        self.history[self.sha] = self.files
        self.files = files
        return self.sha

    def at(self, revision: str) -> dict[str, bytes] | None:
        if revision in ("main", self.sha):
            return self.files
        return self.history.get(revision)


@dataclass
class Request:
    method: str
    path: str
    authorization: str
    range: str


@dataclass
class Hub:
    token: str
    repos: dict[str, Repo] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    # files whose next download is cut in the middle (the connection drops), once
    interrupt_once: set[str] = field(default_factory=set)
    # files the Hub lists but cannot serve right now (404), until removed from the set
    unavailable: set[str] = field(default_factory=set)
    # "repo/path" -> the bytes served for it instead of the listed ones (a corrupt mirror or
    # cache): what a lock's hash check on the node must catch
    tampered: dict[str, bytes] = field(default_factory=dict)
    # a misbehaving Hub (or proxy) that quotes the credentials it got in the URL of its error,
    # which the client then prints: what a redaction must catch
    quote_token_in_errors: bool = False
    # "repo/path" -> bytes of the file sent so far (every GET's body, resumed ranges included)
    served: dict[str, int] = field(default_factory=dict)
    server: ThreadingHTTPServer | None = None

    def start(self, address: str) -> str:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_HEAD(self) -> None:
                hub.serve(self, body=False)

            def do_GET(self) -> None:
                hub.serve(self, body=True)

        self.server = ThreadingHTTPServer((address, 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://{address}:{self.server.server_address[1]}"

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()

    def file_gets(self, repo: str) -> list[Request]:
        return [r for r in self.requests if r.method == "GET" and f"/{repo}/resolve/" in r.path]

    def serve(self, h: BaseHTTPRequestHandler, body: bool) -> None:
        auth = h.headers.get("Authorization", "")
        self.requests.append(Request(h.command, h.path, auth, h.headers.get("Range", "")))
        path = h.path.split("?", 1)[0]
        m = re.fullmatch(r"/api/models/(.+?)/(revision|tree)/([^/]+)(/.*)?", path)
        r = re.fullmatch(r"/(.+?)/resolve/([^/]+)/(.+)", path)
        repo_id = (m or r).group(1) if (m or r) else ""
        repo = self.repos.get(repo_id)
        if repo is None:
            return self._json(
                h, 404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"}, body
            )
        if repo.gated and auth != f"Bearer {self.token}":
            msg = {
                "error": f"Access to model {repo_id} is restricted. You must have access to it and be authenticated."
            }
            return self._json(h, 401, msg, {"X-Error-Code": "GatedRepo"}, body)
        files = repo.at(unquote(m.group(3) if m else r.group(2) if r else ""))
        if files is None:
            msg = {"error": "Invalid rev id"}
            return self._json(h, 404, msg, {"X-Error-Code": "RevisionNotFound"}, body)
        if m and m.group(2) == "revision":
            blobs = "blobs=true" in h.path.split("?", 1)[-1].lower()
            siblings = [sibling(p, c) if blobs else {"rfilename": p} for p, c in sorted(files.items())]
            info = {"id": repo_id, "modelId": repo_id, "sha": commit_sha(files), "siblings": siblings,
                    "private": False, "gated": "manual" if repo.gated else False}  # fmt: skip
            return self._json(h, 200, info, {}, body)
        if m:
            tree = [{"type": "file", "path": p, "size": len(c), "oid": git_oid(c)}
                    for p, c in sorted(files.items())]  # fmt: skip
            return self._json(h, 200, tree, {}, body)
        content = files.get(r.group(3)) if r else None
        if r and content is not None:
            content = self.tampered.get(f"{repo_id}/{r.group(3)}", content)
        if content is None or f"{repo_id}/{r.group(3) if r else ''}" in self.unavailable:
            if self.quote_token_in_errors and "credential=" not in h.path:
                credential = auth.removeprefix("Bearer ")
                return self._json(h, 302, {}, {"Location": f"{h.path}?credential={credential}"}, body)
            return self._json(h, 404, {"error": "Entry not found"}, {"X-Error-Code": "EntryNotFound"}, body)
        start = 0
        rng = re.fullmatch(r"bytes=(\d+)-", h.headers.get("Range", ""))
        if rng and h.command == "GET":
            start = int(rng.group(1))
        h.send_response(206 if start else 200)
        h.send_header("ETag", f'"{hashlib.sha1(content).hexdigest()}"')
        h.send_header("X-Repo-Commit", commit_sha(files))
        h.send_header("Content-Length", str(len(content) - start))
        if start:
            h.send_header("Content-Range", f"bytes {start}-{len(content) - 1}/{len(content)}")
        h.end_headers()
        if not body:
            return
        key = f"{repo_id}/{r.group(3) if r else ''}"
        if key in self.interrupt_once:
            self.interrupt_once.discard(key)
            h.wfile.write(content[start : start + len(content) // 2])
            h.wfile.flush()
            self.served[key] = self.served.get(key, 0) + len(content) // 2
            h.close_connection = True
            h.connection.shutdown(2)  # socket.SHUT_RDWR: the client sees a short body
            return
        h.wfile.write(content[start:])
        self.served[key] = self.served.get(key, 0) + len(content) - start

    @staticmethod
    def _json(h: BaseHTTPRequestHandler, code: int, obj: object, headers: dict[str, str], body: bool) -> None:
        data = json.dumps(obj).encode()
        h.send_response(code)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        for k, v in headers.items():
            h.send_header(k, v)
        h.end_headers()
        if body:
            h.wfile.write(data)
