"""The stand-in SGLang server refuses what SGLang 0.5.23 refuses: its API-key decisions match the real
`decide_request_auth` (run in the sglang oracle venv), it reads `--config` the way the real
ConfigArgumentMerger does, through the container's mounts under the fake docker, and it exits as
`sglang serve` does on a flag its parser does not have or a value outside a flag's choices. Runs the stand-in
on the controller; no test host needed. Its HiCache tiers are checked in process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from flashfleet.planning import load_stack
from flashfleet.recipes import render
from flashfleet.recipes.matrix import matrix
from flashfleet.stack import DEFAULT_STACKS_DIR
from tests.serve.standin_sglang import StandinServer, StandinState, check_serve_argv, state_from_argv

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
ORACLE = Path(os.environ.get("FLASHFLEET_ORACLE_PYTHON", ROOT / ".venv-oracle" / "bin" / "python"))
MOUNTS_ENV = "FLASHFLEET_TEST_MOUNTS"  # how tests/serve/fake_docker.py tells it the -v mounts
CONFIG = "/etc/flashfleet/api-key.yaml"  # the path inside the container
KEY = 'sk-standin-Qw3 "q" #: yes'
PATHS = ["/health", "/health_generate", "/ready", "/metrics", "/v1/models", "/v1/chat/completions",
         "/server_info", "/healthz/../v1/models"]  # fmt: skip
HEADERS = [None, f"Bearer {KEY}", f"bearer {KEY}", "Bearer wrong", f"Basic {KEY}", "Bearer", f"Bearer{KEY}",
           f"Bearer  {KEY}", f"Bearer {KEY} "]  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(
    argv: list[str], mounts: list[list[str]] | None, extra_env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    env = {"PATH": os.environ["PATH"], **(extra_env or {})}
    if mounts is not None:
        env[MOUNTS_ENV] = json.dumps(mounts)
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "standin_sglang.py"), "--model-path", "zai-org/GLM-5.3-Flash",
         "--host", "127.0.0.1", "--port", str(port), *argv],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    # A deadline, not a count of tries: a refused connection returns at once, and 100 quick
    # tries (5 s) were shorter than a Python start on a loaded 2-core machine.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return proc, url
        try:
            urllib.request.urlopen(f"{url}/health", timeout=1).close()
            return proc, url
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise AssertionError("the stand-in did not start")


def status(url: str, path: str, header: str | None, method: str = "GET") -> int:
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    req = urllib.request.Request(url + path, method=method, data=body if method == "POST" else None)
    if header is not None:
        req.add_header("Authorization", header)
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return int(err.code)


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "api-key.yaml"
    path.write_text(f"api-key: {json.dumps(KEY)}\n")  # as roles/sglang_serve/tasks/secrets.yml writes it
    return path


@pytest.fixture
def keyed(key_file: Path) -> Iterator[str]:
    proc, url = start(["--config", CONFIG], [[str(key_file), CONFIG]])
    assert proc.poll() is None, proc.communicate()
    yield url
    proc.kill()
    proc.wait()


def test_auth_decisions_match_sglangs(keyed: str) -> None:
    if not ORACLE.exists():
        pytest.fail(f"the sglang oracle venv is missing ({ORACLE}); run scripts/setup.d/10-sglang-oracle.sh")
    cases = [(m, p, h) for m in ("GET", "POST") for p in PATHS for h in HEADERS]
    probe = """
import json, sys
from sglang.srt.utils.auth import AuthLevel, decide_request_auth
key, cases = json.loads(sys.argv[1])
print(json.dumps([decide_request_auth(method=m, path=p, authorization_header=h, api_key=key,
                  admin_api_key=None, auth_level=AuthLevel.NORMAL).allowed for m, p, h in cases]))
