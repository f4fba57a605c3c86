"""Role arguments an operator may set with `flashfleet configure -e`, and the guard of the extra
variables the bring-up resource is handed (a stack's site section, flashfleet.stack.site, which
the spec already checked: the provider checks them again because Pulumi's state can be edited).

Extra variables win over everything in Ansible (inventory, play and role vars), so a value set
here replaces what the spec decided. Hence the rules, decided once, here:

- the name is a documented argument (`meta/argument_specs.yml`) of a role the playbooks run,
  never a connection, `ansible_*`, `flashfleet_*` (inventory fact) or other variable;
- names that carry secrets, name where secrets are read from, or are computed by flashfleet
  from the spec (the converge record, the launches, the cache removal) are refused always;
- every other argument has a kind: a host directory passes `safe_values.host_path`, an address
  `host_address`, a user `posix_user`, an image `pinned_image`, a URL is http(s) without a user
  or password (they sit in plain text in the stack file and the state), a port is 1-65535;
- every string is one printable line without a template marker, so it reaches the run inert.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from flashfleet.bringup.errors import BringupInputError
from flashfleet.bringup.project import Project
from flashfleet.stack import safe_values as sv
from flashfleet.stack.safe_values import executable, host_port, port, url, url_or_path, version

# The playbooks a stack's site section reaches: the bring-up inside `pulumi up`, the teardown on destroy.
STACK_PLAYBOOKS = ("site.yml", "teardown.yml")
EXTRAVARS_PREFIX = "extravars."
OPTION_PREFIX = "-e "

Kind = Callable[[Any], Any]  # returns the value or raises ValueError with the rule's words


class RoleVarRefused(BringupInputError):
    """One refused role argument: ``<where><name>: <why> [rule: <rule>]``, one line."""

    def __init__(self, where: str, name: str, message: str, rule: str) -> None:
        self.where, self.name, self.rule, self.message = where, name, rule, message
        super().__init__(f"{where}{name}: {message} [rule: {rule}]")


# --- kinds -----------------------------------------------------------------------------------------

_WORD = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._+~:/@=-]{0,255}$")
_DEB_PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.-]{0,127}$")
_HF_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
_REQUIREMENT = re.compile(
    r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?([=<>!~]=?[A-Za-z0-9.*+!_-]+,?)*$"
)
_DEVICE_PATH = re.compile(r"^/dev(/[A-Za-z0-9._-]+)+$")


def word(value: Any) -> str:
    if not isinstance(value, str) or not _WORD.fullmatch(value) or "/.." in value or value.startswith(".."):
        raise ValueError(
            f"{value!r}: must be one word of letters, digits and . _ + ~ : / @ = - (not an option)"
        )
    return value


def device_path(value: Any) -> str:
    if not isinstance(value, str) or not _DEVICE_PATH.fullmatch(value) or "/.." in value:
        raise ValueError(f"{value!r}: must be a device under /dev (such as /dev/kfd)")
    return value


def _pattern(regex: re.Pattern[str], what: str) -> Kind:
    def check(value: Any) -> Any:
        if not isinstance(value, str) or not regex.fullmatch(value):
            raise ValueError(f"{value!r}: must be {what}")
        return value

    return check


def text(value: Any) -> str:
    if not isinstance(value, str) or value.startswith("-"):
        raise ValueError(f"{value!r}: must be text that does not start with '-' (not an option)")
    return sv.plain_text(value)


def optional(kind: Kind) -> Kind:
    """The kind, or "" where the role reads empty as "none" (the default index, no mirror)."""
    return lambda value: value if value == "" else kind(value)


def list_of(kind: Kind) -> Kind:
    def check(value: Any) -> list[Any]:
        if not isinstance(value, list):
            raise ValueError("must be a list")
        return [kind(v) for v in value]

    return check


def _docker_options(value: Any) -> dict[str, Any]:
    """Settings merged into daemon.json: only mirrors and limits. `hosts`, TLS, authorization
    plugins or `data-root` would open the engine's socket or move its state: never from a stack."""
    if not isinstance(value, dict):
        raise ValueError("must be a mapping of daemon.json settings")
    for key, item in value.items():
        check = _DOCKER_OPTIONS.get(key)
        if check is None:
            raise ValueError(
                f"{key!r} is not a daemon.json setting a stack may set ({', '.join(_DOCKER_OPTIONS)})"
            )
        check(item)
    return value


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= 64:
        raise ValueError(f"{value!r}: must be a whole number 1-64")
    return value


