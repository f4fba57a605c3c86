"""Container launches: the one description of how each recipe process runs in a container.

The CLI prints it as `docker run` commands, the `sglang_serve` role turns it into systemd units,
and the Kubernetes source into container specs; none of them keeps its own list of flags,
devices or mounts. Secrets never appear here: only the name of a root-only env file.
"""

from __future__ import annotations

import hashlib
import posixpath
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from flashfleet.catalog import Hardware, hardware_catalog
from flashfleet.recipes.builds import applicable
from flashfleet.recipes.errors import RecipeError
from flashfleet.recipes.layouts import MOONCAKE_CONFIG_PATH
from flashfleet.recipes.render import Process, Recipe
from flashfleet.stack.image import ImageSpec
from flashfleet.stack.lock import LockedPackage, LockedRepo

SECRET_ENV_NAMES = ("HF_TOKEN",)
# The serving API key: SGLang reads `--api-key` from its argv or from a `--config` YAML file
# (`api-key:`), never from the environment. The sglang_serve role writes this root-only file from
# the key, and the container reads it mounted read-only, so the key is in no argv, unit or
# `docker inspect`. One file per node, at the same path on the host and in the container.
API_KEY_CONFIG = "/etc/flashfleet/api-key.yaml"
CONTAINER_HF_CACHE = "/root/.cache/huggingface"
MOONCAKE_CONFIG_DIR = posixpath.dirname(MOONCAKE_CONFIG_PATH)


class LaunchSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    image: ImageSpec = ImageSpec()
    model_cache_dir: str = "/opt/flashfleet/hf-cache"
    secret_env_file: str = "/etc/flashfleet/secrets.env"
    # serving.apiKey: required: the processes that serve the OpenAI API demand the key.
    api_key: bool = False
    # The stack's lock of the weights (flashfleet.stack.lock): repository -> its commit and files.
    # A server loads that commit (`--revision`), never what the cache's `main` ref names; a
    # Kubernetes download fetches it and checks each file, as the hosts' role does.
    weights_lock: dict[str, LockedRepo] = Field(default_factory=dict)
    # The lock of the download client (huggingface_hub): its version and files' hashes; None: the
    # catalog's version from the index, unlocked.
    client_lock: LockedPackage | None = None
    # caches.jit: the kernels' compile caches on the cache volume (jit_cache_env).
    jit_cache: bool = False

    @property
    def revisions(self) -> dict[str, str]:
        """Repository -> the locked commit the servers load."""
        return {repo: entry.commit for repo, entry in self.weights_lock.items()}


# The flag naming a repository a server loads, and the flag pinning its revision.
_REVISION_FLAGS = {
    "--model-path": "--revision",
    "--speculative-draft-model-path": "--speculative-draft-model-revision",
}


def _locked_revisions(argv: tuple[str, ...], revisions: dict[str, str]) -> tuple[str, ...]:
    """The argv with the locked commit of each repository it loads (none locked: as it is)."""
    extra: list[str] = []
    for path_flag, revision_flag in _REVISION_FLAGS.items():
        if path_flag in argv and revision_flag not in argv:
            repo = argv[argv.index(path_flag) + 1]
            if repo in revisions:
                extra += [revision_flag, revisions[repo]]
    return (*argv, *extra)


# Container runtime settings per vendor (sglang install docs for CUDA and ROCm).
_VENDOR_RUNTIME: dict[str, dict[str, Any]] = {
    "nvidia": {
        "shm_size": "32g",
        "devices": (),
        "group_add": (),
        "security_opt": (),
        "cap_add": (),
    },
    "amd": {
        "shm_size": "16g",
        "devices": ("/dev/kfd", "/dev/dri"),
        "group_add": ("video",),
        "security_opt": ("seccomp=unconfined",),
        "cap_add": ("SYS_PTRACE",),
    },
}
_ULIMITS = (("memlock", "-1"), ("stack", "67108864"))


_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True)
# Sequences arrive as JSON lists when an inventory is read back (flashfleet.bringup.host_vars):
# the container is lax, its items stay strict.
_Seq = Field(strict=False)


class Mount(BaseModel):
    model_config = _STRICT

    source: str
    target: str
    read_only: bool = False

    def docker(self) -> str:
        return f"{self.source}:{self.target}{':ro' if self.read_only else ''}"


def _gpu_request(vendor: str, gpus: tuple[int, ...]) -> str | None:
    """Docker's --gpus value for NVIDIA (the devices the process owns)."""
    if vendor != "nvidia" or not gpus:
        return None
    return '"device=' + ",".join(map(str, gpus)) + '"'


