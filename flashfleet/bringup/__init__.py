"""Bring-up orchestration: runs the repository's playbooks against a stack's nodes.

`handoff` is the one entry point (validation, run directory, progress, timeline) used by the
Pulumi dynamic resource (`resource`), the CLI (`up`/`down`/`status`/`configure`) and the
benchmark's cluster (`flashfleet.bench.stack_cluster`). Nothing here imports pulumi at module level except
`resource` and `stackops`.
"""
