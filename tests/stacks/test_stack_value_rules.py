"""The adversarial review's low findings on stack values, each run through the CLI as a user would:
a file nested 20,000 levels deep, opt-ins written as "yes" or 1, CIDRs that are not CIDR strings,
scoped IPv6 addresses, and one host listed twice in another spelling. Each is refused with exit 2
and one line naming its YAML path (or the file) and rule, or normalised before it reaches a host."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from flashfleet.cli import main

S = "flashfleet:stack"
Doc = dict[str, Any]
WriteStack = Callable[[str, Callable[[Doc], None]], Path]
ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOv4b5mJ8m8Sx1ZqjS3uXK3bC9QwYqkzq0J1k7o6ZrXy"


def spec(doc: Doc) -> Doc:
    return doc["config"][S]


def src(doc: Doc) -> Doc:
    return spec(doc)["nodes"]["source"]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(argv)
    got = capsys.readouterr()
    return rc, got.out, got.err


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err  # one line, never a traceback
    return lines[0]


@pytest.mark.parametrize("depth", [20_000, 200])
def test_a_deeply_nested_file_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], depth: int
) -> None:
    # 20,000: deeper than PyYAML's composer can recurse; 200: parses, then would reach pydantic
    nested = "[" * depth + "]" * depth
    (tmp_path / "Pulumi.deep.yaml").write_text(f"config:\n  {S}: {nested}\n")
    rc, _, err = run(["validate", "deep", "--stacks-dir", str(tmp_path)], capsys)
    assert rc == 2, err
    line = one_line(err)
    assert "Pulumi.deep.yaml: nested more than 64 levels deep" in line
    assert "[rule: yaml]" in line


def _open_to_all(d: Doc) -> None:
    src(d)["allowedCidrs"] = ["0.0.0.0/0"]


OPT_INS: list[tuple[str, str, Callable[[Doc, Any], None], str]] = [
    ("allowPublicIngress", "h200-lowlat", lambda d, v: (_open_to_all(d), src(d).update(allowPublicIngress=v)), "nodes.source.allowPublicIngress"),
    ("allowUnpinnedHostKeys", "mi355x-lowlat", lambda d, v: (d["config"].update({"flashfleet:hfToken": {"secure": "v1:abcdef"}}), src(d).update(allowUnpinnedHostKeys=v)), "nodes.source.allowUnpinnedHostKeys"),
    ("keepCaches", "mi355x-lowlat", lambda d, v: spec(d).update(teardown={"keepCaches": v}), "teardown.keepCaches"),
    ("jitCache", "gb300-lowlat", lambda d, v: spec(d).update(caches={"jit": v}), "caches.jit"),
    ("prestaged", "mi355x-lowlat", lambda d, v: spec(d).update(weights={"prestaged": v}), "weights.prestaged"),
    ("publicIp", "h200-lowlat", lambda d, v: src(d).update(publicIp=v), "nodes.source.publicIp"),
]  # fmt: skip


@pytest.mark.parametrize("value", ["yes", 1, "true", 0, "no"])
@pytest.mark.parametrize(("base", "change", "path"), [c[1:] for c in OPT_INS], ids=[c[0] for c in OPT_INS])
def test_a_switch_takes_a_yaml_boolean_only(
    write_stack: WriteStack,
    capsys: pytest.CaptureFixture[str],
    base: str,
    change: Callable[[Doc, Any], None],
    path: str,
    value: object,
) -> None:
    rc, _, err = run(
        ["validate", "broken", "--stacks-dir", str(write_stack(base, lambda d: change(d, value)))], capsys
    )
    assert rc == 2, err
    assert "Traceback" not in err
    # one line for the switch (and, for "yes" beside 0.0.0.0/0, one for the CIDRs it fails to open)
    (line,) = [ln for ln in err.splitlines() if f"{S}.{path}:" in ln]
    assert "[rule: type]" in line, err


@pytest.mark.parametrize(("base", "change", "path"), [c[1:] for c in OPT_INS], ids=[c[0] for c in OPT_INS])
def test_a_switch_written_true_is_the_opt_in(
    write_stack: WriteStack,
    capsys: pytest.CaptureFixture[str],
    base: str,
    change: Callable[[Doc, Any], None],
    path: str,
) -> None:
    rc, _, err = run(
        ["validate", "broken", "--stacks-dir", str(write_stack(base, lambda d: change(d, True)))], capsys
    )
    assert rc == 0, err


@pytest.mark.parametrize(
    "value",
    [0, 10, "10.0.0.1", "2001:db8::1", "fe80::1%eth0/128", "fe80::%1/64", ["10.0.0.0/8"], None],
    ids=[
        "number 0",
        "number 10",
        "bare IPv4",
        "bare IPv6",
        "scoped /128",
        "scoped numeric zone",
        "a list",
        "null",
    ],
)
def test_a_cidr_is_a_string_with_its_prefix(
    write_stack: WriteStack, capsys: pytest.CaptureFixture[str], value: object
) -> None:
    rc, _, err = run(
        [
            "validate",
            "broken",
            "--stacks-dir",
            str(write_stack("h200-lowlat", lambda d: src(d).update(allowedCidrs=[value]))),
        ],
        capsys,
    )
    assert rc == 2, err
    line = one_line(err)
    assert f"{S}.nodes.source.allowedCidrs[0]:" in line, err
    assert "CIDR notation" in line, err


@pytest.mark.parametrize("field", ["address", "privateAddress"])
@pytest.mark.parametrize("value", ["fe80::1%eth0", "fe80::1%1", "fe80::1%25eth0"])
def test_a_scoped_address_is_refused(
    write_stack: WriteStack, capsys: pytest.CaptureFixture[str], field: str, value: str
) -> None:
    rc, _, err = run(
        [
            "validate",
            "broken",
            "--stacks-dir",
            str(write_stack("mi355x-lowlat", lambda d: src(d)["hosts"][0].update({field: value}))),
        ],
        capsys,
    )
    assert rc == 2, err
    line = one_line(err)
    assert f"{S}.nodes.source.hosts[0].{field}:" in line, err
    assert "scoped address" in line, err


def _two_hosts(first: str, second: str) -> Callable[[Doc], None]:
    def change(d: Doc) -> None:
        host = src(d)["hosts"][0]
        src(d)["hosts"] = [{**host, "address": first}, {**host, "address": second}]
        spec(d)["nodes"]["count"] = 2

    return change


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("node.example.com", "NODE.example.com."),
        ("node.example.com", "node.example.com."),
        ("2001:db8::1", "2001:DB8:0::1"),
    ],
    ids=["case and dot", "trailing dot", "IPv6 spelling"],
)
def test_one_host_in_two_spellings_is_listed_twice(
    write_stack: WriteStack, capsys: pytest.CaptureFixture[str], first: str, second: str
) -> None:
    rc, _, err = run(
        ["validate", "broken", "--stacks-dir", str(write_stack("mi355x-lowlat", _two_hosts(first, second)))],
        capsys,
    )
    assert rc == 2, err
    line = one_line(err)
    assert f"{S}.nodes.source:" in line, err
    assert "hosts listed twice" in line, err


def test_the_canonical_name_is_what_reaches_the_inventory(
    write_stack: WriteStack, capsys: pytest.CaptureFixture[str]
) -> None:
    def change(d: Doc) -> None:
        src(d)["hosts"][0].update(
            address="GPU-01.Example.COM.", privateAddress="Node-1.Internal.", hostKeys=[ED25519]
        )

    rc, out, err = run(
        [
            "inventory",
            "broken",
            "--stacks-dir",
            str(write_stack("mi355x-lowlat", change)),
            "--format",
            "json",
        ],
        capsys,
    )
    assert rc == 0, err
    (hostvars,) = json.loads(out)["all"]["hosts"].values()
    assert hostvars["ansible_host"] == "gpu-01.example.com"
    for spelling in ("GPU-01", "Node-1", "COM.", "Internal."):
        assert spelling not in out, spelling
