"""What counts as evidence for `flashfleet sweep`, case by case, on a moto account over regions.

Each test is one case an adversarial review found: IAM (global) deleted while instances of
another region used it; a foreign instance profile emptied of our role; look-alike
``managed-by`` values and a stack tag with a trailing newline taken as ours; and a per-user
Pulumi backend's silence taken as proof that a colleague's live cluster was an orphan.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from flashfleet import sweep
from flashfleet.cli import main
from flashfleet.components.tags import EXPIRES_TAG, MANAGED_BY_TAG, STACK_TAG

from .account import (
    FUTURE,
    PAST,
    SKIP_PG,
    a_backend_knowing,
    iam_pair,
    iam_profile,
    iam_role,
    launch,
    ours,
    snapshot,
    spec,
)

SWEEP = ["sweep", "--format", "json", *SKIP_PG]


def states(client) -> dict[str, str]:
    return {
        i["InstanceId"]: i["State"]["Name"]
        for r in client.describe_instances()["Reservations"]
        for i in r["Instances"]
    }


def roles_of(iam, profile: str) -> list[str]:
    return [
        r["RoleName"]
        for r in iam.get_instance_profile(InstanceProfileName=profile)["InstanceProfile"]["Roles"]
    ]


def role_policies(iam, role: str) -> list[str]:
    return iam.list_role_policies(RoleName=role)["PolicyNames"]


def run_json(argv: list[str], capsys) -> tuple[int, dict[str, Any]]:
    rc = main(argv)
    return rc, json.loads(capsys.readouterr().out)


# --- IAM is global ------------------------------------------------------------------------------


def test_iam_used_in_another_region_is_kept(ec2, monkeypatch, capsys):
    """Sweeping us-west-2 while us-east-1 runs a protected flashfleet instance on our profile and
    two foreign instances on a foreign profile holding our role: all of that IAM stays."""
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    iam, east = boto3.client("iam"), boto3.client("ec2", region_name="us-east-1")
    ours_arn = iam_pair(iam, "ff-east", ours())  # expired: only its users keep it
    protected = launch(east, ours(), IamInstanceProfile={"Arn": ours_arn})
    east.modify_instance_attribute(InstanceId=protected, DisableApiTermination={"Value": True})
    shared = iam_role(iam, "ff-shared-role", ours())
    foreign_arn = iam_profile(iam, "their-profile", {}, shared)
    foreign = [launch(east, {"owner": "someone-else"}, IamInstanceProfile={"Arn": foreign_arn}) for _ in "ab"]
    iam_pair(iam, "ff-unused", ours())  # expired, nothing anywhere uses it: goes

    rc, report = run_json([*SWEEP, "--region", "us-west-2", "--yes"], capsys)

    assert rc == 0, report
    profiles = {p["InstanceProfileName"] for p in iam.list_instance_profiles()["InstanceProfiles"]}
    assert {"ff-east-profile", "their-profile"} <= profiles
    assert "ff-unused-profile" not in profiles
    assert roles_of(iam, "ff-east-profile") == ["ff-east-role"]
    assert roles_of(iam, "their-profile") == ["ff-shared-role"]
    assert role_policies(iam, "ff-east-role") == ["inline"]
    assert set(report["deleted"]) == {"ff-unused-profile", "ff-unused-role"}
    kept = report["kept_in_use"]
    assert set(kept) == {"ff-east-profile", "ff-east-role", "ff-shared-role"}
    assert all("live instance" in why for why in kept.values()), kept
    assert {i: states(east)[i] for i in [protected, *foreign]} == dict.fromkeys(
        [protected, *foreign], "running"
    )


def test_a_region_that_cannot_be_listed_keeps_all_iam(ec2, enabled_regions, monkeypatch, capsys):
    """One enabled region refuses DescribeInstances (a policy that denies it): nobody can say
    what runs there, so no IAM resource goes (exit 1); the region's own findings still do."""
    enabled_regions.add("ap-south-1")
    real = sweep.ec2_client

    def ec2_client(region: str | None = None) -> Any:
        client = real(region)
        if region == "ap-south-1":  # refused at the API boundary, as AWS would
            stub = Stubber(client)
            stub.add_client_error("describe_instances", "UnauthorizedOperation", "not authorized")
            stub.activate()
        return client

    monkeypatch.setattr(sweep, "ec2_client", ec2_client)
    iam = boto3.client("iam")
    iam_pair(iam, "ff-unused", ours())
    volume = ec2.create_volume(
        Size=1,
        AvailabilityZone="eu-west-1a",
        TagSpecifications=spec("volume", ours()),
    )["VolumeId"]

    rc = main([*SWEEP, "--yes"])
    captured = capsys.readouterr()
    report = json.loads(captured.out)

    assert rc == 1
    assert report["deleted"] == [volume]
    assert set(report["errors"]) == {"ff-unused-profile", "ff-unused-role"}
    assert "region ap-south-1 could not be listed" in report["errors"]["ff-unused-role"]
    assert "could not delete iam-role ff-unused-role: could not tell whether it is in use" in captured.err
    assert roles_of(iam, "ff-unused-profile") == ["ff-unused-role"]
    assert role_policies(iam, "ff-unused-role") == ["inline"]


