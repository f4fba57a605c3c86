"""What a stack may set for the roles: the site it runs at (`site:` in the stack spec).

A closed, typed section: the mirrors of the vendors' apt repositories, the package indexes, the
Hub's address, the registry mirrors, the container CLI, how long a server may take to answer and
the disk check's sizes. Each value passes the spec's own rules (safe_values) like every other
field, and `role_args` is the one place that says which role arguments it sets: the bring-up
hands them to every play as extra variables. Nothing else reaches a role from a stack file, so
a stack cannot name a connection variable, a secret's file, a lock or a directory flashfleet
deletes. `flashfleet configure -e` remains an operator's tool, checked by
flashfleet.bringup.role_vars.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, Field, StrictBool, StrictInt

from flashfleet.stack import safe_values
from flashfleet.stack.strict import Strict

Url = Annotated[str, AfterValidator(safe_values.url)]
Version = Annotated[str, AfterValidator(safe_values.version)]
HostPort = Annotated[str, AfterValidator(safe_values.host_port)]
UrlOrPath = Annotated[str, AfterValidator(safe_values.url_or_path)]
HostPath = Annotated[str, AfterValidator(safe_values.host_path)]
Program = Annotated[str, AfterValidator(safe_values.executable)]


class AptMirrors(Strict):
    """Mirrors of the vendors' apt repositories, each with the vendor's layout below its URL."""

    cuda: Url | None = None  # NVIDIA's CUDA repository (the driver, IMEX, fabric manager)
    docker: Url | None = None  # Docker's repository (docker-ce)
    nvidia_container: Url | None = None  # the NVIDIA Container Toolkit's repository
    amdgpu: Url | None = None  # AMD's amdgpu driver repository
    rocm: Url | None = None  # AMD's ROCm repository
    rocm_key: Url | None = None  # AMD's signing key, where the mirror serves it
    ubuntu_snapshots: Url | None = None  # Ubuntu's snapshot archive, for the derived image's apt
    docker_version: Version | None = None  # the docker-ce release the mirror holds


class PipIndex(Strict):
    """Where pip reads packages: the weights client's, the derived image's, the Mooncake wheel's."""

    index_url: Url | None = None
    find_links: UrlOrPath | None = None  # a URL or a directory on the node
    trusted_host: HostPort | None = None  # an index without TLS: host or host:port
    mooncake_wheels: HostPath | None = None  # a directory of Mooncake wheels on the node


class HubMirror(Strict):
    """The Hugging Face Hub, or a mirror of it."""

    endpoint: Url | None = None
    # The HF token is sent to an endpoint without TLS only when this says so (docs/security.md).
    token_over_http: StrictBool = False


class Readiness(Strict):
    """How long a server may take to answer its health check, and how often it is asked."""

    timeout_seconds: StrictInt | None = Field(default=None, ge=10, le=7 * 24 * 3600)
    poll_seconds: StrictInt | None = Field(default=None, ge=1, le=600)


class DiskCheck(Strict):
    """The sizes preflight's disk check adds up, for a site that serves a smaller checkpoint."""

    image_gb: StrictInt | None = Field(default=None, ge=1, le=10_000)
    weights_gb: StrictInt | None = Field(default=None, ge=1, le=100_000)
    margin_gb: StrictInt | None = Field(default=None, ge=1, le=10_000)


class Site(Strict):
    apt: AptMirrors = AptMirrors()
    pip: PipIndex = PipIndex()
    hub: HubMirror = HubMirror()
    registry_mirrors: tuple[Url, ...] = Field(default=(), max_length=16)  # docker's daemon.json
    # The container CLI the serving units run (a wrapper a site puts in front of docker, say).
    container_cli: Program | None = None
    readiness: Readiness = Readiness()
    disk_check: DiskCheck = DiskCheck()

    def role_args(self) -> dict[str, Any]:
        """The role arguments this site sets, by name: the only ones a stack file sets."""
        apt, pip, hub, ready, disk = self.apt, self.pip, self.hub, self.readiness, self.disk_check
        out: dict[str, Any] = {
            "nvidia_driver_repo_url": apt.cuda,
            "container_runtime_docker_repo_url": apt.docker,
            "container_runtime_nvidia_repo_url": apt.nvidia_container,
            "rocm_driver_amdgpu_repo_url": apt.amdgpu,
            "rocm_driver_rocm_repo_url": apt.rocm,
            "rocm_driver_repo_key_url": apt.rocm_key,
            "sglang_image_apt_archive": apt.ubuntu_snapshots,
            "container_runtime_docker_version": apt.docker_version,
            # one index for every pip the nodes run
            "model_weights_pip_index_url": pip.index_url,
            "sglang_image_pip_index_url": pip.index_url,
            "model_weights_pip_find_links": pip.find_links,
            "sglang_image_pip_find_links": pip.find_links,
            "model_weights_pip_trusted_host": pip.trusted_host,
            "sglang_image_pip_trusted_host": pip.trusted_host,
            "mooncake_wheels_dir": pip.mooncake_wheels,
            "model_weights_hf_endpoint": hub.endpoint,
            "model_weights_hf_token_over_http": hub.token_over_http or None,
            "container_runtime_daemon_options": (
                {"registry-mirrors": list(self.registry_mirrors)} if self.registry_mirrors else None
            ),
            "sglang_serve_docker": self.container_cli,
            "sglang_serve_ready_timeout_s": ready.timeout_seconds,
            "sglang_serve_ready_poll_s": ready.poll_seconds,
            "preflight_image_gb": disk.image_gb,
            "preflight_weights_gb": disk.weights_gb,
            "preflight_disk_margin_gb": disk.margin_gb,
        }
        return {name: value for name, value in out.items() if value is not None}
