"""`createNamespace: true` takes only a namespace that is not there yet, or the one this stack
created (its mark travels on the namespace): `down` deletes what the stack created, so a
namespace the user made, or another stack's, is refused before anything is applied."""

from __future__ import annotations

from typing import Any

import pytest
from k8s_cases import Case, objects_of, source

from flashfleet.k8s import namespace_owner
from flashfleet.k8s.namespace_owner import CREATED_BY, NamespaceRefused, check, refusal


def test_the_namespace_flashfleet_creates_carries_the_creating_stack() -> None:
    [ns] = objects_of(Case("gb300-lowlat", "gb300", "low-latency").plan(), "Namespace")
    assert ns["metadata"]["annotations"] == {CREATED_BY: "gb300-lowlat"}


def test_absent_or_its_own_namespace_is_taken() -> None:
    assert refusal("s", "glm", None) is None
    assert refusal("s", "glm", {"metadata": {"name": "glm", "annotations": {CREATED_BY: "s"}}}) is None


@pytest.mark.parametrize(
    ("found", "who"),
    [
        ({"metadata": {"name": "glm"}}, "flashfleet did not create it"),
        ({"metadata": {"name": "glm", "annotations": {"team": "ml"}}}, "flashfleet did not create it"),
        # the shared labels alone are no evidence: the provider's takeover set them too
        (
            {"metadata": {"name": "glm", "labels": {"app.kubernetes.io/managed-by": "flashfleet"}}},
            "flashfleet did not create it",
        ),
        (
            {"metadata": {"name": "glm", "annotations": {CREATED_BY: "other"}}},
            "stack other created it, not s",
        ),
    ],
)
def test_a_namespace_someone_else_made_is_refused_in_one_line(found: dict[str, Any], who: str) -> None:
    why = refusal("s", "glm", found)
    assert why is not None
    assert why.startswith("flashfleet:stack.nodes.source.namespace: namespace glm already exists and ")
    assert who in why
    assert "createNamespace: false" in why
    assert why.endswith("[rule: namespace-not-ours]")
    assert "\n" not in why


def test_the_check_reads_the_stack_s_context_and_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = []

    def existing(context: str | None, namespace: str) -> dict[str, Any]:
        asked.append((context, namespace))
        return {"metadata": {"name": namespace}}

    monkeypatch.setattr(namespace_owner, "read_namespace", existing)
    with pytest.raises(NamespaceRefused, match=r"namespace glm already exists and flashfleet did not"):
        check("s", source(context="c1"))
    assert asked == [("c1", "glm")]


def test_an_unreadable_namespace_is_no_evidence_either_way(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(context: str | None, namespace: str) -> None:
        raise PermissionError('namespaces "glm" is forbidden\nmore')

    monkeypatch.setattr(namespace_owner, "read_namespace", forbidden)
    with pytest.raises(NamespaceRefused) as info:
        check("s", source())
    assert str(info.value) == (
        "flashfleet:stack.nodes.source.namespace: namespace glm cannot be read (PermissionError: "
        'namespaces "glm" is forbidden); createNamespace: true needs to know whether it exists and '
        "who made it [rule: namespace-unreadable]"
    )


def test_a_namespace_the_stack_does_not_create_is_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    def read(context: str | None, namespace: str) -> None:
        raise AssertionError("read")

    monkeypatch.setattr(namespace_owner, "read_namespace", read)
    check("s", source(createNamespace=False))  # its owner keeps it; `down` never deletes it


def test_read_namespace_answers_none_for_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the kubernetes client as the provider's context would be read: 404 is 'absent'."""
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    class Core:
        def __init__(self, api: object) -> None:
            pass

        def read_namespace(self, name: str, **_: Any) -> Any:
            raise ApiException(status=404, reason="Not Found")

    monkeypatch.setattr(config, "new_client_from_config", lambda context=None: object())
    monkeypatch.setattr(client, "CoreV1Api", Core)
    assert namespace_owner.read_namespace("c1", "glm") is None

    class Forbidden(Core):
        def read_namespace(self, name: str, **_: Any) -> Any:
            raise ApiException(status=403, reason="Forbidden")

    monkeypatch.setattr(client, "CoreV1Api", Forbidden)
    with pytest.raises(ApiException):
        namespace_owner.read_namespace("c1", "glm")