def test_our_role_in_a_foreign_profile_is_never_taken_out(ec2, capsys):
    """An expired role of ours that a foreign profile holds (no instance uses it): the profile is
    not emptied and the role keeps its policies. A profile of ours lacking flashfleet:stack is not
    emptied either."""
    iam = boto3.client("iam")
    role = iam_role(iam, "ff-lent-role", ours())
    iam_profile(iam, "their-profile", {"team": "data"}, role)
    thin = iam_role(iam, "ff-thin-role", ours())
    iam_profile(iam, "ff-thin-profile", ours(stack=None), thin)  # ours by managed-by, no stack tag

    rc, report = run_json([*SWEEP, "--yes"], capsys)

    assert rc == 0, report
    assert roles_of(iam, "their-profile") == ["ff-lent-role"]
    assert role_policies(iam, "ff-lent-role") == ["inline"]
    assert roles_of(iam, "ff-thin-profile") == ["ff-thin-role"]
    assert role_policies(iam, "ff-thin-role") == ["inline"]
    assert report["deleted"] == []
    kept = report["kept_in_use"]
    assert kept["ff-lent-role"] == "kept: instance profile their-profile still holds it"
    assert kept["ff-thin-role"] == "kept: instance profile ff-thin-profile still holds it"
    assert kept["ff-thin-profile"].startswith(
        "kept: it holds ff-thin-role, and only a profile tagged with both"
    )


# --- ownership is exact -------------------------------------------------------------------------

LOOK_ALIKES = ("flashfleet ", "", "terraform", "Flashfleet")


def test_look_alike_managed_by_is_not_ours(ec2, capsys):
    """managed-by set to anything but exactly `flashfleet`, beside an expired stack and expiry:
    another tool's instance. Listed nowhere, terminated never; the exact value next to it goes."""
    alike = {value: launch(ec2, ours(managed=value)) for value in LOOK_ALIKES}
    exact = launch(ec2, ours())

    rc, report = run_json(
        [*SWEEP, "--yes", "--all", "--skip", "instance-profile", "--skip", "iam-role"], capsys
    )

    assert rc == 0, report
    assert report["deleted"] == [exact]
    listed = {f["id"] for f in report["findings"]}
    now = states(ec2)
    for value, instance in alike.items():
        assert instance not in listed, value
        assert now[instance] == "running", value