"""
    done = subprocess.run(
        [str(ORACLE), "-c", probe, json.dumps([KEY, cases])], capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    allowed = json.loads(done.stdout.strip().splitlines()[-1])
    got = {(m, p, h): status(keyed, p, h, m) != 401 for m, p, h in cases}
    assert got == dict(zip(map(tuple, cases), allowed, strict=True))
    assert status(keyed, "/v1/models", f"Bearer {KEY}") == 200


def test_a_config_file_the_container_was_not_given_stops_the_server(key_file: Path) -> None:
    proc, _ = start(["--config", CONFIG], [])  # the file exists on the host, but no -v mount
    _, err = proc.communicate(timeout=30)
    assert proc.returncode != 0
    assert f"Config file not found: {CONFIG}" in err
    # a directory in its place (what docker -v makes of a missing host path) stops it too
    proc, _ = start(["--config", CONFIG], [[str(key_file.parent), CONFIG]])
    _, err = proc.communicate(timeout=30)
    assert proc.returncode != 0


@pytest.mark.parametrize(
    ("text", "why"),
    [("api-key: sk-plain\n", "quoted string values only"), ("api-key: \"open\n", "double-quoted"),
     ("- api-key\n", "key: value"), ("api-key:\"x\"\n", "key: value")],
)  # fmt: skip
def test_what_the_stand_in_cannot_read_stops_it_without_echoing_the_key(
    tmp_path: Path, text: str, why: str
) -> None:
    path = tmp_path / "api-key.yaml"
    path.write_text(text)
    proc, _ = start(["--config", CONFIG], [[str(path), CONFIG]])
    _, err = proc.communicate(timeout=30)
    assert proc.returncode != 0
    assert why in err
    assert "sk-plain" not in err
    assert "open" not in err


def test_the_command_line_wins_over_the_config_file(key_file: Path) -> None:
    proc, url = start(["--api-key", "sk-argv", "--config", CONFIG], [[str(key_file), CONFIG]])
    try:
        assert status(url, "/v1/models", "Bearer sk-argv") == 200
        assert status(url, "/v1/models", f"Bearer {KEY}") == 401
    finally:
        proc.kill()
        proc.wait()


def test_without_a_key_the_api_is_open() -> None:
    proc, url = start([], None)
    try:
        assert status(url, "/v1/models", None) == 200
    finally:
        proc.kill()
        proc.wait()


def test_metrics_count_what_was_served_and_only_with_enable_metrics() -> None:
    proc, url = start(["--enable-metrics", "--served-model-name", "glm"], None)
    plain, plain_url = start([], None)
    try:
        body = json.dumps({"text": "one two three", "sampling_params": {"max_new_tokens": 2}}).encode()
        with urllib.request.urlopen(urllib.request.Request(f"{url}/generate", data=body), timeout=5) as resp:
            assert json.load(resp) == {
                "text": "w0 w1",
                "meta_info": {"prompt_tokens": 3, "completion_tokens": 2},
            }
        with urllib.request.urlopen(f"{url}/metrics", timeout=5) as resp:
            metrics = resp.read().decode()
        assert 'sglang:prompt_tokens_total{model_name="glm",engine_type="unified"} 3.0' in metrics
        assert 'sglang:generation_tokens_total{model_name="glm",engine_type="unified"} 2.0' in metrics
        assert status(plain_url, "/metrics", None) == 404
    finally:
        for p in (proc, plain):
            p.kill()
            p.wait()


@pytest.mark.parametrize("reads", [True, False])
def test_the_l3_tier_is_read_only_for_a_prefix_flushed_from_the_device_tier(reads: bool) -> None:
    state = StandinState(l3_reads=reads)
    prefix = "w0 w1 w2 w3"

    def counter(name: str) -> float:
        return state.counters.get(f"sglang:{name}_tokens_total", 0.0)

    state.serve_prefix(prefix)
    state.serve_prefix(prefix)  # still in the device tier: the store is not asked
    assert (counter("backuped"), counter("storage_prefetch_hit")) == (4.0, 0.0)
    state.flush()
    state.serve_prefix(prefix)  # only the store holds it now; it is not written twice
    assert (counter("backuped"), counter("storage_prefetch_hit")) == (4.0, 4.0 if reads else 0.0)
    assert ('cache_source="storage"' in state.metrics_text()) is reads


def post(url: str, body: dict[str, object]) -> tuple[int, str]:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return int(resp.status), resp.read().decode()
    except urllib.error.HTTPError as err:
        return int(err.code), err.read().decode()


CHAT = {"model": "m", "messages": [{"role": "user", "content": "one two three"}], "max_tokens": 3}
NO_ROOM = "Invalid request: Disaggregated request received without bootstrap room id."


@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_a_pd_server_refuses_a_request_without_a_bootstrap_room(mode: str) -> None:
    state = StandinState(disaggregation=mode, bootstrap_port=0)
    with StandinServer(state) as server:
        code, body = post(f"{server.url}/v1/chat/completions", CHAT)
        assert (code, json.loads(body)["message"], json.loads(body)["type"]) == (
            400,
            NO_ROOM,
            "BadRequestError",
        )
        # streaming: SGLang has sent 200 already; the error comes as one chunk, then [DONE]
        code, body = post(f"{server.url}/v1/chat/completions", {**CHAT, "stream": True})
        events = [line.removeprefix("data: ") for line in body.splitlines() if line.startswith("data: ")]
        assert code == 200
        assert events[-1] == "[DONE]"
        assert json.loads(events[0])["error"] == {"object": "error", "message": NO_ROOM, "type": "BAD_REQUEST",
                                                  "param": None, "code": 400}  # fmt: skip
    assert [s.error for s in state.served_log] == [NO_ROOM, NO_ROOM]
    assert "sglang:num_requests_total" not in state.counters


def test_a_pd_pair_shares_one_request_through_its_bootstrap_room() -> None:
    """What the router does, by hand: the same request with the same room to both servers."""
    prefill = StandinState(disaggregation="prefill", bootstrap_port=0, ttft_s=0.2)
    decode = StandinState(disaggregation="decode")
    with StandinServer(prefill) as p, StandinServer(decode) as d:
        body = {
            **CHAT,
            "bootstrap_host": "127.0.0.1",
            "bootstrap_port": prefill.bootstrap_port,
            "bootstrap_room": 7,
        }
        got: dict[str, tuple[int, str]] = {}
        sent = threading.Thread(target=lambda: got.update(decode=post(f"{d.url}/v1/chat/completions", body)))
        sent.start()  # the decode waits for the prefill's KV
        time.sleep(0.05)
        got["prefill"] = post(f"{p.url}/v1/chat/completions", body)
        sent.join(10)
    assert json.loads(got["prefill"][1])["choices"][0]["message"]["content"] == "w0"  # its first token only
    assert json.loads(got["decode"][1])["choices"][0]["message"]["content"] == "w0 w1 w2"
    assert [s.bootstrap_room for s in prefill.served_log + decode.served_log] == [7, 7]
    assert prefill.counters["sglang:prompt_tokens_total"] == decode.served_log[0].prompt_tokens
    assert decode.counters["sglang:generation_tokens_total"] == 3
    assert "sglang:prompt_tokens_total" not in decode.counters


def test_the_decode_says_which_versions_of_the_pair_served_it() -> None:
    """The prefill's version comes to the decode with the room's KV: its answer names both, the
    way a test under an update tells a mixed pair (which a real decode would serve as garbage)."""
    prefill = StandinState(disaggregation="prefill", bootstrap_port=0, ttft_s=0.1, version="new")
    decode = StandinState(disaggregation="decode", version="old")
    with StandinServer(prefill) as p, StandinServer(decode) as d:
        body = {**CHAT, "bootstrap_host": "127.0.0.1", "bootstrap_port": prefill.bootstrap_port,
                "bootstrap_room": 5}  # fmt: skip
        got: dict[str, tuple[int, str]] = {}
        sent = threading.Thread(target=lambda: got.update(decode=post(f"{d.url}/v1/chat/completions", body)))
        sent.start()
        time.sleep(0.05)
        post(f"{p.url}/v1/chat/completions", body)
        sent.join(10)
    assert json.loads(got["decode"][1])["system_fingerprint"] == "prefill=new decode=old"


def _pd_request(prefill_url: str, decode_url: str, bootstrap_port: int, room: int) -> tuple[int, str]:
    """One request through a PD pair, as the router sends it: the decode's answer."""
    body = {**CHAT, "bootstrap_host": "127.0.0.1", "bootstrap_port": bootstrap_port, "bootstrap_room": room}
    got: dict[str, tuple[int, str]] = {}
    sent = threading.Thread(target=lambda: got.update(decode=post(f"{decode_url}/v1/chat/completions", body)))
    sent.start()
    time.sleep(0.05)
    post(f"{prefill_url}/v1/chat/completions", body)
    sent.join(10)
    return got["decode"]


