"""Render a recipe: hardware x strategy x topology x options -> processes with argv lists.

Pure: no I/O beyond reading the packaged catalog, no pulumi/ansible imports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from flashfleet.catalog import DFLASH2_DRAFT, hardware_catalog
from flashfleet.recipes import flags as F
from flashfleet.recipes.badges import badge_for
from flashfleet.recipes.builds import applicable
from flashfleet.recipes.cluster import ROUTERS, ClusterShape, Instance, cluster_shape
from flashfleet.recipes.errors import RecipeError
from flashfleet.recipes.layouts import (
    DIST_INIT_PORT,
    ENCODER_PORT,
    LANGUAGE_MEM_FRACTION,
    MOONCAKE_CONFIG_PATH,
    MOONCAKE_MNNVL_ENV,
    PD_BOOTSTRAP_PORT,
    PD_DECODE_NCCL_PORT,
    PD_DECODE_PORT,
    PD_NIXL_ENV,
    PD_PREFILL_NCCL_PORT,
    PD_PREFILL_PORT,
    SERVE_PORT,
    STRATEGIES,
    TOPOLOGIES,
    WORKER_PORT,
    Topology,
)
from flashfleet.recipes.options import BY_STRATEGY, OPTION_DEFS, Options, hardware_layer, parse_overrides
from flashfleet.recipes.router_settings import Shape, settings_flags
from flashfleet.recipes.rules import Context, check

SGLANG_SERVE = ("sglang", "serve")


@dataclass(frozen=True)
class Process:
    name: str
    role: str  # server | encoder | language | prefill | decode | router
    argv: tuple[str, ...]
    env: dict[str, str]
    port: int
    gpus: tuple[int, ...]
    start_after: tuple[str, ...] = ()
    node: int = 0
    rank: int = 0  # --node-rank of a multi-node server: only rank 0 serves HTTP
    instance: str = ""  # the cluster instance it belongs to (replica-0, prefill-1, router); "" alone
    # A cluster's router: the base URL of every worker it fronts (it starts once they are ready).
    workers: tuple[str, ...] = ()
    # A worker behind a cluster's router: the router's base URL, and the entry the router lists it
    # by (what `POST /workers` takes back after a rolling update took it out).
    router_url: str = ""
    router_entry: dict[str, str | int] = field(default_factory=dict)
    # peer_load: the base URL of the replica it loads its weights from (it starts once that one
    # answers /health); "" loads from disk.
    load_from: str = ""

    @property
    def url(self) -> str:
        return str(self.router_entry.get("url", ""))

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "role": self.role,
            "argv": list(self.argv),
            "env": dict(self.env),
            "port": self.port,
            "gpus": list(self.gpus),
            "start_after": list(self.start_after),
            "node": self.node,
            "instance": self.instance,
            "workers": list(self.workers),
            "router_url": self.router_url,
            "router_entry": dict(self.router_entry),
            # only where set: a render without peer_load (and the fingerprint of a run made with
            # it) reads as it did before the option existed
            **({"load_from": self.load_from} if self.load_from else {}),
        }


@dataclass(frozen=True)
class Recipe:
    hardware: str
    strategy: str
    topology: str
    badge: str
    badge_source: str
    options: Options
    processes: tuple[Process, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def model(self) -> str:
        return F.model_path(self.options)

    @property
    def repositories(self) -> tuple[str, ...]:
        """What the servers load, so what a node downloads and a lock pins: the checkpoint, and
        the DFlash2 draft beside it when selected."""
        return (self.model, DFLASH2_DRAFT) if self.options.speculative == "dflash2" else (self.model,)

    def to_dict(self) -> dict[str, Any]:
        return {
            "hardware": self.hardware,
            "strategy": self.strategy,
            "topology": self.topology,
            "badge": self.badge,
            "badge_source": self.badge_source,
            "model": self.model,
            "options": {k: list(v) if isinstance(v, tuple) else v for k, v in self.options.as_dict().items()},
            "processes": [p.to_dict() for p in self.processes],
            "notes": list(self.notes),
        }

    def start_order(self) -> list[Process]:
        """Processes in an order that respects every start_after."""
        done: list[Process] = []
        pending = list(self.processes)
        while pending:
            ready = [p for p in pending if set(p.start_after) <= {d.name for d in done}]
            if not ready:
                raise ValueError(f"start_after cycle among {[p.name for p in pending]}")
            done += ready
            pending = [p for p in pending if p not in ready]
        return done


def _lookup(kind: str, value: str, table: Mapping[str, object]) -> None:
    if value not in table:
        from flashfleet.suggest import did_you_mean

        hint = did_you_mean(value, table)
        raise RecipeError(
            kind, "unknown", f"unknown {kind} {value!r} (choose from: {', '.join(table)}){hint}"
        )


def name_errors(
    hardware: object, strategy: object, topology: object, overrides: Mapping[str, object]
) -> list[RecipeError]:
    """Every unknown name and bad option value at once (`resolve` stops at the first)."""
    errors: list[RecipeError] = []
    for kind, value, table in (
        ("hardware", hardware, hardware_catalog()),
        ("strategy", strategy, STRATEGIES),
        ("topology", topology, TOPOLOGIES),
    ):
        try:
            _lookup(kind, str(value), table)
        except RecipeError as err:
            errors.append(err)
    for name, value in overrides.items():
        try:
            parse_overrides({name: value})
        except RecipeError as err:
            errors.append(err)
    return errors


def resolve(
    hardware: str,
    strategy: str,
    topology: str = "unified",
    overrides: Mapping[str, object] | None = None,
) -> tuple[Context, Options]:
    """Validate names and overrides; return the context (effective options) and the cell's defaults."""
    catalog = hardware_catalog()
    _lookup("hardware", hardware, catalog)
    _lookup("strategy", strategy, STRATEGIES)
    _lookup("topology", topology, TOPOLOGIES)
    hw, topo = catalog[hardware], TOPOLOGIES[topology]
    layered = hardware_layer(hw)
    layered.update(STRATEGIES[strategy])
    layered.update(topo.defaults(hw))
    cell = Options(**layered)
    user = parse_overrides(overrides or {})
    if user.get("prefill") and "tp" not in user:
        # PD across nodes: each instance owns its nodes' GPUs (not half a node, as the pair does).
        user["tp"] = hardware_layer(hw)["tp"] * user.get("nodes", 1)
    elif "nodes" in user and "tp" not in user:
        user["tp"] = cell.tp * user["nodes"]  # one model instance over all nodes' GPUs
    effective = Options(**{**layered, **user})
    return Context(hw, strategy, topology, effective), cell


