"""A tiny OpenAI-compatible + SGLang-native stand-in server on 127.0.0.1 (standard library only).

It speaks what bench_serving's backends call: GET /v1/models, /server_info, /model_info,
/health; POST /generate (SGLang native SSE: cumulative "text" + meta_info.completion_tokens),
/v1/chat/completions and /v1/completions (OpenAI SSE deltas, usage in the last chunk).
Each output token is the word "wN"; the first token comes after ``ttft_s``, the next ones every
``itl_s``. Every request is recorded so tests can check what the benchmark really sent.

It also serves what flashfleet reads from each server: /metrics (sglang's Prometheus counter
names, counted from what it really served), /server_info's one internal state per ready DP rank,
and /health. Switches make it misbehave on purpose: empty answers, failed requests, ranks that
never come up, an L3 tier that takes writes but never returns a hit. ``prefill``/``decode``
peers make it a PD router: each generation's prompt tokens are counted on the prefill peer and
its output tokens on the decode peer, as the two servers of a real pair would count them; a
router whose prefill peer is None lets decode do everything (the silent fallback).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "glm-5.3-flash-standin"
GENERATION_PATHS = ("/generate", "/v1/chat/completions", "/v1/completions")


@dataclass
class StandinState:
    ttft_s: float = 0.02
    itl_s: float = 0.002
    fail_generation: bool = False  # answer every generation request with HTTP 500
    fail_after: int | None = None  # answer generation requests after the first N with HTTP 500
    zero_tokens: bool = False  # answer 200 with an empty completion (0 output tokens)
    healthy: bool = True  # /health answers 200
    dp_size: int = 1
    dp_ready: int = 1  # ranks that report an internal state in /server_info
    l3_reads: bool = True  # a prompt seen before (the L3 tier kept it) reports storage hits
    prefill: StandinState | None = None  # PD router: where prompt tokens are counted
    decode: StandinState | None = None  # PD router: where output tokens are counted
    counters: dict[str, float] = field(default_factory=dict)
    seen_prompts: set[str] = field(default_factory=set)
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, name: str, value: float) -> None:
        with self.lock:
            self.counters[name] = self.counters.get(name, 0.0) + value

    def served(self, prompt: str, output_tokens: int) -> None:
        """Count one finished generation the way the servers behind this one would."""
        prompt_tokens = max(1, len(prompt.split()))
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
        # HiCache with an L3 tier: the first sight writes the prefix out, a later one reads it back
        with self.lock:
            seen = prompt in self.seen_prompts
            self.seen_prompts.add(prompt)
        if not seen:
            self.count("sglang:backuped_tokens_total", prompt_tokens)
        elif self.l3_reads:
            self.count("sglang:storage_prefetch_hit_tokens_total", prompt_tokens)
            self.count('sglang:cached_tokens_total{cache_source="storage"}', prompt_tokens)

    def metrics_text(self) -> str:
        names = ("sglang:prompt_tokens_total", "sglang:generation_tokens_total", "sglang:num_requests_total",
                 "sglang:backuped_tokens_total", "sglang:storage_prefetch_hit_tokens_total")  # fmt: skip
        with self.lock:
            counters = dict(self.counters)
        lines = []
        for name in names:  # every counter exists from the start, as prometheus_client exports them
            lines += [f"# HELP {name} stand-in", f"# TYPE {name} counter",
                      f'{name}{{model_name="{MODEL}",engine_type="unified"}} {counters.get(name, 0.0)}']  # fmt: skip
        storage = counters.get('sglang:cached_tokens_total{cache_source="storage"}')
        lines += ["# HELP sglang:cached_tokens_total stand-in", "# TYPE sglang:cached_tokens_total counter"]
        if storage is not None:
            lines.append(
                f'sglang:cached_tokens_total{{model_name="{MODEL}",cache_source="storage"}} {storage}'
            )
        return "\n".join(lines) + "\n"

    def record(self, path: str, body: dict[str, Any]) -> None:
        with self.lock:
            self.requests.append((path, body))

    def paths(self) -> list[str]:
        with self.lock:
            return [p for p, _ in self.requests]


def _handler(state: StandinState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # the body ends when the connection closes: simple streaming

        def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
            pass

        def _json(self, code: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _text(self, code: int, text: str) -> None:
            data = text.encode()
            self.send_response(code)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            state.record(self.path, {})
            if self.path == "/metrics":
                self._text(200, state.metrics_text())
            elif self.path in ("/health", "/health_generate") and not state.healthy:
                self._json(503, {"error": "loading"})
            elif self.path == "/v1/models":
                self._json(
                    200, {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "standin"}]}
                )
            elif self.path in ("/server_info", "/get_server_info"):
                states = [{"dp_rank": r} for r in range(min(state.dp_ready, state.dp_size))]
                self._json(200, {"version": "standin", "dp_size": state.dp_size, "internal_states": states})
            elif self.path in ("/model_info", "/get_model_info"):
                self._json(200, {"model_path": MODEL, "tokenizer_path": MODEL, "is_generation": True})
            elif self.path in ("/health", "/health_generate"):
                self._json(200, {})
            else:
                self._json(404, {"error": "not found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            state.record(self.path, body)
            generations = sum(1 for p in state.paths() if p in GENERATION_PATHS)
            if self.path in GENERATION_PATHS and (
                state.fail_generation or (state.fail_after is not None and generations > state.fail_after)
            ):
                self._json(500, {"error": "stand-in told to fail"})
                return
            prompt = json.dumps(
                body.get("text") or body.get("input_ids") or body.get("messages") or body.get("prompt")
            )
            if self.path == "/generate":
                sp = body.get("sampling_params", {})
                n = self._tokens(int(sp.get("max_new_tokens", 16)))
                self._stream(
                    n, self._native_chunk, body.get("stream", False)
                )  # sglang: no stream unless asked
            elif self.path == "/v1/chat/completions":
                n = self._tokens(int(body.get("max_completion_tokens") or body.get("max_tokens") or 16))
                self._stream(n, self._chat_chunk, body.get("stream", False))
            elif self.path == "/v1/completions":
                n = self._tokens(int(body.get("max_tokens", 16)))
                self._stream(n, self._completion_chunk, body.get("stream", False))
            elif self.path == "/flush_cache":
                self._json(200, {})
            else:
                self._json(404, {"error": "not found"})
                return
            if self.path in GENERATION_PATHS:
                state.served(prompt, n)

        def _tokens(self, asked: int) -> int:
            return 0 if state.zero_tokens else asked

        # one SSE event per token; `final` carries the usage like SGLang's last chunk
        def _native_chunk(self, words: list[str], final: bool) -> dict[str, Any]:
            return {
                "text": " ".join(words),
                "meta_info": {"completion_tokens": len(words), "prompt_tokens": 7},
            }

        def _chat_chunk(self, words: list[str], final: bool) -> dict[str, Any]:
            if final:
                return {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": len(words)}}
            piece = words[-1] if len(words) == 1 else " " + words[-1]
            return {"choices": [{"index": 0, "delta": {"content": piece}}]}

        def _completion_chunk(self, words: list[str], final: bool) -> dict[str, Any]:
            if final:
                return {"choices": [{"index": 0, "text": ""}], "usage": {"completion_tokens": len(words)}}
            piece = words[-1] if len(words) == 1 else " " + words[-1]
            return {"choices": [{"index": 0, "text": piece}]}

        def _stream(self, n: int, chunk: Any, stream: bool) -> None:
            words = [f"w{i % 1000}" for i in range(n)]
            if not stream:
                time.sleep(state.ttft_s + state.itl_s * max(0, n - 1))
                text = " ".join(words)
                self._json(200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                              "text": text}],
                                 "usage": {"prompt_tokens": 7, "completion_tokens": n}})  # fmt: skip
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            time.sleep(state.ttft_s)
            for i in range(1, n + 1):
                if i > 1:
                    time.sleep(state.itl_s)
                self.wfile.write(b"data: " + json.dumps(chunk(words[:i], False)).encode() + b"\n\n")
                self.wfile.flush()
            self.wfile.write(b"data: " + json.dumps(chunk(words, True)).encode() + b"\n\n")
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

    return Handler


class StandinServer:
    def __init__(self, state: StandinState | None = None) -> None:
        self.state = state or StandinState()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.state))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> StandinServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
