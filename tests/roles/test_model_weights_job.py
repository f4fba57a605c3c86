"""model_weights' background job (roles/model_weights/files/weights_fetch.py) on this machine,
with a stand-in client in its venv: what it reports, that it marks complete downloads, and that
the token file goes when it ends, SIGTERM included. The real client, Hub and host:
test_model_weights.py."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hosts.pypi import PackageIndex, wheel

SCRIPT = Path(__file__).parents[2] / "roles/model_weights/files/weights_fetch.py"
# Not in the usual hf_ form: the job redacts the token it read, whatever its shape.
TOKEN = "secretTOKENwithoutprefix0123"


def stand_in_venv(venv: Path, hf: str) -> None:
    """A venv whose python reports the pinned client and whose `hf` is the given shell body."""
    (venv / "bin").mkdir(parents=True)
    for name, body in {"python": "echo 2.4.0", "hf": hf}.items():
        path = venv / "bin" / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)


def request(tmp: Path, repos: list[str], timeout_s: int = 60) -> dict[str, Any]:
    cache = tmp / "cache"
    token = tmp / "run/hf-token"
    token.parent.mkdir()
    token.write_text(TOKEN)
    token.chmod(0o600)
    return {
        "repos": repos, "revision": "main", "cache_dir": str(cache), "hub_dir": str(cache / "hub"),
        "marker_dir": str(cache / ".flashfleet-complete"), "venv": str(tmp / "venv"),
        "hub_version": "2.4.0", "pip_args": [], "endpoint": "http://127.0.0.1:9",
        "max_workers": 8, "token_file": str(token), "timeout_s": timeout_s,
        "token_over_http": True,  # the stand-in endpoint is http: these tests follow the token there
    }  # fmt: skip


def start(req: dict[str, Any], tmp: Path) -> subprocess.Popen[str]:
    (tmp / "request.json").write_text(json.dumps(req))
    with (tmp / "request.json").open() as stdin:
        return subprocess.Popen(
            [sys.executable, "-c", SCRIPT.read_text()],
            stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip


def finish(proc: subprocess.Popen[str]) -> tuple[int, dict[str, Any]]:
    out, err = proc.communicate(timeout=60)
    assert err == "", err
    return proc.returncode, dict(json.loads(out))


def test_downloads_side_by_side_mark_each_complete_and_remove_the_token(tmp_path: Path) -> None:
    # each stand-in download waits until the other one has started: one after the other fails;
    # it sees the token only as the file HF_TOKEN_PATH names, never in its environment
    hf = (
        f'test "$(cat "$HF_TOKEN_PATH")" = {TOKEN} || exit 3\n'
        f"env | grep -q {TOKEN} && exit 4\n"
        f"touch {tmp_path}/started-${{2#org/}}\n"
        f"for i in $(seq 100); do [ -e {tmp_path}/started-a ] && [ -e {tmp_path}/started-b ] && break; sleep 0.1; done\n"
        f"[ -e {tmp_path}/started-a ] && [ -e {tmp_path}/started-b ] || exit 5\n"
        'echo "$6/models--$(echo $2 | sed s,/,--,)/snapshots/0123abcd"'
    )
    stand_in_venv(tmp_path / "venv", hf)
    req = request(tmp_path, ["org/a", "org/b"])
    rc, report = finish(start(req, tmp_path))
    assert (rc, report) == (
        0,
        {"changed": True, "installed": "", "downloaded": ["org/a", "org/b"], "failed": []},
    )
    markers = Path(req["marker_dir"])
    assert (markers / "org--b@main").read_text() == f"{req['hub_dir']}/models--org--b/snapshots/0123abcd\n"
    assert oct(Path(req["hub_dir"]).stat().st_mode & 0o777) == "0o755"
    assert not Path(req["token_file"]).exists()


def test_a_failure_is_one_line_per_repository_without_the_token(tmp_path: Path) -> None:
    hf = (
        'if [ "$2" = org/bad ]; then\n'
        '  printf "\\033[31mError: denied for %s\\033[0m\\nURL: http://hub/x?t=%s\\nHint: set HF_DEBUG=1\\n" '
        '"$2" "$(cat "$HF_TOKEN_PATH")" >&2; exit 1\n'
        "fi\n"
        'echo "$6/models--org--good/snapshots/0123abcd"'
    )
    stand_in_venv(tmp_path / "venv", hf)
    req = request(tmp_path, ["org/good", "org/bad"])
    rc, report = finish(start(req, tmp_path))
    assert rc == 1
    assert report["downloaded"] == ["org/good"]
    assert report["failed"] == [
        "hf download org/bad failed (rc 1): Error: denied for org/bad / URL: http://hub/x?t=hf_***"
    ]
    assert TOKEN not in json.dumps(report)
    assert (Path(req["marker_dir"]) / "org--good@main").exists()
    assert not (Path(req["marker_dir"]) / "org--bad@main").exists()
    assert not Path(req["token_file"]).exists()


COMMIT = "4f" * 20
SHARD, CONFIG = b"weights" * 1000, b'{"model_type": "glm"}'
# The stand-in client places the commit it is asked for ($4, after --revision) as the Hub's
# client does: blobs, and the snapshot's links to them; the shard's bytes come from a file the
# test may change (a Hub that serves other bytes than it listed).
PLACE_SNAPSHOT = (
    'snap="$6/models--$(echo $2 | sed s,/,--,)/snapshots/$4"; blobs="$6/blobs"\n'
    'mkdir -p "$snap" "$blobs"\n'
    'cp "{shard}" "$blobs/shard"; ln -sf "$blobs/shard" "$snap/model-00001-of-00001.safetensors"\n'
    "printf '%s' '{config}' > \"$snap/config.json\"\n"
    'echo "$4" >> "{asked}"; echo "$snap"'
)


def locked(files: dict[str, bytes]) -> dict[str, Any]:
    """A lock entry as flashfleet.inventory hands it over (both hash keys present, one null)."""

    def entry(name: str, data: bytes) -> dict[str, Any]:
        if name.endswith(".safetensors"):
            return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "git_oid": None}
        oid = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        return {"size": len(data), "sha256": None, "git_oid": oid}

    return {"revision": "main", "commit": COMMIT, "files": {n: entry(n, d) for n, d in files.items()}}


def locked_request(tmp_path: Path, served_shard: bytes) -> dict[str, Any]:
    (tmp_path / "served-shard").write_bytes(served_shard)
    body = PLACE_SNAPSHOT.format(
        shard=tmp_path / "served-shard", config=CONFIG.decode(), asked=tmp_path / "asked"
    )
    stand_in_venv(tmp_path / "venv", body)
    req = request(tmp_path, ["org/m"])
    req["lock"] = {"org/m": locked({"model-00001-of-00001.safetensors": SHARD, "config.json": CONFIG})}
    return req


def test_a_locked_repository_is_fetched_at_its_commit_and_checked(tmp_path: Path) -> None:
    req = locked_request(tmp_path, SHARD)
    rc, report = finish(start(req, tmp_path))
    assert (rc, report["downloaded"], report["failed"]) == (0, ["org/m"], [])
    assert (tmp_path / "asked").read_text().split() == [COMMIT]  # the commit, not `main`
    assert (Path(req["marker_dir"]) / f"org--m@{COMMIT}").exists()
    assert not (Path(req["marker_dir"]) / "org--m@main").exists()


def test_a_shard_that_differs_from_the_lock_fails_named_and_leaves_the_cache(tmp_path: Path) -> None:
    req = locked_request(tmp_path, b"tampered" * 875)  # the same size, other bytes
    rc, report = finish(start(req, tmp_path))
    want = hashlib.sha256(SHARD).hexdigest()
    got = hashlib.sha256(b"tampered" * 875).hexdigest()
    assert rc == 1
    assert report["failed"] == [
        "hf download org/m failed (not the locked bytes: model-00001-of-00001.safetensors has sha256 "
        f"{got} where the lock has {want})"
    ]
    snapshot = Path(req["hub_dir"]) / f"models--org--m/snapshots/{COMMIT}"
    assert not (snapshot / "model-00001-of-00001.safetensors").exists()
    assert not (Path(req["hub_dir"]) / "blobs/shard").exists()  # the next run fetches it again
    assert (snapshot / "config.json").exists()
    assert not list(Path(req["marker_dir"]).iterdir())


# The stand-in client as the Hub's leaves files out: with --exclude it places only the config.
PLACE_CONFIG_ONLY = (
    'snap="$6/models--$(echo $2 | sed s,/,--,)/snapshots/$4"; mkdir -p "$snap"\n'
    "printf '%s' '{config}' > \"$snap/config.json\"\n"
    'echo "$@" >> "{asked}"; echo "$snap"'
)


@pytest.mark.parametrize("config", [CONFIG, b'{"model_type": "GLM"}'])  # the same size
def test_a_repository_without_its_weight_files_is_checked_for_the_rest(tmp_path: Path, config: bytes) -> None:
    """peer_load: the node downloads all but the weight files (its server loads them from another
    replica): the client is told to leave them out, the lock's check skips only those, and the
    marker says the download left them out."""
    stand_in_venv(
        tmp_path / "venv", PLACE_CONFIG_ONLY.format(config=config.decode(), asked=tmp_path / "asked")
    )
    req = request(tmp_path, ["org/m"])
    req["lock"] = {"org/m": locked({"model-00001-of-00001.safetensors": SHARD, "config.json": CONFIG})}
    req["exclude"], req["marker_suffix"] = ["*.safetensors", "*.bin"], "+no-weight-files"
    rc, report = finish(start(req, tmp_path))
    argv = (tmp_path / "asked").read_text().split()
    assert argv[argv.index("--exclude") :] == ["--exclude", "*.safetensors", "--exclude", "*.bin"]
    markers = sorted(p.name for p in Path(req["marker_dir"]).iterdir())
    if config == CONFIG:
        assert (rc, report["downloaded"], report["failed"]) == (0, ["org/m"], [])
        assert markers == [f"org--m@{COMMIT}+no-weight-files"]  # never taken for a whole download
    else:  # what it does download is still checked
        assert rc == 1
        assert "not the locked bytes: config.json has git_oid" in report["failed"][0]
        assert markers == []


def test_a_shard_of_another_size_fails_before_any_hashing(tmp_path: Path) -> None:
    req = locked_request(tmp_path, SHARD[:-1])
    rc, report = finish(start(req, tmp_path))
    assert rc == 1
    assert f"has size {len(SHARD) - 1} where the lock has {len(SHARD)}" in report["failed"][0]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_stopped_job_stops_its_downloads_and_removes_the_token(tmp_path: Path, sig: signal.Signals) -> None:
    started = tmp_path / "hf-started"
    stand_in_venv(tmp_path / "venv", f"echo $$ > {started}; exec sleep 300")
    req = request(tmp_path, ["org/slow"])
    proc = start(req, tmp_path)
    deadline = time.monotonic() + 30
    while not (started.exists() and started.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int(started.read_text())
    proc.send_signal(sig)
    rc, report = finish(proc)
    assert rc == 1
    assert report["failed"] == [f"hf download org/slow failed (stopped by {sig.name})"]
    assert not Path(req["token_file"]).exists()
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)  # the download stopped with the job


# Runs the job with a Popen that signals the job the moment a download's child exists, before
# Popen returns: the signal lands where the child is not yet on the job's record.
_SIGNAL_INSIDE_POPEN = """
import importlib.util, os, signal, subprocess, sys
spec = importlib.util.spec_from_file_location("weights_fetch", sys.argv[1])
job = importlib.util.module_from_spec(spec)
spec.loader.exec_module(job)