def test_a_decode_fails_the_rooms_of_a_prefill_restarted_behind_its_address_until_it_restarts() -> None:
    """The decode keeps the prefill instance it bootstrapped with: once another instance answers
    at that bootstrap address (a restart), its rooms fail there; a decode started anew serves."""
    prefill = StandinState(disaggregation="prefill", bootstrap_port=0, ttft_s=0.05)
    decode, fresh = StandinState(disaggregation="decode"), StandinState(disaggregation="decode")
    with StandinServer(prefill) as p, StandinServer(decode) as d, StandinServer(fresh) as f:
        before = _pd_request(p.url, d.url, prefill.bootstrap_port, 1)
        prefill.instance = "restarted"  # a new process behind the same address
        stale = _pd_request(p.url, d.url, prefill.bootstrap_port, 2)
        again = _pd_request(p.url, d.url, prefill.bootstrap_port, 3)
        restarted = _pd_request(p.url, f.url, prefill.bootstrap_port, 4)
    assert before[0] == 200
    assert [stale[0], again[0]] == [500, 500]  # not once: every room until the decode restarts
    assert "is instance restarted, not " in json.loads(stale[1])["message"]
    assert restarted[0] == 200
    assert json.loads(restarted[1])["choices"][0]["message"]["content"] == "w0 w1 w2"


