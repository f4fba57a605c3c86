"""The fast tier's guard (tests/conftest.py) on a test of the fast tier: this module carries no
slow marker, so each test below runs inside the guard, and reaching for a host, a container, an
engine, the oracle or ansible-runner fails at once, naming the marker to add. Nothing is started
either way: the programs are named by paths that do not exist, and the pool is given no host."""

from __future__ import annotations

import subprocess
from pathlib import Path

import ansible_runner
import pytest
from hosts.harness import HostPool

# (program, the marker the refusal names), written out: the guard's table is what is under test
PROGRAMS = [
    ("systemd-nspawn", "hosts"),
    ("machinectl", "hosts"),
    ("docker", "docker"),
    ("dockerd", "docker"),
    ("pulumi", "pulumi_engine"),
    ("ansible-playbook", "runner"),
    ("docker-registry", "registry"),
    ("etcd", "kube"),
    ("kube-apiserver", "kube"),
    ("kubectl", "kube"),
    ("kwok", "kube"),
]
MISSING = Path("/nonexistent/bin")  # without the guard: FileNotFoundError, never a refusal


def refused(marker: str) -> pytest.RaisesExc[AssertionError]:
    return pytest.raises(AssertionError, match=rf"mark it @pytest\.mark\.{marker} \(the slow tier\)")


@pytest.mark.parametrize(("program", "marker"), PROGRAMS)
def test_starting_a_slow_program_fails_naming_its_marker(program: str, marker: str) -> None:
    with refused(marker):
        subprocess.run([str(MISSING / program), "version"], check=False)


def test_a_shell_command_line_is_refused_by_its_first_word() -> None:
    with refused("docker"):
        subprocess.run(f"{MISSING / 'docker'} run --rm busybox true", shell=True, check=False)


def test_the_oracle_interpreter_is_refused() -> None:
    with refused("oracle"):
        subprocess.run([str(MISSING / ".venv-oracle" / "bin" / "python"), "-V"], check=False)


def test_ansible_runner_and_the_test_hosts_are_refused() -> None:
    with refused("runner"):
        ansible_runner.run(playbook="site.yml")
    with refused("hosts"):
        HostPool.start(None, [])  # no host: nothing to boot, were it let through


def test_a_stand_in_the_test_wrote_under_its_own_tmp_path_runs(tmp_path: Path) -> None:
    fake = tmp_path / "pulumi"
    fake.write_text("#!/bin/sh\necho v3.0.0-fake\n")
    fake.chmod(0o755)
    done = subprocess.run([str(fake), "version"], capture_output=True, text=True, check=True)
    assert done.stdout == "v3.0.0-fake\n"


def test_an_ordinary_program_runs() -> None:
    assert subprocess.run(["true"], check=False).returncode == 0
