"""Bring-up: runs the repository's playbooks against an inventory's hosts. Knows nothing of stacks.

`provider` is the Pulumi layer (`attach()`, its resource and dynamic provider); `handoff` is the hand-off
every caller goes through (validation, run directory, progress, timeline, teardown), in this
process or a child; `playbook_run` drives ansible-runner. Nothing here imports pulumi at module
level except `provider`.
"""
