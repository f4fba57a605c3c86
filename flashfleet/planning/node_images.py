"""Which AMI an AWS stack's instances boot, decided once: the stack's own `nodes.source.ami`,
else the AMI the stack's lock resolved the public SSM parameter to, else that parameter as it
is at bring-up.

The GPU nodes boot AWS's Deep Learning Base AMI (its OSS NVIDIA driver already installed), a
router's own CPU instance Canonical's Ubuntu of the same release; both are found through SSM
parameters that AWS and Canonical move to each new release. An AMI id names one image for good,
so a lock that holds the id boots the same OS, and the same driver bytes, next week.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from flashfleet.stack.lock import LockedAmi, StackLock
from flashfleet.stack.spec import AwsSource, StackSpec

DLAMI_PARAMETER = "/aws/service/deeplearning/ami/{arch}/base-oss-nvidia-driver-gpu-{os}/latest/ami-id"
# Canonical's public SSM parameters (documentation.ubuntu.com, "Find Ubuntu images on AWS"):
# images from 23.10 on are published as ebs-gp3, earlier ones as ebs-gp2.
UBUNTU_PARAMETER = "/aws/service/canonical/ubuntu/server/{release}/stable/current/{arch}/hvm/{volume}/ami-id"
UBUNTU_ARCH = {"x86_64": "amd64", "arm64": "arm64"}
UBUNTU_VOLUME = {"22.04": "ebs-gp2", "24.04": "ebs-gp3"}


def dlami_parameter(arch: str, os_name: str) -> str:
    return DLAMI_PARAMETER.format(arch=arch, os=os_name)


def ubuntu_parameter(arch: str, os_name: str) -> str:
    """Canonical's SSM parameter of the current Ubuntu server AMI (a router's CPU node: no GPU,
    so no DLAMI), the same release as the GPU nodes' DLAMI."""
    release = os_name.removeprefix("ubuntu-")
    return UBUNTU_PARAMETER.format(arch=UBUNTU_ARCH[arch], release=release, volume=UBUNTU_VOLUME[release])


class NodeImage(BaseModel):
    """One AMI a stack's instances boot: whose (the GPU nodes', a router's), the SSM parameter
    naming it, and what pins it (the stack's own id, the lock's, or nothing)."""

    model_config = ConfigDict(frozen=True)

    who: str  # "GPU nodes" or "router"
    parameter: str
    stack_ami: str | None = None  # nodes.source.ami (GPU nodes only)
    locked: LockedAmi | None = None

    @property
    def label(self) -> str:
        return f"the {self.who}' AMI" if self.who.endswith("s") else f"the {self.who}'s AMI"

    @property
    def ami(self) -> str | None:
        """The id the instances boot; None: the parameter at bring-up."""
        return self.stack_ami or (self.locked.ami if self.locked is not None else None)


def node_images(
    spec: StackSpec, arch: str, region: str | None, router_arch: str | None, lock: StackLock | None
) -> list[NodeImage]:
    """The AMIs an AWS stack's instances boot (none on existing hosts or Kubernetes). The lock's
    id counts only for the stack's region: AMI ids are regional."""
    src = spec.nodes.source
    if not isinstance(src, AwsSource):
        return []
    wants = [("GPU nodes", dlami_parameter(arch, src.dlami_os), src.ami)]
    if router_arch is not None:
        wants.append(("router", ubuntu_parameter(router_arch, src.dlami_os), None))
    out = []
    for who, parameter, own in wants:
        held = lock.amis.get(parameter) if lock is not None else None
        out.append(
            NodeImage(
                who=who,
                parameter=parameter,
                stack_ami=own,
                locked=held if held is not None and held.region == region else None,
            )
        )
    return out


def unlocked_images(images: list[NodeImage]) -> list[str]:
    """What `lock: required` names of AMIs neither the stack nor its lock pins."""
    return [image.label for image in images if image.ami is None]
