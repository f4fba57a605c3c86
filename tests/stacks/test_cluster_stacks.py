"""Clusters: replicas and PD across nodes behind the router, from the stack file to each node's
processes; what does not add up is refused naming the field."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from flashfleet.cli import main
from flashfleet.planning import load_stack
from flashfleet.planning.stack_recipe import kubernetes_plan
from flashfleet.recipes import render
from flashfleet.stack import StackError

S = "flashfleet:stack"
Doc = dict[str, Any]
ADDRS = ["10.0.0.1", "10.0.0.2", "10.0.0.3"]


def spec(doc: Doc) -> Doc:
    return doc["config"][S]


def _procs(stack: str, addresses: list[str]) -> dict[str, Any]:
    return {p.name: p for p in load_stack(stack).recipe_for(addresses).processes}


def test_replicas_each_serve_on_their_own_node_behind_one_router() -> None:
    b = load_stack("h200-replicas")
    procs = _procs("h200-replicas", ADDRS[:2])
    assert set(procs) == {"replica-0", "replica-1", "router"}
    r0, r1, router = procs["replica-0"], procs["replica-1"], procs["router"]
    assert (r0.node, r1.node, router.node) == (0, 1, 0)
    assert r0.argv[-2:] == r1.argv[-2:] == ("--port", "31000")
    assert r0.argv == r1.argv  # the same recipe on each node
    assert r0.gpus == tuple(range(8))
    assert router.gpus == ()
    assert router.port == b.serving_port == 30000
    words = list(router.argv)
    urls = words[words.index("--worker-urls") + 1 : words.index("--policy")]
    assert urls == ["http://10.0.0.1:31000", "http://10.0.0.2:31000"]
    assert words[words.index("--policy") + 1] == "cache_aware"
    assert router.start_after == ("replica-0",)  # the worker beside it; the other one is remote
    assert [n.role for n in b.nodes] == ["server+router", "server"]


def test_pd_across_nodes_lists_every_prefill_with_its_bootstrap_port_and_every_decode() -> None:
    procs = _procs("gb300-2p1d", ADDRS)
    assert set(procs) == {"prefill-0", "prefill-1", "decode-0", "router"}
    for name, node, mode, port in (("prefill-0", 0, "prefill", 31000), ("prefill-1", 1, "prefill", 31000),
                                   ("decode-0", 2, "decode", 32000)):  # fmt: skip
        p = procs[name]
        words = list(p.argv)
        assert (p.node, p.port) == (node, port)
        assert words[words.index("--disaggregation-mode") + 1] == mode
        assert words[words.index("--tp-size") + 1] == "4"  # the same TP on both roles, a node each
        assert not {"--nccl-port", "--base-gpu-id"} & set(words)  # one role per node
        assert ("--disaggregation-bootstrap-port" in words) == (mode == "prefill")
        assert "UCX_NET_DEVICES" not in p.env  # the loopback-only UCX settings are the pair's
        assert "--speculative-algorithm" not in words
    router = list(procs["router"].argv)
    assert "--mini-lb" not in router  # the Rust router, with its policy
    assert router[router.index("--pd-disaggregation") :][:1] == ["--pd-disaggregation"]
    pairs = [router[i + 1 : i + 3] for i, w in enumerate(router) if w == "--prefill"]
    assert pairs == [["http://10.0.0.1:31000", "8998"], ["http://10.0.0.2:31000", "8998"]]
    assert [router[i + 1] for i, w in enumerate(router) if w == "--decode"] == ["http://10.0.0.3:32000"]


def test_the_seed_pd_pair_renders_as_before_behind_smg() -> None:
    pair = {p.name: p for p in load_stack("gb300-pd").recipe.processes}
    assert set(pair) == {"prefill", "decode", "router"}
    router = pair["router"].argv
    assert router[:3] == ("smg", "launch", "--pd-disaggregation")
    assert "--mini-lb" not in router  # SMG has no Python mini load balancer: its Rust PD router
    assert "--policy" not in router
    assert router[router.index("--request-timeout-secs") + 1] == "600"
    assert pair["prefill"].env["UCX_NET_DEVICES"] == "lo"


def test_a_cluster_router_is_smg_with_its_settings_where_the_image_is_derived() -> None:
    router = _procs("h200-replicas", ADDRS[:2])["router"].argv
    assert router[:2] == ("smg", "launch")
    for flag, value in (("--request-timeout-secs", "600"), ("--health-check-interval-secs", "10"),
                        ("--health-check-timeout-secs", "30"), ("--health-failure-threshold", "3")):  # fmt: skip
        assert router[router.index(flag) + 1] == value
    assert "--no-remove-unhealthy-workers" in router
    assert router[-4:] == ("--host", "0.0.0.0", "--port", "30000")


def test_the_release_image_runs_its_own_sglang_router_and_smg_is_refused_there(
    write_stack: Callable[[str, Callable[[Doc], None]], Path],
) -> None:
    """image.derived false: the release image has no smg, so its sglang_router fronts the workers
    (with its own defaults); asking for smg there is refused naming the option."""
    router = next(p for p in load_stack("mi355x-k8s-replicas").recipe.processes if p.role == "router")
    assert router.argv[:3] == ("python", "-m", "sglang_router.launch_router")
    assert "--request-timeout-secs" not in router.argv
    with pytest.raises(StackError) as info:
        load_stack(
            "broken", write_stack("mi355x-k8s-replicas", lambda d: spec(d)["options"].update(router="smg"))
        )
    hits = [p for p in info.value.problems if p.rule == "router-program-image"]
    assert [p.path for p in hits] == [f"{S}.options.router"], info.value.problems
    assert "derived image" in hits[0].message


def test_multi_node_replicas_rendezvous_inside_their_own_instance() -> None:
    r = render("h200", "high-throughput", "unified", {"replicas": 2, "nodes": 2})
    procs = {p.name: p for p in r.processes}
    assert [procs[f"replica-1-rank-{k}"].node for k in (0, 1)] == [2, 3]
    words = list(procs["replica-1-rank-1"].argv)
    assert words[words.index("--dist-init-addr") + 1] == "node-2:5000"
    assert words[words.index("--tp-size") + 1] == "16"
    router = list(procs["router"].argv)
    assert router[router.index("--worker-urls") + 1 : router.index("--policy")] == [
        "http://node-0:31000",
        "http://node-2:31000",
    ]  # only rank 0 of each instance serves HTTP


def test_a_cluster_is_not_verified_and_says_what_was_not_validated() -> None:
    single = render("gb300", "low-latency", "unified")
    assert single.badge == "Verified"
    replicas = render("gb300", "low-latency", "unified", {"replicas": 2})
    assert replicas.badge == "Not Verified"
    assert "2 replicas behind SMG" in replicas.badge_source
    assert "the seed measured one unified instance" in replicas.badge_source


@pytest.mark.parametrize(
    ("change", "path", "fragment"),
    [
        (
            lambda d: spec(d)["nodes"].update(count=3),
            "nodes.count",
            "count is 3 but the cluster needs 2 nodes",
        ),
        (lambda d: spec(d)["options"].update(replicas=3), "options", "replicas is set by cluster.replicas"),
        (lambda d: spec(d)["cluster"].update(prefill=1), "cluster", "not both"),
        (
            lambda d: spec(d)["cluster"]["router"].update(policy="random"),
            "cluster.router.policy",
            "cache_aware",
        ),
        (lambda d: spec(d).update(topology="pd"), "cluster.replicas", "pd scales by its prefill and decode"),
    ],
    ids=["count", "replicas-as-option", "two-shapes", "policy", "pd-replicas"],
)
def test_a_cluster_that_does_not_add_up_is_refused_naming_the_field(
    write_stack: Callable[[str, Callable[[Doc], None]], Path],
    change: Callable[[Doc], None],
    path: str,
    fragment: str,
) -> None:
    with pytest.raises(StackError) as info:
        load_stack("broken", write_stack("h200-replicas", change))
    problems = {p.path.removeprefix(f"{S}."): p.message for p in info.value.problems}
    hits = [k for k in problems if k == path or k.startswith(path)]
    assert hits, problems
    assert any(fragment in problems[k] for k in hits), problems


def test_speculative_decoding_stays_refused_under_pd_across_nodes(
    write_stack: Callable[[str, Callable[[Doc], None]], Path],
) -> None:
    with pytest.raises(StackError) as info:
        load_stack("broken", write_stack("gb300-2p1d", lambda d: spec(d).update(strategy="low-latency")))
    assert any(p.rule == "speculative-pd" for p in info.value.problems)


def test_a_cluster_moved_onto_kubernetes_is_planned_behind_its_router(
    write_stack: Callable[[str, Callable[[Doc], None]], Path],
) -> None:
    def change(d: Doc) -> None:
        k8s = __import__("yaml").safe_load(Path("stacks/Pulumi.mi355x-k8s.yaml").read_text())
        spec(d)["nodes"] = {"count": 2, "source": spec(k8s)["nodes"]["source"]}
        spec(d)["ttl"] = spec(k8s)["ttl"]
        spec(d)["image"] = spec(k8s)["image"]

    b = load_stack("broken", write_stack("mi355x-replicas", change))
    plan = kubernetes_plan("broken", b.spec)
    words = list({launch.name: launch for launch in plan.launches}["router"].argv)
    assert words[words.index("--worker-urls") + 1 : words.index("--policy")] == [
        "http://broken-replica-0.glm:31000",
        "http://broken-replica-1.glm:31000",
    ]
    # The node count still adds up, on Kubernetes as anywhere.
    with pytest.raises(StackError) as info:
        load_stack("broken", write_stack("mi355x-k8s-replicas", lambda d: spec(d)["nodes"].update(count=3)))
    assert [p.rule for p in info.value.problems] == ["cluster-node-count"]


def test_render_cli_points_pd_on_two_nodes_to_the_instance_counts(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["render", "--hardware", "h200", "--strategy", "high-throughput", "--topology", "pd"]
    assert main([*base, "--set", "nodes=2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "prefill=1 decode=1" in err[0]
    assert main([*base, "--set", "prefill=1", "--set", "decode=1"]) == 0
    out = capsys.readouterr().out
    for words in ("--pd-disaggregation", "http://node-0:31000 8998", "http://node-1:32000"):
        assert words in out


def test_plan_shows_which_host_runs_what_and_the_request_path(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "mi355x-replicas", "--format", "json"]) == 0
    cluster = __import__("json").loads(capsys.readouterr().out)["cluster"]
    assert [(i["name"], i["addresses"], i["url"]) for i in cluster["instances"]] == [
        ("replica-0", ["192.0.2.10"], "http://192.0.2.10:31000"),
        ("replica-1", ["192.0.2.11"], "http://192.0.2.11:31000"),
    ]  # hosts are assigned to instances in the order the stack lists them
    assert cluster["router"] == {"node": 0, "address": "192.0.2.10", "port": 30000}
    assert main(["plan", "gb300-2p1d"]) == 0
    text = capsys.readouterr().out
    assert "  cluster  2 prefill + 1 decode x 1 node(s) each, behind SMG on node 0" in text
    assert (
        "client -> router node-0:30000 (cache_aware) -> prefill-0 | prefill-1 (prefill; KV over nixl) -> decode-0"
        in text
    )


def test_the_inventory_groups_each_instance_and_batches_a_pd_group_whole() -> None:
    from flashfleet.inventory import build_inventory

    b = load_stack("gb300-2p1d")
    inv = build_inventory(b, ["198.51.100.1", "198.51.100.2", "198.51.100.3"], ADDRS)
    children = inv["all"]["children"]
    names = [n.name for n in b.nodes]
    assert {g: sorted(children[g]["hosts"]) for g in children if g.startswith("instance_")} == {
        "instance_prefill_0": [names[0]],
        "instance_prefill_1": [names[1]],
        "instance_decode_0": [names[2]],
    }
    # PD: every prefill and decode node in one batch, cut as a whole (sglang_serve's cut.yml)
    assert sorted(children["serve_batch"]["hosts"]) == sorted(names)
    router = next(p for p in inv["all"]["hosts"][names[0]]["flashfleet_processes"] if p["role"] == "router")
    assert router["workers"] == ["http://10.0.0.1:31000", "http://10.0.0.2:31000", "http://10.0.0.3:32000"]
    decode = inv["all"]["hosts"][names[2]]["flashfleet_processes"][0]
    assert decode["router_url"] == "http://10.0.0.1:30000"
    assert decode["router_entry"] == {"url": "http://10.0.0.3:32000", "worker_type": "decode"}
    # Clients (and verify) reach PD workers through the router only: a decode answers no chat.
    assert [inv["all"]["hosts"][n]["flashfleet_api_port"] for n in names] == [30000, None, None]
    replicas = load_stack("mi355x-replicas")
    two = build_inventory(replicas, ["198.51.100.1", "198.51.100.2"], ADDRS[:2])["all"]["children"]
    assert sorted(two["serve_batch"]["hosts"]) == [replicas.nodes[0].name]  # replicas: one instance at a time
    single = build_inventory(load_stack("h200-throughput"), ["198.51.100.1"], ["10.0.0.1"])
    assert "serve_batch" not in single["all"]["children"]  # one instance: every node at once


def test_only_a_pd_decode_node_watches_every_prefill_to_restart_its_decode_after_one_restarted() -> None:
    from flashfleet.inventory import build_inventory

    b = load_stack("gb300-2p1d")
    hosts = build_inventory(b, ["198.51.100.1", "198.51.100.2", "198.51.100.3"], ADDRS)["all"]["hosts"]
    names = [n.name for n in b.nodes]
    assert [("flashfleet_pd_heal" in hosts[n]) for n in names] == [False, False, True]  # prefill nodes: none
    heal = hosts[names[2]]["flashfleet_pd_heal"]
    assert heal["prefills"] == ["http://10.0.0.1:31000/health", "http://10.0.0.2:31000/health"]
    assert heal["units"] == ["flashfleet-decode-0.service"]
    # an outage is counted before the prefill's unit can start it again (RestartSec=10 s)
    assert heal["poll_s"] * (heal["down_polls"] - 1) < 10
    single = build_inventory(load_stack("h200-throughput"), ["198.51.100.1"], ["10.0.0.1"])
    assert "flashfleet_pd_heal" not in single["all"]["hosts"][load_stack("h200-throughput").nodes[0].name]


def test_up_says_before_a_change_whether_the_endpoint_stays_up() -> None:
    from flashfleet.cli.up import phases
    from flashfleet.planning.plan_view import plan_data

    replicated = "\n".join(phases(plan_data(load_stack("mi355x-replicas"))))
    assert "restarts one instance at a time (out of the router, back once ready)" in replicated
    single = "\n".join(phases(plan_data(load_stack("mi355x-throughput"))))
    assert "one instance, so the endpoint is down until it is ready again: at least " in single
    pd = "\n".join(phases(plan_data(load_stack("gb300-2p1d"))))
    assert "cuts the whole PD group: every prefill and decode stops, then all start again" in pd
    # the restart's length: the model's load and JIT, and what it has no figure for
    assert re.search(
        r"down for a server's restart once the running requests finish: at least \d+ s, with no figure for "
        r"capture, ready \(modeled as the second bring-up's",
        pd,
    ), pd


def _router_host(d: Doc, router: str = "192.0.2.12", third: bool = True) -> None:
    """mi355x-replicas with a third host listed (or not), and the router on `router`."""
    s = spec(d)
    hosts = s["nodes"]["source"]["hosts"]
    if third:
        hosts.append({**hosts[0], "address": "192.0.2.12"})
    s["nodes"]["count"] = len(hosts)
    s["cluster"]["router"]["host"] = router


def test_a_router_host_of_its_own_runs_the_router_alone_and_counts_as_a_node(
    write_stack: Callable[[str, Callable[[Doc], None]], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    b = load_stack("broken", write_stack("mi355x-replicas", _router_host))
    by_node: dict[int, list[str]] = {}
    procs = b.recipe_for(ADDRS).processes
    for p in procs:
        by_node.setdefault(p.node, []).append(p.name)
    assert by_node == {0: ["replica-0"], 1: ["replica-1"], 2: ["router"]}
    router = next(p for p in procs if p.role == "router")
    words = list(router.argv)
    assert words[words.index("--worker-urls") + 1 : words.index("--policy")] == [
        "http://10.0.0.1:31000",
        "http://10.0.0.2:31000",
    ]
    assert router.start_after == ()  # no worker beside it: its unit waits for the remote ones
    assert {p.router_url for p in procs if p.role != "router"} == {"http://10.0.0.3:30000"}
    assert [n.role for n in b.nodes][2] == "router"
    assert b.endpoint_node == 2  # the stack's endpoint (plan, the endpoint output, bench) is the router's
    from flashfleet.bringup.contract import endpoint_host, node_zero
    from flashfleet.inventory import build_inventory

    inv = build_inventory(b, ["198.51.100.1", "198.51.100.2", "198.51.100.3"], ADDRS)
    names = [n.name for n in b.nodes]
    assert (endpoint_host(inv), node_zero(inv)) == (names[2], names[0])  # bench runs beside the router
    assert load_stack("mi355x-replicas").endpoint_node == 0  # beside replica-0 by default
    # the router's host serves no model: no GPU check, driver play, container toolkit or weights
    hosts, groups = inv["all"]["hosts"], inv["all"]["children"]
    assert [hosts[n]["flashfleet_gpu_node"] for n in names] == [True, True, False]
    assert [hosts[n]["flashfleet_gpu_count"] for n in names] == [8, 8, 0]
    assert (hosts[names[2]]["flashfleet_gpu_model"], hosts[names[2]]["flashfleet_driver"]) == ("", None)
    for group in ("vendor_amd", "hw_mi355x"):
        assert sorted(groups[group]["hosts"]) == names[:2], group
    assert sorted(groups["flashfleet"]["hosts"]) == sorted(names)
    assert [n.gpu_node for n in load_stack("mi355x-replicas").nodes] == [True, True]  # router beside a worker


@pytest.mark.parametrize(
    ("change", "rule", "fragment"),
    [
        (
            lambda d: _router_host(d, router="192.0.2.11", third=False),
            "cluster-node-count",
            "count is 2 but the cluster needs 3 nodes (2 replicas x 1 node(s) each, plus the router's own node)",
        ),
        (lambda d: _router_host(d, router="192.0.2.99"), "router-host-unknown", "192.0.2.99 is not one of"),
    ],
    ids=["count", "unknown-host"],
)
def test_a_router_host_that_does_not_fit_is_refused_naming_the_field(
    write_stack: Callable[[str, Callable[[Doc], None]], Path],
    change: Callable[[Doc], None],
    rule: str,
    fragment: str,
) -> None:
    with pytest.raises(StackError) as info:
        load_stack("broken", write_stack("mi355x-replicas", change))
    hits = [p for p in info.value.problems if p.rule == rule]
    assert hits, info.value.problems
    assert fragment in hits[0].message, info.value.problems
    assert hits[0].path.removeprefix(f"{S}.") in ("nodes.count", "cluster.router.host")


def test_a_router_host_on_aws_is_refused_before_anything_is_created(
    write_stack: Callable[[str, Callable[[Doc], None]], Path],
) -> None:
    with pytest.raises(StackError) as info:
        load_stack(
            "broken",
            write_stack("h200-replicas", lambda d: spec(d)["cluster"]["router"].update(host="10.0.0.9")),
        )
    assert "router-host-source" in [p.rule for p in info.value.problems]
    assert f"{S}.cluster.router.host" in [p.path for p in info.value.problems]


def _router_instance(d: Doc, instance_type: str = "m7i.xlarge", region: str = "us-east-1") -> None:
    """h200-replicas with the router on a CPU instance of its own (one more node)."""
    s = spec(d)
    s["cluster"]["router"]["instanceType"] = instance_type
    s["nodes"]["count"] = 3
    d["config"]["aws:region"] = region
    s["nodes"]["source"]["network"]["availabilityZone"] = f"{region}a"


def test_a_router_instance_on_aws_is_the_last_node_a_cpu_one_and_priced_in(
    write_stack: Callable[[str, Callable[[Doc], None]], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    stacks = write_stack("h200-replicas", _router_instance)
    b = load_stack("broken", stacks)
    procs = b.recipe_for(ADDRS).processes
    assert {p.name: p.node for p in procs} == {"replica-0": 0, "replica-1": 1, "router": 2}
    assert b.endpoint_node == 2
    assert [(n.role, n.instance_type, n.gpu_count, n.gpu_node) for n in b.nodes] == [
        ("server", "p5en.48xlarge", 8, True),
        ("server", "p5en.48xlarge", 8, True),
        ("router", "m7i.xlarge", 0, False),
    ]
    assert b.nodes[2].host_memory_gb == 17  # 16 GiB
    assert len(b.gpu_nodes) == b.spec.gpu_node_count == 2
    # Two GPU nodes and the router, each at its region's listed price, each source named.
    assert b.hourly_cost_usd == pytest.approx(2 * 63.296 + 0.2016)
    assert b.price_source is not None
    assert "router m7i.xlarge" in b.price_source
    assert "c3x.dev" in b.price_source
    assert b.router_root_volume_gib == 187  # the image allowance, no weights
    assert main(["plan", "broken", "--stacks-dir", str(stacks)]) == 0
    text = capsys.readouterr().out
    assert "us-east-1, 2 x p5en.48xlarge (x86_64)" in text
    assert "router node 2: 1 x m7i.xlarge (x86_64, $0.2016/h), root volume 187 GiB" in text
    assert "path     client -> router node-2:30000 (cache_aware) -> replica-0 | replica-1" in text
    from flashfleet.inventory import build_inventory

    inv = build_inventory(b, ["198.51.100.1", "198.51.100.2", "198.51.100.3"], ADDRS)
    hosts = inv["all"]["hosts"]
    assert [hosts[n.name]["flashfleet_gpu_node"] for n in b.nodes] == [True, True, False]
    assert sorted(inv["all"]["children"]["hw_h200"]["hosts"]) == [n.name for n in b.nodes[:2]]
    from flashfleet.bench.node_facts import from_bringup

    deployment = from_bringup(b)  # bench bills two GPU nodes and the router's
    assert (deployment.node_count, deployment.hourly_usd_per_node) == (2, 63.296)
    assert deployment.router_hourly_usd == 0.2016
    # (the same stack file, rewritten:) outside the regions the catalog prices, the whole cost is unknown, not the GPU part alone.
    unpriced = load_stack(
        "broken", write_stack("h200-replicas", lambda d: _router_instance(d, region="us-east-2"))
    )
    assert unpriced.hourly_cost_usd is None
    assert unpriced.price_source is None
    assert from_bringup(unpriced).hourly_usd_per_node is None


@pytest.mark.parametrize(
    ("change", "rule", "path", "fragment"),
    [
        (
            lambda d: _router_instance(d, "m7g.xlarge"),
            "router-instance-type",
            "cluster.router.instanceType",
            "m7g.xlarge is arm64, but the router runs the stack's x86_64 SGLang image: use m7i.xlarge",
        ),
        (
            lambda d: _router_instance(d, "p5en.48xlarge"),
            "router-instance-type",
            "cluster.router.instanceType",
            "'p5en.48xlarge' is not a CPU instance type of the catalog (known: m7i.xlarge, m7g.xlarge)",
        ),
        (
            lambda d: (_router_instance(d), spec(d)["nodes"].update(count=2)),
            "cluster-node-count",
            "nodes.count",
            "count is 2 but the cluster needs 3 nodes (2 replicas x 1 node(s) each, plus the router's own node)",
        ),
        (
            lambda d: (_router_instance(d), spec(d)["cluster"]["router"].update(host="10.0.0.9")),
            "value",
            "cluster.router",
            "host (an existing host) or instanceType (an AWS node), not both",
        ),
    ],
    ids=["arch", "gpu-type", "count", "both"],
)
def test_a_router_instance_that_does_not_fit_is_refused_naming_the_field(
    write_stack: Callable[[str, Callable[[Doc], None]], Path],
    change: Callable[[Doc], None],
    rule: str,
    path: str,
    fragment: str,
) -> None:
    with pytest.raises(StackError) as info:
        load_stack("broken", write_stack("h200-replicas", change))
    hits = [p for p in info.value.problems if p.path == f"{S}.{path}"]
    assert hits, info.value.problems
    assert fragment in hits[0].message, info.value.problems
    assert rule in hits[0].rule, info.value.problems


def test_a_router_instance_off_aws_is_refused(
    write_stack: Callable[[str, Callable[[Doc], None]], Path],
) -> None:
    def change(d: Doc) -> None:
        _router_host(d)
        spec(d)["cluster"]["router"] = {"policy": "round_robin", "instanceType": "m7i.xlarge"}

    with pytest.raises(StackError) as info:
        load_stack("broken", write_stack("mi355x-replicas", change))
    assert [(p.path, p.rule) for p in info.value.problems] == [
        (f"{S}.cluster.router.instanceType", "router-instance-source")
    ]


def _gpuless_router_host(d: Doc) -> None:
    """The router's own host listed as it is: no `gpus`, no `hostMemoryGib`."""
    _router_host(d)
    router = spec(d)["nodes"]["source"]["hosts"][2]
    del router["gpus"], router["hostMemoryGib"]


