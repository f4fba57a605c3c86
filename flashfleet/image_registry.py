"""What an image tag names in its registry today: the digest `docker pull` would fetch and each
platform's manifest digest, over the OCI distribution API (`GET /v2/<name>/manifests/<tag>`),
for `flashfleet lock`.

The registry is the one the tag names, as Docker reads a reference: `lmsysorg/sglang` is Docker
Hub's `registry-1.docker.io/lmsysorg/sglang`, `host:port/name` is that host's. Like Docker, a
registry on the loopback address is spoken to over plain HTTP and any other over HTTPS (with the
system's trust store, or `$SSL_CERT_FILE`). A registry that asks for a token gets an anonymous
one from the realm its `WWW-Authenticate` names, as `docker pull` of a public image does.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flashfleet.stack.lock import LockedImage

DOCKER_HUB = "registry-1.docker.io"
INDEX_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
ARCH = {"x86_64": "linux/amd64", "arm64": "linux/arm64"}  # a node's arch -> the image platform


class RegistryError(RuntimeError):
    """The registry did not resolve the tag; the message is one line."""


def split_ref(ref: str) -> tuple[str, str, str]:
    """``repository:tag`` -> (registry host, repository path in it, tag), as Docker reads it."""
    name, _, tag = ref.rpartition(":")
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return first, rest, tag
    return DOCKER_HUB, name if "/" in name else f"library/{name}", tag


def _scheme(host: str) -> str:
    hostname = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    if hostname == "localhost":
        return "http"
    try:
        return "http" if ipaddress.ip_address(hostname.strip("[]")).is_loopback else "https"
    except ValueError:
        return "https"


def _bearer(client: Any, challenge: str, where: str) -> str:
    """An anonymous token from the realm a `WWW-Authenticate: Bearer ...` challenge names."""
    import urllib.request

    fields = dict(urllib.request.parse_keqv_list(urllib.request.parse_http_list(challenge.split(" ", 1)[1])))
    realm = fields.pop("realm", None)
    if not challenge.lower().startswith("bearer ") or not realm:
        raise RegistryError(
            f"{where}: the registry asks for credentials flashfleet does not hold ({challenge})"
        )
    answer = client.get(realm, params=fields)
    if answer.status_code != 200:
        raise RegistryError(f"{where}: its token service answered {answer.status_code}")
    token = answer.json().get("token") or answer.json().get("access_token")
    if not token:
        raise RegistryError(f"{where}: its token service gave no token")
    return str(token)


def _getter(client: Any, ref: str) -> Any:
    """GET below the repository's /v2/<name>/, with an anonymous token once the registry asks."""
    host, name, _ = split_ref(ref)
    base = f"{_scheme(host)}://{host}/v2/{name}"
    headers = {"Accept": ", ".join(INDEX_TYPES + MANIFEST_TYPES)}

    def get(path: str) -> Any:
        answer = client.get(f"{base}/{path}", headers=headers)
        if answer.status_code == 401 and "Authorization" not in headers:
            challenge = answer.headers.get("WWW-Authenticate", "")
            headers["Authorization"] = f"Bearer {_bearer(client, challenge, ref)}"
            answer = client.get(f"{base}/{path}", headers=headers)
        if answer.status_code != 200:
            raise RegistryError(f"{ref}: the registry answered {answer.status_code} for {path}")
        return answer

    return get


def resolve_image(ref: str, platform: str, digest: str | None = None) -> tuple[LockedImage, dict[str, str]]:
    """The digest `ref` (``repository:tag``) names today, and its platforms; `platform` (such as
    linux/amd64) must be among them. With `digest` (a stack's own image.digest), that manifest
    is read instead of the tag's. Also the labels of `platform`'s image (its config's)."""
    import httpx2  # huggingface_hub's HTTP client, already a dependency

    from flashfleet.stack.lock import LockedImage

    tag = split_ref(ref)[2]
    try:
        with httpx2.Client(timeout=30, follow_redirects=True) as client:
            get = _getter(client, ref)
            answer = get(f"manifests/{digest or tag}")
            got = "sha256:" + hashlib.sha256(answer.content).hexdigest()
            sent = answer.headers.get("Docker-Content-Digest")
            if (sent and sent != got) or (digest and got != digest):
                raise RegistryError(
                    f"{ref}: the registry named {sent or digest}, but its manifest hashes to {got}"
                )
            doc = json.loads(answer.content)
            if doc.get("mediaType") in INDEX_TYPES or "manifests" in doc:
                platforms = {
                    f"{m['platform']['os']}/{m['platform']['architecture']}": m["digest"]
                    for m in doc["manifests"]
                    if m.get("platform", {}).get("os", "unknown") != "unknown"  # attestations
                }
                if platform in platforms:
                    doc = json.loads(get(f"manifests/{platforms[platform]}").content)
                config = (
                    json.loads(get(f"blobs/{doc['config']['digest']}").content) if "config" in doc else {}
                )
            else:  # one image: its platform is in its config blob
                config = json.loads(get(f"blobs/{doc['config']['digest']}").content)
                platforms = {f"{config['os']}/{config['architecture']}": got}
    except httpx2.TransportError as err:  # refused, unreachable, timed out, a certificate refused
        raise RegistryError(f"{ref}: {type(err).__name__}: {err}") from None
    except (KeyError, TypeError, ValueError) as err:
        raise RegistryError(f"{ref}: the registry's manifest is not one Docker reads ({err})") from None
    if platform not in platforms:
        have = ", ".join(sorted(platforms)) or "none"
        raise RegistryError(f"{ref}: the tag has no {platform} image (it has: {have})")
    labels = (config.get("config") or {}).get("Labels") or {}
    return LockedImage(digest=got, platforms=platforms), {str(k): str(v) for k, v in labels.items()}
