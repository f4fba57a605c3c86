"""`python -m sglang_router.launch_router` in the stand-in images: the stand-in server in router mode."""

import sys

sys.path.insert(0, "/opt/flashfleet-standin")
import entry

entry.main(["-m", "sglang_router.launch_router", *sys.argv[1:]])
