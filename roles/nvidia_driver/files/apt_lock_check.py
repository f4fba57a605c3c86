"""What apt would install from one repository, against the stack's lock of it (standard library only).

Request on stdin, JSON: {"repo": the repository directory as the node's sources name it, "lock":
{package: {"version", "sha256", ...}}, "packages": the packages the role installs}. After
`apt-get update`:

1. The node's own index of the repository (what apt verified against the repository's signed
   Release) must list each locked package at its locked version with its locked SHA256: apt checks
   every file it downloads against that index, so the bytes it installs are the locked ones.
2. Every package `apt-get install` would take from the repository (a simulation, nothing changes)
   must be in the lock at that version: a dependency the lock does not hold, or holds at another
   version, is named.

Prints one JSON object: {"problems": [one line each], "install": what the role then asks apt for,
each locked package at its locked version}; no problem means the lock holds.
"""

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


def repo_index(repo):
    """(package, version) -> SHA256 of the node's index files of the repository directory."""
    targets = subprocess.run(
        ["apt-get", "indextargets", "--format", "$(FILENAME)", "Created-By: Packages", "Repo-URI: " + repo],
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


def main():
    req = json.load(sys.stdin)
    repo, lock = req["repo"], req["lock"]
    install = [f"{name}={lock[name]['version']}" if name in lock else name for name in req["packages"]]
    index = repo_index(repo)
    if not index:
        return [f"the node has no index of {repo}: apt-get update has not read it"], install
    problems = []
    for name, want in sorted(lock.items()):
        listed = index.get((name, want["version"]))
        if listed is None:
            problems.append(f"{name} {want['version']}: not in the repository's index any more")
        elif listed != want["sha256"]:
            problems.append(
                f"{name} {want['version']}: the repository lists sha256 {listed} "
                f"where the lock has {want['sha256']}"
            )
    held = {name for name, _ in index}
    sim = subprocess.run(
        ["apt-get", "install", "-s", "-q", "-y", "--no-install-recommends", *install],
        capture_output=True,
        text=True,
        check=False,
    )
    if sim.returncode != 0:
        problems.append("apt cannot install " + " ".join(install) + ": " + sim.stderr.strip()[-400:])
    for line in sim.stdout.splitlines():
        match = _INST.match(line)
        if match is None or match.group(1) not in held:
            continue  # the distribution's archive's, not this repository's
        name, version = match.groups()
        if name not in lock:
            problems.append(
                f"{name} {version}: apt would install it from {repo}, and the lock does not hold it"
            )
        elif lock[name]["version"] != version:
            problems.append(f"{name}: apt would install {version} where the lock has {lock[name]['version']}")
    return problems, install


if __name__ == "__main__":
    found, wanted = main()
    print(json.dumps({"problems": found, "install": wanted}))
