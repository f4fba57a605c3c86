"""The fast tier's guard (tests/conftest.py) on a test of the fast tier: this module carries no
slow marker, so each test below runs inside the guard, and reaching for a host, a container, an
engine, the oracle or ansible-runner fails at once, naming the marker to add. Nothing is started
either way: the programs are named by paths that do not exist, and the pool is given no host."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

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
def test_starting_a_slow_program_fails_naming_its_marker(
    request: pytest.FixtureRequest, program: str, marker: str
) -> None:
    guard = guard_around(request)
    with refused(marker):
        subprocess.run([str(MISSING / program), "version"], check=False)
    with refused(marker):  # and the test fails, whether or not the error was caught
        guard.send(None)


def test_a_refusal_the_code_under_test_catches_still_fails_the_test(request: pytest.FixtureRequest) -> None:
    guard = guard_around(request)
    with contextlib.suppress(Exception):  # as a product's `except Exception` around its Pulumi call
        subprocess.run(["pulumi", "version"], check=False)
    with refused("pulumi_engine"):
        guard.send(None)


def test_a_bare_name_is_refused_whatever_the_working_directory(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # `pulumi` is not a file of the working directory
    guard = guard_around(request)
    with refused("pulumi_engine"):
        subprocess.run(["pulumi", "version"], check=False)
    with refused("pulumi_engine"):
        guard.send(None)


def test_a_shell_command_line_is_refused_by_its_first_word(request: pytest.FixtureRequest) -> None:
    guard = guard_around(request)
    with refused("docker"):
        subprocess.run(f"{MISSING / 'docker'} run --rm busybox true", shell=True, check=False)
    with refused("docker"):
        guard.send(None)


def test_the_oracle_interpreter_is_refused(request: pytest.FixtureRequest) -> None:
    guard = guard_around(request)
    with refused("oracle"):
        subprocess.run([str(MISSING / ".venv-oracle" / "bin" / "python"), "-V"], check=False)
    with refused("oracle"):
        guard.send(None)


def test_ansible_runner_and_the_test_hosts_are_refused(request: pytest.FixtureRequest) -> None:
    guard = guard_around(request)
    with refused("runner"):
        ansible_runner.run(playbook="site.yml")
    with refused("hosts"):
        HostPool.start(None, [])  # no host: nothing to boot, were it let through
    with refused("runner"):  # the first refusal
        guard.send(None)


def test_a_stand_in_the_test_wrote_under_its_own_tmp_path_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "pulumi"
    fake.write_text("#!/bin/sh\necho v3.0.0-fake\n")
    fake.chmod(0o755)
    done = subprocess.run([str(fake), "version"], capture_output=True, text=True, check=True)
    assert done.stdout == "v3.0.0-fake\n"
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")  # by name, first on PATH
    done = subprocess.run(["pulumi", "version"], capture_output=True, text=True, check=True)
    assert done.stdout == "v3.0.0-fake\n"


def test_an_ordinary_program_runs() -> None:
    assert subprocess.run(["true"], check=False).returncode == 0


# A child process is past the in-process guard: each of these reaches for a program by PATH from a
# child (the engines are not installed here, so without the guard each fails as "not found" and
# the test that ran it could pass). (how the child is started, the marker the test's failure names)
CHILDREN: list[tuple[str, Callable[[], object], str]] = [
    ("bash -c", lambda: subprocess.run(["bash", "-c", "docker ps"], check=False), "docker"),
    ("timeout", lambda: subprocess.run(["timeout", "5", "pulumi", "version"], check=False), "pulumi_engine"),
    ("env", lambda: subprocess.run(["env", "kubectl", "get", "pods"], check=False), "kube"),
    ("os.system", lambda: os.system("ansible-playbook site.yml 2>/dev/null"), "runner"),
    (
        "a subprocess of a subprocess",
        lambda: subprocess.run(
            [sys.executable, "-c", "import subprocess; subprocess.run(['systemd-nspawn', '-D', '/x'])"],
            check=False,
        ),
        "hosts",
    ),
    (
        "a child given its own PATH",
        lambda: subprocess.run(
            ["bash", "-c", "ansible-runner run ."], env={"PATH": "/usr/bin:/bin"}, check=False
        ),
        "runner",
    ),
    ("a shell pipeline", lambda: subprocess.run("true | etcd --version", shell=True, check=False), "kube"),
]


def root_conftest(request: pytest.FixtureRequest) -> Any:
    """tests/conftest.py as pytest loaded it (`import conftest` may name another folder's)."""
    root = Path(__file__).parent.parent / "conftest.py"
    [module] = [
        p for p in request.config.pluginmanager.get_plugins() if getattr(p, "__file__", None) == str(root)
    ]
    return module


def guard_around(request: pytest.FixtureRequest) -> Generator[None, None, None]:
    """The guard a fast test runs in, raised once more around the lines that follow; `send(None)`
    ends it as the end of the test does."""
    guard = root_conftest(request)._guarded(request.node)
    next(guard)
    return guard


@pytest.mark.parametrize(("how", "start", "marker"), CHILDREN, ids=[c[0] for c in CHILDREN])
def test_a_child_process_that_starts_a_slow_program_fails_the_test(
    request: pytest.FixtureRequest, how: str, start: Callable[[], object], marker: str
) -> None:
    guard = guard_around(request)
    start()  # the child fails; a test that expected it to fail would not notice
    with refused(marker):
        guard.send(None)


def test_the_child_is_refused_even_when_the_program_is_installed(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    # a real-looking `docker` later on PATH (as where the engine is installed): the shim comes first
    installed = tmp_path / "usr-bin"
    installed.mkdir()
    (installed / "docker").write_text('#!/bin/sh\ntouch "$0.ran"\n')
    (installed / "docker").chmod(0o755)
    guard = guard_around(request)
    env = {**os.environ, "PATH": f"{os.environ['PATH']}{os.pathsep}{installed}"}
    assert subprocess.run(["bash", "-c", "docker ps"], env=env, check=False).returncode == 97
    assert not (installed / "docker.ran").exists()
    with refused("docker"):
        guard.send(None)


def test_a_childs_stand_in_first_on_its_path_runs(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    fake = tmp_path / "docker"
    fake.write_text("#!/bin/sh\necho fake-docker\n")
    fake.chmod(0o755)
    guard = guard_around(request)
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-c", "docker ps"], env=env, capture_output=True, text=True, check=True)
    assert done.stdout == "fake-docker\n"
    with pytest.raises(StopIteration):
        guard.send(None)  # the guard ends without a refusal


def test_a_test_that_writes_the_checkouts_results_folder_fails(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = tmp_path / "results"  # standing in for the checkout's own, which is left alone
    monkeypatch.setattr(root_conftest(request), "CHECKOUT_RESULTS", results)
    guard = guard_around(request)
    results.mkdir()  # as `flashfleet bench` without --results does, from the checkout
    with pytest.raises(AssertionError, match="give the command a --results folder under tmp_path"):
        guard.send(None)
    assert not results.exists()  # removed, so that no later test is blamed
