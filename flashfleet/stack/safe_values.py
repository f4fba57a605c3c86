"""What a stack value may be before it reaches a host: a path, an address, a user, an image.

Every value checked here ends up in an argv, a file, a unit or a template on somebody's machine,
and some of them are deleted, chmodded or bind-mounted read-write. Each check returns the value
(normalised) or raises ValueError with the rule, so pydantic validators and the inventory
contract share one wording. No flashfleet imports: the spec, the Kubernetes source and the
inventory contract all sit above this module.
"""

from __future__ import annotations

import ipaddress
import itertools
import posixpath
import re
import warnings
from typing import Any
from urllib.parse import urlsplit

# --- host paths -----------------------------------------------------------------------------------

# Characters a host path may hold: enough for any sane directory, nothing that a docker
# `-v SRC:DST` (`:`, `,`), a systemd unit (`%`, `$`, spaces), a shell or a YAML scalar would read.
_PATH_CHARS = re.compile(r"^[A-Za-z0-9._@+/-]+$")
# Roots a host path must lie strictly below: flashfleet's own trees and the places data disks
# and scratch space are mounted. An allow-list, not a deny-list of system trees: no list can name
# every database, spool and runtime under /var/lib or /opt that a chmod 0755 and a read-write
# mount would hand out (/var/lib/mysql, /var/spool/cron/crontabs, /var/lib/etcd, /opt/cni/bin...).
HOST_PATH_ROOTS = (
    "/opt/flashfleet",
    "/var/lib/flashfleet",
    "/var/cache/flashfleet",
    "/mnt",
    "/data",
    "/scratch",
    "/srv",
)
HOST_PATH_RULE = (
    "an absolute path strictly below one of " + ", ".join(HOST_PATH_ROOTS) + " (such as "
    "/opt/flashfleet/hf-cache or /mnt/nvme/hf-cache), without '..' or a name starting with '.', "
    "of letters, digits and . _ - + @ only"
)