class ContainerLaunch(BaseModel):
    """One process of the recipe in its container; the inventory carries it as it is dumped.

    ``gpu_request``, ``docker_run``, ``serves_http`` and ``serves_api`` follow from the other
    fields: :meth:`of` fills them in, and a launch whose copies disagree (an inventory edited by
    hand) is refused.
    """

    model_config = _STRICT

    name: str  # the recipe process name
    role: str
    node: int
    container_name: str
    image: str
    argv: Annotated[tuple[str, ...], _Seq]  # command inside the container
    env: dict[str, str]  # non-secret environment
    env_file: str  # root-only file on the host holding the secret variables
    secret_env_names: Annotated[tuple[str, ...], _Seq]
    vendor: Literal["nvidia", "amd"]
    gpus: Annotated[tuple[int, ...], _Seq]
    gpu_request: str | None
    devices: Annotated[tuple[str, ...], _Seq]
    group_add: Annotated[tuple[str, ...], _Seq]
    security_opt: Annotated[tuple[str, ...], _Seq]
    cap_add: Annotated[tuple[str, ...], _Seq]
    shm_size: str
    ulimits: dict[str, str]
    mounts: Annotated[tuple[Mount, ...], _Seq]
    port: int
    start_after: Annotated[tuple[str, ...], _Seq]
    docker_run: Annotated[tuple[str, ...], _Seq]
    rank: int = Field(description="rank of a multi-node server (0: the one that serves HTTP)")
    serves_http: bool = Field(description="answers /health (not a rank > 0)")
    serves_api: bool = Field(description="serves the OpenAI API (not an encoder, not a rank > 0)")
    prints_startup: bool = Field(
        description="prints SGLang's startup timings (an `sglang serve` that serves HTTP: not a router)"
    )
    api_key_file: str = Field(
        "", description="root-only YAML (`api-key:`) the process reads with --config; empty: no key"
    )
    instance: str = Field("", description="the cluster instance it belongs to (replica-0, prefill-1, router)")
    workers: Annotated[tuple[str, ...], _Seq] = Field(
        (), description="a cluster's router: every worker's base URL (its unit waits for their /health)"
    )
    router_url: str = Field("", description="a worker behind a cluster's router: the router's base URL")
    router_entry: dict[str, str | int] = Field(
        default_factory=dict,
        description="a worker behind a router: how the router lists it (`POST /workers` body)",
    )
    load_from: str = Field(
        "",
        description="peer_load: the base URL of the replica it loads its weights from (its unit waits "
        "for that one's /health before it starts); empty: from the node's disk",
    )

    @classmethod
    def of(cls, **fields: Any) -> ContainerLaunch:
        """The launch of these fields, with the facts that follow from them."""
        fields.setdefault("ulimits", dict(_ULIMITS))
        fields.setdefault("rank", 0)
        return cls.model_validate({**fields, **_derived(cls.model_construct(**fields))})

    @model_validator(mode="after")
    def _derived_facts_agree(self) -> ContainerLaunch:
        for name, value in _derived(self).items():
            if getattr(self, name) != value:
                raise ValueError(f"{name} is not what the launch's other fields give ({value!r})")
        return self

    def docker_options(self) -> list[tuple[str, ...]]:
        """The options of `docker run`, each flag with its value (if it takes one)."""
        groups: list[tuple[str, ...]] = [
            ("--rm",),
            ("--name", self.container_name),
            ("--network", "host"),
            ("--ipc", "host"),
            ("--shm-size", self.shm_size),
        ]
        groups += [("--ulimit", f"{name}={value}") for name, value in self.ulimits.items()]
        if (request := _gpu_request(self.vendor, self.gpus)) is not None:
            groups.append(("--gpus", request))
        groups += [("--device", device) for device in self.devices]
        groups += [("--group-add", group) for group in self.group_add]
        groups += [("--security-opt", opt) for opt in self.security_opt]
        groups += [("--cap-add", cap) for cap in self.cap_add]
        groups += [("-v", mount.docker()) for mount in self.mounts]
        if self.env_file:
            groups.append(("--env-file", self.env_file))
        groups += [("-e", f"{key}={value}") for key, value in self.env.items()]
        return groups


def _derived(launch: ContainerLaunch) -> dict[str, Any]:
    """The facts that follow from a launch's other fields."""
    serves_http = launch.rank == 0
    options = [word for group in launch.docker_options() for word in group]
    return {
        "gpu_request": _gpu_request(launch.vendor, launch.gpus),
        "docker_run": ("docker", "run", *options, launch.image, *launch.argv),
        "serves_http": serves_http,
        # The OpenAI API (/v1/models, chat): not an encoder-only server, not a rank > 0.
        "serves_api": serves_http and launch.role != "encoder",
        "prints_startup": serves_http and launch.role != "router",
    }


