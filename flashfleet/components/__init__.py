"""Pulumi components, one per node source; ``program.deploy`` dispatches on ``nodes.source.kind``.

This package file imports nothing: the stack spec imports ``components.kubernetes_spec`` (a pure
pydantic model), and that must not pull in pulumi, pulumi_aws or the stack package itself
(``flashfleet plan`` and ``validate`` stay offline and fast, and there is no import cycle).
Import the components from their modules (``flashfleet.components.aws``, ``.existing``,
``.kubernetes``).
"""
