import sys
from pathlib import Path

# pulumi_harness is a plain module beside the tests.
sys.path.insert(0, str(Path(__file__).parent))
# ...and the tests folder, for the dynamic-provider host of tests/bringup (bringup.engine).
sys.path.insert(1, str(Path(__file__).parents[1]))
