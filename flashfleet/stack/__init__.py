"""Stack files and the strict spec: the bottom of the package, importing only the catalog.

Imports neither pulumi nor boto3 nor ansible, so `flashfleet plan` and `validate` stay fast.
Resolving a spec into a plan is the planning layer's work (``flashfleet.planning``).
"""

from flashfleet.stack.errors import STACK_KEY, Problem, StackError
from flashfleet.stack.files import DEFAULT_STACKS_DIR, HF_TOKEN_KEY, list_stacks, read_stack_file, stack_path
from flashfleet.stack.kubernetes_source import KubernetesSource
from flashfleet.stack.spec import AwsSource, ExistingSource, StackSpec

__all__ = [
    "DEFAULT_STACKS_DIR",
    "HF_TOKEN_KEY",
    "STACK_KEY",
    "AwsSource",
    "ExistingSource",
    "KubernetesSource",
    "Problem",
    "StackError",
    "StackSpec",
    "list_stacks",
    "read_stack_file",
    "stack_path",
]