def test_a_pd_pairs_version_is_its_options_not_its_role_or_place() -> None:
    """A prefill and a decode of one recipe share a version; an option changes it for both."""
    words = ["sglang", "serve", "--model-path", "m", "--tp-size", "8", "--enable-metrics"]
    prefill = [*words, "--disaggregation-mode", "prefill", "--disaggregation-bootstrap-port", "8998",
                       "--host", "0.0.0.0", "--port", "31000"]  # fmt: skip
    decode = [*words, "--base-gpu-id", "8", "--disaggregation-mode", "decode", "--host", "0.0.0.0",
                      "--port", "32000"]  # fmt: skip
    assert state_from_argv(prefill).version == state_from_argv(decode).version
    changed = [*decode, "--max-running-requests", "32"]
    assert state_from_argv(changed).version != state_from_argv(decode).version


def test_a_decode_whose_room_never_reaches_the_prefill_fails() -> None:
    prefill = StandinState(disaggregation="prefill", bootstrap_port=0)
    decode = StandinState(disaggregation="decode", kv_wait_s=0.3)
    with StandinServer(prefill), StandinServer(decode) as d:
        body = {
            **CHAT,
            "bootstrap_host": "127.0.0.1",
            "bootstrap_port": prefill.bootstrap_port,
            "bootstrap_room": 9,
        }
        code, text = post(f"{d.url}/v1/chat/completions", body)
    assert code == 500
    assert json.loads(text)["type"] == "500"
    assert "Decode handshake failed for bootstrap_room 9" in json.loads(text)["message"]
    assert "sglang:generation_tokens_total" not in decode.counters


def test_the_container_prefill_serves_its_bootstrap_port() -> None:
    bootstrap = free_port()
    proc, url = start(
        ["--disaggregation-mode", "prefill", "--disaggregation-bootstrap-port", str(bootstrap)], None
    )
    try:
        body = {**CHAT, "bootstrap_host": "127.0.0.1", "bootstrap_port": bootstrap, "bootstrap_room": 3}
        assert post(f"{url}/v1/chat/completions", body)[0] == 200
        with urllib.request.urlopen(f"http://127.0.0.1:{bootstrap}/kv/3", timeout=5) as resp:
            assert json.load(resp)["prompt_tokens"] > 0  # the room is held once prefilled
        with urllib.request.urlopen(f"{url}/server_info", timeout=5) as resp:
            info = json.load(resp)
        assert (info["disaggregation_mode"], info["model_path"]) == ("prefill", "zai-org/GLM-5.3-Flash")
    finally:
        proc.kill()
        proc.wait()


