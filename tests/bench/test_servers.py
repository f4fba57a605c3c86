"""Which servers a run checks, from the rendered recipe; readiness and PD share from their answers."""

from __future__ import annotations

import pytest

from flashfleet.bench.fingerprint import RecipeSelection, recipe_fingerprint, recipe_gpus
from flashfleet.bench.servers import (
    GENERATION_TOKENS,
    PROMPT_TOKENS,
    REQUESTS,
    Server,
    parse_counters,
    parse_server,
    servers_from_recipe,
    share_problems,
    wait_ready,
)
from flashfleet.cli import main
from tests.serve.standin_sglang import StandinState


def test_pd_recipe_gives_its_prefill_and_decode_servers_not_the_router():
    fp = recipe_fingerprint(RecipeSelection("gb300", "high-throughput", "pd"))
    servers = servers_from_recipe(fp, ["10.0.0.5"])
    assert servers == [Server("prefill", "http://10.0.0.5:31000"), Server("decode", "http://10.0.0.5:32000")]
    assert recipe_gpus(fp) == 4  # TP2 prefill + TP2 decode


def test_unified_recipe_gives_one_server_with_all_its_gpus():
    fp = recipe_fingerprint(RecipeSelection("h200", "high-throughput"))
    assert servers_from_recipe(fp, ["node-a"]) == [Server("server", "http://node-a:30000")]
    assert recipe_gpus(fp) == 8


@pytest.mark.parametrize(
    ("text", "why"),
    [("router=http://x:1", "ROLE one of"), ("prefill=x:1", "ROLE=URL"), ("decode=http://x:1@two", "integer"),
     ("decode=http://x:1@0", "at least 1")],
)  # fmt: skip
def test_bad_server_option_is_one_line_exit_2(text, why, capsys, tmp_path, monkeypatch):
    with pytest.raises(ValueError, match=why):
        parse_server(text)
    monkeypatch.chdir(tmp_path)  # the default --results is ./results
    assert main(["bench", "stk", "--endpoint", "http://127.0.0.1:9", "--server", text]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err
    assert list(tmp_path.iterdir()) == []  # refused before the results folder is made


def test_counters_sum_over_label_sets():
    state = StandinState()
    state.count(PROMPT_TOKENS, 5)
    text = (
        state.metrics_text()
        + f'{PROMPT_TOKENS}{{model_name="m",engine_type="prefill",is_streaming="true"}} 7.0\n'
    )
    assert parse_counters(text, [PROMPT_TOKENS, GENERATION_TOKENS]) == {
        PROMPT_TOKENS: 12.0,
        GENERATION_TOKENS: 0.0,
    }


def test_metrics_that_cannot_be_read_refuse_the_pd_claim():
    prefill, decode = Server("prefill", "http://p:1"), Server("decode", "http://d:2")
    before = {
        prefill.url: "/metrics answered 404 (is --enable-metrics on?)",
        decode.url: {GENERATION_TOKENS: 0.0},
    }
    after = {
        prefill.url: "/metrics answered 404 (is --enable-metrics on?)",
        decode.url: {GENERATION_TOKENS: 9.0},
    }
    problems, served = share_problems([prefill, decode], before, after)
    assert problems == [
        "cannot show that prefill http://p:1 served its share: /metrics answered 404 (is --enable-metrics on?)"
    ]
    assert served == {decode.url: {"role": "decode", GENERATION_TOKENS: 9.0}}


def test_a_replica_cluster_gives_every_replica_and_refuses_one_that_served_nothing():
    fp = recipe_fingerprint(RecipeSelection("h200", "high-throughput", overrides={"replicas": 2}))
    servers = servers_from_recipe(fp, ["10.0.0.5", "10.0.0.6"])
    assert servers == [
        Server("server", "http://10.0.0.5:31000", instance="replica-0"),
        Server("server", "http://10.0.0.6:31000", instance="replica-1"),
    ]  # the workers, not the router in front of them
    before = {s.url: {REQUESTS: 3.0} for s in servers}
    after = {servers[0].url: {REQUESTS: 19.0}, servers[1].url: {REQUESTS: 3.0}}
    problems, served = share_problems(servers, before, after)
    assert problems == [
        "replica-1 http://10.0.0.6:31000 served 0 requests during the run: a replica the router never "
        "registered, or one that died, left the others to answer everything"
    ]
    assert served[servers[0].url] == {"role": "server", "instance": "replica-0", REQUESTS: 16.0}
    # one server alone has no share to show
    assert Server("server", "http://s:1").share_metric is None


def test_wait_ready_polls_until_every_rank_reports():
    calls = []

    def fetch(urls):
        calls.append(urls)
        ranks = 2 if len(calls) >= 3 else 1
        states = ",".join(["{}"] * ranks)
        return {u: (200, f'{{"internal_states": [{states}]}}') for u in urls}

    now = [0.0]
    waiting = wait_ready([Server("server", "http://s:1", dp_ranks=2)], timeout_s=60, fetch=fetch,
                         clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))  # fmt: skip
    assert waiting == []
    assert len(calls) == 3
    assert calls[0] == ["http://s:1/health", "http://s:1/server_info"]
