"""Stack files: strict spec, validation with YAML paths, and the resolved bring-up plan.

Imports neither pulumi nor boto3 nor ansible, so `flashfleet plan` and `validate` stay fast.
"""

from flashfleet.components.kubernetes_spec import KubernetesSource
from flashfleet.stack.bringup import Bringup, MooncakeLayout, NodePlan, load_stack, parse_spec, resolve_spec
from flashfleet.stack.errors import STACK_KEY, Problem, StackError
from flashfleet.stack.files import DEFAULT_STACKS_DIR, HF_TOKEN_KEY, list_stacks, read_stack_file, stack_path
from flashfleet.stack.spec import AwsSource, ExistingSource, StackSpec

__all__ = [
    "DEFAULT_STACKS_DIR",
    "HF_TOKEN_KEY",
    "STACK_KEY",
    "AwsSource",
    "Bringup",
    "ExistingSource",
    "KubernetesSource",
    "MooncakeLayout",
    "NodePlan",
    "Problem",
    "StackError",
    "StackSpec",
    "list_stacks",
    "load_stack",
    "parse_spec",
    "read_stack_file",
    "resolve_spec",
    "stack_path",
]
