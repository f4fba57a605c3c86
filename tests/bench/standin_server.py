"""A tiny OpenAI-compatible + SGLang-native stand-in server on 127.0.0.1 (standard library only).

It speaks what bench_serving's backends call: GET /v1/models, /server_info, /model_info,
/health; POST /generate (SGLang native SSE: cumulative "text" + meta_info.completion_tokens),
/v1/chat/completions and /v1/completions (OpenAI SSE deltas, usage in the last chunk).
Each output token is the word "wN"; the first token comes after ``ttft_s``, the next ones every
``itl_s``. Every request is recorded so tests can check what the benchmark really sent.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "glm-5.3-flash-standin"


@dataclass
class StandinState:
    ttft_s: float = 0.02
    itl_s: float = 0.002
    fail_generation: bool = False  # answer every generation request with HTTP 500
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

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

        def do_GET(self) -> None:
            state.record(self.path, {})
            if self.path == "/v1/models":
                self._json(
                    200, {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "standin"}]}
                )
            elif self.path in ("/server_info", "/get_server_info"):
                self._json(200, {"version": "standin", "internal_states": [{}]})
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
            if state.fail_generation:
                self._json(500, {"error": "stand-in told to fail"})
                return
            if self.path == "/generate":
                sp = body.get("sampling_params", {})
                self._stream(int(sp.get("max_new_tokens", 16)), self._native_chunk, body.get("stream", True))
            elif self.path == "/v1/chat/completions":
                n = int(body.get("max_completion_tokens") or body.get("max_tokens") or 16)
                self._stream(n, self._chat_chunk, body.get("stream", False))
            elif self.path == "/v1/completions":
                self._stream(
                    int(body.get("max_tokens", 16)), self._completion_chunk, body.get("stream", False)
                )
            elif self.path == "/flush_cache":
                self._json(200, {})
            else:
                self._json(404, {"error": "not found"})

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
