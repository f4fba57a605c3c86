"""The AWS nodes' SSH host keys as a resource of the stack: read once per instance, kept in state.

``HostKeys`` asks EC2 for each instance's console (``host_keys.read_host_keys``) when the
instances are new, and keeps the public keys in its outputs. The inventory gives them to each
host as ``flashfleet_host_keys``, the same fact an existing host's ``hostKeys`` becomes, so every
run pins them the same way (``bringup.playbook_run.pin_host_keys``: a ``known_hosts`` file of the
run and ``StrictHostKeyChecking=yes``), site.yml and teardown.yml alike, before anything reaches
the node.

Why a resource and not a read at every ``up``: the first-boot console is not kept for ever (EC2
keeps the last 64 KB; the default snapshot lasts an hour), so a key read later could fail on a
healthy node. A second ``up`` with the same instances changes nothing here (``diff`` compares the
instance ids only) and asks EC2 nothing; a replaced instance is read again, and its new keys
change the inventory, which runs the playbooks on the new machine.

A node whose keys cannot be read within ``timeoutS`` is recorded under ``missing`` (not raised
from the provider: the engine would print a traceback), and ``pinned_keys`` turns that into one
``pulumi.RunError`` line naming the node: the inventory never exists, so no playbook runs and
nothing is sent to an unpinned address. The next ``up`` reads again.

The provider holds no state (the engine pickles it with dill and calls it in another process):
the EC2 client is made per call, from the region input and the caller's AWS settings.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, Resource, ResourceProvider, UpdateResult
from pulumi.output import Unknown

from flashfleet.aws_client import aws_client
from flashfleet.components.host_keys import read_host_keys

# cloud-init prints the keys at the end of the first boot (a few minutes on the GPU types); the
# bound a bring-up waits for all of them before it fails.
HOST_KEYS_TIMEOUT_S = 20 * 60
POLL_S = 15.0
IAM_ACTION = "ec2:GetConsoleOutput"


def _ec2(region: str | None) -> Any:
    return aws_client("ec2", region)


def _plain(props: Mapping[str, Any]) -> tuple[list[str], list[str], str | None, float]:
    ids = [str(i) for i in props.get("instanceIds") or []]
    nodes = [str(n) for n in props.get("nodes") or []]
    if len(ids) != len(nodes):
        raise ValueError(f"{len(nodes)} nodes for {len(ids)} instances")
    region = props.get("region")
    return ids, nodes, str(region) if region else None, float(props.get("timeoutS") or 0)


def _read(props: Mapping[str, Any]) -> dict[str, Any]:
    ids, nodes, region, timeout_s = _plain(props)
    found, why = read_host_keys(
        _ec2(region), list(zip(nodes, ids, strict=True)), timeout_s=timeout_s, delay_s=POLL_S
    )
    return {
        "instanceIds": ids,
        "nodes": nodes,
        "region": region,
        "timeoutS": timeout_s,
        # in node order; a node not read has none
        "keys": [found.get(n, []) for n in nodes],
        "missing": [f"{n} ({why.get(n, 'not read')})" for n in nodes if n not in found],
    }


class HostKeysProvider(ResourceProvider):
    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        if any(isinstance(news.get(k), Unknown) for k in ("instanceIds", "nodes")) or any(
            isinstance(i, Unknown) for i in news.get("instanceIds") or []
        ):
            return DiffResult(changes=True, replaces=[], delete_before_replace=False)
        same = list(olds.get("instanceIds") or []) == list(news.get("instanceIds") or []) and list(
            olds.get("nodes") or []
        ) == list(news.get("nodes") or [])
        # a node not read last time is asked again
        return DiffResult(
            changes=not same or bool(olds.get("missing")), replaces=[], delete_before_replace=False
        )

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(f"hostkeys-{uuid.uuid4().hex[:12]}", _read(props))

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(_read(news))

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        return None  # nothing was made: the keys go with the state


class HostKeys(Resource, module="flashfleet", name="HostKeys"):
    """Outputs: ``keys`` (per node, in node order, ``TYPE BASE64`` strings) and ``missing``
    (``"node (instance: why)"`` for each node not read)."""

    keys: pulumi.Output[list[list[str]]]
    missing: pulumi.Output[list[str]]

    def __init__(
        self,
        name: str,
        instance_ids: pulumi.Input[Sequence[str]],
        nodes: Sequence[str],
        region: str | None,
        *,
        timeout_s: float = HOST_KEYS_TIMEOUT_S,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        props = {
            "instanceIds": instance_ids,
            "nodes": list(nodes),
            "region": region,
            "timeoutS": timeout_s,
            "keys": None,  # outputs, declared so they become attributes
            "missing": None,
        }
        super().__init__(HostKeysProvider(), name, props, opts)


def pinned_keys(keys: list[list[str]] | None, missing: list[str] | None) -> list[list[str]]:
    """The keys to pin, or one line that stops the bring-up naming the nodes not read."""
    if missing:
        raise pulumi.RunError(
            f"no SSH host keys for {'; '.join(missing)}: nothing was sent to the node. They are read "
            f"from its console ({IAM_ACTION}), where cloud-init prints them at first boot; "
            "run up again once it has"
        )
    if not keys or not all(keys):
        raise pulumi.RunError("host keys of the AWS nodes are missing from the state: run up again")
    return keys
