"""A stand-in SGLang server, standard library only: what the tests, the examples and
the stand-in images run in place of `sglang serve`.

It speaks what flashfleet and bench_serving call: GET /health, /health_generate, /v1/models,
/server_info (one internal state per ready DP rank), /model_info, /metrics (sglang's Prometheus
counter names, counted from what it really served); POST /generate (SGLang native: cumulative
"text" + meta_info), /v1/chat/completions and /v1/completions (OpenAI, SSE deltas with the usage
in the last chunk when asked to stream), /flush_cache. The first output token comes after
``ttft_s``, the next ones every ``itl_s``. Every request is recorded so tests can check what was
really sent.

Two entries, one server:
- in process (``StandinServer(StandinState(...))`` on 127.0.0.1): each output token is the word
  "wN"; switches make it misbehave on purpose: empty answers, failed requests, ranks that never
  come up, an L3 tier that takes writes but never returns a hit. ``disaggregation`` makes it
  one server of a PD pair as the real router drives it (below). ``prefill``/``decode`` peers
  make it a PD router: each generation's prompt tokens are counted on the prefill peer and its
  output tokens on the decode peer, as the two servers of a real pair would count them; a router
  whose prefill peer is None lets decode do everything (the silent fallback).
- a PD pair under the real router (``--disaggregation-mode prefill|decode``): the router sends
  the same request to a prefill and a decode server with ``bootstrap_host``, ``bootstrap_port``
  (the prefill's) and ``bootstrap_room`` added. As in SGLang 0.5.23 (scheduler.py,
  "Disaggregated request received without bootstrap room id") either server refuses a request
  without a room with 400 (an error chunk after 200 when streaming). The prefill counts the
  prompt tokens, answers its one token and holds the room's "KV" on its bootstrap server
  (``--disaggregation-bootstrap-port``, default 8998); the decode fetches that room from
  ``bootstrap_host:bootstrap_port`` (waiting for the prefill, as a real decode waits for the
  transfer), then streams and counts the output tokens: a room that never arrives fails it.
  A decode remembers the prefill instance it first bootstrapped with at each bootstrap address
  (the prefill's bootstrap server answers a per-process ``instance`` id with each room, as the
  not-yet-released upstream fix for a prefill replaced behind a stable address publishes one);
  as SGLang 0.5.23's decode keeps that peer's cached connection and rank info, a room handed over
  by a restarted prefill at the same address fails on it until the decode itself restarts (the
  real one waits out its KV waiting timeout first; the stand-in fails at once).
- ``python3 standin_sglang.py ARGV...`` in a container: started with the container's argv and
  environment, it answers the way the real server's flags say, and chat answers what the verify
  checks ask (a sum, a greeting, a tool call, the colour of an image). Knobs, read per request,
  live in /etc/flashfleet-test/standin.json: load_seconds (everything answers 503 this long after
  start: weights loading); jit_seconds (this much more on a cold kernel cache: JIT builds);
  image_mode ("pixels" reads the colour from the image, "text-only" ignores it). While it
  starts it prints the boot lines SGLang 0.5.23 prints (srt/model_executor/model_runner.py
  "Load weight end.", srt/model_executor/model_runner_components/cuda_graph_setup.py "Capture
  ... CUDA graph end.", srt/entrypoints/engine.py "Engine startup timings (s)",
  srt/entrypoints/http_server.py "The server is fired up and ready to roll!"), and /server_info reports the
  same `startup_time`. Its kernel cache is $TVM_FFI_CACHE_DIR (SGLang's jit_kernel modules),
  warm once a boot filled it: a folder the container keeps only under a mount. Like SGLang 0.5.23 it reads `--config FILE.yaml` (flags as top-level keys; the
  command line wins) and exits when the file is missing, not YAML or unreadable; with an API key
  (`--api-key` or `api-key:` there) every path but /health*, /ready* and /metrics* answers 401
  unless the request carries `Authorization: Bearer <key>` (srt/utils/auth.py,
  decide_request_auth, NORMAL level). It is no router: where a router runs, the tests run the
  real one (tests/serve/real_router.py, or the router in the stand-in image). With
  `--hicache-storage-backend mooncake` it joins the real Mooncake store as its L3 tier. With
`--load-format remote_instance` it takes its weights from the seed instance its flags name, as
SGLang's loader does for its backend, instead of its own load_seconds (knob peer_load_seconds: the
weights on the wire): over NCCL it asks the seed for a send group, then the send, and the seed
sends to one loader at a time, its generations waiting meanwhile (the real seed's scheduler does
the send); over the TransferEngine it asks the seed's HTTP port for each TP rank's session, which
a seed started with `--remote-instance-weight-loader-start-seed-via-transfer-engine` publishes on
its engine-info bootstrap server (`--engine-info-bootstrap-port`, bound as SGLang binds it), then
reads each rank's weights from the seed's "engine" port itself, several loaders at once, while
the seed keeps answering requests.
Before anything else it parses its argv as `sglang serve` 0.5.23 does, against the shipped flag list
(flashfleet/catalog/sglang_flags.txt, copied beside it on a test host and in a stand-in image) and
the choices of a few flags read from that release: an unknown flag or a choice outside the list
exits 2 with argparse's usage and error line, as there.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import signal
import socket
import socketserver
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

MODEL = "glm-5.3-flash-standin"
GENERATION_PATHS = ("/generate", "/v1/chat/completions", "/v1/completions")
OPEN_PATHS = ("/health", "/ready", "/metrics")  # SGLang lets these through without a key
KNOBS = "/etc/flashfleet-test/standin.json"
KNOBS_ENV = "FLASHFLEET_TEST_KNOBS"  # another knobs file (the stand-in's own tests)
# Set by tests/serve/fake_docker.py (no mount namespace; benchmarks/bringup.py uses it): the
# container's bind mounts as [[host path, container path]].
MOUNTS_ENV = "FLASHFLEET_TEST_MOUNTS"
COUNTERS = ("sglang:prompt_tokens_total", "sglang:generation_tokens_total", "sglang:num_requests_total",
            "sglang:backuped_tokens_total", "sglang:storage_prefetch_hit_tokens_total")  # fmt: skip
RUNNING = "sglang:num_running_reqs"  # a gauge (sglang's SchedulerMetricsCollector)
STORAGE_CACHED = 'sglang:cached_tokens_total{cache_source="storage"}'
DEVICE_CACHED = 'sglang:cached_tokens_total{cache_source="device"}'  # a prompt served again
COLOURS = {"red": (255, 0, 0), "green": (0, 255, 0), "blue": (0, 0, 255), "yellow": (255, 255, 0),
           "black": (0, 0, 0), "white": (255, 255, 255), "orange": (255, 128, 0), "purple": (128, 0, 128)}  # fmt: skip


class Store(Protocol):
    """The part of Mooncake's MooncakeDistributedStore the L3 tier uses."""

    def is_exist(self, key: str) -> int: ...
    def get(self, key: str) -> bytes: ...
    def put(self, key: str, value: bytes) -> int: ...


