"""Errors of the bring-up orchestration."""

from __future__ import annotations


class BringupInputError(ValueError):
    """The inventory, variables or playbook are wrong: refused before any host is touched.

    The message is one line that starts with the field it is about.
    """


class PlaybookFailed(RuntimeError):
    """The playbook ran and failed; the message is the run's failure summary."""
