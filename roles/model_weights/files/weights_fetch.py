"""The model_weights background job on a node: the download client, then the downloads.

Runs on the node as root, started by the start entry point with async and poll 0, standard
library only (Python 3.8+). Reads one JSON request on stdin (or after `--request`: a Kubernetes
download container runs this same program, flashfleet/k8s/weights.py), and:

1. makes the cache directories and ensures the client (a venv with huggingface_hub at the pinned
   version, pip's index arguments as given), so the start play does not wait for pip;
2. runs one `hf download` per repository, side by side; each that succeeds gets its marker of a
   complete download (the snapshot path), so a node that fails in a later play keeps what it
   finished and the next prepare does not ask the Hub again. A repository in the request's
   `lock` is downloaded at its locked commit, and every file of the lock is checked first (size,
   then sha256 for an LFS file or the git blob id otherwise): a file that differs fails the
   repository, named, and leaves the cache, so the next run fetches it again. Files matching
   the request's `exclude` patterns (a node whose server loads the weights from a peer) are left
   out of the download and of the check, and the marker says so (`marker_suffix`);
3. removes the token file when it ends, whatever the outcome, SIGTERM included: a node that
   never reaches the wait play keeps the token no longer than its download needs it (a pod's
   token is its Secret's read-only file: `keep_token_file`).

Prints one JSON report on stdout (the wait entry point reads it): `changed` (a client installed
or a marker written), `installed` (what, or ""), `downloaded`, and `failed`, one line per
repository naming it and the reason, the token redacted. Exit status 0 when every repository
downloaded, else 1. The token reaches `hf` only as the file named by HF_TOKEN_PATH: never an
argument or an environment value of any process here.
"""

import contextlib
import fnmatch
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from urllib.parse import urlsplit

# A Hugging Face token as it may appear in a client's error output.
_TOKEN_RE = re.compile(r"hf_[A-Za-z0-9]{8,}")
# Colours a client may print even into a file, and its hints: neither says why it failed.
_COLOUR_RE = re.compile(r"\x1b\[[0-9;]*m")
_HINT_RE = re.compile(r"^Hint: .*$", re.MULTILINE)
# `hf download` prints the snapshot path last; the marker keeps it.
_SNAPSHOT_RE = re.compile(r"/\S+/snapshots/[0-9a-f]+")
_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


class Stopped(Exception):
    """A signal asked the job to stop: the downloads stop and the token file goes."""


class StopSignal:
    """The stop signals' handler. One that lands while a child is being started waits until the
    child is on record: raised inside Popen, it would lose the new process, which then outlives
    the job (and its token file)."""

    def __init__(self):
        self.starting = False
        self.pending = None

    def handle(self, signum, _frame):
        if self.starting:
            self.pending = signum
            return
        raise Stopped(f"stopped by {signal.Signals(signum).name}")

    @contextlib.contextmanager
    def deferred(self):
        """A stop signal inside the block is raised at its end, once the started child is recorded."""
        self.starting = True
        try:
            yield
        finally:
            self.starting = False
            if self.pending is not None:
                self.handle(self.pending, None)


_stop = StopSignal()


