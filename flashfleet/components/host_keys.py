"""SSH host keys of AWS nodes, read from what the node printed on its serial console at first boot.

cloud-init writes the host's public keys between ``-----BEGIN SSH HOST KEY KEYS-----`` and
``-----END SSH HOST KEY KEYS-----`` on the console; ``ec2:GetConsoleOutput`` returns it to the
account that owns the instance (and only to it), with no permission on the node. The bring-up
reads them once per instance (``aws_host_keys``, a resource of the stack), keeps the public keys
in the state, and every run pins them (``flashfleet_host_keys`` -> ``known_hosts``,
``StrictHostKeyChecking=yes``) before the HF token is copied to the node, instead of trusting
whatever answers on the address.

Only the first block counts (the first boot's, read while the node is new); every key is checked
(its base64 decodes and names its own type). Standard library and botocore's exceptions; the
EC2 client is passed in.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
import time
from collections.abc import Callable, Sequence
from typing import Any

BEGIN = "-----BEGIN SSH HOST KEY KEYS-----"
END = "-----END SSH HOST KEY KEYS-----"
KEY_TYPES = ("ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521", "ssh-rsa")
_KEY = re.compile(r"(?:^|\s)(" + "|".join(map(re.escape, KEY_TYPES)) + r") ([A-Za-z0-9+/]+={0,2})(?:\s|$)")


# EC2's codes for a missing permission: asking again will not help.
DENIED = ("UnauthorizedOperation", "AccessDenied", "AccessDeniedException")


class HostKeysUnavailable(Exception):
    """The console holds no (complete, valid) host-key block yet, or could not be read."""


class HostKeysDenied(HostKeysUnavailable):
    """The credentials may not read the console (ec2:GetConsoleOutput)."""


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


def _console_text(output: str) -> str:
    # boto3 already base64-decodes Output; accept a raw API answer too
    if BEGIN in output:
        return output
    try:
        return base64.b64decode(output).decode(errors="replace")
    except (binascii.Error, ValueError):
        return output


def _error_code(err: Exception) -> str:
    return str(getattr(err, "response", {}).get("Error", {}).get("Code", "")) or type(err).__name__


def ask_console(ec2: Any, instance_id: str) -> list[tuple[str, str]]:
    """The host keys on one instance's console now; HostKeysUnavailable when they are not there.

    ``Latest=True``: the console as it is now (Nitro instances, every GPU type flashfleet runs).
    The default answer is a snapshot taken shortly after the instance started, which may predate
    cloud-init's last stage (where the keys are printed) until the next state change."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        out = ec2.get_console_output(InstanceId=instance_id, Latest=True).get("Output") or ""
    except ClientError as err:
        code = _error_code(err)
        if code in DENIED:
            raise HostKeysDenied(
                f"EC2 refused GetConsoleOutput ({code}): allow ec2:GetConsoleOutput"
            ) from None
        raise HostKeysUnavailable(f"EC2 answered {code}") from None
    except BotoCoreError as err:
        raise HostKeysUnavailable(f"EC2 did not answer ({err})") from None
    return parse_console(_console_text(out))


def read_host_keys(
    ec2: Any,
    nodes: Sequence[tuple[str, str]],
    *,
    timeout_s: float,
    delay_s: float = 15.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Every node's host keys (``TYPE BASE64``), asking EC2 every ``delay_s`` until all are read
    or ``timeout_s`` has passed (the block appears a minute or a few after boot).

    ``nodes``: (node name, instance id). Returns (keys by node, why not by node) for the nodes
    read and the nodes not read; a refused permission is not asked again."""
    deadline = clock() + timeout_s
    keys: dict[str, list[str]] = {}
    why: dict[str, str] = {}
    pending = list(nodes)
    while True:
        for name, instance_id in list(pending):
            try:
                keys[name] = [f"{kind} {blob}" for kind, blob in ask_console(ec2, instance_id)]
                why.pop(name, None)
                pending.remove((name, instance_id))
            except HostKeysDenied as err:
                why[name] = f"{instance_id}: {err}"
                pending.remove((name, instance_id))
            except HostKeysUnavailable as err:
                why[name] = f"{instance_id}: {err}"
        if not pending:
            return keys, why
        if clock() + delay_s > deadline:
            for name, _ in pending:
                why[name] += f" after {timeout_s:g} s"
            return keys, why
        sleep(delay_s)
