"""Every server behind the endpoint, asked directly: ready before the first measured request,
and, on PD and behind a cluster's router, each one's own counters showing it served its share.

A router answers /health while a prefill or decode server behind it is still loading, and a
data-parallel server answers while one of its ranks is not; bench_serving only checks the
endpoint it loads. A PD pair whose prefill never sees a request (a port mismatch, a bootstrap
that fell back) still answers every request from decode, so the run looks fine from outside;
a replica the router never registered (or that died) leaves the others to answer everything.
Both are found here from the servers' own answers: /health, /server_info (one internal state
per DP rank) and /metrics (sglang's Prometheus counters; the servers run with --enable-metrics).

Ready means serving: /health can answer while the first prefill is still initializing, so each
server that takes generations on its own (a unified server, every replica) must also answer a
one-token generation of its own, the endpoint one through whatever is in front, and each prefill
and decode server must count its part of one sent through the endpoint.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flashfleet import polling
from flashfleet.bench.runner import Invocation, Runner
from flashfleet.bringup.secret_env import API_KEY_ENV
from flashfleet.polling import poll

# sglang 0.5.23 srt/observability/metrics_collector.py (TokenizerMetricsCollector)
PROMPT_TOKENS = "sglang:prompt_tokens_total"
GENERATION_TOKENS = "sglang:generation_tokens_total"
REQUESTS = "sglang:num_requests_total"
# What each PD role must have done during the run for the split to be real.
PD_SHARE = {"prefill": PROMPT_TOKENS, "decode": GENERATION_TOKENS}
PD_PEER = {"prefill": "decode", "decode": "prefill"}
SHARE_COUNTERS = (PROMPT_TOKENS, GENERATION_TOKENS, REQUESTS)
HTTP_ROLES = ("server", "language", "encoder", "prefill", "decode")


@dataclass(frozen=True)
class Server:
    role: str  # server | language | encoder | prefill | decode
    url: str  # base URL, e.g. http://10.0.0.5:31000
    dp_ranks: int = 1  # data-parallel ranks that must each report an internal state
    instance: str = ""  # the cluster instance it serves (replica-1, prefill-0); "" alone

    @property
    def label(self) -> str:
        return f"{self.instance or self.role} {self.url}"

    @property
    def share_metric(self) -> str | None:
        """The counter that shows this server did its part of the run, or None (nothing to show)."""
        if self.role in PD_SHARE:
            return PD_SHARE[self.role]
        return REQUESTS if self.instance and self.role != "encoder" else None  # a replica


# Several URLs at once -> {url: (status, body)}: one round trip through a runner on a node.
FetchMany = Callable[[Sequence[str]], dict[str, tuple[int, str]]]

# URL -> JSON body, several at once -> {url: (status, body)}: POSTs, like FetchMany's GETs.
PostMany = Callable[[Mapping[str, Any]], dict[str, tuple[int, str]]]
# The smallest real generation (sglang's native /generate): one new token, greedy.
PROBE_GENERATION = {"text": "Hello", "sampling_params": {"max_new_tokens": 1, "temperature": 0}}
GENERATING_ROLES = ("server",)  # PD sides, encoders and EPD's language server serve only as a pair

FETCH_MARK = "flashfleet-fetch:"
# Run by the interpreter in the serving image on node 0 (the servers' ports need not be open to
# the machine flashfleet runs on): standard library only, one JSON line per URL. An item is a
# URL (GET) or [URL, body] (POST of the body as JSON).
# With an API key (OPENAI_API_KEY, from the bench role's root-only env file) /server_info needs
# `Authorization: Bearer`; the key is never an argument of the script.
FETCH_SCRIPT = """
import json, os, sys, urllib.request, urllib.error
key = os.environ.get("OPENAI_API_KEY")
for item in json.loads(sys.argv[1]):
    url, data = (item, None) if isinstance(item, str) else (item[0], json.dumps(item[1]).encode())
    try:
        headers = {"Authorization": "Bearer " + key} if key else {}
        if data is not None:
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(url, data=data, headers=headers)
        with urllib.request.urlopen(req, timeout=60 if data else 10) as r:
            status, body = r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        status, body = e.code, e.read().decode(errors="replace")
    except Exception as e:
        status, body = 0, str(e)
    print("flashfleet-fetch:" + json.dumps([url, status, body]), flush=True)
"""


def auth_headers() -> dict[str, str]:
    """`Authorization: Bearer` with the serving API key of this environment (FLASHFLEET_API_KEY)."""
    key = os.environ.get(API_KEY_ENV)
    return {"Authorization": f"Bearer {key}"} if key else {}


def http_get(url: str, timeout_s: float) -> tuple[int, str]:
    """(status, body), with this environment's API key; status 0 when nothing answered."""
    return polling.http_get(url, timeout_s, auth_headers())


def fetch_here(urls: Sequence[str]) -> dict[str, tuple[int, str]]:
    return {url: http_get(url, 10.0) for url in urls}


