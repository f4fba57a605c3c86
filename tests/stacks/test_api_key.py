"""The serving API key (issue 14, existing hosts): asked for in the spec, carried as a secret, read
by SGLang from a root-only `--config` file, never in an argv, unit, inventory or event."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from flashfleet.bench.runner import Invocation, LocalRunner
from flashfleet.bench.servers import FETCH_SCRIPT, http_get
from flashfleet.bringup.errors import BringupInputError
from flashfleet.bringup.input_check import validate
from flashfleet.bringup.project import DEFAULT_PROJECT
from flashfleet.cli import main
from flashfleet.inventory import build_inventory
from flashfleet.launch import API_KEY_CONFIG
from flashfleet.planning import resolve_spec
from flashfleet.stack.files import read_stack_file

S = "flashfleet:stack"
Doc = dict[str, Any]
WriteStack = Callable[[str, Callable[[Doc], None]], Path]
ROOT = Path(__file__).resolve().parents[2]
ORACLE = Path(os.environ.get("FLASHFLEET_ORACLE_PYTHON", ROOT / ".venv-oracle" / "bin" / "python"))
KEY = "sk-flashfleet-Zq9v4T2mWc8LxR1p"
ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOv4b5mJ8m8Sx1ZqjS3uXK3bC9QwYqkzq0J1k7o6ZrXy"


def spec(doc: Doc) -> Doc:
    return doc["config"][S]


def keyed(doc: Doc) -> None:
    spec(doc)["serving"] = {"apiKey": "required"}
    doc["config"]["flashfleet:apiKey"] = {"secure": "v1:abcdef"}
    for host in spec(doc)["nodes"]["source"].get("hosts", []):
        host["hostKeys"] = [ED25519]


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(args)
    out = capsys.readouterr()
    return rc, out.out, out.err


# --- the spec: where the user turns it on, and what is refused -------------------------------------


@pytest.mark.parametrize(
    ("base", "change", "path", "rule"),
    [
        ("mi355x-lowlat", lambda d: spec(d).update(serving={"apiKey": "yes"}), "serving.apiKey", None),
        ("mi355x-lowlat", lambda d: spec(d).update(serving={"apiKeys": "required"}), "serving.apiKeys", None),
        (
            "mi355x-lowlat",
            lambda d: d["config"].update({"flashfleet:apiKey": KEY}),
            "flashfleet:apiKey",
            "secret",
        ),
        ("gb300-pd", keyed, "serving.apiKey", "api-key-topology"),
        ("mi355x-k8s", keyed, "serving.apiKey", "api-key-source"),
        (
            "mi355x-lowlat",
            lambda d: spec(d)["options"].update(extra_args=["--api-key", KEY]),
            "extra_args",
            "extra-args-no-secret",
        ),
        (
            "mi355x-lowlat",
            lambda d: spec(d)["options"].update(extra_args=["--config", "/tmp/x.yaml"]),
            "extra_args",
            "extra-args-no-secret",
        ),
    ],
    ids=[
        "not-a-choice",
        "unknown-field",
        "plain-text-key",
        "pd-router",
        "kubernetes",
        "key-in-argv",
        "own-config",
    ],
)
def test_bad_api_key_settings_exit_2_naming_field_and_rule(
    write_stack: WriteStack,
    capsys: pytest.CaptureFixture[str],
    base: str,
    change: Callable[[Doc], None],
    path: str,
    rule: str | None,
) -> None:
    rc, _, err = run_cli(["validate", "broken", "--stacks-dir", str(write_stack(base, change))], capsys)
    assert rc == 2, err
    assert path in err
    if rule:
        assert f"[rule: {rule}]" in err or f"({rule})" in err or rule in err
    assert KEY not in err


def test_the_key_goes_only_to_pinned_existing_hosts(
    write_stack: WriteStack, capsys: pytest.CaptureFixture[str]
) -> None:
    def unpinned(d: Doc) -> None:
        keyed(d)
        for host in spec(d)["nodes"]["source"]["hosts"]:
            host.pop("hostKeys")

    rc, _, err = run_cli(
        ["validate", "broken", "--stacks-dir", str(write_stack("mi355x-lowlat", unpinned))], capsys
    )
    assert rc == 2
    assert "hostKeys" in err
    assert "host-key-unpinned" in err


def test_plan_warns_when_an_existing_host_serves_open(
    write_stack: WriteStack, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = run_cli(["plan", "mi355x-lowlat"], capsys)
    assert rc == 0, err
    assert "serving is open" in out + err
    assert "docs/security.md" in out + err
    rc, out, err = run_cli(
        ["plan", "broken", "--stacks-dir", str(write_stack("mi355x-lowlat", keyed))], capsys
    )
    assert rc == 0, err
    assert "serving is open" not in out + err


@pytest.mark.parametrize("command", ["plan", "validate"])
def test_required_without_the_secret_is_refused_by_plan_and_validate_alike(
    command: str, write_stack: WriteStack, capsys: pytest.CaptureFixture[str]
) -> None:
    # One admission: what `pulumi up` refuses, plan and validate refuse too, in the same words.
    def no_secret(d: Doc) -> None:
        keyed(d)
        del d["config"]["flashfleet:apiKey"]

    rc, out, err = run_cli(
        [command, "broken", "--stacks-dir", str(write_stack("mi355x-lowlat", no_secret))], capsys
    )
    assert rc == 2, out
    assert "flashfleet:apiKey: serving.apiKey is required and the stack has no key" in err
    assert err.rstrip().endswith("[rule: api-key]")


# --- the render: --config in argv, the key nowhere ------------------------------------------------


@pytest.fixture
def keyed_plan(write_stack: WriteStack) -> Any:
    stacks = write_stack("mi355x-lowlat", keyed)
    sf = read_stack_file("broken", stacks)
    from flashfleet.planning import parse_spec

    return resolve_spec(
        "broken", parse_spec("broken", sf.spec_data), region=None, has_hf_token=False, has_api_key=True
    )


def test_the_api_server_reads_its_key_from_a_read_only_config_file(keyed_plan: Any) -> None:
    launches = [launch for node in keyed_plan.launches_by_node().values() for launch in node]
    api = [launch for launch in launches if launch.serves_api]
    assert api, "the stack serves the API somewhere"
    for launch in api:
        assert launch.argv[-2:] == ("--config", API_KEY_CONFIG)
        assert "--api-key" not in launch.argv
        assert launch.api_key_file == API_KEY_CONFIG
        mount = next(m for m in launch.mounts if m.target == API_KEY_CONFIG)
        assert mount.read_only
        assert mount.source == API_KEY_CONFIG
        run = list(launch.docker_run)
        assert f"{API_KEY_CONFIG}:{API_KEY_CONFIG}:ro" in run
        assert not any("api-key" in word and word != API_KEY_CONFIG and "ro" not in word for word in run[:-2])


def test_the_inventory_says_a_key_is_needed_and_never_holds_it(keyed_plan: Any) -> None:
    n = len(keyed_plan.nodes)
    inventory = build_inventory(
        keyed_plan, [f"10.0.0.{i + 1}" for i in range(n)], [f"10.1.0.{i + 1}" for i in range(n)]
    )
    hosts = inventory["all"]["hosts"]
    assert any(h["flashfleet_api_key_required"] for h in hosts.values())
    assert KEY not in json.dumps(inventory)
    # and a hand-written inventory or extra variable that carries it is refused before any host
    with pytest.raises(BringupInputError, match="API key"):
        validate(DEFAULT_PROJECT, "site.yml", inventory, {"x": KEY}, api_key=KEY)


def test_open_stacks_render_exactly_as_before(write_stack: WriteStack) -> None:
    sf = read_stack_file("mi355x-lowlat")
    from flashfleet.planning import parse_spec

    plan = resolve_spec("mi355x-lowlat", parse_spec("x", sf.spec_data), region=None, has_hf_token=False)
    for launch in (x for node in plan.launches_by_node().values() for x in node):
        assert "--config" not in launch.argv
        assert launch.api_key_file == ""


# --- the real SGLang parser reads the file as the role writes it ------------------------------------


@pytest.mark.parametrize("key", [KEY, "yes", "0x10", "a: b # c", "null", "ünï-'\"\\"])
def test_real_sglang_reads_the_key_from_the_config_file_the_role_writes(tmp_path: Path, key: str) -> None:
    if not ORACLE.exists():
        pytest.fail(f"the sglang oracle venv is missing ({ORACLE}); run scripts/setup.d/10-sglang-oracle.sh")
    config = tmp_path / "api-key.yaml"
    # roles/sglang_serve/tasks/secrets.yml: `api-key: {{ key | to_json }}`
    config.write_text(f"api-key: {json.dumps(key)}\n")
    config.chmod(0o600)
    probe = """
