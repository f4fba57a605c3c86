"""The image lock on a real Docker engine and a real OCI registry: the stand-in SGLang image (the
H200 host's small one, not its 6 GB faithful base: the registry's digests are what is tested) is
pushed by the H200 host's dockerd to Debian's docker-registry on the test network (TLS, its
certificate trusted as a private registry's is: /etc/docker/certs.d), `flashfleet lock` resolves
the tag to its digest through the registry API, and the tag is then moved by a second push.

The sglang_image role, run with the base the inventory names, pulls the locked digest: the moved
tag is not what the node holds. A node that holds the moved tag and cannot pull the locked digest
(the registry lost it) stops with "image digest differs from the lock", naming both."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hosts.aptindex import of_catalog
from hosts.hub import Hub, Repo
from hosts.pypi import PackageIndex
from hosts.registry import Registry
from roles.hardware import IMAGES, MODEL

from flashfleet.cli import main
from flashfleet.inventory import build_inventory
from flashfleet.planning import load_stack
from flashfleet.stack import DEFAULT_STACKS_DIR

from .conftest import OLDER_BASE, Engine

pytestmark = pytest.mark.registry
NAME = "lmsysorg/sglang"
TAG = "v0.5.23"
PULL_TASK = "Pull | pull the pinned base image"
HOSTS = ("h200", "mi355x")
PAYLOAD = OLDER_BASE  # the stand-in image on the H200 host, pushed under the pinned names


@pytest.fixture(scope="module")
def registry(engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    registry = Registry(tmp_path_factory.mktemp("registry"), host=engine.pool.gateway, tls=True).start()
    trusted = [engine.pool.hosts[h].root / f"etc/docker/certs.d/{registry.address}" for h in HOSTS]
    for certs in trusted:
        certs.mkdir(parents=True, exist_ok=True)
        shutil.copy(registry.ca, certs / "ca.crt")
    try:
        yield registry
    finally:
        # by name, never by id: the locked image is also the other tests' stand-in base
        names = "{{.Repository}}@{{.Digest}} {{.Repository}}:{{.Tag}}"
        for host in HOSTS:
            engine.sh(host, f"docker images --format '{names}' | tr ' ' '\\n' | grep '^{registry.address}/' "
                            "| grep -v -e '@<none>' -e ':<none>' | xargs -r docker rmi")  # fmt: skip
        for certs in trusted:
            shutil.rmtree(certs, ignore_errors=True)
        registry.stop()


def _sh(engine: Engine, command: str, host: str = "h200") -> str:
    done = engine.sh(host, command)
    assert done.returncode == 0, (command, done.stdout, done.stderr)
    return done.stdout.strip()


def _push(engine: Engine, ref: str) -> str:
    """`docker push` from the H200 host's engine; the digest the registry answered."""
    out = _sh(engine, f"docker push {ref}")
    return out.rsplit("digest: ", 1)[1].split()[0]


def _lock_stack(tmp_path: Path, registry: Registry, monkeypatch: pytest.MonkeyPatch) -> Path:
    hub = Hub(token="hf_unused")
    hub.repos[MODEL] = Repo({"config.json": b'{"model_type": "glm5_next"}'})
    monkeypatch.setenv("HF_ENDPOINT", hub.start("127.0.0.1"))
    monkeypatch.setenv("SSL_CERT_FILE", str(registry.ca))  # the registry's certificate, trusted
    pypi = PackageIndex.of_catalog_pins().start()  # the packages the lock pins beside the image
    apt = of_catalog().start()  # and the vendors' apt packages
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    path = stacks / "Pulumi.h200-lowlat.yaml"
    doc = yaml.safe_load((DEFAULT_STACKS_DIR / path.name).read_text())
    doc["config"]["flashfleet:stack"]["image"] = {"repository": f"{registry.address}/{NAME}"}
    doc["config"]["flashfleet:stack"]["site"] = {"pip": {"indexUrl": pypi.simple}, "apt": apt.site_apt()}
    path.write_text(yaml.safe_dump(doc))
    try:
        assert main(["lock", "h200-lowlat", "--stacks-dir", str(stacks)]) == 0
    finally:
        hub.stop()
        pypi.stop()
        apt.stop()
    return stacks


