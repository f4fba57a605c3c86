"""Installs the derived image's apt packages as the stack's lock holds them (run by `docker build`
on the base image, with the base's own python3): from the snapshot of the base's distribution
archive the lock names, never from the base's own sources.

The snapshot never changes, so the same base installs the same packages, dependencies included.
Before anything is installed it checks, and stops naming the difference:
- the base's distribution and architecture are those the lock was resolved for;
- each suite's signed index (InRelease, which apt verifies with the base's archive keys) has the
  hash the lock holds: every index and package file below it is then the lock's;
- each package asked for is the lock's file (its SHA256), at the lock's version.
The base's sources are left as they were: apt reads the snapshot through its own options.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

WORK = "/var/lib/flashfleet-apt"


def fail(message: str) -> None:
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def os_release() -> dict[str, str]:
    out = {}
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        if os.path.exists(path):
            with open(path, encoding="utf-8") as fh:
                for line in fh:
                    key, _, value = line.strip().partition("=")
                    out[key] = value.strip('"')
            return out
    return out


def keyrings() -> list[str]:
    """The keyrings the base's own sources are signed-by (deb822 Signed-By, one-line signed-by):
    the snapshot is the same archive, signed with the same keys. None: apt's trusted keys."""
    found = []
    for path in ["/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*"))]:
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
            found += re.findall(r"^Signed-By:\s*(/\S+)\s*$", text, re.M | re.I)
            found += [p for m in re.findall(r"signed-by=([^\s\]]+)", text) for p in m.split(",")]
    return [k for k in dict.fromkeys(found) if k.startswith("/") and os.path.isfile(k)]


def apt(options: list[str], *args: str) -> None:
    # no terminal in a build: a package's configuration questions take their defaults
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    done = subprocess.run(["apt-get", *options, *args], check=False, env=env)
    if done.returncode != 0:
        fail(f"apt-get {' '.join(args)} exited {done.returncode}")


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as fh:
        lock = json.load(fh)
    release = os_release()
    have = f"{release.get('ID', '?')} {release.get('VERSION_CODENAME', '?')}"
    names = ", ".join(lock["packages"])
    if have != lock["distribution"]:
        fail(
            f"the base image is {have}, the lock resolved {names} for {lock['distribution']}: "
            "the lock is stale (`flashfleet lock STACK --update`)"
        )
    arch = subprocess.run(["dpkg", "--print-architecture"], check=True, capture_output=True, text=True)
    if arch.stdout.strip() != lock["arch"]:
        fail(f"the base image is {arch.stdout.strip()}, the lock resolved {names} for {lock['arch']}")
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(f"{WORK}/lists/partial")
    os.makedirs(f"{WORK}/sources.list.d")
    keys = keyrings()
    signed = f" [signed-by={','.join(keys)}]" if keys else ""
    with open(f"{WORK}/sources.list", "w", encoding="utf-8") as fh:
        for suite in lock["suites"]:
            fh.write(f"deb{signed} {lock['snapshot']} {suite} {' '.join(lock['components'])}\n")
    options = [
        "-o", f"Dir::Etc::SourceList={WORK}/sources.list",
        "-o", f"Dir::Etc::SourceParts={WORK}/sources.list.d",
        "-o", f"Dir::State::Lists={WORK}/lists",
        "-o", f"Dir::Cache::Archives={WORK}/archives",
        # a snapshot's Release is as old as its moment: past its Valid-Until, and still the archive's
        "-o", "Acquire::Check-Valid-Until=false",
        "-o", "Acquire::Languages=none",
    ]  # fmt: skip
    os.makedirs(f"{WORK}/archives/partial")
    apt(options, "update")
    for suite, sha256 in lock["suites"].items():
        [index] = glob.glob(f"{WORK}/lists/*_dists_{suite}_InRelease") or [None]
        if index is None:
            fail(f"{lock['snapshot']}: apt read no InRelease for {suite}")
        with open(index, "rb") as fh:
            got = hashlib.sha256(fh.read()).hexdigest()
        if got != sha256:
            fail(f"{lock['snapshot']} {suite}: InRelease sha256 {got} differs from the lock's {sha256}")
    wanted = [f"{name}={deb['version']}" for name, deb in lock["packages"].items()]
    apt(options, "install", "-y", "--no-install-recommends", "--download-only", *wanted)
    for name, deb in lock["packages"].items():
        files = glob.glob(f"{WORK}/archives/{name}_*.deb")
        digests = {}
        for path in files:
            with open(path, "rb") as fh:
                digests[path] = hashlib.sha256(fh.read()).hexdigest()
        if deb["sha256"] not in digests.values():
            got = ", ".join(f"{os.path.basename(p)} {d}" for p, d in digests.items()) or "no file"
            fail(f"{name}: the lock has {deb['version']} with sha256 {deb['sha256']}, apt fetched {got}")
    apt(options, "install", "-y", "--no-install-recommends", *wanted)
    for name, deb in lock["packages"].items():
        shown = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", name], check=False,
                               capture_output=True, text=True)  # fmt: skip
        if shown.stdout != deb["version"]:
            fail(f"{name}: {shown.stdout or 'nothing'} installed, the lock has {deb['version']}")
        print(f"ok: {name} {deb['version']} from {lock['snapshot']}")
    shutil.rmtree(WORK)


if __name__ == "__main__":
    main()
