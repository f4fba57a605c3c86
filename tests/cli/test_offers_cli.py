"""`flashfleet offers`: the catalog's instance types, regions and prices, offline; every price
with its source, "unknown" where the catalog has none; --gpu, --region, --json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flashfleet.catalog.instances import instance_catalog
from flashfleet.cli import main


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict[str, object]]:
    assert main(["offers", *argv, "--json"]) == 0
    rows: list[dict[str, object]] = json.loads(capsys.readouterr().out)
    return rows


def test_every_catalog_type_and_listed_price_is_offered_with_its_source(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rows = _json(capsys)
    catalog = instance_catalog()
    assert {r["instance_type"] for r in rows} == set(catalog)
    for row in rows:
        t = catalog[str(row["instance_type"])]
        if row["price_usd_per_hour"] is None:
            assert not t.prices_by_region
            assert "no public on-demand price" in str(row["price_source"])
        else:
            assert row["price_usd_per_hour"] == t.prices_by_region[str(row["region"])]
            assert str(row["price_source"]).startswith(str(t.price_source))
    priced = {(r["instance_type"], r["region"]) for r in rows if r["price_usd_per_hour"] is not None}
    assert priced == {(t.name, region) for t in catalog.values() for region in t.prices_by_region}


def test_gpu_and_region_filter(capsys: pytest.CaptureFixture[str]) -> None:
    rows = _json(capsys, "--gpu", "H200", "--region", "eu-north-1")
    assert {r["hardware"] for r in rows} == {"h200"}
    assert {r["region"] for r in rows} == {"eu-north-1"}
    by_type = {r["instance_type"]: r["price_usd_per_hour"] for r in rows}
    assert by_type == {"p5en.48xlarge": 67.7267, "p5e.48xlarge": None}
    far = _json(capsys, "--gpu", "h200", "--region", "ap-south-1")
    assert all(r["price_usd_per_hour"] is None for r in far)
    assert "no listed price in ap-south-1 (listed: eu-north-1" in str(far[0]["price_source"])


def test_text_table_numbers_each_source_and_names_hardware_not_on_aws(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["offers"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["TYPE", "GPU", "GPUS", "ARCH", "CAPACITY", "REGION", "USD/HOUR", "SOURCE"]
    p5en = next(line for line in out if line.startswith("p5en.48xlarge") and "us-east-1" in line)
    assert p5en.split()[-2:] == ["63.2960", "[1]"]
    assert any(line.startswith("[1] on-demand price as listed by") for line in out)
    assert out[-1] == "mi355x: runs on existing hosts or Kubernetes (no AWS instance type in the catalog)"
    assert main(["offers", "--gpu", "mi355x"]) == 0
    assert capsys.readouterr().out.startswith("mi355x: runs on existing hosts or Kubernetes")


def test_an_unknown_gpu_is_one_line_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["offers", "--gpu", "h20"]) == 2
    err = capsys.readouterr().err
    assert (
        err.strip()
        == "flashfleet offers: --gpu h20: no such hardware (known: cpu, gb300, h200, mi355x); did you mean h200?"
    )


def test_offers_needs_no_cloud_or_credentials(tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path), "HOME": str(tmp_path), "AWS_CONFIG_FILE": str(tmp_path / "none")}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    proc = subprocess.run(
        [sys.executable, "-m", "flashfleet", "offers", "--gpu", "gb300"],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "p6e-gb300.36xlarge" in proc.stdout
    assert "Capacity Blocks only" in proc.stdout
    assert "boto" not in proc.stderr
