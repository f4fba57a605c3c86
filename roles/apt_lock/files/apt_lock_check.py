"""What apt would install from a role's repositories, against the stack's lock (standard library only).

Request on stdin, JSON: {"lock": {repository directory (as apt-get indextargets names it): {package:
{"version", "sha256", ...}}}, "packages": what the role asks for, "pins": {package: the version
glob the role's apt preferences pin it to}}. After `apt-get update`:

1. The node's own index of each directory (what apt verified against the repository's signed
   Release) must list each locked package at its locked version with its locked SHA256: apt checks
   every file it downloads against that index, so the bytes it installs are the locked ones.
2. The lock's versions must be those the role pins (a lock older than the role's versions).
3. Every package `apt-get install` would take from those directories (a simulation, nothing
   changes) must be in the lock at that version: a dependency the lock does not hold, or holds at
   another version, is named.

Prints one JSON object: {"problems": [one line each], "install": what the role then asks apt for:
each package asked for at its locked version, and any dependency apt would otherwise take at
another version than the lock's, at the lock's}; no problem means the lock holds.
"""

import fnmatch
import json
import re
import subprocess
import sys

_INST = re.compile(r"^Inst (\S+) (?:\[[^\]]*\] )?\((\S+) ")


def paragraphs(text):
    """Each entry of a Packages index as {field: value}."""
    for block in re.split(r"\n\s*\n", text):
        entry = {}
        for line in block.splitlines():
            if line[:1] not in (" ", "\t") and ":" in line:
                key, _, value = line.partition(":")
                entry[key] = value.strip()
        if "Package" in entry:
            yield entry


def repo_index(directory):
    """(package, version) -> SHA256 of the node's index of the repository directory."""
    targets = subprocess.run(
        [
            "apt-get",
            "indextargets",
            "--format",
            "$(FILENAME)",
            "Created-By: Packages",
            "URI: " + directory + "Packages",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    out = {}
    for path in targets:
        text = subprocess.run(
            ["/usr/lib/apt/apt-helper", "cat-file", path], check=True, capture_output=True, text=True
        ).stdout
        for entry in paragraphs(text):
            out[(entry["Package"], entry.get("Version", ""))] = entry.get("SHA256", "")
    return out


def simulate(install):
    """(returncode, stderr, [(package, version)] apt-get install would unpack) for `install`."""
    sim = subprocess.run(
        ["apt-get", "install", "-s", "-q", "-y", "--no-install-recommends", *install],
        capture_output=True,
        text=True,
        check=False,
    )
    unpacked = [m.groups() for m in map(_INST.match, sim.stdout.splitlines()) if m is not None]
    return sim.returncode, sim.stderr, unpacked


def main():
    req = json.load(sys.stdin)
    locks, pins = req["lock"], req.get("pins", {})
    locked = {name: want for lock in locks.values() for name, want in lock.items()}
    asked = {name: locked[name]["version"] if name in locked else None for name in req["packages"]}
    problems, held = [], set()
    for directory, lock in locks.items():
        index = repo_index(directory)
        if not index:
            problems.append(f"the node has no index of {directory}: apt-get update has not read it")
        held |= {name for name, _ in index}
        for name, want in sorted(lock.items()):
            listed = index.get((name, want["version"]))
            if index and listed is None:
                problems.append(f"{name} {want['version']}: not in {directory}'s index any more")
            elif listed is not None and listed != want["sha256"]:
                problems.append(
                    f"{name} {want['version']}: the repository lists sha256 {listed} "
                    f"where the lock has {want['sha256']}"
                )
    for name, glob in sorted(pins.items()):
        if name in locked and not fnmatch.fnmatchcase(locked[name]["version"], glob):
            problems.append(
                f"{name}: the lock has {locked[name]['version']} where the role pins {glob} "
                "(the lock is older than the stack's versions)"
            )

    def argv():
        return [f"{name}={version}" if version else name for name, version in asked.items()]

    if problems:
        return problems, argv()
    # a dependency apt would take at another version than the lock's (the repository published a
    # newer one since) is asked for at the lock's, until apt takes only locked versions
    for _ in range(len(locked) + 1):
        code, err, unpacked = simulate(argv())
        moved = {
            name: locked[name]["version"] for name, version in unpacked
            if name in held and name in locked and name not in asked and locked[name]["version"] != version
        }  # fmt: skip
        if code != 0 or not moved:
            break
        asked.update(moved)
    if code != 0:
        problems.append("apt cannot install " + " ".join(argv()) + ": " + err.strip()[-400:])
    for name, version in unpacked:
        if name not in held:
            continue  # the distribution's archive's, not these repositories'
        if name not in locked:
            problems.append(
                f"{name} {version}: apt would install it from the repository; the lock does not hold it"
            )
        elif locked[name]["version"] != version:
            problems.append(
                f"{name}: apt would install {version} where the lock has {locked[name]['version']}"
            )
    return problems, argv()


if __name__ == "__main__":
    found, wanted = main()
    print(json.dumps({"problems": found, "install": wanted}))
