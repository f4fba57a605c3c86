"""Every rule refuses what it must, names the option, and lets the neighbouring valid choice through."""

import pytest

from flashfleet.recipes import RecipeError, render

# (hardware, strategy, topology, overrides, option named, rule id)
REFUSED = [
    ("gb300", "high-throughput", "unified", {"kv_dsa": "fp8-tilelang"}, "kv_dsa", "tilelang-fp8-kv-cuda"),
    ("h200", "high-throughput", "unified", {"kv_dsa": "fp8-tilelang"}, "kv_dsa", "tilelang-fp8-kv-cuda"),
    ("mi355x", "low-latency", "unified", {"kv_dsa": "fp8-trtllm"}, "kv_dsa", "trtllm-dsa-hardware"),
    ("h200", "low-latency", "unified", {"kv_dsa": "fp8-trtllm"}, "kv_dsa", "trtllm-dsa-hardware"),
    (
        "mi355x",
        "low-latency",
        "unified",
        {"breakable_cuda_graph": "on"},
        "breakable_cuda_graph",
        "breakable-cuda-graph",
    ),
    ("mi355x", "low-latency", "unified", {"speculative": "dflash2"}, "speculative", "dflash2-fa4"),
    ("gb300", "low-latency", "unified", {"dp_attention": "on"}, "dp_attention", "speculative-dp-attention"),
    (
        "gb300",
        "high-throughput",
        "unified",
        {"dp_attention": "on", "speculative": "dflash2"},
        "dp_attention",
        "speculative-dp-attention",
    ),
    ("gb300", "low-latency", "pd", {}, "speculative", "speculative-pd"),
    ("gb300", "high-throughput", "pd", {"speculative": "eagle"}, "speculative", "speculative-pd"),
    ("gb300", "high-throughput", "pd", {"speculative": "dflash2"}, "speculative", "speculative-pd"),
    ("gb300", "high-throughput", "pd", {"pd_decode_tp": 1}, "pd_decode_tp", "pd-same-tp"),
    ("gb300", "low-latency", "unified", {"mm_transport": "cuda_vmm"}, "mm_transport", "cuda-vmm-mnnvl"),
    (
        "h200",
        "low-latency",
        "unified",
        {"mm_transport": "cuda_vmm", "nodes": 2},
        "mm_transport",
        "cuda-vmm-mnnvl",
    ),
    ("gb300", "low-latency", "unified", {"precision": "mxfp4"}, "precision", "precision-hardware"),
    ("h200", "low-latency", "unified", {"precision": "mxfp4"}, "precision", "precision-hardware"),
    ("h200", "low-latency", "unified", {"precision": "nvfp4"}, "precision", "precision-hardware"),
    ("mi355x", "low-latency", "unified", {"precision": "nvfp4"}, "precision", "precision-hardware"),
    (
        "gb300",
        "low-latency",
        "unified",
        {"precision": "nvfp4", "checkpoint": "zai-org/GLM-5.3-Flash"},
        "checkpoint",
        "checkpoint-precision",
    ),
    (
        "gb300",
        "low-latency",
        "unified",
        {"extra_args": "--disable-radix-cache"},
        "extra_args",
        "prefix-cache-on",
    ),
    (
        "gb300",
        "low-latency",
        "unified",
        {"extra_args": ["--json-model-override-args", '{"linear_lower_bound": 0.1}']},
        "extra_args",
        "linear-lower-bound",
    ),
    (
        "gb300",
        "low-latency",
        "unified",
        {"extra_args": ['--json-model-override-args={"text_config": {"linear_lower_bound": 0}}']},
        "extra_args",
        "linear-lower-bound",
    ),
    (
        "gb300",
        "low-latency",
        "unified",
        {"extra_args": "--kv-cache-dtype bfloat16"},
        "extra_args",
        "extra-args-typed",
    ),
    ("gb300", "low-latency", "unified", {"extra_args": "oops --flag"}, "extra_args", "extra-args-shape"),
    (
        "gb300",
        "low-latency",
        "unified",
        {"extra_args": "--enable-metrics --enable-metrics"},
        "extra_args",
        "extra-args-repeat",
    ),
    (
        "gb300",
        "low-latency",
        "encoder-disagg",
        {"extra_args": "--mem-fraction-static 0.8"},
        "extra_args",
        "extra-args-repeat",
    ),
    ("gb300", "low-latency", "unified", {"hicache_size": 100}, "hicache_size", "hicache-size-needs-tier"),
    (
        "gb300",
        "low-latency",
        "unified",
        {"mamba_full_memory_ratio": 1.5, "max_mamba_cache_size": 256},
        "max_mamba_cache_size",
        "mamba-pin-or-ratio",
    ),
    ("mi355x", "low-latency", "pd", {}, "topology", "topology-hardware"),
    ("mi355x", "high-throughput", "encoder-disagg", {}, "topology", "topology-hardware"),
    ("gb300", "low-latency", "encoder-disagg", {"nodes": 2}, "nodes", "multi-node-topology"),
    ("gb300", "low-latency", "unified", {"tp": 8}, "tp", "tp-fits"),
    ("gb300", "low-latency", "unified", {"nodes": 2, "tp": 3}, "tp", "tp-fits"),
    ("h200", "high-throughput", "pd", {"tp": 8}, "tp", "tp-fits"),
    (
        "gb300",
        "low-latency",
        "encoder-disagg",
        {"breakable_cuda_graph": "on"},
        "breakable_cuda_graph",
        "breakable-cuda-graph",
    ),
]