class SignalledPopen(subprocess.Popen):
    def __init__(self, argv, **kw):
        super().__init__(argv, **kw)
        if "download" in argv:
            with open(sys.argv[2], "w") as f:
                f.write(str(self.pid))
            os.kill(os.getpid(), signal.SIGTERM)

subprocess.Popen = SignalledPopen
sys.exit(job.main())
"""


def test_a_signal_while_a_download_starts_still_stops_that_download(tmp_path: Path) -> None:
    stand_in_venv(tmp_path / "venv", "exec sleep 300")
    req = request(tmp_path, ["org/slow"])
    pid_file = tmp_path / "child-pid"
    (tmp_path / "request.json").write_text(json.dumps(req))
    with (tmp_path / "request.json").open() as stdin:
        proc = subprocess.Popen(
            [sys.executable, "-c", _SIGNAL_INSIDE_POPEN, str(SCRIPT), str(pid_file)],
            stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
    rc, report = finish(proc)
    assert (rc, report["failed"]) == (1, ["hf download org/slow failed (stopped by SIGTERM)"])
    assert not Path(req["token_file"]).exists()
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)  # not left running, orphaned, when the job ended


def test_a_download_past_the_time_limit_is_stopped_and_reported(tmp_path: Path) -> None:
    stand_in_venv(tmp_path / "venv", "exec sleep 300")
    req = request(tmp_path, ["org/slow"], timeout_s=1)
    rc, report = finish(start(req, tmp_path))
    assert (rc, report["failed"]) == (1, ["hf download org/slow failed (not finished within 1 s)"])
    assert not Path(req["token_file"]).exists()


def test_a_client_that_cannot_be_installed_fails_every_repository(tmp_path: Path) -> None:
    # an existing venv with another client version, and a pip that fails
    stand_in_venv(tmp_path / "venv", "exit 0")
    (tmp_path / "venv/bin/python").write_text("#!/bin/sh\necho 1.0.0\n")
    (tmp_path / "venv/bin/pip").write_text("#!/bin/sh\necho 'ERROR: No matching distribution' >&2\nexit 1\n")
    (tmp_path / "venv/bin/pip").chmod(0o755)
    req = request(tmp_path, ["org/a", "org/b"])
    rc, report = finish(start(req, tmp_path))
    assert rc == 1
    assert report["failed"] == [
        f"hf download org/{r} failed (no client: pip rc 1: ERROR: No matching distribution)" for r in "ab"
    ]
    assert not report["changed"]
    assert not Path(req["token_file"]).exists()


@pytest.fixture
def client_index() -> Iterator[PackageIndex]:
    """The client as a package index holds it: huggingface_hub 2.4.0 and what it needs."""
    index = PackageIndex()
    for name, version, requires in (
        ("huggingface_hub", "2.4.0", ("filelock>=3",)),
        ("filelock", "3.20.0", ()),
    ):
        filename, data = wheel(name, version, requires=requires)
        index.files[filename] = data
    yield index.start()
    index.stop()


def locked_client(index: PackageIndex) -> list[str]:
    from flashfleet.package_index import resolve_package

    return resolve_package("huggingface_hub", "==2.4.0", index_url=index.simple).sha256s


def test_a_locked_client_is_installed_from_its_locked_bytes_and_other_bytes_fail(
    tmp_path: Path, client_index: PackageIndex
) -> None:
    req = request(tmp_path, ["org/m"])
    req.update(pip_args=["--index-url", client_index.simple], hub_sha256=locked_client(client_index))
    _, report = finish(start(req, tmp_path))
    assert report["installed"] == "huggingface_hub 2.4.0 (locked)"
    venv = Path(req["venv"])
    assert json.loads((venv / "flashfleet-client.json").read_text()) == {"sha256": req["hub_sha256"]}
    probe = "import importlib.metadata as m; print(m.version('huggingface_hub'), m.version('filelock'))"
    versions = subprocess.run([venv / "bin/python", "-c", probe], capture_output=True, text=True, check=True)
    assert versions.stdout.split() == ["2.4.0", "3.20.0"]  # and what it needs, from the index

    # The same version, other bytes on the index (a mirror rebuilt the wheel): a node that installs
    # the client now refuses them, and every repository fails, naming the file and both hashes.
    (tmp_path / "run").rename(tmp_path / "run-1")
    again = request(tmp_path, ["org/m", "org/d"])
    again.update(
        venv=str(tmp_path / "another-node-venv"), pip_args=req["pip_args"], hub_sha256=req["hub_sha256"]
    )
    [filename] = [n for n in client_index.files if n.startswith("huggingface_hub-")]
    rebuilt = wheel("huggingface_hub", "2.4.0", requires=("filelock>=3",), marker="rebuilt")[1]
    client_index.tampered[filename] = rebuilt
    rc, report = finish(start(again, tmp_path))
    assert rc == 1
    assert "huggingface_hub" not in report["installed"]  # only the venv was made
    for line, repo in zip(report["failed"], ("org/m", "org/d"), strict=True):
        assert line.startswith(f"hf download {repo} failed (no client: pip rc 1: "), line
        assert f"Expected sha256 {req['hub_sha256'][0]}" in line, line
        assert f"Got        {hashlib.sha256(rebuilt).hexdigest()}" in line, line
    # and the node that holds the locked bytes keeps its client, without fetching it again
    (tmp_path / "run").rename(tmp_path / "run-2")
    kept = request(tmp_path, ["org/m"])
    kept.update(venv=req["venv"], pip_args=req["pip_args"], hub_sha256=req["hub_sha256"])
    _, report = finish(start(kept, tmp_path))
    assert report["installed"] == ""
    assert not Path(kept["token_file"]).exists()


def pod_run(container: dict[str, Any], tmp: Path, env: dict[str, str]) -> tuple[int, dict[str, Any]]:
    """A rendered Kubernetes download container, run here: its program and request as rendered,
    the pod's paths mapped onto this test's folders (its volumes), this Python for the image's."""
    from flashfleet.k8s.containers import TOKEN_DIR
    from flashfleet.k8s.weights import CLIENT_DIR, PROGRAM_DIR, program_config
    from flashfleet.launch import CONTAINER_HF_CACHE

    python, path, given, raw = container["command"]
    assert (python, given) == ("python", "--request")
    # the program's ConfigMap, mounted at PROGRAM_DIR as the pod mounts it
    mounts = {CONTAINER_HF_CACHE: tmp / "cache", CLIENT_DIR: tmp / "venv", TOKEN_DIR: tmp / "secret",
              PROGRAM_DIR: tmp / "program"}  # fmt: skip
    for key, text in program_config("s", "ns")["data"].items():
        (tmp / "program").mkdir(exist_ok=True)
        (tmp / "program" / key).write_text(text)
    inside = next(m for m in mounts if path.startswith(m))
    program = str(mounts[inside]) + path[len(inside) :]
    req = json.loads(raw)
    for key in ("cache_dir", "hub_dir", "marker_dir", "venv", "token_file"):
        inside = next(m for m in mounts if req[key].startswith(m))
        req[key] = str(mounts[inside]) + req[key][len(inside) :]
    done = subprocess.run(
        [sys.executable, program, "--request", json.dumps(req)], capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, **env},
    )  # fmt: skip
    return done.returncode, dict(json.loads(done.stdout))


