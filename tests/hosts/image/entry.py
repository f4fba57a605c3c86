"""Entry point of the stand-in SGLang images: prints one `flashfleet-probe {json}` line with
what the container was given (environment names, namespaces, mounts, devices, limits), then
runs the OpenAI-compatible stand-in server with the container's argv."""

import json
import os
import resource
import runpy
import sys

STANDIN = "/opt/flashfleet-standin/standin_sglang.py"


def probe() -> dict[str, object]:
    with open("/proc/self/mountinfo") as f:
        mounts = sorted({line.split()[4] for line in f})
    return {
        "argv": sys.argv[1:],
        "env": sorted(os.environ),
        "ns": {kind: os.readlink(f"/proc/self/ns/{kind}") for kind in ("ipc", "net", "pid")},
        "mounts": mounts,
        "devices": sorted(p for p in ("/dev/kfd", "/dev/dri", "/dev/infiniband") if os.path.exists(p)),
        "memlock": list(resource.getrlimit(resource.RLIMIT_MEMLOCK)),
        "stack": list(resource.getrlimit(resource.RLIMIT_STACK)),
        "groups": sorted(os.getgroups()),
    }


def main(argv: list[str]) -> None:
    sys.argv = [STANDIN, *argv]
    print("flashfleet-probe " + json.dumps(probe()), flush=True)
    runpy.run_path(STANDIN, run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
