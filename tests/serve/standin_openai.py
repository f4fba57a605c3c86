"""Stand-in for an SGLang server (or router) in a container: started with the container's argv
and environment, it answers the OpenAI-compatible endpoints the way the real server's flags say.
Behaviour knobs (read per request) live in /etc/flashfleet-test/standin.json:
  load_seconds: /health and /v1/models answer 503 this long after start (weights loading);
  image_mode: "pixels" reads the colour from the image, "text-only" ignores the image.

Like SGLang 0.5.23 it reads `--config FILE.yaml` (flags as top-level keys; the command line wins)
and exits when the file is missing, not YAML or unreadable; with an API key (`--api-key` or
`api-key:` there) every path but /health*, /ready* and /metrics* answers 401 unless the request
carries `Authorization: Bearer <key>` (srt/utils/auth.py, decide_request_auth, NORMAL level)."""

import base64
import hashlib
import hmac
import json
import os
import re
import sys
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

KNOBS = "/etc/flashfleet-test/standin.json"
# Set by tests/serve/fake_docker.py: the container's bind mounts as [[host path, container path]].
MOUNTS_ENV = "FLASHFLEET_TEST_MOUNTS"
START = time.monotonic()
COLOURS = {
    "red": (255, 0, 0),
    "green": (0, 255, 0),
    "blue": (0, 0, 255),
    "yellow": (255, 255, 0),
    "black": (0, 0, 0),
    "white": (255, 255, 255),
    "orange": (255, 128, 0),
    "purple": (128, 0, 128),
}


def host_path(path: str) -> str | None:
    """Where the container's `path` is: in a real container, itself; under the fake docker (no
    mount namespace) only what a -v mount brings in is there, at the mount's host path."""
    table = os.environ.get(MOUNTS_ENV)
    if table is None:
        return path
    for source, target in sorted(json.loads(table), key=lambda m: -len(m[1])):
        if path == target or path.startswith(target.rstrip("/") + "/"):
            return source + path[len(target) :]
    return None


def yaml_scalar(text: str, where: str) -> str:
    """A quoted YAML scalar. Plain scalars are refused (YAML would read `yes` or `0x10` as a bool
    or a number). Never echoes the value: it may be a key."""
    if text.startswith('"'):
        try:
            value = json.loads(text)  # JSON strings are YAML double-quoted scalars
        except ValueError as err:
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


ARGV = read_config(sys.argv[1:])


def flag(name: str, default: str | None = None) -> str | None:
    return ARGV[ARGV.index(name) + 1] if name in ARGV else default


API_KEY = flag("--api-key")
OPEN_PATHS = ("/health", "/ready", "/metrics")  # SGLang lets these through without a key


def knobs() -> dict:
    try:
        with open(KNOBS) as f:
            return json.load(f)
    except OSError:
        return {}


def loaded() -> bool:
    return time.monotonic() - START >= float(knobs().get("load_seconds", 0))


