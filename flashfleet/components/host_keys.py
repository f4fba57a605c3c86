"""SSH host keys of AWS nodes, read from what the node printed on its serial console at first boot.

cloud-init writes the host's public keys between ``-----BEGIN SSH HOST KEY KEYS-----`` and
``-----END SSH HOST KEY KEYS-----`` on the console; ``ec2:GetConsoleOutput`` returns it to the
account that owns the instance (and only to it), with no key material ever in Pulumi state
and no permission on the node. The controller pins these keys (``known_hosts``) before the HF
token is copied to the node, instead of trusting whatever answers on the address.

Only the first block counts (first boot, before anything but cloud-init ran); every key is checked
(its base64 decodes and names its own type). Standard library only; boto3 is passed in.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
import time
from collections.abc import Callable, Iterable
from typing import Any

BEGIN = "-----BEGIN SSH HOST KEY KEYS-----"
END = "-----END SSH HOST KEY KEYS-----"
KEY_TYPES = ("ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521", "ssh-rsa")
_KEY = re.compile(r"(?:^|\s)(" + "|".join(map(re.escape, KEY_TYPES)) + r") ([A-Za-z0-9+/]+={0,2})(?:\s|$)")


class HostKeysUnavailable(Exception):
    """The console holds no (complete, valid) host-key block yet, or could not be read."""


def _valid(key_type: str, blob: str) -> bool:
    try:
        raw = base64.b64decode(blob, validate=True)
        (length,) = struct.unpack(">I", raw[:4])
        return raw[4 : 4 + length].decode() == key_type
    except (binascii.Error, struct.error, UnicodeDecodeError):
        return False


def parse_console(text: str) -> list[tuple[str, str]]:
    """(type, base64) of every host key in the console's first complete block."""
    lines = text.splitlines()
    starts = [i for i, ln in enumerate(lines) if ln.rstrip().endswith(BEGIN)]
    if not starts:
        raise HostKeysUnavailable("no host-key block on the console yet")
    start = starts[0]
    ends = [i for i, ln in enumerate(lines[start:], start) if ln.rstrip().endswith(END)]
    if not ends:
        raise HostKeysUnavailable("the console's host-key block is not complete yet")
    keys = []
    for line in lines[start + 1 : ends[0]]:
        if (m := _KEY.search(line)) is None:
            continue
        if not _valid(m.group(1), m.group(2)):
            raise HostKeysUnavailable(
                f"a {m.group(1)} key on the console does not decode: refusing the block"
            )
        keys.append((m.group(1), m.group(2)))
    if not keys:
        raise HostKeysUnavailable("the console's host-key block holds no key")
    return keys


def known_hosts_lines(address: str, keys: Iterable[tuple[str, str]]) -> list[str]:
    if not address or any(c.isspace() or c in ",#" for c in address):
        raise ValueError(f"{address!r} is not a host address for known_hosts")
    return [f"{address} {kind} {blob}" for kind, blob in keys]


def fetch_host_keys(
    ec2: Any,
    instance_id: str,
    *,
    attempts: int = 40,
    delay_s: float = 15.0,
    sleep: Callable[[float], None] = time.sleep,
) -> list[tuple[str, str]]:
    """Ask EC2 for the console until the host-key block is there (it appears a minute or two
    after boot); raise HostKeysUnavailable when it never does."""
    last = "not asked"
    for attempt in range(attempts):
        if attempt:
            sleep(delay_s)
        out = ec2.get_console_output(InstanceId=instance_id, Latest=False).get("Output") or ""
        try:
            # boto3 already base64-decodes Output; accept a raw API answer too
            text = out if BEGIN in out else base64.b64decode(out).decode(errors="replace")
        except (binascii.Error, ValueError):
            text = out
        try:
            return parse_console(text)
        except HostKeysUnavailable as err:
            last = str(err)
    raise HostKeysUnavailable(f"{instance_id}: {last} after {attempts} tries")


def known_hosts(ec2: Any, addresses: list[str], instance_ids: list[str], **fetch: Any) -> str:
    """``known_hosts`` text for the stack's nodes (outputs ``addresses`` and ``instanceIds``, in
    node order): every address pinned to the keys its own instance printed."""
    if len(addresses) != len(instance_ids):
        raise ValueError(f"{len(addresses)} addresses for {len(instance_ids)} instances")
    lines: list[str] = []
    for address, instance_id in zip(addresses, instance_ids, strict=True):
        lines += known_hosts_lines(address, fetch_host_keys(ec2, instance_id, **fetch))
    return "".join(line + "\n" for line in lines)
