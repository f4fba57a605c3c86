"""The sglang_image role's derived image, built for real: the role's own Dockerfile, `docker
build` on the real engine of a test host.

On the pinned release (v0.5.23), the base is the faithful one (tests/hosts/engine_images.py): the
release's own torch 2.14.1 with its CUDA libraries, torchcodec 0.17.0, transformers 5.19.0,
tokenizers 0.23.2 and the sglang wheel, as PyPI serves them. The derived image built on it passes
the in-image check (pip check, Glm5NextProcessor, torchcodec decoding a clip at 2 FPS), and the
pins the derived image carried before it followed the release (transformers 5.17.0 over the
release's 5.19.0, torchcodec 0.9.1, built for torch 2.9) fail it, each named with its reason.

On an older release, the base is a stand-in named as that release's image
(the test rootfs with python3 and pip, its Debian archive the controller's), with pip installing
the real wheels of what the derived image adds to its release (fetched by
scripts/setup.d/27-sglang-image-build.sh, served as find-links through the role's
`sglang_image_pip_find_links`) and apt installing Debian's real ffmpeg.

The release built on is v0.5.20, whose own pins (transformers 5.12.1, tokenizers 0.22.2) fall
short of the seed: the derived image installs transformers 5.17.0 and tokenizers 0.23.1 or later
over them (on v0.5.23 the release ships what the seed needs, and the build installs no wheel).
Where it stops, and why: the upstream base carries the release's CUDA torch and torchcodec
0.15.0; the stand-in base has neither, so the in-build check passes the processor and then names
torchcodec as missing, and the role reports the failure and tags no image. The layer the check
ran on is then opened to read what the build left there. The release's real torch and torchcodec
decoding a clip with the same check: tests/roles/test_release_image_check.py.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from hosts.aptrepo import IMAGE_BUILD

from .conftest import OLDER_BASE, Engine

REPO = Path(__file__).parents[2]
BUILD_TASK = "Build | derived image (runs the multimodal check while building)"
CHECK_STEP = 'RUN ["python3", "/opt/flashfleet/check_multimodal.py"'


def _plan(stack: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", "flashfleet", "plan", stack, "--format", "json"],
                         check=True, capture_output=True, text=True, cwd=REPO)  # fmt: skip
    return dict(json.loads(out.stdout))


OLDER = "v0.5.20"  # a release whose own transformers and tokenizers the derived image replaces


def _older_pins() -> dict[str, Any]:
    """The role's arguments for an h200 node of release OLDER, as the inventory decides them."""
    from flashfleet.catalog import hardware_catalog
    from flashfleet.stack.image_packages import image_packages

    pins = image_packages(OLDER, hardware_catalog()["h200"]).role_pins()
    # the real engine's image has FFmpeg: the check goes on to decode (and finds no torchcodec)
    return {"sglang_image_release": OLDER, "sglang_image_base": OLDER_BASE, "sglang_image_pins": pins,
            "sglang_image_video": True}  # fmt: skip


