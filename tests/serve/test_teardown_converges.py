"""Issue 14 on real systemd test hosts with the real ansible-runner: teardown.yml converges or
names the host. Secrets go first, whatever fails later; a cache path that is / or climbs with
`..` is never deleted; only a cache flashfleet filled is; a wedged unit fails its host instead
of hanging; an unreachable host is a warning and the teardown still succeeds."""

from __future__ import annotations

import copy
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flashfleet.bringup import handoff
from flashfleet.bringup.handoff import TeardownError, teardown
from flashfleet.components.host_keys import BEGIN, END, parse_console

from .lab import ServeLab, make_stack, serve_lab

HOSTS = ["tda", "tdb"]
SECRETS = "/etc/flashfleet/secrets.env"
# each role bounds its own stops (remove entry points); short here so a wedged unit fails fast
QUICK = {"sglang_serve_remove_timeout_s": 15, "mooncake_remove_timeout_s": 15}
UNIT = """[Unit]
Description=flashfleet test server
X-FlashfleetContainer=flashfleet-server

[Service]
ExecStart=/bin/sleep infinity
{stop}

[Install]
WantedBy=multi-user.target
"""


@pytest.fixture(scope="module")
def lab() -> Iterator[ServeLab]:
    with serve_lab(HOSTS, engine=False) as lab:  # hand-written units: no container runs
        yield lab


def deploy(lab: ServeLab, host: str, *, wedged: bool = False) -> None:
    """What serve.yml leaves on a node: a secret env file and a running marked unit."""
    stop = "ExecStop=/bin/sleep 3600\nTimeoutStopSec=infinity" if wedged else ""
    root = lab.pool.hosts[host].root
    (root / "etc/systemd/system/flashfleet-server.service").write_text(UNIT.format(stop=stop))
    lab.ssh(host, f"mkdir -p /etc/flashfleet && echo HF_TOKEN=hf_x > {SECRETS} && chmod 600 {SECRETS}")
    lab.ssh(host, "systemctl daemon-reload && systemctl start flashfleet-server.service")


def inventory(lab: ServeLab, **facts: Any) -> dict[str, Any]:
    stack = make_stack("td", "unified", [lab.address(h) for h in HOSTS])
    inv = lab.inventory((stack, HOSTS))
    for hvars in inv["all"]["hosts"].values():
        hvars.update(facts)
    return inv


def is_clean(lab: ServeLab, host: str) -> bool:
    secret = lab.ssh(host, f"test -e {SECRETS} && echo present || echo gone").strip()
    active = lab.ssh(host, "systemctl is-active flashfleet-server.service", check=False).strip()
    return secret == "gone" and active != "active"


def test_a_cache_dir_of_slash_is_refused_after_the_secrets_are_gone(lab: ServeLab) -> None:
    # the case that found it: modelCacheDir: / with keepCaches: false, from a hand-written
    # inventory (the spec refuses it; the role must too)
    for host in HOSTS:
        deploy(lab, host)
    inv = inventory(lab, flashfleet_model_cache_dir="/", flashfleet_keep_caches=False)
    down = lab.run("teardown.yml", inv)
    assert not down.ok
    assert {f.host for f in down.failures} == {"td-node-0", "td-node-1"}
    assert "refusing to delete /" in down.failures[0].message
    for host in HOSTS:
        assert lab.ssh(host, "cat /etc/hostname").strip()  # / is whole
        assert is_clean(lab, host), host  # the secret and the server went first


def test_a_dotdot_cache_dir_never_deletes_its_sibling(lab: ServeLab) -> None:
    lab.ssh(
        "tda",
        "mkdir -p /srv/data/cache/.flashfleet-complete /srv/data/sibling && touch /srv/data/sibling/keep",
    )
    inv = inventory(
        lab, flashfleet_model_cache_dir="/srv/data/cache/../sibling", flashfleet_keep_caches=False
    )
    down = lab.run("teardown.yml", inv)
    assert not down.ok
    assert lab.ssh("tda", "ls /srv/data/sibling").split() == ["keep"]


def test_only_a_cache_flashfleet_filled_is_deleted(lab: ServeLab) -> None:
    lab.ssh("tda", "mkdir -p /srv/ours/.flashfleet-complete /srv/ours/hub && touch /srv/ours/hub/x")
    lab.ssh("tdb", "mkdir -p /srv/ours && touch /srv/ours/someone-elses")  # no marker: not ours
    down = lab.run(
        "teardown.yml", inventory(lab, flashfleet_model_cache_dir="/srv/ours", flashfleet_keep_caches=False)
    )
    assert down.ok, lab.explain(down)
    assert lab.ssh("tda", "test -e /srv/ours || echo gone").strip() == "gone"
    assert lab.ssh("tdb", "ls /srv/ours").split() == ["someone-elses"]


