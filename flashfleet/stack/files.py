"""Stack files: ``stacks/Pulumi.<stack>.yaml`` (Pulumi's ``stackConfigDir: stacks``).

Reads the YAML without Pulumi (validation and ``plan`` run offline). The file's ``config`` may
hold ``aws:*`` provider keys, ``flashfleet:stack`` (the spec), ``flashfleet:hfToken`` and
``flashfleet:apiKey`` (the serving API key), which must be Pulumi secrets (``secure:``): a value in
plain text is refused, never read; and ``flashfleet:roleVars``, role arguments for every bring-up
run (an air-gapped site's mirrors), a mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from flashfleet.stack.errors import STACK_KEY, Problem, StackError
from flashfleet.stack.lock import LockError, StackLock, lock_path, read_lock
from flashfleet.stack.stack_names import stack_name_problem
from flashfleet.stack.yamlfile import YamlFileError, load_yaml_file

PROJECT = "flashfleet"
HF_TOKEN_KEY = f"{PROJECT}:hfToken"
API_KEY_KEY = f"{PROJECT}:apiKey"
ROLE_VARS_KEY = f"{PROJECT}:roleVars"
REGION_KEY = "aws:region"
_KNOWN_PROJECT_KEYS = {STACK_KEY, HF_TOKEN_KEY, API_KEY_KEY}
_SECRET_KEYS = (HF_TOKEN_KEY, API_KEY_KEY)
DEFAULT_STACKS_DIR = Path(__file__).resolve().parents[2] / "stacks"


@dataclass(frozen=True)
class StackFile:
    name: str
    path: Path
    spec_data: Any  # raw mapping under flashfleet:stack
    region: str | None
    has_hf_token: bool
    has_api_key: bool = False
    lock: StackLock | None = None  # <stack>.lock.yaml beside the file (flashfleet.stack.lock)


def stack_path(name: str, stacks_dir: Path = DEFAULT_STACKS_DIR) -> Path:
    # Pulumi writes `org/name` stacks as `org-name` file names.
    return stacks_dir / f"Pulumi.{name.replace('/', '-')}.yaml"


def list_stacks(stacks_dir: Path = DEFAULT_STACKS_DIR) -> list[str]:
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in stacks_dir.glob("Pulumi.*.yaml"))


def read_stack_file(name: str, stacks_dir: Path = DEFAULT_STACKS_DIR) -> StackFile:
    path = stack_path(name, stacks_dir)
    if problem := stack_name_problem(name):
        raise StackError(name, [Problem(path.name, problem, "stack-name")])
    if not (path.exists() or path.is_symlink()):  # a FIFO or a link to nothing: refused when read
        known = ", ".join(list_stacks(stacks_dir)) or "none"
        raise StackError(name, [Problem(str(path.name), f"no such stack (known: {known})", "unknown-stack")])
    try:
        doc = load_yaml_file(path)
    except YamlFileError as err:
        raise StackError(name, [Problem(path.name, str(err), "yaml")]) from None
    sf = _parse_config(name, path, doc)
    return replace(sf, lock=read_stack_lock(name, stacks_dir))


def read_stack_lock(name: str, stacks_dir: Path = DEFAULT_STACKS_DIR) -> StackLock | None:
    """The stack's lock, None without one: one that is there but unusable is refused (StackError),
    never taken for none."""
    at = lock_path(stack_path(name, stacks_dir), name)
    try:
        lock = read_lock(at)
    except LockError as err:
        raise StackError(name, [Problem(at.name, str(err), "lock")]) from None
    if lock is not None and lock.stack != name:
        problem = Problem(f"{at.name}: stack", f"locks stack {lock.stack}, not {name}", "lock")
        raise StackError(name, [problem])
    return lock


def stack_file_from_config(
    name: str, stacks_dir: Path, config: Mapping[str, Any], *, has_hf_token: bool, has_api_key: bool
) -> StackFile:
    """The stack as the Pulumi program reads its config (secrets already decrypted, so only
    whether each is there), with the lock beside its file: the same rules as a file's."""
    problems = _config_problems(config)
    if problems:
        raise StackError(name, problems)
    sf = _from_config(name, stack_path(name, stacks_dir), config, has_hf_token, has_api_key)
    return replace(sf, lock=read_stack_lock(name, stacks_dir))


def _config_problems(config: Mapping[str, Any]) -> list[Problem]:
    problems: list[Problem] = []
    for key in config:
        if key == ROLE_VARS_KEY:  # the free-form map a stack once passed to the roles
            problems.append(
                Problem(
                    key,
                    "no longer read: what a stack sets for the roles is flashfleet:stack.site "
                    "(mirrors, package indexes, the Hub, registry mirrors; docs/security.md, "
                    '"Moving from roleVars")',
                    "moved",
                )
            )
        elif key.startswith(f"{PROJECT}:") and key not in _KNOWN_PROJECT_KEYS:
            problems.append(
                Problem(
                    key,
                    f"unknown config key (known: {', '.join(sorted(_KNOWN_PROJECT_KEYS))})",
                    "extra_forbidden",
                )
            )
    if STACK_KEY not in config:
        problems.append(Problem(STACK_KEY, "missing: the stack spec", "missing"))
    region = config.get(REGION_KEY)
    if region is not None and not isinstance(region, str):
        problems.append(Problem(REGION_KEY, "must be a region name such as us-east-2", "type"))
    return problems


def _parse_config(name: str, path: Path, doc: Any) -> StackFile:
    if not isinstance(doc, dict) or not isinstance(doc.get("config"), dict):
        raise StackError(name, [Problem(path.name, "expected a top-level `config:` mapping", "shape")])
    config: dict[str, Any] = doc["config"]
    problems = _config_problems(config)
    for key in _SECRET_KEYS:  # in the file, a secret is Pulumi's encrypted form only
        value = config.get(key)
        if value is not None and not (isinstance(value, dict) and set(value) == {"secure"}):
            problems.append(
                Problem(
                    key, f"must be a Pulumi secret: set it with `pulumi config set --secret {key}`", "secret"
                )
            )
    if problems:
        raise StackError(name, problems)
    return _from_config(
        name, path, config, config.get(HF_TOKEN_KEY) is not None, config.get(API_KEY_KEY) is not None
    )


def _from_config(
    name: str, path: Path, config: Mapping[str, Any], has_hf_token: bool, has_api_key: bool
) -> StackFile:
    """A config whose problems are already refused, as a StackFile (no lock yet)."""
    return StackFile(
        name,
        path,
        config[STACK_KEY],
        config.get(REGION_KEY),
        has_hf_token,
        has_api_key,
    )