def _wheel_version(project: str) -> str:
    wheels = list((IMAGE_BUILD / "wheels").glob(f"{project}-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0].name.split("-")[1]


def test_the_role_builds_the_derived_image_up_to_the_vendor_torch(engine: Engine) -> None:
    assert (IMAGE_BUILD / ".ok").exists(), f"{IMAGE_BUILD}: run scripts/setup.d/27-sglang-image-build.sh"
    process = _plan("h200-lowlat")["nodes"][0]["processes"][0]
    launched = process["image"]
    assert launched in process["docker_run"]
    start = time.monotonic()
    run = engine.play(
        ["h200"],
        tags="sglang_image",
        extravars={
            "sglang_image_pip_find_links": engine.wheels_url,
            "sglang_image_pip_trusted_host": engine.pool.gateway,
            **_older_pins(),
        },
    )
    print(f"[derived image] sglang_image role with the real docker build: {time.monotonic() - start:.1f} s")
    events = [json.loads(line) for line in run.events_log.read_text().splitlines()]
    failed = [e["event_data"] for e in events if e.get("event") == "runner_on_failed"]
    assert not run.ok, run.summary()
    assert [f["task"] for f in failed] == [BUILD_TASK], run.summary()
    res = failed[0]["res"]
    argv = res["cmd"]
    # the role built exactly the launch's image, with pip's location as build arguments
    assert argv[argv.index("-t") + 1] == launched, argv
    assert f"--build-arg=PIP_FIND_LINKS={engine.wheels_url}" in argv, argv
    assert "--build-arg=PIP_NO_INDEX=1" in argv, argv
    # The build log interleaves each step's stdout (block-buffered into a pipe) with its stderr
    # as the engine reads them, so a line may come out split: what apt and pip installed is read
    # from the layer below, not from their log lines.
    output = res["stdout"]
    # the in-build check passed the processor, and names what only the vendor base holds
    assert CHECK_STEP in output, output[-4000:]
    check = output[output.index(CHECK_STEP) :]
    assert "ok: Glm5NextProcessor imports from transformers 5.17.0" in check, check
    assert "FAIL: torchcodec None installed, torchcodec==0.15.0 pinned" in check, check
    assert "FAIL: torchcodec does not decode: ModuleNotFoundError" in check, check
    assert "FAIL: transformers" not in check, check
    assert "FAIL: tokenizers" not in check, check
    assert "multimodal check passed" not in check
    assert "returned a non-zero code: 1" in res["stderr"], res["stderr"]
    # no image under the launch's name: the unit cannot run a half-built image
    missing = engine.sh("h200", f"docker image inspect {launched}")
    assert missing.returncode != 0, missing.stdout
    assert "No such image" in missing.stderr, missing.stderr
    # The layer the check ran on (the legacy builder keeps it): the pins as pip left them.
    layer = re.findall(r"^ ---> ([0-9a-f]{12})$", output[: output.index(CHECK_STEP)], re.M)[-1]
    # pip resolved the pins from the served wheels (no index) and installed exactly them
    shown = engine.sh(
        "h200",
        f"docker run --rm --entrypoint python3 {layer} -m pip show transformers tokenizers",
    )
    assert shown.returncode == 0, shown.stderr
    versions = re.findall(r"^Version: (\S+)$", shown.stdout, re.M)
    assert versions == ["5.17.0", _wheel_version("tokenizers")], shown.stdout
    # apt installed Debian's real ffmpeg from the base's archive (the controller's copy)
    package = engine.sh(
        "h200", f"docker run --rm --entrypoint dpkg-query {layer} -W -f '${{Version}}' ffmpeg"
    )
    assert package.returncode == 0, package.stderr
    assert package.stdout.startswith("7:5.1."), package.stdout
    ffmpeg = engine.sh("h200", f"docker run --rm --entrypoint ffmpeg {layer} -hide_banner -version")
    assert ffmpeg.returncode == 0, ffmpeg.stderr
    assert ffmpeg.stdout.startswith("ffmpeg version 5.1."), ffmpeg.stdout
    # the failed step's container stays behind (the legacy builder keeps it without --force-rm)
    engine.sh("h200", "docker container prune -f")


RELEASE = "v0.5.23"  # the catalog's release: the faithful base is its image


def _build_events(run: Any) -> list[dict[str, Any]]:
    events = [json.loads(line) for line in run.events_log.read_text().splitlines()]
    return [e["event_data"] for e in events if e.get("event_data", {}).get("task") == BUILD_TASK
            and e.get("event") in {"runner_on_ok", "runner_on_failed"}]  # fmt: skip


def _release_build(engine: Engine, pins: list[dict[str, Any]]) -> Any:
    return engine.play(
        ["h200"],
        tags="sglang_image",
        extravars={
            "sglang_image_pip_find_links": engine.wheels_url,
            "sglang_image_pip_trusted_host": engine.pool.gateway,
            "sglang_image_release": RELEASE,
            "sglang_image_pins": pins,
            "sglang_image_video": True,
        },
    )


def test_the_pins_from_before_the_release_fail_the_check_on_its_real_torch(engine: Engine) -> None:
    """transformers 5.17.0 over the release's own 5.19.0, and torchcodec 0.9.1 (torch 2.9's) on the
    release's torch 2.14.1: installed from the served wheels, then refused by the check, each named
    with its reason; no image is tagged."""
    launched = _plan("h200-lowlat")["nodes"][0]["processes"][0]["image"]
    old = [
        {"name": "transformers", "specifier": "==5.17.0", "install": True, "overrides": None},
        {"name": "tokenizers", "specifier": "==0.23.2", "install": False, "overrides": None},
        {"name": "torchcodec", "specifier": "==0.9.1", "install": True, "overrides": None},
    ]
    start = time.monotonic()
    run = _release_build(engine, old)
    print(f"[derived image] old pins on the faithful base: {time.monotonic() - start:.1f} s")
    assert not run.ok, run.summary()
    [failed] = _build_events(run)
    output = failed["res"]["stdout"] + failed["res"]["stderr"]
    assert 'RUN python3 -m pip install --no-cache-dir "transformers==5.17.0" "torchcodec==0.9.1"' in output
    check = output[output.index(CHECK_STEP) :]
    # the pins themselves hold: pip installed exactly what was asked
    assert "FAIL: transformers" not in check, check
    assert "FAIL: torchcodec 0" not in check, check
    # pip's own check names each downgrade against the release's wheel
    assert re.search(r"FAIL: pip check: sglang 0\.5\.23 has requirement transformers==5\.19\.0, "
                     r"but you have transformers 5\.17\.0", check), check  # fmt: skip
    # (the release's torchcodec pin carries its marker: not on aarch64)
    assert re.search(r"FAIL: pip check: sglang 0\.5\.23 has requirement torchcodec==0\.17\.0; .*aarch64.*, "
                     r"but you have torchcodec 0\.9\.1", check), check  # fmt: skip
    # and torchcodec 0.9.1 cannot load beside the release's torch
    assert "FAIL: torchcodec does not decode: RuntimeError: Could not load libtorchcodec" in check, check
    assert "multimodal check passed" not in check
    missing = engine.sh("h200", f"docker image inspect {launched}")
    assert missing.returncode != 0, missing.stdout
    assert "No such image" in missing.stderr, missing.stderr
    engine.sh("h200", "docker container prune -f")


def test_the_derived_image_on_the_release_passes_the_check_on_its_real_torch(engine: Engine) -> None:
    """The role's own pins for an H200 node of the release: nothing to install (the release ships
    transformers 5.19.0, tokenizers 0.23.2 and torchcodec 0.17.0, which meet the seed), FFmpeg from
    Debian, and the check passes on the real packages; a second run builds nothing."""
    from flashfleet.catalog import hardware_catalog
    from flashfleet.stack.image_packages import image_packages

    launched = _plan("h200-lowlat")["nodes"][0]["processes"][0]["image"]
    pins = image_packages(RELEASE, hardware_catalog()["h200"]).role_pins()
    assert not any(pin["install"] for pin in pins), pins
    start = time.monotonic()
    run = _release_build(engine, pins)
    print(f"[derived image] the release's pins on the faithful base: {time.monotonic() - start:.1f} s")
    assert run.ok, run.summary()
    [built] = _build_events(run)
    output = built["res"]["stdout"]
    assert "pip install" not in output, output[-3000:]
    check = output[output.index(CHECK_STEP) :]
    assert "ok: Glm5NextProcessor imports from transformers 5.19.0" in check, check
    assert "ok: pip check finds no conflict the derived build brought in" in check, check
    # the base's own conflicts (the sglang wheel installed without its serving dependencies) are
    # reported as the base's, not refused
    assert "ok: pip check, accepted (the base's own" in check, check
    assert re.search(r"ok: torchcodec 0\.17\.0 decoded 4 frames of \(3, 48, 64\) at 2 FPS", check), check
    [versions] = re.findall(r"^versions: (\{.*\})$", check, re.M)
    found = json.loads(versions)
    assert found["torch"].startswith("2.14.1"), found
    assert {k: found[k] for k in ("sglang", "transformers", "tokenizers", "torchcodec")} == {
        "sglang": "0.5.23", "transformers": "5.19.0", "tokenizers": "0.23.2", "torchcodec": "0.17.0"}, found  # fmt: skip
    assert "multimodal check passed" in check
    # the image the unit runs exists, and holds the release's torch
    torch = engine.sh("h200", f"docker run --rm --entrypoint python3 {launched} -c "
                              "'import torch, torchcodec; print(torch.__version__)'")  # fmt: skip
    assert torch.returncode == 0, torch.stderr
    assert torch.stdout.startswith("2.14.1"), torch.stdout
    try:
        again = _release_build(engine, pins)
        assert again.ok, again.summary()
        assert again.count("changed", "h200") == 0, again.summary()
    finally:  # the engine as the other tests expect it: the derived image not built yet
        engine.sh("h200", f"docker rmi {launched}")


def _apt_lock(engine: Engine, moment: str) -> dict[str, Any]:
    """The lock of the build's FFmpeg as `flashfleet lock` resolves it (the catalog's suites and
    components for the base's distribution, Debian 12 here), in a snapshot of the lab's Debian
    archive taken now, at `moment`."""
    from flashfleet.apt_index import resolve_snapshot
    from flashfleet.catalog import hardware_catalog
    from flashfleet.planning.image_apt import image_apt_want
    from flashfleet.stack.lock import LockedImageApt

    assert engine.repo is not None
    engine.repo.snapshot("debian", moment)
    archive = {"sglang_image_apt_archive": f"{engine.base_url}/snapshot/debian"}
    want = image_apt_want(hardware_catalog()["h200"], archive, "debian bookworm")
    url = want.snapshot(moment)
    suites, packages = resolve_snapshot(url, want.suites, want.components, want.arch, want.install)
    entry = LockedImageApt(distribution=want.distribution, arch=want.arch, snapshot=url,
                           components=list(want.components), suites=suites, packages=packages)  # fmt: skip
    return entry.model_dump(mode="json")


def test_a_locked_build_installs_exactly_the_locked_files_and_refuses_other_bytes(engine: Engine) -> None:
    """With the stack's lock (flashfleet lock, here resolved on the same wheel folder and a snapshot
    of the lab's Debian archive), the build installs FFmpeg from that snapshot, after Debian has
    published a newer FFmpeg in the archive the base's own sources name, and each pin from exactly
    one of its locked files in pip's hash-checking mode before the rest. A lock whose hash the served
    file does not have stops the build there, naming the file; so does a snapshot whose signed index
    is not the lock's, and a base of another distribution than the lock's."""
    from hosts.aptrepo import Deb

    from flashfleet.package_index import resolve_package
    from flashfleet.planning import load_stack
    from flashfleet.planning.packages import pip_installs

    assert (IMAGE_BUILD / ".ok").exists(), f"{IMAGE_BUILD}: run scripts/setup.d/27-sglang-image-build.sh"
    spec = load_stack("h200-lowlat").spec
    older = spec.model_copy(update={"image": spec.image.model_copy(update={"version": OLDER})})
    pins = {n: i.specifier for n, i in pip_installs(older).items() if i.installer == "sglang_image"}
    assert sorted(pins) == ["tokenizers", "transformers"], pins
    lock = {
        name: resolve_package(name, specifier, find_links=str(IMAGE_BUILD / "wheels")).model_dump()
        for name, specifier in pins.items()
    }
    where = {
        "sglang_image_pip_find_links": engine.wheels_url,
        "sglang_image_pip_trusted_host": engine.pool.gateway,
        **_older_pins(),
    }
    assert engine.repo is not None
    apt_lock = _apt_lock(engine, "20261206T000000Z")
    locked_ffmpeg = apt_lock["packages"]["ffmpeg"]["version"]
    assert locked_ffmpeg.startswith("7:5.1."), apt_lock
    # Debian then publishes a newer FFmpeg: the base's own sources would install it
    newer = engine.repo.publish(
        "debian", Deb("ffmpeg", "7:5.1.99-1", files={"/usr/share/ffmpeg-newer": "x\n"})
    )
    try:
        _locked_builds(engine, where, lock, apt_lock, locked_ffmpeg)
    finally:
        engine.repo.withdraw("debian", newer)
        engine.sh("h200", "docker container prune -f")


def _failed_build(run: Any) -> str:
    events = [json.loads(line) for line in run.events_log.read_text().splitlines()]
    [failed] = [e["event_data"] for e in events if e.get("event") == "runner_on_failed"]
    assert failed["task"] == BUILD_TASK, failed["task"]
    return str(failed["res"]["stdout"] + failed["res"]["stderr"])


def _locked_builds(
    engine: Engine, where: dict[str, str], lock: dict[str, Any], apt_lock: dict[str, Any], ffmpeg: str
) -> None:
    # a snapshot whose signed index is not the lock's: stopped after apt read it, before installing
    suites = {**apt_lock["suites"], "bookworm": "0" * 64}
    output = _failed_build(
        engine.play(["h200"], tags="sglang_image",
                    extravars={**where, "sglang_image_apt_lock": {**apt_lock, "suites": suites}})
    )  # fmt: skip
    got = apt_lock["suites"]["bookworm"]
    assert (
        f"FAIL: {apt_lock['snapshot']} bookworm: InRelease sha256 {got} differs from the lock's {'0' * 64}"
        in (output)
    ), output[-3000:]
    assert "pip install" not in output.split("apt_install_locked.py")[-1]
    # a lock resolved for another distribution than the base's
    output = _failed_build(
        engine.play(["h200"], tags="sglang_image",
                    extravars={**where, "sglang_image_apt_lock": {**apt_lock, "distribution": "ubuntu noble"}})
    )  # fmt: skip
    assert (
        "FAIL: the base image is debian bookworm, the lock resolved ffmpeg for ubuntu noble: the lock is stale"
    ) in output, output[-3000:]

    [(wheel, entry)] = lock["transformers"]["files"].items()
    tampered = {**lock, "transformers": {**lock["transformers"], "files": {wheel: {"sha256": "0" * 64}}}}
    refused = engine.play(["h200"], tags="sglang_image", extravars={**where, "sglang_image_lock": tampered})
    assert not refused.ok
    events = [json.loads(line) for line in refused.events_log.read_text().splitlines()]
    [failed] = [e["event_data"] for e in events if e.get("event") == "runner_on_failed"]
    assert failed["task"] == BUILD_TASK
    output = failed["res"]["stdout"] + failed["res"]["stderr"]
    assert "THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE" in output, output[-3000:]
    assert f"Expected sha256 {'0' * 64}" in output
    assert f"Got        {entry['sha256']}" in output
    assert CHECK_STEP not in output  # stopped before anything else was installed or checked

    built = engine.play(
        ["h200"],
        tags="sglang_image",
        extravars={**where, "sglang_image_lock": lock, "sglang_image_apt_lock": apt_lock},
    )
    events = [json.loads(line) for line in built.events_log.read_text().splitlines()]
    [failed] = [e["event_data"] for e in events if e.get("event") == "runner_on_failed"]
    output = failed["res"]["stdout"]
    # FFmpeg came from the locked snapshot, not from the archive that moved since
    assert f"ok: ffmpeg {ffmpeg} from {apt_lock['snapshot']}" in output, output[-4000:]
    layer = re.findall(r"^ ---> ([0-9a-f]{12})$", output[: output.index(CHECK_STEP)], re.M)[-1]
    package = engine.sh(
        "h200", f"docker run --rm --entrypoint dpkg-query {layer} -W -f '${{Version}}' ffmpeg"
    )
    assert package.stdout == ffmpeg, package.stdout + package.stderr
    # the locked files passed pip's hash check, and the build went on to the vendor boundary
    assert "RUN python3 -m pip install --no-cache-dir --no-deps --force-reinstall --require-hashes" in output
    assert CHECK_STEP in output, output[-4000:]
    check = output[output.index(CHECK_STEP) :]
    assert "ok: Glm5NextProcessor imports from transformers 5.17.0" in check, check
    assert "FAIL: torchcodec does not decode" in check, check
    # every locked version is the one in the layer
    assert "FAIL: transformers" not in check, check
    assert "FAIL: tokenizers" not in check, check
    engine.sh("h200", "docker container prune -f")
