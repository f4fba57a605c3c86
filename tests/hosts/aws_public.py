"""What AWS and Canonical publish in every account: the public SSM parameters naming the current
Deep Learning AMI and Ubuntu AMI (flashfleet/planning/node_images.py), in a moto backend of this
process (the in-process server of tests/conftest.py's `moto_url` shares it). Names below /aws/
are reserved: moto refuses to put them, as AWS does, so they are published here as AWS does."""

from __future__ import annotations

from datetime import UTC, datetime


def publish(region: str, name: str, value: str) -> None:
    """A new version of the public parameter `name` in `region`, naming `value`."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ssm.models import Parameter, ssm_backends

    versions = ssm_backends[DEFAULT_ACCOUNT_ID][region]._parameters[name]
    versions.append(
        Parameter(
            account_id=DEFAULT_ACCOUNT_ID,
            name=name,
            value=value,
            parameter_type="String",
            description=None,
            allowed_pattern=None,
            keyid=None,
            last_modified_date=datetime.now(UTC),
            version=len(versions) + 1,
            data_type="aws:ec2:image",
        )
    )


def publish_catalog(region: str, ami: str = "ami-0a1b2c3d4e5f60718") -> dict[str, str]:
    """Every parameter a catalog stack boots from in `region` (both DLAMI releases and
    architectures, and Canonical's Ubuntu for a router), each naming `ami`; name -> value."""
    from flashfleet.planning.node_images import dlami_parameter, ubuntu_parameter

    names = [
        f(arch, os_name)
        for f in (dlami_parameter, ubuntu_parameter)
        for arch in ("x86_64", "arm64")
        for os_name in ("ubuntu-22.04", "ubuntu-24.04")
    ]
    for name in names:
        publish(region, name, ami)
    return dict.fromkeys(names, ami)
