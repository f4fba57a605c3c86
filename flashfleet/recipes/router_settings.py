"""How the cluster's router (SMG, `smg launch`) treats slow and failed workers, decided per serving
shape, each figure with its public source. `plan` shows them; the router's argv carries them as
SMG flags, every one written out so an SMG upgrade that moves a default changes nothing here.
Plain dataclasses: the recipe engine imports no pydantic.

SMG's own defaults (its parser, smg 1.13.0) hold a request 1800 s, probe a worker every 60 s and
let an unhealthy worker's removal follow service discovery, which flashfleet does not run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Shape = Literal["replicas", "pd"]

SMG_VERSION = "1.13.0"
_SMG_PARSER = f"https://pypi.org/project/smg/{SMG_VERSION}/ (smg/router_args.py, `smg launch --help`)"
_SMG_HEALTH = (
    "https://github.com/smg-project/smg (its Health Checks guide; the --remove-unhealthy-workers "
    "help in smg/router_args.py)"
)
_K8S_PROBES = (
    "https://kubernetes.io/docs/tasks/configure-pod-container/configure-liveness-readiness-startup-probes/"
)
_SGLANG_HEALTH = (
    "https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/entrypoints/http_server.py "
    "(SGLANG_HEALTH_CHECK_TIMEOUT, 20 s)"
)
_SGLANG_PD_TIMEOUT = (
    "https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/environ.py "
    "(SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT and _WAITING_TIMEOUT, 300 s each); "
    "https://github.com/smg-project/smg/issues/831 (a PD pair waits out the bootstrap when one side fails)"
)
_LLM_D_TIMEOUT = "https://github.com/llm-d/llm-d-benchmark/pull/1617 (gateway request timeout, 300 s)"


@dataclass(frozen=True)
class RouterSetting:
    """One decision about the router: its SMG flag, the value, SMG's own default, why, and where
    the figure comes from."""

    name: str  # SMG's field: request_timeout_secs
    flag: str  # --request-timeout-secs; a boolean is the flag alone (value None)
    value: int | None
    smg_default: str
    why: str
    source: str

    def words(self) -> list[str]:
        return [self.flag] if self.value is None else [self.flag, str(self.value)]

    def shown(self) -> str:
        return self.flag if self.value is None else f"{self.flag} {self.value}"


# A request longer than this is cut by the router. PD: twice SGLang's own bootstrap and waiting
# timeouts, so SGLang's error answers a stuck transfer first and the router's cap is the backstop.
_REQUEST_TIMEOUT_S = 600
# Probe every 10 s and take a worker out after 3 failures (about 30 s), as a Kubernetes readiness
# probe does by default and as the stack's own Kubernetes pods are probed.
_HEALTH_INTERVAL_S = 10
_HEALTH_FAILURES = 3
# SGLang's /health generates one token and waits up to 20 s for it under load: SMG's 5 s would
# mark a busy worker unhealthy. 30 s, as the stack's Kubernetes probes allow.
_HEALTH_TIMEOUT_S = 30
_RETRIES = 5
# A worker's circuit opens after SMG's 10 failures; it is tried again after one probe interval.
_BREAKER_RETRY_S = _HEALTH_INTERVAL_S


def router_settings(shape: Shape) -> tuple[RouterSetting, ...]:
    """The router's settings for replicas or PD across nodes (and the single-node PD router)."""
    timeout_why = (
        "twice SGLang's own PD bootstrap and waiting timeouts: SGLang aborts a stuck KV transfer "
        "first; the router's cap frees what is left, not after SMG's 1800 s"
        if shape == "pd"
        else "a request held by a dead replica is freed in 10 minutes, not SMG's 30; the same cap "
        "as PD, so a shape change does not change which requests finish"
    )
    timeout_source = _SGLANG_PD_TIMEOUT if shape == "pd" else f"{_LLM_D_TIMEOUT}; {_SGLANG_PD_TIMEOUT}"
    return (
        RouterSetting(
            name="request_timeout_secs", flag="--request-timeout-secs", value=_REQUEST_TIMEOUT_S,
            smg_default="1800", why=timeout_why, source=f"{timeout_source}; default: {_SMG_PARSER}",
        ),
        RouterSetting(
            name="health_check_interval_secs", flag="--health-check-interval-secs",
            value=_HEALTH_INTERVAL_S, smg_default="60",
            why="a dead worker leaves the rotation in about 30 s (3 probes), as a Kubernetes "
            "readiness probe's defaults and the stack's own pods do",
            source=f"{_K8S_PROBES} (periodSeconds 10, failureThreshold 3); default: {_SMG_PARSER}",
        ),
        RouterSetting(
            name="health_failure_threshold", flag="--health-failure-threshold",
            value=_HEALTH_FAILURES, smg_default="3",
            why="kept: one slow probe under load does not take a worker out",
            source=f"{_K8S_PROBES} (failureThreshold 3); default: {_SMG_PARSER}",
        ),
        RouterSetting(
            name="health_check_timeout_secs", flag="--health-check-timeout-secs",
            value=_HEALTH_TIMEOUT_S, smg_default="5",
            why="SGLang's /health generates a token and may take 20 s under full load; SMG's 5 s "
            "would mark a busy worker unhealthy",
            source=f"{_SGLANG_HEALTH}; default: {_SMG_PARSER}",
        ),
        RouterSetting(
            name="remove_unhealthy_workers", flag="--no-remove-unhealthy-workers", value=None,
            smg_default="follows service discovery (off without it)",
            why="an unhealthy worker stays registered but out of the rotation, and rejoins when "
            "its probes pass; removal is for service discovery to re-add, and flashfleet lists "
            "the workers itself (a removed worker would never return)",
            source=_SMG_HEALTH,
        ),
        RouterSetting(
            name="cb_timeout_duration_secs", flag="--cb-timeout-duration-secs", value=_BREAKER_RETRY_S,
            smg_default="60",
            why="a worker whose circuit opened (10 failures) is tried again after one probe interval, "
            "not a minute: with one prefill, the open circuit alone kept a PD endpoint down about 60 s "
            "after the restarted prefill answered again (the test hosts' prefill drill)",
            source=f"{_K8S_PROBES} (periodSeconds 10); default: {_SMG_PARSER}",
        ),
        RouterSetting(
            name="retry_max_retries", flag="--retry-max-retries", value=_RETRIES, smg_default="5",
            why="kept, and written out: a request whose worker fails is sent again to another "
            "worker, which hides one replica's restart",
            source=_SMG_PARSER,
        ),
    )  # fmt: skip


def settings_flags(shape: Shape) -> list[str]:
    return [w for s in router_settings(shape) for w in s.words()]