_DOCKER_OPTIONS: dict[str, Kind] = {
    "registry-mirrors": list_of(url),
    "insecure-registries": list_of(host_port),
    "max-concurrent-downloads": _count,
    "max-concurrent-uploads": _count,
}


# --- the arguments -----------------------------------------------------------------------------

SECRET = "secret-handling"
OWNED = "flashfleet-owned"
# Never from -e (nor the bring-up's extra variables), with why. Secret handling: these name the
# token's file on the node
# (deleted when the job ends), the secret files teardown deletes, and the controller environment
# variables secrets are read from (pointing one at AWS_SECRET_ACCESS_KEY would ship that).
_PACKAGES_LOCK = "the packages' lock is the stack's <stack>.lock.yaml, written by `flashfleet lock`"
REFUSED: dict[str, tuple[str, str]] = {
    "model_weights_token_file": (
        SECRET,
        "the token's root-only file is flashfleet's; the teardown deletes it",
    ),
    "sglang_serve_secret_sources": (
        SECRET,
        "which controller variables become container secrets is flashfleet's",
    ),
    "sglang_serve_api_key_env": (SECRET, "the API key is read from FLASHFLEET_API_KEY only"),
    "verify_api_key_env": (SECRET, "the API key is read from FLASHFLEET_API_KEY only"),
    "bench_api_key_env": (SECRET, "the API key is read from FLASHFLEET_API_KEY only"),
    "sglang_serve_env_files_to_remove": (SECRET, "the secret files teardown deletes are the launches' own"),
    "bench_env": (
        SECRET,
        "container environment may hold credentials; secrets travel in the environment only",
    ),
    "sglang_serve_launches": (OWNED, "the launches are the stack's recipe, checked with the spec"),
    "sglang_serve_pd_heal": (OWNED, "which prefills a decode node watches follows from the stack's recipe"),
    "sglang_image_derived": (OWNED, "the derived image is named by flashfleet from the spec"),
    "sglang_image_pins": (
        OWNED,
        "what the image holds follows its release's own requirements; a stack pins one in image.packages",
    ),
    "sglang_image_video": (OWNED, "whether torchcodec loads follows the image's torch (image.packages)"),
    "mooncake_config_path": (
        OWNED,
        "the recipe's environment names the store config; it sits in /etc/flashfleet",
    ),
    "model_weights_lock": (
        OWNED,
        "the weights lock is the stack's <stack>.lock.yaml, written by `flashfleet lock`",
    ),
    "model_weights_exclude": (
        OWNED,
        "which files a node leaves on the Hub follows the recipe's peer_load (options.peer_load)",
    ),
    "model_weights_fanout": (
        OWNED,
        "which node asks the Hub and which fetch from it is flashfleet's plan (the first GPU node seeds)",
    ),
    "model_weights_hub_lock": (OWNED, _PACKAGES_LOCK),
    "sglang_image_lock": (OWNED, _PACKAGES_LOCK),
    "sglang_image_apt_lock": (OWNED, _PACKAGES_LOCK),
    "mooncake_lock": (OWNED, _PACKAGES_LOCK),
    "nvidia_driver_apt_lock": (OWNED, _PACKAGES_LOCK),
    "container_runtime_apt_lock": (OWNED, _PACKAGES_LOCK),
    "rocm_driver_apt_lock": (OWNED, _PACKAGES_LOCK),
    "node_facts_weights_markers": (OWNED, "the markers are model_weights' own, in the stack's cache"),
    "model_weights_remove_cache": (
        OWNED,
        "whether teardown deletes the cache is the spec's teardown.keepCaches",
    ),
    "converge_part": (OWNED, "which part of a role a play runs is the playbooks' own"),
    "converge_state_file": (
        OWNED,
        "the converge record is flashfleet's; a full converge is `flashfleet configure --reconverge`",
    ),
}

