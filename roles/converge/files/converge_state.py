"""flashfleet's converge record on a node: what converged here, and whether it drifted since.

Runs on the node as root, standard library only (Python 3.8+: no zip(strict=)). Reads one
JSON request on stdin and prints one JSON answer:

- read: per recorded role, its digest and what drifted since it was recorded (files, packages,
  units, images that no longer match the snapshot; "" when nothing did). Once per node and run.
- drop: forget a role about to run, so that a run that fails half-way never leaves a record
  that claims it converged.
- record: stores a role's digest, what it manages (watch) and a fresh snapshot of it.

The record is root-only (0600): it holds hashes of root-only files.
"""

import hashlib
import json
import os
import subprocess
import sys
import tempfile


def _sha_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _files(path):
    """sha256 of a file, or of every file under a directory (path and content)."""
    if os.path.isfile(path):
        return _sha_file(path)
    if not os.path.isdir(path):
        return "absent"
    h = hashlib.sha256()
    for root, dirs, names in os.walk(path):
        dirs.sort()
        for name in sorted(names):
            full = os.path.join(root, name)
            if os.path.isfile(full):
                h.update(os.path.relpath(full, path).encode() + b"\0" + _sha_file(full).encode())
    return h.hexdigest()


def _venv(path):
    """A virtualenv by what defines it: its pyvenv.cfg, the distributions installed (dist-info
    names carry versions) and its bin/ entries; thousands of files need not be walked."""
    import glob

    h = hashlib.sha256(_sha_file(os.path.join(path, "pyvenv.cfg")).encode())
    for pattern in ("lib/python*/site-packages/*.dist-info", "bin/*"):
        for entry in sorted(glob.glob(os.path.join(path, pattern))):
            h.update(os.path.relpath(entry, path).encode() + b"\n")
    return h.hexdigest()


def _tree(path):
    """Names, sizes and modification times under a directory (a virtualenv: see _venv)."""
    if not os.path.exists(path):
        return "absent"
    if os.path.isfile(os.path.join(path, "pyvenv.cfg")):
        return _venv(path)
    h = hashlib.sha256()
    for root, dirs, names in os.walk(path):
        dirs.sort()
        for name in sorted(names):
            full = os.path.join(root, name)
            try:
                st = os.lstat(full)
            except OSError:
                continue
            h.update(f"{os.path.relpath(full, path)} {st.st_size} {st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _run(argv):
    try:
        done = subprocess.run(
            argv, check=False, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.returncode, done.stdout.decode(errors="replace")


def _packages(patterns):
    done = _run(["dpkg-query", "-W", "-f", "${Package}=${Version} ${db:Status-Status}\n", *patterns])
    if done is None:
        return {"dpkg": "absent"}
    return {"dpkg": sorted(line for line in done[1].splitlines() if line.strip())}


def _units(units):
    done = _run(["systemctl", "show", "--property=Id,ActiveState,UnitFileState", *units])
    if done is None:
        return {u: "absent" for u in units}
    blocks = [b for b in done[1].strip().split("\n\n") if b.strip()]
    return {u: sorted(b.splitlines()) for u, b in zip(units, blocks)}  # noqa: B905 (3.8)


def _images(refs):
    out = {}
    for ref in refs:
        done = _run(["docker", "image", "inspect", "--format", "{{.Id}}", ref])
        out[ref] = done[1].strip() if done is not None and done[0] == 0 else "absent"
    return out


def snapshot(watch):
    """What the role manages, as it is now on this node."""
    out = {}
    for path in watch.get("files", []):
        out["file " + path] = _files(path)
    for path in watch.get("trees", []):
        out["tree " + path] = _tree(path)
    if watch.get("packages"):
        out["packages"] = _packages(watch["packages"])
    if watch.get("units"):
        out["units"] = _units(watch["units"])
    if watch.get("images"):
        out["images"] = _images(watch["images"])
    return out


def _load(path):
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    roles = data.get("roles") if isinstance(data, dict) else None
    return roles if isinstance(roles, dict) else {}  # none, or an older flashfleet's: all run


def _save(path, roles):
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".converge-")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump({"roles": roles}, f, sort_keys=True, indent=1)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def _drift(recorded, now):
    changed = sorted(k for k in set(recorded) | set(now) if recorded.get(k) != now.get(k))
    return ", ".join(changed)


def read(req):
    out = {}
    for role, entry in sorted(_load(req["state_file"]).items()):
        if isinstance(entry, dict):
            drift = _drift(entry.get("snapshot") or {}, snapshot(entry.get("watch") or {}))
            out[role] = {"digest": entry.get("digest"), "drift": drift}
    return out


def drop(req):
    roles = _load(req["state_file"])
    if roles.pop(req["role"], None) is None:
        return {"dropped": False}
    _save(req["state_file"], roles)
    return {"dropped": True}


def record(req):
    roles = _load(req["state_file"])
    watch = req.get("watch") or {}
    roles[req["role"]] = {"digest": req["digest"], "watch": watch, "snapshot": snapshot(watch)}
    _save(req["state_file"], roles)
    return {"recorded": req["role"]}


def main():
    req = json.load(sys.stdin)
    answer = {"read": read, "drop": drop, "record": record}[req["mode"]](req)
    json.dump(answer, sys.stdout, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
