"""The node-preparation roles, run for real through flashfleet.runner against test hosts."""