def test_a_wedged_unit_fails_its_host_and_an_unreachable_one_is_a_warning(
    lab: ServeLab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deploy(lab, "tda", wedged=True)
    deploy(lab, "tdb")
    inv = inventory(lab)
    gone = copy.deepcopy(inv["all"]["hosts"]["td-node-1"])
    gone["ansible_host"] = f"{lab.pool.gateway.rsplit('.', 1)[0]}.250"
    inv["all"]["hosts"]["td-node-2"] = {**gone, "flashfleet_node_index": 2}
    inv["all"]["children"]["flashfleet"]["hosts"]["td-node-2"] = {}
    monkeypatch.setattr(handoff, "TEARDOWN_TIMEOUT_S", 240)  # and the whole run in minutes
    lines: list[str] = []
    # the stop would hang for an hour: the role's per-task timeout fails that host in seconds
    with pytest.raises(TeardownError, match="teardown did not finish on td-node-0;"):
        teardown(inv, runs_root=tmp_path, emit=lines.append, stack="td", extravars=QUICK)
    assert any("unreachable, left as they are: td-node-2" in ln for ln in lines)
    assert is_clean(lab, "tdb")
    # the wedged host: its secret is gone all the same; the server is what the error names
    assert lab.ssh("tda", f"test -e {SECRETS} && echo present || echo gone").strip() == "gone"
    lab.ssh("tda", "systemctl kill --signal=KILL flashfleet-server.service", check=False)

    # once the unit is unstuck, the same teardown converges, the dead host a warning only
    lines.clear()
    del inv["all"]["hosts"]["td-node-0"]
    del inv["all"]["children"]["flashfleet"]["hosts"]["td-node-0"]
    for group in inv["all"]["children"].values():
        group["hosts"].pop("td-node-0", None)
    result = teardown(inv, runs_root=tmp_path, emit=lines.append, stack="td", extravars=QUICK)
    assert any("td-node-2" in ln for ln in lines)
    assert result.unreachable == ["td-node-2"]


def test_pinned_host_keys_are_checked_by_ssh(lab: ServeLab, tmp_path: Path) -> None:
    # Issue 14: host key checking was off while the token went to the node. A host that lists
    # its keys is reached only if it shows one of them.
    own = lab.ssh("tda", "cat /etc/ssh/ssh_host_ed25519_key.pub").strip()
    # another machine's key (the test hosts are copies of one image and share theirs)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "k")], check=True)
    other = (tmp_path / "k.pub").read_text().strip()
    assert other.split()[1] != own.split()[1]
    inv = inventory(lab)
    del inv["all"]["hosts"]["td-node-1"]
    for group in inv["all"]["children"].values():
        group["hosts"].pop("td-node-1", None)
    node = inv["all"]["hosts"]["td-node-0"]

    node["flashfleet_host_keys"] = [own]
    ok = lab.run("teardown.yml", inv)
    assert ok.ok, lab.explain(ok)
    assert (ok.run_dir / "known_hosts").read_text().split()[1:] == own.split()[:2]

    node["flashfleet_host_keys"] = [other]  # someone else answers at the address
    # a new connection, as any run after ControlPersist's minute makes (the master of the run
    # above was opened against the right key and would be reused)
    node["ansible_ssh_args"] = "-o ControlMaster=no -o ControlPath=none"
    refused = lab.run("teardown.yml", inv)
    assert refused.unreachable == ["td-node-0"]
    assert "Host key verification failed" in refused.events_log.read_text()


def test_aws_console_keys_are_pinned_through_the_same_path(lab: ServeLab, tmp_path: Path) -> None:
    # Issue 14, AWS: the keys a node's first-boot console shows (read by components.aws_host_keys)
    # reach the host as flashfleet_host_keys and ssh checks them; a console showing another
    # machine's key makes the node unreachable, and nothing is sent to it.
    own = lab.ssh("tda", "cat /etc/ssh/ssh_host_ed25519_key.pub").strip()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "k")], check=True)
    other = (tmp_path / "k.pub").read_text().strip()

    def console(key: str) -> str:
        return f"[   12.1] cloud-init[812]: running\n{BEGIN}\n{key}\n{END}\n[   30.2] finished\n"

    inv = inventory(lab)
    del inv["all"]["hosts"]["td-node-1"]
    for group in inv["all"]["children"].values():
        group["hosts"].pop("td-node-1", None)
    node = inv["all"]["hosts"]["td-node-0"]
    node["flashfleet_host_keys"] = [f"{t} {b}" for t, b in parse_console(console(own))]
    ok = lab.run("teardown.yml", inv)
    assert ok.ok, lab.explain(ok)

    node["flashfleet_host_keys"] = [f"{t} {b}" for t, b in parse_console(console(other))]
    node["ansible_ssh_args"] = "-o ControlMaster=no -o ControlPath=none"  # a new connection
    refused = lab.run("teardown.yml", inv)
    assert refused.unreachable == ["td-node-0"]
    assert "Host key verification failed" in refused.events_log.read_text()