class MemoryStore:
    """An L3 store in this process, for the in-process server."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    def is_exist(self, key: str) -> int:
        return int(key in self.data)

    def get(self, key: str) -> bytes:
        return self.data.get(key, b"")

    def put(self, key: str, value: bytes) -> int:
        self.data[key] = value
        return 0


@dataclass(frozen=True)
class Served:
    """One generation a server answered: what a test reads to see which worker got which request."""

    path: str
    prompt: str
    prompt_tokens: int
    output_tokens: int
    bootstrap_room: int | None = None
    error: str | None = None  # the refusal or failure it answered instead


@dataclass
class StandinState:
    ttft_s: float = 0.02
    itl_s: float = 0.002
    fail_generation: bool = False  # answer every generation request with HTTP 500
    fail_after: int | None = None  # answer generation requests after the first N with HTTP 500
    zero_tokens: bool = False  # answer 200 with an empty completion (0 output tokens)
    healthy: bool = True  # /health answers 200
    # Seconds after start before a generation is answered; /health answers 200 all along (a
    # server whose first prefill is still initializing, as a router in front of it reports it).
    serves_after_s: float = 0.0
    dp_size: int = 1
    tp_size: int = 1  # --tp-size: a loader's send group needs one port per rank
    sending_to: str | None = None  # a seed's loader group being sent to (one at a time)
    nccl_sending: bool = False  # an NCCL seed is sending: its generations wait (its scheduler sends)
    transfer_engine: TransferEngineSeed | None = None  # a TransferEngine seed's sessions
    dp_ready: int = 1  # ranks that report an internal state in /server_info
    l3_reads: bool = True  # a prefix the L3 tier holds is read back (storage hits)
    prefill: StandinState | None = None  # PD router: where prompt tokens are counted
    decode: StandinState | None = None  # PD router: where output tokens are counted
    # What the container's argv says (the defaults are the in-process server's).
    model: str = MODEL  # --served-model-name, else --model-path
    api_key: str | None = None  # --api-key
    metrics: bool = True  # --enable-metrics
    models_route: bool = True  # /v1/models (not with --encoder-only)
    reasoning_parser: bool = False  # --reasoning-parser: reasoning_content apart from content
    tool_call_parser: bool = False  # --tool-call-parser: tools answered with a tool call
    answers: bool = False  # chat answers the question (the verify checks) instead of "wN" tokens
    knobs_path: str | None = None  # JSON knobs read per request (load_seconds, image_mode)
    l3: Store | None = field(default_factory=MemoryStore)  # HiCache's storage tier; None: no L3
    model_path: str = MODEL  # --model-path (what /server_info and /model_info report)
    disaggregation: str | None = None  # --disaggregation-mode: "prefill" or "decode"
    bootstrap_port: int = 8998  # prefill: its bootstrap server's port (0: a free one, in process)
    kv_wait_s: float = 10.0  # decode: how long a room's KV may take to arrive from the prefill
    # What a PD pair must share (layout_version): None in process. The prefill hands it over with
    # the room's KV; the decode stamps both in its answer's system_fingerprint.
    version: str | None = None
    kv: dict[int, int] = field(default_factory=dict)  # prefill: bootstrap_room -> prompt tokens
    # prefill: this process's id, new at every start; decode: bootstrap address -> the id of the
    # prefill instance it first bootstrapped with there (kept for the life of the process)
    instance: str = field(default_factory=lambda: os.urandom(8).hex())
    peers: dict[str, str] = field(default_factory=dict)
    served_log: list[Served] = field(default_factory=list)  # every generation answered, in order
    started: float = field(default_factory=time.monotonic)
    jit_s: float = 0.0  # the JIT builds of this boot (a cold kernel cache), after the load
    booted: threading.Event | None = None  # the container's boot lines are all printed
    startup_time: dict[str, Any] | None = None  # what /server_info reports, once booted
    counters: dict[str, float] = field(default_factory=dict)
    device: set[str] = field(default_factory=set)  # prefixes in the device and host tiers
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def knobs(self) -> dict[str, Any]:
        if self.knobs_path is None:
            return {}
        try:
            with open(self.knobs_path) as f:
                return dict(json.load(f))
        except OSError:
            return {}

    def loaded(self) -> bool:
        if self.booted is not None and not self.booted.is_set():
            return False
        return time.monotonic() - self.started >= float(self.knobs().get("load_seconds", 0)) + self.jit_s

    def count(self, name: str, value: float) -> None:
        with self.lock:
            self.counters[name] = self.counters.get(name, 0.0) + value

    def log(self, served: Served) -> None:
        with self.lock:
            self.served_log.append(served)

    def served(self, prompt: str, output_tokens: int) -> None:
        """Count one finished generation the way the servers behind this one would."""
        prompt_tokens = tokens_of(prompt)
        if self.disaggregation == "prefill":  # no peers: the prefill of a real pair
            for metric, value in (("sglang:prompt_tokens_total", prompt_tokens),
                                  ("sglang:generation_tokens_total", output_tokens),
                                  ("sglang:num_requests_total", 1)):  # fmt: skip
                self.count(metric, value)
            self.serve_prefix(prompt)
            return
        if self.disaggregation == "decode":  # the prompt was prefilled (and counted) elsewhere
            self.count("sglang:generation_tokens_total", output_tokens)
            self.count("sglang:num_requests_total", 1)
            return
        decode = self.decode or self
        prefill = self.prefill or decode  # no prefill peer: decode prefills too (the silent fallback)
        for server, metric, value in (
            (prefill, "sglang:prompt_tokens_total", prompt_tokens),
            (decode, "sglang:generation_tokens_total", output_tokens),
            (prefill, "sglang:num_requests_total", 1),
        ):
            server.count(metric, value)
        if decode is not prefill:
            decode.count("sglang:num_requests_total", 1)
        self.serve_prefix(prompt)

    def serve_prefix(self, prompt: str) -> None:
        """HiCache's tiers as far as its counters show them: a prefix served once sits in the
        device tier (emptied by /flush_cache) and is written back to the L3 store once; a prefix
        missing from the device tier is read back from the store when the store holds it (and
        reads work). Without a storage tier nothing is written or read."""
        key = "standin-prefix-" + hashlib.sha256(prompt.encode()).hexdigest()
        with self.lock:
            cached = key in self.device
            self.device.add(key)
        if cached:  # the whole prompt's prefix is in the device tier: its tokens are cache hits
            self.count(DEVICE_CACHED, tokens_of(prompt))
        if cached or self.l3 is None:
            return
        if self.l3.is_exist(key) == 1:
            if self.l3_reads and self.l3.get(key) == prompt.encode():  # read back, bytes checked
                self.count("sglang:storage_prefetch_hit_tokens_total", tokens_of(prompt))
                self.count(STORAGE_CACHED, tokens_of(prompt))
        elif self.l3.put(key, prompt.encode()) == 0:
            self.count("sglang:backuped_tokens_total", tokens_of(prompt))

    def flush(self) -> None:
        with self.lock:
            self.device.clear()

    def metrics_text(self) -> str:
        with self.lock:
            counters = dict(self.counters)
        lines = []
        for name in COUNTERS:  # every counter exists from the start, as prometheus_client exports them
            lines += [f"# HELP {name} stand-in", f"# TYPE {name} counter",
                      f'{name}{{model_name="{self.model}",engine_type="unified"}} {counters.get(name, 0.0)}']  # fmt: skip
        lines += [f"# HELP {RUNNING} stand-in", f"# TYPE {RUNNING} gauge",
                  f'{RUNNING}{{model_name="{self.model}",engine_type="unified"}} {counters.get(RUNNING, 0.0)}']  # fmt: skip
        storage = counters.get(STORAGE_CACHED)
        lines += ["# HELP sglang:cached_tokens_total stand-in", "# TYPE sglang:cached_tokens_total counter"]
        lines.append(
            f'sglang:cached_tokens_total{{model_name="{self.model}",cache_source="device"}} '
            f"{counters.get(DEVICE_CACHED, 0.0)}"
        )
        if storage is not None:
            lines.append(
                f'sglang:cached_tokens_total{{model_name="{self.model}",cache_source="storage"}} {storage}'
            )
        return "\n".join(lines) + "\n"

    def record(self, path: str, body: dict[str, Any]) -> None:
        with self.lock:
            self.requests.append((path, body))

    def paths(self) -> list[str]:
        with self.lock:
            return [p for p, _ in self.requests]


def tokens_of(prompt: str) -> int:
    return max(1, len(prompt.split()))


def colour_of(data_url: str) -> str:
    raw = base64.b64decode(data_url.split(",", 1)[1])
    if raw[:2] != b"BM":
        return "unreadable"
    offset, width, height = (int.from_bytes(raw[a:b], "little") for a, b in ((10, 14), (18, 22), (22, 26)))
    row = (width * 3 + 3) // 4 * 4
    at = offset + (height // 2) * row + (width // 2) * 3
    b, g, r = raw[at : at + 3]
    return min(COLOURS, key=lambda n: sum((x - y) ** 2 for x, y in zip(COLOURS[n], (r, g, b), strict=True)))


def answer(state: StandinState, req: dict[str, Any]) -> dict[str, Any]:
    """The assistant message a chat request gets when the stand-in answers what it is asked."""
    last = req["messages"][-1]["content"]
    parts = last if isinstance(last, list) else [{"type": "text", "text": last}]
    text = " ".join(p.get("text", "") for p in parts if p.get("type") == "text")
    images = [p["image_url"]["url"] for p in parts if p.get("type") == "image_url"]
    thinking = (req.get("chat_template_kwargs") or {}).get("thinking", True)
    message: dict[str, Any] = {
        "role": "assistant",
        "content": None,
        "reasoning_content": None,
        "tool_calls": None,
    }
    reasoning = f"The user asks: {text[:60]}"
    if images:
        pixels = state.knobs().get("image_mode", "pixels") == "pixels"
        content = colour_of(images[0]).capitalize() + "." if pixels else "Red."
    elif req.get("tools") and state.tool_call_parser:
        found = re.search(r"in ([A-Z][a-z]+)", text)
        call = {"name": req["tools"][0]["function"]["name"],
                "arguments": json.dumps({"city": found.group(1) if found else "somewhere"})}  # fmt: skip
        message["tool_calls"] = [{"id": "call_0", "type": "function", "index": 0, "function": call}]
        content = ""
    else:
        content = "42" if any(c.isdigit() for c in text) else "Hello."
    if thinking and state.reasoning_parser:
        message["reasoning_content"] = reasoning
    elif thinking:
        content = f"<think>{reasoning}</think>{content}"
    message["content"] = content or None
    return message


def _room(body: dict[str, Any]) -> int | None:
    room = body.get("bootstrap_room")
    return None if room is None else int(room)


def fetch_kv(
    body: dict[str, Any], wait_s: float, peers: dict[str, str] | None = None
) -> tuple[str | None, str | None]:
    """A decode server's transfer: the room's KV from the prefill's bootstrap server, waited for
    while that prefill runs. Returns (why it failed, or None once the KV is there; the prefill's
    layout version, as the handoff carries it). ``peers``: the decode's bootstrap address ->
    prefill instance it first bootstrapped with; a room from another instance there fails."""
    addr = f"{body.get('bootstrap_host')}:{body.get('bootstrap_port')}"
    url = f"http://{addr}/kv/{body['bootstrap_room']}"
    deadline = time.monotonic() + wait_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                handed = json.loads(resp.read() or b"{}")
            instance = str(handed.get("instance", ""))
            if peers is not None and peers.setdefault(addr, instance) != instance:
                return (
                    f"KVTransferError(bootstrap_room={body['bootstrap_room']}): the prefill at {addr} "
                    f"is instance {instance}, not {peers[addr]} this decode bootstrapped with",
                    None,
                )
            return None, handed.get("version")
        except OSError as err:  # 404 until the prefill holds the room, or no bootstrap server
            if time.monotonic() >= deadline:
                return (
                    f"Decode handshake failed for bootstrap_room {body['bootstrap_room']}: {url}: {err}",
                    None,
                )
        time.sleep(0.005)


# A seed of SGLang's remote-instance weight loader (srt/entrypoints/http_server.py): the loader
# asks it to set up a send group, then to send. SGLang's own test says a seed serves one loader at
# a time and leaves that to the user; the stand-in refuses a second one, so a test sees it.
SEED_PATHS = ("/init_weights_send_group_for_remote_instance", "/send_weights_to_remote_instance")


def seed_answer(state: StandinState, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    group = str(body.get("group_name") or "")
    with state.lock:
        if path == SEED_PATHS[0]:
            ports = str(body.get("ports") or "").split(",")
            if len(ports) != state.tp_size:  # model_runner's assertion
                return 400, {
                    "success": False,
                    "message": f"Expected {state.tp_size} ports, but got {len(ports)} ports.",
                }
            if state.sending_to not in (None, group):
                return 400, {"success": False, "message": f"already sending weights to {state.sending_to}"}
            state.sending_to = group
            return 200, {"success": True, "message": "send group ready"}
        if state.sending_to != group:
            return 400, {"success": False, "message": f"no send group {group!r}"}
    state.nccl_sending = True
    try:
        time.sleep(float(state.knobs().get("peer_load_seconds", 0)))  # the weights on the wire
    finally:
        with state.lock:
            state.sending_to = None
            state.nccl_sending = False
    return 200, {"success": True, "message": "weights sent"}


# The TransferEngine backend (srt/model_loader/loader.py, RemoteInstanceModelLoader;
# srt/entrypoints/engine_info_bootstrap_server.py): the seed's HTTP server answers a rank's
# session and weight addresses from its bootstrap server; the loader then reads the weights out
# of the seed's GPU memory itself. The stand-in's engine streams WEIGHT_BYTES a rank over
# peer_load_seconds in threads of its own: nothing of the seed's request handling takes part.
TE_INFO_PATHS = ("/get_remote_instance_transfer_engine_info", "/remote_instance_transfer_engine_info")
WEIGHT_BYTES = 1 << 20


class TransferEngineSeed:
    def __init__(self, state: StandinState, host: str, bootstrap_port: int) -> None:
        self.state = state
        self.reads: list[int] = []  # the ranks read so far, in order of their end
        seed = self

        class Engine(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                rank = int(self.rfile.readline().split()[1])
                pause = float(seed.state.knobs().get("peer_load_seconds", 0)) / 16
                for _ in range(16):
                    self.wfile.write(b"w" * (WEIGHT_BYTES // 16))
                    time.sleep(pause)
                with seed.state.lock:
                    seed.reads.append(rank)

        class Bootstrap(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                path, _, query = self.path.partition("?")
                code, body = (
                    (200, "OK") if path == "/health" else seed.answer(query, self.headers.get("Host", ""))
                )
                data = (body if isinstance(body, str) else json.dumps(body)).encode()
                self.send_response(code)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        engine = socketserver.ThreadingTCPServer((host, 0), Engine)
        engine.daemon_threads = True
        self.port = engine.server_address[1]
        try:  # engine.py refuses a port in use before anything starts
            self.bootstrap = ThreadingHTTPServer((host, bootstrap_port), Bootstrap)
        except OSError:
            sys.exit(f"engine_info_bootstrap_port {bootstrap_port} is already in use.")
        self.bootstrap.daemon_threads = True
        for server in (engine, self.bootstrap):
            threading.Thread(target=server.serve_forever, daemon=True).start()

    def answer(self, query: str, reached: str) -> tuple[int, dict[str, Any]]:
        """A rank's session (the engine's address as the loader reached the seed) and weights."""
        rank = dict(p.partition("=")[::2] for p in query.split("&")).get("rank", "")
        if not rank.isdigit() or int(rank) >= self.state.tp_size:
            return 400, {"error": {"message": f"Failed to get transfer engine info for rank {rank}"}}
        host = reached.rpartition(":")[0] or "127.0.0.1"
        weights = {"model.embed_tokens.weight": [0, WEIGHT_BYTES // 2, 2]}
        return 200, {
            "rank": int(rank),
            "remote_instance_transfer_engine_info": [f"{host}:{self.port}", weights],
        }


def _bootstrap_handler(state: StandinState) -> type[BaseHTTPRequestHandler]:
    """The prefill's bootstrap server: GET /kv/ROOM answers once that room has been prefilled."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            room = self.path.removeprefix("/kv/")
            with state.lock:
                tokens = state.kv.get(int(room)) if room.isdigit() else None
            code, body = (
                (404, b"{}")
                if tokens is None
                else (
                    200,
                    json.dumps(
                        {"prompt_tokens": tokens, "version": state.version, "instance": state.instance}
                    ).encode(),
                )
            )
            if self.path == "/health":
                code, body = 200, b"{}"
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


