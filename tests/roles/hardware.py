"""What the simulated nodes have, and the inventory facts (docs/contracts.md) for each."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from hosts.harness import HostSpec

from flashfleet.catalog import hardware_catalog, node_packages
from flashfleet.inventory import weights_client_facts
from flashfleet.stack.image import ImageSpec

H200 = {"vendor": "nvidia", "gpus": [{"name": "NVIDIA H200", "memory_mib": 143771}] * 8}
GB300 = {"vendor": "nvidia", "gpus": [{"name": "NVIDIA GB300", "memory_mib": 284208}] * 4}
MI355X = {"vendor": "amd", "gpus": [{"name": "AMD Instinct MI355X", "memory_mib": 294896}] * 8}
CPU = {"vendor": "nvidia", "gpus": []}
# What flashfleet.inventory gives a router's own host on top of its stack's hardware facts.
ROUTER_HOST = {"flashfleet_gpu_node": False, "flashfleet_gpu_count": 0, "flashfleet_gpu_model": "",
               "flashfleet_driver": None}  # fmt: skip

NVIDIA_DEVICES = (*(f"/dev/nvidia{i}" for i in range(8)), "/dev/nvidiactl")
AMD_DEVICES = ("/dev/kfd", "/dev/dri/renderD128", "/dev/dri/card0")
SMALL_DISK = "/mnt/small-nvme"

SPECS = [
    HostSpec("h200", H200, NVIDIA_DEVICES),
    # A Deep Learning AMI: the pinned driver is already there; it also has a tiny NVMe.
    HostSpec("dlami", H200, NVIDIA_DEVICES, small_disk=(SMALL_DISK, "64M")),
    HostSpec("gb300a", GB300, NVIDIA_DEVICES[:4]),
    HostSpec("gb300b", GB300, NVIDIA_DEVICES[:4]),
    HostSpec("mi355x", MI355X, AMD_DEVICES),
    # A router's own host (cluster.router.host): a CPU machine, no GPU and no vendor tool.
    HostSpec("router", CPU, ()),
]

IMAGES = {
    "h200": "lmsysorg/sglang:v0.5.23",
    "gb300": "lmsysorg/sglang:v0.5.23-cu130",
    "mi355x": "lmsysorg/sglang:v0.5.23-rocm720-mi35x",
}
MODEL = "zai-org/GLM-5.3-Flash"
DRAFT = "zai-org/GLM-5.3-Flash-DFlash2"

_FACTS: dict[str, dict[str, Any]] = {
    "h200": {"flashfleet_vendor": "nvidia", "flashfleet_arch": "x86_64",
             "flashfleet_gpu_node": True, "flashfleet_gpu_count": 8, "flashfleet_gpu_model": "H200"},
    "gb300": {"flashfleet_vendor": "nvidia", "flashfleet_arch": "arm64",
              "flashfleet_gpu_node": True, "flashfleet_gpu_count": 4, "flashfleet_gpu_model": "GB300"},
    "mi355x": {"flashfleet_vendor": "amd", "flashfleet_arch": "x86_64",
               "flashfleet_gpu_node": True, "flashfleet_gpu_count": 8, "flashfleet_gpu_model": "MI355X"},
}  # fmt: skip


def derived_image(hardware: str) -> str:
    """The derived image flashfleet names for this hardware: what the units of a stack run."""
    return ImageSpec().derived_ref(hardware_catalog()[hardware])


def derived_facts(hardware: str, release: str = ImageSpec().version) -> dict[str, Any]:
    """``flashfleet_image_derived`` as the inventory gives it (the release is flashfleet's, not the tag's)."""
    from flashfleet.bringup.host_vars import DerivedImage
    from flashfleet.stack.image_packages import image_packages

    held = image_packages(release, hardware_catalog()[hardware])
    # video: False, as the stand-in images hold no torch and no FFmpeg to decode a clip with
    # (tests/roles/test_release_image_check.py decodes one on the release's real packages)
    return DerivedImage(
        ref=derived_image(hardware), release=release, pins=held.role_pins(), video=False,
        refused_transformers=list(held.refused_transformers),
    ).model_dump()  # fmt: skip


def facts(hardware: str, index: int = 0, **overrides: Any) -> dict[str, Any]:
    """The flashfleet_* host variables Pulumi's inventory gives a node of this hardware."""
    return {
        "flashfleet_stack": "test",
        "flashfleet_hardware": hardware,
        **_FACTS[hardware],
        "flashfleet_host_memory_gb": 16,
        "flashfleet_hicache_host_gb": 0,
        "flashfleet_node_index": index,
        "flashfleet_model": MODEL,
        "flashfleet_draft_model": None,
        "flashfleet_image": IMAGES[hardware],
        "flashfleet_image_derived": derived_facts(hardware),
        "flashfleet_driver": asdict(driver) if (driver := hardware_catalog()[hardware].driver) else None,
        "flashfleet_imex_nodes": [],  # a GB300 play's hosts set their domain (tests/roles/conftest.py)
        "flashfleet_model_cache_dir": "/var/lib/flashfleet/hf",
        "flashfleet_weights_client": weights_client_facts(),
        "flashfleet_node_packages": node_packages().versions(),
        "flashfleet_weights_lock": None,
        "flashfleet_mooncake": False,
        "flashfleet_processes": [],
        **overrides,
    }
