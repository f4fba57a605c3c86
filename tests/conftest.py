"""Fixtures shared across test folders."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest

# Every test host is on this machine's own bridge: ssh's compression (Ansible's default ssh_args
# carry -C) and the ChaCha20 cipher it prefers only cost CPU there, and the slow tier is CPU-bound
# on two cores. Ansible's connection reuse is kept; the product's runs keep Ansible's defaults.
os.environ.setdefault(
    "ANSIBLE_SSH_ARGS", "-o ControlMaster=auto -o ControlPersist=60s -o Ciphers=aes128-gcm@openssh.com"
)


@pytest.fixture(autouse=True)
def _current_event_loop() -> None:
    """Pulumi's mocks run on the thread's current event loop; an earlier test's `asyncio.run`
    (serialising properties for the provider's gRPC host, say) ends by unsetting it."""
    try:
        asyncio.get_event_loop_policy().get_event_loop()
    except RuntimeError:
        asyncio.set_event_loop(asyncio.new_event_loop())


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    """A moto server on loopback: the EC2/SSM API that boto3 (and a provider process) talks to."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def moto_env(moto_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """boto3 here, and any process started from here, talks to moto with test credentials and
    none of the caller's own AWS profile or region."""
    for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    return moto_url


# The tiers. Each slow resource has a marker (pyproject.toml); a test without it that reaches
# for the resource fails at once, naming the marker, so the fast tier (`-m "not slow"`, as
# `scripts/test.sh --fast` selects it) can never start a host, a container or an engine. Every
# test with one of these markers also gets `slow`.
SLOW_MARKERS = ("hosts", "docker", "pulumi_engine", "oracle", "runner", "index", "registry", "kube")
_REFUSED_PROGRAMS = {
    "systemd-nspawn": "hosts",
    "machinectl": "hosts",
    "docker": "docker",
    "dockerd": "docker",
    "pulumi": "pulumi_engine",
    "ansible-playbook": "runner",
    "docker-registry": "registry",
    "etcd": "kube",
    "kube-apiserver": "kube",
    "kubectl": "kube",
    "kwok": "kube",
}


# The slow tier by place: folders, modules and single tests (paths under tests/).
SLOW_PATHS = {
    "bench/test_bench_client_parser.py::test_the_shipped_flag_list_is_the_pinned_bench_serving_parsers": (
        "oracle",
    ),
    "bench/test_bench_client_parser.py::test_the_real_bench_serving_refuses_the_same_argv_the_same_way": (
        "oracle",
    ),
    "bench/test_driver_oracle.py": ("oracle",),
    "bench/test_stack_cluster.py": ("hosts",),
    "bench/test_profiles.py::test_flag_table_is_exactly_the_real_parsers_flags": ("oracle",),
    "bench/test_profiles.py::test_every_profile_argv_parses_with_the_real_parser": ("oracle",),
    "bench/test_profiles.py::test_the_real_parser_rejects_what_a_typo_would_produce": ("oracle",),
    "bench/test_refusals_oracle.py": ("oracle",),
    "bench/test_verify_l3.py": ("oracle",),
    # the dynamic provider's own process runs the playbooks
    "bringup/test_provider.py": ("runner",),
    "bringup/test_cli.py::test_configure_runs_the_playbook_on_existing_hosts": ("runner",),
    "bringup/test_cli.py::test_configure_check_mode_changes_nothing": ("runner",),
    "bringup/test_cli.py::test_configure_exits_1_with_the_failure_summary_when_a_host_is_unreachable": (
        "runner",
    ),
    "bringup/test_cli.py::test_down_with_an_inventory_runs_teardown_and_warns_about_unreachable_hosts": (
        "runner",
    ),
    "bringup/test_cli.py::test_bench_cluster_tears_down_what_configure_brought_up": ("runner",),
    "bringup/test_cli.py::test_down_keeps_the_caches_unless_told_to_purge_them": ("runner",),
    "bringup/test_handoff.py::test_progress_lines_per_host_and_phase": ("runner",),
    "bringup/test_timeline.py::test_a_real_run_draws_its_timeline_and_the_cli_redraws_it": ("runner",),
    "cli/test_careless_cli.py::test_a_failing_stack_selection_is_one_line": ("runner",),
    "contracts/test_sglang_flags_current.py": ("oracle",),
    "contracts/test_sglang_oracle.py": ("oracle",),
    "e2e": ("hosts", "pulumi_engine"),
    "e2e/test_up_refusals.py": ("pulumi_engine",),  # no host: refused before the preview
    "engine": ("hosts", "docker"),
    "hosts/test_harness.py": ("hosts",),
    "k8s/cluster": ("kube",),
    "k8s/cluster/test_pulumi_up.py": ("kube", "pulumi_engine"),
    "mooncake": ("hosts",),
    "roles": ("hosts",),
    "roles/test_check_multimodal.py": (),
    "roles/test_model_weights_job.py": (),
    "readme/test_first_command.py": ("index",),
    "serve/test_api_key_host.py": ("hosts", "docker"),
    "serve/test_cluster_hosts.py": ("hosts", "docker"),
    "serve/test_kernels_after_down.py": ("hosts", "docker"),
    "serve/test_pd_hosts.py": ("hosts", "docker"),
    "serve/test_site.py": ("hosts", "docker"),
    "serve/test_real_router.py": ("oracle",),  # the router comes with the oracle venv
    "serve/test_standin_sglang.py::test_auth_decisions_match_sglangs": ("oracle",),
    "serve/test_teardown_converges.py": ("hosts",),
    "stacks/test_api_key.py::test_real_sglang_reads_the_key_from_the_config_file_the_role_writes": (
        "oracle",
    ),
    # the real backend lister runs the Pulumi CLI (an empty backend, or none installed: refused)
    "sweep/test_sweep.py::test_orphans_without_a_backend_are_refused": ("pulumi_engine",),
    "ttl_guard/test_guard_on_a_host.py": ("hosts",),
    "unit/test_runner.py": ("runner",),
}
TESTS = Path(__file__).parent
CHECKOUT_RESULTS = TESTS.parent / "results"  # `flashfleet bench`'s default; a test writes under tmp_path


# Folders whose slow tests share one session-wide set of test hosts: under pytest-xdist's
# `--dist loadscope` each stays on one worker, so its hosts boot once; every other module is a
# scope of its own (its module-scoped hosts boot once). The scheduler below decides it from the
# test's path: xdist's `loadgroup` marks are silently ignored on pytest 9.2, whose nodeids no
# longer take the suffix it adds (github.com/pytest-dev/pytest-xdist/issues/1386).
SESSION_HOST_FOLDERS = ("roles", "engine", "k8s/cluster")  # k8s/cluster: one control plane


def xdist_scope(nodeid: str) -> str:
    """The scheduling scope of a test: its folder under tests/ for SESSION_HOST_FOLDERS, else its
    module."""
    module = nodeid.split("::", 1)[0].removeprefix("tests/")
    return next((f for f in SESSION_HOST_FOLDERS if module.startswith(f + "/")), module)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getoption("dist") != "loadscope":
        return None  # `-n 2` alone (the fast tier) spreads single tests, as xdist does
    from xdist.scheduler import LoadScopeScheduling

    class HostScopes(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_scope(nodeid)

    return HostScopes(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        rel = Path(item.path).relative_to(TESTS).as_posix()
        test = f"{rel}::{item.name.split('[')[0]}"
        # the longest matching entry decides (a test's overrides its file's, a file's its folder's)
        hits = [k for k in SLOW_PATHS if k in (rel, test) or rel.startswith(k + "/")]
        for name in SLOW_PATHS[max(hits, key=len)] if hits else ():
            item.add_marker(name)
        if {m.name for m in item.iter_markers()} & set(SLOW_MARKERS):
            item.add_marker("slow")


def _refuse(marker: str, what: str, log: bool = True) -> NoReturn:
    """Fails the test; the guard's log keeps it, so that code which catches the error (a product's
    `except Exception`) cannot turn the refusal into a passing test."""
    if log and os.environ.get(GUARD_LOG):
        with open(os.environ[GUARD_LOG], "a") as out:
            out.write(f"{marker}\t{what}\tthis process (the error was caught)\n")
    raise AssertionError(f"this test starts {what}: mark it @pytest.mark.{marker} (the slow tier)")


# A child process (`bash -c`, `timeout`, `env`, `os.system`, a subprocess of a subprocess) is past
# the in-process guard: it finds each refused program by PATH, where the guard puts a shim (after
# the stand-ins a test wrote under its own tmp_path, before everything else). The shim writes what
# was started to the file GUARD_LOG names and fails; the test then fails naming the marker, even
# where it expected the child to fail. `shutil.which` here does not see the shims: whether the
# Pulumi CLI is installed stays what the machine says. A child that names an engine by its absolute
# path (the oracle venv's interpreter is always named so) is not caught: the in-process guard
# catches that in this process only.
GUARD_LOG = "FLASHFLEET_TIER_GUARD_LOG"
_WHICH = shutil.which  # the guard's own look-up, past its patch of `shutil.which`
SHIMS = "tier-guard-shims"
_SHIM = """#!/bin/sh
printf '%s\\t%s\\t%s\\n' {marker} "$0" "a child process of \\`$(tr '\\0' ' ' </proc/$PPID/cmdline)\\`" \\
  >> "${{{log}:-/dev/null}}"
echo "this test starts $0: mark it @pytest.mark.{marker} (the slow tier)" >&2
exit 97
"""


def _shims(root: Path) -> Path:
    """One shim per refused program (ansible-runner's CLI too), written once per session."""
    folder = root / SHIMS
    if not folder.is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        for program, marker in {**_REFUSED_PROGRAMS, "ansible-runner": "runner"}.items():
            shim = folder / program
            shim.write_text(_SHIM.format(marker=marker, log=GUARD_LOG))
            shim.chmod(0o755)
    return folder


def _without_shims(path: str) -> str:
    return os.pathsep.join(d for d in path.split(os.pathsep) if Path(d).name != SHIMS)


def _with_shims(path: str, shims: Path, fakes_root: Path | None) -> str:
    dirs = _without_shims(path).split(os.pathsep)
    own = 0
    while own < len(dirs) and fakes_root and Path(dirs[own]).resolve().is_relative_to(fakes_root):
        own += 1  # the test's own stand-ins stay first
    return os.pathsep.join([*dirs[:own], str(shims), *dirs[own:]])


def _guard_popen(original: Any, fakes_root: Path | None, shims: Path) -> Any:
    def start(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        argv = [args] if isinstance(args, str | bytes | os.PathLike) else list(args)
        program = os.fsdecode(argv[0]) if argv else ""
        if kwargs.get("shell"):
            program = program.split()[0] if program.split() else ""
        marker = _REFUSED_PROGRAMS.get(os.path.basename(program))
        if marker is None and (
            ".venv-oracle" in program or program == os.environ.get("FLASHFLEET_ORACLE_PYTHON")
        ):
            marker = "oracle"
        # A stand-in the test wrote under its own tmp_path (a fake `pulumi` answering `version`)
        # is not the engine: it may run in the fast tier. A bare name is what PATH finds (not a
        # file of the working directory), and a shim is not a stand-in.
        if marker:
            found = program
            if os.sep not in program:
                env_path = (kwargs.get("env") or os.environ).get("PATH", os.defpath)
                found = _WHICH(program, path=_with_shims(env_path, shims, fakes_root)) or program
            where = Path(found).resolve()
            own = (
                fakes_root and os.sep in found and where.is_relative_to(fakes_root) and where.parent != shims
            )
            if not own:
                _refuse(marker, program)
        if kwargs.get("env") is not None:  # a child given its own environment is guarded too
            env = dict(kwargs["env"])
            env["PATH"] = _with_shims(env.get("PATH", os.defpath), shims, fakes_root)
            env[GUARD_LOG] = os.environ.get(GUARD_LOG, "")
            kwargs["env"] = env
        original(self, args, *rest, **kwargs)

    return start


def _guards(mp: pytest.MonkeyPatch, fakes_root: Path | None, shims: Path) -> None:
    mp.setattr(subprocess.Popen, "__init__", _guard_popen(subprocess.Popen.__init__, fakes_root, shims))

    def which_without_shims(cmd: Any, mode: int = os.F_OK | os.X_OK, path: Any = None) -> Any:
        return _WHICH(cmd, mode, _without_shims(path if path is not None else os.environ.get("PATH", "")))

    mp.setattr(shutil, "which", which_without_shims)
    import ansible_runner

    def runner(*_: Any, **__: Any) -> NoReturn:
        _refuse("runner", "ansible-runner")

    mp.setattr(ansible_runner, "run", runner)
    mp.setattr(ansible_runner, "run_async", runner)
    from hosts.harness import HostPool

    def boot(*_: Any, **__: Any) -> NoReturn:
        _refuse("hosts", "systemd-nspawn test hosts")

    mp.setattr(HostPool, "start", boot)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    """Around the test's fixtures too: a module- or session-scoped fixture that boots hosts for
    an unmarked test is set up here, inside the guard."""
    return (yield from _guarded(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    return (yield from _guarded(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    """A fixture's monkeypatch, undone here, puts back the PATH it saw in a guarded phase: the
    shims leave with it, so that no slow test meets them."""
    try:
        return (yield)
    finally:
        os.environ["PATH"] = _without_shims(os.environ.get("PATH", os.defpath))


def _guarded(item: pytest.Item) -> Generator[None, None, None]:
    if {m.name for m in item.iter_markers()} & set(SLOW_MARKERS):
        return (yield)
    mp = pytest.MonkeyPatch()
    factory = getattr(item.config, "_tmp_path_factory", None)
    fakes_root = factory.getbasetemp().resolve() if factory else None
    shims = _shims(fakes_root or Path(tempfile.gettempdir()))
    fd, name = tempfile.mkstemp(prefix="started-", dir=shims.parent)
    os.close(fd)
    log, outer_log = Path(name), os.environ.get(GUARD_LOG)
    results_before = CHECKOUT_RESULTS.exists()
    # not through `mp`: its undo would also undo what the test's fixtures set on PATH meanwhile
    os.environ["PATH"] = _with_shims(os.environ.get("PATH", os.defpath), shims, fakes_root)
    os.environ[GUARD_LOG] = str(log)
    try:
        _guards(mp, fakes_root, shims)
        result = yield
    finally:
        mp.undo()
        os.environ["PATH"] = _without_shims(os.environ.get("PATH", os.defpath))
        if outer_log is None:
            os.environ.pop(GUARD_LOG, None)
        else:
            os.environ[GUARD_LOG] = outer_log
        started = log.read_text().splitlines()
        log.unlink()
    if started:
        marker, program, where = [*started[0].split("\t"), "", ""][:3]
        _refuse(marker, f"{program} in {where}", log=False)
    if not results_before and CHECKOUT_RESULTS.exists():
        with contextlib.suppress(OSError):
            CHECKOUT_RESULTS.rmdir()  # empty: gone, so that no later test is blamed for it
        raise AssertionError(
            f"this test wrote {CHECKOUT_RESULTS}, the checkout's own results folder: give the "
            "command a --results folder under tmp_path"
        )
    return result