def _boot(tmp_path: Path, mounts: list[list[str]] | None, cache: str) -> tuple[float, list[str], dict]:
    """One container start: (seconds to /health 200, its log lines, /server_info's startup_time)."""
    knobs = tmp_path / "knobs.json"
    knobs.write_text(json.dumps({"load_seconds": 0.3, "jit_seconds": 1.5}))
    began = time.monotonic()
    proc, url = start([], mounts, {"FLASHFLEET_TEST_KNOBS": str(knobs), "TVM_FFI_CACHE_DIR": cache})
    took = time.monotonic() - began
    try:
        with urllib.request.urlopen(f"{url}/server_info", timeout=5) as resp:
            startup = json.load(resp)["startup_time"]
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    return took, out.splitlines(), startup


def test_a_kernel_cache_under_a_mount_is_warm_at_the_next_start(tmp_path: Path) -> None:
    from flashfleet.bringup.startup_timings import parse_startup

    volume = tmp_path / "volume"
    volume.mkdir()
    mounts = [[str(volume), "/root/.cache/huggingface"]]
    cache = "/root/.cache/huggingface/.flashfleet-jit/abc/tvm-ffi"
    cold, lines, startup = _boot(tmp_path, mounts, cache)
    assert cold >= 1.8  # the load and the JIT builds before /health answers
    timings = parse_startup(lines)
    assert timings is not None, lines
    assert timings.load_s == pytest.approx(0.3)
    assert timings.jit_s >= 1.4
    assert startup["load_weight"] == pytest.approx(0.3)
    assert startup["scheduler_e2e"] >= 1.8
    assert any(line.endswith("The server is fired up and ready to roll!") for line in lines)
    assert (volume / ".flashfleet-jit/abc/tvm-ffi/standin-kernels.so").is_file()  # on the host's volume
    warm, lines, _ = _boot(tmp_path, mounts, cache)
    timings = parse_startup(lines)
    assert timings is not None
    assert timings.jit_s < 0.5
    assert warm < cold - 1.0
    # a cache folder no mount brings in is the container's own: built again at every start
    for _ in range(2):
        _, lines, _ = _boot(tmp_path, mounts, "/root/.cache/tvm-ffi")
        timings = parse_startup(lines)
        assert timings is not None
        assert timings.jit_s >= 1.4


def loader_argv(port: str, ports: str = "[31600,31601]") -> list[str]:
    flag = "--remote-instance-weight-loader-"
    return ["--tp-size", "2", "--load-format", "remote_instance", f"{flag}seed-instance-ip", "127.0.0.1",
            f"{flag}seed-instance-service-port", port, f"{flag}send-weights-group-ports", ports,
            f"{flag}backend", "nccl"]  # fmt: skip


def test_a_seed_sends_to_one_loader_at_a_time_and_needs_a_port_per_rank() -> None:
    from tests.serve.standin_sglang import SEED_PATHS, seed_answer

    seed = StandinState(tp_size=2)
    first = {"ports": "31600,31601", "group_name": "a"}
    assert seed_answer(seed, SEED_PATHS[0], first)[0] == 200
    code, answer = seed_answer(seed, SEED_PATHS[0], {**first, "group_name": "b"})
    assert (code, answer["message"]) == (400, "already sending weights to a")
    assert seed_answer(seed, SEED_PATHS[1], {"group_name": "b"})[0] == 400
    assert seed_answer(seed, SEED_PATHS[1], first)[0] == 200  # sent: the seed is free again
    assert seed_answer(seed, SEED_PATHS[0], {**first, "group_name": "b"})[0] == 200
    code, answer = seed_answer(StandinState(tp_size=8), SEED_PATHS[0], first)
    assert (code, answer["message"]) == (400, "Expected 8 ports, but got 2 ports.")