def _handler(state: StandinState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # the body ends when the connection closes: simple streaming

        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            pass

        def _json(self, code: int, body: Any) -> None:
            self._send(code, "application/json", json.dumps(body))

        def _send(self, code: int, kind: str, text: str) -> None:
            data = text.encode()
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _authorized(self) -> bool:
            if not state.api_key or self.command == "OPTIONS" or self.path.startswith(OPEN_PATHS):
                return True
            scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
            return scheme.lower() == "bearer" and hmac.compare_digest(token.encode(), state.api_key.encode())

        def _refused(self) -> bool:
            """Answers what SGLang answers before any route: 401 without the key, 503 while loading."""
            if not self._authorized():
                self._json(401, {"error": "Unauthorized"})
            elif not state.loaded():
                self._json(503, {"error": "loading"})
            else:
                return False
            return True

        def do_GET(self) -> None:
            state.record(self.path, {})
            if self._refused():
                return
            path, _, query = self.path.partition("?")
            if path in TE_INFO_PATHS:
                te = state.transfer_engine  # no seed engine: no bootstrap server to ask
                code, answer = (
                    te.answer(query, self.headers.get("Host", ""))
                    if te is not None
                    else (400, {"error": {"message": f"Failed to get transfer engine info for {query}"}})
                )
                self._json(code, answer)
            elif self.path in ("/health", "/health_generate"):
                if state.healthy:
                    self._json(200, {})
                else:
                    self._json(503, {"error": "loading"})
            elif self.path == "/metrics" and state.metrics:
                self._send(200, "text/plain; version=0.0.4", state.metrics_text())
            elif self.path == "/v1/models" and state.models_route:
                self._json(200, {"object": "list", "data": [{"id": state.model, "object": "model", "owned_by": "sglang"}]})  # fmt: skip
            elif self.path in ("/server_info", "/get_server_info"):
                # SGLang answers its server args plus the scheduler's state; the router reads
                # model_path, served_model_name and dp_size from it
                states = [{"dp_rank": r} for r in range(min(state.dp_ready, state.dp_size))]
                self._json(200, {"version": "standin", "model_path": state.model_path,
                                 "tokenizer_path": state.model_path, "served_model_name": state.model,
                                 "dp_size": state.dp_size, "disaggregation_mode": state.disaggregation or "null",
                                 "startup_time": state.startup_time, "internal_states": states})  # fmt: skip
            elif self.path in ("/model_info", "/get_model_info"):
                self._json(200, {"model_path": state.model_path, "tokenizer_path": state.model_path,
                                 "is_generation": True})  # fmt: skip
            else:
                self._json(404, {"error": "not found"})

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.loads(raw or b"{}")
            state.record(self.path, body)
            if self._refused():
                return
            if self.path in GENERATION_PATHS:
                state.count(RUNNING, 1)  # sglang:num_running_reqs: what a drain waits on
                try:
                    self._generate(body)
                finally:
                    state.count(RUNNING, -1)
            elif self.path.partition("?")[0] == "/flush_cache":  # bench_serving adds ?timeout=S
                state.flush()
                self._json(200, {})
            elif self.path in SEED_PATHS:
                code, answer = seed_answer(state, self.path, body)
                self._json(code, answer)
            else:
                self._json(404, {"error": "not found"})

        def _generate(self, body: dict[str, Any]) -> None:
            while state.nccl_sending:  # the scheduler is busy sending the weights
                time.sleep(0.01)
            if time.monotonic() - state.started < state.serves_after_s:
                self._json(503, {"error": "stand-in: the first prefill is still initializing"})
                return
            generations = sum(1 for p in state.paths() if p in GENERATION_PATHS)
            if state.fail_generation or (state.fail_after is not None and generations > state.fail_after):
                self._json(500, {"error": "stand-in told to fail"})
                return
            prompt = json.dumps(
                body.get("text") or body.get("input_ids") or body.get("messages") or body.get("prompt")
            )
            stream, room = bool(body.get("stream", False)), _room(body)
            if state.disaggregation is not None and room is None:
                why = "Invalid request: Disaggregated request received without bootstrap room id."
                self._abort(stream, 400, "BadRequestError" if not stream else "BAD_REQUEST", why)
                state.log(Served(self.path, prompt, tokens_of(prompt), 0, None, why))
                return
            message, words = self._output(body)
            wait, fingerprint = state.ttft_s, None
            if state.disaggregation == "prefill" and room is not None:
                time.sleep(state.ttft_s)  # the prefill's forward pass, then the KV is ready
                with state.lock:
                    state.kv[room] = tokens_of(prompt)
                words, wait = words[:1], 0.0  # a prefill server answers its first token only
                message = {**message, "content": " ".join(words)} if message.get("content") else message
            elif state.disaggregation == "decode" and room is not None:
                missing, prefill_version = fetch_kv(body, state.kv_wait_s, state.peers)
                if missing:
                    # as SGLang's decode aborts a failed handshake (decode.py, KVPoll.Failed)
                    self._abort(stream, 500, "INTERNAL_SERVER_ERROR" if stream else "500", missing)
                    state.log(Served(self.path, prompt, tokens_of(prompt), 0, room, missing))
                    return
                wait = 0.0  # the first token follows the transfer
                # a real decode would read the KV in its own layout, garbage when they differ: the
                # stand-in answers and says which versions met, for a test to catch
                fingerprint = f"prefill={prefill_version} decode={state.version}"
            # counted when the generation ends, before its last bytes go out (as SGLang counts a
            # finished request): a client that has its whole answer sees it in /metrics
            self._stream(
                prompt, words, message, stream, wait, lambda: state.served(prompt, len(words)), fingerprint
            )
            state.log(Served(self.path, prompt, tokens_of(prompt), len(words), room))

        def _abort(self, stream: bool, code: int, kind: str, message: str) -> None:
            """SGLang's answer to an aborted request: the OpenAI error body with its status (type
            "BadRequestError" for 400, the code for others), or, once a stream has started, 200
            and one error chunk typed by the status's name (serving_base.py, serving_chat.py)."""
            error = {"object": "error", "message": message, "type": kind, "param": None, "code": code}
            if not stream:
                self._json(code, error)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self._event({"error": error})
            self.wfile.write(b"data: [DONE]\n\n")

        def _output(self, body: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
            """The assistant message and its output tokens."""
            if self.path == "/v1/chat/completions" and state.answers:
                message = answer(state, body)
                words = message["content"].split(" ") if message["content"] else []
            else:
                sp = body.get("sampling_params") or {}
                asked = (sp.get("max_new_tokens"), body.get("max_completion_tokens"), body.get("max_tokens"))
                n = int(next((a for a in asked if a is not None), 16))
                words = [f"w{i % 1000}" for i in range(n)]
                message = {"role": "assistant", "content": " ".join(words)}
            if state.zero_tokens:
                message["content"], words = "", []
            return message, words

        # one SSE event per token; the final one carries the usage like SGLang's last chunk
        def _chunk(
            self, prompt: str, words: list[str], message: dict[str, Any], final: bool
        ) -> dict[str, Any]:
            usage = {"prompt_tokens": tokens_of(prompt), "completion_tokens": len(words)}
            if self.path == "/generate":
                return {"text": " ".join(words), "meta_info": usage}
            if final:
                choices = [{"index": 0, "text": ""}] if self.path == "/v1/completions" else []
                return {"choices": choices, "usage": usage}
            piece = words[-1] if len(words) == 1 else " " + words[-1]
            if self.path == "/v1/completions":
                return {"choices": [{"index": 0, "text": piece}]}
            delta = {"content": piece}
            if len(words) == 1:  # the first delta also brings the role, reasoning, tool calls
                delta = {k: v for k, v in message.items() if k != "content" and v} | delta
            return {"choices": [{"index": 0, "delta": delta}]}

        def _whole(self, prompt: str, words: list[str], message: dict[str, Any]) -> dict[str, Any]:
            usage = {"prompt_tokens": tokens_of(prompt), "completion_tokens": len(words)}
            if self.path == "/generate":
                return {"text": " ".join(words), "meta_info": usage}
            if self.path == "/v1/completions":
                choice: dict[str, Any] = {"index": 0, "text": " ".join(words), "finish_reason": "length"}
                return {
                    "object": "text_completion",
                    "model": state.model,
                    "choices": [choice],
                    "usage": usage,
                }
            finish = "tool_calls" if message.get("tool_calls") else "stop" if state.answers else "length"
            choice = {"index": 0, "message": message, "finish_reason": finish}
            return {"id": "chatcmpl-standin", "object": "chat.completion", "model": state.model,
                    "choices": [choice], "usage": usage}  # fmt: skip

        def _stream(
            self,
            prompt: str,
            words: list[str],
            message: dict[str, Any],
            stream: bool,
            ttft_s: float,
            finished: Callable[[], None],
            fingerprint: str | None = None,
        ) -> None:
            """The answer (no stream unless asked); `finished` runs once the last token exists;
            `fingerprint`, where given, is the answer's (and the last chunk's) system_fingerprint."""
            stamp = {} if fingerprint is None else {"system_fingerprint": fingerprint}
            if not stream:
                time.sleep(ttft_s + state.itl_s * max(0, len(words) - 1))
                finished()
                self._json(200, self._whole(prompt, words, message) | stamp)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            time.sleep(ttft_s)
            for i in range(1, len(words) + 1):
                if i > 1:
                    time.sleep(state.itl_s)
                self._event(self._chunk(prompt, words[:i], message, False))
            finished()
            self._event(self._chunk(prompt, words, message, True) | stamp)
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

        def _event(self, chunk: dict[str, Any]) -> None:
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            self.wfile.flush()

    return Handler


class StandinServer:
    """The stand-in on 127.0.0.1, a free port, in a thread of this process; a prefill server
    also runs its bootstrap server (on ``state.bootstrap_port``; 0: a free one, then set)."""

    def __init__(self, state: StandinState | None = None) -> None:
        self.state = state or StandinState()
        self._servers = [ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.state))]
        if self.state.disaggregation == "prefill":
            bootstrap = ThreadingHTTPServer(
                ("127.0.0.1", self.state.bootstrap_port), _bootstrap_handler(self.state)
            )
            self.state.bootstrap_port = int(bootstrap.server_address[1])
            self._servers.append(bootstrap)
        self._threads = []
        for server in self._servers:
            server.daemon_threads = True
            self._threads.append(threading.Thread(target=server.serve_forever, daemon=True))

    @property
    def _server(self) -> ThreadingHTTPServer:
        return self._servers[0]

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> StandinServer:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stops answering and closes the ports (a killed worker); idempotent."""
        for server, thread in zip(self._servers, self._threads, strict=True):
            if thread.is_alive():
                server.shutdown()
                thread.join(timeout=5)
            server.server_close()


# --- the container entry: argv, --config, the knobs file ------------------------------------


def host_path(path: str) -> str | None:
    """Where the container's `path` is: in a real container, itself; under the fake docker (no
    mount namespace) only what a -v mount brings in is there, at the mount's host path."""
    table = os.environ.get(MOUNTS_ENV)
    if table is None:
        return path
    for source, target in sorted(json.loads(table), key=lambda m: -len(m[1])):
        if path == target or path.startswith(target.rstrip("/") + "/"):
            return str(source) + path[len(target) :]
    return None