# The kind of every str, path, list or dict argument; bool, int, float and choices are checked by
# their spec type alone. tests/bringup/test_role_vars.py proves every documented argument is here.
KINDS: dict[str, tuple[str, Kind]] = {
    # host directories: created, chmodded, mounted and (on teardown) deleted
    "model_weights_cache_dir": ("host-path", sv.host_path),
    "model_weights_venv": ("host-path", sv.host_path),
    "mooncake_install_dir": ("host-path", sv.host_path),
    "preflight_data_dir": ("host-path", sv.host_path),
    "sglang_image_build_dir": ("host-path", sv.host_path),
    "bench_work_root": ("host-path", sv.host_path),
    "bench_fetch_dir": ("host-path", optional(sv.host_path)),
    "mooncake_wheels_dir": ("host-path", optional(sv.host_path)),
    # programs and devices
    "bench_docker": ("program", executable),
    "node_facts_docker": ("program", executable),
    "sglang_serve_docker": ("program", executable),
    "container_runtime_amd_devices": ("device", list_of(device_path)),
    # URLs (mirrors) and hosts
    "container_runtime_docker_repo_url": ("url", url),
    "container_runtime_nvidia_repo_url": ("url", url),
    "nvidia_driver_repo_url": ("url", url),
    "rocm_driver_amdgpu_repo_url": ("url", url),
    "rocm_driver_rocm_repo_url": ("url", url),
    "rocm_driver_repo_key_url": ("url", url),
    "model_weights_hf_endpoint": ("url", url),
    "model_weights_pip_index_url": ("url", optional(url)),
    "sglang_image_pip_index_url": ("url", optional(url)),
    "sglang_image_apt_archive": ("url", optional(url)),
    "model_weights_pip_find_links": ("url-or-path", optional(url_or_path)),
    "sglang_image_pip_find_links": ("url-or-path", optional(url_or_path)),
    "model_weights_pip_trusted_host": ("address", optional(host_port)),
    "sglang_image_pip_trusted_host": ("address", optional(host_port)),
    "mooncake_metadata_server": ("url", optional(url)),
    "verify_api_url": ("url", optional(url)),
    "verify_mooncake_metrics_url": ("url", optional(url)),
    "mooncake_master_address": ("address", optional(host_port)),
    "mooncake_local_hostname": ("address", optional(sv.host_address)),
    "nvidia_driver_imex_nodes": ("address", list_of(sv.host_address)),
    "verify_mooncake_members": ("address", list_of(host_port)),
    # users, ports, devices
    "rocm_driver_users": ("user", list_of(sv.posix_user)),
    "mooncake_rpc_port": ("port", port),
    "mooncake_metadata_port": ("port", port),
    "mooncake_metrics_port": ("port", port),
    "mooncake_devices": ("device", list_of(sv.device_name)),
    # images
    "bench_image": ("image", optional(sv.pinned_image)),
    "node_facts_image": ("image", optional(sv.pinned_image)),
    "sglang_image_base": ("image", optional(sv.pinned_image)),
    # versions, names and words
    "container_runtime_docker_version": ("version", version),
    "container_runtime_nvidia_toolkit_version": ("version", version),
    "model_weights_hub_version": ("version", version),
    "nvidia_driver_branch": ("version", version),
    "nvidia_driver_version": ("version", version),
    "rocm_driver_amdgpu_version": ("version", version),
    "rocm_driver_rocm_version": ("version", version),
    "sglang_image_release": ("version", optional(version)),
    "sglang_image_min_version": ("version", version),
    "sglang_image_refused_transformers": ("version", list_of(version)),
    "model_weights_repos": (
        "name",
        list_of(_pattern(_HF_REPO, "a Hugging Face repository such as zai-org/GLM-5")),
    ),
    "model_weights_revision": ("name", word),
    "mooncake_pip_package": (
        "name",
        optional(_pattern(_REQUIREMENT, "a pip requirement such as pkg==1.2.3")),
    ),
    "mooncake_system_packages": ("name", list_of(_pattern(_DEB_PACKAGE, "a Debian package name"))),
    "node_facts_packages": ("name", list_of(word)),
    "node_facts_python": ("name", word),
    "nvidia_driver_repo_key": ("name", word),
    "sglang_serve_runtime_unit": ("name", optional(word)),
    "bench_output_name": ("name", word),
    "bench_argv": ("text", list_of(text)),
    "nvidia_driver_gpu_model": ("text", optional(text)),
    "preflight_gpu_model": ("text", optional(text)),
    "rocm_driver_gpu_model": ("text", optional(text)),
    "container_runtime_daemon_options": ("docker-options", _docker_options),
}

