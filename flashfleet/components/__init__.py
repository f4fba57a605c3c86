"""Pulumi components, one per node source; ``program.deploy`` dispatches on ``nodes.source.kind``.

This package file imports nothing, so that ``components.tags`` (tag names, read by ``sweep`` too)
does not pull in pulumi. Import the components from their modules (``flashfleet.components.aws``,
``.existing``, ``.kubernetes``).
"""
