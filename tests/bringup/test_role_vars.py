"""The stack's site section and `configure -e` go around no check: each way round the spec that a
review found (a connection variable that replaced the pinned SSH arguments, a token file that
was a directory, an install directory of /home, a mirror URL with its password) is refused by
`flashfleet validate` (a stack names only the site's typed fields), by the bring-up provider's
check of its extra variables (through the engine's gRPC round trip) and by `flashfleet configure
-e`, with exit 2 and one line naming the field or variable and the rule."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pulumi.runtime import proto

from flashfleet.bringup.project import DEFAULT_PROJECT, REPO, Project
from flashfleet.bringup.provider import PlaybookRunProvider
from flashfleet.bringup.role_vars import (
    KINDS,
    REFUSED,
    STACK_PLAYBOOKS,
    RoleVarRefused,
    check_role_vars,
    documented_options,
)
from flashfleet.cli import main
from flashfleet.stack import safe_values
from tests.stacks.conftest import catalog_doc

from .conftest import resource_inputs
from .engine import URN, ProviderHost
from .inventories import PROJECT, inventory, unreachable_host

SITE = "flashfleet:stack.site"
# (variable, value, rule): the review's cases first, then the other ways round the same rules.
ATTACKS = [
    ("ansible_ssh_common_args", "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null", "connection"),
    ("ansible_host", "203.0.113.7", "connection"),
    ("ansible_become_password", "hunter2", "connection"),
    ("flashfleet_host_keys", [], "connection"),
    ("site_colour", "red", "unknown-argument"),
    ("model_weights_token_file", "/var/lib/flashfleet/hf", "secret-handling"),
    ("sglang_serve_api_key_env", "AWS_SECRET_ACCESS_KEY", "secret-handling"),
    ("model_weights_remove_cache", True, "flashfleet-owned"),
    ("mooncake_install_dir", "/home", "host-path"),
    ("model_weights_cache_dir", "/etc/ssl", "host-path"),
    ("preflight_data_dir", "/var/lib", "host-path"),
    ("nvidia_driver_repo_url", "https://mirror:s3cret@apt.example.internal/cuda/repos", "credentials"),
    ("model_weights_pip_find_links", "https://me:pw@wheels.example.internal/", "credentials"),
    ("model_weights_hf_endpoint", "{{ lookup('env', 'AWS_SECRET_ACCESS_KEY') }}", "template"),
    ("model_weights_pip_trusted_host", "{% if lookup('pipe', 'id') %}x{% endif %}", "template"),
    ("mooncake_local_hostname", "node{# a comment Ansible reads #}", "template"),
    ("model_weights_hf_endpoint", "file:///etc/passwd", "url"),
    ("mooncake_local_hostname", "-oProxyCommand=x", "address"),
    ("rocm_driver_users", ["root;id"], "user"),
    ("mooncake_rpc_port", 70000, "port"),
    ("container_runtime_daemon_options", {"hosts": ["tcp://0.0.0.0:2375"]}, "docker-options"),
    ("preflight_gpu_count", "8", "int"),
]
IDS = [f"{name}-{rule}" for name, _, rule in ATTACKS]
# The review's cases as a stack would try them through its site section: (where, value, what the
# one line says). A name that is no site field is refused whatever it is.
SITE_ATTACKS = [
    ("ansible_ssh_common_args", "-o StrictHostKeyChecking=no", "unknown key"),
    ("mooncakeInstallDir", "/home", "unknown key"),
    ("pip.mooncakeWheels", "/home", "is not below a root flashfleet may own"),
    ("apt.cuda", "https://mirror:s3cret@apt.example.internal/cuda/repos", "may not carry a user or password"),
    ("pip.findLinks", "https://me:pw@wheels.example.internal/", "may not carry a user or password"),
    ("hub.endpoint", "{{ lookup('env', 'AWS_SECRET_ACCESS_KEY') }}", "must be an http(s) URL"),
    ("pip.trustedHost", "{% if lookup('pipe', 'id') %}x{% endif %}", "must be an IP address or a DNS name"),
    ("hub.endpoint", "file:///etc/passwd", "must be an http(s) URL"),
    ("pip.trustedHost", "-oProxyCommand=x", "must be an IP address or a DNS name"),
    ("containerCli", "docker; id", "must be the absolute path of a program"),
    ("registryMirrors", ["tcp://0.0.0.0:2375"], "must be an http(s) URL"),
    ("readiness.timeoutSeconds", "8", "must be a whole number"),
]
# An air-gapped site's mirrors, as the engine test sets them: accepted, and handed to the roles.
SITE_MIRRORS = {
    "apt": {
        "cuda": "http://10.0.0.1:8080/cuda/repos",
        "docker": "https://mirror.example.internal/docker/linux",
    },
    "hub": {"endpoint": "http://10.0.0.1:9000", "tokenOverHttp": True},
    "pip": {"findLinks": "http://10.0.0.1:8080/wheels/", "trustedHost": "10.0.0.1"},
    "containerCli": "/usr/local/lib/fake-docker/docker",
    "diskCheck": {"imageGb": 1},
    "registryMirrors": ["https://registry.example.internal"],
}
# The role arguments those set, as the bring-up's extra variables: accepted by its check too.
MIRRORS = {
    "nvidia_driver_repo_url": "http://10.0.0.1:8080/cuda/repos",
    "container_runtime_docker_repo_url": "https://mirror.example.internal/docker/linux",
    "model_weights_hf_endpoint": "http://10.0.0.1:9000",
    "model_weights_hf_token_over_http": True,
    "model_weights_pip_find_links": "http://10.0.0.1:8080/wheels/",
    "model_weights_pip_trusted_host": "10.0.0.1",
    "sglang_serve_docker": "/usr/local/lib/fake-docker/docker",
    "preflight_image_gb": 1,
    "container_runtime_daemon_options": {"registry-mirrors": ["https://registry.example.internal"]},
}


def _validate(tmp_path: Path, site: dict[str, Any], capsys: Any) -> tuple[int, str]:
    doc = copy.deepcopy(catalog_doc("h200-lowlat"))
    doc["config"]["flashfleet:stack"]["site"] = site
    (tmp_path / "Pulumi.rv.yaml").write_text(yaml.safe_dump(doc))
    rc = main(["validate", "rv", "--stacks-dir", str(tmp_path)])
    return rc, capsys.readouterr().err


def _nested(where: str, value: Any) -> dict[str, Any]:
    *parents, leaf = where.split(".")
    out: dict[str, Any] = {leaf: value}
    for key in reversed(parents):
        out = {key: out}
    return out


@pytest.mark.parametrize(("where", "value", "says"), SITE_ATTACKS, ids=[a[0] for a in SITE_ATTACKS])
def test_validate_refuses_the_site_field_naming_it_and_the_rule(
    tmp_path: Path, capsys: Any, where: str, value: Any, says: str
) -> None:
    rc, err = _validate(tmp_path, _nested(where, value), capsys)
    assert rc == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert f"{SITE}.{where}" in err, err
    assert says in err, err
    assert "[rule: " in err, err


def test_validate_accepts_a_sites_mirrors_and_hands_the_roles_their_arguments(
    tmp_path: Path, capsys: Any
) -> None:
    from flashfleet.planning import load_stack

    rc, err = _validate(tmp_path, SITE_MIRRORS, capsys)
    assert rc == 0, err
    args = load_stack("rv", tmp_path).site_args
    assert {k: args.get(k) for k in MIRRORS} == MIRRORS  # each role argument, from its site field
    check_role_vars(DEFAULT_PROJECT, STACK_PLAYBOOKS, args)  # and the provider's guard accepts them


@pytest.fixture(scope="module")
def check_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProviderHost]:
    """One provider process for every Check below: Check keeps no state between calls, and a
    process per case (start, then the first Check's imports) cost ~2 s each."""
    host = ProviderHost(tmp_path_factory.mktemp("provider"))
    try:
        yield host
    finally:
        host.close()


@pytest.mark.parametrize(("name", "value", "rule"), ATTACKS, ids=IDS)
def test_the_provider_check_refuses_through_the_engines_round_trip(
    tmp_path: Path,
    check_host: ProviderHost,
    two_local_nodes: dict[str, Any],
    name: str,
    value: Any,
    rule: str,
) -> None:
    news = check_host._props(resource_inputs(tmp_path, two_local_nodes, REPO, extravars={name: value}))
    resp = check_host.stub.Check(proto.CheckRequest(urn=URN, olds=news, news=news))
    assert [f.property for f in resp.failures] == ["extravars"]
    reason = resp.failures[0].reason
    assert reason.startswith(f"extravars.{name}: "), reason
    assert reason.endswith(f"[rule: {rule}]"), reason


def test_the_provider_check_accepts_the_mirrors(tmp_path: Path, two_local_nodes: dict[str, Any]) -> None:
    inputs = resource_inputs(tmp_path, two_local_nodes, REPO, extravars=MIRRORS)
    failures = PlaybookRunProvider().check({}, inputs).failures
    assert [(f.property, f.reason) for f in failures] == []


@pytest.mark.parametrize(
    ("name", "value", "rule"), [a for a in ATTACKS if a[0] in {"ansible_ssh_common_args", "mooncake_install_dir",
                                                               "model_weights_token_file", "nvidia_driver_repo_url"}]
)  # fmt: skip
def test_configure_refuses_the_same_extra_variable_before_any_run(
    tmp_path: Path, capsys: Any, two_local_nodes: dict[str, Any], name: str, value: Any, rule: str
) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_text(yaml.safe_dump(two_local_nodes))
    argv = ["configure", "t1", "--inventory", str(inv), "--runs-dir", str(tmp_path / "runs")]
    rc = main([*argv, "-e", f"{name}={yaml.safe_dump(value, default_flow_style=True).strip()}"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert f"-e {name}: " in err, err
    assert err.rstrip().endswith(f"[rule: {rule}]"), err
    assert not (tmp_path / "runs").exists()  # refused before a run directory, let alone a host


def test_every_documented_argument_of_the_bringup_has_a_rule() -> None:
    """A new role argument cannot slip through as free text: each str, path, list or dict argument
    of a role the bring-up runs is refused or has a kind; names that carry secrets are refused."""
    options = documented_options(DEFAULT_PROJECT, STACK_PLAYBOOKS)
    untyped = sorted(
        n for n, o in options.items()
        if n not in KINDS and n not in REFUSED and (o.get("type") or "str") not in {"bool", "int", "float"}
        and o.get("choices") is None
    )  # fmt: skip
    assert untyped == []
    paths = {n: REFUSED[n][0] if n in REFUSED else KINDS[n][0] for n, o in options.items()
             if "path" in (o.get("type"), o.get("elements"))}  # fmt: skip
    assert paths
    assert set(paths.values()) <= {
        "host-path",
        "program",
        "device",
        "secret-handling",
        "flashfleet-owned",
    }
    secretish = [
        n for n in options if n.endswith(("_env", "_token_file", "_secret_sources", "_files_to_remove"))
    ]
    assert secretish
    assert all(REFUSED[n][0] == "secret-handling" for n in secretish)


# (directory, the path it names or None where refused), by the rule docs/security.md states and
# written out here: strictly below one of the roots, no `..`, no hidden name, plain characters.
DIRECTORIES = [
    ("/opt/flashfleet/mooncake", "/opt/flashfleet/mooncake"),
    ("/mnt/nvme/hf-cache", "/mnt/nvme/hf-cache"),
    ("/var/lib/flashfleet/mc", "/var/lib/flashfleet/mc"),
    ("/srv/a_b-c+d@e.f", "/srv/a_b-c+d@e.f"),
    ("/data//weights/./mc/", "/data/weights/mc"),  # `//`, `.` and a trailing `/` folded
    ("/opt/flashfleet", None),  # a root itself
    ("/mnt/", None),
    ("/opt/flashfleetx/mc", None),  # a root's name as a prefix only
    ("/home", None),
    ("/home/me/mc", None),
    ("/root/x", None),
    ("/var/lib/mysql", None),
    ("/data/../etc", None),
    ("/mnt/nvme/../../etc", None),
    ("/mnt/.ssh", None),
    ("/srv/x/.cache/y", None),
    ("/srv/x:y", None),
    ("/srv/a b", None),
    ("mnt/x", None),
    ("/mnt/nvme/../hf", None),  # climbs, though it lands below a root
]


@pytest.mark.parametrize(("value", "path"), DIRECTORIES)
def test_a_directory_is_accepted_or_refused_by_the_documented_rule(value: str, path: str | None) -> None:
    if path is None:
        with pytest.raises(ValueError, match="must be an absolute path strictly below one of"):
            safe_values.host_path(value)
        with pytest.raises(RoleVarRefused) as refused:
            check_role_vars(DEFAULT_PROJECT, STACK_PLAYBOOKS, {"mooncake_install_dir": value})
        assert refused.value.rule == "host-path"
    else:
        assert safe_values.host_path(value) == path
        check_role_vars(DEFAULT_PROJECT, STACK_PLAYBOOKS, {"mooncake_install_dir": value})


# A person's own project (tests/bringup/project): role arguments flashfleet has no kind for. A
# path, a list of mappings or a mapping could hold anything (a directory the role writes into, a
# command it runs), so each is refused, named, whatever it holds.
NO_RULE = [
    ("marker_dir", "/etc", "path"),
    ("marker_dir", "/root/.ssh", "path"),
    ("marker_processes", [{"name": "x", "argv": ["sh", "-c", "rm -rf /"]}], "list"),
]
NO_RULE_REASON = "has no rule for what it may hold (roles/*/meta/argument_specs.yml), so it is not accepted"


@pytest.mark.parametrize(("name", "value", "rule"), NO_RULE, ids=["etc", "root-ssh", "rm-rf"])
def test_configure_refuses_a_projects_argument_that_has_no_rule(
    tmp_path: Path, capsys: Any, name: str, value: Any, rule: str
) -> None:
    # an unreachable node: were the value let through, the run would fail on SSH, touching nothing here
    inv = tmp_path / "inv.yaml"
    inv.write_text(yaml.safe_dump(inventory("t1", {"node-0": (unreachable_host(), tmp_path / "n0")})))
    argv = ["configure", "t1", "--inventory", str(inv), "--project", str(PROJECT),
            "--runs-dir", str(tmp_path / "runs")]  # fmt: skip
    rc = main([*argv, "-e", f"{name}={yaml.safe_dump(value, default_flow_style=True).strip()}"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err == f"flashfleet configure: -e {name}: {NO_RULE_REASON} [rule: {rule}]\n"
    assert not (tmp_path / "runs").exists()


def test_a_mapping_argument_of_a_projects_role_is_refused_and_its_scalars_pass(tmp_path: Path) -> None:
    (tmp_path / "playbooks").mkdir()
    (tmp_path / "playbooks" / "site.yml").write_text(
        yaml.safe_dump([{"name": "Site", "hosts": "all", "gather_facts": False, "roles": [{"role": "own"}]}])
    )
    meta = tmp_path / "roles" / "own" / "meta"
    meta.mkdir(parents=True)
    options = {"own_env": {"type": "dict"}, "own_count": {"type": "int"}, "own_label": {"type": "str"}}
    spec = {"argument_specs": {"main": {"options": options}}}
    (meta / "argument_specs.yml").write_text(yaml.safe_dump(spec))
    project = Project(tmp_path)
    check_role_vars(project, ["site.yml"], {"own_count": 3, "own_label": "blue"})  # scalars and words pass
    with pytest.raises(RoleVarRefused) as refused:
        check_role_vars(project, ["site.yml"], {"own_env": {"LD_PRELOAD": "/tmp/x.so"}})
    got = refused.value
    assert (got.name, got.rule, got.message) == ("own_env", "dict", NO_RULE_REASON)


# Values that look like their kind but are not, each refused by its kind's rule (flashfleet's own roles).
LOOKALIKES = [
    ("model_weights_hf_endpoint", "ftp://mirror.example.internal/hf", "url"),
    ("nvidia_driver_repo_url", "gopher://10.0.0.1/cuda", "url"),
    ("model_weights_revision", "main/../../etc", "name"),
    ("preflight_gpu_count", True, "int"),  # a bool is an int to Python, not to the role
]


@pytest.mark.parametrize(("name", "value", "rule"), LOOKALIKES, ids=[f"{n}-{r}" for n, _, r in LOOKALIKES])
def test_a_value_that_looks_like_its_kind_is_refused(name: str, value: Any, rule: str) -> None:
    with pytest.raises(RoleVarRefused) as refused:
        check_role_vars(DEFAULT_PROJECT, STACK_PLAYBOOKS, {name: value})
    assert (refused.value.name, refused.value.rule) == (name, rule)


@pytest.mark.parametrize("value", ["/mnt/nvme/../hf", "/data/../etc", "/srv/x/.."])
def test_a_directory_that_climbs_is_refused_saying_so(value: str) -> None:
    # not as a hidden name (`..` begins with a dot): the person is told what to take out
    with pytest.raises(ValueError, match=r"climbs with '\.\.'"):
        safe_values.host_path(value)
