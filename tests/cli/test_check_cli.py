"""`flashfleet check`: every check against the real boundary it reads, with no network: a fake
`pulumi` executable on PATH that answers `version` / `whoami --verbose` as the real CLI does (and
refuses like it when not logged in), botocore reading credentials from the environment, and a
local TCP listener standing in for a host's sshd."""

from __future__ import annotations

import json
import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from flashfleet.cli import main
from flashfleet.stack import DEFAULT_STACKS_DIR

# Answers as pulumi v3 does: `whoami --verbose` prints User/Organizations/Backend URL lines when
# logged in (PULUMI_BACKEND_URL or a stored login); without one it fails with exit 255.
FAKE_PULUMI = """#!/bin/sh
case "$1" in
  version) echo "v3.150.0" ;;
  whoami)
    url="${PULUMI_BACKEND_URL:-$(cat "$FAKE_PULUMI_LOGIN" 2>/dev/null)}"
    if [ -z "$url" ]; then
      echo "error: PULUMI_ACCESS_TOKEN must be set for login during non-interactive CLI sessions" >&2
      exit 255
    fi
    echo "User: alice"; echo "Organizations: "; echo "Backend URL: $url" ;;
  *) echo "error: unknown command \\"$1\\" for \\"pulumi\\"" >&2; exit 255 ;;
esac
"""


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake pulumi on PATH, logged in to an existing file:// folder, a passphrase, AWS
    credentials and region in the environment (no config files)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "pulumi"
    exe.write_text(FAKE_PULUMI)
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    state = tmp_path / "state"
    state.mkdir()
    (tmp_path / "login").write_text(f"file://{state}")
    monkeypatch.setenv("FAKE_PULUMI_LOGIN", str(tmp_path / "login"))
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.delenv("PULUMI_BACKEND_URL", raising=False)
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE_FILE", raising=False)
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "correct horse")
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-2")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance-metadata call
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    return tmp_path


def _checks(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, dict[str, object]]]:
    rc = main(["check", *argv, "--format", "json"])
    rows = json.loads(capsys.readouterr().out)
    assert all(set(r) == {"check", "ok", "detail", "fix"} for r in rows)
    return rc, {r["check"]: r for r in rows}


