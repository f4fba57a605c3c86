"""`flashfleet plan` and `flashfleet validate`: offline, fast, exit 2 with a reason on bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from flashfleet.cli import main
from flashfleet.stack import list_stacks


@pytest.mark.parametrize("stack", list_stacks())
def test_plan_json_has_the_whole_bring_up(stack: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", stack, "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["stack"] == stack
    assert d["badge"]
    assert d["start_order"]
    assert d["nodes"]
    assert all(n["processes"] for n in d["nodes"])
    if d["source"]["kind"] == "kubernetes":
        # No docker runs: each process is a container of a workload, its argv the command.
        commands = [c["command"] for w in d["source"]["workloads"] for c in w["containers"]]
        for node in d["nodes"]:
            for proc in node["processes"]:
                assert "docker_run" not in proc
                assert proc["argv"] in commands
        return
    for node in d["nodes"]:
        for proc in node["processes"]:
            assert proc["docker_run"][:2] == ["docker", "run"]
            assert proc["docker_run"][-len(proc["argv"]) :] == proc["argv"]
    if d["source"]["kind"] == "aws" and d["nodes"][0]["instance_type"] == "p5en.48xlarge":
        # the catalog's sourced on-demand price (a stack may set its own, which then says so)
        assert d["hourly_cost_usd"] > 0
        assert d["price_source"]
    else:
        assert d["hourly_cost_usd"] is None  # GB300 on-demand, existing hosts, Kubernetes: no sourced price
    if d["source"]["kind"] == "aws":
        assert d["nodes"][0]["instance_type"] in {"p5en.48xlarge", "p6e-gb300.36xlarge"}
        assert 22 in d["source"]["ingress"]["ports"]
        assert 30000 in d["source"]["ingress"]["ports"]


def test_plan_text_shows_commands_mooncake_and_sourced_cost(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "h200-l3"]) == 0
    out = capsys.readouterr().out
    assert "2 x p5en.48xlarge" in out
    assert "mooncake master on node 0 (node-0:50051" in out
    assert "cost     $126.59/h (on-demand price as listed by `dstack offer" in out  # 2 x $63.296
    assert "docker run" in out
    assert "--dist-init-addr node-0:5000" in out
    assert "start    server-0@node-0 -> server-1@node-1" in out


def test_plan_text_of_a_kubernetes_stack_shows_workloads(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "mi355x-k8s"]) == 0
    out = capsys.readouterr().out
    assert "docker run" not in out
    assert "endpoint http://mi355x-k8s.glm.svc:30000/v1" in out
    assert "k8s      context mi355x-cluster, namespace glm (created), Service ClusterIP" in out
    assert (
        "objects Namespace/glm, DaemonSet/mi355x-k8s-prepull, ConfigMap/mi355x-k8s-weights-fetch, "
        "Deployment/mi355x-k8s-serve, Service/mi355x-k8s" in out
    )
    assert "Deployment mi355x-k8s-serve (serves the model):" in out
    # the download runs on the small download image, not the serving image
    assert "# init weights-zai-org-glm-5-3-flash: image python:3.12.12-slim-bookworm" in out
    # the hosts' download program by its path in its ConfigMap, and its request (the client install's first)
    assert out.count("python /opt/flashfleet/weights-fetch/weights_fetch.py \\\n") == 2
    assert '"repos": ["zai-org/GLM-5.3-Flash"]' in out
    assert (
        "# main server: image lmsysorg/sglang:v0.5.23-rocm720-mi35x, limits cpu=64, memory=512Gi, amd.com/gpu=4"
        in out
    )
    assert "    sglang serve \\\n    --model-path zai-org/GLM-5.3-Flash" in out
    assert "\nnode 0 " not in out, "no host sections"


def test_plan_pd_start_order(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "gb300-pd", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["start_order"] == ["prefill@node-0", "decode@node-0", "router@node-0"]
    assert d["source"]["placement_group"] is None
    assert d["source"]["capacity"]["kind"] == "block"
    assert any("Capacity" in w or "placeholder" in w for w in d["warnings"])


def test_unknown_stack_exits_2_without_traceback() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "flashfleet", "plan", "no-such-stack"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "no such stack" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_validate_all_and_a_broken_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate"]) == 0
    assert capsys.readouterr().out.count("ok   ") == len(list_stacks())
    (tmp_path / "Pulumi.bad.yaml").write_text("config:\n  flashfleet:stack:\n    description: x\n")
    assert main(["validate", "--stacks-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "FAIL stack bad" in err
    assert "flashfleet:stack.ttl: Field required" in err


@pytest.mark.parametrize("stack", ["h200-l3", "mi355x-k8s"])
def test_plan_imports_no_pulumi_boto3_or_ansible_engine(stack: str) -> None:
    # plan runs the admission, whose bring-up check validates role arguments with Ansible's own
    # argument-spec validator (ansible.module_utils); nothing of the runner or the engine loads.
    code = (
        "import sys, io, contextlib\n"
        "from flashfleet.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['plan', '{stack}']) == 0\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in {'pulumi', 'pulumi_aws', 'pulumi_kubernetes', 'boto3', 'botocore', 'ansible_runner'}"
        " or (m.startswith('ansible.') and m.split('.')[1] not in {'module_utils', '_vendor', 'release'}))\n"
        "print(heavy)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"