def test_a_loader_loads_from_its_seed_and_stops_when_the_seed_refuses() -> None:
    seed, seed_url = start(["--tp-size", "2"], None)
    try:
        port = seed_url.rsplit(":", 1)[1]
        loader, url = start(loader_argv(port), None)
        try:
            assert status(url, "/v1/models", None) == 200
        finally:
            loader.kill()
            out = loader.communicate()[0]
        assert f"Loaded weights from remote instance http://127.0.0.1:{port}" in out
        wrong, _ = start(loader_argv(port, "[31600]"), None)  # a port short: the seed refuses
        out = wrong.communicate(timeout=30)[0]
        assert wrong.returncode == 1
        assert "Failed to load weights from remote instance" in out
        assert "Expected 2 ports" in out
    finally:
        seed.kill()
        seed.wait()


TE = "--remote-instance-weight-loader-"


def te_loader_argv(port: str) -> list[str]:
    """A loader over the TransferEngine, as flashfleet renders it: no send group ports."""
    return ["--tp-size", "2", "--load-format", "remote_instance", f"{TE}seed-instance-ip", "127.0.0.1",
            f"{TE}seed-instance-service-port", port, f"{TE}backend", "transfer_engine"]  # fmt: skip


def answered_while(loaders: list[list[str]], seed_url: str, knobs: Path) -> tuple[list[float], list[str]]:
    """(each chat request's seconds to the seed, sent one after another until every loader is
    up, the loaders' output): the loaders start side by side."""
    procs: list[subprocess.Popen[str]] = []

    def run(argv: list[str]) -> None:
        procs.append(start(argv, None, {"FLASHFLEET_TEST_KNOBS": str(knobs)})[0])

    threads = [threading.Thread(target=run, args=(argv,)) for argv in loaders]
    for t in threads:
        t.start()
    took = []
    while any(t.is_alive() for t in threads):
        begin = time.monotonic()
        assert status(seed_url, "/v1/chat/completions", None, "POST") == 200
        took.append(time.monotonic() - begin)
        time.sleep(0.05)
    outs = []
    for proc in procs:
        proc.kill()
        outs.append(proc.communicate()[0])
    return took, outs


def test_a_transfer_engine_seed_serves_requests_while_several_loaders_read_from_it(tmp_path: Path) -> None:
    knobs = tmp_path / "knobs.json"
    knobs.write_text(json.dumps({"peer_load_seconds": 3}))
    env = {"FLASHFLEET_TEST_KNOBS": str(knobs)}
    seed_argv = ["--tp-size", "2", f"{TE}start-seed-via-transfer-engine", "--engine-info-bootstrap-port",
                 str(free_port())]  # fmt: skip
    seed, seed_url = start(seed_argv, None, env)
    try:
        port = seed_url.rsplit(":", 1)[1]
        took, outs = answered_while([te_loader_argv(port), te_loader_argv(port)], seed_url, knobs)
        for out in outs:  # both read at once from the one seed, 3 s on the wire each
            assert f"Loaded weights from remote instance http://127.0.0.1:{port}" in out, out
            [elapsed] = [float(line.split("elapsed=")[1].split()[0]) for line in out.splitlines()
                         if "Load weight end." in line]  # fmt: skip
            assert elapsed >= 2.9
        assert len(took) >= 10  # answered all along the reads, none held back
        assert max(took) < 1.0, took
        # no seed engine there: the loader fails as SGLang's does, and ends
        plain, plain_url = start([], None, env)
        try:
            failed, _ = start(te_loader_argv(plain_url.rsplit(":", 1)[1]), None, env)
            out = failed.communicate(timeout=30)[0]
            assert failed.returncode == 1
            assert "Failed to load weights from remote instance via transfer engine" in out
        finally:
            plain.kill()
            plain.wait()
    finally:
        seed.kill()
        seed.wait()


