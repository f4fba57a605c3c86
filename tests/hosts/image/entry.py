"""Entry point of the stand-in SGLang images: prints one `flashfleet-probe {json}` line with
what the container was given (environment names, namespaces, mounts, devices, limits), then
runs the OpenAI-compatible stand-in server with the container's argv; as `python` (`--python
ARGV...`), it prints the same line and then runs the image's python3 with ARGV (the real
router's `python -m sglang_router.launch_router`, or `-m smg launch` from the image's `smg`)."""

import json
import os
import resource
import sys

STANDIN = "/opt/flashfleet-standin/standin_sglang.py"


def probe(argv: list[str]) -> dict[str, object]:
    with open("/proc/self/mountinfo") as f:
        mounts = sorted({line.split()[4] for line in f})
    return {
        "argv": argv,
        "env": sorted(os.environ),
        "ns": {kind: os.readlink(f"/proc/self/ns/{kind}") for kind in ("ipc", "net", "pid")},
        "mounts": mounts,
        "devices": sorted(p for p in ("/dev/kfd", "/dev/dri", "/dev/infiniband") if os.path.exists(p)),
        "memlock": list(resource.getrlimit(resource.RLIMIT_MEMLOCK)),
        "stack": list(resource.getrlimit(resource.RLIMIT_STACK)),
        "groups": sorted(os.getgroups()),
    }


def main(argv: list[str]) -> None:
    if argv[:1] == ["--python"]:
        print("flashfleet-probe " + json.dumps(probe(argv[1:])), flush=True)
        os.execv("/usr/bin/python3", ["python3", *argv[1:]])
    print("flashfleet-probe " + json.dumps(probe(argv)), flush=True)
    # exec, not runpy: the server's process is the stand-in's own (`ps` names it) and is PID 1
    os.execv("/usr/bin/python3", ["python3", STANDIN, *argv])


if __name__ == "__main__":
    main(sys.argv[1:])
