"""model_weights' choice of the weights volume (tasks/volume.yml), evaluated by Ansible's own
templating over device facts shaped as Ansible's Linux hardware facts give them on a Nitro node:
the root EBS disk (partitioned), local NVMe instance storage, and the weights volume."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

ROLE = Path(__file__).parents[2] / "roles" / "model_weights"
EBS = "Amazon Elastic Block Store"
ROOT = {"model": EBS, "partitions": {"nvme0n1p1": {"size": "399.9 GB"}, "nvme0n1p15": {"size": "105.00 MB"}}}
WEIGHTS = {"model": EBS, "partitions": {}}
LOCAL = {"model": "Amazon EC2 NVMe Instance Storage", "partitions": {}}
LOOP = {"model": None, "partitions": {}}


def _disks(devices: dict[str, Any]) -> list[str]:
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    role_vars = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    templar = Templar(loader=DataLoader(), variables={"ansible_facts": {"devices": devices}})
    return list(templar.template(trust_as_template(role_vars["_model_weights_volume_disks"])))


def test_the_unpartitioned_ebs_disk_is_the_weights_volume() -> None:
    devices = {"nvme0n1": ROOT, "nvme1n1": LOCAL, "nvme2n1": WEIGHTS, "nvme3n1": LOCAL, "loop0": LOOP}
    assert _disks(devices) == ["nvme2n1"]


@pytest.mark.parametrize(
    "devices",
    [
        {"nvme0n1": ROOT, "nvme1n1": LOCAL},  # no weights volume attached
        {"nvme0n1": ROOT, "nvme1n1": WEIGHTS, "nvme2n1": WEIGHTS},  # another EBS disk beside it
    ],
)
def test_none_or_two_candidates_are_not_guessed_between(devices: dict[str, Any]) -> None:
    # the role's assert wants exactly one: a second loose EBS disk is someone's data
    assert len(_disks(devices)) != 1


def test_the_role_formats_only_a_disk_without_a_filesystem_and_mounts_by_uuid() -> None:
    tasks = {t["name"]: t for t in yaml.safe_load((ROLE / "tasks" / "volume.yml").read_text())}
    mkfs = tasks["Volume | ext4 on an empty volume"]
    assert mkfs["when"] == "__model_weights_volume_fs.stdout | trim == ''"
    assert tasks["Volume | its filesystem"]["failed_when"] == "__model_weights_volume_fs.rc not in [0, 2]"
    unit = (ROLE / "templates" / "weights-volume.mount.j2").read_text()
    assert "What=UUID={{ __model_weights_volume_uuid.stdout | trim }}" in unit
    assert "Where={{ model_weights_cache_dir }}" in unit
