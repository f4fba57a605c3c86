"""sglang_image on a real host behind the stand-in Docker engine: pinned base pulled (shipping what
its release's wheel requires), derived image built with the multimodal check run inside it,
rebuilt only when its recipe changes. The stand-in images hold no torch and no FFmpeg, so the lab
runs the check without decoding (sglang_image_video: false, tests/roles/hardware.py); the decoding
is proven on the release's real packages in tests/roles/test_release_image_check.py."""

from __future__ import annotations

import pytest

from .conftest import Lab, assert_no_change, assert_same_plan, host_state
from .hardware import derived_facts, derived_image

DERIVED = derived_image("h200")  # named by flashfleet: the ref the serving units run
# a derived build that installs transformers 5.12.1 over the release's 5.19.0
OLD_TRANSFORMERS = {"name": "transformers", "specifier": "==5.12.1", "install": True, "overrides": "==5.19.0"}


@pytest.fixture(scope="module")
def docker_on_h200(lab: Lab) -> None:
    """The image role needs the runtime role's Docker (idempotent if already there)."""
    run = lab.play(["h200"], "container_runtime")
    assert run.ok, run.explain()


@pytest.mark.usefixtures("docker_on_h200")
def test_check_mode_then_build_then_nothing_left(lab: Lab) -> None:
    before = host_state(lab, "h200")
    check = lab.play(["h200"], "sglang_image", check=True)
    assert check.ok, check.explain()
    assert host_state(lab, "h200") == before

    run = lab.play(["h200"], "sglang_image")
    assert run.ok, run.explain()
    assert_same_plan(check, run, "h200")
    inspect = lab.pool.ssh("h200", f"docker image inspect --format '{{{{.Id}}}}' {DERIVED}")
    assert inspect.stdout.startswith("sha256:")
    assert (
        run.statuses("h200")[
            "sglang_image:the pins hold, pip check, Glm5NextProcessor and a decoded clip in the derived image"
        ]
        == "ok"
    )

    again = lab.play(["h200"], "sglang_image")
    assert_no_change(again)


@pytest.mark.usefixtures("docker_on_h200")
def test_transformers_5_12_1_is_refused_by_name(lab: Lab) -> None:
    run = lab.play(["h200"], "sglang_image", extravars={"sglang_image_pins": [OLD_TRANSFORMERS]})
    assert not run.ok
    [failure] = run.result.failures
    assert "the pins name a refused transformers release (5.12.1)" in failure.message
    assert "answers image requests from the text alone" in failure.message


@pytest.mark.usefixtures("docker_on_h200")
def test_the_in_image_check_fails_the_build_without_the_processor(lab: Lab) -> None:
    # with the name check lifted, the check script itself finds no Glm5NextProcessor in 5.12.1
    run = lab.play(["h200"], "sglang_image", extravars={
        "sglang_image_pins": [OLD_TRANSFORMERS], "sglang_image_refused_transformers": []})  # fmt: skip
    assert not run.ok
    [failure] = run.result.failures
    assert failure.task == "derived image (runs the multimodal check while building)"
    assert "Glm5NextProcessor does not import from transformers 5.12.1" in failure.message
    # the release's own pin it replaced on purpose is the one conflict pip check accepts
    assert "FAIL: pip check" not in failure.message


@pytest.mark.usefixtures("docker_on_h200")
def test_a_conflict_the_build_brings_in_fails_the_check(lab: Lab) -> None:
    # the same downgrade without naming the release pin it replaces: pip check names the release's
    pin = {**OLD_TRANSFORMERS, "overrides": None}
    run = lab.play(["h200"], "sglang_image", extravars={
        "sglang_image_pins": [pin], "sglang_image_refused_transformers": []})  # fmt: skip
    assert not run.ok
    [failure] = run.result.failures
    assert (
        "FAIL: pip check: sglang 0.5.23 has requirement transformers==5.19.0, but you have transformers 5.12.1."
        in failure.message
    )


@pytest.mark.parametrize("release", ["v0.5.19", "latest"])
def test_an_old_or_unpinned_release_is_refused(lab: Lab, release: str) -> None:
    # The release comes from flashfleet (image.version), not from the tag; the role still checks it.
    derived = derived_facts("h200", release=release)
    run = lab.play(["h200"], "sglang_image", facts_override={"h200": {"flashfleet_image_derived": derived}})
    assert not run.ok
    assert f"SGLang release {release} is not v0.5.20 or later" in run.result.failures[0].message


def test_a_foreign_base_image_is_refused(lab: Lab) -> None:
    image = "lmsysorg/sglang:v0.5.23-rocm720-mi35x"
    run = lab.play(["h200"], "sglang_image", facts_override={"h200": {"flashfleet_image": image}})
    assert not run.ok
    assert "does not fit a nvidia x86_64 node" in run.result.failures[0].message


def test_gb300_needs_the_cuda13_multiarch_build(lab: Lab) -> None:
    run = lab.play(["gb300b"], "sglang_image",
                   facts_override={"gb300b": {"flashfleet_image": "lmsysorg/sglang:v0.5.23"}})  # fmt: skip
    assert not run.ok
    assert "does not fit a nvidia arm64 node" in run.result.failures[0].message


@pytest.mark.usefixtures("docker_on_h200")
def test_a_tag_the_registry_does_not_have_fails_the_pull(lab: Lab) -> None:
    run = lab.play(["h200"], "sglang_image",
                   facts_override={"h200": {"flashfleet_image": "lmsysorg/sglang:v0.5.99"}})  # fmt: skip
    assert not run.ok
    assert "manifest for lmsysorg/sglang:v0.5.99 not found" in run.result.failures[0].message
