"""`flashfleet plan STACK`: the whole bring-up, offline and without credentials."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from flashfleet.cli.common import UsageError, add_evidence_results, add_format, add_stack, print_json
from flashfleet.recipes.cluster import ROUTER_NAMES

if TYPE_CHECKING:  # the plan's model is imported on the command's path only
    from flashfleet.launch import ContainerLaunch
    from flashfleet.planning.plan_model import (
        BringupTime,
        CapacityView,
        CriticalPath,
        KernelCaches,
        KubernetesSourceView,
        LockView,
        MeasuredStartup,
        PlanView,
        TimeToFirstToken,
    )


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("plan", help="the whole bring-up of a stack, offline: nodes, commands, cost")
    add_stack(p, "stack name, or the path of its file (stacks/Pulumi.<stack>.yaml)")
    add_format(p, "text", "json")
    p.add_argument("--stacks-dir", type=Path, default=None, help="folder of stack files (default: stacks/)")
    add_evidence_results(p)
    p.add_argument(
        "--runs-dir",
        type=Path,
        default=None,
        help="where bring-up runs are recorded (default: $FLASHFLEET_RUNS_DIR or ./.runner): the "
        "newest run of the stack with its servers' own startup timings replaces the model's load, "
        "capture and readiness",
    )
    p.set_defaults(func=run)


def _measured(runs_root: Path | None, stack: str) -> MeasuredStartup | None:
    """The newest recorded bring-up's startup, each figure the slowest server's."""
    from flashfleet.bringup.run_dirs import default_runs_root
    from flashfleet.bringup.startup_timings import latest_startup
    from flashfleet.planning.plan_model import MeasuredStartup

    found = latest_startup(runs_root or default_runs_root(), stack)
    if found is None:
        return None
    run, servers = found
    readies = [t.ready_s for t in servers]
    return MeasuredStartup(
        run=run,
        servers=len(servers),
        load_s=max(t.load_s for t in servers),
        jit_s=max(t.jit_s for t in servers),
        capture_s=max(t.capture_s for t in servers),
        ready_s=None if None in readies else max(r for r in readies if r is not None),
    )


def run(args: argparse.Namespace) -> int:
    from flashfleet.admission import admit
    from flashfleet.bench.evidence import badge_line
    from flashfleet.cli.common import stack_arg
    from flashfleet.planning.plan_view import plan_data
    from flashfleet.stack import StackError, read_stack_file

    try:  # what `pulumi up` would admit, or every reason it would not
        plan = admit(read_stack_file(*stack_arg(args.stack, args.stacks_dir)))
    except StackError as err:
        raise UsageError(str(err)) from None
    measured = _measured(args.runs_dir, plan.stack)
    data = plan_data(plan, measured).model_copy(update={"evidence": badge_line(plan, args.results)})
    if args.format == "json":
        print_json(data.model_dump(mode="json"))
    else:
        print(plan_text(data), end="")
    return 0


def _docker(launch: ContainerLaunch) -> str:
    from flashfleet.cli.render import docker_lines

    return " \\\n    ".join(docker_lines(launch))


def _command(words: list[str], env: dict[str, str]) -> str:
    from flashfleet.cli.render import command_lines

    return " \\\n    ".join(command_lines(tuple(words), env))


def _kubernetes_source(src: KubernetesSourceView) -> list[str]:
    pool = src.node_pool
    selector = ", ".join(f"{k}={v}" for k, v in pool.get("nodeSelector", {}).items()) or "any node"
    tolerations = ", ".join(
        " ".join(str(t[k]) for k in ("key", "operator", "value", "effect") if t.get(k) is not None)
        for t in pool.get("tolerations", [])
    )
    cache = src.model_cache
    where = cache["path"] if cache["kind"] == "hostPath" else f"{cache['storageClass']} {cache['size']}"
    ranges = src.load_balancer_source_ranges
    service = src.service_type + (f" from {', '.join(ranges)}" if ranges else "")
    return [
        f"  k8s      context {src.context or '(current)'}, namespace {src.namespace}"
        f"{' (created)' if src.create_namespace else ''}, Service {service}, "
        f"{'LeaderWorkerSet' if src.leader_worker_set else 'no LeaderWorkerSet'}",
        f"           nodes {selector}{f'; tolerating {tolerations}' if tolerations else ''}",
        f"           model cache {cache['kind']} {where}; HF token Secret {src.secret or 'none'}",
        f"           objects {', '.join(src.objects)}",
    ]


def _workloads_text(src: KubernetesSourceView) -> list[str]:
    out = []
    for w in src.workloads:
        role = " (serves the model)" if w.serves else " (the router: the endpoint)" if w.routes else ""
        out += ["", f"{w.kind} {w.name}{role}:"]
        for c in w.containers:
            pod = f"{c.pod} " if c.pod != "pod" else ""
            limits = ", ".join(f"{k}={v}" for k, v in c.resources.get("limits", {}).items())
            claims = ", ".join(x["name"] for x in c.resources.get("claims", []))
            extra = f", limits {limits}" if limits else ""
            extra += f", claims {claims}" if claims else ""
            extra += f", env by reference {', '.join(c.env_from)}" if c.env_from else ""
            out.append(f"  # {pod}{c.stage} {c.name}: image {c.image}{extra}")
            out.append("  " + _command(c.command, c.env))
    return out


def _capacity_lines(c: CapacityView, stack: str) -> list[str]:
    what = "Capacity Block" if c.kind == "block" else "On-Demand Capacity Reservation"
    if c.needs_purchase:
        todo = (
            f"`flashfleet capacity offers {stack}`, then `flashfleet capacity buy {stack} --offering ID`"
            if c.kind == "block"
            else "put your reservation's id in the stack file"
        )
        return [f"  capacity {what}: NONE YET (placeholder {c.reservation_id}); pulumi up refuses: {todo}"]
    w = c.window
    if w is None:
        return [f"  capacity {what} {c.reservation_id} (checked against EC2 at pulumi up)"]
    return [
        f"  capacity {what} {c.reservation_id}: "
        f"{w.instance_count} instances in {w.availability_zone}, "
        f"{w.start} to {w.end} (nodes until {w.nodes_until}), ${w.upfront_price_usd:.2f} paid"
        + (", pulumi up waits for its start" if c.wait_for_start else "")
    ]


def _seconds(value: float | None) -> str:
    return "unknown" if value is None else f"{value / 60:.1f} min"


def _critical_path_lines(cp: CriticalPath) -> list[str]:
    """The downloads: when they are done, their ratio, then one line per transfer. The bring-up's
    one total is the time to first token (below), which holds them."""
    ratio = cp.ratio_to_largest_transfer
    out = [
        f"  transfers modeled ({cp.node_source}, every node at once): done after {_seconds(cp.total_s)}, "
        "part of the time to first token below; "
        f"ratio to the largest transfer ({cp.largest_transfer or 'none known'}) "
        f"{'unknown' if ratio is None else ratio}; lanes side by side: "
        + ", ".join(" -> ".join(lane) for lane in cp.lanes)
    ]
    for p in cp.phases:
        size = "" if p.size_gb is None else f"{p.size_gb:g} GB ({p.basis}) at {p.gbps:g} Gbit/s, "
        start = "?" if p.start_s is None else f"{p.start_s / 60:.1f}"
        overlaps = f", overlaps {', '.join(p.overlaps)}" if p.overlaps else ""
        took = _seconds(p.seconds)
        out.append(f"    {p.name:<8} {size}{took} from min {start}{overlaps} ({p.source})")
    if cp.hub_source:
        asked = "unknown GB" if cp.hub_gb is None else f"{cp.hub_gb:g} GB"
        out.append(f"  asked of the Hub: {asked} by {cp.hub_downloads} node(s) ({cp.hub_source})")
    return out


# Most of a bring-up: with one of them unknown, a lower bound from the rest says nothing.
_DECISIVE = ("weights", "load")


def _bringup_time(t: BringupTime) -> str:
    if t.total_s is not None:
        return _seconds(t.total_s)
    if missing := [name for name in t.unknown if name in _DECISIVE]:
        return f"unknown ({', '.join(missing)} unknown)"
    return f"at least {_seconds(t.known_s)}"


def _ttft_lines(t: TimeToFirstToken) -> list[str]:
    """The time to the first token: both bring-ups, phase by phase, then each lever flipped."""
    from flashfleet.planning.time_to_first_token import SAME
    from flashfleet.table import aligned

    unknown = f"; unknown: {', '.join(t.first.unknown)}" if t.first.unknown else ""
    how = "modeled" if t.measured is None else f"modeled, with run {t.measured.run}'s own figures"
    out = [
        f"  time to first token {how} ({t.node_source}): first bring-up {_bringup_time(t.first)}, "
        f"second (the stack again after `down`) {_bringup_time(t.second)}; "
        f"dominant: {t.first.dominant or 'none known'}{unknown}"
    ]
    rows = [["phase", "first", "second", "basis", "source"]]
    for p in t.phases:
        second = "" if p.second_source == SAME else f" (second: {p.second_source})"
        rows.append([p.name, _seconds(p.first_s), _seconds(p.second_s), p.basis or "-", p.source + second])
    out += ["    " + line for line in aligned(rows)]
    for lever in t.levers:
        out.append(
            f"    lever {lever.name} ({lever.where}) is {lever.setting}; {lever.other}: first "
            f"{_bringup_time(lever.first)}, second {_bringup_time(lever.second)}, dominant "
            f"{lever.first.dominant or 'none known'}; badge: {lever.badge}"
        )
    if t.kernels is not None:
        out += _kernel_lines(t.kernels)
    return out


def _kernel_lines(k: KernelCaches) -> list[str]:
    """The kernel caches' key, whether each bring-up starts warm on every node, through which
    channel, and what stays unknown."""
    pinned = "by digest" if k.image_pinned else "by tag (floating)"
    out = [
        f"    kernel caches: one folder per image ({k.image}, {pinned}) and GPU ({k.gpu}); "
        f"{k.kernel_word_sets} set(s) of kernel-changing server words on {k.nodes} GPU node(s)",
        f"      first bring-up  {k.first}: {k.first_source}",
        f"      second bring-up {k.second}: {k.second_source}",
    ]
    for c in k.channels:
        out.append(f"      channel {c.name}: {'yes' if c.applies else 'no'} ({c.detail})")
    out += [f"      unknown: {u}" for u in k.unknown]
    return out


def _image_package_lines(d: PlanView) -> list[str]:
    """What the serving image holds of the multimodal packages: from the release, or added by the
    derived image, and why."""
    held = d.image_packages
    torch = f"torch{held.torch}" if held.torch else "torch unknown (not PyPI's build)"
    out = [f"  image    {held.release} on {held.platform}: {torch} ({held.source})"]
    for p in held.packages:
        if p.origin == "release":
            out.append(f"    {p.requirement:<22} from the release")
        elif d.image.derived:
            out.append(f"    {p.requirement:<22} added by the derived image: {p.why}")
        else:
            out.append(f"    {p.requirement:<22} missing (image.derived is false): {p.why}")
    if held.video is not None:
        out.append(f"    video not verified: {held.video}")
    return out


def _lock_lines(lock: LockView, stack: str) -> list[str]:
    """The lock's state, then each moving part as locked or floating."""
    if lock.present:
        head = f"  lock     {lock.file} ({lock.locked_on}, sha256 {(lock.digest or '')[:12]})"
    else:
        head = f"  lock     none ({lock.file} missing: `flashfleet lock {stack}` writes it)"
    head += ", required by the stack" if lock.required else ""
    out = [head]
    for p in lock.parts:
        pinned = f" @ {p.pinned}" if p.pinned else ""
        out.append(f"    {p.state:<8} {p.kind} {p.name}{pinned}: {p.detail}")
    return out