def yaml_scalar(text: str, where: str) -> str:
    """A quoted YAML scalar. Plain scalars are refused (YAML would read `yes` or `0x10` as a bool
    or a number). Never echoes the value: it may be a key."""
    if text.startswith('"'):
        try:
            value = json.loads(text)  # JSON strings are YAML double-quoted scalars
        except json.JSONDecodeError as err:
            sys.exit(f"{where}: not a double-quoted YAML string ({err.msg}, column {err.colno})")
        if isinstance(value, str):
            return value
    elif len(text) >= 2 and text[0] == text[-1] == "'" and "'" not in text[1:-1].replace("''", ""):
        return text[1:-1].replace("''", "'")
    sys.exit(f"{where}: the stand-in reads quoted string values only")


def read_config(argv: list[str]) -> list[str]:
    """`argv` with `--config FILE` replaced by the file's flags, after the command line's (the
    first occurrence is the one `flag` reads: the command line wins over the file, as in SGLang's
    ConfigArgumentMerger). Refuses what that merger refuses."""
    if "--config" not in argv:
        return argv
    if argv.count("--config") > 1:
        sys.exit("Multiple config files specified! Only one allowed.")
    at = argv.index("--config")
    if at == len(argv) - 1:
        sys.exit("No config file specified after --config flag!")
    path = argv[at + 1]
    if os.path.splitext(path)[1].lower() not in (".yaml", ".yml"):
        sys.exit(f"Config file must be YAML format, got: {path}")
    found = host_path(path)
    if found is None or not os.path.exists(found):
        sys.exit(f"Config file not found: {path}")
    with open(found) as f:  # a directory (docker -v of a missing file) raises, as in SGLang
        lines = f.read().splitlines()
    merged: list[str] = []
    for n, line in enumerate(lines, 1):
        if not line.strip() or line.startswith("#"):
            continue
        key, sep, value = line.partition(":")
        if not sep or not key or key != key.strip() or not value.startswith(" "):
            sys.exit(f"{path}:{n}: not a top-level `key: value` line")
        merged += [f"--{key}", yaml_scalar(value.strip(), f"{path}:{n}")]
    return argv[:at] + argv[at + 2 :] + merged