def host_path(value: object) -> str:
    """A directory flashfleet may create, chmod, mount read-write and (on request) delete.

    Returns the normalised path (`//` and trailing `/` folded, `.` dropped); raises ValueError.
    """
    if not isinstance(value, str) or not value:
        raise ValueError(f"must be {HOST_PATH_RULE}")
    if not value.startswith("/"):
        raise ValueError(f"{value!r} is relative: must be {HOST_PATH_RULE}")
    if not _PATH_CHARS.fullmatch(value):
        raise ValueError(f"{value!r} holds a character a host path may not: must be {HOST_PATH_RULE}")
    parts = [p for p in value.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ValueError(f"{value!r} climbs with '..': must be {HOST_PATH_RULE}")
    path = "/" + "/".join(parts)
    # hidden names: login keys (.ssh, .gnupg), X11's /tmp/.X11-unix, other tools' dot-dirs
    if any(p.startswith(".") for p in parts):
        raise ValueError(f"{path} holds a hidden name: must be {HOST_PATH_RULE}")
    if not any(path.startswith(root + "/") for root in HOST_PATH_ROOTS):
        raise ValueError(f"{path} is not below a root flashfleet may own: must be {HOST_PATH_RULE}")
    assert posixpath.normpath(path) == path  # nothing left for the OS to reinterpret
    return path


# --- hosts and users ------------------------------------------------------------------------------

_DNS_LABEL = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")
ADDRESS_RULE = "must be an IP address or a DNS name (letters, digits, '-' and '.')"


def host_address(value: object) -> str:
    """An IP literal or a DNS name: never an ssh option (`-o...`), a user@ or a newline.

    Returns the canonical form, so that one host is one string: an IP as `ipaddress` writes it,
    a DNS name in lowercase without its trailing dot (DNS names are case-insensitive).
    """
    if not isinstance(value, str) or not value:
        raise ValueError(ADDRESS_RULE)
    if "%" in value:
        # fe80::1%eth0: a zone names an interface of the machine that reads it, not a host
        raise ValueError(f"{value!r} is a scoped address: {ADDRESS_RULE}, without a %zone")
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        pass
    name = value[:-1] if value.endswith(".") else value
    labels = name.split(".")
    if len(name) > 253 or not all(_DNS_LABEL.fullmatch(label) for label in labels):
        raise ValueError(f"{value!r}: {ADDRESS_RULE}")
    if labels[-1].isdigit():
        raise ValueError(f"{value!r} is not a valid IP address: {ADDRESS_RULE}")
    return name.lower()


_POSIX_USER = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
USER_RULE = "must be a POSIX user name: a lowercase letter or '_', then up to 31 of a-z 0-9 _ -"


def posix_user(value: object) -> str:
    if not isinstance(value, str) or not _POSIX_USER.fullmatch(value):
        raise ValueError(f"{value!r}: {USER_RULE}")
    return value


# --- images ---------------------------------------------------------------------------------------

# The distribution reference grammar (github.com/distribution/reference): an optional registry
# host[:port] (a first component with '.' or ':', or localhost), then lowercase path components.
_HOST_LABEL = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?"
_REGISTRY = re.compile(rf"^{_HOST_LABEL}(?:\.{_HOST_LABEL})*(?::[0-9]+)?$")
_COMPONENT = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")
# A tag that names whatever was pushed last, not one build.
FLOATING_TAG = re.compile(r"(^|[-_.])(latest|dev|nightly|main)($|[-_.])")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
PINNED_IMAGE_RULE = "a pinned image: repository:tag (a release, not latest), @sha256:<64 hex>, or both"


def image_repository(value: str) -> str:
    first, _, rest = value.partition("/")
    registry = bool(rest) and ("." in first or ":" in first or first == "localhost")
    components = rest.split("/") if registry else value.split("/")
    ok = (not registry or _REGISTRY.fullmatch(first)) and all(_COMPONENT.fullmatch(c) for c in components)
    if len(value) > 255 or not ok:
        raise ValueError(f"{value!r} is not an image repository (such as lmsysorg/sglang)")
    return value


def image_tag(value: str) -> str:
    if not _TAG.fullmatch(value):
        # at most 100: the derived image's tag adds a suffix within Docker's 128
        raise ValueError(f"{value!r} is not an image tag (letters, digits, _ . -; at most 100)")
    return value


def pinned_image(value: str) -> str:
    """A whole image reference a node pulls as it is (``repo:tag``, ``repo@sha256:...``, or both)."""
    name, _, digest = value.partition("@")
    # the tag follows the last ':' after the last '/' (a registry port is before a '/')
    slash = name.rfind("/")
    colon = name.rfind(":")
    repo, tag = (name[:colon], name[colon + 1 :]) if colon > slash else (name, "")
    try:
        image_repository(repo)
        if tag:
            image_tag(tag)
    except ValueError:
        raise ValueError(f"{value!r} is not {PINNED_IMAGE_RULE}") from None
    if digest and not _DIGEST.fullmatch(digest):
        raise ValueError(f"{value!r}: the digest must be sha256:<64 lowercase hex>")
    if not digest and (not tag or FLOATING_TAG.search(tag)):
        raise ValueError(f"{value!r} floats: use {PINNED_IMAGE_RULE}")
    return value


# --- small names ---------------------------------------------------------------------------------

_KEY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$")
_ZONE = re.compile(r"^[a-z]{2}(-[a-z0-9]+){2,6}$")
_DEVICE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def key_name(value: str) -> str:
    if not _KEY_NAME.fullmatch(value):
        raise ValueError(f"{value!r}: an EC2 key pair name of letters, digits and . _ - (at most 255)")
    return value


def availability_zone(value: str) -> str:
    if len(value) > 64 or not _ZONE.fullmatch(value):
        raise ValueError(f"{value!r} is not an availability zone name (such as us-east-2a)")
    return value


def device_name(value: str) -> str:
    if not _DEVICE.fullmatch(value):
        raise ValueError(f"{value!r} is not a device name (such as mlx5_0)")
    return value


_CANONICAL_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")


class UnknownKeyType(ValueError):
    """The word names no SSH public-key type (so the text beside it is not a key at all)."""


def ssh_public_key(key_type: str, blob: str) -> str:
    """`TYPE BASE64` when ``blob`` is an SSH public key of type ``key_type`` (ed25519, ECDSA, RSA
    and their security-key forms), as cryptography reads it; ValueError (UnknownKeyType for an
    unknown type) when not. DSA is refused as OpenSSH refuses it by default."""
    # Imported here: cryptography costs about 0.1 s, and only stacks with host keys need it.
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives.asymmetric import dsa
    from cryptography.hazmat.primitives.serialization import load_ssh_public_key

    try:
        with warnings.catch_warnings():  # its DSA deprecation notice would be a second stderr line
            warnings.simplefilter("ignore")
            key = load_ssh_public_key(f"{key_type} {blob}".encode())
    except UnsupportedAlgorithm:
        raise UnknownKeyType(f"{key_type!r} is not an SSH key type") from None
    except (ValueError, UnicodeEncodeError):
        raise ValueError(f"not a {key_type} key") from None
    # cryptography's base64 is lenient (it skips stray bytes); the key goes into known_hosts as given
    if not _CANONICAL_BASE64.fullmatch(blob):
        raise ValueError(f"not a {key_type} key (its base64 holds other characters)")
    if isinstance(key, dsa.DSAPublicKey):
        raise ValueError("a DSA key (OpenSSH no longer accepts them)")
    return f"{key_type} {blob}"


def host_key(value: str) -> str:
    """A host public key as sshd keeps it (`/etc/ssh/ssh_host_ed25519_key.pub`) or as a
    known_hosts line gives it after the host name: `TYPE BASE64 [comment]`; returns `TYPE BASE64`."""
    for key_type, blob in itertools.pairwise(value.split()[:3]):  # a known_hosts line: host first
        try:
            return ssh_public_key(key_type, blob)
        except UnknownKeyType:
            continue
        except ValueError:
            break
    raise ValueError(
        "must be a host public key such as 'ssh-ed25519 AAAAC3Nza...' "
        "(cat /etc/ssh/ssh_host_ed25519_key.pub on the host)"
    )


def plain_text(value: str, limit: int = 256) -> str:
    """Free text that ends up in tags and descriptions: one line, printable, bounded."""
    if len(value) > limit or not value.isprintable():
        raise ValueError(f"must be one line of printable text, at most {limit} characters")
    return value


# --- mirrors, versions and programs (a stack's site section, `configure -e`) ---------------------

_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+~:-]{0,127}$")
_URL_PATH = re.compile(r"^[A-Za-z0-9._~/%+=&?:,-]*$")
_EXECUTABLE = re.compile(r"^(/[A-Za-z0-9._+-]+)+$")
URL_RULE = "an http(s) URL of a DNS name or IP address, an optional port and a path, with no user or password"


