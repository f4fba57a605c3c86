"""Per-hardware defaults, strategies and option effects on the rendered command."""

import pytest

from flashfleet.recipes import render
from flashfleet.recipes.flags import argv_units


def flags(argv) -> dict[str, tuple[str, ...]]:
    return {u[0]: u[1:] for u in argv_units(argv)[1:]}


def server(recipe, name="server"):
    return next(p for p in recipe.processes if p.name == name)


@pytest.mark.parametrize(
    ("hardware", "tp", "kv", "dsa", "moe"),
    [
        ("gb300", "4", "fp8_e4m3", "trtllm", "flashinfer_trtllm"),
        ("h200", "8", "bfloat16", "tilelang", "deep_gemm"),
        ("mi355x", "4", "fp8_e4m3", "tilelang", "aiter"),
    ],
)
def test_hardware_defaults(hardware, tp, kv, dsa, moe):
    f = flags(server(render(hardware, "low-latency")).argv)
    assert f["--tp-size"] == (tp,)
    assert f["--kv-cache-dtype"] == (kv,)
    assert f["--dsa-prefill-backend"] == f["--dsa-decode-backend"] == (dsa,)
    assert f["--moe-runner-backend"] == (moe,)
    assert f["--model-path"] == ("zai-org/GLM-5.3-Flash",)
    assert f["--reasoning-parser"] == ("auto",)
    assert f["--tool-call-parser"] == ("auto",)
    assert f["--host"] == ("0.0.0.0",)
    assert f["--port"] == ("30000",)
    assert "--disable-radix-cache" not in f


def test_mi355x_emits_cpu_transport_and_aiter_env():
    proc = server(render("mi355x", "high-throughput"))
    assert flags(proc.argv)["--mm-feature-transport"] == ("cpu",)
    assert proc.env == {"SGLANG_USE_AITER": "1"}
    assert proc.gpus == (0, 1, 2, 3)  # four of the node's eight GPUs


@pytest.mark.parametrize("hardware", ["gb300", "h200"])
def test_nvidia_auto_transport_emits_no_flag(hardware):
    assert "--mm-feature-transport" not in flags(server(render(hardware, "low-latency")).argv)


@pytest.mark.parametrize("hardware", ["gb300", "h200", "mi355x"])
def test_strategies(hardware):
    low = flags(server(render(hardware, "low-latency")).argv)
    assert low["--speculative-algorithm"] == ("EAGLE",)
    assert (
        low["--speculative-num-steps"],
        low["--speculative-eagle-topk"],
        low["--speculative-num-draft-tokens"],
    ) == (
        ("5",),
        ("1",),
        ("6",),
    )
    high = server(render(hardware, "high-throughput")).argv
    assert not [w for w in high if w.startswith("--speculative")]
    # Everything else is the same command.
    assert {k: v for k, v in low.items() if not k.startswith("--speculative")} == flags(high)


def test_speculative_from_high_throughput_base_adds_mtp_only():
    base = flags(server(render("gb300", "high-throughput")).argv)
    eagle = flags(server(render("gb300", "high-throughput", overrides={"speculative": "eagle"})).argv)
    assert set(eagle) - set(base) == {
        "--speculative-algorithm",
        "--speculative-num-steps",
        "--speculative-eagle-topk",
        "--speculative-num-draft-tokens",
    }


def test_dflash2_swaps_the_draft():
    recipe = render("gb300", "low-latency", overrides={"speculative": "dflash2"})
    f = flags(server(recipe).argv)
    assert f["--speculative-algorithm"] == ("DFLASH",)
    assert f["--speculative-draft-model-path"] == ("incoai/GLM-5.3-Flash-DFlash2",)
    assert f["--speculative-draft-attention-backend"] == ("fa4",)
    assert "--speculative-num-draft-tokens" not in f  # block size comes from the draft checkpoint
    assert recipe.badge == "Not Verified"
    assert any("access-gated" in n and "incoai/GLM-5.3-Flash-DFlash2" in n for n in recipe.notes)


@pytest.mark.parametrize(
    ("kv_dsa", "dtype", "backend"),
    [("bf16-tilelang", "bfloat16", "tilelang"), ("fp8-trtllm", "fp8_e4m3", "trtllm")],
)
def test_kv_dsa_switches_dtype_and_both_backends(kv_dsa, dtype, backend):
    f = flags(server(render("gb300", "low-latency", overrides={"kv_dsa": kv_dsa})).argv)
    assert f["--kv-cache-dtype"] == (dtype,)
    assert f["--dsa-prefill-backend"] == f["--dsa-decode-backend"] == (backend,)


def test_option_flags():
    recipe = render(
        "gb300",
        "high-throughput",
        overrides={
            "breakable_cuda_graph": "on",
            "mm_transport": "cuda_ipc",
            "reasoning_parser": "off",
            "tool_call_parser": "off",
            "dp_attention": "on",
            "mamba_full_memory_ratio": "1.8",
            "max_running_requests": 128,
            "hicache": "l1l2",
            "hicache_size": 120,
        },
    )
    f = flags(server(recipe).argv)
    assert f["--cuda-graph-backend-prefill"] == ("breakable",)
    assert f["--mm-feature-transport"] == ("cuda_ipc",)
    assert "--reasoning-parser" not in f
    assert "--tool-call-parser" not in f
    assert f["--enable-dp-attention"] == ()
    assert f["--dp-size"] == ("4",)
    assert f["--mamba-full-memory-ratio"] == ("1.8",)
    assert f["--max-running-requests"] == ("128",)
    assert f["--enable-hierarchical-cache"] == ()
    assert f["--hicache-size"] == ("120",)
    assert "--hicache-storage-backend" not in f
    assert any("PR #38522" in n for n in recipe.notes)


