"""Contract: every enabled render parses with the real sglang 0.5.23 argument parser.

The oracle is a separate virtual environment (scripts/setup.d/10-sglang-oracle.sh) holding
sglang 0.5.23 and sglang-router 0.3.2; the parsing happens there in one subprocess.
"""

import json
import os
import subprocess
from pathlib import Path

import pytest

from flashfleet.catalog import hardware_catalog
from flashfleet.k8s.replicas import cluster_addresses
from flashfleet.planning import load_stack
from flashfleet.recipes import OPTION_DEFS, STRATEGIES, TOPOLOGIES, RecipeError, render
from flashfleet.recipes.router_settings import router_settings
from flashfleet.stack import KubernetesSource, list_stacks

ROOT = Path(__file__).resolve().parents[2]
ORACLE = Path(os.environ.get("FLASHFLEET_ORACLE_PYTHON", ROOT / ".venv-oracle" / "bin" / "python"))
PARSE = Path(__file__).with_name("oracle_parse.py")

# Values tried for the options that take numbers or words (besides each choice of the others).
SAMPLES: dict[str, list[object]] = {
    "tp": [2],
    "hicache_size": [64],
    "mamba_full_memory_ratio": [1.8],
    "max_mamba_cache_size": [256],
    "max_running_requests": [32],
    "nodes": [2],
    "pd_decode_tp": [2],
    "checkpoint": ["nvidia/GLM-5.3-Flash-NVFP4"],
    "extra_args": [["--enable-metrics", "--watchdog-timeout", "1200"]],
}


# Clusters behind the real router: replicas, and PD across nodes (1P2D, 2P1D) with each policy.
CLUSTER_SHAPES: list[dict[str, object]] = [
    {"replicas": 2},
    {"replicas": 3, "router_policy": "round_robin"},
    # the remote-instance loader's flags on replicas 1 and 2, and the seed's on replica 0
    {"replicas": 3, "peer_load": "on"},
    {"replicas": 3, "peer_load": "nccl"},
    {"replicas": 2, "peer_load": "on", "dp_attention": "on", "speculative": "off"},
    {"prefill": 1, "decode": 2, "router_policy": "power_of_two"},
    {"prefill": 2, "decode": 1},
    {"prefill": 1, "decode": 1, "kv_transfer": "mooncake"},
]


def catalog_renders():
    """Every catalog stack's processes as its nodes run them (addresses, not node names); a
    cluster's router must read every instance's worker from its argv."""
    cases = {}
    for stack in list_stacks():
        b = load_stack(stack)
        addresses = [f"10.0.0.{i + 1}" for i in range(len(b.nodes))]
        src = b.spec.nodes.source
        if isinstance(src, KubernetesSource) and b.spec.cluster is not None:
            # On Kubernetes the router lists the instances by their Services' DNS names.
            addresses = cluster_addresses(
                stack, src.namespace, b.recipe, leader_worker_set=src.leader_worker_set
            )
        procs = b.recipe_for(addresses).processes
        for proc in procs:
            case: dict[str, object] = {"kind": "router" if proc.role == "router" else "server",
                                       "argv": list(proc.argv)}  # fmt: skip
            if proc.role == "router" and b.spec.cluster is not None:
                case["expect"] = _router_reads(
                    b.spec.topology, procs, addresses, b.spec.cluster.router.policy
                )
                if proc.argv[:2] == ("smg", "launch"):  # and SMG reads every setting as decided
                    case["expect"] |= _settings_read(b.spec.topology)
            cases[f"{stack}/{proc.name}"] = case
    return cases


def _router_reads(topology, procs, addresses, policy) -> dict[str, object]:
    """What the router must read: each instance's serving process by its node's address."""
    entries = [p for p in procs if p.role != "router" and p.rank == 0 and p.role != "encoder"]
    url = {p.name: f"http://{addresses[p.node]}:{p.port}" for p in entries}
    if topology == "pd":
        return {
            "pd_disaggregation": True,
            "prefill_urls": [[url[p.name], 8998] for p in entries if p.role == "prefill"],
            "decode_urls": [url[p.name] for p in entries if p.role == "decode"],
            "policy": policy,
            "port": 30000,
        }
    return {"worker_urls": [url[p.name] for p in entries], "policy": policy, "port": 30000}


def _settings_read(topology: str) -> dict[str, object]:
    """Each router setting as SMG's parser must read it (a --no- flag reads False)."""
    shape = "pd" if topology == "pd" else "replicas"
    return {s.name: False if s.value is None else s.value for s in router_settings(shape)}