@pytest.mark.parametrize("served", [SHARD, b"tampered" * 875])
def test_a_kubernetes_download_runs_this_program_and_enforces_the_lock(
    tmp_path: Path, client_index: PackageIndex, served: bytes
) -> None:
    """The pods of a Kubernetes stack download as the hosts do: the client from the lock's files
    in pip's hash-checking mode, the locked commit, every file checked; the Secret's token file
    (read-only in a pod) is left as it is."""
    from flashfleet.k8s.weights import downloads
    from flashfleet.launch import LaunchSettings
    from flashfleet.package_index import resolve_package
    from flashfleet.recipes import render
    from flashfleet.stack.lock import LockedRepo

    recipe = render("mi355x", "low-latency")
    [repo] = recipe.repositories
    client = resolve_package("huggingface_hub", "==2.4.0", index_url=client_index.simple)
    files = {"model-00001-of-00001.safetensors": SHARD, "config.json": CONFIG}
    settings = LaunchSettings(
        weights_lock={repo: LockedRepo.model_validate(locked(files))}, client_lock=client
    )
    pod = downloads(recipe, "python:3.12.12-slim-bookworm", "hf-secret", settings, "weights-fetch")
    (tmp_path / "secret").mkdir()
    token = tmp_path / "secret/HF_TOKEN"
    token.write_text(TOKEN)
    token.chmod(0o400)
    index = {"PIP_INDEX_URL": client_index.simple}  # what PyPI is to a pod

    rc, report = pod_run(pod.install, tmp_path, index)
    assert (rc, report["installed"], report["failed"]) == (0, "huggingface_hub 2.4.0 (locked)", [])
    # the index's wheel has no working `hf`: the stand-in client takes its place in the venv
    (tmp_path / "served-shard").write_bytes(served)
    hf = tmp_path / "venv/bin/hf"
    hf.write_text("#!/bin/sh\n" + PLACE_SNAPSHOT.format(shard=tmp_path / "served-shard", config=CONFIG.decode(),
                                                          asked=tmp_path / "asked") + "\n")  # fmt: skip
    hf.chmod(0o755)
    [download] = pod.containers
    rc, report = pod_run(download, tmp_path, index)
    assert report["installed"] == "", report  # the init container's client, checked and kept
    assert (tmp_path / "asked").exists(), report
    assert (tmp_path / "asked").read_text().split() == [COMMIT]  # the locked commit
    if served == SHARD:
        assert (rc, report["downloaded"], report["failed"]) == (0, [repo], [])
    else:
        assert rc == 1
        assert "not the locked bytes: model-00001-of-00001.safetensors has sha256" in report["failed"][0]
    assert token.read_text() == TOKEN  # the pod's Secret is not the program's to remove