def test_a_ready_machine_passes_every_check(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, checks = _checks([], capsys)
    assert rc == 0
    assert list(checks) == [
        "pulumi cli",
        "pulumi backend",
        "pulumi passphrase",
        "aws credentials",
        "aws region",
    ]
    assert all(c["ok"] and c["fix"] is None for c in checks.values()), checks
    assert str(checks["pulumi cli"]["detail"]).startswith("v3.150.0")
    assert checks["pulumi backend"]["detail"] == f"file://{env / 'state'}"
    assert checks["aws credentials"]["detail"] == "from env"  # botocore's own provider name
    assert str(checks["aws region"]["detail"]).startswith("us-east-2")


def test_no_pulumi_cli_says_where_to_read(
    env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    rc = main(["check"])
    out = capsys.readouterr().out
    assert rc == 1
    assert "pulumi cli" in out
    assert "missing" in out
    assert "fix: README: Pulumi" in out


def test_not_logged_in_gives_the_login_command(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (env / "login").unlink()
    rc, checks = _checks([], capsys)
    assert rc == 1
    backend = checks["pulumi backend"]
    assert not backend["ok"]
    assert "PULUMI_ACCESS_TOKEN must be set" in str(backend["detail"])
    assert "pulumi login" in str(backend["fix"])


def test_a_file_backend_whose_folder_is_missing(
    env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PULUMI_BACKEND_URL", f"file://{env / 'gone'}")
    rc, checks = _checks([], capsys)
    assert rc == 1
    assert not checks["pulumi backend"]["ok"]
    assert checks["pulumi backend"]["fix"] == f'mkdir -p "{env / "gone"}"'


def test_a_self_managed_backend_without_passphrase(
    env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE")
    rc, checks = _checks([], capsys)
    assert rc == 1
    assert not checks["pulumi passphrase"]["ok"]
    assert "PULUMI_CONFIG_PASSPHRASE" in str(checks["pulumi passphrase"]["fix"])
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE_FILE", str(env / "pass"))
    assert _checks([], capsys)[0] == 0


def test_missing_aws_credentials_fail_an_aws_stack_but_not_a_bare_check(
    env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    rc, checks = _checks([], capsys)
    assert rc == 0  # informative without a stack: existing hosts need no AWS account
    assert not checks["aws credentials"]["ok"]
    assert "AWS_PROFILE" in str(checks["aws credentials"]["fix"])
    rc, checks = _checks(["gb300-lowlat", "--stacks-dir", str(DEFAULT_STACKS_DIR)], capsys)
    assert rc == 1
    assert not checks["aws credentials"]["ok"]


@pytest.fixture
def sshd() -> Iterator[int]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server.getsockname()[1]


def _existing_stack(folder: Path, host_keys: bool) -> None:
    text = (DEFAULT_STACKS_DIR / "Pulumi.mi355x-agentx.yaml").read_text()
    text = text.replace("192.0.2.10", "127.0.0.1")
    if host_keys:
        key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
        text = text.replace("hostMemoryGib: 3072", f"hostMemoryGib: 3072\n            hostKeys: ['{key}']", 1)
    (folder / "Pulumi.local.yaml").write_text(text)


def test_existing_hosts_reachable_and_pinned(
    env: Path, sshd: int, capsys: pytest.CaptureFixture[str]
) -> None:
    _existing_stack(env, host_keys=True)
    rc, checks = _checks(["local", "--stacks-dir", str(env), "--ssh-port", str(sshd)], capsys)
    assert rc == 0, checks
    assert checks["ssh 127.0.0.1"]["ok"]
    assert checks["host key 127.0.0.1"]["ok"]
    assert not any(name.startswith("aws") for name in checks)  # not an AWS stack


def test_an_unreachable_unpinned_host_fails(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.create_server(("127.0.0.1", 0)) as closed:
        port = closed.getsockname()[1]  # free once closed: nothing listens there
    _existing_stack(env, host_keys=False)
    rc, checks = _checks(["local", "--stacks-dir", str(env), "--ssh-port", str(port)], capsys)
    assert rc == 1
    assert not checks["ssh 127.0.0.1"]["ok"]
    assert "refused" in str(checks["ssh 127.0.0.1"]["detail"]).lower()
    assert not checks["host key 127.0.0.1"]["ok"]
    assert "hostKeys" in str(checks["host key 127.0.0.1"]["fix"])


def test_kubernetes_stack_needs_a_kubeconfig(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["mi355x-k8s", "--stacks-dir", str(DEFAULT_STACKS_DIR)]
    rc, checks = _checks(argv, capsys)
    assert rc == 1
    assert not checks["kubeconfig"]["ok"]
    (env / "no-kubeconfig").write_text("apiVersion: v1\nkind: Config\n")
    rc, checks = _checks(argv, capsys)
    assert rc == 0
    assert checks["kubeconfig"]["ok"]


def test_an_unknown_stack_is_one_line_exit_2(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "Pulumi.nothere.yaml"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "flashfleet check: Pulumi.nothere.yaml: no such file\n"
    assert main(["check", "mi355x-agentx", "--ssh-port", "0"]) == 2
    assert capsys.readouterr().err.startswith("flashfleet check: --ssh-port 0: a TCP port")


def test_the_fast_tier_guard_still_refuses_a_pulumi_not_written_by_the_test() -> None:
    """The guard lets these tests run their own fake; any other `pulumi` stays slow-tier only."""
    import shutil
    import subprocess
    import tempfile

    outside = Path(tempfile.mkdtemp(prefix="not-a-test-tmp-"))
    try:
        exe = outside / "pulumi"
        exe.write_text(FAKE_PULUMI)
        exe.chmod(0o755)
        with pytest.raises(AssertionError, match=r"mark it @pytest\.mark\.pulumi_engine"):
            subprocess.run([str(exe), "version"], check=False)
        # the guard also keeps the refusal, to fail a test that caught it; here it was the point
        log = Path(os.environ["FLASHFLEET_TIER_GUARD_LOG"])
        assert "pulumi_engine" in log.read_text()
        log.write_text("")
    finally:
        shutil.rmtree(outside)


def test_online_asks_sts_who_the_credentials_are(
    env: Path, moto_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_url)  # moto's STS on loopback
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    stack = ["gb300-lowlat", "--stacks-dir", str(DEFAULT_STACKS_DIR)]
    rc, checks = _checks(stack, capsys)
    assert "aws identity" not in checks  # offline by default: no call leaves the machine
    rc, checks = _checks([*stack, "--online"], capsys)
    assert rc == 0, checks
    assert checks["aws identity"]["ok"]
    assert str(checks["aws identity"]["detail"]).startswith("arn:aws:")
    # an STS that does not answer fails the check with botocore's own reason, and the command
    with socket.create_server(("127.0.0.1", 0)) as closed:
        port = closed.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    rc, checks = _checks([*stack, "--online"], capsys)
    assert rc == 1
    assert not checks["aws identity"]["ok"]
    assert "Could not connect" in str(checks["aws identity"]["detail"])
    assert checks["aws identity"]["fix"]