def enabled_renders():
    """Every cell with default options, and with each single-option override that renders."""
    cases = {}
    for hw in hardware_catalog():
        for strategy in STRATEGIES:
            for topology in TOPOLOGIES:
                variants: list[dict[str, object]] = [{}]
                for name, definition in OPTION_DEFS.items():
                    values = list(definition.choices) or SAMPLES.get(name, [])
                    variants += [{name: v} for v in values]
                variants += CLUSTER_SHAPES
                for overrides in variants:
                    try:
                        recipe = render(hw, strategy, topology, overrides)
                    except RecipeError:
                        continue
                    for proc in recipe.processes:
                        key = (
                            f"{hw}/{strategy}/{topology}/{json.dumps(overrides, sort_keys=True)}/{proc.name}"
                        )
                        cases[key] = {
                            "kind": "router" if proc.role == "router" else "server",
                            "argv": list(proc.argv),
                        }
    return cases


def oracle(cases: dict[str, dict[str, object]]) -> dict[str, str | None]:
    if not ORACLE.exists():
        pytest.fail(f"the sglang oracle venv is missing ({ORACLE}); run scripts/setup.d/10-sglang-oracle.sh")
    done = subprocess.run(
        [str(ORACLE), str(PARSE)],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode:
        pytest.fail(f"the oracle failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def test_every_enabled_render_parses_with_real_sglang():
    cases = enabled_renders()
    assert len(cases) > 300  # the matrix and its single-option overrides
    kinds = {c["kind"] for c in cases.values()}
    assert kinds == {"server", "router"}
    failures = {k: v for k, v in oracle(cases).items() if v is not None}
    assert failures == {}


def test_every_catalog_stack_parses_and_its_router_reads_every_worker():
    cases = catalog_renders()
    routed = [k for k, c in cases.items() if "expect" in c]
    assert len(routed) >= 3  # the replica and PD-across-nodes catalog stacks
    # a Kubernetes cluster's router reads its workers by the instances' Service DNS names
    assert (
        "http://mi355x-k8s-replicas-replica-1.glm-replicas:31000"
        in cases["mi355x-k8s-replicas/router"]["argv"]
    )
    failures = {k: v for k, v in oracle(cases).items() if v is not None}
    assert failures == {}
    # the check itself bites: a router that lost a worker is refused
    key = routed[0]
    lost = dict(cases[key])
    lost["argv"] = [w for w in cases[key]["argv"] if not w.endswith("10.0.0.2:31000")]
    assert oracle({key: lost})[key]


def test_every_catalog_router_is_read_by_the_program_it_names():
    """A cluster's router is `smg launch` where the stack derives its image (SMG's own parser
    reads its workers, policy, port and every timeout and health setting), and the release
    image's sglang_router where it does not (Kubernetes); the seed's PD pair runs behind SMG."""
    routers = {k: c for k, c in catalog_renders().items() if c["kind"] == "router"}
    programs = {k: tuple(c["argv"][:2]) for k, c in routers.items()}
    assert programs["gb300-pd/router"] == ("smg", "launch")
    assert programs["h200-replicas/router"] == ("smg", "launch")
    assert programs["mi355x-k8s-replicas/router"] == ("python", "-m")
    smg_read = [k for k, c in routers.items() if "request_timeout_secs" in c.get("expect", {})]
    assert len(smg_read) >= 3, smg_read
    assert {k: v for k, v in oracle(routers).items() if v is not None} == {}
    # it bites: SMG reads a setting that differs from the decision as a failure
    key = smg_read[0]
    argv = list(routers[key]["argv"])
    argv[argv.index("--request-timeout-secs") + 1] = "1800"
    assert "request_timeout_secs" in (oracle({key: {**routers[key], "argv": argv}})[key] or "")


def test_smg_reads_the_release_images_router_words_as_sglang_router_does():
    """SMG 1.13.0 reads the release image's sglang_router words (what a Kubernetes cluster runs)
    as sglang-router 0.3.2 does: the same workers, policy and port; the seed's `--mini-lb` is
    the one word it refuses (it has no Python mini load balancer)."""
    cases = {k: c for k, c in catalog_renders().items() if c["argv"][:2] == ["python", "-m"]}
    assert cases
    result = oracle({k: {**c, "kind": "smg"} for k, c in cases.items()})
    assert {k: v for k, v in result.items() if v is not None} == {}
    seed = render("gb300", "high-throughput", "pd", {"router": "sglang_router"})
    pair = next(p for p in seed.processes if p.role == "router")
    got = oracle({"seed": {"kind": "smg", "argv": list(pair.argv)}})["seed"]
    assert "unrecognized arguments: --mini-lb" in (got or ""), got


def test_oracle_rejects_a_bad_flag_and_a_bad_value():
    good = render("gb300", "low-latency").processes[0].argv
    cases = {
        "bad-flag": {"kind": "server", "argv": [*good, "--no-such-flag"]},
        "bad-choice": {"kind": "server", "argv": [*good[:-2], "--kv-cache-dtype", "fp9", *good[-2:]]},
        "bad-router": {
            "kind": "router",
            "argv": ["python", "-m", "sglang_router.launch_router", "--prefill-only"],
        },
        "good": {"kind": "server", "argv": list(good)},
    }
    result = oracle(cases)
    assert "--no-such-flag" in result["bad-flag"]
    assert "fp9" in result["bad-choice"]
    assert result["bad-router"]
    assert result["good"] is None