import argparse, json, sys
from sglang.srt.server_args import ServerArgs
from sglang.srt.utils.server_args_config_parser import ConfigArgumentMerger
p = argparse.ArgumentParser(prog="sglang serve"); ServerArgs.add_cli_args(p)
argv = ["--model-path", "zai-org/GLM-5.3-Flash", "--port", "30000", "--config", sys.argv[1]]
merged = ConfigArgumentMerger(p).merge_config_with_args(argv)
ns = p.parse_args(merged)
print(json.dumps({"api_key": ns.api_key, "port": ns.port}))
"""
    done = subprocess.run(
        [str(ORACLE), "-c", probe, str(config)], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got == {"api_key": key, "port": 30000}


# --- bench sends the header -------------------------------------------------------------------------


@pytest.fixture
def auth_server() -> Iterator[tuple[str, list[str | None]]]:
    seen: list[str | None] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization"))
            ok = self.path.startswith("/health") or self.headers.get("Authorization") == f"Bearer {KEY}"
            self.send_response(200 if ok else 401)
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", seen
    server.shutdown()


def test_bench_fetches_send_the_key_from_the_environment(
    auth_server: tuple[str, list[str | None]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, seen = auth_server
    monkeypatch.delenv("FLASHFLEET_API_KEY", raising=False)
    assert http_get(f"{url}/server_info", 5)[0] == 401
    monkeypatch.setenv("FLASHFLEET_API_KEY", KEY)
    assert http_get(f"{url}/server_info", 5)[0] == 200
    assert seen[-1] == f"Bearer {KEY}"
    # on a node: the fetch script reads OPENAI_API_KEY (the bench role's env file), not its argv
    env = {**os.environ, "OPENAI_API_KEY": KEY}
    done = subprocess.run(
        [sys.executable, "-c", FETCH_SCRIPT, json.dumps([f"{url}/server_info"])],
        capture_output=True, text=True, env=env, timeout=60, check=True,
    )  # fmt: skip
    assert json.loads(done.stdout.split("flashfleet-fetch:", 1)[1])[1] == 200


def test_local_bench_serving_gets_the_key_as_openai_api_key(tmp_path: Path) -> None:
    script = "import os, json; open('out.jsonl', 'w').write(json.dumps(os.environ.get('OPENAI_API_KEY')))"
    runner = LocalRunner(base_env={"PATH": os.environ["PATH"], "FLASHFLEET_API_KEY": KEY})
    done = runner(Invocation(argv=(sys.executable, "-c", script), output_name="out.jsonl"))
    assert json.loads(done.jsonl) == KEY
    assert KEY not in " ".join((sys.executable, "-c", script))


# --- the roles: the key only in no_log tasks and a root-only file -----------------------------------


def _tasks(path: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def walk(items: list[dict[str, Any]]) -> None:
        for t in items or []:
            out.append(t)
            for k in ("block", "rescue", "always"):
                walk(t.get(k, []))

    walk(yaml.safe_load(path.read_text()))
    return out


@pytest.mark.parametrize("role", ["sglang_serve", "verify", "bench"])
def test_every_task_that_touches_the_key_hides_its_output(role: str) -> None:
    touched = 0
    for path in sorted((ROOT / "roles" / role / "tasks").glob("*.yml")):
        for task in _tasks(path):
            body = json.dumps({k: v for k, v in task.items() if k not in ("block", "rescue", "always")})
            reads_key = (
                "ansible.builtin.env', " in body and "api_key_env)" in body
            ) or "_verify_headers" in body
            if reads_key and "ansible.builtin.assert" not in task:
                touched += 1
                assert task.get("no_log"), f"{path.name}: {task.get('name')} carries the key without no_log"
                if "ansible.builtin.copy" in task:
                    assert task["ansible.builtin.copy"]["mode"] == "0600"
                    assert task.get("diff") is False
    assert touched


def test_the_teardown_removes_the_key_file() -> None:
    defaults = yaml.safe_load((ROOT / "roles/sglang_serve/defaults/main.yml").read_text())
    assert API_KEY_CONFIG in defaults["sglang_serve_env_files_to_remove"]