def colour_of(data_url: str) -> str:
    raw = base64.b64decode(data_url.split(",", 1)[1])
    if raw[:2] != b"BM":
        return "unreadable"
    offset, width, height = (int.from_bytes(raw[a:b], "little") for a, b in ((10, 14), (18, 22), (22, 26)))
    row = (width * 3 + 3) // 4 * 4
    at = offset + (height // 2) * row + (width // 2) * 3
    b, g, r = raw[at : at + 3]
    return min(COLOURS, key=lambda n: sum((x - y) ** 2 for x, y in zip(COLOURS[n], (r, g, b), strict=True)))


def chat(req: dict) -> dict:
    last = req["messages"][-1]["content"]
    parts = last if isinstance(last, list) else [{"type": "text", "text": last}]
    text = " ".join(p.get("text", "") for p in parts if p.get("type") == "text")
    images = [p["image_url"]["url"] for p in parts if p.get("type") == "image_url"]
    thinking = (req.get("chat_template_kwargs") or {}).get("thinking", True)
    message: dict = {"role": "assistant", "content": None, "reasoning_content": None, "tool_calls": None}
    reasoning = f"The user asks: {text[:60]}"
    if images:
        answer = (
            colour_of(images[0]).capitalize() + "."
            if knobs().get("image_mode", "pixels") == "pixels"
            else "Red."
        )
    elif req.get("tools") and flag("--tool-call-parser"):
        found = re.search(r"in ([A-Z][a-z]+)", text)
        city = found.group(1) if found else "somewhere"
        message["tool_calls"] = [
            {
                "id": "call_0",
                "type": "function",
                "index": 0,
                "function": {
                    "name": req["tools"][0]["function"]["name"],
                    "arguments": json.dumps({"city": city}),
                },
            }
        ]
        answer = ""
    else:
        answer = "42" if any(c.isdigit() for c in text) else "Hello."
    if thinking and flag("--reasoning-parser"):
        message["reasoning_content"] = reasoning
    elif thinking:
        answer = f"<think>{reasoning}</think>{answer}"
    message["content"] = answer or None
    return {
        "id": "chatcmpl-standin",
        "object": "chat.completion",
        "model": req.get("model"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if message["tool_calls"] else "stop",
            }
        ],
    }


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def reply(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def text(self, status: int, body: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def proxy(self, method: str, body: bytes | None = None) -> None:
        # The router stand-in forwards to its decode worker, as a PD router does.
        upstream = flag("--decode")
        req = urllib.request.Request(
            upstream + self.path, data=body, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                self.reply(resp.status, json.load(resp))
        except OSError as err:
            self.reply(502, {"error": f"worker unreachable: {err}"})

    def authorized(self) -> bool:
        if not API_KEY or self.command == "OPTIONS" or self.path.startswith(OPEN_PATHS):
            return True
        scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(token.encode(), API_KEY.encode())

    def do_GET(self) -> None:
        if not self.authorized():  # SGLang's middleware answers before any route, loading or not
            return self.reply(401, {"error": "Unauthorized"})
        if not loaded():
            return self.reply(503, {"error": "loading"})
        if "sglang_router.launch_router" in ARGV:
            return self.reply(200, {}) if self.path == "/health" else self.proxy("GET")
        if self.path == "/health":
            return self.reply(200, {})
        if self.path == "/metrics" and "--enable-metrics" in ARGV:
            return self.text(
                200, METRICS.exposition(flag("--served-model-name") or flag("--model-path") or "")
            )
        if self.path == "/v1/models" and "--encoder-only" not in ARGV:
            name = flag("--served-model-name") or flag("--model-path")
            return self.reply(200, {"object": "list", "data": [{"id": name, "object": "model"}]})
        self.reply(404, {"error": "not found"})

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if not self.authorized():
            return self.reply(401, {"error": "Unauthorized"})
        if "sglang_router.launch_router" in ARGV:
            return self.proxy("POST", body)
        if self.path == "/v1/chat/completions" and loaded():
            return self.reply(200, chat(json.loads(body)))
        if self.path == "/generate" and loaded():
            text = json.loads(body).get("text", "")
            METRICS.serve_prefix(text)
            return self.reply(200, {"text": "1", "meta_info": {"prompt_tokens": len(text.split())}})
        if self.path == "/flush_cache":
            METRICS.flush()
            return self.reply(200, {})
        self.reply(404, {"error": "not found"})


def join_mooncake() -> object:
    """With the Mooncake backend, mount a segment through the config SGLang would read."""
    path = os.environ.get("SGLANG_HICACHE_MOONCAKE_CONFIG_PATH")
    if flag("--hicache-storage-backend") != "mooncake" or not path:
        return None
    from mooncake.store import MooncakeDistributedStore

    with open(path) as f:
        config = json.load(f)
    store = MooncakeDistributedStore()
    rc = store.setup(
        config["local_hostname"],
        config["metadata_server"],
        64 << 20,
        16 << 20,
        config["protocol"],
        config["device_name"],
        config["master_server_address"],
    )
    if rc != 0:
        sys.exit(f"mooncake setup failed: {rc}")
    return store


class PrefixCache:
    """HiCache's tiers as far as its counters show them: a prefix served once sits in the device
    tier (GPU and host memory, emptied by /flush_cache) and is written back to the L3 store, the
    real Mooncake store this process joined; a prefix missing from the device tier is read back
    from the store when the store holds it. Without a storage backend nothing is written or read."""

    def __init__(self, l3: object) -> None:
        self.l3 = l3
        self.device: set[str] = set()
        self.hit_tokens = 0
        self.backuped_tokens = 0

    def serve_prefix(self, text: str) -> None:
        key = "standin-prefix-" + hashlib.sha256(text.encode()).hexdigest()
        tokens = len(text.split())
        if key in self.device or self.l3 is None:
            self.device.add(key)
            return
        if self.l3.is_exist(key) == 1 and self.l3.get(key) == text.encode():  # type: ignore[attr-defined]
            self.hit_tokens += tokens  # read back through the store, bytes checked
        elif self.l3.put(key, text.encode()) == 0:  # type: ignore[attr-defined]
            self.backuped_tokens += tokens
        self.device.add(key)

    def flush(self) -> None:
        self.device.clear()

    def exposition(self, model: str) -> str:
        label = f'{{model_name="{model}"}}'
        return (
            "# TYPE sglang:storage_prefetch_hit_tokens_total counter\n"
            f"sglang:storage_prefetch_hit_tokens_total{label} {float(self.hit_tokens)}\n"
            "# TYPE sglang:backuped_tokens_total counter\n"
            f"sglang:backuped_tokens_total{label} {float(self.backuped_tokens)}\n"
        )


store = join_mooncake()
METRICS = PrefixCache(store)
if flag("--node-rank", "0") != "0":
    while True:  # ranks > 0 serve no HTTP
        time.sleep(3600)
HOST, PORT = flag("--host", "127.0.0.1") or "", int(flag("--port", "30000") or 30000)
server = ThreadingHTTPServer((HOST, PORT), Handler)
# the line SGLang's HTTP server (uvicorn) prints once it listens: what a log reader sees first
print(f"INFO:     Uvicorn running on http://{HOST}:{PORT} (Press CTRL+C to quit)", flush=True)
server.serve_forever()