def default_text(name: str) -> str:
    """How an option's default is chosen, for people: each layer that sets it, with its values."""
    definition, catalog = OPTION_DEFS[name], hardware_catalog()
    layers: list[str] = []
    if definition.default is BY_STRATEGY:
        pass
    elif callable(definition.default):
        layers.append(
            "hardware: " + _per_hardware({hw.id: definition.default(hw) for hw in catalog.values()})
        )
    elif definition.default in (None, ()):
        layers.append(definition.unset)
    else:
        layers.append(str(definition.default))
    by_strategy = [f"{s} {layer[name]}" for s, layer in STRATEGIES.items() if name in layer]
    if by_strategy:
        layers.append("strategy: " + ", ".join(by_strategy))
    for topo in TOPOLOGIES.values():
        values = {
            hw.id: topo.defaults(hw)[name]
            for hw in catalog.values()
            if topo.name in hw.topologies and name in topo.defaults(hw)
        }
        if values:
            layers.append(f"{topo.name} {_per_hardware(values)}")
    return "; ".join(layers)


def _per_hardware(values: Mapping[str, object]) -> str:
    if len(set(values.values())) == 1:
        return str(next(iter(values.values())))
    return ", ".join(f"{hardware} {value}" for hardware, value in values.items())


def render(
    hardware: str,
    strategy: str,
    topology: str = "unified",
    overrides: Mapping[str, object] | None = None,
    *,
    addresses: Sequence[str] | None = None,
    router_node: int | None = None,
) -> Recipe:
    """Render the processes of one recipe, or raise ``RecipeError`` naming the option and rule.

    ``addresses`` are the nodes' addresses for multi-node rendezvous; without them the
    symbolic names ``node-0``, ``node-1``... are used. ``router_node``: a cluster's router gets
    that node to itself (default: beside the first instance).
    """
    ctx, cell = resolve(hardware, strategy, topology, overrides)
    check(ctx)
    topo = TOPOLOGIES[topology]
    shape = cluster_shape(ctx.options, router_node)
    nodes = shape.node_count
    addrs = list(addresses) if addresses else [f"node-{i}" for i in range(nodes)]
    if len(addrs) != nodes:
        raise RecipeError("nodes", "addresses", f"nodes={nodes} but {len(addrs)} addresses were given")
    if shape.is_cluster:
        processes = tuple(_cluster(ctx, topo, shape, addrs))
    else:
        processes = tuple(_BUILDERS[topology](ctx, topo, addrs, SERVE_PORT))
    _refuse_repeated_flags(processes)
    badge, source = badge_for(ctx, cell)
    return Recipe(
        hardware=hardware,
        strategy=strategy,
        topology=topology,
        badge=badge,
        badge_source=source,
        options=ctx.options,
        processes=processes,
        notes=tuple(_notes(ctx, badge)),
    )


