"""The weights fan-out of model_weights' background job, on this machine: a seed serves the
locked files of its cache and a peer fetches them, each checked on arrival; a copy that differs
is refused and left to the Hub; a seed that never answers sends the peer to the Hub. The real
client, Hub and hosts: tests/roles/test_weights_fanout.py."""

from __future__ import annotations

import hashlib
import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .test_model_weights_job import SCRIPT, locked, request, stand_in_venv

REPO = "org/model"
SHARD = "model-00001-of-00001.safetensors"
FILES = {"config.json": b'{"model_type": "glm"}', SHARD: b"weights" * 5000}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def seeded(tmp: Path, files: dict[str, bytes]) -> dict[str, Any]:
    """A seed's request whose cache already holds the locked commit (nothing to download)."""
    req = request(tmp, [])
    lock = locked(FILES)
    snap = Path(req["hub_dir"]) / "models--org--model/snapshots" / lock["commit"]
    snap.mkdir(parents=True)
    for name, data in files.items():
        (snap / name).write_bytes(data)
    Path(req["marker_dir"]).mkdir(parents=True)
    (Path(req["marker_dir"]) / f"org--model@{lock['commit']}").write_text(f"{snap}\n")
    return {**req, "lock": {REPO: lock}, "serve_repos": [REPO], "host": "seed"}


def fanout(role: str, port: int, **more: Any) -> dict[str, Any]:
    return {
        "role": role,
        "seed": "seed",
        "seed_address": "127.0.0.1",
        "port": port,
        "peers": ["peer"],
        "wait_s": 2,
        **more,
    }