def test_an_nccl_seed_holds_its_requests_while_it_sends(tmp_path: Path) -> None:
    knobs = tmp_path / "knobs.json"
    knobs.write_text(json.dumps({"peer_load_seconds": 3}))
    seed, seed_url = start(["--tp-size", "2"], None, {"FLASHFLEET_TEST_KNOBS": str(knobs)})
    try:
        took, outs = answered_while([loader_argv(seed_url.rsplit(":", 1)[1])], seed_url, knobs)
        assert "Loaded weights from remote instance" in outs[0]
        assert max(took) > 1.0, took  # one waited for the send: the seed's scheduler sent the weights
    finally:
        seed.kill()
        seed.wait()


# What `sglang serve` 0.5.23 refuses before it loads anything: argparse's one error line, exit 2.
# The choices are sglang's own (srt/arg_groups/fields/model.py, kv_cache_dtype).
KV_CHOICES = "'auto', 'fp8_e5m2', 'fp8_e4m3', 'mxfp8', 'bf16', 'bfloat16', 'nvfp4', 'fp4_mx_block16'"
REFUSALS = [
    (["--kv-cache-dtype", "fp9"], f"argument --kv-cache-dtype: invalid choice: 'fp9' (choose from {KV_CHOICES})"),
    (["--no-such-flag", "1"], "unrecognized arguments: --no-such-flag 1"),
    (["--disaggregation-mode", "both"], "argument --disaggregation-mode: invalid choice: 'both' "
                                        "(choose from 'null', 'prefill', 'decode')"),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "error"), REFUSALS, ids=["kv-cache-dtype", "unknown-flag", "pd-mode"])
def test_the_container_exits_as_sglang_serve_does_on_what_its_parser_refuses(
    argv: list[str], error: str
) -> None:
    proc, _ = start(argv, None)
    try:
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 2, err
    assert err.splitlines()[0].startswith("usage: sglang serve [-h]"), err
    assert err.splitlines()[-1] == f"sglang serve: error: {error}"


def test_the_container_argv_is_read_as_sglang_serve_reads_it() -> None:
    """As the image runs it (`sglang serve ...`, or `serve ...` after the image's `sglang` script):
    both refusals there, the first one the parser meets reported; the model as a first bare word
    and `--model-type` taken out before parsing, as sglang/cli/serve.py does."""
    for prefix in (["sglang", "serve"], ["serve"]):
        bad = [*prefix, "--model-path", "m", "--no-such-flag", "1", "--kv-cache-dtype", "fp9"]
        with pytest.raises(SystemExit) as refused:
            state_from_argv(bad)
        assert refused.value.code == 2
        state = state_from_argv([*prefix, "zai-org/GLM-5.3-Flash", "--model-type", "llm", "--tp-size", "8"])
        assert (state.model_path, state.tp_size) == ("zai-org/GLM-5.3-Flash", 8)
    # argparse's abbreviations, as there: a prefix of one flag is taken, of several refused
    state_from_argv(["--model-path", "m", "--served-model", "glm"])  # --served-model-name
    with pytest.raises(SystemExit) as refused:
        state_from_argv(["--model-path", "m", "--enable"])
    assert refused.value.code == 2


def test_every_server_a_recipe_starts_passes_the_stand_ins_parser() -> None:
    """What the serving tests start in the stand-in's place: the `sglang serve` argv of every
    shipped stack and of every cell of the recipe matrix with its defaults."""
    recipes = [
        load_stack(p.name[len("Pulumi.") : -len(".yaml")]).recipe
        for p in DEFAULT_STACKS_DIR.glob("Pulumi.*.yaml")
    ]
    for cell in matrix(with_choices=False):
        if cell.disabled_reason is None:
            recipes.append(render(cell.hardware, cell.strategy, cell.topology))
    servers = [list(p.argv) for r in recipes for p in r.processes if list(p.argv[:2]) == ["sglang", "serve"]]
    assert len(servers) > len(recipes)  # PD and encoder cells start more than one
    for argv in servers:
        assert check_serve_argv(argv) == argv[2:]
