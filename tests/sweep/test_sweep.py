"""`flashfleet sweep` with boto3 against moto's server on 127.0.0.1 (found through AWS_ENDPOINT_URL).

The account holds expired, unexpired, foreign (someone else's tags), untagged and orphaned
(stack file gone) instances, plus tagged launch templates, security groups, key pairs and
volumes (moto 5 has no placement-group API: sweep says it could not list them and goes on). Only the stale flashfleet ones may go, and a dry run changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer

from flashfleet import sweep
from flashfleet.cli import main

PAST = "2026-01-01T00:00:00Z"
FUTURE = (datetime.now(UTC) + timedelta(days=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
AMI = "ami-12c6146b"  # one of moto's built-in images


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def ec2(moto_url, monkeypatch):
    for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    boto3.client("ec2").meta.endpoint_url  # noqa: B018  (fails loudly if the env is not honoured)
    # a fresh account per test: moto's reset endpoint
    import urllib.request

    urllib.request.urlopen(urllib.request.Request(f"{moto_url}/moto-api/reset", method="POST"), timeout=10)
    return boto3.client("ec2")


def tags(**kv: str) -> list[dict[str, str]]:
    return [{"Key": k.replace("__", ":").replace("_", "-"), "Value": v} for k, v in kv.items()]


def launch(ec2, tag_list):
    kwargs = {"ImageId": AMI, "MinCount": 1, "MaxCount": 1, "InstanceType": "t3.micro"}
    if tag_list:
        kwargs["TagSpecifications"] = [{"ResourceType": "instance", "Tags": tag_list}]
    return ec2.run_instances(**kwargs)["Instances"][0]["InstanceId"]


@pytest.fixture
def account(ec2, tmp_path):
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    (stacks / "Pulumi.live.yaml").write_text("config: {}\n")
    (stacks / "Pulumi.other.yaml").write_text("config: {}\n")
    ids = {
        "expired": launch(
            ec2, tags(flashfleet__stack="live", flashfleet__expires_at=PAST, flashfleet__role="serve")
        ),
        "unexpired": launch(ec2, tags(flashfleet__stack="live", flashfleet__expires_at=FUTURE)),
        "no_expiry": launch(ec2, tags(flashfleet__stack="live")),
        "foreign": launch(
            ec2, [{"Key": "owner", "Value": "someone-else"}, {"Key": "expires-at", "Value": PAST}]
        ),
        "untagged": launch(ec2, []),
        "orphan": launch(ec2, tags(flashfleet__stack="gone", flashfleet__expires_at=FUTURE)),
        "typo": launch(ec2, tags(flashfleet__stack="live", flashfleet__expires_at="next tuesday")),
        "other_expired": launch(ec2, tags(flashfleet__stack="other", flashfleet__expires_at=PAST)),
    }
    expired_tags = tags(flashfleet__stack="live", flashfleet__expires_at=PAST)
    lt = ec2.create_launch_template(
        LaunchTemplateName="ff-expired", LaunchTemplateData={"ImageId": AMI},
        TagSpecifications=[{"ResourceType": "launch-template", "Tags": expired_tags}],
    )["LaunchTemplate"]["LaunchTemplateId"]  # fmt: skip
    lt_keep = ec2.create_launch_template(
        LaunchTemplateName="ff-live", LaunchTemplateData={"ImageId": AMI},
        TagSpecifications=[{"ResourceType": "launch-template", "Tags": tags(flashfleet__stack="live")}],
    )["LaunchTemplate"]["LaunchTemplateId"]  # fmt: skip
    sg = ec2.create_security_group(
        GroupName="ff-expired", Description="x",
        TagSpecifications=[{"ResourceType": "security-group", "Tags": expired_tags}],
    )["GroupId"]  # fmt: skip
    sg_foreign = ec2.create_security_group(GroupName="not-ours", Description="x")["GroupId"]
    kp = ec2.create_key_pair(
        KeyName="ff-orphan",
        TagSpecifications=[{"ResourceType": "key-pair", "Tags": tags(flashfleet__stack="gone")}],
    )["KeyName"]
    vol = ec2.create_volume(
        Size=1,
        AvailabilityZone="eu-west-1a",
        TagSpecifications=[{"ResourceType": "volume", "Tags": expired_tags}],
    )["VolumeId"]
    vol_foreign = ec2.create_volume(Size=1, AvailabilityZone="eu-west-1a")["VolumeId"]
    ids |= {
        "lt": lt,
        "lt_keep": lt_keep,
        "sg": sg,
        "sg_foreign": sg_foreign,
        "kp": kp,
        "vol": vol,
        "vol_foreign": vol_foreign,
    }
    return stacks, ids


def live_instances(ec2) -> set[str]:
    res = ec2.describe_instances(Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}])
    return {i["InstanceId"] for r in res["Reservations"] for i in r["Instances"]}


def inventory(ec2) -> dict[str, set[str]]:
    return {
        "instances": live_instances(ec2),
        "lts": {t["LaunchTemplateId"] for t in ec2.describe_launch_templates()["LaunchTemplates"]},
        "sgs": {g["GroupId"] for g in ec2.describe_security_groups()["SecurityGroups"]},
        "kps": {k["KeyName"] for k in ec2.describe_key_pairs()["KeyPairs"]},
        "vols": {v["VolumeId"] for v in ec2.describe_volumes()["Volumes"]},
    }


STALE_INSTANCES = ("expired", "orphan", "other_expired")
KEPT_INSTANCES = ("unexpired", "no_expiry", "foreign", "untagged", "typo")


def test_find_classifies_every_case(ec2, account):
    stacks_dir, ids = account
    unlisted: dict[str, str] = {}
    findings = sweep.find(
        ec2, now=datetime.now(UTC), stacks=sweep.known_stacks(stacks_dir), unlisted=unlisted
    )
    assert set(unlisted) == {"placement-group"}  # moto 5 has no placement-group API; the rest still goes
    by_id = {f.id: f for f in findings}
    for name in STALE_INSTANCES:
        assert by_id[ids[name]].stale, name
    for name in ("unexpired", "no_expiry", "typo"):
        assert not by_id[ids[name]].stale, name
    for name in ("foreign", "untagged", "sg_foreign", "vol_foreign"):
        assert ids[name] not in by_id, name  # not ours: not even listed
    assert by_id[ids["expired"]].reason == f"expired at {PAST}"
    assert by_id[ids["expired"]].role == "serve"
    assert by_id[ids["orphan"]].reason == "stack gone no longer exists"
    assert "unreadable" in by_id[ids["typo"]].reason
    assert by_id[ids["lt"]].stale
    assert not by_id[ids["lt_keep"]].stale
    assert by_id[ids["sg"]].stale
    assert by_id[ids["kp"]].reason == "stack gone no longer exists"
    assert by_id[ids["vol"]].stale
    kinds = [f.kind for f in findings]
    assert kinds == sorted(kinds, key=sweep.KINDS.index)  # instances first: deletion order


def test_dry_run_changes_nothing(ec2, account, capsys):
    stacks_dir, ids = account
    before = inventory(ec2)
    assert main(["sweep", "--stacks-dir", str(stacks_dir)]) == 0
    out = capsys.readouterr().out
    assert inventory(ec2) == before
    for name in STALE_INSTANCES:
        assert f"would delete instance        {ids[name]}" in out
    for name in KEPT_INSTANCES:
        assert ids[name] not in out
    assert "dry run, nothing changed" in out


def test_yes_deletes_only_the_stale_flashfleet_resources(ec2, account, capsys):
    stacks_dir, ids = account
    before = inventory(ec2)
    assert main(["sweep", "--stacks-dir", str(stacks_dir), "--yes"]) == 0
    after = inventory(ec2)
    assert after["instances"] == before["instances"] - {ids[n] for n in STALE_INSTANCES}
    assert {ids[n] for n in KEPT_INSTANCES} <= after["instances"]
    assert after["lts"] == before["lts"] - {ids["lt"]}
    assert after["sgs"] == before["sgs"] - {ids["sg"]}
    assert after["kps"] == before["kps"] - {ids["kp"]}
    assert ids["vol"] not in after["vols"]  # (root volumes of terminated instances go with them)
    assert ids["vol_foreign"] in after["vols"]
    captured = capsys.readouterr()
    assert "deleted 7 of 7 stale resources" in captured.out
    assert "could not list placement-groups, not swept" in captured.err


def test_stack_filter_limits_the_sweep(ec2, account, capsys):
    stacks_dir, ids = account
    assert (
        main(["sweep", "--stacks-dir", str(stacks_dir), "--stack", "other", "--yes", "--format", "json"]) == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["deleted"] == [ids["other_expired"]]
    assert ids["expired"] in live_instances(ec2)


def test_all_lists_kept_resources_with_reasons(ec2, account, capsys):
    stacks_dir, ids = account
    assert main(["sweep", "--stacks-dir", str(stacks_dir), "--all", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["dry_run"] is True
    kept = {f["id"]: f["reason"] for f in report["findings"] if not f["stale"]}
    assert kept[ids["unexpired"]] == f"kept: expires at {FUTURE}"
    assert kept[ids["no_expiry"]] == "kept: stack exists, no expiry"


def test_a_missing_stacks_dir_refuses_to_sweep(ec2, account, tmp_path, capsys):
    before = inventory(ec2)
    assert main(["sweep", "--stacks-dir", str(tmp_path / "nowhere"), "--yes"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert inventory(ec2) == before


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-29T18:00:00Z", datetime(2026, 11, 29, 18, tzinfo=UTC)),
        ("2026-11-29T19:00:00+01:00", datetime(2026, 11, 29, 18, tzinfo=UTC)),
    ],
)
def test_parse_expiry(text, expected):
    assert sweep.parse_expiry(text) == expected


def test_naive_expiry_is_unreadable_and_kept():
    assert sweep.judge({sweep.EXPIRES_TAG: "2020-01-01T00:00:00"}, datetime.now(UTC), set())[0] is False


def test_known_stacks(tmp_path: Path):
    (tmp_path / "Pulumi.a.yaml").write_text("")
    (tmp_path / "Pulumi.b-2.yml").write_text("")
    (tmp_path / "Pulumi.yaml").write_text("")  # the project file, not a stack
    (tmp_path / "notes.yaml").write_text("")
    assert sweep.known_stacks(tmp_path) == {"a", "b-2"}