def run_jobs(seed: dict[str, Any], peer: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], Path]:
    """The seed's and the peer's jobs side by side: (seed report, peer report, the peer's storage)."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SCRIPT.read_text(), "--request", json.dumps(r)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in (seed, peer)
    ]
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert err == "", err
        reports.append(json.loads(out))
    return reports[0], reports[1], Path(peer["hub_dir"]) / "models--org--model"


def run_pair(tmp: Path, seed_files: dict[str, bytes], hf: str) -> tuple[dict[str, Any], dict[str, Any], Path]:
    port = free_port()
    (tmp / "s").mkdir()
    (tmp / "p").mkdir()
    seed = {**seeded(tmp / "s", seed_files), "fanout": fanout("seed", port), "serve_to": ["peer"]}
    peer_req = request(tmp / "p", [REPO])
    venv = Path(peer_req["venv"]) / "bin"
    venv.mkdir(parents=True)
    for name, body in {"python": "echo 2.4.0", "hf": hf}.items():
        (venv / name).write_text(f"#!/bin/sh\n{body}\n")
        (venv / name).chmod(0o755)
    peer = {**peer_req, "lock": {REPO: locked(FILES)}, "host": "peer", "fanout": fanout("peer", port)}
    return run_jobs(seed, peer)


def test_a_peer_fetches_every_locked_file_from_the_seed_and_asks_the_hub_nothing(tmp_path: Path) -> None:
    # the stand-in client fails: any Hub download would fail the peer
    seed, peer, storage = run_pair(tmp_path, FILES, "exit 9")
    assert peer["failed"] == [], peer
    assert peer["downloaded"] == [REPO]
    assert peer["fanout"] == [f"{REPO}: 2 files from the seed seed"]
    assert seed["fanout"] == ["served 2 files to 1 peers"]
    lock = locked(FILES)
    for name, data in FILES.items():
        link = storage / "snapshots" / lock["commit"] / name
        assert link.is_symlink()
        assert link.read_bytes() == data
        want = lock["files"][name]
        assert link.resolve().name == (want["sha256"] or want["git_oid"])  # the Hub cache's blob name
    assert (tmp_path / f"p/cache/.flashfleet-complete/org--model@{lock['commit']}").exists()


def test_a_copy_that_differs_is_refused_and_left_to_the_hub(tmp_path: Path) -> None:
    bad = {**FILES, SHARD: b"corrupt" * 5000}
    _, peer, storage = run_pair(tmp_path, bad, "echo the-hub-was-asked >&2; exit 9")
    want = locked(FILES)["files"][SHARD]["sha256"]
    got = hashlib.sha256(bad[SHARD]).hexdigest()
    assert peer["fanout"] == [
        f"{REPO}: 1 files from the seed seed; from the Hub: {SHARD} refused: sha256 {got} where the lock has {want}"
    ]
    assert peer["failed"][0].startswith(f"hf download {REPO} failed (rc 9): the-hub-was-asked"), peer
    assert not (storage / "blobs" / got).exists()
    assert [p.name for p in (storage / "blobs").iterdir() if p.name.startswith(".peer-")] == []


def test_a_seed_that_never_answers_sends_the_peer_to_the_hub(tmp_path: Path) -> None:
    req = request(tmp_path, [REPO])
    stand_in_venv(Path(req["venv"]), "exit 9")  # the Hub's download fails here: the note is what counts
    port = free_port()
    peer = {**req, "lock": {REPO: locked(FILES)}, "host": "peer", "fanout": fanout("peer", port)}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT.read_text(), "--request", json.dumps(peer)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    report = json.loads(proc.stdout)
    [note] = report["fanout"]
    assert note.startswith(
        f"{REPO}: from the Hub (the seed http://127.0.0.1:{port} did not answer for 2 s: "
    ), note


def test_a_seed_lets_a_silent_peer_go_after_wait_s(tmp_path: Path) -> None:
    # the peer it waits for never comes: the seed stops serving after wait_s without a request
    port = free_port()
    seed = {**seeded(tmp_path, FILES), "fanout": fanout("seed", port), "serve_to": ["peer"]}
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT.read_text(), "--request", json.dumps(seed)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert time.monotonic() - start < 30
    report = json.loads(proc.stdout)
    assert report["fanout"] == ["served 0 files to 0 peers; no word from peer"]
    assert report["failed"] == []


def run_streaming(tmp: Path, shard: bytes) -> tuple[dict[str, Any], dict[str, Any], Path]:
    """A seed whose own download is running and a peer: the seed's stand-in client places
    config.json, waits (at most 20 s) until the peer holds it, then places `shard` and ends."""
    port = free_port()
    (tmp / "s").mkdir()
    (tmp / "p").mkdir()
    lock = locked(FILES)
    peer_req = request(tmp / "p", [REPO])
    peer_has = Path(peer_req["hub_dir"]) / "models--org--model/snapshots" / lock["commit"] / "config.json"
    (tmp / "shard").write_bytes(shard)
    hf = (
        'snap="$6/models--org--model/snapshots/$4"; blobs="$6/models--org--model/blobs"\n'
        'mkdir -p "$snap" "$blobs"\n'
        f'printf \'%s\' \'{FILES["config.json"].decode()}\' > "$blobs/c"; ln -s "$blobs/c" "$snap/config.json"\n'
        f"for i in $(seq 200); do [ -e {peer_has} ] && break; sleep 0.1; done\n"
        f'[ -e {peer_has} ] || {{ echo "the peer had nothing before the download ended"; exit 3; }}\n'
        f'cp {tmp / "shard"} "$blobs/s"; ln -s "$blobs/s" "$snap/{SHARD}"\n'
        'echo "$snap"'
    )
    seed_req = request(tmp / "s", [REPO])
    stand_in_venv(Path(seed_req["venv"]), hf)
    seed = {**seed_req, "lock": {REPO: lock}, "serve_repos": [REPO], "host": "seed",
            "fanout": fanout("seed", port), "serve_to": ["peer"]}  # fmt: skip
    stand_in_venv(Path(peer_req["venv"]), "echo the-hub-was-asked for $2; exit 9")
    peer = {**peer_req, "lock": {REPO: lock}, "host": "peer", "fanout": fanout("peer", port)}
    return run_jobs(seed, peer)


def test_a_peer_fetches_each_file_while_the_seeds_download_still_runs(tmp_path: Path) -> None:
    seed, peer, storage = run_streaming(tmp_path, FILES[SHARD])
    # the seed's client ended only once the peer held its first file
    assert (seed["downloaded"], seed["failed"]) == ([REPO], []), seed
    assert seed["fanout"] == ["served 2 files to 1 peers"]
    assert (peer["downloaded"], peer["failed"]) == ([REPO], []), peer
    assert peer["fanout"] == [f"{REPO}: 2 files from the seed seed"]
    snapshot = storage / "snapshots" / locked(FILES)["commit"]
    assert {n: (snapshot / n).read_bytes() for n in FILES} == FILES


def test_a_seed_offers_no_file_its_download_got_wrong(tmp_path: Path) -> None:
    # the Hub sent the seed other bytes for the shard: the seed's download fails, and its peer
    # never sees that copy (not offered, not refused after a transfer) and asks the Hub for it
    seed, peer, storage = run_streaming(tmp_path, b"corrupt" * 5000)
    assert seed["failed"][0].startswith(
        f"hf download {REPO} failed (not the locked bytes: {SHARD} has sha256 "
    )
    assert seed["fanout"] == ["served 1 files to 1 peers"]
    assert peer["fanout"] == [
        f"{REPO}: 1 files from the seed seed; from the Hub: {SHARD} not offered (the seed's own download failed)"
    ]
    assert peer["failed"][0].startswith(f"hf download {REPO} failed (rc 9): the-hub-was-asked for {REPO}"), (
        peer
    )
    assert (storage / "snapshots" / locked(FILES)["commit"] / "config.json").read_bytes() == FILES[
        "config.json"
    ]


def test_a_peer_that_holds_every_file_already_fetches_nothing_and_marks_it(tmp_path: Path) -> None:
    # an earlier run placed every file but never wrote the marker: nothing is fetched again, the
    # lock check reads what is there
    port = free_port()
    (tmp_path / "s").mkdir()
    (tmp_path / "p").mkdir()
    seed = {**seeded(tmp_path / "s", FILES), "fanout": fanout("seed", port), "serve_to": ["peer"]}
    peer_req = request(tmp_path / "p", [REPO])
    stand_in_venv(Path(peer_req["venv"]), "exit 9")
    snapshot = Path(peer_req["hub_dir"]) / "models--org--model/snapshots" / locked(FILES)["commit"]
    snapshot.mkdir(parents=True)
    for name, data in FILES.items():
        (snapshot / name).write_bytes(data)
    peer = {**peer_req, "lock": {REPO: locked(FILES)}, "host": "peer", "fanout": fanout("peer", port)}
    _, report, _ = run_jobs(seed, peer)
    assert (report["downloaded"], report["failed"]) == ([REPO], [])
    assert report["fanout"] == [f"{REPO}: 0 files from the seed seed"]
