"""`flashfleet size`: balance the KDA state and KV pools from one boot log, optionally store it."""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from flashfleet.cli.common import UsageError, add_format, print_json
from flashfleet.sizing import (
    DEFAULT_RADIX_MODE,
    RADIX_MODES,
    BootLog,
    Plan,
    SizingError,
    Workload,
    check_host_tier_fits,
    draft_tokens_for,
    host_tier_per_rank_gb,
    read_boot_log,
    size_pools,
    state_slots,
)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "size",
        help="size the KV and KDA state pools from a boot log",
        description="Compute --mamba-full-memory-ratio (or a --max-mamba-cache-size pin) from one "
        "SGLang boot log and the workload's average request length.",
    )
    p.add_argument("--boot-log", required=True, metavar="FILE", help="a whole server log ('-' reads stdin)")
    p.add_argument("--avg-request-len", required=True, metavar="L", help="average prompt + output tokens")
    spec = p.add_mutually_exclusive_group()
    spec.add_argument("--strategy", help="low-latency (6 draft tokens) | high-throughput (0)")
    spec.add_argument("--draft-tokens", metavar="D", help="speculative draft tokens (0 with ReplaySSM)")
    p.add_argument("--concurrency", metavar="C", help="target concurrent requests (needed for a pin)")
    p.add_argument(
        "--radix-mode",
        choices=list(RADIX_MODES),
        default=DEFAULT_RADIX_MODE,
        help="mamba radix-cache mode, sets the state slots per request (default: %(default)s)",
    )
    p.add_argument(
        "--skip-decode-lock", action="store_true", help="server runs with SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK=1"
    )
    p.add_argument("--dcp-size", default="1", metavar="N", help="decode context parallel size (default: 1)")
    host = p.add_argument_group("HiCache host tier (checked when --hicache-size is given)")
    host.add_argument("--hicache-size", metavar="GB", help="--hicache-size per rank, in GB")
    host.add_argument("--ranks-per-node", metavar="N", help="serving ranks on one node")
    host.add_argument("--host-memory-gb", metavar="GB", help="host memory of one node")
    p.add_argument(
        "--stack", metavar="NAME", help="stack whose options receive the result (a name or its file's path)"
    )
    p.add_argument("--write", action="store_true", help="store the result in the stack file")
    p.add_argument(
        "--stacks-dir", type=Path, default=None, metavar="DIR",
        help="stack files directory (default: the repository's stacks/, as for plan)",
    )  # fmt: skip
    add_format(p, "text", "json")
    p.set_defaults(func=run)


def _number(text: str | None, flag: str, *, whole: bool = False, minimum: float | None = None) -> float:
    """A finite number >= minimum (positive when no minimum is given)."""
    if text is None:
        raise UsageError(f"{flag} is required")
    try:
        value = float(text) if not whole else int(text)
    except ValueError:
        kind = "a whole number" if whole else "a number"
        raise UsageError(f"{flag} {text!r}: must be {kind}") from None
    if not math.isfinite(value) or (value <= 0 if minimum is None else value < minimum):
        bound = "positive" if minimum is None else f">= {minimum:g}"
        raise UsageError(f"{flag} {text!r}: must be {bound}")
    return value


def _read_log(name: str) -> BootLog:
    try:
        text = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8", errors="replace")
    except OSError as err:
        raise UsageError(f"cannot read boot log {name}: {err.strerror or err}") from None
    return read_boot_log(text)


def _stack_draft_tokens(args: argparse.Namespace) -> tuple[str, int | None] | None:
    """(strategy, draft tokens) of the stack that receives the result; None without --stack.
    Draft tokens are None when the stack speculates with a draft whose shape is not the EAGLE one."""
    if not args.stack:
        return None
    from flashfleet.cli.common import stack_arg
    from flashfleet.recipes.layouts import MTP_5_1_6, STRATEGIES
    from flashfleet.sizing.stack_writer import existing_stack_file
    from flashfleet.stack.errors import StackError
    from flashfleet.stack.files import read_stack_file

    stack, stacks = stack_arg(args.stack, args.stacks_dir)
    existing_stack_file(stacks, stack)  # names an unknown stack the way storing the result does
    try:
        data = read_stack_file(stack, stacks).spec_data
    except StackError as err:
        raise UsageError(str(err).splitlines()[0]) from None
    spec = data if isinstance(data, dict) else {}
    strategy = str(spec.get("strategy"))
    if strategy not in STRATEGIES:
        return None  # the spec check names it when the result is stored
    given = spec.get("options")
    options: dict[str, Any] = given if isinstance(given, dict) else {}
    speculative = options.get("speculative", STRATEGIES[strategy].get("speculative"))
    return strategy, {"off": 0, "eagle": MTP_5_1_6.draft_tokens}.get(str(speculative))


