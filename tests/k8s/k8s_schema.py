"""Offline validation against the Kubernetes OpenAPI schema (kubernetes-validate's bundled JSON
schemas, strict: unknown fields are errors).

The LeaderWorkerSet is a CRD whose schema no Kubernetes release carries: its leader and worker
templates are validated as core ``PodTemplateSpec``s, and the rest of the object (a handful of
scalar fields) by the tests themselves.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

import jsonschema
import kubernetes_validate
from referencing import Registry, Resource

KUBERNETES = "1.37"
_SCHEMAS = f"kubernetes-json-schema/v{KUBERNETES}.0-local-strict"


def validate(manifest: dict[str, Any]) -> None:
    """Raise ``jsonschema.ValidationError`` unless the manifest is valid for the release."""
    if manifest["kind"] == "LeaderWorkerSet":
        lwt = manifest["spec"]["leaderWorkerTemplate"]
        validate_schema("podtemplatespec-v1", lwt["leaderTemplate"])
        validate_schema("podtemplatespec-v1", lwt["workerTemplate"])
        validate_schema("objectmeta-meta-v1", manifest["metadata"])
        return
    kubernetes_validate.validate(manifest, KUBERNETES, strict=True)


@cache
def _validator(schema: str) -> jsonschema.Draft202012Validator:
    root = resources.files("kubernetes_validate").joinpath(_SCHEMAS)
    definitions = json.loads(root.joinpath("_definitions.json").read_text())
    registry: Registry[Any] = Resource.from_contents(definitions) @ Registry()
    contents = json.loads(root.joinpath(f"{schema}.json").read_text())
    return jsonschema.Draft202012Validator(contents, registry=registry)


def validate_schema(schema: str, instance: dict[str, Any]) -> None:
    _validator(schema).validate(instance)
