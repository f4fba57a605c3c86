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
   With `fanout` (the weights fetched once per stack, decided by flashfleet's planning), a seed
   serves the locked files of its cache over HTTP on its private address from the start, each
   file as soon as its download is complete and its hash is the lock's (a repository is
   `downloading`, then `ready` or `failed`), until each peer in `serve_to` said it is done; a
   peer fetches each locked file from the seed as the seed offers it, into the cache's own layout
   (blob named by its hash, snapshot link), each checked on arrival, and downloads from the Hub
   only what the seed could not give (unreachable for `wait_s`, not offered, a copy that
   differs), and says so;
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
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, unquote, urlsplit

# A Hugging Face token as it may appear in a client's error output.
_TOKEN_RE = re.compile(r"hf_[A-Za-z0-9]{8,}")
# Colours a client may print even into a file, and its hints: neither says why it failed.
_COLOUR_RE = re.compile(r"\x1b\[[0-9;]*m")
_HINT_RE = re.compile(r"^Hint: .*$", re.MULTILINE)
# `hf download` prints the snapshot path last; the marker keeps it.
_SNAPSHOT_RE = re.compile(r"/\S+/snapshots/[0-9a-f]+")
_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
# How long a seed holds a peer's /status?since= before it answers unchanged, and how often it
# looks for files its download completed.
STATUS_WAIT_S = 10
ARRIVAL_POLL_S = 0.5


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
        self.notes = []  # what the fan-out did, for the report
        # (repository, file) checked against the lock on arrival (from the seed, or on a seed as
        # its download completes the file), and those a seed found wrong (the lock check says why)
        self.verified = set()
        self.unverified = set()
        self.checking = threading.Lock()
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

    def download(self, repos, seed=None):
        """Every repository side by side; each one's output goes to a file, so none blocks on a pipe.
        Meanwhile each locked file is checked as soon as the client completes it (the check after
        the download then skips it), and a `seed` offers it to its peers from then on."""
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
        for repo in repos:
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
        watched = [repo for repo, _, _ in self.children if self.locked_files(repo)]
        stop = threading.Event()
        threading.Thread(target=self.watch, args=(watched, seed, stop), daemon=True).start()
        try:
            for repo, proc, out in self.children:
                self.wait_for(repo, proc, out, seed)
        finally:
            stop.set()

    def watch(self, repos, seed, stop):
        """Checks (and offers) each file of `repos` the client completes, until `stop`."""
        while not stop.wait(ARRIVAL_POLL_S):
            for repo in repos:
                with contextlib.suppress(OSError):  # the lock check after the download says why
                    files = self.arrived(repo)
                    if seed is not None:
                        seed.offer(repo, files)

    def wait_for(self, repo, proc, out, seed):
        """Waits for one repository's client, checks what it placed, and marks it complete (or
        says why not); a seed's peers hear that its download of `repo` ended."""
        ok = False
        try:
            ok = self.placed(repo, proc, out, seed)
        finally:
            if seed is not None:
                seed.ended(repo, "ready" if ok else "failed")

    def placed(self, repo, proc, out, seed):
        req = self.req
        try:
            rc = proc.wait(timeout=max(self.deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            self.failed[repo] = f"hf download {repo} failed (not finished within {req['timeout_s']} s)"
            return False
        out.seek(0)
        text = out.read()
        if rc != 0:
            withheld = ""
            if self.token and not self.token_may_go():  # why a gated repository said no
                withheld = f" (no token sent: {req['endpoint']} is not https)"
            self.failed[repo] = f"hf download {repo} failed (rc {rc}): {self.tail(text)}{withheld}"
            return False
        if self.locked_files(repo):  # what the watch had not seen yet
            with contextlib.suppress(OSError):
                files = self.arrived(repo)
                if seed is not None:
                    seed.offer(repo, files)
        snapshot = _SNAPSHOT_RE.findall(text)
        snapshot = snapshot[-1] if snapshot else ""
        differs = self.differs_from_lock(repo, snapshot)
        if differs:
            self.failed[repo] = f"hf download {repo} failed (not the locked bytes: {differs})"
            return False
        self.mark(repo, snapshot)
        self.downloaded.append(repo)
        return True

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
            if (repo, name) in self.verified:
                continue  # hashed on arrival from the seed, into this very snapshot
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
            **({"fanout": self.notes} if self.notes else {}),
        }

    def locked_files(self, repo):
        """The repository's locked files this node keeps (its `exclude` patterns left out)."""
        files = (self.req.get("lock", {}).get(repo) or {}).get("files", {})
        exclude = self.req.get("exclude") or []
        return {n: w for n, w in sorted(files.items()) if not any(fnmatch.fnmatch(n, p) for p in exclude)}

    def storage(self, repo):
        return os.path.join(self.req["hub_dir"], "models--" + repo.replace("/", "--"))

    def seed_files(self):
        """(repository -> downloading or ready, repository -> [(file, path)] offered at once): each
        locked repository this seed serves, and each locked file of one it holds a marker for,
        as the snapshot the marker names has it (one it downloads now offers each file once
        it is complete and checked)."""
        states, offered = {}, {}
        req = self.req
        for repo in req.get("serve_repos") or []:
            locked = req.get("lock", {}).get(repo) or {}
            if not locked or any(not _hub_file_name(n) for n in locked.get("files", {})):
                continue
            if repo in req["repos"]:
                states[repo] = "downloading"
                continue
            marker = os.path.join(
                req["marker_dir"],
                f"{repo.replace('/', '--')}@{locked['commit']}{req.get('marker_suffix', '')}",
            )
            try:
                with open(marker, encoding="utf-8") as f:
                    snapshot = f.read().strip()
            except OSError:
                continue
            states[repo] = "ready"
            for name in locked["files"]:
                path = os.path.join(snapshot, name)
                if _inside(path, req["hub_dir"]) and os.path.isfile(path):
                    offered.setdefault(repo, []).append((name, path))
        return states, offered

    def from_seed(self, repos):
        """Fetches what it can of `repos` from the seed, each file as soon as the seed offers it;
        returns the repositories the Hub must still complete, each with the reason in the
        report's fan-out notes."""
        fan = self.req["fanout"]
        base = f"http://{fan['seed_address']}:{fan['port']}"
        hub, wanted = [], {}
        for repo in repos:
            files = self.locked_files(repo)
            if not files:
                hub.append(repo)
                self.notes.append(f"{repo}: from the Hub (not locked: nothing to check a copy against)")
                continue
            snapshot = os.path.join(self.storage(repo), "snapshots", self.revision(repo))
            # a file of an earlier run is not fetched again: the lock check below reads it
            wanted[repo] = {n: w for n, w in files.items() if not os.path.lexists(os.path.join(snapshot, n))}
        got, refused, why = self.stream_from_seed(base, {r: w for r, w in wanted.items() if w})
        for repo, names in wanted.items():
            mine, no = got.get(repo, set()), refused.get(repo, [])  # none when nothing was wanted
            if why.get(repo) and not mine:
                hub.append(repo)
                self.notes.append(f"{repo}: from the Hub ({why[repo]})")
                continue
            missing = sorted(set(names) - mine - {n for n, _ in no})
            reasons = [r for _, r in no] + [
                f"{n} not offered ({why.get(repo) or 'the seed does not hold it'})" for n in missing
            ]
            fetched = f"{repo}: {len(mine)} files from the seed {fan['seed']}"
            if reasons:
                hub.append(repo)
                self.notes.append(f"{fetched}; from the Hub: {'; '.join(reasons)}")
                continue
            self.notes.append(fetched)
            snapshot = os.path.join(self.storage(repo), "snapshots", self.revision(repo))
            differs = self.differs_from_lock(repo, snapshot)
            if differs:  # a file the seed did not send and the node had wrong
                hub.append(repo)
            else:
                self.mark(repo, snapshot)
                self.downloaded.append(repo)
        _seed_done(base, self.req["host"])
        return hub

    def stream_from_seed(self, base, wanted):
        """({repo: names fetched}, {repo: [(name, why refused)]}, {repo: why the seed gave no
        more}): asks the seed what it offers (an answer comes when that changes), fetches each
        new file of `wanted` at once, several side by side, until each repository's download on
        the seed has ended; a seed unreachable for `wait_s` in a row ends it for what is left."""
        fan = self.req["fanout"]
        got = {r: set() for r in wanted}
        refused = {r: [] for r in wanted}
        why = {}
        open_repos, asked, version = set(wanted), set(), -1
        last_contact = time.monotonic()
        pool = ThreadPoolExecutor(max_workers=max(int(self.req.get("max_workers") or 1), 1))
        lock = threading.Lock()

        def fetch(repo, name, want):
            try:
                reason = self.fetch_file(base, repo, name, want)
            except Exception as e:  # a pool thread's error would be lost: it is the file's reason
                reason = f"{name} not fetched ({_one_line(e)})"
            with lock:
                if reason:
                    refused[repo].append((name, reason))
                else:
                    got[repo].add(name)

        try:
            while open_repos:
                if time.monotonic() >= self.deadline:
                    for repo in open_repos:
                        why[repo] = "the seed's download did not end before the job's time ran out"
                    break
                try:
                    status = _get_json(f"{base}/status?since={version}", timeout=STATUS_WAIT_S + 20)
                    version = int(status["version"])
                except (OSError, ValueError, KeyError, TypeError) as e:
                    if time.monotonic() - last_contact > fan["wait_s"]:
                        silent = f"the seed {base} did not answer for {fan['wait_s']} s: {_one_line(e)}"
                        why.update(dict.fromkeys(open_repos, silent))
                        break
                    time.sleep(1)
                    continue
                last_contact = time.monotonic()
                states, offered = status.get("repos") or {}, status.get("files") or {}
                for repo in sorted(open_repos):
                    state = states.get(repo)
                    if state is None:
                        why[repo] = f"the seed {fan['seed']} does not offer it"
                        open_repos.discard(repo)
                        continue
                    for name in offered.get(repo) or []:
                        if name in wanted[repo] and (repo, name) not in asked:
                            asked.add((repo, name))
                            pool.submit(fetch, repo, name, wanted[repo][name])
                    if state != "downloading":  # nothing more will come: what it offered is asked for
                        open_repos.discard(repo)
                        if state == "failed":
                            why[repo] = "the seed's own download failed"
        finally:
            pool.shutdown(wait=True)
        return got, refused, why

    def fetch_file(self, base, repo, name, want):
        """One locked file from the seed, streamed into a temporary file of the blobs directory
        while hashed, kept under its blob name only when size and hash are the lock's; "" when
        kept, else why not."""
        storage, commit = self.storage(repo), self.revision(repo)
        blobs, snapshot = os.path.join(storage, "blobs"), os.path.join(storage, "snapshots", commit)
        os.makedirs(blobs, exist_ok=True)
        pointer = os.path.join(snapshot, name)
        key = "sha256" if want.get("sha256") else "git_oid"
        url = f"{base}/file/{quote(repo, safe='')}/{quote(name, safe='')}"
        fd, tmp = tempfile.mkstemp(dir=blobs, prefix=".peer-")
        try:
            with os.fdopen(fd, "wb") as out:
                size, digest = _stream(url, out, want["size"], key, self.deadline)
        except (OSError, ValueError) as e:
            os.unlink(tmp)
            return f"{name} not fetched ({_one_line(e)})"
        if size != want["size"] or digest != want[key]:
            os.unlink(tmp)
            kind = key if size == want["size"] else "size"
            seen = digest if kind == key else size
            return f"{name} refused: {kind} {seen} where the lock has {want[kind]}"
        blob = os.path.join(blobs, want[key])
        os.chmod(tmp, 0o644)
        os.replace(tmp, blob)
        os.makedirs(os.path.dirname(pointer), exist_ok=True)
        os.symlink(os.path.relpath(blob, os.path.dirname(pointer)), pointer)
        self.verified.add((repo, name))
        return ""

    def arrived(self, repo):
        """(name, path) of each locked file of `repo` this node keeps whose download is complete
        (the client links a file into the snapshot only once its blob is whole) and whose bytes
        are the lock's, checked once: what a seed may offer before its whole download ends."""
        snapshot = os.path.join(self.storage(repo), "snapshots", self.revision(repo))
        out = []
        with self.checking:
            for name, want in self.locked_files(repo).items():
                path = os.path.join(snapshot, name)
                seen = (repo, name) in self.verified or (repo, name) in self.unverified
                if seen or not os.path.exists(path):
                    continue
                if not (_inside(os.path.dirname(path), snapshot) and _inside(path, self.req["hub_dir"])):
                    self.unverified.add((repo, name))  # the lock check after the download says why
                    continue
                key = "sha256" if want.get("sha256") else "git_oid"
                got = _file_identity(path, want["size"], key)
                if got is not None and got["size"] == want["size"] and got.get(key) == want[key]:
                    self.verified.add((repo, name))
                    out.append((name, path))
                else:
                    self.unverified.add((repo, name))
        return out


class SeedServer:
    """The seed's side of the fan-out: the locked files of its cache over HTTP on its private
    address, each from the moment it is complete and checked, until each peer said it is done.
    Each repository it serves is `downloading` until its own download ends, then `ready` (or
    `failed`); /status?since=VERSION answers once that or the files on offer change (or after
    STATUS_WAIT_S), so a peer hears of a new file at once. Only the files of the lock are served:
    a name is a key, never a path."""

    def __init__(self, bind, port, peers, repos):
        self.repos = dict(repos)  # repository -> downloading | ready | failed
        self.files = {}  # (repository, file) -> path
        self.version = 0  # one more at each change of repos or files
        self.active = time.monotonic()  # the last request or chunk sent: a silent peer is let go
        self.inflight = 0  # requests being answered (a peer waiting on /status is not silent)
        self.waiting = set(peers)
        self.served = {}  # peer address -> files
        self.changed = threading.Condition()
        seed = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                with seed.changed:
                    seed.inflight += 1
                try:
                    seed.answer(self)
                finally:
                    with seed.changed:
                        seed.inflight -= 1
                        seed.active = time.monotonic()
                        seed.changed.notify_all()

        self.httpd = ThreadingHTTPServer((bind, port), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def answer(self, h):
        self.active = time.monotonic()
        url = urlsplit(h.path)
        parts = url.path.split("/")
        if url.path == "/status":
            return _send(h, 200, json.dumps(self.status(url.query)).encode())
        if len(parts) == 3 and parts[1] == "done":
            with self.changed:
                self.waiting.discard(unquote(parts[2]))
                self.changed.notify_all()
            return _send(h, 200, b"{}")
        path = None
        if len(parts) == 4 and parts[1] == "file":
            path = self.files.get((unquote(parts[2]), unquote(parts[3])))
        if path is None:
            return _send(h, 404, b"{}")
        with open(path, "rb") as f:
            h.send_response(200)
            h.send_header("Content-Length", str(os.fstat(f.fileno()).st_size))
            h.end_headers()
            while chunk := f.read(1 << 22):
                h.wfile.write(chunk)
                self.active = time.monotonic()
        peer = h.client_address[0]
        with self.changed:
            self.served[peer] = self.served.get(peer, 0) + 1

    def status(self, query):
        """What it serves now, once it differs from the version the peer last saw."""
        since = parse_qs(query).get("since", [""])[0]
        with self.changed:
            if since.lstrip("-").isdigit():
                self.changed.wait_for(lambda: self.version != int(since), timeout=STATUS_WAIT_S)
            files = {}
            for repo, name in sorted(self.files):
                files.setdefault(repo, []).append(name)
            return {"version": self.version, "repos": dict(self.repos), "files": files}

    def offer(self, repo, files):
        """Files of `repo` from now on: [(name, path)]."""
        if not files or repo not in self.repos:  # only what it said it serves
            return
        with self.changed:
            self.files.update({(repo, name): path for name, path in files})
            self.version += 1
            self.changed.notify_all()

    def ended(self, repo, state):
        """`repo`'s own download ended: ready or failed."""
        if repo not in self.repos:
            return
        with self.changed:
            self.repos[repo] = state
            self.version += 1
            self.changed.notify_all()

    def wait_for_peers(self, deadline, idle_s):
        """Until each peer said it is done, none asked anything for `idle_s` (a peer whose job
        died says nothing), or the job's time runs out; returns the peers it gave up on."""
        with self.changed:
            while (
                self.waiting
                and time.monotonic() < deadline
                and (self.inflight or time.monotonic() - self.active < idle_s)
            ):
                self.changed.wait(min(5.0, max(deadline - time.monotonic(), 0.01)))
        return sorted(self.waiting)

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def _send(h, code, body):
    h.send_response(code)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    h.wfile.write(body)


def _one_line(e):
    return " ".join(str(e).split()) or type(e).__name__


def _get_json(url, timeout):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.load(r)


def _seed_done(base, host):
    """Tells the seed this peer needs nothing more of it (it stops serving once all have)."""
    with contextlib.suppress(OSError, ValueError):
        urllib.request.urlopen(f"{base}/done/{quote(host, safe='')}", timeout=10).close()


def _stream(url, out, size_wanted, key, deadline):
    """(size, hash) of what the URL sends, written to `out`; stops past `size_wanted`."""
    digest = hashlib.sha256() if key == "sha256" else hashlib.sha1(b"blob %d\0" % size_wanted)
    size = 0
    timeout = max(min(deadline - time.monotonic(), 300), 1)
    with urllib.request.urlopen(url, timeout=timeout) as r:
        while chunk := r.read(1 << 22):
            size += len(chunk)
            if size > size_wanted:
                return size, ""
            digest.update(chunk)
            out.write(chunk)
    return size, digest.hexdigest()


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
    fan = job.req.get("fanout") or {}
    seed = None
    try:
        job.directories()
        if fan.get("role") == "seed" and job.req.get("serve_to"):
            states, offered = job.seed_files()
            try:
                seed = SeedServer(fan["seed_address"], fan["port"], job.req["serve_to"], states)
            except OSError as e:  # its peers find no seed and take the Hub
                job.notes.append(f"not serving on {fan['seed_address']}:{fan['port']}: {_one_line(e)}")
            else:
                for repo, files in offered.items():
                    seed.offer(repo, files)
        repos = list(job.req["repos"])
        if fan.get("role") == "peer" and repos:
            repos = job.from_seed(repos)
        # a node of the fan-out needs no client when nothing is left for the Hub (a Kubernetes
        # install container asks for the client alone: no repositories, no fan-out)
        if repos or fan.get("role") not in ("seed", "peer"):
            try:
                job.client()
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                job.fail_rest(f"no client: {job.tail(str(e))}")
            else:
                job.download(repos, seed)
        if seed is not None:
            for repo, state in list(seed.repos.items()):
                if state == "downloading":  # no client, or its download never started
                    seed.ended(repo, "failed")
            # what it checked and offered stays good for its peers, its own failure or not
            left = seed.wait_for_peers(job.deadline, fan.get("wait_s", 300))
            job.notes.append(
                f"served {sum(seed.served.values())} files to {len(seed.served)} peers"
                + (f"; no word from {', '.join(left)}" if left else "")
            )
    except Stopped as e:
        job.fail_rest(str(e))
    except Exception as e:  # the report is the only way back to the wait play
        job.fail_rest(job.tail(f"{type(e).__name__}: {e}"))
    finally:
        if seed is not None:
            seed.stop()
        # A second signal must not cut the clean-up short: the token file goes whatever happens.
        for sig in _SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        job.stop()
    print(json.dumps(job.report()))
    return 1 if job.failed else 0


if __name__ == "__main__":
    sys.exit(main())