def flag(argv: list[str], name: str, default: str | None = None) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else default


# The pinned `sglang serve` option strings: flashfleet/catalog/sglang_flags.txt in a checkout,
# copied beside this file where it runs on a test host or in a stand-in image.
FLAGS_FILE = "sglang_flags.txt"
# Choices the real parser checks, read from sglang 0.5.23's srt/arg_groups/fields/model.py,
# fields/disagg.py and fields/memory.py; a flag not listed here takes any value (the list does not
# say which flags take one).
CHOICES = {
    "--kv-cache-dtype": ("auto", "fp8_e5m2", "fp8_e4m3", "mxfp8", "bf16", "bfloat16", "nvfp4", "fp4_mx_block16"),
    "--disaggregation-mode": ("null", "prefill", "decode"),
    "--remote-instance-weight-loader-backend": ("transfer_engine", "nccl", "modelexpress"),
    "--hicache-storage-backend": ("file", "sim", "mooncake", "npu_memcache", "hf3fs", "nixl", "aibrix", "dynamic",
                                  "eic", "simm", "mori", "shm", "tensorcast", "seaweedfs"),
}  # fmt: skip


def sglang_flags() -> list[str]:
    here = os.path.dirname(os.path.abspath(__file__))
    for path in (
        os.path.join(here, FLAGS_FILE),
        os.path.join(here, "..", "..", "flashfleet", "catalog", FLAGS_FILE),
    ):
        if os.path.exists(path):
            with open(path) as f:
                return [line.strip() for line in f if line.startswith("--")]
    sys.exit(f"stand-in: no {FLAGS_FILE} beside {here} (copy flashfleet/catalog/{FLAGS_FILE} there)")