def _refuse_repeated_flags(processes: tuple[Process, ...]) -> None:
    # Only extra_args can repeat a flag the recipe already sets (for example a topology's
    # --mem-fraction-static): refuse rather than leave sglang to pick one of the two.
    for proc in processes:
        if proc.role == "router":
            continue  # the router's --prefill and --decode repeat by design; extra_args never reach it
        seen: set[str] = set()
        for unit in F.argv_units(proc.argv)[1:]:
            if unit[0] in seen:
                raise RecipeError(
                    "extra_args",
                    "extra-args-repeat",
                    f"extra_args: {unit[0]} is already in the {proc.name} command; give each flag once",
                    "flashfleet: one way to set each flag",
                )
            seen.add(unit[0])


def _server_argv(
    ctx: Context, topo: Topology, *, tp: int, port: int, head: list[str], tail: list[str]
) -> tuple[str, ...]:
    """The flags every model server shares, with topology words before (head) and after (tail)."""
    o, hw = ctx.options, ctx.hardware
    argv = [*SGLANG_SERVE, "--model-path", F.model_path(o), "--tp-size", str(tp), *head]
    argv += F.kv_dsa_flags(o)
    argv += _precision_flags(ctx)
    argv += F.moe_flags(hw, topo)
    argv += F.memory_flags(o)
    argv += F.loader_flags(o)
    argv += F.weight_cache_flags(o)
    argv += F.hicache_flags(o)
    argv += F.speculative_flags(o, topo)
    argv += F.feature_flags(o)
    argv += tail
    argv += list(o.extra_args)
    argv += F.network_flags(port)
    return tuple(argv)


def _precision_flags(ctx: Context) -> list[str]:
    # The encoder-disaggregation language server pins the FP8 quantization explicitly.
    if ctx.topology == "encoder-disagg" and ctx.options.precision == "fp8":
        return ["--quantization", "fp8"]
    return []


def _server_env(ctx: Context) -> dict[str, str]:
    return {**ctx.hardware.env, **F.hicache_env(ctx.options), **F.weight_cache_env(ctx.options)}


def _unified(ctx: Context, topo: Topology, addrs: list[str], port: int) -> list[Process]:
    o = ctx.options
    per_node = o.tp // o.nodes
    procs = []
    for rank, _ in enumerate(addrs):
        tail: list[str] = []
        if o.nodes > 1:
            tail = [
                "--dist-init-addr",
                f"{addrs[0]}:{DIST_INIT_PORT}",
                "--nnodes",
                str(o.nodes),
                "--node-rank",
                str(rank),
            ]
        procs.append(
            Process(
                name="server" if o.nodes == 1 else f"server-{rank}",
                role="server",
                argv=_server_argv(ctx, topo, tp=o.tp, port=port, head=[], tail=tail),
                env=_server_env(ctx),
                port=port,
                gpus=tuple(range(per_node)),
                node=rank,
                rank=rank,
            )
        )
    return procs


def _prefill_cp(ctx: Context, topo: Topology, addrs: list[str], port: int) -> list[Process]:
    tp = ctx.options.tp
    head = [
        "--attn-cp-size",
        str(tp),
        "--enable-prefill-cp",
        "--cp-strategy",
        "interleave",
        "--moe-dense-tp-size",
        str(tp),
        "--ep-size",
        "1",
    ]
    return [
        Process(
            name="server",
            role="server",
            argv=_server_argv(ctx, topo, tp=tp, port=port, head=head, tail=[]),
            env=_server_env(ctx),
            port=port,
            gpus=tuple(range(tp)),
        )
    ]


