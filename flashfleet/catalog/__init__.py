"""Data the recipe engine reads: hardware platforms, checkpoints and verification badges.

The TOML files beside this module are the catalog; this module only turns them into frozen
objects. A new platform or a new measurement is a data change, not a code change.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any, Literal

from flashfleet.catalog.tables import CatalogError, of, table

Vendor = Literal["nvidia", "amd"]


@dataclass(frozen=True)
class DriverProfile:
    """The NVIDIA driver stack of a hardware (the nvidia_driver role's arguments)."""

    branch: str
    version: str
    open_kernel_modules: bool
    fabricmanager: bool
    imex: bool


@dataclass(frozen=True)
class Hardware:
    id: str
    label: str
    gpu_model: str  # what the GPU's name holds, as nvidia-smi or amd-smi reports it
    vendor: Vendor
    arch: Literal["arm64", "x86_64"]
    family: str
    gpus_per_node: int
    serve_gpus: int
    gpu_memory_gb: int
    capabilities: frozenset[str]
    kv_dsa: str
    mm_transport: str
    moe_runner_backend: str | None
    topologies: tuple[str, ...]
    source: str
    image_suffix: str = ""
    env: dict[str, str] = field(default_factory=dict)
    topology_note: str = ""
    driver: DriverProfile | None = None  # NVIDIA only

    def has(self, capability: str) -> bool:
        return capability in self.capabilities


@dataclass(frozen=True)
class NodePackages:
    """What the roles apt-install from vendors' repositories besides the NVIDIA driver
    (node_packages.toml): the container runtime's and ROCm's versions and repositories."""

    docker_version: str
    docker_repo_url: str
    toolkit_version: str
    toolkit_repo_url: str
    toolkit_packages: tuple[str, ...]
    amdgpu_version: str
    rocm_version: str
    amdgpu_repo_url: str
    rocm_repo_url: str

    def versions(self) -> dict[str, str]:
        """What a node is told (flashfleet_node_packages): the versions; the repositories are the
        roles' own arguments, which a stack's site section may point at a mirror."""
        keys = ("docker_version", "toolkit_version", "amdgpu_version", "rocm_version")
        return {key: getattr(self, key) for key in keys}


@dataclass(frozen=True)
class DistroArchive:
    """One distribution's archive as its snapshot service serves it (node_packages.toml's
    [image_apt.<distribution>])."""

    archive: dict[str, str]  # node arch -> the snapshot service's archive URL
    codenames: dict[str, str]  # release (org.opencontainers.image.version) -> codename
    suites: tuple[str, ...]  # with {codename}
    components: tuple[str, ...]


@dataclass(frozen=True)
class ImageApt:
    """What the derived image apt-installs from its base's distribution archive, and where each
    distribution's archive is kept as snapshots."""

    packages: tuple[str, ...]
    distributions: dict[str, DistroArchive]


@dataclass(frozen=True)
class DownloadClient:
    """The weights download client (huggingface_hub's ``hf download``) and the Kubernetes images."""

    hub_version: str
    revision: str
    max_workers: int
    download_image: str
    pause_image: str


@dataclass(frozen=True)
class BadgeEntry:
    hardware: str
    strategy: str
    topology: str
    badge: str
    source: str
    options: dict[str, Any] = field(default_factory=dict)


# Checkpoints per precision; the first repository is the default for that precision.
CHECKPOINTS: dict[str, tuple[str, ...]] = {
    "fp8": ("zai-org/GLM-5.3-Flash",),
    "mxfp4": ("OneNexus/GLM-5.3-Flash-MXFP4",),
    "nvfp4": ("RadixArk/GLM-5.3-Flash-NVFP4", "nvidia/GLM-5.3-Flash-NVFP4"),
}
DFLASH2_DRAFT = "incoai/GLM-5.3-Flash-DFlash2"

BADGES = ("Verified", "Final Verification In Progress", "Not Verified", "Preview")
NOT_VERIFIED = "Not Verified"


def _load(name: str) -> dict[str, Any]:
    text = resources.files(__package__).joinpath(name).read_text(encoding="utf-8")
    return tomllib.loads(text)


@cache
def hardware_catalog() -> dict[str, Hardware]:
    out: dict[str, Hardware] = {}
    for hw_id, raw in _load("hardware.toml").items():
        where = f"hardware.toml [{hw_id}]"
        of(Hardware, where, raw, skip={"id"}, optional={"moe_runner_backend"})
        if "driver" in raw:
            of(DriverProfile, f"{where} driver", raw["driver"])
        out[hw_id] = Hardware(
            id=hw_id,
            label=raw["label"],
            gpu_model=raw["gpu_model"],
            vendor=raw["vendor"],
            arch=raw["arch"],
            family=raw["family"],
            gpus_per_node=int(raw["gpus_per_node"]),
            serve_gpus=int(raw["serve_gpus"]),
            gpu_memory_gb=int(raw["gpu_memory_gb"]),
            capabilities=frozenset(raw["capabilities"]),
            kv_dsa=raw["kv_dsa"],
            mm_transport=raw["mm_transport"],
            moe_runner_backend=raw.get("moe_runner_backend"),
            topologies=tuple(raw["topologies"]),
            source=raw["source"],
            env=dict(raw.get("env", {})),
            topology_note=raw.get("topology_note", ""),
            image_suffix=raw.get("image_suffix", ""),
            driver=DriverProfile(**raw["driver"]) if "driver" in raw else None,
        )
        if (out[hw_id].vendor == "nvidia") != (out[hw_id].driver is not None):
            raise CatalogError(f"{where}: a driver table is for NVIDIA hardware, and each has one")
    return out


@cache
def node_packages() -> NodePackages:
    raw = table(
        _load("node_packages.toml"),
        "node_packages.toml",
        ("docker", "nvidia_container_toolkit", "rocm", "image_apt"),
    )
    docker = table(raw["docker"], "node_packages.toml [docker]", ("version", "repo_url", "source"))
    toolkit = table(raw["nvidia_container_toolkit"], "node_packages.toml [nvidia_container_toolkit]",
                    ("version", "repo_url", "packages", "source"))  # fmt: skip
    rocm_keys = ("amdgpu_version", "rocm_version", "amdgpu_repo_url", "rocm_repo_url", "source")
    rocm = table(raw["rocm"], "node_packages.toml [rocm]", rocm_keys)
    return NodePackages(
        docker_version=docker["version"],
        docker_repo_url=docker["repo_url"],
        toolkit_version=toolkit["version"],
        toolkit_repo_url=toolkit["repo_url"],
        toolkit_packages=tuple(toolkit["packages"]),
        amdgpu_version=rocm["amdgpu_version"],
        rocm_version=rocm["rocm_version"],
        amdgpu_repo_url=rocm["amdgpu_repo_url"],
        rocm_repo_url=rocm["rocm_repo_url"],
    )


@cache
def image_apt() -> ImageApt:
    raw = _load("node_packages.toml")["image_apt"]
    # beside its own keys, one table a distribution
    distributions = {name: d for name, d in raw.items() if name not in ("packages", "source")}
    table({k: v for k, v in raw.items() if k not in distributions}, "node_packages.toml [image_apt]",
          ("packages", "source"))  # fmt: skip
    archives = {}
    for name, d in distributions.items():
        of(DistroArchive, f"node_packages.toml [image_apt.{name}]", d)
        archives[name] = DistroArchive(
            archive=dict(d["archive"]),
            codenames=dict(d["codenames"]),
            suites=tuple(d["suites"]),
            components=tuple(d["components"]),
        )
    return ImageApt(packages=tuple(raw["packages"]), distributions=archives)


@cache
def badge_catalog() -> tuple[tuple[BadgeEntry, ...], tuple[BadgeEntry, ...]]:
    """(cells, measured variants)."""
    raw = table(_load("badges.toml"), "badges.toml", (), ("cell", "measured"))
    cells = tuple(BadgeEntry(**of(BadgeEntry, "badges.toml [[cell]]", e)) for e in raw.get("cell", []))
    measured = tuple(
        BadgeEntry(**of(BadgeEntry, "badges.toml [[measured]]", e)) for e in raw.get("measured", [])
    )
    for entry in cells + measured:
        if entry.badge not in BADGES:
            raise CatalogError(f"badges.toml: unknown badge {entry.badge!r}")
    return cells, measured


@cache
def bringup_catalog() -> dict[str, Any]:
    """Transfer sizes (with sources), per-source defaults and the phase schedule of a bring-up.
    Every table holds exactly the keys planning reads (critical_path, time_to_first_token)."""
    raw = _load("bringup.toml")
    where = "bringup.toml"
    table(raw, where, ("checkpoint", "image", "hub", "source", "schedule", "startup"))
    figure = ("size_gb", "basis")  # a size may be unknown: the source says why
    for repo, entry in raw["checkpoint"].items():
        table(entry, f'{where} [checkpoint."{repo}"]', ("source",), figure)
    for vendor, entry in raw["image"].items():
        table(entry, f"{where} [image.{vendor}]", ("source",), figure)
    table(raw["hub"], f"{where} [hub]", ("source",))
    for kind, entry in raw["source"].items():
        table(
            entry, f"{where} [source.{kind}]",
            ("weights_gbps", "image_gbps", "driver_install_s", "source"),
            ("peer_gbps", "peer_source", "custom_ami_driver_install_s"),
        )  # fmt: skip
    for kind, entry in raw["schedule"].items():
        table(entry, f"{where} [schedule.{kind}]", ("lanes",))
    startup = table(
        raw["startup"], f"{where} [startup]", ("launch", "load", "jit", "capture", "ready", "restore")
    )
    timed = ("seconds", "basis")  # a phase's figure, or only a source saying it is unknown
    for kind, entry in startup["launch"].items():
        table(entry, f"{where} [startup.launch.{kind}]", ("source",), timed)
    table(startup["load"], f"{where} [startup.load]", ("size_gb", "cold_s", "prefetch_s", "basis", "source"))
    for vendor, entry in startup["jit"].items():
        table(entry, f"{where} [startup.jit.{vendor}]", ("source",), ("first_s", "cached_s", "basis"))
    for phase in ("capture", "ready"):
        table(startup[phase], f"{where} [startup.{phase}]", ("source",), timed)
    table(startup["restore"], f"{where} [startup.restore]", ("source",))
    return raw


def _downloads() -> dict[str, Any]:
    return dict(table(_load("downloads.toml"), "downloads.toml", ("client", "kubernetes", "packages")))


@cache
def pip_packages() -> dict[str, dict[str, str]]:
    """What the nodes pip-install beside the weights client: `image` (the derived image's pins,
    name -> specifier) and `mooncake` (transport -> the wheel's requirement)."""
    raw = _downloads()["packages"]
    return {group: dict(entries) for group, entries in raw.items()}


def download_client() -> DownloadClient:
    """The client release and arguments every weights download uses, hosts and clusters alike."""
    raw = _downloads()
    client = table(raw["client"], "downloads.toml [client]", ("huggingface_hub", "revision", "max_workers"))
    kube = table(raw["kubernetes"], "downloads.toml [kubernetes]", ("download_image", "pause_image"))
    return DownloadClient(
        hub_version=client["huggingface_hub"],
        revision=client["revision"],
        max_workers=int(client["max_workers"]),
        download_image=kube["download_image"],
        pause_image=kube["pause_image"],
    )
