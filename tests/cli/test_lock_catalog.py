"""`flashfleet lock` on every catalog stack, against stand-ins for everything each one fetches: the
Hub (every catalog checkpoint, and the gated DFlash2 draft), AWS's public SSM parameters of the
AMIs (moto), a real OCI registry (Debian's
docker-registry) holding every catalog image tag for both architectures, a package index of the
catalog's pins, a wheel folder for Mooncake, and the vendors' apt repositories (tests/hosts/).
Each lock must pin every part `plan` lists, so that `lock: required` holds for every catalog stack
(the parts' own checks are tests/cli/test_lock_cli.py's and tests/stacks/test_apt_lock.py's)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from hosts.aptindex import AptIndex, of_catalog
from hosts.aws_public import publish_catalog
from hosts.hub import Hub, Repo
from hosts.pypi import PackageIndex
from hosts.registry import Registry

from flashfleet.catalog import CHECKPOINTS, DFLASH2_DRAFT, hardware_catalog
from flashfleet.cli import main
from flashfleet.planning import load_stack
from flashfleet.stack import DEFAULT_STACKS_DIR

pytestmark = pytest.mark.registry
TOKEN = "hf_catalogLOCKtoken0123456789"
IMAGE = "lmsysorg/sglang"
STACKS = sorted(
    p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in DEFAULT_STACKS_DIR.glob("Pulumi.*.yaml")
)


@dataclass
class StandIns:
    hub: Hub
    registry: Registry
    pypi: PackageIndex
    apt: AptIndex


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory: pytest.TempPathFactory, moto_url: str) -> Iterator[StandIns]:
    hub = Hub(token=TOKEN)
    for repo in {r for repos in CHECKPOINTS.values() for r in repos}:
        hub.repos[repo] = Repo(
            {"config.json": b'{"model_type": "glm5_next"}', "model.safetensors": repo.encode()}
        )
    hub.repos[DFLASH2_DRAFT] = Repo({"config.json": b'{"model_type": "dflash2"}'}, gated=True)
    registry = Registry(tmp_path_factory.mktemp("registry")).start()
    # every tag a catalog stack pulls, as a multi-platform index (GB300 nodes are arm64)
    specs = [load_stack(stack).spec for stack in STACKS]
    for tag in {
        spec.image.tagged_ref(hardware_catalog()[spec.hardware]).rpartition(":")[2] for spec in specs
    }:
        platforms = {
            arch: registry.push(IMAGE, f"{tag}-{arch}", arch, content=tag.encode())
            for arch in ("amd64", "arm64")
        }
        registry.push_index(IMAGE, tag, platforms)
    pypi = PackageIndex.of_catalog_pins().start()
    apt = of_catalog().start()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_ENDPOINT", hub.start("127.0.0.1"))
        mp.setenv("HF_TOKEN", TOKEN)  # the draft is gated
        mp.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
        # AWS's public SSM parameters (the DLAMI's, Canonical's Ubuntu) in the stacks' regions
        for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION"):
            mp.delenv(key, raising=False)
        for key, value in (("AWS_ENDPOINT_URL", moto_url), ("AWS_ACCESS_KEY_ID", "testing"),
                           ("AWS_SECRET_ACCESS_KEY", "testing"), ("NO_PROXY", "127.0.0.1")):  # fmt: skip
            mp.setenv(key, value)
        for region in {load_stack(stack).region for stack in STACKS} - {None}:
            publish_catalog(str(region))
        yield StandIns(hub, registry, pypi, apt)
    for server in (hub, registry, pypi, apt):
        server.stop()


def _stack_file(folder: Path, stack: str, s: StandIns, **spec: Any) -> None:
    """The catalog stack, pulling from the stand-in registry and installing from the stand-ins
    (Mooncake's wheel too: a wheel folder on the node is tests/serve/test_site.py's)."""
    doc = yaml.safe_load((DEFAULT_STACKS_DIR / f"Pulumi.{stack}.yaml").read_text())
    doc["config"]["flashfleet:stack"]["image"] = {
        **doc["config"]["flashfleet:stack"].get("image", {}), "repository": f"{s.registry.address}/{IMAGE}",
    }  # fmt: skip
    doc["config"]["flashfleet:stack"].update(spec)
    doc["config"]["flashfleet:stack"]["site"] = {"pip": {"indexUrl": s.pypi.simple}, "apt": s.apt.site_apt()}
    (folder / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(doc))


@pytest.mark.parametrize("stack", STACKS)
def test_every_catalog_stack_locks_every_part_and_then_meets_lock_required(
    stack: str, stand_ins: StandIns, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _stack_file(tmp_path, stack, stand_ins)
    assert main(["lock", stack, "--stacks-dir", str(tmp_path)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    # plan admits the stack as `pulumi up` would
    assert main(["plan", stack, "--stacks-dir", str(tmp_path), "--format", "json"]) == 0, (
        capsys.readouterr().err
    )
    view = json.loads(capsys.readouterr().out)
    floating = {p["name"] for p in view["lock"]["parts"] if p["state"] != "locked"}
    # only what apt takes from the distribution's own archive stays floating (hosts only)
    assert floating <= {"system libraries the vendors' packages depend on (apt)"}, floating
    assert not [w for w in view["warnings"] if "not repeatable" in w]
    kinds = {p["kind"] for p in view["lock"]["parts"]}
    assert {"weights", "image"} <= kinds
    source = load_stack(stack).spec.nodes.source.kind
    apt_parts = [p["name"] for p in view["lock"]["parts"] if "(apt): " in p["name"]]
    assert bool(apt_parts) == (source != "kubernetes"), apt_parts
    # the lock holds them all: `lock: required` is met, and `validate` says so
    _stack_file(tmp_path, stack, stand_ins, lock="required")
    assert main(["validate", stack, "--stacks-dir", str(tmp_path)]) == 0, capsys.readouterr().err