def _pull(engine: Engine, base: str, host: str = "h200") -> tuple[bool, list[dict[str, Any]], str]:
    # the role's checks and pull, not the derived build (tests/engine/test_derived_image_build.py)
    run = engine.play(
        [host], tags="sglang_image", skip_tags="sglang_image_build,sglang_image_verify",
        extravars={"flashfleet_image": base},
    )  # fmt: skip
    events = [json.loads(line) for line in run.events_log.read_text().splitlines()]
    done = ("runner_on_ok", "runner_on_failed", "runner_on_skipped")
    results = [{**e["event_data"], "event": e["event"]} for e in events if e.get("event") in done]
    return run.ok, results, run.summary()


def test_the_node_pulls_the_locked_digest_after_the_tag_moved_and_stops_when_it_cannot(
    engine: Engine, registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tagged = f"{registry.address}/{NAME}:{TAG}"
    _sh(engine, f"docker tag {PAYLOAD} {tagged}")
    locked = _push(engine, tagged)
    assert registry.tag_digest(NAME, TAG) == locked
    stacks = _lock_stack(tmp_path, registry, monkeypatch)
    lock = yaml.safe_load((stacks / "h200-lowlat.lock.yaml").read_text())
    assert lock["images"][tagged]["digest"] == locked
    assert lock["images"][tagged]["platforms"] == {"linux/amd64": locked}

    # the tag moves: a rebuild (another config) pushed under the same name
    _sh(engine, f"docker create --name ff-rebuild {tagged} true && "
                f"docker commit --change 'LABEL rebuilt=yes' ff-rebuild {tagged} && docker rm ff-rebuild")  # fmt: skip
    moved = _push(engine, tagged)
    assert moved != locked
    assert registry.tag_digest(NAME, TAG) == moved
    locked_id = _sh(engine, f"docker image inspect --format '{{{{.Id}}}}' {PAYLOAD}")
    moved_id = _sh(engine, f"docker image inspect --format '{{{{.Id}}}}' {tagged}")
    # the host forgets both (the references only: the locked image stays the other tests' base)
    _sh(engine, f"docker rmi {registry.address}/{NAME}@{locked} {registry.address}/{NAME}@{moved} {tagged}")

    # what the inventory hands the node: the tag with the locked digest
    plan = load_stack("h200-lowlat", stacks)
    [hostvars] = build_inventory(plan, ["198.51.100.7"], ["10.0.0.7"])["all"]["hosts"].values()
    base = hostvars["flashfleet_image"]
    assert base == f"{tagged}@{locked}"
    ok, results, summary = _pull(engine, base)
    assert ok, summary
    [pulled] = [r["res"] for r in results if r.get("task") == PULL_TASK]
    assert pulled["cmd"] == ["docker", "pull", base], pulled
    assert pulled["rc"] == 0, pulled
    # the node holds the locked image (by id) and not the moved one: the tag is not even there
    assert _sh(engine, f"docker image inspect --format '{{{{.Id}}}}' {base}") == locked_id
    assert engine.sh("h200", f"docker image inspect {moved_id}").returncode != 0
    assert engine.sh("h200", f"docker image inspect {tagged}").returncode != 0
    ok, results, summary = _pull(engine, base)  # held by digest now: nothing to pull again
    assert ok, summary
    assert [r["event"] for r in results if r.get("task") == PULL_TASK] == ["runner_on_skipped"]

    # A node that never held the locked image, holding the moved tag, and a registry that lost
    # the locked digest. (A node that held it once re-creates it from its engine's own manifest
    # cache: that is the locked image, and it runs.) The MI355X host, with its ROCm tag.
    rocm = f"{registry.address}/{NAME}:{IMAGES['mi355x'].rsplit(':', 1)[1]}"
    _sh(engine, f"docker tag {PAYLOAD} {rocm}")
    assert _push(engine, rocm) == locked  # the same image: the same manifest
    _sh(engine, f"docker create --name ff-rebuild {rocm} true && "
                f"docker commit --change 'LABEL rebuilt=again' ff-rebuild {rocm} && docker rm ff-rebuild")  # fmt: skip
    moved = _push(engine, rocm)
    _sh(engine, f"docker pull {rocm}", host="mi355x")
    registry.delete(NAME, locked)
    ok, results, summary = _pull(engine, f"{rocm}@{locked}", host="mi355x")
    assert not ok, summary
    [failed] = [r for r in results if r["event"] == "runner_on_failed"]
    assert failed["task"] == "Pull | the node holds another image under the pinned tag", failed["task"]
    msg = failed["res"]["msg"]
    assert msg.startswith("image digest differs from the lock: "), msg
    assert f"the node holds {rocm} as {registry.address}/{NAME}@{moved}, not {locked}" in msg, msg
    assert "could not be pulled (" in msg, msg
    assert "manifest unknown" in msg, msg