def check_serve_argv(argv: list[str]) -> list[str]:
    """The flags as `sglang serve` 0.5.23 reads them, or an exit as there on what its parser
    refuses (argparse: usage, one error line, exit 2): an option it does not have, or a value
    outside a flag's choices. sglang/cli/serve.py first takes out `--model-type` and reads a
    first bare word as the model."""
    import argparse

    words = argv[2:] if argv[:2] == ["sglang", "serve"] else argv[1:] if argv[:1] == ["serve"] else argv
    words = [
        w for i, w in enumerate(words)
        if w != "--model-type" and not w.startswith("--model-type=") and words[i - 1 : i] != ["--model-type"]
    ]  # fmt: skip
    if words and not words[0].startswith("-"):
        words = ["--model-path", *words]
    parser = argparse.ArgumentParser(prog="sglang serve")  # abbreviations allowed, as there
    for name in sglang_flags():
        if name in CHOICES:
            parser.add_argument(name, choices=CHOICES[name])
        else:
            parser.add_argument(name, nargs="*")  # a switch or a value: any words up to the next flag
    parser.parse_args(words)
    return words


def join_mooncake(argv: list[str]) -> Store | None:
    """With the Mooncake backend, mount a segment through the config SGLang would read."""
    path = os.environ.get("SGLANG_HICACHE_MOONCAKE_CONFIG_PATH")
    if flag(argv, "--hicache-storage-backend") != "mooncake" or not path:
        return None
    from mooncake.store import MooncakeDistributedStore  # only in the mooncake venv

    with open(path) as f:
        config = json.load(f)
    store = MooncakeDistributedStore()
    rc = store.setup(config["local_hostname"], config["metadata_server"], 64 << 20, 16 << 20,
                     config["protocol"], config["device_name"], config["master_server_address"])  # fmt: skip
    if rc != 0:
        sys.exit(f"mooncake setup failed: {rc}")
    return store  # type: ignore[no-any-return]


