"""Stack output keys: written by the Pulumi program (``__main__.py``, through components/program.py),
read by the CLI (cli/shared: stack_inventory, stack_cluster) and the tests."""

from __future__ import annotations

INVENTORY = "inventory"  # the Ansible inventory (docs/contracts.md); never carries secrets
# The same inventory as one JSON string, what readers parse: a mapping output loses its nulls.
INVENTORY_JSON = "inventoryJson"
ADDRESSES = "addresses"  # how the controller reaches each node (public IP, or private)
PRIVATE_ADDRESSES = "privateAddresses"  # how the nodes reach each other
ENDPOINT = "endpoint"  # the OpenAI-compatible URL: the cluster router's node, else node 0
NODE_NAMES = "nodeNames"
INSTANCE_IDS = "instanceIds"  # AWS stacks: EC2 instance ids, in node order (console host keys, sweep)
HF_TOKEN = "hfToken"  # a Pulumi secret output: only for the ansible-runner hand-off
API_KEY = "apiKey"  # a Pulumi secret output: for `configure` and `bench` (serving.apiKey: required)
EXPIRES_AT = "expiresAt"  # ISO 8601 UTC deadline the nodes enforce on themselves
BRINGUP_RUN_DIR = "bringupRunDir"  # the last site.yml run's directory (event log, timeline)
# AWS stacks with caches.weightsSnapshot: the snapshot that keeps the weights (id, made, expiresAt)
WEIGHTS_SNAPSHOT = "weightsSnapshot"
NAMESPACE = "namespace"  # Kubernetes stacks: where the workloads live
WORKLOADS = "workloads"  # Kubernetes stacks: the workloads' names