# A tampered lock's file names: each would reach a file outside the snapshot (as root, on every
# node and in every Kubernetes download pod) when the file's size or hash does not match.
OUTSIDE_NAMES = [
    "{victim}",
    "../../../../../../../..{victim}",
    "config.json/../../../../x",
    "a//b",
    "./config.json",
    "",
    "a\\b",
]


@pytest.mark.parametrize("name", OUTSIDE_NAMES)
def test_a_lock_naming_a_file_outside_the_snapshot_touches_nothing(tmp_path: Path, name: str) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    name = name.format(victim=victim)
    req = locked_request(tmp_path, SHARD)
    req["lock"]["org/m"]["files"][name] = {"size": 1, "sha256": None, "git_oid": "0" * 40}  # never matches
    rc, report = finish(start(req, tmp_path))
    assert rc == 1
    assert report["failed"] == [
        f"hf download org/m failed (the lock names {name!r}: not a relative path of the repository)"
    ]
    assert victim.read_bytes() == b"precious"
    assert not (tmp_path / "asked").exists()  # the tampered repository is not even fetched
    assert not Path(req["token_file"]).exists()


# A client (or a cache someone else wrote) that leaves links out of the snapshot: a locked file
# that is a link to a file outside the cache, and a folder that is a link to one.
PLACE_LINKS_OUT = (
    'snap="$6/models--$(echo $2 | sed s,/,--,)/snapshots/$4"; mkdir -p "$snap"\n'
    'ln -sf "{victim}" "$snap/evil.bin"; ln -sfn "{victim_dir}" "$snap/sub"\n'
    "printf '%s' '{config}' > \"$snap/config.json\"\n"
    'echo "$snap"'
)


