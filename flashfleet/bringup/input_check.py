"""The bring-up's input check: everything refused before a host is touched (the inventory
contract, the role arguments under the roles' own argument specs, secrets where they must not
be). Light to import: no ansible-runner, so the offline admission (flashfleet.admission) runs the
same check as the bring-up resource's provider without loading the runner.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flashfleet.bringup.arguments import check_role_arguments
from flashfleet.bringup.contract import check_inventory
from flashfleet.bringup.errors import BringupInputError
from flashfleet.bringup.project import Project
from flashfleet.bringup.redaction import Redactor
from flashfleet.bringup.secret_env import API_KEY_ENV, TOKEN_ENV, check_env_secrets, check_secret


def validate(
    project: Project,
    playbook: str,
    inventory: Mapping[str, Any],
    extravars: Mapping[str, Any],
    *,
    stack: str | None = None,
    hf_token: str | None = None,
    api_key: str | None = None,
) -> list[str]:
    """Everything that can be refused before a host is touched; raises BringupInputError.
    Returns the inventory's host names."""
    try:
        project.playbook(playbook)
    except FileNotFoundError as err:
        raise BringupInputError(f"playbook: {err}") from None
    hosts = check_inventory(inventory, stack)
    for name, what, secret in ((TOKEN_ENV, "HF token", hf_token), (API_KEY_ENV, "API key", api_key)):
        check_secret(name, secret)
        if secret and Redactor.of([secret]).finds([inventory, extravars]):  # in any form
            raise BringupInputError(
                f"inventory/extravars: contain the {what}; it travels only in the environment"
            )
    check_env_secrets()
    check_role_arguments(project, playbook, inventory, extravars)
    return hosts
