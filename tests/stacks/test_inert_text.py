"""Free text of a stack and its lock (flashfleet.stack.inert_text): a template marker or a
control character in any string is refused by `flashfleet validate` with exit 2 and one line
naming the YAML path, whichever field holds it; the finding's cases first (extra_args words, a
lock's revision and apt versions), then every string of a catalog stack and of a lock in turn."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from property_budget import budget

from flashfleet.cli import main
from flashfleet.stack.lock import (
    LockedDeb,
    LockedFile,
    LockedRepo,
    StackLock,
    dump_lock,
    lock_file_name,
)
from tests.stacks.conftest import catalog_doc

S = "flashfleet:stack"
PWN = "{{ lookup('pipe', 'touch PWNED') }}"
HOSTILE = [
    PWN,
    "{% if 1 %}x{% endif %}",
    "{# c #}",
    "a\nb",
    "a\rb",
    "tab\there",
    "nul\x00",
    "esc\x1b[31m",
    "nl\u2028",
]


def _write(folder: Path, name: str, doc: dict[str, Any]) -> None:
    (folder / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump(doc, allow_unicode=True))


def _lock(stack: str, **repo: Any) -> StackLock:
    entry = {
        "revision": "main",
        "commit": "c" * 40,
        "files": {"config.json": LockedFile(size=2, git_oid="d" * 40)},
    }
    return StackLock(
        stack=stack,
        locked_on="2026-12-01",
        weights={"zai-org/GLM-5.3-Flash": LockedRepo(**{**entry, **repo})},
    )


def _validate(folder: Path, name: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    rc = main(["validate", name, "--stacks-dir", str(folder)])
    out = capsys.readouterr()
    return rc, out.out + out.err


@pytest.mark.parametrize("value", HOSTILE)
def test_extra_args_word_with_a_template_or_a_control_character_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    doc = catalog_doc("h200-lowlat")
    doc["config"][S]["options"] = {"extra_args": ["--served-model-name", value]}
    _write(tmp_path, "hostile", doc)
    rc, out = _validate(tmp_path, "hostile", capsys)
    assert rc == 2, out
    assert f"{S}.options.extra_args[1]" in out
    assert "Traceback" not in out
    assert "lookup(" not in out  # the refused text is never echoed as it is


def test_a_clean_extra_args_word_still_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = catalog_doc("h200-lowlat")
    doc["config"][S]["options"] = {"extra_args": ["--served-model-name", "glm {x} 100%"]}
    _write(tmp_path, "clean", doc)
    rc, out = _validate(tmp_path, "clean", capsys)
    assert rc == 0, out


def _lock_text(lock: StackLock, tamper: Any = None) -> str:
    data = yaml.safe_load(dump_lock(lock))
    if tamper is not None:
        tamper(data)
    return yaml.safe_dump(data, allow_unicode=True)


@pytest.mark.parametrize("value", HOSTILE)
def test_a_lock_revision_with_a_template_is_refused_at_validate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    _write(tmp_path, "locked", catalog_doc("h200-lowlat"))
    text = _lock_text(_lock("locked"), lambda d: d["weights"]["zai-org/GLM-5.3-Flash"].update(revision=value))
    (tmp_path / lock_file_name("locked")).write_text(text)
    rc, out = _validate(tmp_path, "locked", capsys)
    assert rc == 2, out
    assert "weights.zai-org/GLM-5.3-Flash.revision" in out
    assert "Traceback" not in out


def test_a_lock_apt_version_with_a_template_is_refused_at_validate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(tmp_path, "locked", catalog_doc("h200-lowlat"))
    lock = _lock("locked").model_copy(
        update={"apt": {"repo/dir": {"docker-ce": LockedDeb(version="5:29.1.3", sha256="a" * 64, size=1)}}}
    )
    text = _lock_text(lock, lambda d: d["apt"]["repo/dir"]["docker-ce"].update(version=PWN))
    (tmp_path / lock_file_name("locked")).write_text(text)
    rc, out = _validate(tmp_path, "locked", capsys)
    assert rc == 2, out
    assert "apt.repo/dir.docker-ce.version" in out


def test_a_lock_made_from_a_hub_answer_with_a_template_is_refused() -> None:
    """`flashfleet lock` builds the lock from what the Hub answered: a hostile answer never
    becomes a lock file."""
    with pytest.raises(
        ValueError, match=r"weights\.zai-org/GLM-5\.3-Flash\.revision: holds a template marker"
    ):
        _lock("x", revision=PWN)


def _string_paths(node: Any, at: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _string_paths(value, (*at, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _string_paths(value, (*at, i))
    elif isinstance(node, str):
        yield at


def _set(doc: Any, at: tuple[str | int, ...], value: Any) -> None:
    for part in at[:-1]:
        doc = doc[part]
    doc[at[-1]] = value


def _yaml_path(at: tuple[str | int, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in at).lstrip(".")


@pytest.mark.parametrize("base", ["mi355x-lowlat", "h200-l3", "mi355x-k8s", "gb300-pd"])
def test_every_string_of_a_catalog_stack_refuses_a_template(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], base: str
) -> None:
    doc = catalog_doc(base)
    paths = list(_string_paths(doc["config"][S]))
    assert paths
    for at in paths:
        hostile = copy.deepcopy(doc)
        _set(hostile["config"][S], at, f"x{PWN}")
        _write(tmp_path, "hostile", hostile)
        rc, out = _validate(tmp_path, "hostile", capsys)
        assert rc == 2, (at, out)
        # named by its path, or by the enclosing mapping whose own rule refuses it (a source's kind)
        named = [f"{S}.{_yaml_path(at[:n])}:" for n in range(len(at), 0, -1)]
        assert any(n in out for n in named), (at, out)


def test_every_string_of_a_lock_refuses_a_control_character(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(tmp_path, "locked", catalog_doc("h200-lowlat"))
    lock = _lock("locked").model_copy(
        update={"apt": {"repo/dir": {"docker-ce": LockedDeb(version="5:29.1.3", sha256="a" * 64, size=1)}}}
    )
    clean = yaml.safe_load(dump_lock(lock))
    for at in _string_paths(clean):
        data = copy.deepcopy(clean)
        _set(data, at, "x\x1by")
        (tmp_path / lock_file_name("locked")).write_text(yaml.safe_dump(data))
        rc, out = _validate(tmp_path, "locked", capsys)
        assert rc == 2, (at, out)
        assert f"{_yaml_path(at)}: holds a control" in out, (at, out)


@pytest.mark.parametrize(
    "name", ["/etc/ssh/sshd_config", "../../../../x", "a/../../b", "a//b", "./x", "a/./b", "a\\b", "", "a/"]
)
def test_a_lock_file_name_outside_the_repository_shape_is_refused_at_validate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    _write(tmp_path, "locked", catalog_doc("h200-lowlat"))
    files = {"config.json": {"size": 2, "git_oid": "d" * 40}, name: {"size": 2, "git_oid": "d" * 40}}
    text = _lock_text(_lock("locked"), lambda d: d["weights"]["zai-org/GLM-5.3-Flash"].update(files=files))
    (tmp_path / lock_file_name("locked")).write_text(text)
    rc, out = _validate(tmp_path, "locked", capsys)
    assert rc == 2, out
    assert "weights.zai-org/GLM-5.3-Flash.files" in out, out
    assert "is not a repository file name" in out, out
    assert len(out.strip().splitlines()) == 1, out


# --- property: every free string is refused, or reaches the inventory whole and marked unsafe ---

_JINJA_BITS = st.sampled_from(
    ["{{", "}}", "{%", "%}", "{#", "#}", "{", "}", "lookup('pipe', 'id')", "\n", "\t", "\x00", "\x1b",
     "\u2028", " ", "$", "%", "'", '"', "\\", "a", "-", "é"]
)  # fmt: skip
FREE_TEXT = st.one_of(st.text(max_size=30), st.lists(_JINJA_BITS, min_size=1, max_size=8).map("".join))


def _unsafe_strings(text: str) -> list[Any]:
    """Every scalar of an inert_yaml document, each as ("unsafe", s) when tagged."""

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!unsafe", lambda loader, node: ("unsafe", loader.construct_scalar(node)))
    out: list[Any] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                out.append(k)
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
        else:
            out.append(node)

    walk(yaml.load(text, Loader=Loader))
    return out


@settings(max_examples=budget(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(FREE_TEXT)
@example(PWN)
@example("{{ lookup('env', 'AWS_SECRET_ACCESS_KEY') }}")
def test_an_extra_args_word_is_refused_or_reaches_the_inventory_whole_and_unsafe(
    tmp_path_factory: pytest.TempPathFactory, value: str
) -> None:
    from flashfleet.bringup.inert_vars import inert_yaml
    from flashfleet.inventory import build_inventory
    from flashfleet.planning import load_stack
    from flashfleet.stack import StackError

    folder = tmp_path_factory.mktemp("prop")
    doc = catalog_doc("h200-lowlat")
    doc["config"][S]["options"] = {"extra_args": ["--served-model-name", value]}
    _write(folder, "prop", doc)
    problems: tuple[Any, ...] = ()
    try:
        plan = load_stack("prop", folder)
    except StackError as err:
        problems = err.problems
    hostile = any(t in value for t in ("{{", "{%", "{#")) or not value.isprintable()
    if hostile:  # refused, named, by the free-text rule
        assert [(p.path, p.rule) for p in problems] == [(f"{S}.options.extra_args[1]", "inert-text")], (
            problems
        )
        return
    if problems:  # refused by the recipe's own rules (a word that reads as a flag...), named
        assert all(p.path.startswith(f"{S}.options") and p.rule != "inert-text" for p in problems), problems
        return
    inventory = build_inventory(plan, ["10.0.0.1"], ["10.0.0.1"])
    scalars = _unsafe_strings(inert_yaml(inventory))
    # untagged: only what YAML reads as a number, a boolean, null or a date, quoted (no template)
    untagged = [s for s in scalars if isinstance(s, str)]
    assert all("{" not in s for s in untagged), untagged
    assert ("unsafe", value) in scalars or value in untagged  # one whole argv word


@pytest.mark.parametrize(
    "argv", [["--ssl-keyfile-password", "hunter2hunter2"], ["--ssl-keyfile-password=hunter2hunter2"]]
)
def test_a_tls_key_password_in_extra_args_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    doc = catalog_doc("h200-lowlat")
    doc["config"][S]["options"] = {"extra_args": argv}
    _write(tmp_path, "secret", doc)
    rc, out = _validate(tmp_path, "secret", capsys)
    assert rc == 2, out
    assert "--ssl-keyfile-password would put a secret on the command line" in out
    assert len(out.strip().splitlines()) == 1, out


@pytest.mark.parametrize(
    ("flag", "said"),
    [
        ("--trust-remote-code", "the servers run Python code from the model repository"),
        ("--enable-custom-logit-processor", "every client may send a logit processor"),
    ],
)
def test_plan_says_aloud_a_flag_that_runs_code(tmp_path: Path, flag: str, said: str) -> None:
    from flashfleet.planning import load_stack

    doc = catalog_doc("mi355x-k8s")  # Kubernetes: an endpoint without an API key
    doc["config"][S]["options"] = {"extra_args": [flag]}
    _write(tmp_path, "code", doc)
    [warning] = [w for w in load_stack("code", tmp_path).warnings if flag in w]
    assert said in warning
    if flag == "--enable-custom-logit-processor":
        assert "no API key" in warning


@pytest.mark.parametrize(
    ("base", "router"), [("h200-replicas", "the cluster's router"), ("gb300-pd", "the PD router")]
)
def test_an_api_key_on_a_routed_stack_names_its_router(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], base: str, router: str
) -> None:
    doc = catalog_doc(base)
    doc["config"][S]["serving"] = {"apiKey": "required"}
    doc["config"]["flashfleet:apiKey"] = {"secure": "v1:AAAA"}
    _write(tmp_path, "keyed", doc)
    rc, out = _validate(tmp_path, "keyed", capsys)
    assert rc == 2, out
    assert f"{S}.serving.apiKey: {router} serves the API here" in out