def container_argv(process: Process) -> tuple[str, ...]:
    """The process argv as it runs in its container.

    The container only sees the GPUs it owns, renumbered from 0, so the bare-metal
    ``--base-gpu-id`` (the PD decode role's offset) is dropped: it would point past them.
    """
    argv = list(process.argv)
    if "--base-gpu-id" in argv:
        i = argv.index("--base-gpu-id")
        del argv[i : i + 2]
    return tuple(argv)


def _visible_devices_env(hw: Hardware, process: Process) -> dict[str, str]:
    # NVIDIA narrows devices through --gpus; ROCm containers see every /dev/dri node, so the
    # process's GPUs are named explicitly when it does not own the whole node.
    if hw.vendor == "amd" and process.gpus and len(process.gpus) < hw.gpus_per_node:
        return {"HIP_VISIBLE_DEVICES": ",".join(map(str, process.gpus))}
    return {}


def _mounts(recipe: Recipe, settings: LaunchSettings) -> tuple[Mount, ...]:
    mounts = [Mount(source=settings.model_cache_dir, target=CONTAINER_HF_CACHE)]
    if recipe.options.hicache == "l1l2l3":
        mounts.append(Mount(source=MOONCAKE_CONFIG_DIR, target=MOONCAKE_CONFIG_DIR, read_only=True))
    return tuple(mounts)


# The compile caches SGLang's kernels write at first boot, each moved by its own variable from
# a folder inside the container (which `down` removes) to the cache volume. Defaults in the
# image (docs/bringup-time.md): FlashInfer ~/.cache/flashinfer (under FLASHINFER_WORKSPACE_BASE),
# DeepGEMM ~/.deep_gemm, Triton ~/.triton/cache, TVM FFI (SGLang's jit_kernel) ~/.cache/tvm-ffi,
# TileLang ~/.tilelang/cache, torch inductor /tmp/torchinductor_root, torch extensions
# ~/.cache/torch_extensions, CUDA's PTX cache ~/.nv/ComputeCache.
_JIT_CACHE_VARS = {
    "FLASHINFER_WORKSPACE_BASE": "flashinfer",
    "DG_JIT_CACHE_DIR": "deep_gemm",
    "TRITON_CACHE_DIR": "triton",
    "TVM_FFI_CACHE_DIR": "tvm-ffi",
    "TILELANG_CACHE_DIR": "tilelang",
    "TORCHINDUCTOR_CACHE_DIR": "torchinductor",
    "TORCH_EXTENSIONS_DIR": "torch_extensions",
}
_VENDOR_JIT_CACHE_VARS = {"nvidia": {"CUDA_CACHE_PATH": "nv-compute"}, "amd": {}}
JIT_CACHE_DIR = ".flashfleet-jit"  # inside the model cache, beside the Hub's hub/ folder

# The server words that do not change which kernels a boot builds: where it listens and meets
# its peers, which rank of a multi-node instance it is (every rank builds the same shapes), the
# chat parsers, its metrics and key, where its weights come from and at which revision. Every
# other word is in the key: a word this list misses costs a cold boot, never a wrong warm one.
_KERNEL_NEUTRAL_FLAGS = frozenset(
    {
        "--host", "--port", "--nccl-port", "--dist-init-addr", "--node-rank",
        "--disaggregation-bootstrap-port", "--engine-info-bootstrap-port",
        "--reasoning-parser", "--tool-call-parser", "--enable-metrics", "--config", "--api-key",
        "--revision", "--served-model-name",
        "--weight-loader-prefetch-checkpoints", "--weight-loader-prefetch-num-threads",
        "--weight-cache-mode", "--weight-cache-socket", "--weight-cache-timeout",
        "--load-format", "--remote-instance-weight-loader-seed-instance-ip",
        "--remote-instance-weight-loader-seed-instance-service-port",
        "--remote-instance-weight-loader-send-weights-group-ports",
        "--remote-instance-weight-loader-backend",
        "--remote-instance-weight-loader-start-seed-via-transfer-engine",
    }
)  # fmt: skip