def _encoder_disagg(ctx: Context, topo: Topology, addrs: list[str], port: int) -> list[Process]:
    o = ctx.options
    gpus = tuple(range(o.tp))  # both processes share the node's GPUs
    encoder = Process(
        name="encoder",
        role="encoder",
        argv=(
            *SGLANG_SERVE,
            "--model-path",
            F.model_path(o),
            "--tp-size",
            str(o.tp),
            "--encoder-only",
            *F.network_flags(ENCODER_PORT),
        ),
        env=dict(ctx.hardware.env),
        port=ENCODER_PORT,
        gpus=gpus,
    )
    head = ["--attention-backend", "dsa", "--linear-attn-backend", "triton"]
    tail = [
        "--chunked-prefill-size",
        "8192",
        "--max-prefill-tokens",
        "8192",
        "--disable-prefill-cuda-graph",
        "--language-only",
        "--encoder-urls",
        f"http://localhost:{ENCODER_PORT}",
        "--mem-fraction-static",
        LANGUAGE_MEM_FRACTION,
    ]
    language = Process(
        name="language",
        role="language",
        argv=_server_argv(ctx, topo, tp=o.tp, port=port, head=head, tail=tail),
        env=_server_env(ctx),
        port=port,
        gpus=gpus,
        start_after=("encoder",),
    )
    return [encoder, language]


def _pd_tail(ctx: Context, mode: str, nccl_port: int | None) -> list[str]:
    """The PD flags of one role; ``nccl_port`` keeps two roles on one node apart (seed note)."""
    o = ctx.options
    tail = ["--disaggregation-mode", mode]
    if mode == "prefill":
        tail += ["--disaggregation-bootstrap-port", str(PD_BOOTSTRAP_PORT)]
    tail += ["--disaggregation-transfer-backend", o.kv_transfer]
    if nccl_port is not None:
        tail += ["--nccl-port", str(nccl_port)]
    # Each server's own counters show the benchmark that prefill and decode served their shares;
    # the L3 tier's flags already turn them on.
    if "--enable-metrics" not in F.hicache_flags(o):
        tail.append("--enable-metrics")
    return tail


def _pd_env(ctx: Context, *, one_node: bool) -> dict[str, str]:
    if ctx.options.kv_transfer == "nixl":
        # Single-node NIXL goes over loopback UCX transports; across nodes UCX picks the fabric.
        return {**_server_env(ctx), **(PD_NIXL_ENV if one_node else {})}
    mnnvl = MOONCAKE_MNNVL_ENV if ctx.hardware.has("mnnvl") and not one_node else {}
    return {**_server_env(ctx), **mnnvl}


def _pd(ctx: Context, topo: Topology, addrs: list[str], port: int) -> list[Process]:
    tp = ctx.options.tp
    env = _pd_env(ctx, one_node=True)
    prefill = Process(
        name="prefill",
        role="prefill",
        argv=_server_argv(
            ctx,
            topo,
            tp=tp,
            port=PD_PREFILL_PORT,
            head=[],
            tail=_pd_tail(ctx, "prefill", PD_PREFILL_NCCL_PORT),
        ),
        env=env,
        port=PD_PREFILL_PORT,
        gpus=tuple(range(tp)),
    )
    decode = Process(
        name="decode",
        role="decode",
        argv=_server_argv(
            ctx,
            topo,
            tp=tp,
            port=PD_DECODE_PORT,
            head=["--base-gpu-id", str(tp)],
            tail=_pd_tail(ctx, "decode", PD_DECODE_NCCL_PORT),
        ),
        env=env,
        port=PD_DECODE_PORT,
        gpus=tuple(range(tp, 2 * tp)),
    )
    router = Process(
        name="router",
        role="router",
        argv=(
            *ROUTERS[ctx.options.router],
            "--pd-disaggregation",
            # the seed's Python mini load balancer; SMG has none: its Rust PD router takes the pair
            *(["--mini-lb"] if ctx.options.router == "sglang_router" else []),
            "--prefill",
            f"http://127.0.0.1:{PD_PREFILL_PORT}",
            str(PD_BOOTSTRAP_PORT),
            "--decode",
            f"http://127.0.0.1:{PD_DECODE_PORT}",
            *_router_settings(ctx, "pd"),
            *F.network_flags(port),
        ),
        env={},
        port=port,
        gpus=(),
        start_after=("prefill", "decode"),
    )
    return [prefill, decode, router]


