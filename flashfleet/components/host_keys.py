"""SSH host keys of AWS nodes, read from what the node printed on its serial console at first boot.

cloud-init writes the host's public keys between ``-----BEGIN SSH HOST KEY KEYS-----`` and
``-----END SSH HOST KEY KEYS-----`` on the console; ``ec2:GetConsoleOutput`` returns it to the
account that owns the instance (and only to it), with no permission on the node. The bring-up
reads them once per instance (``aws_host_keys``, a resource of the stack), keeps the public keys
in the state, and every run pins them (``flashfleet_host_keys`` -> ``known_hosts``,
``StrictHostKeyChecking=yes``) before the HF token is copied to the node, instead of trusting
whatever answers on the address.

Only the first block counts (the first boot's, read while the node is new); every key is checked
as the stack's ``hostKeys`` are (``safe_values.ssh_public_key``: cryptography reads it as a key of
the type it names). The EC2 client is passed in.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import time
from collections.abc import Callable, Sequence
from typing import Any

from flashfleet.polling import poll
from flashfleet.stack.safe_values import UnknownKeyType, ssh_public_key

BEGIN = "-----BEGIN SSH HOST KEY KEYS-----"
END = "-----END SSH HOST KEY KEYS-----"


# EC2's codes for a missing permission: asking again will not help.
DENIED = ("UnauthorizedOperation", "AccessDenied", "AccessDeniedException")


class HostKeysUnavailable(Exception):
    """The console holds no (complete, valid) host-key block yet, or could not be read."""


class HostKeysDenied(HostKeysUnavailable):
    """The credentials may not read the console (ec2:GetConsoleOutput)."""


def _line_key(line: str) -> tuple[str, str] | None:
    """(type, base64) of the key on one console line (after any prefix, before its comment); None
    when the line holds none (another process's output among the keys)."""
    for key_type, blob in itertools.pairwise(line.split()):
        try:
            ssh_public_key(key_type, blob)
        except UnknownKeyType:
            continue
        except ValueError:
            raise HostKeysUnavailable(
                f"a {key_type} key on the console does not decode: refusing the block"
            ) from None
        return key_type, blob
    return None


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
    keys = [key for line in lines[start + 1 : ends[0]] if (key := _line_key(line)) is not None]
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
    keys: dict[str, list[str]] = {}
    why: dict[str, str] = {}
    pending = list(nodes)

    def ask_pending() -> list[tuple[str, str]]:
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
        return pending

    late = poll(
        ask_pending, lambda left: not left, timeout_s=timeout_s, interval_s=delay_s, clock=clock, sleep=sleep
    )
    for name, _ in late:
        why[name] += f" after {timeout_s:g} s"
    return keys, why