def kernel_args(argv: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """The server's words that change its kernels (each flag with its values), in order: two
    servers with the same build the same kernels, so one's cache leaves the other nothing to build."""
    out: list[str] = []
    skipping = False
    for word in argv:
        if word.startswith("--"):
            skipping = word in _KERNEL_NEUTRAL_FLAGS
        if not skipping:
            out.append(word)
    return tuple(out)


def kernel_cache_key(image: str, gpu: str) -> str:
    """One folder per image (its digest where the stack is locked) and GPU model: kernels built by
    another image's compilers, or for another GPU, are never loaded, wherever the volume goes (a
    snapshot restored under another stack). The server's words are not in it: each library keys
    its own entries by the kernel's configuration (Triton by source and target, DeepGEMM and
    FlashInfer by kernel parameters), so a folder holds the kernels of every set of words run on
    it, and a change of kernel words (kernel_args) builds only what it adds."""
    return hashlib.sha256(f"{image}\0{gpu}".encode()).hexdigest()[:16]


def image_identity(image: ImageSpec, hw: Hardware) -> str:
    """What the kernels were compiled by: the image the units run, and, for the derived image
    (named by the release's tag, whatever it was built on), the upstream digest once locked."""
    ref = image.ref(hw)
    return f"{ref} from {image.digest}" if image.derived and image.digest else ref


def jit_cache_env(vendor: str, key: str) -> dict[str, str]:
    """The variables that put every compile cache under the model cache's JIT folder for the key
    (kernel_cache_key).

    The folder is inside the model cache volume, so it lives, and goes, with the weights:
    kept across `down` unless teardown.keepCaches is false, on the hostPath or PVC on Kubernetes.
    """
    base = posixpath.join(CONTAINER_HF_CACHE, JIT_CACHE_DIR, key)
    names = {**_JIT_CACHE_VARS, **_VENDOR_JIT_CACHE_VARS[vendor]}
    return {var: posixpath.join(base, sub) for var, sub in names.items()}


def _rdma_access(recipe: Recipe) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(devices, capabilities) for RDMA: the Mooncake store over rdma/efa pins memory."""
    if recipe.options.hicache == "l1l2l3":
        return ("/dev/infiniband",), ("IPC_LOCK",)
    return (), ()


def container_launches(recipe: Recipe, settings: LaunchSettings | None = None) -> list[ContainerLaunch]:
    """Every process of the recipe as a container launch, in start order."""
    settings = settings or LaunchSettings()
    hw = hardware_catalog()[recipe.hardware]
    runtime = _VENDOR_RUNTIME[hw.vendor]
    rdma_devices, rdma_caps = _rdma_access(recipe)
    launches = []
    for proc in recipe.start_order():
        serves_model = proc.role != "router"
        # Only an `sglang serve` process that serves the OpenAI API (rank 0, not an encoder)
        # takes the key; the PD router takes its flags from argv only (refused by planning).
        keyed = settings.api_key and serves_model and proc.rank == 0 and proc.role != "encoder"
        mounts = _mounts(recipe, settings) if serves_model else ()
        argv = container_argv(proc)
        env = {**proc.env, **_visible_devices_env(hw, proc)}
        if serves_model and settings.jit_cache:
            key = kernel_cache_key(image_identity(settings.image, hw), hw.id)
            env = {**jit_cache_env(hw.vendor, key), **env}
        if serves_model:
            argv = _locked_revisions(argv, settings.revisions)
        if keyed:
            mounts = (*mounts, Mount(source=API_KEY_CONFIG, target=API_KEY_CONFIG, read_only=True))
            argv = (*argv, "--config", API_KEY_CONFIG)
        launches.append(
            ContainerLaunch.of(
                name=proc.name,
                role=proc.role,
                node=proc.node,
                container_name=f"flashfleet-{proc.name}",
                image=settings.image.ref(hw),
                argv=argv,
                env=env,
                env_file=settings.secret_env_file if serves_model else "",
                secret_env_names=SECRET_ENV_NAMES if serves_model else (),
                vendor=hw.vendor,
                gpus=proc.gpus,
                devices=(*runtime["devices"], *rdma_devices) if serves_model else (),
                group_add=runtime["group_add"] if serves_model else (),
                security_opt=runtime["security_opt"] if serves_model else (),
                cap_add=(*runtime["cap_add"], *rdma_caps) if serves_model else (),
                shm_size=runtime["shm_size"],
                mounts=mounts,
                port=proc.port,
                start_after=proc.start_after,
                rank=proc.rank,
                api_key_file=API_KEY_CONFIG if keyed else "",
                instance=proc.instance,
                workers=proc.workers,
                router_url=proc.router_url,
                router_entry=proc.router_entry,
                load_from=proc.load_from,
            )
        )
    return launches


def check_build_requirements(recipe: Recipe, image: ImageSpec) -> None:
    """Refuse an image older than a known requirement of the recipe."""
    for req in applicable(recipe.hardware, recipe.options):
        if req.satisfied_by(image.version, image.includes):
            continue
        if req.since:
            why = (
                f"image {image.version} is older than {req.since}, the first release with "
                f"PR {req.pr} ({req.summary})"
            )
        else:
            why = (
                f"the recipe needs PR {req.pr} ({req.summary}), whose first release is not "
                f"recorded: pin an image that has it and list '{req.pr}' in image.includes"
            )
        raise RecipeError("image", req.id, f"image: {why}", req.source)