def test_l3_exposes_the_mooncake_config_path():
    recipe = render("h200", "low-latency", overrides={"hicache": "l1l2l3"})
    proc = server(recipe)
    assert flags(proc.argv)["--hicache-storage-backend"] == ("mooncake",)
    path = proc.env["SGLANG_HICACHE_MOONCAKE_CONFIG_PATH"]
    assert path.endswith(".json")
    assert any(path in n for n in recipe.notes)


@pytest.mark.parametrize("hardware", ["gb300", "h200"])
def test_pd_with_the_l3_tier_renders_each_flag_once(hardware):
    """PD + L3 is no known failure: it renders, Not Verified, and both PD servers turn metrics on
    once (the PD checks and the L3 tier both read them), with no extra_args given."""
    recipe = render(hardware, "high-throughput", "pd", overrides={"hicache": "l1l2l3"})
    assert recipe.badge == "Not Verified"
    for name in ("prefill", "decode"):
        proc = server(recipe, name)
        words = [u[0] for u in argv_units(proc.argv)[1:]]
        assert words.count("--enable-metrics") == 1, proc.argv
        assert flags(proc.argv)["--hicache-storage-backend"] == ("mooncake",)
        assert "SGLANG_HICACHE_MOONCAKE_CONFIG_PATH" in proc.env


def test_max_mamba_cache_pin():
    f = flags(server(render("h200", "high-throughput", overrides={"max_mamba_cache_size": 512})).argv)
    assert f["--max-mamba-cache-size"] == ("512",)
    assert "--mamba-full-memory-ratio" not in f


def test_precisions_pick_checkpoints():
    assert (
        render("gb300", "low-latency", overrides={"precision": "nvfp4"}).model
        == "RadixArk/GLM-5.3-Flash-NVFP4"
    )
    assert (
        render(
            "gb300",
            "low-latency",
            overrides={"precision": "nvfp4", "checkpoint": "nvidia/GLM-5.3-Flash-NVFP4"},
        ).model
        == "nvidia/GLM-5.3-Flash-NVFP4"
    )
    assert (
        render("mi355x", "low-latency", overrides={"precision": "mxfp4"}).model
        == "OneNexus/GLM-5.3-Flash-MXFP4"
    )


def test_multi_node_rendezvous():
    recipe = render("gb300", "low-latency", overrides={"nodes": 2}, addresses=["10.0.0.5", "10.0.0.6"])
    assert [p.name for p in recipe.processes] == ["server-0", "server-1"]
    for rank, proc in enumerate(recipe.processes):
        f = flags(proc.argv)
        assert f["--tp-size"] == ("8",)
        assert f["--dist-init-addr"] == ("10.0.0.5:5000",)
        assert f["--nnodes"] == ("2",)
        assert f["--node-rank"] == (str(rank),)
        assert proc.node == rank
        assert proc.gpus == (0, 1, 2, 3)


def test_extra_args_are_appended_before_host():
    proc = server(
        render("gb300", "low-latency", overrides={"extra_args": "--enable-metrics --watchdog-timeout 1200"})
    )
    assert proc.argv[-7:] == (
        "--enable-metrics",
        "--watchdog-timeout",
        "1200",
        "--host",
        "0.0.0.0",
        "--port",
        "30000",
    )


def test_mamba_note_until_tuned():
    assert any("--mamba-full-memory-ratio" in n for n in render("gb300", "low-latency").notes)
    tuned = render("gb300", "low-latency", overrides={"mamba_full_memory_ratio": 2})
    assert not any("generic 0.9" in n for n in tuned.notes)


def test_render_json_shape():
    data = render("gb300", "high-throughput", "pd").to_dict()
    assert {"hardware", "strategy", "topology", "badge", "processes", "notes"} <= set(data)
    for proc in data["processes"]:
        assert {"name", "role", "argv", "env", "port", "gpus", "start_after"} <= set(proc)
        assert isinstance(proc["argv"], list)
    router = next(p for p in data["processes"] if p["role"] == "router")
    assert router["argv"][:2] == ["smg", "launch"]
    assert all(p["argv"][:2] == ["sglang", "serve"] for p in data["processes"] if p["role"] != "router")


@pytest.mark.parametrize(("strategy", "topology"), [("low-latency", "unified"), ("high-throughput", "pd")])
def test_weight_prefetch_reaches_every_model_server_and_costs_the_badge(strategy, topology):
    base = render("gb300", strategy, topology)
    on = render("gb300", strategy, topology, {"weight_prefetch": "on", "weight_prefetch_threads": "16"})
    for proc in on.processes:
        f = flags(proc.argv)
        if proc.role == "router":
            assert "--weight-loader-prefetch-checkpoints" not in f
            continue
        assert f["--weight-loader-prefetch-checkpoints"] == ()
        assert f["--weight-loader-prefetch-num-threads"] == ("16",)
    assert all("--weight-loader-prefetch-checkpoints" not in p.argv for p in base.processes)
    # not in the seed's commands: never a measured badge
    assert on.badge == "Not Verified"
    assert "weight_prefetch" in on.badge_source


def test_prefetch_threads_without_prefetch_is_refused():
    from flashfleet.recipes.errors import RecipeError

    with pytest.raises(RecipeError) as err:
        render("h200", "low-latency", "unified", {"weight_prefetch_threads": "8"})
    assert err.value.rule == "prefetch-threads-need-prefetch"