def test_a_router_host_of_its_own_needs_no_gpus_listed_and_plans_as_having_none(
    write_stack: Callable[[str, Callable[[Doc], None]], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    stacks = write_stack("mi355x-replicas", _gpuless_router_host)
    b = load_stack("broken", stacks)
    assert [n.gpu_count for n in b.nodes] == [8, 8, 0]
    assert [n.role for n in b.nodes][2] == "router"
    assert main(["plan", "broken", "--stacks-dir", str(stacks)]) == 0
    router_line = next(
        line for line in capsys.readouterr().out.splitlines() if "(router): 192.0.2.12" in line
    )
    assert "no GPU," in router_line, router_line
    assert " GPUs," not in router_line, router_line


@pytest.mark.parametrize(
    ("field", "rule"), [("gpus", "host-gpus"), ("hostMemoryGib", "host-memory")], ids=["gpus", "memory"]
)
def test_a_host_that_serves_the_model_still_lists_its_gpus_and_memory(
    write_stack: Callable[[str, Callable[[Doc], None]], Path], field: str, rule: str
) -> None:
    def change(d: Doc) -> None:
        _gpuless_router_host(d)
        del spec(d)["nodes"]["source"]["hosts"][1][field]  # a worker's host

    with pytest.raises(StackError) as info:
        load_stack("broken", write_stack("mi355x-replicas", change))
    assert [(p.path, p.rule) for p in info.value.problems] == [(f"{S}.nodes.source.hosts[1].{field}", rule)]


def test_without_a_router_host_of_its_own_every_host_lists_its_gpus(
    write_stack: Callable[[str, Callable[[Doc], None]], Path],
) -> None:
    with pytest.raises(StackError) as info:
        load_stack(
            "broken",
            write_stack("mi355x-replicas", lambda d: spec(d)["nodes"]["source"]["hosts"][0].pop("gpus")),
        )
    assert [(p.path, p.rule) for p in info.value.problems] == [
        (f"{S}.nodes.source.hosts[0].gpus", "host-gpus")
    ]
