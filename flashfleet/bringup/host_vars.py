"""What a host is told: the one model of the inventory's host variables.

Built in Python (``flashfleet.inventory``), written into the inventory, validated where the
hand-off starts (``flashfleet.bringup.contract``), and the source of the table in
docs/contracts.md (``python -m flashfleet.bringup.host_vars`` rewrites it; a test compares). Every
fact a playbook needs is decided here, so no playbook or role parses it back out of an argv list
or a URL: playbooks only map these facts onto role arguments.
"""

from __future__ import annotations

import sys
from dataclasses import is_dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from pydantic.fields import FieldInfo

from flashfleet.catalog import DriverProfile
from flashfleet.launch import ContainerLaunch
from flashfleet.stack.lock import LockedDeb, LockedImageApt, LockedPackage, LockedRepo
from flashfleet.stack.mooncake_endpoints import MooncakeEndpoints
from flashfleet.table import markdown

_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True)


class MooncakeLayout(MooncakeEndpoints):
    """The store's endpoints (as `plan` shows them) and what the roles install for it."""

    model_config = _STRICT

    hugepages_gib: int  # 0: the serving containers are not told to use hugepages
    wheel: str  # the Mooncake wheel's requirement for the protocol (flashfleet/catalog/downloads.toml)
    lock: LockedPackage | None = None  # the stack's lock of that wheel: its version and files' sha256


class ImagePin(BaseModel):
    """One multimodal package the serving image must hold."""

    model_config = _STRICT

    name: str
    specifier: str  # ==5.19.0, >=0.23.1
    install: bool  # the derived build pip-installs it (else the release ships it, and it is only checked)
    overrides: str | None  # the release's own pin it replaces on purpose: `pip check` accepts that conflict


class DerivedImage(BaseModel):
    """The image the sglang_image role builds on the base, and the units run."""

    model_config = _STRICT

    ref: str  # named once, by flashfleet.stack.image.ImageSpec.derived_ref
    release: str  # the SGLang release of its base (image.version, e.g. v0.5.23; the spec checks it)
    # what the image must hold of the multimodal packages, each shipped by the release or
    # installed by the derived build (flashfleet.stack.image_packages decides which, and why)
    pins: list[ImagePin]
    # torchcodec is in the image and the check decodes a clip; False where no torchcodec is
    # known to load (the ROCm image's torch): video stays unverified
    video: bool
    refused_transformers: list[str]  # the seed's: releases that answer images from the text alone
    # the stack's lock of the packages installed in it: name -> version and files' sha256 (the
    # build installs exactly those bytes); {} without a lock
    packages: dict[str, LockedPackage] = {}
    # the stack's lock of what it apt-installs from the base's distribution archive (a snapshot
    # of it); None without one
    apt: LockedImageApt | None = None


class WeightsClient(BaseModel):
    """The weights download client: what model_weights installs and how it runs `hf download`."""

    model_config = _STRICT

    hub_version: str  # huggingface_hub release (flashfleet/catalog/downloads.toml, shared with Kubernetes)
    revision: str
    max_workers: int
    lock: LockedPackage | None = None  # the stack's lock of the client: its version and files' sha256


class PdHeal(BaseModel):
    """A PD decode node's watcher (flashfleet.planning.pd_heal): the decode units it restarts once
    after a prefill they take KV from restarted."""

    model_config = _STRICT

    prefills: list[str] = Field(min_length=1, description="every prefill's /health URL")
    units: list[str] = Field(min_length=1, description="this node's decode units")
    poll_s: float = Field(gt=0, description="seconds between two polls of the prefills")
    down_polls: int = Field(ge=1, description="failed polls in a row that make an outage")
    probe_timeout_s: float = Field(gt=0, description="seconds one /health probe may take")


class WeightsFanout(BaseModel):
    """One node's part in fetching the weights once per stack (flashfleet.planning.weights_fanout):
    the seed downloads from the Hub and serves its cache to its peers; a peer fetches from the seed."""

    model_config = _STRICT

    role: Literal["seed", "peer"]
    seed: str = Field(description="the seed's inventory name")
    seed_address: str = Field(description="the seed's private address: it serves there, peers fetch there")
    port: int = Field(ge=1024, le=65535)
    # the seed: its peers, by inventory name; it serves until each said it is done
    peers: list[str] = Field(default_factory=list)
    wait_s: int = Field(ge=1)  # a peer: how long it tries to reach the seed before the Hub


class NodePackageVersions(BaseModel):
    """What the roles apt-install from vendors' repositories besides the NVIDIA driver, by version
    (flashfleet/catalog/node_packages.toml)."""

    model_config = _STRICT

    docker_version: str  # container_runtime: docker-ce, docker-ce-cli
    toolkit_version: str  # container_runtime: the NVIDIA container toolkit's four packages
    amdgpu_version: str  # rocm_driver: the amdgpu release (its repository directory)
    rocm_version: str  # rocm_driver: the ROCm release (its repository directory)


AptRole = Literal["nvidia_driver", "container_runtime", "rocm_driver"]


