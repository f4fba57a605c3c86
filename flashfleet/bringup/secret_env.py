"""The controller environment variables that carry secrets to the roles (docs/security.md), and
the one rule every secret meets before any host is touched.

Named once here, light to import: the bring-up hand-off sets them for ansible-playbook, the roles
read them in `no_log` tasks, and `flashfleet bench` reads the API key from the same place.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from flashfleet.bringup.errors import BringupInputError
from flashfleet.bringup.redaction import EVENT_VOCABULARY, secret_forms, visible

TOKEN_ENV = "FLASHFLEET_HF_TOKEN"  # the Hugging Face token
API_KEY_ENV = "FLASHFLEET_API_KEY"  # the serving API key (serving.apiKey: required)

# Shorter than this (not counting whitespace), a secret is too easy to find by chance in a run's
# output to hide it there, and too weak to guess. An HF token is `hf_` and 34 more characters.
MIN_SECRET_CHARS = 16


def secret_problem(value: str | None) -> tuple[str, str] | None:
    """(why, rule) for a secret the run events cannot be redacted of safely, or None. Never quotes
    the value. None or empty: no secret, nothing to check."""
    if not value:
        return None
    if any(visible(form) in word for form in secret_forms(value) for word in EVENT_VOCABULARY):
        return (
            "the secret is one of Ansible's own event words (an event name, a result key, a "
            "JSON or YAML literal), or part of one: hiding it would rewrite the run's events; use a "
            "long random value",
            "secret-not-event-word",
        )
    if len(visible(value)) < MIN_SECRET_CHARS:
        return (
            f"the secret has fewer than {MIN_SECRET_CHARS} characters (not counting "
            "whitespace): too short to hide from the run's output safely; use a long random value",
            "secret-min-length",
        )
    return None


def check_secret(name: str, value: str | None) -> None:
    """Refuses (BringupInputError, one line naming `name` and the rule) what `secret_problem` finds."""
    if problem := secret_problem(value):
        why, rule = problem
        raise BringupInputError(f"{name}: {why} [rule: {rule}]")


def check_env_secrets(environ: Mapping[str, str] = os.environ) -> None:
    """The caller's own FLASHFLEET_HF_TOKEN and FLASHFLEET_API_KEY: every run inherits them."""
    for name in (TOKEN_ENV, API_KEY_ENV):
        check_secret(name, environ.get(name))