_SCALARS: dict[str, tuple[type, ...]] = {"bool": (bool,), "int": (int,), "float": (int, float)}


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _inert(value: Any) -> None:
    """Every string of the value: one printable line that Ansible will not template, no credentials."""
    for s in _strings(value):
        if not s.isprintable():
            raise ValueError("must be one line of printable text", "one-line")
        if any(mark in s for mark in ("{{", "{%", "{#")):
            raise ValueError(
                "holds a template marker; Ansible would evaluate it on the controller", "template"
            )
        if "://" in s and "@" in urlsplit(s).netloc:
            raise ValueError(
                "holds a URL with a user or password; it would be stored in plain text in the stack "
                "file and the state (use a mirror that needs none)",
                "credentials",
            )


def _typed(option: Mapping[str, Any], value: Any) -> None:
    kind = str(option.get("type") or "str")
    allowed = _SCALARS.get(kind)
    if allowed is not None and (
        isinstance(value, bool) != (kind == "bool") or not isinstance(value, allowed)
    ):
        raise ValueError(f"{value!r}: must be of type {kind}")
    choices = option.get("choices")
    if choices is not None and value not in choices:
        raise ValueError(f"{value!r}: must be one of {', '.join(map(str, choices))}")


def _by_type(option: Mapping[str, Any]) -> tuple[str, Kind | None]:
    """An argument KINDS does not list (another project's roles): scalars by type, a string or a
    list of strings as words; a path, a mapping or anything else has no rule, so it is refused."""
    kind, elements = str(option.get("type") or "str"), option.get("elements")
    if kind in _SCALARS or option.get("choices") is not None:
        return kind, None
    if kind == "str":
        return "name", word
    if kind == "list" and elements in (None, "str"):
        return "name", list_of(word)
    return kind, _no_rule


def _no_rule(value: Any) -> Any:
    raise ValueError(
        "has no rule for what it may hold (roles/*/meta/argument_specs.yml), so it is not accepted"
    )


def documented_options(project: Project, playbooks: Iterable[str]) -> dict[str, Mapping[str, Any]]:
    """Every argument of every entry point of every role the playbooks run, by name."""
    from flashfleet.bringup.arguments import role_spec_entries
    from flashfleet.bringup.playbook_walk import role_uses

    out: dict[str, Mapping[str, Any]] = {}
    for playbook in playbooks:
        for use in role_uses(project, playbook):
            for options in role_spec_entries(project, use.role):
                for name, option in options.items():
                    out.setdefault(name, option or {})
    return out


def check_role_vars(
    project: Project, playbooks: Iterable[str], values: Mapping[str, Any], where: str = EXTRAVARS_PREFIX
) -> None:
    """Raises RoleVarRefused for the first value a person may not set; `where` prefixes the name."""
    if not values:
        return  # nothing to check: the roles' specs (~100 YAML files) are not read
    playbooks = tuple(playbooks)
    options = documented_options(project, playbooks)
    for key, value in values.items():
        name = str(key)
        if name.startswith("ansible_") or name.startswith("flashfleet_"):
            raise RoleVarRefused(
                where, name,
                "connection, ansible_* and flashfleet_* variables are the inventory's: the host-key "
                "pin, the SSH arguments and the spec's facts cannot be overridden",
                "connection",
            )  # fmt: skip
        if name in REFUSED:
            rule, why = REFUSED[name]
            raise RoleVarRefused(where, name, f"may not be set: {why}", rule)
        option = options.get(name)
        if option is None:
            raise RoleVarRefused(
                where, name,
                f"not a documented argument of a role {' or '.join(playbooks)} runs "
                "(roles/*/meta/argument_specs.yml)",
                "unknown-argument",
            )  # fmt: skip
        try:
            _inert(value)
        except ValueError as err:
            raise RoleVarRefused(where, name, str(err.args[0]), str(err.args[1])) from None
        rule, kind = KINDS.get(name) or _by_type(option)
        try:
            _typed(option, value)
            if kind is not None:
                kind(value)
        except ValueError as err:
            raise RoleVarRefused(where, name, str(err), rule) from None