def _driver_profile(value: Any) -> Any:
    # The catalog's own dataclass, read back from the inventory's mapping.
    if isinstance(value, dict):
        try:
            return DriverProfile(**value)
        except TypeError as err:
            raise ValueError(str(err)) from None
    return value


Vendor = Literal["nvidia", "amd"]
Arch = Literal["arm64", "x86_64"]


class HostVars(BaseModel):
    """The ``flashfleet_*`` facts of one host; ``ansible_*`` connection variables pass as they are."""

    model_config = _STRICT

    ansible_host: str = Field(description="how to reach the node")
    ansible_user: str | None = Field(None, description="SSH user (absent: Ansible's default)")
    flashfleet_stack: str = Field(description="stack name")
    flashfleet_hardware: str = Field(description="hardware id of the catalog (`gb300` / `h200` / `mi355x`)")
    flashfleet_vendor: Vendor = Field(description="`nvidia` / `amd`")
    flashfleet_arch: Arch = Field(description="`arm64` / `x86_64`")
    flashfleet_gpu_node: bool = Field(
        description="the node runs GPU servers; false on a router's own host, which gets no GPU driver, "
        "container toolkit or weights"
    )
    flashfleet_gpu_count: int = Field(description="GPUs the node must have (0 on a router's own host)")
    flashfleet_gpu_model: str = Field(description="substring the GPU name must contain (`GB300`, `H200`...)")
    flashfleet_host_memory_gb: int | None = Field(
        None, description="host memory the stack expects (null: unknown in the catalog)"
    )
    flashfleet_hicache_host_gb: int = Field(
        description="host memory the HiCache host tier needs (0 when off)"
    )
    flashfleet_node_index: int = Field(description="index of the node in the stack")
    flashfleet_model: str = Field(description="checkpoint repository")
    flashfleet_draft_model: str | None = Field(None, description="DFlash2 draft repository when selected")
    flashfleet_image: str = Field(
        description="pinned upstream SGLang image (base) for this node; `repository:tag@sha256:...` when "
        "the stack's lock (or image.digest) pins its digest: pulled and run by that digest"
    )
    flashfleet_image_derived: DerivedImage | None = Field(
        None,
        description="the image sglang_image builds on the base and the units run: `ref`, `transformers`, "
        "`release` (the SGLang release of the base) (null: the units run the base)",
    )
    flashfleet_driver: Annotated[DriverProfile | None, BeforeValidator(_driver_profile)] = Field(
        None,
        description="NVIDIA driver stack of the hardware (`branch`, `version`, `open_kernel_modules`, "
        "`fabricmanager`, `imex`); null on AMD",
    )
    flashfleet_imex_nodes: list[str] = Field(
        default_factory=list,
        description="private addresses of every GPU node of the stack's NVLink domain, in node order, "
        "where the driver runs IMEX (GB300); empty elsewhere",
    )
    flashfleet_node_packages: NodePackageVersions = Field(
        description="what the roles apt-install from vendors' repositories besides the NVIDIA driver, by "
        "version (`docker_version`, `toolkit_version`: the NVIDIA container toolkit, `amdgpu_version`, "
        "`rocm_version`)"
    )
    flashfleet_model_cache_dir: str = Field(description="host directory of the shared Hugging Face cache")
    flashfleet_weights_client: WeightsClient = Field(
        description="the weights download client (`hub_version`, `revision`, `max_workers`): the "
        "catalog's one pin, which Kubernetes download containers install too"
    )
    flashfleet_mooncake: bool = Field(description="the stack uses the Mooncake L3 tier")
    flashfleet_processes: list[ContainerLaunch] = Field(
        description="container launches of this node (`flashfleet.launch`), in start order, each with "
        "`rank`, `serves_http`, `serves_api` and `prints_startup`"
    )
    flashfleet_reasoning: bool = Field(description="the servers parse reasoning (`reasoning_parser` on)")
    flashfleet_tool_calls: bool = Field(description="the servers parse tool calls (`tool_call_parser` on)")
    flashfleet_hicache_storage: bool = Field(
        False, description="the servers keep a HiCache storage tier (`hicache` l1l2l3): verify reads it back"
    )
    flashfleet_api_port: int | None = Field(
        None,
        description="port of the process that serves clients the OpenAI API here (the last in start "
        "order; a PD prefill or decode only through a router); null: none does (a worker node)",
    )
    flashfleet_api_key_required: bool = Field(
        False,
        description="the API-serving processes here demand `Authorization: Bearer <key>` (`serving.apiKey: "
        "required`); the key itself travels only in the controller's `FLASHFLEET_API_KEY`",
    )
    flashfleet_mooncake_layout: MooncakeLayout | None = Field(
        None,
        description="L3 stacks only: `master_node`, `master_host`, `master_server_address`, "
        "`metadata_server`, `rpc_port`, `metadata_port`, `metrics_port`, `protocol`, "
        "`global_segment_gib`, `hugepages_gib`, `devices`, `members` (private addresses)",
    )
    flashfleet_keep_caches: bool = Field(
        True, description="whether `teardown.yml` keeps the weight cache (`teardown.keepCaches` of the stack)"
    )
    flashfleet_host_keys: list[str] | None = Field(
        None,
        description="the host's SSH public keys (`TYPE BASE64`: an existing host's `hostKeys`, an AWS node's "
        "as its first-boot console showed them) every run pins in a `known_hosts` file of its private run "
        "directory, with `StrictHostKeyChecking=yes` (docs/security.md)",
    )
    flashfleet_weights_prestaged: bool = Field(
        False,
        description="the checkpoint is already in `flashfleet_model_cache_dir` (`weights.prestaged` "
        "of the stack): `prepare.yml` downloads no weights",
    )
    flashfleet_weights_volume: bool = Field(
        False,
        description="the node has an EBS weights volume of its own (`caches.weightsSnapshot` of an AWS "
        "stack), restored from the stack's cache snapshot or empty: `model_weights` mounts it at "
        "`flashfleet_model_cache_dir` before anything is written there",
    )
    flashfleet_weights_exclude: list[str] = Field(
        default_factory=list,
        description="file patterns `prepare.yml` does not download (`hf download --exclude`): the "
        "checkpoint's weight files, on a node whose server loads them from another replica "
        "(`peer_load`); its config, tokenizer and code still come from the Hub, checked against the lock",
    )
    flashfleet_weights_lock: dict[str, LockedRepo] | None = Field(
        None,
        description="the stack's lock of the weights (`<stack>.lock.yaml`): repository -> `commit` and "
        "`files` (each one's `size`, and `sha256` or `git_oid`); `model_weights` downloads that commit "
        "and checks every file against it. null: no lock, the catalog's revision as it is on the day",
    )
    flashfleet_pd_heal: PdHeal | None = Field(
        None,
        description="a PD decode node's watcher: polls every prefill's /health (`prefills`) and, once one "
        "answers again after an outage, restarts each decode unit of the node (`units`) that ran since "
        "before it, once (SGLang's decode does not re-bootstrap with a restarted prefill). null: no "
        "decode here, no watcher",
    )
    flashfleet_weights_fanout: WeightsFanout | None = Field(
        None,
        description="the weights fetched once per stack (a locked stack of several GPU nodes): `role` "
        "seed (downloads from the Hub and serves its cache on `seed_address`:`port`, each file once it is "
        "complete and checked, until its `peers` are done) or peer (fetches each locked file from the seed "
        "as soon as it is offered, checks it on arrival, and takes from the Hub what the seed could not "
        "give). null: the node downloads from the Hub on its own",
    )
    flashfleet_apt_lock: dict[AptRole, dict[str, dict[str, LockedDeb]]] | None = Field(
        None,
        description="the stack's lock of what the roles apt-install from vendors' repositories: role -> "
        "repository directory (as the node's sources name it) -> package -> `version`, `sha256`, `size`; "
        "each role checks what apt would install from its directories against it and installs those "
        "versions. null: no lock; a role left out installs unlocked",
    )

    def inventory_vars(self) -> dict[str, Any]:
        """As the inventory carries them (JSON types; ansible_user, host keys and the driver's lock left
        out when unset)."""
        out = self.model_dump(mode="json")
        for optional in (
            "ansible_user",
            "flashfleet_host_keys",
            "flashfleet_apt_lock",
            "flashfleet_weights_fanout",
            "flashfleet_pd_heal",
        ):
            if out[optional] is None:
                del out[optional]
        return out


