"""Issue 14: every spec value that reaches a host is refused with exit 2 and its YAML path, or
is safe there. Each case below is the one that found the bug, run through `flashfleet validate`
(in process) exactly as a user would."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from flashfleet.cli import main
from flashfleet.stack import safe_values

S = "flashfleet:stack"
Doc = dict[str, Any]
WriteStack = Callable[[str, Callable[[Doc], None]], Path]


def spec(doc: Doc) -> Doc:
    return doc["config"][S]


def src(doc: Doc) -> Doc:
    return spec(doc)["nodes"]["source"]


def host0(doc: Doc) -> Doc:
    return src(doc)["hosts"][0]


def validate(stacks_dir: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    rc = main(["validate", "broken", "--stacks-dir", str(stacks_dir)])
    return rc, capsys.readouterr().err


# The adversarial review's accepted host paths (modelCacheDir) and Kubernetes hostPaths
# (DirectoryOrCreate on every GPU node).
SYSTEM_DATA_DIRS = [
    "/var/lib/mysql",
    "/var/lib/postgresql",
    "/var/spool/cron/crontabs",
    "/var/log/journal",
    "/var/lib/sss/db",
]
K8S_NODE_DIRS = ["/opt/cni/bin", "/var/lib/etcd", "/var/lib/rancher/k3s", "/var/lib/cni", "/var/log/pods"]

# (id, base stack, change, YAML path that must be named)
REFUSED: list[tuple[str, str, Callable[[Doc], None], str]] = [
    # paths: deleted by teardown (keepCaches: false), chmodded, mounted read-write
    ("cache dir is /", "mi355x-lowlat", lambda d: spec(d).update(modelCacheDir="/"), "modelCacheDir"),
    ("cache dir climbs into /etc", "mi355x-lowlat", lambda d: spec(d).update(modelCacheDir="/opt/../etc"), "modelCacheDir"),
    ("cache dir with a colon", "mi355x-lowlat", lambda d: spec(d).update(modelCacheDir="/:/host"), "modelCacheDir"),
    ("cache dir deleting a sibling", "mi355x-lowlat", lambda d: spec(d).update(modelCacheDir="/opt/flashfleet/hf-cache/../mooncake"), "modelCacheDir"),
    ("cache dir relative", "mi355x-lowlat", lambda d: spec(d).update(modelCacheDir="hf-cache/x"), "modelCacheDir"),
    ("cache dir is /opt", "mi355x-lowlat", lambda d: spec(d).update(modelCacheDir="/opt"), "modelCacheDir"),
    ("cache dir is /tmp", "mi355x-lowlat", lambda d: spec(d).update(modelCacheDir="/tmp/"), "modelCacheDir"),
    ("cache dir inside /usr", "mi355x-lowlat", lambda d: spec(d).update(modelCacheDir="/usr/local/lib/x"), "modelCacheDir"),
    ("cache dir is /var/lib", "mi355x-lowlat", lambda d: spec(d).update(modelCacheDir="/var/lib"), "modelCacheDir"),
    ("cache dir is a home", "mi355x-lowlat", lambda d: spec(d).update(modelCacheDir="/home/ubuntu"), "modelCacheDir"),
    ("cache dir with a newline", "mi355x-lowlat", lambda d: spec(d).update(modelCacheDir="/opt/x\n/etc"), "modelCacheDir"),
    # system and data directories that passed the old deny-list: the cache is chmodded 0755 and
    # mounted read-write, so only a root flashfleet may own will do
    *((f"cache dir is {p}", "mi355x-lowlat", lambda d, p=p: spec(d).update(modelCacheDir=p), "modelCacheDir") for p in SYSTEM_DATA_DIRS),
    *((f"k8s hostPath {p}", "mi355x-k8s", lambda d, p=p: src(d).update(modelCache={"kind": "hostPath", "path": p}), "nodes.source.modelCache.path") for p in K8S_NODE_DIRS),
    ("cache dir is a root itself", "mi355x-lowlat", lambda d: spec(d).update(modelCacheDir="/mnt"), "modelCacheDir"),
    ("cache dir is flashfleet's own root", "mi355x-lowlat", lambda d: spec(d).update(modelCacheDir="/opt/flashfleet/"), "modelCacheDir"),
    ("cache dir next to a root", "mi355x-lowlat", lambda d: spec(d).update(modelCacheDir="/opt/flashfleet-x/hf"), "modelCacheDir"),
    ("cache dir is X11's socket dir", "mi355x-lowlat", lambda d: spec(d).update(modelCacheDir="/tmp/.X11-unix"), "modelCacheDir"),
    ("k8s hostPath is a root itself", "mi355x-k8s", lambda d: src(d).update(modelCache={"kind": "hostPath", "path": "/data"}), "nodes.source.modelCache.path"),
    ("k8s hostPath /etc", "mi355x-k8s", lambda d: src(d).update(modelCache={"kind": "hostPath", "path": "/etc"}), "nodes.source.modelCache.path"),
    ("k8s hostPath /proc/x", "mi355x-k8s", lambda d: src(d).update(modelCache={"kind": "hostPath", "path": "/proc/1/root"}), "nodes.source.modelCache.path"),
    # numbers that size lists or reach files
    ("efaNetworkCards 1e9", "h200-lowlat", lambda d: src(d).update(instance={"efaNetworkCards": 1_000_000_000}), "nodes.source.instance.efaNetworkCards"),
    ("gpu count 1e9", "mi355x-lowlat", lambda d: host0(d)["gpus"].update(count=1_000_000_000), "nodes.source.hosts[0].gpus.count"),
    ("host memory 1e12", "mi355x-lowlat", lambda d: host0(d).update(hostMemoryGib=10**12), "nodes.source.hosts[0].hostMemoryGib"),
    # addresses and users reach ssh's argv and the IMEX nodes_config.cfg
    ("address is an ssh option", "mi355x-lowlat", lambda d: host0(d).update(address="-oProxyCommand=touch /tmp/pwned"), "nodes.source.hosts[0].address"),
    ("address with a newline", "mi355x-lowlat", lambda d: host0(d).update(address="10.0.0.1\n10.0.0.99"), "nodes.source.hosts[0].address"),
    ("address user@host", "mi355x-lowlat", lambda d: host0(d).update(address="root@10.0.0.1"), "nodes.source.hosts[0].address"),
    ("private address with a newline", "mi355x-lowlat", lambda d: host0(d).update(privateAddress="10.0.0.1\nx"), "nodes.source.hosts[0].privateAddress"),
    ("user is an ssh option", "mi355x-lowlat", lambda d: host0(d).update(sshUser="-oProxyCommand=x"), "nodes.source.hosts[0].sshUser"),
    ("user with a newline", "mi355x-lowlat", lambda d: host0(d).update(sshUser="ubuntu\nroot"), "nodes.source.hosts[0].sshUser"),
    ("gpu model with a space", "mi355x-lowlat", lambda d: host0(d)["gpus"].update(model="mi355x x"), "nodes.source.hosts[0].gpus.model"),
    # images
    ("repository with an option", "h200-lowlat", lambda d: spec(d)["image"].update(repository="--privileged"), "image.repository"),
    ("repository uppercase", "h200-lowlat", lambda d: spec(d)["image"].update(repository="LMSYS/sglang"), "image.repository"),
    ("tag with a space", "h200-lowlat", lambda d: spec(d)["image"].update(tag="v0.5.23 --privileged"), "image.tag"),
    # names
    ("key name with a newline", "h200-lowlat", lambda d: src(d).update(keyName="k\nx"), "nodes.source.keyName"),
    ("availability zone with a slash", "h200-lowlat", lambda d: src(d)["network"].update(availabilityZone="us-east-2a/../x"), "nodes.source.network.availabilityZone"),
    ("description with a newline", "h200-lowlat", lambda d: spec(d).update(description="a\nb"), "description"),
    ("mooncake device with a slash", "h200-l3", lambda d: spec(d)["mooncake"].update(devices=["../../x"]), "mooncake.devices[0]"),
    # a trailing newline slips past a Python `^...$` pattern (the property test found it)
    ("mooncake device with a trailing newline", "h200-l3", lambda d: spec(d)["mooncake"].update(devices=["0\n"]), "mooncake.devices[0]"),
    ("user with a trailing newline", "mi355x-lowlat", lambda d: host0(d).update(sshUser="ubuntu\n"), "nodes.source.hosts[0].sshUser"),
    ("k8s namespace with a trailing newline", "mi355x-k8s", lambda d: src(d).update(namespace="glm\n"), "nodes.source.namespace"),
    ("k8s label value with a trailing newline", "mi355x-k8s", lambda d: src(d)["nodePools"]["mi355x"]["nodeSelector"].update(x="y\n"), "nodes.source.nodePools.mi355x.nodeSelector"),
    # ports
    ("mooncake rpcPort 22", "h200-l3", lambda d: spec(d)["mooncake"].update(rpcPort=22), "mooncake.rpcPort"),
    ("mooncake ports equal", "h200-l3", lambda d: spec(d)["mooncake"].update(rpcPort=9000, metadataPort=9000), "mooncake.metadataPort"),
    ("metadata port is the serving port", "h200-l3", lambda d: spec(d)["mooncake"].update(metadataPort=30000), "mooncake.metadataPort"),
    ("metadata port is the metrics port", "h200-l3", lambda d: spec(d)["mooncake"].update(metadataPort=9003), "mooncake.metadataPort"),
    ("metadata port is a moved metrics port", "h200-l3", lambda d: spec(d)["mooncake"].update(metricsPort=9100, metadataPort=9100), "mooncake.metricsPort"),
    ("rpc port is the default metrics port", "h200-l3", lambda d: spec(d)["mooncake"].update(rpcPort=9003), "mooncake.rpcPort"),
    ("mooncake metricsPort 80", "h200-l3", lambda d: spec(d)["mooncake"].update(metricsPort=80), "mooncake.metricsPort"),
    ("metrics port is the rpc port", "h200-l3", lambda d: spec(d)["mooncake"].update(metricsPort=50051), "mooncake.metricsPort"),
    ("metrics port is the serving port", "h200-l3", lambda d: spec(d)["mooncake"].update(metricsPort=30000), "mooncake.metricsPort"),
]  # fmt: skip


@pytest.mark.parametrize(("base", "change", "path"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_value_is_refused_with_exit_2_naming_its_path(
    write_stack: WriteStack,
    capsys: pytest.CaptureFixture[str],
    base: str,
    change: Callable[[Doc], None],
    path: str,
) -> None:
    rc, err = validate(write_stack(base, change), capsys)
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err  # one line, never a traceback
    assert f"{S}.{path}:" in lines[0], err


ACCEPTED: list[tuple[str, str, Callable[[Doc], None]]] = [
    *((f"cache dir below {r}", "mi355x-lowlat", lambda d, r=r: spec(d).update(modelCacheDir=f"{r}/hf-cache")) for r in safe_values.HOST_PATH_ROOTS),
    *((f"k8s hostPath below {r}", "mi355x-k8s", lambda d, r=r: src(d).update(modelCache={"kind": "hostPath", "path": f"{r}/nvme/hf"})) for r in safe_values.HOST_PATH_ROOTS),
    ("cache dir on NVMe", "mi355x-lowlat", lambda d: spec(d).update(modelCacheDir="/mnt/nvme0/hf-cache")),
    ("cache dir with a trailing slash", "mi355x-lowlat", lambda d: spec(d).update(modelCacheDir="/data/hf//")),
    ("a DNS name and a user with digits", "mi355x-lowlat", lambda d: host0(d).update(address="gpu-01.lab.example.com", sshUser="ops_2")),
    ("an IPv6 address", "mi355x-lowlat", lambda d: host0(d).update(address="2001:db8::10")),
    ("a registry with a port", "h200-lowlat", lambda d: spec(d)["image"].update(repository="registry.example.com:5000/org/sglang")),
    ("a local zone", "h200-lowlat", lambda d: (d["config"].update({"aws:region": "us-east-1"}), src(d)["network"].update(availabilityZone="us-east-1-bos-1a"))),
]  # fmt: skip


@pytest.mark.parametrize(("base", "change"), [c[1:] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_ordinary_values_still_pass(
    write_stack: WriteStack, capsys: pytest.CaptureFixture[str], base: str, change: Callable[[Doc], None]
) -> None:
    rc, err = validate(write_stack(base, change), capsys)
    assert rc == 0, err


def test_cache_dir_is_normalised_before_it_reaches_the_inventory() -> None:
    assert safe_values.host_path("/data/./hf//") == "/data/hf"


@pytest.mark.parametrize(
    "value",
    ["/", "/etc", "/opt/../etc", "/:/host", "/opt", "/tmp", "/usr/local", "/var/lib", "/home/ubuntu",
     "/root/x", "/home/u/.ssh", "/dev/shm/x", "/sys/fs", "/boot/efi", "/lib64/x", "/run/x", "rel/x",
     "/mnt/../etc/x", "/data/x/.ssh", "/srv/.git", "/var/lib/flashfleet", "/var/cache/apt/x",
     *SYSTEM_DATA_DIRS, *K8S_NODE_DIRS],
)  # fmt: skip
def test_system_directories_are_never_a_host_path(value: str) -> None:
    with pytest.raises(ValueError, match="must be an absolute path strictly below one of /opt/flashfleet"):
        safe_values.host_path(value)


@pytest.mark.parametrize("entry", ["start.yml", "remove.yml"])
def test_the_roles_defence_in_depth_uses_the_same_rule(entry: str) -> None:
    # model_weights creates and chmods the cache (start: its job) and deletes it (remove, the teardown):
    # both check the rule, repeated for hand-written inventories, through one task file: never drift
    import yaml

    role = Path(__file__).parents[2] / "roles" / "model_weights"
    role_vars = yaml.safe_load((role / "vars" / "main.yml").read_text())
    assert role_vars["_model_weights_allowed_roots"] == list(safe_values.HOST_PATH_ROOTS)
    cache_path = yaml.safe_load((role / "tasks" / "cache_path.yml").read_text())
    check = cache_path[0]["ansible.builtin.assert"]["that"]
    assert any("_model_weights_allowed_roots" in c for c in check)
    tasks = yaml.safe_load((role / "tasks" / entry).read_text())
    flat = [t for task in tasks for t in (task.get("block", []) if "block" in task else [task])]
    imports = [t["ansible.builtin.import_tasks"]["file"] for t in flat if "ansible.builtin.import_tasks" in t]
    assert "cache_path.yml" in imports


ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOv4b5mJ8m8Sx1ZqjS3uXK3bC9QwYqkzq0J1k7o6ZrXy"


def with_token(d: Doc) -> None:
    d["config"]["flashfleet:hfToken"] = {"secure": "v1:abcdef"}


@pytest.mark.parametrize(
    ("change", "rc"),
    [
        (lambda d: None, 2),  # the token would go to whoever answers at the address
        (lambda d: host0(d).update(hostKeys=[ED25519 + " root@mi355x"]), 0),
        (lambda d: host0(d).update(hostKeys=["192.0.2.10 " + ED25519]), 0),  # a known_hosts line
        (lambda d: src(d).update(allowUnpinnedHostKeys=True), 0),
    ],
    ids=["unpinned", "pinned", "known-hosts-line", "explicit-opt-in"],
)
def test_a_token_goes_only_to_pinned_hosts(
    write_stack: WriteStack, capsys: pytest.CaptureFixture[str], change: Callable[[Doc], None], rc: int
) -> None:
    def both(d: Doc) -> None:
        with_token(d)
        change(d)

    got, err = validate(write_stack("mi355x-lowlat", both), capsys)
    assert got == rc, err
    if rc:
        assert f"{S}.nodes.source.hosts[0].hostKeys:" in err
        assert len(err.strip().splitlines()) == 1


def test_a_host_key_that_is_not_one_is_refused(
    write_stack: WriteStack, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, err = validate(
        write_stack("mi355x-lowlat", lambda d: host0(d).update(hostKeys=["ssh-ed25519 x\nevil"])), capsys
    )
    assert rc == 2
    assert f"{S}.nodes.source.hosts[0].hostKeys[0]:" in err


ROLE_CASES = [
    *SYSTEM_DATA_DIRS, *K8S_NODE_DIRS, *(f"{r}/hf-cache" for r in safe_values.HOST_PATH_ROOTS),
    *safe_values.HOST_PATH_ROOTS, "/", "/etc/x", "/opt/flashfleet-x/hf", "/tmp/.X11-unix", "/mnt/a/../b",
    "/data/hf/", "/data//hf", "/mnt/./hf", "/srv/x:y", "/var/lib/flashfleet/hf", "/home/u/.ssh",
]  # fmt: skip


@pytest.mark.parametrize("value", ROLE_CASES)
def test_the_roles_assert_accepts_exactly_what_the_spec_keeps_as_written(value: str) -> None:
    # A hand-written inventory reaches the role unnormalised (the contract refuses that, but the
    # role stands alone): the role's own conditions, evaluated by Ansible, pass just when
    # host_path keeps the value as it is.
    import yaml
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    role = Path(__file__).parents[2] / "roles" / "model_weights"
    roots = yaml.safe_load((role / "vars" / "main.yml").read_text())["_model_weights_allowed_roots"]
    that = yaml.safe_load((role / "tasks" / "cache_path.yml").read_text())[0]["ansible.builtin.assert"][
        "that"
    ]
    templar = Templar(
        loader=DataLoader(),
        variables={"_model_weights_allowed_roots": roots, "model_weights_cache_dir": value},
    )
    role_accepts = all(templar.evaluate_conditional(trust_as_template(c)) for c in that)
    try:
        spec_keeps = safe_values.host_path(value) == value
    except ValueError:
        spec_keeps = False
    assert role_accepts == spec_keeps, value


@pytest.fixture(scope="module")
def real_keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    import subprocess

    d = tmp_path_factory.mktemp("keys")
    out = {}
    for kind in ("ed25519", "ecdsa", "rsa", "dsa"):
        done = subprocess.run(
            ["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(d / kind)], capture_output=True, check=False
        )
        if done.returncode == 0:  # OpenSSH builds without DSA refuse to make one
            out[kind] = (d / f"{kind}.pub").read_text().strip()
    return out


def test_real_host_keys_pass_as_type_and_base64(real_keys: dict[str, str]) -> None:
    for kind in ("ed25519", "ecdsa", "rsa"):
        key_type, blob, _comment = real_keys[kind].split()
        assert safe_values.host_key(real_keys[kind]) == f"{key_type} {blob}"
        assert safe_values.host_key(f"192.0.2.10 {key_type} {blob}") == f"{key_type} {blob}"


def test_a_security_key_host_key_passes() -> None:
    import base64
    import struct

    def field(b: bytes) -> bytes:
        return struct.pack(">I", len(b)) + b

    kind = b"sk-ssh-ed25519@openssh.com"
    blob = base64.b64encode(field(kind) + field(bytes(range(32))) + field(b"ssh:")).decode()
    assert safe_values.host_key(f"{kind.decode()} {blob}") == f"{kind.decode()} {blob}"


@pytest.mark.parametrize(
    "mangle",
    [
        lambda t, b: f"ssh-rsa {b}" if t != "ssh-rsa" else f"ssh-ed25519 {b}",  # another type's name
        lambda t, b: f"{t} {b[:-8]}",  # cut short
        lambda t, b: f"{t} {b[:20]}%{b[20:]}",  # a byte cryptography's base64 would skip
        lambda t, b: f"{t}",
    ],
)
def test_a_mangled_key_is_refused(real_keys: dict[str, str], mangle: Callable[[str, str], str]) -> None:
    key_type, blob, _ = real_keys["ed25519"].split()
    with pytest.raises(ValueError, match="must be a host public key"):
        safe_values.host_key(mangle(key_type, blob))


def test_a_dsa_key_is_refused(real_keys: dict[str, str]) -> None:
    # ssh-keygen's when this OpenSSH still makes one, else cryptography's (a real DSA key either way)
    key = real_keys.get("dsa") or _dsa_public_key()
    with pytest.raises(ValueError, match="must be a host public key"):
        safe_values.host_key(key)


def _dsa_public_key() -> str:
    from cryptography.hazmat.primitives.asymmetric import dsa
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    public = dsa.generate_private_key(key_size=1024).public_key()
    return public.public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode()


def test_single_letters_stay_text_as_pyyaml_reads_them():
    """YAML 1.1 lists y/n as booleans and ruamel.yaml takes them; PyYAML, which writes the files a
    script produces, does not: `N` must come back as the text written."""
    import yaml

    from flashfleet.stack.yamlfile import parse_yaml

    doc = {"a": "N", "b": "y", "c": "off", "d": True, "e": "0755"}
    assert parse_yaml(yaml.safe_dump(doc)) == doc
    assert parse_yaml("a: yes\nb: Off\nc: 0755\n") == {"a": True, "b": False, "c": 493}


def test_numbers_without_a_dot_stay_text_as_pyyaml_reads_them():
    """ruamel.yaml's YAML 1.1 reads 0E0 and 1e5 as floats; PyYAML, which leaves them unquoted when
    it writes them as text, reads them back as text (hypothesis found `modelCacheDir: 0E0`)."""
    import yaml

    from flashfleet.stack.yamlfile import parse_yaml

    doc = {"a": "0E0", "b": "1e5", "c": 1.5, "d": 1e5, "e": "1_2:3", "f": 12}
    text = yaml.safe_dump(doc)
    assert parse_yaml(text) == yaml.safe_load(text) == doc
    assert parse_yaml("a: 1.0e+5\nb: .inf\nc: 1_000\n") == {"a": 1e5, "b": float("inf"), "c": 1000}


@pytest.mark.parametrize(
    "image",
    ["lmsysorg/sglang:latest", "lmsysorg/sglang:dev-cu129", "lmsysorg/sglang:nightly", "lmsysorg/sglang"],
)
def test_an_image_whose_tag_floats_is_refused_without_a_digest(image: str) -> None:
    with pytest.raises(ValueError, match="floats: use a pinned image"):
        safe_values.pinned_image(image)
    digest = "sha256:" + "0" * 64
    assert safe_values.pinned_image(f"{image}@{digest}") == f"{image}@{digest}"
