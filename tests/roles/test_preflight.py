"""preflight on real hosts: passes on a matching node, stops with the numbers otherwise."""

from __future__ import annotations

from .conftest import Lab
from .hardware import SMALL_DISK

# The test hosts have tens of GB free, not a production NVMe: ask for what they have.
SMALL_SIZES = {"preflight_image_gb": 1, "preflight_weights_gb": 1, "preflight_disk_margin_gb": 1}


def test_passes_on_a_matching_h200_and_changes_nothing(lab: Lab) -> None:
    run = lab.play(["dlami"], "preflight", extravars=SMALL_SIZES)
    assert run.ok, run.explain()
    assert run.changed() == 0
    gpu = [p for p in run.progress if p.task == "model and count match the stack"]
    assert [p.status for p in gpu] == ["ok"], run.explain()


def test_check_mode_gives_the_same_verdict(lab: Lab) -> None:
    run = lab.play(["dlami"], "preflight", check=True, extravars=SMALL_SIZES)
    assert run.ok, run.explain()
    assert run.changed() == 0


def test_gpu_count_mismatch_stops_with_the_numbers(lab: Lab) -> None:
    run = lab.play(["dlami"], "preflight", extravars=SMALL_SIZES,
                   facts_override={"dlami": {"flashfleet_gpu_count": 4}})  # fmt: skip
    assert not run.ok
    [failure] = run.result.failures
    assert failure.task == "model and count match the stack"
    assert "expects 4 x H200" in failure.message
    assert "reports 8: NVIDIA H200" in failure.message


def test_gpu_model_mismatch_stops_with_the_names(lab: Lab) -> None:
    run = lab.play(["dlami"], "preflight", extravars=SMALL_SIZES,
                   facts_override={"dlami": {"flashfleet_gpu_model": "GB300"}})  # fmt: skip
    assert not run.ok
    [failure] = run.result.failures
    assert "expects 8 x GB300" in failure.message
    assert "NVIDIA H200" in failure.message


def test_full_disk_stops_with_the_numbers(lab: Lab) -> None:
    # a real 64 MB filesystem, mostly filled
    lab.pool.ssh("dlami", f"dd if=/dev/zero of={SMALL_DISK}/filler bs=1M count=48 status=none")
    try:
        run = lab.play(["dlami"], "preflight",
                       facts_override={"dlami": {"flashfleet_model_cache_dir": f"{SMALL_DISK}/hf"}})  # fmt: skip
    finally:
        lab.pool.ssh("dlami", f"rm -f {SMALL_DISK}/filler")
    assert not run.ok
    [failure] = run.result.failures
    assert failure.task == "enough free space for image and weights"
    assert f"Not enough disk on dlami for {SMALL_DISK}/hf (filesystem {SMALL_DISK})" in failure.message
    assert "needs 760 GB (image 40 + weights 700 + margin 20), has 0.02 GB free" in failure.message


def test_hicache_host_tier_that_does_not_fit_stops(lab: Lab) -> None:
    run = lab.play(["dlami"], "preflight", extravars=SMALL_SIZES,
                   facts_override={"dlami": {"flashfleet_hicache_host_gb": 4096}})  # fmt: skip
    assert not run.ok
    [failure] = run.result.failures
    assert "HiCache host tier needs 4096 GB + 32 GB" in failure.message


def test_mooncake_without_hugepages_stops_with_the_sysctl_to_set(lab: Lab) -> None:
    run = lab.play(["dlami"], "preflight",
                   extravars={**SMALL_SIZES, "preflight_hugepages_gb": 4},
                   facts_override={"dlami": {"flashfleet_mooncake": True}})  # fmt: skip
    assert not run.ok
    [failure] = run.result.failures
    assert "needs 4 GB of hugepages" in failure.message
    assert "vm.nr_hugepages=2048" in failure.message


def test_arm64_stack_on_an_x86_host_is_refused(lab: Lab) -> None:
    run = lab.play(["gb300a"], "preflight", extravars=SMALL_SIZES)
    assert not run.ok
    [failure] = run.result.failures
    assert "gb300a is x86_64 but the stack expects arm64" in failure.message