def version(value: Any) -> str:
    if not isinstance(value, str) or not _VERSION.fullmatch(value):
        raise ValueError(f"{value!r}: must be a version of letters, digits and . _ + ~ : -")
    return value


def url(value: Any) -> str:
    if not isinstance(value, str) or not value.isprintable():
        raise ValueError(f"must be {URL_RULE}")
    parts = urlsplit(value)
    if "@" in parts.netloc:
        raise ValueError(
            "a URL may not carry a user or password: it is stored in plain text in the "
            f"stack file and the state; must be {URL_RULE}"
        )
    if parts.scheme not in {"http", "https"} or not parts.hostname or parts.fragment:
        raise ValueError(f"{value!r}: must be {URL_RULE}")
    host_address(parts.hostname)
    try:
        parts.port  # noqa: B018 (raises on a port out of range)
    except ValueError:
        raise ValueError(f"{value!r}: the port must be 1-65535; must be {URL_RULE}") from None
    if not _URL_PATH.fullmatch(parts.path + ("?" + parts.query if parts.query else "")):
        raise ValueError(f"{value!r}: the path holds a character a URL here may not; must be {URL_RULE}")
    return value


def port(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536:
        raise ValueError(f"{value!r}: must be a port, a whole number 1-65535")
    return value


def host_port(value: Any) -> str:
    """`host` or `host:port` (pip's trusted host, Mooncake's master address)."""
    if not isinstance(value, str):
        raise ValueError(f"{value!r}: must be host or host:port ({ADDRESS_RULE})")
    host, sep, number = value.rpartition(":") if value.count(":") == 1 else ("", "", "")
    if not sep:
        return host_address(value)
    host_address(host)
    if not number.isdigit():
        raise ValueError(f"{value!r}: must be host or host:port with a port 1-65535")
    port(int(number))
    return value


def executable(value: Any) -> str:
    """A program the roles run (the container CLI): an absolute path, nothing to reinterpret."""
    if not isinstance(value, str) or not _EXECUTABLE.fullmatch(value) or "/../" in value + "/":
        raise ValueError(f"{value!r}: must be the absolute path of a program (letters, digits, . _ + -)")
    return value


def url_or_path(value: Any) -> str:
    """pip's --find-links: a URL, or a directory on the node."""
    return url(value) if "://" in str(value) else host_path(value)