def post_here(bodies: Mapping[str, Any]) -> dict[str, tuple[int, str]]:
    import urllib.error
    import urllib.request

    out = {}
    for url, body in bodies.items():
        headers = {"Content-Type": "application/json", **auth_headers()}
        req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                out[url] = (resp.status, resp.read().decode(errors="replace"))
        except urllib.error.HTTPError as err:
            out[url] = (err.code, err.read().decode(errors="replace"))
        except (urllib.error.URLError, OSError, TimeoutError) as err:
            out[url] = (0, str(getattr(err, "reason", err)))
    return out


def _through(
    runner: Runner, python: str, items: list[Any], urls: Sequence[str]
) -> dict[str, tuple[int, str]]:
    argv = (python, "-c", FETCH_SCRIPT, json.dumps(items))
    try:
        done = runner(Invocation(argv=argv, output_name="none", timeout_s=120))
    except Exception as err:
        return {url: (0, f"runner failed: {err}") for url in urls}
    out = {url: (0, done.runner_error or f"no answer (exit {done.returncode})") for url in urls}
    for line in done.log.splitlines():
        if line.startswith(FETCH_MARK):
            url, status, body = json.loads(line[len(FETCH_MARK) :])
            out[url] = (int(status), str(body))
    return out


def fetch_through(runner: Runner, python: str) -> FetchMany:
    """Fetch from where the benchmark runs (node 0, inside the serving image)."""

    def fetch(urls: Sequence[str]) -> dict[str, tuple[int, str]]:
        return _through(runner, python, list(urls), urls)

    return fetch


def post_through(runner: Runner, python: str) -> PostMany:
    """POST from where the benchmark runs (node 0, inside the serving image)."""

    def post(bodies: Mapping[str, Any]) -> dict[str, tuple[int, str]]:
        return _through(runner, python, [[url, body] for url, body in bodies.items()], list(bodies))

    return post


def not_serving(label: str, answer: tuple[int, str]) -> str | None:
    """Why a one-token generation's answer is not a generation, or None."""
    status, body = answer
    if status != 200:
        return (
            f"{label}: answers /health but not a generation yet ({status or 'nothing'}: {body.strip()[:120]})"
        )
    try:
        data = json.loads(body)
    except ValueError:
        return f"{label}: its generation answer is not JSON"
    if not isinstance(data, dict) or "text" not in data:
        return f"{label}: its generation answer has no text"
    return None


def not_ready(server: Server, answers: Mapping[str, tuple[int, str]]) -> str | None:
    """Why this server is not ready yet (from its /health and /server_info answers), or None."""
    status, body = answers.get(f"{server.url}/health", (0, "not asked"))
    if status != 200:
        return f"{server.label}: /health answered {status or 'nothing'} ({body.strip()[:120]})"
    status, body = answers.get(f"{server.url}/server_info", (0, "not asked"))
    if status != 200:
        return f"{server.label}: /server_info answered {status or 'nothing'}"
    try:
        states = json.loads(body).get("internal_states")
    except (ValueError, AttributeError):
        return f"{server.label}: /server_info is not JSON"
    ready = len(states) if isinstance(states, list) else 0
    if ready < server.dp_ranks:
        return f"{server.label}: {ready} of {server.dp_ranks} data-parallel ranks report a state"
    return None


def wait_ready(
    servers: Sequence[Server],
    *,
    timeout_s: float,
    fetch: FetchMany = fetch_here,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    interval_s: float = 5.0,
    generate: PostMany | None = None,
    endpoint: str | None = None,
) -> list[str]:
    """Poll until every server and rank is ready and, with ``generate``, every server that
    generates on its own and then the endpoint have each answered a generation of their own, and
    every prefill and decode server has counted its part of one sent through the endpoint; the
    reasons of those that never were."""
    urls = [f"{s.url}/{path}" for s in servers for path in ("health", "server_info")]
    served: set[str] = set()  # generation URLs that answered once: not asked again

    def waiting() -> list[str]:
        answers = fetch(urls)
        left = [why for s in servers if (why := not_ready(s, answers)) is not None]
        if generate is None or left:
            return left
        asks = {f"{s.url}/generate": s.label for s in servers if s.role in GENERATING_ROLES}
        if endpoint is not None:
            asks.setdefault(f"{endpoint}/generate", f"endpoint {endpoint}")
        asks = {url: label for url, label in asks.items() if url not in served}
        got = generate(dict.fromkeys(asks, PROBE_GENERATION)) if asks else {}
        for url, label in asks.items():
            why = not_serving(label, got.get(url, (0, "not asked")))
            if why is None:
                served.add(url)
            else:
                left.append(why)
        if endpoint is not None and not left:
            pd = [s for s in servers if s.role in PD_SHARE]
            left += _pd_not_served(pd, endpoint, generate, fetch, served)
        return left

    return poll(
        waiting, lambda left: not left, timeout_s=timeout_s, interval_s=interval_s, clock=clock, sleep=sleep
    )