class Job:
    def __init__(self, req):
        self.req = req
        self.deadline = time.monotonic() + req["timeout_s"]
        self.children = []  # (repo, process, output file)
        self.installed = ""  # what was installed, for the report
        self.downloaded = []
        self.failed = {}  # repository -> its one line
        # Read only to redact it from the report; never passed on.
        self.token = ""
        with contextlib.suppress(OSError), open(req["token_file"], encoding="utf-8") as f:
            self.token = f.read().strip()

    def tail(self, text, lines=3):
        """The last lines of a command's output on one line, without the token."""
        if self.token:
            text = text.replace(self.token, "hf_***")
        text = _HINT_RE.sub("", _COLOUR_RE.sub("", _TOKEN_RE.sub("hf_***", text)))
        kept = [line.strip() for line in text.splitlines() if line.strip()]
        return " / ".join(kept[-lines:]) or "no output"

    def fail_rest(self, reason):
        """Every repository not downloaded (nor failed) yet fails for `reason`."""
        for repo in self.req["repos"]:
            if repo not in self.downloaded and repo not in self.failed:
                self.failed[repo] = f"hf download {repo} failed ({reason})"

    def run(self, argv):
        timeout = max(self.deadline - time.monotonic(), 1)
        with _stop.deferred():
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
        with proc:  # a stop or a timeout kills the command before it propagates
            try:
                out, _ = proc.communicate(timeout=timeout)
            except BaseException:
                proc.kill()
                raise
        if proc.returncode != 0:
            raise RuntimeError(f"{os.path.basename(argv[0])} rc {proc.returncode}: {self.tail(out)}")
        return out

    def directories(self):
        os.umask(0o022)  # one cache for every process of the node: world-readable
        for path in (self.req["cache_dir"], self.req["hub_dir"], self.req["marker_dir"]):
            os.makedirs(path, exist_ok=True)
            os.chmod(path, 0o755)

    def client(self):
        """The venv and the pinned client, installed only when missing, another version, or not
        from the files the stack's lock names (`hub_sha256`: installed first from exactly one of
        them, in pip's hash-checking mode, then whatever it needs)."""
        venv, version = self.req["venv"], self.req["hub_version"]
        hashes = sorted(self.req.get("hub_sha256") or [])
        python = os.path.join(venv, "bin", "python")
        marker = os.path.join(venv, "flashfleet-client.json")  # which lock installed it
        if not os.path.exists(python):
            self.run([sys.executable, "-m", "venv", venv])  # the node's python3, the image's in a pod
            self.installed = f"{venv} (venv)"
        try:  # none (an unlocked install, or one by an older flashfleet): no hashes
            recorded = _read_json(marker).get("sha256", [])
        except (OSError, ValueError, AttributeError):
            recorded = []
        probe = "import importlib.metadata as m; print(m.version('huggingface_hub'))"
        with contextlib.suppress(RuntimeError):
            if self.run([python, "-c", probe]).strip() == version and recorded == hashes:
                return
        pip = [os.path.join(venv, "bin", "pip"), "install", "--disable-pip-version-check", "--quiet"]
        if hashes:
            with tempfile.NamedTemporaryFile("w", suffix=".txt", dir=venv, delete=False) as reqs:
                reqs.write(
                    f"huggingface_hub=={version} " + " ".join(f"--hash=sha256:{h}" for h in hashes) + "\n"
                )
            try:
                # reinstalled, so that pip fetches and checks the file: an installed version is
                # taken as it is, whatever bytes it came from
                locked = ["--no-deps", "--force-reinstall", "--require-hashes", "-r", reqs.name]
                self.run([*pip, *self.req["pip_args"], *locked])
            finally:
                os.unlink(reqs.name)
        self.run([*pip, *self.req["pip_args"], f"huggingface_hub=={version}"])
        with open(marker, "w", encoding="utf-8") as f:
            json.dump({"sha256": hashes}, f)
        self.installed = f"huggingface_hub {version}" + (" (locked)" if hashes else "")

    def download(self):
        """Every repository side by side; each one's output goes to a file, so none blocks on a pipe."""
        req = self.req
        env = dict(
            os.environ,
            HF_TOKEN_PATH=req["token_file"],
            HF_ENDPOINT=req["endpoint"],
            HF_HUB_DISABLE_TELEMETRY="1",
            HF_HUB_DISABLE_PROGRESS_BARS="1",
            NO_COLOR="1",
        )
        if not self.token_may_go():
            # a token sent over plain http can be read on the way: the client gets none at all
            # (HF_TOKEN_PATH at an empty file also keeps it from a token saved on the node)
            env.pop("HF_TOKEN", None)
            env["HF_TOKEN_PATH"] = os.devnull
        hf = os.path.join(req["venv"], "bin", "hf")
        for repo in req["repos"]:
            bad = [n for n in (req.get("lock", {}).get(repo) or {}).get("files", {}) if not _hub_file_name(n)]
            if bad:  # a tampered lock: nothing of this repository is fetched, read or removed
                why = f"the lock names {bad[0]!r}: not a relative path of the repository"
                self.failed[repo] = f"hf download {repo} failed ({why})"
                continue
            out = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed in stop()
            argv = [hf, "download", repo, "--revision", self.revision(repo), "--cache-dir", req["hub_dir"],
                    "--max-workers", str(req["max_workers"])]  # fmt: skip
            for pattern in req.get("exclude") or []:  # the client takes one pattern a flag
                argv += ["--exclude", pattern]
            with _stop.deferred():
                proc = subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env
                )
                self.children.append((repo, proc, out))
        for repo, proc, out in self.children:
            try:
                rc = proc.wait(timeout=max(self.deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                self.failed[repo] = f"hf download {repo} failed (not finished within {req['timeout_s']} s)"
                continue
            out.seek(0)
            text = out.read()
            if rc != 0:
                withheld = ""
                if self.token and not self.token_may_go():  # why a gated repository said no
                    withheld = f" (no token sent: {req['endpoint']} is not https)"
                self.failed[repo] = f"hf download {repo} failed (rc {rc}): {self.tail(text)}{withheld}"
                continue
            snapshot = _SNAPSHOT_RE.findall(text)
            snapshot = snapshot[-1] if snapshot else ""
            differs = self.differs_from_lock(repo, snapshot)
            if differs:
                self.failed[repo] = f"hf download {repo} failed (not the locked bytes: {differs})"
                continue
            self.mark(repo, snapshot)
            self.downloaded.append(repo)

    def token_may_go(self):
        """The token goes only over https, or over http where the stack says so for a mirror on a
        network it trusts (`model_weights_hf_token_over_http`)."""
        scheme = urlsplit(self.req["endpoint"]).scheme.lower()
        return scheme == "https" or (scheme == "http" and self.req.get("token_over_http") is True)

    def revision(self, repo):
        """The locked commit of the repository, else the requested revision."""
        locked = self.req.get("lock", {}).get(repo)
        return locked["commit"] if locked else self.req["revision"]

    def differs_from_lock(self, repo, snapshot):
        """The first locked file of the repository whose bytes differ, named, or "" when all match
        (or none is locked). A file that differs is removed from the cache, blob and link."""
        locked = self.req.get("lock", {}).get(repo)
        if not locked:
            return ""
        if not snapshot.endswith("/" + locked["commit"]):
            return f"the client placed {snapshot or 'nothing'}, not commit {locked['commit']}"
        if not _inside(snapshot, self.req["hub_dir"]):
            return f"the client placed {snapshot}, outside the cache {self.req['hub_dir']}"
        for name, want in sorted(locked["files"].items()):
            if any(fnmatch.fnmatch(name, pattern) for pattern in self.req.get("exclude") or []):
                continue  # left on the Hub on purpose (the server loads it from a peer)
            path = os.path.join(snapshot, name)
            # a link in the snapshot, pointing at a blob of the cache: nothing else is read or removed
            if not (_inside(os.path.dirname(path), snapshot) and _inside(path, self.req["hub_dir"])):
                return f"{name!r} leads outside the snapshot {snapshot}; nothing was read or removed"
            key = "sha256" if want.get("sha256") else "git_oid"
            got = _file_identity(path, want["size"], key)
            if got is None:
                return f"{name} is missing"
            kind = "size" if got["size"] != want["size"] else key if got[key] != want[key] else ""
            if kind:
                with contextlib.suppress(OSError):
                    os.remove(os.path.realpath(path))  # the blob, then the snapshot's link to it
                    os.remove(path)
                return f"{name} has {kind} {got[kind]} where the lock has {want[kind]}"
        return ""

    def mark(self, repo, snapshot):
        req = self.req
        name = f"{repo.replace('/', '--')}@{self.revision(repo)}{req.get('marker_suffix', '')}"
        fd, tmp = tempfile.mkstemp(dir=req["marker_dir"], prefix=".tmp-")
        with os.fdopen(fd, "w") as f:
            f.write(snapshot + "\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, os.path.join(req["marker_dir"], name))

    def stop(self):
        """Stops what still runs, then removes the token file: the job's last act, always."""
        for _, proc, _ in self.children:
            if proc.poll() is None:
                proc.terminate()
        for _, proc, out in self.children:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            out.close()
        if not self.req.get("keep_token_file"):  # a pod's token is its Secret's, read-only
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.req["token_file"])

    def report(self):
        return {
            "changed": bool(self.installed or self.downloaded),
            "installed": self.installed,
            "downloaded": self.downloaded,
            "failed": list(self.failed.values()),
        }


def _hub_file_name(name):
    """A file name as the Hub lists a repository's: a relative POSIX path of named parts, one line
    (flashfleet.stack.lock checks the same when the lock is read)."""
    if not isinstance(name, str) or not name.isprintable() or "\\" in name or name.startswith("/"):
        return False
    return all(part not in ("", ".", "..") for part in name.split("/"))


def _inside(path, root):
    """Whether `path`, every link on the way followed, lies in `root` (root's own links followed)."""
    real, base = os.path.realpath(path), os.path.realpath(root)
    return real == base or real.startswith(base.rstrip("/") + "/")


def _read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _file_identity(path, size_wanted, key):
    """The file's size and, when it is the size wanted, its `key` hash (sha256, or git's blob id
    for git_oid); None when the file is missing."""
    try:
        size = os.path.getsize(path)
    except OSError:
        return None
    if size != size_wanted:
        return {"size": size}
    digest = hashlib.sha256() if key == "sha256" else hashlib.sha1(b"blob %d\0" % size)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            digest.update(chunk)
    return {"size": size, key: digest.hexdigest()}


def main():
    # a pod has no stdin: its container gives the request as an argument
    given = sys.argv[1:3]
    job = Job(json.loads(given[1]) if given[:1] == ["--request"] else json.load(sys.stdin))
    for sig in _SIGNALS:
        signal.signal(sig, _stop.handle)
    try:
        job.directories()
        try:
            job.client()
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            job.fail_rest(f"no client: {job.tail(str(e))}")
        else:
            job.download()
    except Stopped as e:
        job.fail_rest(str(e))
    except Exception as e:  # the report is the only way back to the wait play
        job.fail_rest(job.tail(f"{type(e).__name__}: {e}"))
    finally:
        # A second signal must not cut the clean-up short: the token file goes whatever happens.
        for sig in _SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        job.stop()
    print(json.dumps(job.report()))
    return 1 if job.failed else 0


if __name__ == "__main__":
    sys.exit(main())
