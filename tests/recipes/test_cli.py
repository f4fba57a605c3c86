"""The CLI: JSON shapes, exit code 2 with one clear line on bad input, no traceback."""

import json
import subprocess
import sys

import pytest

from flashfleet.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_matrix_json(capsys):
    code, out, _ = run(capsys, "matrix", "--format", "json")
    assert code == 0
    cells = json.loads(out)
    assert len(cells) == 3 * 2 * 4
    for cell in cells:
        assert {"hardware", "strategy", "topology", "badge", "disabled_reason"} <= set(cell)
        assert (cell["badge"] is None) != (cell["disabled_reason"] is None)
    pd_low = next(
        c for c in cells if (c["hardware"], c["strategy"], c["topology"]) == ("gb300", "low-latency", "pd")
    )
    assert "speculative" in pd_low["disabled_reason"]
    gb_low = next(
        c
        for c in cells
        if (c["hardware"], c["strategy"], c["topology"]) == ("gb300", "low-latency", "unified")
    )
    assert "DP attention" in gb_low["disabled_choices"]["dp_attention"]["on"]
    assert "fp8-tilelang" in gb_low["disabled_choices"]["kv_dsa"]
    mi = next(
        c
        for c in cells
        if (c["hardware"], c["strategy"], c["topology"]) == ("mi355x", "low-latency", "unified")
    )
    assert set(mi["disabled_choices"]["kv_dsa"]) == {"fp8-trtllm"}
    assert "on" in mi["disabled_choices"]["breakable_cuda_graph"]


def test_matrix_text_shows_disabled_choices(capsys):
    code, out, _ = run(capsys, "matrix", "--choices")
    assert code == 0
    assert (
        "breakable_cuda_graph=on: breakable_cuda_graph: Breakable CUDA graph is disabled on AMD Instinct MI355X"
        in out
    )


def test_render_json(capsys):
    code, out, _ = run(
        capsys, "render", "--hardware", "gb300", "--strategy", "low-latency", "--format", "json"
    )
    assert code == 0
    data = json.loads(out)
    assert data["badge"] == "Verified"
    assert data["processes"][0]["argv"][:2] == ["sglang", "serve"]


def test_render_shell_is_copy_pasteable(capsys):
    code, out, _ = run(
        capsys, "render", "--hardware", "gb300", "--strategy", "high-throughput", "--topology", "pd"
    )
    assert code == 0
    assert "env UCX_NET_DEVICES=lo UCX_TLS=tcp,cuda_copy,cuda_ipc,self,sm \\\n  sglang serve" in out
    assert out.index("# prefill") < out.index("# router")


def test_render_set_and_extra_args(capsys):
    code, out, _ = run(
        capsys,
        "render",
        "--hardware",
        "h200",
        "--strategy",
        "high-throughput",
        "--set",
        "hicache=l1l2",
        "--extra-args=--enable-metrics",
        "--format",
        "json",
    )
    assert code == 0
    argv = json.loads(out)["processes"][0]["argv"]
    assert "--enable-hierarchical-cache" in argv
    assert "--enable-metrics" in argv


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["render", "--hardware", "b200", "--strategy", "low-latency"], "unknown hardware 'b200'"),
        (
            ["render", "--hardware", "gb300", "--strategy", "low-latency", "--set", "kv_dsa=fp4"],
            "kv_dsa='fp4'",
        ),
        (
            ["render", "--hardware", "gb300", "--strategy", "low-latency", "--set", "nope=1"],
            "unknown option 'nope'",
        ),
        (
            ["render", "--hardware", "gb300", "--strategy", "low-latency", "--set", "tp"],
            "expected NAME=VALUE",
        ),
        (
            ["render", "--hardware", "h200", "--strategy", "low-latency", "--set", "kv_dsa=fp8-trtllm"],
            "kv_dsa: FP8 KV + TRT-LLM DSA is disabled on NVIDIA H200",
        ),
        (
            ["render", "--hardware", "mi355x", "--strategy", "high-throughput", "--set", "kv_dsa=fp8-trtllm"],
            "kv_dsa: TRT-LLM DSA is not an AMD Instinct MI355X (ROCm) backend",  # "an", not "a AMD"
        ),
        (
            ["render", "--hardware", "h200", "--strategy", "high-throughput", "--set", "checkpoint=x/y"],
            "checkpoint: x/y is not a checkpoint of precision fp8",  # not "a fp8 checkpoint"
        ),
        (
            ["render", "--hardware", "gb300", "--strategy", "low-latency", "--topology", "pd"],
            "rule: speculative-pd",
        ),
        (["render", "--hardware", "gb300"], "the following arguments are required: --strategy"),
        (
            ["render", "--hardware", "gb300", "--strategy", "low-latency", "--format", "yaml"],
            "invalid choice",
        ),
        (
            [
                "render",
                "--hardware",
                "gb300",
                "--strategy",
                "low-latency",
                "--format",
                "docker",
                "--image-version",
                "v0.5.19",
            ],
            "--image-version",
        ),
    ],
)
def test_bad_input_exit_2_one_line(capsys, argv, needle):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert needle in err
    assert "Traceback" not in err


def test_diff_shows_only_changed_flags(capsys):
    code, out, _ = run(
        capsys,
        "diff",
        "--hardware",
        "gb300",
        "--strategy",
        "low-latency",
        "--set",
        "kv_dsa=bf16-tilelang",
        "--format",
        "json",
    )
    assert code == 1  # as diff(1): the commands differ
    data = json.loads(out)
    assert (data["base_badge"], data["badge"]) == ("Verified", "Not Verified")
    (proc,) = data["processes"]
    assert proc["removed"] == [
        "--dsa-prefill-backend trtllm",
        "--dsa-decode-backend trtllm",
        "--kv-cache-dtype fp8_e4m3",
    ]
    assert proc["added"] == [
        "--dsa-prefill-backend tilelang",
        "--dsa-decode-backend tilelang",
        "--kv-cache-dtype bfloat16",
    ]


def test_options_markdown_lists_every_option(capsys):
    from flashfleet.recipes import OPTION_DEFS

    code, out, _ = run(capsys, "options", "--format", "markdown")
    assert code == 0
    for name in OPTION_DEFS:
        assert f"| `{name}` |" in out


def test_entry_point_runs_as_module_without_heavy_imports():
    code = (
        "import sys, runpy; sys.argv=['flashfleet','matrix'];"
        "\ntry: runpy.run_module('flashfleet', run_name='__main__')\nexcept SystemExit: pass"
        "\nheavy=[m for m in ('pulumi','boto3','ansible','ansible_runner','pydantic','matplotlib') if m in sys.modules]"
        "\nprint('HEAVY', heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().endswith("HEAVY []")


def test_diff_with_nothing_changed_exits_0(capsys):
    """As diff(1): the same commands are exit 0, whether nothing was overridden or an override
    restates a default."""
    for extra in ([], ["--set", "kv_dsa=fp8-trtllm"]):
        code, out, err = run(capsys, "diff", "--hardware", "gb300", "--strategy", "low-latency", *extra)
        assert (code, err) == (0, "")
        assert out == "badge: Verified -> Verified\n(no command-line change)\n"
