"""The controller environment variables that carry secrets to the roles (docs/security.md).

Named once here, light to import: the bring-up hand-off sets them for ansible-playbook, the roles
read them in `no_log` tasks, and `flashfleet bench` reads the API key from the same place.
"""

from __future__ import annotations

TOKEN_ENV = "FLASHFLEET_HF_TOKEN"  # the Hugging Face token
API_KEY_ENV = "FLASHFLEET_API_KEY"  # the serving API key (serving.apiKey: required)