def _pd_not_served(
    pd: Sequence[Server], endpoint: str, generate: PostMany, fetch: FetchMany, served: set[str]
) -> list[str]:
    """A prefill or decode server takes no generation alone (it waits for its peer): send the
    endpoint one generation per such server not yet seen serving, each a new prompt (a router
    that routes by prefix spreads them), and see which counted its part (PD_SHARE). A server
    whose counters cannot be read is left to the share check after the run."""
    todo = [s for s in pd if s.url not in served]
    if not todo:
        return []
    before = read_counters(todo, SHARE_COUNTERS, fetch)
    for i in range(len(todo)):
        text = f"{PROBE_GENERATION['text']} {i} {time.time_ns()}"
        generate({f"{endpoint}/generate": {**PROBE_GENERATION, "text": text}})
    after = read_counters(todo, SHARE_COUNTERS, fetch)
    left = []
    for s in todo:
        b, a = before.get(s.url), after.get(s.url)
        if not isinstance(b, dict) or not isinstance(a, dict) or a[PD_SHARE[s.role]] > b[PD_SHARE[s.role]]:
            served.add(s.url)
        else:
            sent = f"{len(todo)} generation{'s' if len(todo) > 1 else ''}"
            left.append(
                f"{s.label}: answers /health but counted no part of {sent} sent through the endpoint "
                f"(still initializing, or a silent PD fallback: {PD_PEER[s.role]} did it all)"
            )
    return left


Counters = dict[str, float]  # metric name -> sum over its label sets


def parse_counters(text: str, names: Iterable[str]) -> Counters:
    from prometheus_client.parser import text_string_to_metric_families

    wanted = set(names)
    out = dict.fromkeys(wanted, 0.0)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in wanted:
                out[sample.name] += sample.value
    return out


def read_counters(
    servers: Sequence[Server], names: Iterable[str], fetch: FetchMany = fetch_here
) -> dict[str, Counters | str]:
    """Per server URL, its counters, or why they could not be read."""
    names = tuple(names)
    out: dict[str, Counters | str] = {}
    answers = fetch([f"{s.url}/metrics" for s in servers])
    for server in servers:
        status, body = answers[f"{server.url}/metrics"]
        if status != 200:
            out[server.url] = f"/metrics answered {status or 'nothing'} (is --enable-metrics on?)"
            continue
        try:
            out[server.url] = parse_counters(body, names)
        except ValueError as err:
            out[server.url] = f"/metrics is not Prometheus text: {err}"
    return out


def share_problems(
    servers: Sequence[Server],
    before: Mapping[str, Counters | str],
    after: Mapping[str, Counters | str],
) -> tuple[list[str], dict[str, Any]]:
    """Refusals, and what each PD server or replica did during the run (for the summary)."""
    problems, served = [], {}
    for server in servers:
        metric = server.share_metric
        if metric is None:
            continue
        b, a = before.get(server.url), after.get(server.url)
        if not isinstance(b, dict) or not isinstance(a, dict):
            why = a if isinstance(a, str) else b
            problems.append(f"cannot show that {server.label} served its share: {why}")
            continue
        delta = {name: a[name] - b.get(name, 0.0) for name in a}
        served[server.url] = {
            "role": server.role,
            **({"instance": server.instance} if server.instance else {}),
            **delta,
        }
        if delta[metric] <= 0 and server.role not in PD_SHARE:
            problems.append(
                f"{server.label} served 0 requests during the run: a replica the router never "
                "registered, or one that died, left the others to answer everything"
            )
        elif delta[metric] <= 0:
            other = "decode" if server.role == "prefill" else "prefill"
            problems.append(
                f"silent PD fallback: {server.label} counted 0 {metric.split(':')[1]} during the run "
                f"({other} answered everything)"
            )
    return problems, served


def servers_from_recipe(recipe: Mapping[str, Any], addresses: Sequence[str]) -> list[Server]:
    """The HTTP servers of a rendered recipe (fingerprint form), at their nodes' addresses.

    Ranks > 0 of a multi-node server serve no HTTP (the leader answers for them)."""
    out = []
    for proc in recipe.get("processes", []):
        argv = list(proc.get("argv", []))
        if proc.get("role") not in HTTP_ROLES or not proc.get("port"):
            continue
        if "--node-rank" in argv and argv[argv.index("--node-rank") + 1] != "0":
            continue
        node = int(proc.get("node", 0))
        if node >= len(addresses):
            continue
        dp = int(argv[argv.index("--dp-size") + 1]) if "--dp-size" in argv else 1
        url = f"http://{addresses[node]}:{proc['port']}"
        out.append(Server(proc["role"], url, dp, instance=str(proc.get("instance", ""))))
    return out


def parse_server(text: str) -> Server:
    """`ROLE=URL` or `ROLE=URL@DP` from the command line."""
    role, sep, rest = text.partition("=")
    url, _, dp = rest.partition("@")
    if not sep or role not in HTTP_ROLES or not url.startswith(("http://", "https://")):
        raise ValueError(
            f"--server wants ROLE=URL[@DP_RANKS] with ROLE one of {', '.join(HTTP_ROLES)}, not {text!r}"
        )
    try:
        ranks = int(dp) if dp else 1
    except ValueError:
        raise ValueError(f"--server {text!r}: data-parallel ranks must be an integer") from None
    if ranks < 1:
        raise ValueError(f"--server {text!r}: data-parallel ranks must be at least 1")
    return Server(role, url.rstrip("/"), ranks)
