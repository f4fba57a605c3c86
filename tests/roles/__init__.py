"""The node-preparation roles, run for real through flashfleet.bringup.playbook_run against test hosts."""
