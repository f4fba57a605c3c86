import sys
from pathlib import Path

# ec2_api (the stubbed client) beside these tests; the Pulumi program runner from tests/pulumi.
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "pulumi"))