# Words that differ between the servers of one PD deployment by role or place, not by version.
PLACE_FLAGS = ("--disaggregation-mode", "--disaggregation-bootstrap-port", "--host", "--port", "--base-gpu-id",
               "--dist-init-addr", "--node-rank", "--nnodes")  # fmt: skip


def layout_version(argv: list[str]) -> str:
    """What a prefill and a decode must share to exchange KV: a digest of the serve argv's
    options (model, revision, every flag) without those that only place the server (its role,
    ports, rank). The stand-in cannot see its image (every tag on a test host is one image), so an
    image change shows only where it comes with an option change."""
    kept = [
        w for i, w in enumerate(argv) if w not in PLACE_FLAGS and (i == 0 or argv[i - 1] not in PLACE_FLAGS)
    ]
    return hashlib.sha256("\0".join(kept).encode()).hexdigest()[:12]


def state_from_argv(argv: list[str], knobs_path: str | None = None) -> StandinState:
    """The server the container's (config-merged) argv asks for; answers come at once."""
    if "sglang_router.launch_router" in argv:
        sys.exit("the stand-in is no router: run the real sglang_router")
    argv = check_serve_argv(argv)
    mode = flag(argv, "--disaggregation-mode")  # "null" (the default), "prefill" or "decode"
    return StandinState(
        ttft_s=0.0, itl_s=0.0, answers=True, knobs_path=knobs_path or os.environ.get(KNOBS_ENV, KNOBS),
        model=flag(argv, "--served-model-name") or flag(argv, "--model-path") or "",
        model_path=flag(argv, "--model-path") or "",
        disaggregation=mode if mode in ("prefill", "decode") else None,
        bootstrap_port=int(flag(argv, "--disaggregation-bootstrap-port", "8998") or 8998),
        tp_size=int(flag(argv, "--tp-size", "1") or 1),
        api_key=flag(argv, "--api-key"), metrics="--enable-metrics" in argv,
        models_route="--encoder-only" not in argv,
        reasoning_parser="--reasoning-parser" in argv, tool_call_parser="--tool-call-parser" in argv,
        l3=join_mooncake(argv), version=layout_version(argv),
    )  # fmt: skip


JIT_CACHE_ENV = "TVM_FFI_CACHE_DIR"
JIT_CACHE_DEFAULT = "/root/.cache/tvm-ffi"  # tvm-ffi's default in the image, inside the container
JIT_MARKER = "standin-kernels.so"
CUDA_GRAPH_PHASES = ("prefill", "decode", "target_verify", "draft_prefill", "draft_decode", "draft_extend")


def jit_cache() -> tuple[bool, str | None]:
    """(warm, the host folder a cold boot fills): a folder not under a mount is the container's
    own, gone with it, so the next container builds again."""
    folder = host_path(os.environ.get(JIT_CACHE_ENV) or JIT_CACHE_DEFAULT)
    if folder is None:
        return False, None
    return os.path.exists(os.path.join(folder, JIT_MARKER)), folder


def say(line: str) -> None:
    """One log line with SGLang's own prefix ("[2026-11-03 10:12:01] ...")."""
    print(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] {line}", flush=True)


