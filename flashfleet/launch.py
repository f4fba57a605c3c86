"""Container launches: the one description of how each recipe process runs in a container.

The CLI prints it as `docker run` commands, the `sglang_serve` role turns it into systemd units,
and the Kubernetes source into container specs; none of them keeps its own list of flags,
devices or mounts. Secrets never appear here: only the name of a root-only env file.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from flashfleet.catalog import Hardware, hardware_catalog
from flashfleet.recipes.builds import applicable
from flashfleet.recipes.errors import RecipeError
from flashfleet.recipes.layouts import MOONCAKE_CONFIG_PATH
from flashfleet.recipes.render import Process, Recipe
from flashfleet.stack.image import ImageSpec

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


@dataclass(frozen=True)
class Mount:
    source: str
    target: str
    read_only: bool = False

    def docker(self) -> str:
        return f"{self.source}:{self.target}{':ro' if self.read_only else ''}"


@dataclass(frozen=True)
class ContainerLaunch:
    name: str  # the recipe process name
    role: str
    node: int
    container_name: str
    image: str
    argv: tuple[str, ...]  # command inside the container
    env: dict[str, str]  # non-secret environment
    env_file: str  # root-only file on the host holding the secret variables
    secret_env_names: tuple[str, ...]
    vendor: str
    gpus: tuple[int, ...]
    devices: tuple[str, ...]
    group_add: tuple[str, ...]
    security_opt: tuple[str, ...]
    cap_add: tuple[str, ...]
    shm_size: str
    mounts: tuple[Mount, ...]
    port: int
    start_after: tuple[str, ...]
    ulimits: tuple[tuple[str, str], ...] = _ULIMITS
    build_notes: tuple[str, ...] = field(default_factory=tuple)
    rank: int = 0  # of a multi-node server; ranks > 0 run no HTTP server
    # Root-only YAML on the host holding `api-key:` (read with --config; "" when none).
    api_key_file: str = ""

    @property
    def serves_http(self) -> bool:
        return self.rank == 0

    @property
    def serves_api(self) -> bool:
        """The OpenAI API (/v1/models, chat): not an encoder-only server, not a rank > 0."""
        return self.serves_http and self.role != "encoder"

    def gpu_request(self) -> str | None:
        """Docker's --gpus value for NVIDIA (the devices the process owns)."""
        if self.vendor != "nvidia" or not self.gpus:
            return None
        return '"device=' + ",".join(map(str, self.gpus)) + '"'

    def docker_run_argv(self) -> list[str]:
        argv = [
            "docker",
            "run",
            "--rm",
            "--name",
            self.container_name,
            "--network",
            "host",
            "--ipc",
            "host",
        ]
        argv += ["--shm-size", self.shm_size]
        for name, value in self.ulimits:
            argv += ["--ulimit", f"{name}={value}"]
        if (request := self.gpu_request()) is not None:
            argv += ["--gpus", request]
        for device in self.devices:
            argv += ["--device", device]
        for group in self.group_add:
            argv += ["--group-add", group]
        for opt in self.security_opt:
            argv += ["--security-opt", opt]
        for cap in self.cap_add:
            argv += ["--cap-add", cap]
        for mount in self.mounts:
            argv += ["-v", mount.docker()]
        if self.env_file:
            argv += ["--env-file", self.env_file]
        for key, value in self.env.items():
            argv += ["-e", f"{key}={value}"]
        return [*argv, self.image, *self.argv]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "role": self.role,
            "node": self.node,
            "container_name": self.container_name,
            "image": self.image,
            "argv": list(self.argv),
            "env": dict(self.env),
            "env_file": self.env_file,
            "secret_env_names": list(self.secret_env_names),
            "vendor": self.vendor,
            "gpus": list(self.gpus),
            "gpu_request": self.gpu_request(),
            "devices": list(self.devices),
            "group_add": list(self.group_add),
            "security_opt": list(self.security_opt),
            "cap_add": list(self.cap_add),
            "shm_size": self.shm_size,
            "ulimits": {k: v for k, v in self.ulimits},
            "mounts": [
                {"source": m.source, "target": m.target, "read_only": m.read_only} for m in self.mounts
            ],
            "port": self.port,
            "start_after": list(self.start_after),
            "docker_run": self.docker_run_argv(),
            "rank": self.rank,
            "serves_http": self.serves_http,
            "serves_api": self.serves_api,
            "api_key_file": self.api_key_file,
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
    mounts = [Mount(settings.model_cache_dir, CONTAINER_HF_CACHE)]
    if recipe.options.hicache == "l1l2l3":
        mounts.append(Mount(MOONCAKE_CONFIG_DIR, MOONCAKE_CONFIG_DIR, read_only=True))
    return tuple(mounts)


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
    notes = tuple(r.note() for r in applicable(recipe.hardware, recipe.options))
    launches = []
    for proc in recipe.start_order():
        serves_model = proc.role != "router"
        # Only an `sglang serve` process that serves the OpenAI API (rank 0, not an encoder)
        # takes the key; the PD router takes its flags from argv only (refused by planning).
        keyed = settings.api_key and serves_model and proc.rank == 0 and proc.role != "encoder"
        mounts = _mounts(recipe, settings) if serves_model else ()
        argv = container_argv(proc)
        if keyed:
            mounts = (*mounts, Mount(API_KEY_CONFIG, API_KEY_CONFIG, read_only=True))
            argv = (*argv, "--config", API_KEY_CONFIG)
        launches.append(
            ContainerLaunch(
                name=proc.name,
                role=proc.role,
                node=proc.node,
                container_name=f"flashfleet-{proc.name}",
                image=settings.image.ref(hw),
                argv=argv,
                env={**proc.env, **_visible_devices_env(hw, proc)},
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
                build_notes=notes,
                rank=proc.rank,
                api_key_file=API_KEY_CONFIG if keyed else "",
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