# Valid neighbours: each differs from a refused case in the one thing the rule looks at.
ALLOWED = [
    ("mi355x", "low-latency", "unified", {"kv_dsa": "fp8-tilelang"}),
    ("gb300", "low-latency", "unified", {"kv_dsa": "bf16-tilelang"}),
    ("h200", "low-latency", "unified", {"kv_dsa": "bf16-tilelang"}),
    ("gb300", "low-latency", "unified", {"breakable_cuda_graph": "on"}),
    ("gb300", "low-latency", "unified", {"speculative": "dflash2"}),
    ("gb300", "high-throughput", "unified", {"dp_attention": "on"}),
    ("gb300", "low-latency", "unified", {"dp_attention": "on", "speculative": "off"}),
    ("gb300", "high-throughput", "pd", {"pd_decode_tp": 2}),
    ("gb300", "low-latency", "unified", {"mm_transport": "cuda_vmm", "nodes": 2}),
    ("gb300", "low-latency", "unified", {"precision": "nvfp4"}),
    ("gb300", "low-latency", "unified", {"precision": "nvfp4", "checkpoint": "nvidia/GLM-5.3-Flash-NVFP4"}),
    ("mi355x", "low-latency", "unified", {"precision": "mxfp4"}),
    ("gb300", "low-latency", "unified", {"extra_args": ["--json-model-override-args", '{"rope_theta": 1}']}),
    ("gb300", "low-latency", "unified", {"extra_args": "--enable-metrics --watchdog-timeout 1200"}),
    ("gb300", "low-latency", "unified", {"extra_args": "--mem-fraction-static 0.8"}),
    ("gb300", "low-latency", "unified", {"hicache": "l1l2", "hicache_size": 100}),
    ("gb300", "low-latency", "unified", {"mamba_full_memory_ratio": 1.5}),
    ("gb300", "low-latency", "unified", {"nodes": 2, "tp": 8}),
    ("h200", "high-throughput", "pd", {"tp": 4}),
    ("gb300", "low-latency", "unified", {"weight_prefetch": "on", "weight_prefetch_threads": 4}),
]


@pytest.mark.parametrize(("hardware", "strategy", "topology", "overrides", "option", "rule"), REFUSED)
def test_refused_with_option_and_rule(hardware, strategy, topology, overrides, option, rule):
    with pytest.raises(RecipeError) as info:
        render(hardware, strategy, topology, overrides)
    assert info.value.rule == rule
    assert info.value.field == option
    assert info.value.message.startswith(f"{option}: ")
    assert info.value.source, "every rule says where it comes from"


@pytest.mark.parametrize(("hardware", "strategy", "topology", "overrides"), ALLOWED)
def test_valid_neighbour_renders(hardware, strategy, topology, overrides):
    recipe = render(hardware, strategy, topology, overrides)
    assert recipe.processes


@pytest.mark.parametrize(
    ("overrides", "field", "rule"),
    [
        ({"kv_dsa": "fp4"}, "kv_dsa", "choices"),
        ({"tp": "four"}, "tp", "type"),
        ({"tp": 0}, "tp", "range"),
        ({"mamba_full_memory_ratio": "nan"}, "mamba_full_memory_ratio", "type"),
        ({"hicache_size": -5}, "hicache_size", "range"),
        ({"no_such_option": 1}, "no_such_option", "unknown-option"),
        ({"extra_args": "--flag 'unclosed"}, "extra_args", "type"),
    ],
)
def test_bad_values_name_the_option(overrides, field, rule):
    with pytest.raises(RecipeError) as info:
        render("gb300", "low-latency", "unified", overrides)
    assert (info.value.field, info.value.rule) == (field, rule)


@pytest.mark.parametrize(
    ("kind", "value"), [("hardware", "b200"), ("strategy", "fast"), ("topology", "ring")]
)
def test_unknown_names(kind, value):
    args = {"hardware": "gb300", "strategy": "low-latency", "topology": "unified", kind: value}
    with pytest.raises(RecipeError) as info:
        render(args["hardware"], args["strategy"], args["topology"])
    assert info.value.field == kind
    assert value in info.value.message


def test_a_tp_past_the_nodes_gpus_says_how_many_there_are() -> None:
    with pytest.raises(RecipeError) as info:
        render("h200", "low-latency", "unified", {"tp": 16})
    assert info.value.rule == "tp-fits"
    assert info.value.message == "tp: tp 16 exceeds the 8 GPUs of 1 NVIDIA H200 node(s)"