def read_from_engine(seed: str, tp_size: int) -> None:
    """Each TP rank, side by side: its session from the seed's HTTP port, then its weights read
    from the seed's engine; a failure ends the server, as the real loader's RuntimeError does."""
    failures: list[str] = []

    def rank(r: int) -> None:
        try:
            with urllib.request.urlopen(f"{seed}{TE_INFO_PATHS[0]}?rank={r}", timeout=30) as resp:
                session = json.load(resp)["remote_instance_transfer_engine_info"][0]
            host, _, port = session.rpartition(":")
            got = 0
            with socket.create_connection((host, int(port)), timeout=600) as conn:
                conn.sendall(f"READ {r}\n".encode())
                while chunk := conn.recv(1 << 16):
                    got += len(chunk)
            if got != WEIGHT_BYTES:
                failures.append(f"rank {r}: {got} of {WEIGHT_BYTES} bytes")
        except (OSError, ValueError, KeyError, IndexError) as e:
            failures.append(f"rank {r}: {e}")

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(tp_size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        say(
            f"Failed to load weights from remote instance via transfer engine ({seed}): {'; '.join(failures)}"
        )
        os._exit(1)


def load_from_seed(argv: list[str]) -> float:
    """`--load-format remote_instance`: the weights come from the seed instance the flags name, as
    SGLang's loader asks for them over its backend; seconds it took. A seed that refuses or
    cannot be reached ends the server, as the real load's exception does."""
    seed = (f"http://{flag(argv, '--remote-instance-weight-loader-seed-instance-ip')}:"
            f"{flag(argv, '--remote-instance-weight-loader-seed-instance-service-port')}")  # fmt: skip
    if flag(argv, "--remote-instance-weight-loader-backend", "nccl") == "transfer_engine":
        start = time.monotonic()
        read_from_engine(seed, int(flag(argv, "--tp-size", "1") or 1))
        say(f"Loaded weights from remote instance {seed}")
        return round(time.monotonic() - start, 2)
    ports = json.loads(flag(argv, "--remote-instance-weight-loader-send-weights-group-ports") or "[]")
    group = f"standin-{os.uname().nodename}-{os.getpid()}"
    body = {"master_address": seed.split("//")[1].rsplit(":", 1)[0], "ports": ",".join(map(str, ports)),
            "group_rank": 0, "world_size": 2, "group_name": group, "backend": "nccl"}  # fmt: skip
    start = time.monotonic()
    for path in SEED_PATHS:
        req = urllib.request.Request(f"{seed}{path}", data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})  # fmt: skip
        try:
            with urllib.request.urlopen(req, timeout=600) as resp:
                resp.read()
        except OSError as e:  # URLError and HTTPError among them
            detail = e.read().decode(errors="replace") if hasattr(e, "read") else str(e)
            say(f"Failed to load weights from remote instance {seed}{path}: {detail}")
            os._exit(1)
    say(f"Loaded weights from remote instance {seed}")
    return round(time.monotonic() - start, 2)


def boot(state: StandinState, load_s: float, fill: str | None, argv: list[str] | None = None) -> None:
    """The boot lines SGLang prints, at the times the stand-in's load and JIT builds take."""
    say("Load weight begin. avail mem=139.50 GB")
    if argv is not None and flag(argv, "--load-format") == "remote_instance":
        load_s = load_from_seed(argv)
    else:
        time.sleep(load_s)
    say(
        f"Load weight end. elapsed={load_s:.2f} s, type=GlmMoeDsaForCausalLM, avail mem=60.10 GB, mem usage=79.40 GB."
    )
    time.sleep(state.jit_s)
    if fill is not None and state.jit_s:
        os.makedirs(fill, exist_ok=True)
        with open(os.path.join(fill, JIT_MARKER), "w") as f:
            f.write("built by the stand-in\n")
    say("Capture decode CUDA graph end. elapsed=0.00 s, mem usage=0.00 GB, avail mem=50.00 GB.")
    graphs = dict.fromkeys(CUDA_GRAPH_PHASES, 0.0)
    e2e = round(time.monotonic() - state.started, 2)
    state.startup_time = {"load_weight": load_s, "kv_cache_allocation": 0.0, "scheduler_e2e": e2e,
                          "cuda_graph": graphs, "tokenizer_e2e": e2e}  # fmt: skip
    say(
        f"Engine startup timings (s): load_weight={load_s:.2f}, kv_cache_allocation=0.00, "
        f"scheduler_e2e={e2e:.2f}, cuda_graph={{{', '.join(f'{k}={v:.2f}' for k, v in graphs.items())}}}, "
        f"tokenizer_e2e={e2e:.2f}"
    )
    say("The server is fired up and ready to roll!")
    assert state.booted is not None
    state.booted.set()


def main(argv: list[str]) -> None:
    # SGLang's server (uvicorn) ends on SIGTERM, as a container's PID 1 too, where the kernel
    # drops a signal that has no handler: `docker stop` ends it at once, not at its timeout
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    argv = read_config(argv)
    state = state_from_argv(argv)
    if flag(argv, "--node-rank", "0") != "0":
        while True:  # ranks > 0 serve no HTTP
            time.sleep(3600)
    knobs = state.knobs()
    warm, fill = jit_cache()
    state.jit_s = 0.0 if warm else float(knobs.get("jit_seconds", 0))
    state.booted = threading.Event()
    threading.Thread(
        target=boot, args=(state, float(knobs.get("load_seconds", 0)), fill, argv), daemon=True
    ).start()
    host, port = flag(argv, "--host", "127.0.0.1") or "", int(flag(argv, "--port", "30000") or 30000)
    server = ThreadingHTTPServer((host, port), _handler(state))
    server.daemon_threads = True
    if "--remote-instance-weight-loader-start-seed-via-transfer-engine" in argv:
        bootstrap_port = int(flag(argv, "--engine-info-bootstrap-port", "6789") or 6789)
        state.transfer_engine = TransferEngineSeed(state, host, bootstrap_port)
    if state.disaggregation == "prefill":  # SGLang's prefill binds its bootstrap server at start
        bootstrap = ThreadingHTTPServer((host, state.bootstrap_port), _bootstrap_handler(state))
        bootstrap.daemon_threads = True
        threading.Thread(target=bootstrap.serve_forever, daemon=True).start()
    # the line SGLang's HTTP server (uvicorn) prints once it listens: what a log reader sees first
    print(f"INFO:     Uvicorn running on http://{host}:{port} (Press CTRL+C to quit)", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
