"""Profiles as data -> bench_serving argv, checked against sglang 0.5.23's own source and parser."""

from __future__ import annotations

import ast
import json
import os
import subprocess
from pathlib import Path

import pytest

from flashfleet.bench.argv import bench_args
from flashfleet.bench.profiles import (
    BACKENDS,
    BENCH_MODULES,
    BENCH_SERVING_FLAGS,
    DATASETS,
    ProfileError,
    get_profile,
    load_profiles,
    profile_from_mapping,
)
from flashfleet.bench.runner import command
from tests.bench.conftest import ORACLE, ORACLE_SITE

PARSE = Path(__file__).with_name("oracle_parse_bench.py")


def serving_source() -> str:
    out = subprocess.run(
        [str(ORACLE), "-c", "import importlib.util as u; print(u.find_spec('sglang').submodule_search_locations[0])"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return (Path(out.stdout.strip()) / "benchmark" / "serving.py").read_text()


def add_argument_calls(source: str) -> list[ast.Call]:
    return [
        n for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.Call) and getattr(n.func, "attr", None) == "add_argument"
    ]  # fmt: skip


def choices_of(source: str, flag: str) -> set[str]:
    for call in add_argument_calls(source):
        if any(isinstance(a, ast.Constant) and a.value == flag for a in call.args):
            for kw in call.keywords:
                if kw.arg == "choices" and isinstance(kw.value, ast.List):
                    return {e.value for e in kw.value.elts if isinstance(e, ast.Constant)}
    raise AssertionError(f"{flag} has no literal choices")


def test_flag_table_is_exactly_the_real_parsers_flags():
    source = serving_source()
    real = {
        a.value for call in add_argument_calls(source) for a in call.args
        if isinstance(a, ast.Constant) and str(a.value).startswith("--")
    }  # fmt: skip
    assert real == BENCH_SERVING_FLAGS
    assert choices_of(source, "--dataset-name") == DATASETS
    # --backend's choices are the keys of ASYNC_REQUEST_FUNCS
    tree = ast.parse(source)
    funcs = next(
        n.value for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", None) == "ASYNC_REQUEST_FUNCS"
    )  # fmt: skip
    assert isinstance(funcs, ast.Dict)
    assert {k.value for k in funcs.keys if isinstance(k, ast.Constant)} == BACKENDS


def test_packaged_profiles_cover_the_workloads():
    profiles = load_profiles()
    assert {"chat-1k1k", "agentic-long", "multimodal", "sweep"} <= set(profiles)
    assert profiles["multimodal"].dataset == "image"
    assert profiles["multimodal"].backend == "sglang-oai-chat"  # images travel as chat image_url parts
    assert len(profiles["sweep"].concurrency) >= 4
    assert list(profiles["sweep"].concurrency) == sorted(profiles["sweep"].concurrency)
    chat = profiles["chat-1k1k"]
    assert chat.args["random-input-len"] == 1024
    assert chat.args["random-output-len"] == 1024


def test_every_profile_argv_parses_with_the_real_parser():
    profiles = load_profiles()
    cases = [(p, c) for p in profiles.values() for c in p.concurrency]
    argvs = [bench_args(p, "http://127.0.0.1:8000", c, seed=1000 + c) for p, c in cases]
    assert all(isinstance(w, str) for a in argvs for w in a)
    env = {**os.environ, "PYTHONPATH": str(ORACLE_SITE)}
    out = subprocess.run(
        [str(ORACLE), str(PARSE)],
        input=json.dumps(argvs),
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    parsed = json.loads(out.stdout)
    for (profile, conc), ns in zip(cases, parsed, strict=True):
        assert "error" not in ns, (profile.name, ns)
        assert ns["backend"] == profile.backend
        assert ns["dataset_name"] == profile.dataset
        assert ns["max_concurrency"] == conc
        assert ns["num_prompts"] == profile.num_prompts(conc)
        assert ns["base_url"] == "http://127.0.0.1:8000"
        assert ns["output_file"] == "bench.jsonl"
        assert ns["tag"] == f"{profile.name}/c{conc}"
        for key, value in profile.args.items():
            if key == "warmup-requests":
                continue  # below: a cold level warms up in a run of its own
            want = float(value) if key == "request-rate" else value  # argparse reads "inf" as a float
            assert ns[key.replace("-", "_")] == want, (profile.name, key)
        assert ns["seed"] == 1000 + conc
        if profile.cache == "shared-prefix":
            assert ns["flush_cache"] is True
            assert ns["warmup_requests"] == profile.warmup_requests(conc)
        else:
            assert ns["flush_cache"] is False
            assert ns["warmup_requests"] == 0


def test_the_real_parser_rejects_what_a_typo_would_produce():
    env = {**os.environ, "PYTHONPATH": str(ORACLE_SITE)}
    out = subprocess.run(
        [str(ORACLE), str(PARSE)], input=json.dumps([["--random-input-length", "5"]]),
        capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    assert "unrecognized arguments" in json.loads(out.stdout)[0]["error"]


def test_argv_is_a_list_with_both_module_names():
    profile = get_profile("sweep")
    args = bench_args(profile, "http://10.0.0.5:8000/", 16, seed=7)
    for module in BENCH_MODULES:
        argv = command("python3", module, args)
        assert argv[:3] == ("python3", "-m", module)
    assert args[args.index("--base-url") + 1] == "http://10.0.0.5:8000"  # trailing slash dropped
    assert args[args.index("--random-range-ratio") + 1] == "1.0"
    assert "--disable-tqdm" in args


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"args": {"random-input-length": 5}}, "no flag --random-input-length"),
        ({"args": {"max-concurrency": 5}}, "set by the driver"),
        ({"args": {"disable-stream": False}}, "leave a switch out"),
        ({"args": {"flush-cache": True}}, "set by the driver"),
        ({"args": {"seed": 1}}, "set by the driver"),
        ({"dataset": "generated-shared-prefix"}, "shares prefixes on purpose"),
        ({"cache": "warm"}, "cache must be one of"),
        ({"concurrency": []}, "non-empty list"),
        ({"concurrency": [0, 4]}, "integers >= 1"),
        ({"backend": "openai"}, "unknown backend"),
        ({"dataset": "sharegpt4"}, "unknown dataset"),
        ({"gate": {"max_p99_ttft": 5}}, "unknown threshold"),
        ({"concurency": [1]}, "unknown field"),
    ],
)
def test_bad_profiles_fail_on_load(body, message):
    with pytest.raises(ProfileError, match=message):
        profile_from_mapping("p", body)


def test_switches_lists_and_request_counts():
    profile = profile_from_mapping(
        "p",
        {"concurrency": [2, 32], "prompts_per_concurrency": 3, "min_prompts": 10,
         "args": {"disable-stream": True, "header": ["A=1", "B=2"]}},
    )  # fmt: skip
    args = bench_args(profile, "http://127.0.0.1:1", 2, seed=3)
    assert args[args.index("--disable-stream") + 1].startswith("--")  # bare switch
    i = args.index("--header")
    assert args[i + 1 : i + 3] == ["A=1", "B=2"]
    assert profile.num_prompts(2) == 10
    assert profile.num_prompts(32) == 96
    assert profile.with_overrides(num_prompts=5).num_prompts(32) == 5


def test_unknown_profile_names_the_choices():
    with pytest.raises(ProfileError, match="chat-1k1k"):
        get_profile("chat")


@pytest.mark.parametrize("url", ["127.0.0.1:8000", "ftp://h:1", "http://h:1/?x=1", "http://"])
def test_endpoint_must_be_a_base_url(url):
    with pytest.raises(ValueError, match="base URL"):
        bench_args(get_profile("chat-1k1k"), url, 1, seed=1)