def test_a_stack_tag_with_a_trailing_newline_is_not_a_stack(ec2, capsys):
    """`old\\n` is not the stack `old`: without managed-by it is no evidence at all; with it, a
    sweep of stack `old` does not take it; and `--stack 'old\\n'` is refused before AWS is asked."""
    legacy = launch(ec2, ours(stack="old\n", managed=None))
    managed = launch(ec2, ours(stack="old\n"))
    real_old = launch(ec2, ours(stack="old"))
    before = snapshot(ec2)

    assert main([*SWEEP, "--stack", "old\n", "--yes"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("flashfleet sweep: --stack: 'old\\n' is not a stack name")
    assert err.endswith("[rule: stack-name]")
    assert len(err.splitlines()) == 1
    assert snapshot(ec2) == before

    rc, report = run_json(
        [*SWEEP, "--stack", "old", "--yes", "--skip", "iam-role", "--skip", "instance-profile"], capsys
    )
    assert rc == 0, report
    assert report["deleted"] == [real_old]
    now = states(ec2)
    assert now[legacy] == now[managed] == "running"


def test_abbreviated_yes_is_refused(ec2, capsys):
    """`--ye` is not `--yes`: a deleting flag is spelled out (exit 2, nothing touched)."""
    launch(ec2, ours())
    before = snapshot(ec2)
    assert main(["sweep", "--ye", *SKIP_PG]) == 2
    err = capsys.readouterr().err.strip()
    assert "unrecognized arguments: --ye" in err
    assert len(err.splitlines()) == 1
    assert snapshot(ec2) == before


# --- orphans need evidence that travels, or the user's own word --------------------------------


def test_a_per_user_backend_deletes_no_live_orphan(ec2, monkeypatch, capsys):
    """The per-user `file://$HOME/.pulumi-state` backend of someone with no stacks: a colleague's
    unexpired instances are reported and kept; their expired one goes; naming the stack is what
    takes the rest; a named stack the backend knows keeps its unexpired instances."""
    a_backend_knowing(monkeypatch)  # knows no stack at all
    live = [
        launch(ec2, ours(stack="colleagues", expires=FUTURE)),
        launch(ec2, ours(stack="colleagues", expires=FUTURE, managed=None)),
    ]
    expired = launch(ec2, ours(stack="colleagues"))
    no_iam = ["--skip", "instance-profile", "--skip", "iam-role"]

    rc, report = run_json([*SWEEP, "--orphans", "--yes", *no_iam], capsys)
    assert rc == 0, report
    assert report["deleted"] == [expired]
    assert report["orphan_stacks"] == ["colleagues"]
    now = states(ec2)
    assert [now[i] for i in live] == ["running", "running"]

    a_backend_knowing(monkeypatch, "colleagues")
    rc, report = run_json([*SWEEP, "--orphans", "--stack", "colleagues", "--yes", *no_iam], capsys)
    assert rc == 0, report
    assert report["deleted"] == []
    assert all(
        "knows stack colleagues: not an orphan" in f["reason"] for f in report["findings"] if f["id"] in live
    )

    a_backend_knowing(monkeypatch, "other")
    rc, report = run_json(
        [*SWEEP, "--orphans", "--stack", "colleagues", "--stack", "nobody", "--yes", *no_iam], capsys
    )
    assert rc == 0, report
    assert sorted(report["deleted"]) == sorted(live)


def test_an_empty_backend_is_an_answer_that_deletes_nothing_live(monkeypatch):
    a_backend_knowing(monkeypatch)
    assert sweep.backend_stacks() == set()
    verdict = sweep.judge(ours(stack="colleagues", expires=FUTURE), now=datetime.now(UTC), known=set())
    assert verdict is not None
    assert verdict.orphan
    assert not verdict.stale


@pytest.mark.parametrize("managed", [*LOOK_ALIKES, None])
def test_judge_needs_the_exact_owner(managed):
    tags = {STACK_TAG: "a", EXPIRES_TAG: PAST}
    if managed is not None:
        tags[MANAGED_BY_TAG] = managed
    assert (sweep.judge(tags, now=datetime.now(UTC)) is None) is (managed is not None)


def test_no_credentials_is_one_line_before_any_call(monkeypatch, tmp_path, capsys):
    """Without credentials every listing would fail: one line, exit 2, not an error per kind."""
    for key in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance role to find here
    assert main(["sweep", "--region", "us-east-2"]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err.splitlines() == [
        "flashfleet sweep: no AWS credentials found (AWS_PROFILE, AWS_ACCESS_KEY_ID with "
        "AWS_SECRET_ACCESS_KEY, or an instance role): nothing was listed"
    ]


def test_a_named_stack_gives_its_region(ec2, monkeypatch, capsys):
    """`sweep --stack h200-lowlat` sweeps the region its stack file sets (us-east-2), with no
    --region and no default region."""
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    monkeypatch.chdir(Path(__file__).parents[2])  # the catalog's stacks/
    east2 = boto3.client("ec2", region_name="us-east-2")
    doomed = launch(east2, ours("h200-lowlat", PAST))
    assert main([*SWEEP, "--stack", "h200-lowlat", "--yes"]) == 0
    assert doomed in json.loads(capsys.readouterr().out)["deleted"]
    assert main(["sweep"]) == 2
    assert "--region: no region" in capsys.readouterr().err