def plan_text(d: PlanView) -> str:
    from flashfleet.cli.render import gpu_span
    from flashfleet.launch import ContainerLaunch

    src = d.source
    out = [
        f"stack {d.stack}: {d.description}",
        f"  recipe   {d.hardware} / {d.strategy} / {d.topology}: {d.badge} ({d.badge_origin})",
        f"  evidence {d.evidence or 'not looked up'} (this stack's own)",
        f"  model    {d.model}",
        f"  ttl      {d.ttl}"
        + (
            " (the nodes end 30 min before the block ends: AWS reclaims them then)"
            if d.ttl == "block"
            else ""
        ),
        f"  endpoint {d.endpoint}",
        f"  cost     {d.cost_text()}",
    ]
    if d.capacity:
        out += _capacity_lines(d.capacity, d.stack)
    if src.kind == "aws":
        ingress = src.ingress
        out += [
            f"  aws      {src.region}, {src.gpu_nodes} x {src.instance_type} ({src.arch}), "
            f"capacity {src.capacity['kind']}, placement group {src.placement_group or 'none'}",
            f"           EFA network cards {src.efa_network_cards or 'read from EC2 at deploy'}, "
            f"root volume {src.root_volume_gib} GiB encrypted, IMDSv2 required, AMI {src.ami}",
        ]
        if r := src.router_node:
            price = "price unknown" if r.price_usd_per_hour is None else f"${r.price_usd_per_hour:.4f}/h"
            out.append(
                f"           router node {r.node}: 1 x {r.instance_type} ({r.arch}, {price}), "
                f"root volume {r.root_volume_gib} GiB, AMI {r.ami}; no placement group or reservation"
            )
        out += [
            f"           ingress tcp {', '.join(map(str, ingress.ports))} from "
            f"{', '.join(ingress.cidrs)}; all traffic within the group",
            f"           TTL guard: {src.ttl_guard}",
        ]
    elif src.kind == "kubernetes":
        out += _kubernetes_source(src)
    else:
        out.append(f"  hosts    existing: {', '.join(src.hosts)}")
    if m := d.mooncake:
        where = "its own Deployment" if m.master_node is None else f"node {m.master_node}"
        out.append(
            f"  mooncake master on {where} ({m.master_server_address}, "
            f"{m.metadata_server}), protocol {m.protocol}, {m.global_segment_gib} GiB per node"
        )
    if c := d.cluster:
        behind = ROUTER_NAMES[d.router.program] if d.router else "the router"
        out.append(f"  cluster  {c.shape}, behind {behind} on node {c.router.node}")
        for inst in c.instances:
            nodes = ", ".join(f"node {n} ({a})" for n, a in zip(inst.nodes, inst.addresses, strict=True))
            out.append(f"           {inst.name:<10} {nodes}: {inst.url}")
        out.append(f"  path     {c.request_path}")
    if program := d.router:
        out.append(f"  router   {program.command}: {program.why}")
        for setting in program.settings:
            default = f"SMG's default {setting.smg_default}"
            out.append(f"           {setting.flag} ({default}): {setting.why} [{setting.source}]")
    out += _image_package_lines(d)
    out.append(f"  start    {' -> '.join(d.start_order)}")
    if d.update is not None:
        out.append(f"  update   {d.update.text()}")
    out += _critical_path_lines(d.critical_path)
    out += _ttft_lines(d.time_to_first_token)
    out += _lock_lines(d.lock, d.stack)
    # Kubernetes: the workloads and their containers' commands instead of hosts and docker runs.
    if src.kind == "kubernetes":
        out += _workloads_text(src)
    for node in [] if src.kind == "kubernetes" else d.nodes:
        gib, mem = node.host_memory_gib, node.host_memory_gb
        # GiB as stack files and instance sheets give it, and GB as the sizing counts it
        memory = "unknown" if gib is None or mem is None else f"{gib} GiB ({mem} GB)"
        out += [
            "",
            f"node {node.index} {node.name} ({node.role}): {node.address}, "
            f"{f'{node.gpu_count} GPUs' if node.gpu_count else 'no GPU'}, host memory {memory}, "
            f"HiCache host tier {node.hicache_host_gb} GB",
        ]
        for proc in node.processes:
            assert isinstance(proc, ContainerLaunch)  # hosts run docker containers
            after = f", after {', '.join(proc.start_after)}" if proc.start_after else ""
            out += [f"  # {proc.name}: port {proc.port}, GPUs {gpu_span(proc.gpus)}{after}"]
            out.append("  " + _docker(proc))
    if d.warnings:
        out += [""] + [f"warning: {w}" for w in d.warnings]
    out += [""] + [f"note: {n}" for n in d.notes]
    return "\n".join(out) + "\n"
