"""`pulumi up` of a stack that runs the derived image, on the real Docker engine of a test host:
the base is the faithful one (the release's own torch 2.14.1 with its CUDA libraries, torchcodec
0.17.0, transformers 5.19.0, tokenizers 0.23.2 and the sglang wheel; tests/hosts/engine_images.py),
imported under its pinned name, as a node that already holds it. The sglang_image role builds
the derived image on it (Debian's FFmpeg from the test network's archive, the in-image check on
the real packages), the serving unit runs that image, and the endpoint answers; `pulumi destroy`
leaves no unit and no container. The set-up and each engine step print their time."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hosts.aptrepo import ENGINE_DEBS, IMAGE_BUILD, real_engine_version
from hosts.engine_images import import_image, stop_engines
from hosts.harness import HostSpec
from roles.conftest import TOKEN, open_lab
from roles.hardware import H200, IMAGES, NVIDIA_DEVICES, derived_image

from .conftest import TIMINGS
from .engine import Engine, install_sandbox_docker, lab_site, pulumi_cli

pytestmark = [
    pytest.mark.skipif(
        pulumi_cli() is None, reason="no Pulumi CLI: scripts/setup.d/40-pulumi.sh builds it into .tools/bin"
    ),
]
HOST = "e2ed"


@pytest.fixture(scope="module")
def derived() -> Iterator[Engine]:
    for cache, step in ((ENGINE_DEBS, "25-docker-engine.sh"), (IMAGE_BUILD, "27-sglang-image-build.sh")):
        if not (cache / ".ok").exists():
            raise RuntimeError(f"{cache} missing: run scripts/setup.d/{step}")
    workdir = Path(tempfile.mkdtemp(prefix="flashfleet-e2e-derived-", dir="/var/tmp"))
    eng: Engine | None = None
    specs = [HostSpec(HOST, H200, NVIDIA_DEVICES, container_engine=True)]
    try:
        with open_lab(specs, groups={HOST: "h200"}, engine_debs=ENGINE_DEBS,
                      debian_debs=IMAGE_BUILD / "debs") as lab:  # fmt: skip
            version = real_engine_version().split("-")[0]
            try:
                start = time.monotonic()
                installed = lab.play([HOST], "container_runtime",
                                     extravars={"container_runtime_docker_version": version})  # fmt: skip
                assert installed.ok, installed.explain()
                install_sandbox_docker(lab.pool.hosts[HOST].root)
                key = (lab.repo.root / "repo-key.asc").read_text()
                import_image(lab.pool, HOST, IMAGES["h200"], apt_repo=f"{lab.base_url}/debian", apt_key=key,
                             release=True)  # fmt: skip
                TIMINGS["set-up: real Docker engine on 1 host, the faithful base imported"] = (
                    time.monotonic() - start
                )
                eng = Engine(workdir, lab.pool, lab_site(lab, version), IMAGES["h200"].split(":")[0],
                             stack="e2e-derived", derived=True)  # fmt: skip
                eng.write_project([lab.pool.hosts[HOST].address], {})
                eng.run("pulumi", "stack", "init", eng.stack, "--non-interactive")
                eng.pulumi("config", "set", "--secret", "flashfleet:hfToken", TOKEN)
                yield eng
            finally:
                stop_engines(lab.pool, [HOST])
    finally:
        if eng is not None:
            TIMINGS.update(eng.timings)
        shutil.rmtree(workdir, ignore_errors=True)


def _ssh(eng: Engine, command: str) -> str:
    return eng.pool.ssh(HOST, command, check=False).stdout


def _launches(eng: Engine) -> list[dict[str, Any]]:
    out = json.loads(eng.pulumi("stack", "output", "--json").stdout)
    [host] = out["inventory"]["all"]["hosts"].values()
    return list(host["flashfleet_processes"])


def test_up_builds_and_serves_the_derived_image_on_the_release(derived: Engine) -> None:
    eng = derived
    eng.pulumi("up", "--yes", "--skip-preview", timed="pulumi up, derived image (build, check, serve)")
    ref = derived_image("h200")
    built = _ssh(eng, f"docker image inspect --format '{{{{.Id}}}}' {ref}").strip()
    assert built.startswith("sha256:"), f"no derived image {ref} on the node"
    [launch] = _launches(eng)
    assert launch["image"] == ref, launch["image"]
    name = launch["container_name"]
    assert _ssh(eng, f"systemctl is-active {name}.service").strip() == "active"
    running = json.loads(_ssh(eng, f"docker inspect --format '{{{{json .}}}}' {name}"))
    assert running["State"]["Running"], running["State"]
    assert running["Image"] == built, running["Image"]
    # the container the unit runs holds the release's torch and torchcodec, and FFmpeg, and its
    # torchcodec decodes beside that torch (the check the build ran, run again in the container)
    probe = _ssh(eng, f"docker exec {name} python3 -c 'import torch, torchcodec.decoders;"
                      f" print(torch.__version__, torchcodec.__version__)' && docker exec {name} ffmpeg -version")  # fmt: skip
    assert probe.startswith("2.14.1"), probe
    assert " 0.17.0" in probe.splitlines()[0], probe
    assert "ffmpeg version 5.1." in probe, probe
    endpoint = json.loads(eng.pulumi("stack", "output", "--json").stdout)["endpoint"]
    with urllib.request.urlopen(f"{endpoint}/models", timeout=10) as resp:
        assert resp.status == 200
        assert json.load(resp)["data"], "the server lists no model"
    # a second `up` keeps the image: the derived image is current, and nothing is rebuilt
    eng.pulumi("up", "--yes", "--skip-preview", timed="pulumi up again, derived image current")
    assert _ssh(eng, f"docker image inspect --format '{{{{.Id}}}}' {ref}").strip() == built


def test_destroy_leaves_no_unit_and_no_container(derived: Engine) -> None:
    eng = derived
    [launch] = _launches(eng)
    eng.pulumi("destroy", "--yes", "--skip-preview", timed="pulumi destroy, derived image stack")
    name = launch["container_name"]
    assert _ssh(eng, f"systemctl is-active {name}.service").strip() != "active"
    assert _ssh(eng, "docker ps -aq").strip() == ""
