"""The base of every stack-spec model: strict, frozen, camelCase keys as in the YAML."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class Strict(BaseModel):
    # Unknown keys are errors: a typo in a stack file fails `validate`, never silently.
    model_config = ConfigDict(extra="forbid", frozen=True, alias_generator=to_camel, validate_by_name=False)
