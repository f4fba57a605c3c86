#!/usr/bin/python3
"""A recording stand-in for docker, kept for one use only: benchmarks/bringup.py, which times the
roles' own work on booted hosts and names this file to them as their docker, so that an engine's
install and image import do not enter its figures. Every test in tests/serve runs its containers
on the real Docker engine (tests/serve/lab.py); no test needs a failure Docker cannot produce.

`docker run ... IMAGE CMD...` records the argv and the environment the container would get
(--env-file and -e) and execs the OpenAI-compatible stand-in in its place, or, for `smg launch
...` or `python -m sglang_router.launch_router ...`, the real router (SMG or sglang-router,
copied onto the host beside it); `stop`, `rm -f`, `container inspect` and `ps` act on those
processes. There is no mount namespace: the stand-in is told the -v bind mounts and opens the files its flags name
(`--config`) only through them, so a file the container was not given is not there."""

import json
import os
import signal
import sys
import time

STATE = "/var/lib/fake-docker"
STANDIN = "/usr/local/lib/fake-docker/standin_sglang.py"
MOUNTS_ENV = "FLASHFLEET_TEST_MOUNTS"  # read by the stand-in (standin_sglang.host_path)
MOONCAKE_PYTHON = "/opt/flashfleet/mooncake/venv/bin/python"  # the store client, for L3 stacks
ROUTER_SITE = "/usr/local/lib/fake-docker/sglang-router"  # smg, sglang-router and their imports
ROUTER = ["-m", "sglang_router.launch_router"]
SMG = ["smg", "launch"]
VALUE_FLAGS = {
    "--name",
    "--network",
    "--ipc",
    "--shm-size",
    "--ulimit",
    "--gpus",
    "--device",
    "--group-add",
    "--security-opt",
    "--cap-add",
    "-v",
    "--volume",
    "--env-file",
    "-e",
    "--env",
}
BOOL_FLAGS = {"--rm", "-d", "-i", "-t", "--init"}


def record_path(name: str) -> str:
    return f"{STATE}/containers/{name}.json"


def alive(name: str) -> dict | None:
    try:
        with open(record_path(name)) as f:
            rec = json.load(f)
        os.kill(rec["pid"], 0)
        return rec
    except (OSError, ValueError):
        return None


def run(args: list[str]) -> None:
    opts, i = [], 0
    while i < len(args) and args[i].startswith("-"):
        if args[i] in BOOL_FLAGS:
            i += 1
        elif args[i] in VALUE_FLAGS:
            opts.append((args[i], args[i + 1]))
            i += 2
        else:
            sys.exit(f"docker: unknown flag: {args[i]}")
    image, cmd = args[i], args[i + 1 :]
    env = {}
    for flag, value in opts:
        if flag == "--env-file":
            with open(value) as f:
                lines = f.read().splitlines()
            for line in lines:
                if line.strip() and not line.startswith("#"):
                    key, _, val = line.partition("=")
                    env[key] = val
    for flag, value in opts:
        if flag in ("-e", "--env"):
            key, _, val = value.partition("=")
            env[key] = val
    name = dict(opts).get("--name", f"c{os.getpid()}")
    if alive(name):
        sys.exit(
            f'docker: Error response from daemon: Conflict. The container name "/{name}" is already in use.'
        )
    os.makedirs(f"{STATE}/containers", exist_ok=True)
    rec = {
        "argv": sys.argv,
        "image": image,
        "cmd": cmd,
        "env": env,
        "pid": os.getpid(),
        "started": time.time(),
    }
    with open(record_path(name), "w") as f:
        json.dump(rec, f)
    with open(f"{STATE}/runs.jsonl", "a") as f:
        f.write(json.dumps(rec) + "\n")
    # -v HOST:CONTAINER[:OPTIONS]
    mounts = [value.split(":")[:2] for flag, value in opts if flag in ("-v", "--volume")]
    smg = cmd[:2] == SMG
    if smg or (cmd[:1] in (["python"], ["python3"]) and cmd[1:3] == ROUTER):
        if not os.path.isdir(ROUTER_SITE):
            sys.exit(f"fake docker: no real router on this host ({ROUTER_SITE} missing)")
        # `smg` is the wheel's console script: `python3 -m smg` is the same entry point
        words = ["-m", "smg", *cmd[1:]] if smg else cmd[1:]
        os.execve(
            "/usr/bin/python3",
            ["/usr/bin/python3", *words],
            {"PATH": "/usr/bin:/bin", **env, "PYTHONPATH": ROUTER_SITE},
        )
    python = MOONCAKE_PYTHON if os.path.exists(MOONCAKE_PYTHON) else "/usr/bin/python3"
    os.execve(
        python,
        [python, STANDIN, *cmd],
        {"PATH": "/usr/bin:/bin", **env, MOUNTS_ENV: json.dumps(mounts)},
    )


def stop(name: str) -> None:
    rec = alive(name)
    if rec:
        os.kill(rec["pid"], signal.SIGTERM)
        for _ in range(100):
            if not alive(name):
                break
            time.sleep(0.1)


def main(argv: list[str]) -> None:
    cmd, args = argv[0], argv[1:]
    if cmd == "run":
        run(args)
    elif cmd == "stop":
        stop(args[-1])
    elif cmd == "rm":
        stop(args[-1])
        if os.path.exists(record_path(args[-1])):
            os.unlink(record_path(args[-1]))
    elif cmd == "container" and args[0] == "inspect":
        if not alive(args[-1]):
            sys.exit(f"Error: No such container: {args[-1]}")
        print(json.dumps([{"Name": "/" + args[-1]}]))
    elif cmd == "ps":
        names = (
            [f[:-5] for f in os.listdir(f"{STATE}/containers")]
            if os.path.isdir(f"{STATE}/containers")
            else []
        )
        print("\n".join(n for n in names if alive(n)))
    else:
        sys.exit(f"fake docker: unsupported command {cmd}")


main(sys.argv[1:])
