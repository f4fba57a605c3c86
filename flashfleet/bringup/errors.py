"""Errors of the bring-up orchestration."""

from __future__ import annotations


class BringupInputError(ValueError):
    """The inventory, variables or playbook are wrong: refused before any host is touched.

    The message is one line that starts with the field it is about.
    """


class PlaybookFailed(RuntimeError):
    """The playbook ran and failed; the message is the run's failure summary."""


class NoInventory(Exception):
    """No inventory gives the stack's hosts: neither its outputs nor a recorded configure run,
    or no node 0 in it (one line)."""
