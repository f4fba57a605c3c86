import sys
from pathlib import Path

# k8s_cases and k8s_schema are plain modules beside the tests.
sys.path.insert(0, str(Path(__file__).parent))