def _ranks_fit_the_stack(args: argparse.Namespace, log: BootLog) -> None:
    """A boot log holds one node's ranks: more of them than the stack's nodes have GPUs means it
    came from other hardware, and its pools would size the stack wrongly."""
    from flashfleet.cli.common import stack_arg
    from flashfleet.planning import load_stack
    from flashfleet.stack.errors import StackError

    stack, stacks = stack_arg(args.stack, args.stacks_dir)
    try:
        plan = load_stack(stack, stacks)
    except StackError:
        return  # the stack's own problems are named where the result is stored
    gpus = max((n.gpu_count for n in plan.gpu_nodes), default=0)
    if gpus and len(log.ranks) > gpus:
        raise UsageError(
            f"--boot-log {args.boot_log}: {len(log.ranks)} ranks, but stack {stack} has {gpus} GPUs per "
            f"node ({plan.spec.hardware}): the log is from other hardware [rule: boot-log-ranks]"
        )


def _draft_tokens(args: argparse.Namespace, log: BootLog) -> int:
    stack = _stack_draft_tokens(args)
    if stack is not None and args.strategy is not None and args.strategy != stack[0]:
        raise UsageError(
            f"--strategy: {args.strategy} contradicts the stack's strategy {stack[0]} "
            "(flashfleet:stack.strategy); leave --strategy out, the stack's is used"
        )
    if args.strategy is not None:
        return draft_tokens_for(args.strategy)
    if args.draft_tokens is not None:
        given = int(_number(args.draft_tokens, "--draft-tokens", whole=True, minimum=0))
        if stack is not None and stack[1] is not None and given != stack[1]:
            raise UsageError(
                f"--draft-tokens: {given} contradicts the stack's {stack[0]} recipe, which drafts "
                f"{stack[1]} tokens; leave --draft-tokens out"
            )
        return given
    if stack is not None and stack[1] is not None:
        return stack[1]
    if stack is not None:
        raise UsageError(
            f"the stack's {stack[0]} recipe drafts with no known draft length: pass --draft-tokens"
        )
    if log.mamba.speculative:
        raise UsageError("the boot log's server used speculative decoding: pass --strategy or --draft-tokens")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.write and not args.stack:
        raise UsageError("--write needs --stack NAME")
    try:
        length = _number(args.avg_request_len, "--avg-request-len")
        log = _read_log(args.boot_log)
        if args.stack:
            _ranks_fit_the_stack(args, log)
        workload = Workload(
            avg_request_len=length,
            slots=state_slots(args.radix_mode, skip_decode_lock=args.skip_decode_lock),
            draft_tokens=_draft_tokens(args, log),
            dcp=int(_number(args.dcp_size, "--dcp-size", whole=True, minimum=1)),
            concurrency=None
            if args.concurrency is None
            else int(_number(args.concurrency, "--concurrency", whole=True, minimum=1)),
        )
        plan = size_pools(log, workload)
        host = _host_tier(args)
        stored = _store(args, plan) if args.stack else None
    except SizingError as err:
        raise UsageError(str(err)) from None
    report = to_dict(plan, log, args.radix_mode)
    if host is not None:
        report["host_tier"] = host
    if stored is not None:
        report["stack"] = stored
    if args.format == "json":
        print_json(report)
    else:
        print(text_report(plan, log, args.radix_mode, host, stored), end="")
    return 0


def _host_tier(args: argparse.Namespace) -> dict[str, Any] | None:
    given = [args.hicache_size, args.ranks_per_node, args.host_memory_gb]
    if all(v is None for v in given):
        return None
    if any(v is None for v in given):
        raise UsageError("the host tier check needs --hicache-size, --ranks-per-node and --host-memory-gb")
    size = _number(args.hicache_size, "--hicache-size")
    ranks = int(_number(args.ranks_per_node, "--ranks-per-node", whole=True, minimum=1))
    memory = _number(args.host_memory_gb, "--host-memory-gb")
    need = check_host_tier_fits(size, ranks, memory)
    return {
        "hicache_size_gb": size,
        "ranks_per_node": ranks,
        "per_rank_gb": round(host_tier_per_rank_gb(size), 1),
        "node_need_gb": round(need, 1),
        "host_memory_gb": memory,
        "fits": True,
    }


