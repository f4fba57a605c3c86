import sys
from pathlib import Path

# pulumi_harness is a plain module beside the tests.
sys.path.insert(0, str(Path(__file__).parent))
