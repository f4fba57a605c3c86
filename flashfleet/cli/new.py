"""`flashfleet new NAME`: a stack file of one's own to start from, commented, that validates.

Like `pulumi new` or `dstack init`, but for one stack: the hardware, strategy, topology and node
source asked for, the rest at the catalog's defaults, each field that is the user's to change
marked as such. The file is checked as `validate` checks it before it is written, and written
whole or not at all; an existing file is never overwritten. Every field is described in
docs/stack-spec.md (generated from the spec's own schema).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from flashfleet.cli.common import UsageError
from flashfleet.stack.capacity_block import PLACEHOLDER_RESERVATION

SOURCES = ("existing", "aws", "kubernetes")
# Documentation addresses (RFC 5737): a scaffold's hosts are placeholders until the user's own
PLACEHOLDER_HOSTS = "192.0.2.10"
AWS_REGION = "us-east-2"  # the catalog's AWS stacks' region, a placeholder like the rest
AWS_ZONE = "us-east-2a"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from flashfleet.catalog import hardware_catalog
    from flashfleet.recipes import STRATEGIES, TOPOLOGIES

    p = sub.add_parser(
        "new",
        help="write a stack file of your own to start from (commented; it validates)",
        description=__doc__.splitlines()[0],
    )
    p.add_argument("name", metavar="NAME", help="the stack's name (the file is Pulumi.NAME.yaml)")
    p.add_argument("--hardware", choices=tuple(hardware_catalog()), default="h200",
                   help="GPU hardware (default: %(default)s)")  # fmt: skip
    p.add_argument("--strategy", choices=tuple(STRATEGIES), default="low-latency",
                   help="serving strategy (default: %(default)s)")  # fmt: skip
    p.add_argument("--topology", choices=tuple(TOPOLOGIES), default="unified",
                   help="serving topology (default: %(default)s)")  # fmt: skip
    p.add_argument("--source", choices=SOURCES, default="existing",
                   help="where the nodes come from (default: %(default)s)")  # fmt: skip
    p.add_argument("--hosts", default=None, metavar="ADDR[,ADDR...]",
                   help=f"existing hosts' addresses (default: {PLACEHOLDER_HOSTS})")  # fmt: skip
    p.add_argument("--ssh-user", default="ubuntu", help="existing hosts' SSH login (default: %(default)s)")
    p.add_argument("--replicas", type=int, default=None, metavar="N",
                   help="N replicas behind the router, one per host (default: one server)")  # fmt: skip
    p.add_argument("--stacks-dir", type=Path, default=Path("stacks"),
                   help="where the file goes (default: %(default)s, where Pulumi reads them)")  # fmt: skip
    p.set_defaults(func=run)


def _q(value: object) -> str:
    """A YAML scalar as JSON writes it (JSON is YAML): quoted where it must be."""
    return json.dumps(value)


def _hosts(args: argparse.Namespace) -> list[str]:
    """The addresses asked for; the spec's own rule for an address checks each one."""
    hosts = [w.strip() for w in (args.hosts or PLACEHOLDER_HOSTS).split(",") if w.strip()]
    if not hosts:
        raise UsageError("--hosts: no address given [rule: host-address]")
    return hosts


def _block_only(hardware: str) -> bool:
    """Whether the catalog's AWS instance type for `hardware` is sold as Capacity Blocks only."""
    from flashfleet.catalog.instances import instance_catalog

    return any(t.hardware == hardware and t.capacity == "block-only" for t in instance_catalog().values())


def _where(args: argparse.Namespace) -> str:
    """The --stacks-dir words the next commands need (none for the default folder)."""
    return "" if args.stacks_dir == Path("stacks") else f" --stacks-dir {args.stacks_dir}"


def _source(args: argparse.Namespace, gpus: int, count: int, block: bool) -> list[str]:
    """The `nodes.source` lines, indented for their place; `block`: Capacity Blocks only."""
    if args.source == "aws":
        capacity = (
            [
                "          kind: block             # its instance type is sold as Capacity Blocks only",
                f"          reservationId: {PLACEHOLDER_RESERVATION}   # yours: `capacity buy`",
            ]
            if block
            else ["          kind: on-demand         # or {kind: reservation, reservationId: cr-...}"]
        )
        return [
            "        kind: aws                 # instanceType: the catalog's for the hardware",
            "        capacity:",
            *capacity,
            "        network:",
            "          kind: new",
            f"          availabilityZone: {AWS_ZONE}   # yours: a zone of the region above",
            "        allowedCidrs:",
            "          - 203.0.113.0/24        # yours: SSH and the serving port from here only",
        ]
    if args.source == "kubernetes":
        return [
            "        kind: kubernetes",
            f"        namespace: {args.name}   # the stack's own: made by flashfleet, deleted by `down`",
            "        nodePools:",
            f"          {args.hardware}:",
            "            serverResources: {cpu: 64, memoryGib: 512}   # yours: what a GPU node gives a pod",
            "            nodeSelector: {}      # yours: the labels of the GPU nodes",
            "        modelCache:",
            "          kind: hostPath          # yours: local NVMe on the GPU node (or a claim: pvc)",
            "          path: /mnt/nvme/hf-cache",
            "        serviceType: ClusterIP",
        ]
    hosts = _hosts(args)
    if len(hosts) != count:
        raise UsageError(
            f"--hosts: {len(hosts)} address(es) for {count} node(s); give one per node [rule: nodes-count]"
        )
    lines = ["        kind: existing", "        hosts:"]
    for host in hosts:
        lines += [
            f"          - address: {_q(host)}   # yours",
            f"            sshUser: {_q(args.ssh_user)}",
            f"            gpus: {{model: {args.hardware}, count: {gpus}}}",
            "            hostMemoryGib: 2048   # yours: the host's memory (sizes the HiCache tier)",
            '            # hostKeys: ["ssh-ed25519 AAAA..."]   # `ssh-keyscan -t ed25519 ADDR`, checked',
        ]
    return lines