@pytest.mark.parametrize("name", ["evil.bin", "sub/victim"])
def test_a_snapshot_link_leading_out_is_neither_read_nor_removed(tmp_path: Path, name: str) -> None:
    victim_dir = tmp_path / "elsewhere"
    victim_dir.mkdir()
    victim = victim_dir / "victim"
    victim.write_bytes(b"precious")
    body = PLACE_LINKS_OUT.format(victim=victim, victim_dir=victim_dir, config=CONFIG.decode())
    stand_in_venv(tmp_path / "venv", body)
    req = request(tmp_path, ["org/m"])
    req["lock"] = {"org/m": locked({"config.json": CONFIG})}
    req["lock"]["org/m"]["files"][name] = {"size": 1, "sha256": None, "git_oid": "0" * 40}
    rc, report = finish(start(req, tmp_path))
    assert rc == 1
    assert f"{name!r} leads outside the snapshot" in report["failed"][0], report
    assert victim.read_bytes() == b"precious"


@pytest.mark.parametrize("over_http", [False, True])
def test_the_token_goes_to_an_http_mirror_only_where_the_stack_says_so(
    tmp_path: Path, over_http: bool
) -> None:
    """The real download client (huggingface_hub's `hf`, from this checkout's environment)
    against a capture server on 127.0.0.1 that records every Authorization header."""
    from tests.cli.test_token_only_over_https import Capture

    capture = Capture()
    try:
        venv = tmp_path / "venv"
        stand_in_venv(venv, "echo 2.4.0")
        (venv / "bin" / "hf").unlink()
        (venv / "bin" / "hf").symlink_to(Path(sys.executable).with_name("hf"))
        req = request(tmp_path, ["org/m"], timeout_s=60)
        req["endpoint"], req["token_over_http"] = capture.url, over_http
        rc, report = finish(start(req, tmp_path))
    finally:
        capture.server.shutdown()
    assert rc == 1
    assert capture.seen, report
    if over_http:  # the capture does see a token when one is sent
        assert f"Bearer {TOKEN}" in capture.seen
    else:
        assert capture.seen == [None] * len(capture.seen)
        assert report["failed"][0].endswith(f"(no token sent: {capture.url} is not https)"), report
    assert TOKEN not in json.dumps(report)
