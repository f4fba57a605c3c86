"""The node runner's argv rewrite and the stack cluster's endpoint base URL, without hosts."""

from __future__ import annotations

from flashfleet.bench.node_runner import in_container
from flashfleet.cli.shared import stackops
from flashfleet.cli.shared.stack_cluster import StackCluster


def test_output_goes_to_results_and_node_zeros_address_to_loopback() -> None:
    argv = ["python3", "-m", "sglang.benchmark.serving", "--base-url", "http://198.51.100.7:30000",
            "--output-file", "bench.jsonl"]  # fmt: skip
    out = in_container(argv, "bench.jsonl", "198.51.100.7")
    assert out[-4:] == ["--base-url", "http://127.0.0.1:30000", "--output-file", "/results/bench.jsonl"]
    elsewhere = in_container(argv, "bench.jsonl", "198.51.100.8")
    assert elsewhere[4] == "http://198.51.100.7:30000"  # another host's endpoint is left alone


def test_endpoint_output_loses_the_openai_suffix(monkeypatch) -> None:
    out = {"endpoint": stackops.StackOutput("http://198.51.100.7:30000/v1", False)}
    monkeypatch.setattr(stackops, "outputs", lambda stack: out)
    assert StackCluster().endpoint("s") == "http://198.51.100.7:30000"