def scaffold(args: argparse.Namespace) -> str:
    """The stack file's text."""
    from flashfleet.catalog import hardware_catalog
    from flashfleet.stack.image import ImageSpec
    from flashfleet.stack.spec import RouterSpec

    hw = hardware_catalog()[args.hardware]
    if args.replicas is not None and args.replicas < 2:
        raise UsageError("--replicas: at least 2 (one server needs no router) [rule: replicas]")
    count = args.replicas or 1
    where = _where(args)
    block = args.source == "aws" and _block_only(args.hardware)
    ttl = {
        "aws": "the nodes terminate themselves this long after the last `up`",
        "existing": "recorded for sweeping; your hosts are never terminated",
        "kubernetes": "recorded for sweeping; nothing on the cluster is deleted at the deadline",
    }[args.source]
    lines = [
        f"# {args.name}: {hw.label}, {args.strategy}, {args.topology}, written by `flashfleet new`.",
        "# The lines marked `yours` hold placeholders: put your own values there, then",
        f"#   flashfleet validate {args.name}{where} && flashfleet plan {args.name}{where}",
        "# Every field: docs/stack-spec.md. Examples of every source and shape: stacks/.",
        "config:",
    ]
    if args.source == "aws":
        lines.append(f"  aws:region: {AWS_REGION}          # yours")
    lines += [
        "  flashfleet:stack:",
        f"    description: {_q(f'{hw.label}, {args.strategy}, {args.topology}')}",
        f"    hardware: {args.hardware}",
        f"    strategy: {args.strategy}",
        f"    topology: {args.topology}",
        "    options: {}                  # recipe overrides: `flashfleet options` lists them",
    ]
    if args.replicas:
        lines += [
            "    cluster:",
            f"      replicas: {args.replicas}",
            "      router:",
            f"        policy: {RouterSpec().policy}",
        ]
    lines += [
        "    ttl: block                    # the nodes end 30 min before the block ends"
        if block
        else f"    ttl: 8h                       # {ttl}",
        "    image:",
        f"      version: {ImageSpec().version}",
    ]
    if args.source == "kubernetes":
        lines.append("      derived: false              # the cluster pulls the pinned upstream image")
    source = _source(args, hw.gpus_per_node, count, block)
    lines += ["    nodes:", f"      count: {count}", "      source:", *source]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from flashfleet.admission import admit
    from flashfleet.stack import StackError, read_stack_file
    from flashfleet.stack.stack_names import stack_name_problem
    from flashfleet.user_files import UserFileError, write_text_atomically

    if problem := stack_name_problem(args.name):
        raise UsageError(f"{problem} [rule: stack-name]")
    if "/" in args.name:  # org/project/name: Pulumi's, not a file's
        raise UsageError(
            f"{args.name!r}: a stack file is named for the stack alone (Pulumi.<stack>.yaml); "
            "give the name without organisation or project [rule: stack-name]"
        )
    target = args.stacks_dir / f"Pulumi.{args.name}.yaml"
    if target.exists() or target.is_symlink():
        raise UsageError(f"{target}: already exists; flashfleet new never overwrites a stack file")
    if args.stacks_dir.exists() and not args.stacks_dir.is_dir():
        raise UsageError(f"--stacks-dir {args.stacks_dir}: not a folder")
    text = scaffold(args)
    # Checked where it cannot be mistaken for the user's: a scaffold that does not validate is a
    # flashfleet bug or a combination the recipe refuses, said before anything is written.
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / target.name).write_text(text)
        try:
            plan = admit(read_stack_file(args.name, Path(tmp)))
        except StackError as err:
            problems = "; ".join(str(p) for p in err.problems) or str(err)
            raise UsageError(f"{args.name}: {problems}") from None
    args.stacks_dir.mkdir(parents=True, exist_ok=True)
    try:
        write_text_atomically(target, text)
    except UserFileError as err:
        print(f"flashfleet new: {err}", file=sys.stderr)
        return 1
    s = plan.spec
    print(f"wrote {target}: {s.hardware} / {s.strategy} / {s.topology}, {plan.recipe.badge}")
    print("next: put your values on the lines marked `yours`, then")
    where = _where(args)
    print(f"  flashfleet validate {args.name}{where} && flashfleet plan {args.name}{where}")
    return 0
