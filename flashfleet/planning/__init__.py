"""The planning layer: a stack spec resolved, checked and planned, offline.

Above the spec (``flashfleet.stack``), the recipe engine, launch, k8s and sizing; below the
components and the bring-up. ``load_stack`` is the one entry point. Pure: imports neither pulumi
nor boto3 nor ansible.
"""

from flashfleet.planning.resolve import (
    NodePlan,
    StackPlan,
    load_stack,
    parse_spec,
    resolve_spec,
)

__all__ = ["NodePlan", "StackPlan", "load_stack", "parse_spec", "resolve_spec"]