def _pd_instance(ctx: Context, topo: Topology, addrs: list[str], mode: str) -> list[Process]:
    """One prefill or decode instance of PD across nodes: on nodes of its own, all their GPUs."""
    o = ctx.options
    port = PD_PREFILL_PORT if mode == "prefill" else PD_DECODE_PORT
    procs = []
    for rank in range(len(addrs)):
        tail = _pd_tail(ctx, mode, None)
        if len(addrs) > 1:
            tail += ["--dist-init-addr", f"{addrs[0]}:{DIST_INIT_PORT}", "--nnodes", str(len(addrs)),
                     "--node-rank", str(rank)]  # fmt: skip
        procs.append(
            Process(
                name=mode if len(addrs) == 1 else f"{mode}-{rank}",
                role=mode,
                argv=_server_argv(ctx, topo, tp=o.tp, port=port, head=[], tail=tail),
                env=_pd_env(ctx, one_node=False),
                port=port,
                gpus=tuple(range(o.tp // len(addrs))),
                node=rank,
                rank=rank,
            )
        )
    return procs


def _cluster(ctx: Context, topo: Topology, shape: ClusterShape, addrs: list[str]) -> list[Process]:
    """Every instance's processes on its own nodes, then the router in front of them all."""
    procs: list[Process] = []
    entries: list[tuple[Instance, Process]] = []  # each instance's process that serves the API
    router_node = shape.router_node if shape.router_node is not None else 0
    router_url = f"http://{addrs[router_node]}:{SERVE_PORT}"
    for k, inst in enumerate(shape.instances):
        own = [addrs[n] for n in inst.nodes]
        # peer_load: over the TransferEngine every replica after the first reads from the first
        # (one-sided reads: the seed serves several loaders while it answers requests); over NCCL
        # each loads from the one before it (an NCCL seed sends to one loader at a time, so the
        # chain orders the loads)
        backend = F.peer_load_backend(ctx.options)
        seed_k = 0 if backend == "transfer_engine" else k - 1
        seed = addrs[shape.instances[seed_k].nodes[0]] if k and ctx.options.peer_load != "off" else ""
        seeds_others = ctx.options.peer_load != "off" and k == 0
        if inst.role == "replica":
            parts = _BUILDERS[ctx.topology](ctx, topo, own, WORKER_PORT)
        else:
            parts = _pd_instance(ctx, topo, own, inst.role)
        names = {p.name: _instance_process_name(inst, p, len(parts)) for p in parts}
        for part in parts:
            proc = replace(
                part,
                name=names[part.name],
                node=inst.nodes[part.node],
                start_after=tuple(names[n] for n in part.start_after),
                instance=inst.name,
            )
            if proc.rank == 0 and proc.role != "encoder":
                url = f"http://{addrs[proc.node]}:{proc.port}"
                # Its own counters show that it served a share (bench) and when it is idle (drain).
                net = len(F.network_flags(proc.port))  # the last words, as every server ends
                metrics = () if "--enable-metrics" in proc.argv else ("--enable-metrics",)
                peer = F.peer_load_flags(seed, WORKER_PORT, ctx.options.tp, backend) if seed else []
                if seeds_others:
                    peer = F.peer_seed_flags(backend)
                argv = (*proc.argv[:-net], *metrics, *peer, *proc.argv[-net:])
                proc = replace(
                    proc,
                    argv=argv,
                    router_url=router_url,
                    router_entry=_router_entry(inst, url),
                    load_from=f"http://{seed}:{WORKER_PORT}" if seed else "",
                )
                entries.append((inst, proc))
            procs.append(proc)
    router_beside = [p.name for _, p in entries if p.node == router_node]
    procs.append(
        Process(
            name="router",
            role="router",
            argv=_router_argv(ctx, entries),
            env={},
            port=SERVE_PORT,
            gpus=(),
            # The worker beside it starts first; the unit waits for every worker's /health, on
            # every node, before the router starts (and is ready once /workers lists them all).
            start_after=tuple(router_beside),
            node=router_node,
            instance="router",
            workers=tuple(p.url for _, p in entries),
        )
    )
    return procs


def _router_entry(inst: Instance, url: str) -> dict[str, str | int]:
    """How the real router lists a worker (its `POST /workers` body): PD workers by their type,
    a prefill with its bootstrap port."""
    if inst.role == "prefill":
        return {"url": url, "worker_type": "prefill", "bootstrap_port": PD_BOOTSTRAP_PORT}
    if inst.role == "decode":
        return {"url": url, "worker_type": "decode"}
    return {"url": url}


def _instance_process_name(inst: Instance, part: Process, parts: int) -> str:
    if parts == 1:
        return inst.name
    if part.role in ("server", "prefill", "decode"):
        return f"{inst.name}-rank-{part.rank}"
    return f"{inst.name}-{part.name}"  # an encoder-disaggregation replica's encoder and language


def _router_argv(ctx: Context, entries: list[tuple[Instance, Process]]) -> tuple[str, ...]:
    """The real router's argv: every worker by URL (each prefill with its bootstrap port)."""
    url = {p.name: p.url for _, p in entries}
    argv: list[str] = [*ROUTERS[ctx.options.router]]
    if ctx.topology == "pd":
        argv.append("--pd-disaggregation")
        for inst, p in entries:
            if inst.role == "prefill":
                argv += ["--prefill", url[p.name], str(PD_BOOTSTRAP_PORT)]
        for inst, p in entries:
            if inst.role == "decode":
                argv += ["--decode", url[p.name]]
    else:
        argv += ["--worker-urls", *(url[p.name] for _, p in entries)]
    argv += ["--policy", ctx.options.router_policy]
    argv += _router_settings(ctx, "pd" if ctx.topology == "pd" else "replicas")
    return tuple(argv + F.network_flags(SERVE_PORT))


def _router_settings(ctx: Context, shape: Shape) -> list[str]:
    """SMG's timeouts, health checks and retries for the shape; the release image's sglang_router
    runs as it always has (its defaults)."""
    return settings_flags(shape) if ctx.options.router == "smg" else []


_BUILDERS = {
    "unified": _unified,
    "prefill-cp": _prefill_cp,
    "encoder-disagg": _encoder_disagg,
    "pd": _pd,
}


def _notes(ctx: Context, badge: str) -> list[str]:
    o, hw = ctx.options, ctx.hardware
    notes: list[str] = []
    if o.mamba_full_memory_ratio is None and o.max_mamba_cache_size is None:
        notes.append(
            "--mamba-full-memory-ratio stays at SGLang's generic 0.9: boot once, then run "
            "`flashfleet size --boot-log LOG --avg-request-len L` to balance the KDA state and KV pools"
        )
    if o.speculative == "dflash2":
        notes.append(
            f"DFlash2 is Not Verified; its draft {DFLASH2_DRAFT} is access-gated: request access on its "
            "model page and download it beside the target before serving"
        )
    if o.hicache == "l1l2l3":
        notes.append(
            f"HiCache L3 needs Mooncake configured on every serving node; SGLang reads its config from "
            f"{MOONCAKE_CONFIG_PATH} (SGLANG_HICACHE_MOONCAKE_CONFIG_PATH)"
        )
    if o.hicache != "off":
        notes.append("the HiCache host tier must fit in host memory, or the server does not start")
    if o.mm_transport == "auto" and hw.vendor == "nvidia":
        notes.append(
            "mm transport auto: CPU on a single CUDA node, CUDA VMM on multi-node GB200/GB300 (MNNVL)"
        )
    if o.mm_transport == "cuda_ipc":
        notes.append("CUDA IPC transport trades GPU memory (the IPC pool) for lower transfer latency")
    if hw.vendor == "amd":
        notes.append(
            "MI355X: the seed runs this as a Python launch on four GPUs in a ROCm environment; CUDA "
            "benchmark rows are not MI355X measurements"
        )
        if badge != "Verified":
            notes.append(
                "MI355X is Verified only as the measured AgentX configuration: low-latency, "
                "precision=mxfp4, hicache=l1l2, hicache_size=180"
            )
    if o.weight_cache != "off":
        notes.append(
            "weight_cache=client: each server loads its weights from SGLang's standalone weight-cache "
            "daemon (python3 -m sglang.srt.weight_cache.daemon with the server's model, parallelism and "
            f"quantization flags, sockets under {F.WEIGHT_CACHE_DIR}); flashfleet does not start that "
            "daemon yet, and without it, or with a daemon whose fingerprint differs, the server loads "
            "from disk as before. SGLang 0.5.23 shares only unquantized or block-wise FP8 weights this "
            "way, and no speculative draft (no MTP)"
        )
    if ctx.topology == "encoder-disagg":
        notes.append(
            "start the encoder first; keep --mem-fraction-static 0.78 on the language server so "
            "the encoder keeps room for vision workspaces"
        )
    if ctx.topology == "pd":
        notes.append(
            f"the router's positional {PD_BOOTSTRAP_PORT} after --prefill equals the prefill's "
            "--disaggregation-bootstrap-port; PD is a preview validated with dummy weights "
            "(triton MoE runner)"
        )
    notes += [req.note() for req in applicable(ctx.hardware.id, o)]
    notes.append(
        "image and video input need a transformers with Glm5NextProcessor (5.17.0 or later, with "
        "tokenizers>=0.23.1; 5.12.1 answers images from the text alone), and torchcodec for video"
    )
    return notes