# --- the docs table --------------------------------------------------------------------------------

TABLE_BEGIN = "<!-- host-vars table: generated by `python -m flashfleet.bringup.host_vars`; do not edit -->"
TABLE_END = "<!-- end of host-vars table -->"


def _type_text(annotation: Any) -> str:
    args = get_args(annotation)
    if get_origin(annotation) is Literal:
        return "str"
    if args and type(None) in args:
        inner = [a for a in args if a is not type(None)]
        return " or ".join(_type_text(a) for a in inner) + " or null"
    if get_origin(annotation) is Annotated:
        return _type_text(args[0])
    if get_origin(annotation) is list:
        return "list"
    if is_dataclass(annotation) or (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        return "dict"
    return getattr(annotation, "__name__", str(annotation))


def _row(name: str, info: FieldInfo) -> list[str]:
    required = "" if info.is_required() else " (optional)"
    return [f"`{name}`", f"{_type_text(info.annotation)}{required}", str(info.description)]


def docs_table() -> str:
    rows = [_row(name, info) for name, info in HostVars.model_fields.items()]
    return "\n".join([TABLE_BEGIN, *markdown(("variable", "type", "meaning"), rows), TABLE_END])


def with_table(doc: str) -> str:
    """``doc`` with its generated table replaced by the model's."""
    head, _, rest = doc.partition(TABLE_BEGIN)
    _, _, tail = rest.partition(TABLE_END)
    return head + docs_table() + tail


if __name__ == "__main__":  # rewrite the table in docs/contracts.md
    default = Path(__file__).resolve().parents[2] / "docs" / "contracts.md"
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else default
    path.write_text(with_table(path.read_text(encoding="utf-8")), encoding="utf-8")