def _store(args: argparse.Namespace, plan: Plan) -> dict[str, Any]:
    from flashfleet.cli.common import stack_arg
    from flashfleet.sizing.stack_writer import existing_stack_file, write_sizing

    name, value = plan.option
    stack, stacks = stack_arg(args.stack, args.stacks_dir)
    path = existing_stack_file(stacks, stack)
    if not args.write:
        return {"name": stack, "path": str(path), "written": False, "option": name, "value": value}
    options = write_sizing(stacks, stack, name, value)
    return {
        "name": stack,
        "path": str(path),
        "written": True,
        "option": name,
        "value": value,
        "options": options,
    }


def to_dict(plan: Plan, log: BootLog, radix_mode: str) -> dict[str, Any]:
    name, value = plan.option
    return {
        name: value,
        "flag": plan.flag,
        "target_ratio": round(plan.target_ratio, 4),
        "token_equiv": round(plan.token_equiv, 1),
        "state_bytes_per_slot": round(plan.state_bytes_per_slot),
        "kv_bytes_per_token": round(plan.kv_bytes_per_token, 1),
        "rest_gib": round(plan.rest_gib, 2),
        "workload": {**asdict(plan.workload), "radix_mode": radix_mode},
        "pools": {
            "mamba": asdict(log.mamba),
            "kv": asdict(log.kv),
            "scheduler": asdict(log.scheduler) if log.scheduler else None,
            "capped": asdict(log.capped) if log.capped else None,
            "ranks": list(log.ranks),
        },
        "observed": plan.observed.model_dump(),
        "predicted": plan.predicted.model_dump(),
        "notes": list(plan.notes),
    }


_POOL_WORDS = {"kda-state": "the KDA state pool limits", "kv": "the KV pool limits", "balanced": "balanced"}


def text_report(
    plan: Plan, log: BootLog, radix_mode: str, host: dict[str, Any] | None, stored: dict[str, Any] | None
) -> str:
    m, kv, w = log.mamba, log.kv, plan.workload
    obs, pred = plan.observed, plan.predicted
    dtype = f", {kv.dtype}" if kv.dtype else ""
    ranks = f" ({len(log.ranks)} ranks agree)" if len(log.ranks) > 1 else ""
    lines = [
        f"boot log{ranks}: KDA state pool {m.max_mamba_cache_size} slots, {m.state_gib:.2f} GiB "
        f"({plan.state_bytes_per_slot / 1e6:.1f} MB/slot); KV pool {kv.tokens} tokens, {kv.kv_gib:.2f} GiB "
        f"({plan.kv_bytes_per_token / 1e3:.1f} KB/token{dtype})",
        f"token_equiv {plan.token_equiv:.0f}: one state slot weighs as much as that many KV tokens",
        f"workload: L={w.avg_request_len:g} tokens, S={w.slots} ({radix_mode}), "
        f"D={w.draft_tokens}, dcp={w.dcp}",
        f"balanced ratio r* = {plan.target_ratio:.3f}",
        f"recommend: {plan.flag}",
        f"now:       {obs.mamba_slots} slots -> {obs.kda_request_cap} requests by state, "
        f"{obs.kv_request_cap} by KV: {_POOL_WORDS[obs.limiting_pool]}",
        f"predicted: {pred.mamba_slots} slots -> {pred.kda_request_cap} requests by state, "
        f"{pred.kv_tokens} KV tokens -> {pred.kv_request_cap} by KV: {_POOL_WORDS[pred.limiting_pool]}; "
        f"max_running_requests {pred.max_running_requests}",
    ]
    if log.scheduler:
        lines.append(
            f"the log's server: max_total_num_tokens {log.scheduler.max_total_num_tokens}, "
            f"max_running_requests {log.scheduler.max_running_requests}"
        )
    lines += [f"note: {n}" for n in plan.notes]
    if host:
        lines.append(
            f"host tier fits: {host['per_rank_gb']} GB per rank x {host['ranks_per_node']} = "
            f"{host['node_need_gb']} GB of {host['host_memory_gb']:g} GB"
        )
    if stored:
        verb = "stored" if stored["written"] else "would store (add --write)"
        lines.append(f"{verb} {stored['option']}: {stored['value']} in {stored['path']}")
    return "\n".join(lines) + "\n"
