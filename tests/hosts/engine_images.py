"""Stand-in SGLang base images for a real Docker engine on a test host, made without a registry.

`docker import` of the test-host rootfs (Debian 12 with python3, docs and apt lists left out)
plus the files in `image/`: a `sglang` entry point that prints what the container sees
(`flashfleet-probe {json}`) and then runs the OpenAI-compatible stand-in server
(tests/serve/standin_sglang.py), and the real SGLang router (sglang-router with what it imports,
tests/hosts/router_site.py) in the image's dist-packages, behind a `python` that prints the same
probe line and then runs python3. One import per host; every pinned name is a tag of it.

The faithful base (`release=True`) is the same image with the pinned release's own Python
packages in place of the router's: the site-packages of the parser oracle's venv
(scripts/setup.d/10-sglang-oracle.sh, kept outside the clone), which holds what the sglang 0.5.23
wheel pins for linux x86_64 (PyPI's torch 2.14.1 with its CUDA libraries, torchcodec 0.17.0,
transformers 5.19.0, tokenizers 0.23.2), the sglang wheel itself, sglang-router 0.3.2 and pip.
The derived image built on it meets the release's real torch, as it would on a node; the base
still runs the stand-in server (no GPU here).

Like the upstream images, the system Python takes `python3 -m pip install`: pip is the
rootfs's own wheel (Debian's python3-pip-whl) unpacked into site-packages, and Debian's
EXTERNALLY-MANAGED marker is left out. The image's Debian archive is `apt_repo` (the
controller's local archive, tests/hosts/aptrepo.py), signed by `apt_key`: a real
`docker build` on it runs `apt-get install` as on a node.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import IO

from .harness import BASE_ROOTFS, HostPool
from .router_site import copy_router_site, copy_site

HERE = Path(__file__).parent
ORACLE_VENV = Path(os.environ.get("FLASHFLEET_ORACLE_VENV", HERE.parents[1] / ".venv-oracle"))
STANDIN_SERVER = HERE.parent / "serve/standin_sglang.py"
SGLANG_FLAGS = HERE.parents[1] / "flashfleet/catalog/sglang_flags.txt"  # the stand-in parses its argv with it
# Left out of the image: what no stand-in server reads (about 120 MB of the rootfs).
EXCLUDE = ("./usr/share/doc", "./usr/share/man", "./usr/share/locale", "./var/lib/apt/lists",
           "./var/cache/apt", "./etc/ssh/ssh_host_*", "./etc/apt/sources.list",
           "./usr/lib/python3.11/EXTERNALLY-MANAGED")  # fmt: skip
SITE = "usr/local/lib/python3.11/dist-packages"
# What the overlay adds, named one by one: docker import refuses a path twice in its tarball.
ADDED = ("./opt/flashfleet-standin", "./usr/local/bin/sglang", "./usr/local/bin/python", "./usr/local/bin/smg",
         "./etc/apt/sources.list.d/debian.sources")  # fmt: skip
APT_KEY = "./etc/apt/trusted.gpg.d/flashfleet-test.asc"
# Mooncake's store client loads libibverbs, librdmacm, libnuma and libcurl (even for TCP): the
# libraries of 30-mooncake.sh's Debian packages (its other packages are tools the role uses).
MOONCAKE_LIBS = ("ibverbs-providers", "lib")
MOONCAKE_NOT_LIBS = ("libperl",)


def _pip(root: Path) -> list[str]:
    """Unpacks the rootfs's pip wheel into the image's site-packages; returns what it added."""
    wheel = next((BASE_ROOTFS / "usr/share/python-wheels").glob("pip-*.whl"))
    with zipfile.ZipFile(wheel) as whl:
        whl.extractall(root / SITE)
        return sorted({f"./{SITE}/{name.split('/')[0]}" for name in whl.namelist()})


def release_site() -> Path:
    """The release's own site-packages (the oracle venv's), for the faithful base."""
    site = ORACLE_VENV / "lib/python3.11/site-packages"
    if not (site / "torch").is_dir() or not (site / "sglang").is_dir():
        raise RuntimeError(f"{site}: no torch or sglang; run scripts/setup.d/10-sglang-oracle.sh")
    return site.resolve()


def _overlay(
    root: Path, apt_repo: str | None, apt_key: str | None, release: bool, mooncake: Path | None = None
) -> list[str]:
    """The files the stand-in image adds to the rootfs, laid out under `root`; returns their
    top-level paths for tar. No `apt_repo`: the image has no Debian archive (nothing builds on it)."""
    standin = root / "opt/flashfleet-standin"
    standin.mkdir(parents=True)
    shutil.copy(STANDIN_SERVER, standin / "standin_sglang.py")
    shutil.copy(SGLANG_FLAGS, standin / SGLANG_FLAGS.name)
    shutil.copy(HERE / "image/entry.py", standin / "entry.py")
    bin_dir = root / "usr/local/bin"
    bin_dir.mkdir(parents=True)
    shutil.copy(HERE / "image/sglang", bin_dir / "sglang")
    shutil.copy(HERE / "image/python", bin_dir / "python")  # the upstream images have `python`
    shutil.copy(HERE / "image/smg", bin_dir / "smg")  # the derived image's router, `smg launch`
    if release:  # the release's packages, the router and pip among them
        site = [f"./{SITE}/{name}" for name in copy_site(release_site(), root / SITE)]
    else:
        site = [f"./{SITE}/{name}" for name in copy_router_site(root / SITE)] + _pip(root)
    if mooncake is not None:
        site += _mooncake(root, mooncake)
    if apt_repo is None or apt_key is None:
        return [*ADDED[:-1], *site]
    sources = root / "etc/apt/sources.list.d/debian.sources"
    sources.parent.mkdir(parents=True)
    sources.write_text(f"Types: deb\nURIs: {apt_repo}\nSuites: bookworm\nComponents: main\n")
    key = root / APT_KEY
    key.parent.mkdir(parents=True)
    key.write_text(apt_key)
    return [*ADDED, APT_KEY, *site]


def _mooncake(root: Path, cache: Path) -> list[str]:
    """Mooncake's store client in the image, as the upstream images carry it: the wheels of
    scripts/setup.d/30-mooncake.sh unpacked into site-packages (those the router's packages do
    not already hold) and the files of its Debian libraries that the rootfs lacks. Returns the
    paths added, one by one (docker import refuses a path twice, and the libraries land in
    folders the rootfs has)."""
    added = []
    present = {p.name.split("-")[0].lower() for p in (root / SITE).iterdir()}
    for wheel in sorted((cache / "wheels").glob("*.whl")):
        if wheel.name.split("-")[0].lower() in present:
            continue
        with zipfile.ZipFile(wheel) as whl:
            whl.extractall(root / SITE)
            added += sorted({f"./{SITE}/{name.split('/')[0]}" for name in whl.namelist()})
    with tempfile.TemporaryDirectory() as tmp:
        libs = Path(tmp)
        for deb in sorted((cache / "debs").glob("*.deb")):
            if deb.name.startswith(MOONCAKE_LIBS) and not deb.name.startswith(MOONCAKE_NOT_LIBS):
                subprocess.run(["dpkg-deb", "-x", str(deb), str(libs)], check=True)
        for path in sorted(libs.rglob("*")):
            rel = path.relative_to(libs)
            if path.is_dir() or rel.parts[:2] == ("usr", "share") or (BASE_ROOTFS / rel).exists():
                continue
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(path, target)
            added.append(f"./{rel}")
    return added


def import_image(
    pool: HostPool, host: str, ref: str, apt_repo: str, apt_key: str, release: bool = False
) -> str:
    """Streams the rootfs + overlay over SSH into `docker import` on the host; returns the id.
    `release`: the faithful base, with the release's own packages (about 6 GB: streamed, never
    written out)."""
    with tempfile.TemporaryDirectory() as tmp:
        overlay = Path(tmp)
        tar = subprocess.Popen(
            _tar(overlay, _overlay(overlay, apt_repo, apt_key, release), "-"), stdout=subprocess.PIPE
        )
        assert tar.stdout is not None
        done = _import(pool, host, ref, tar.stdout)
        tar.stdout.close()
        if tar.wait() != 0 or done.returncode != 0:
            raise RuntimeError(f"docker import on {host} failed: {done.stderr}")
        return done.stdout.strip()


def _tar(overlay: Path, added: list[str], dest: str) -> list[str]:
    excludes = [f"--exclude={pattern}" for pattern in EXCLUDE]
    return ["tar", "--numeric-owner", *excludes, "-C", str(BASE_ROOTFS), "-cf", dest, ".",
            "-C", str(overlay), *added]  # fmt: skip


def _import(
    pool: HostPool, host: str, ref: str, stream: IO[bytes], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    changes = " ".join(f"--change 'ENV {k}={v}'" for k, v in (env or {}).items())
    return subprocess.run(
        ["ssh", *pool.ssh_options(), f"root@{pool.hosts[host].address}",
         f"docker import --change 'CMD [\"sglang\"]' {changes} - {ref}"],
        stdin=stream, check=False, capture_output=True, text=True, timeout=900,
    )  # fmt: skip


def image_tarball(
    dest: Path,
    apt_repo: str | None = None,
    apt_key: str | None = None,
    release: bool = False,
    mooncake: Path | None = None,
) -> Path:
    """The image's file system as one tarball at `dest`, made once for any number of hosts.
    `mooncake`: the cache of scripts/setup.d/30-mooncake.sh, whose store client the image gets."""
    with tempfile.TemporaryDirectory() as tmp:
        overlay = Path(tmp)
        added = _overlay(overlay, apt_repo, apt_key, release, mooncake)
        subprocess.run(_tar(overlay, added, str(dest)), check=True)
    return dest


def load_image(pool: HostPool, host: str, tarball: Path, ref: str, env: dict[str, str] | None = None) -> str:
    """`docker import` of `tarball` on the host as `ref` (with `env` in the image's config);
    returns the id."""
    with tarball.open("rb") as stream:
        done = _import(pool, host, ref, stream, env)
    if done.returncode != 0:
        raise RuntimeError(f"docker import on {host} failed: {done.stderr}")
    return done.stdout.strip()


def stop_engines(pool: HostPool, hosts: Iterable[str]) -> None:
    """Removes every container and stops dockerd on `hosts`, before the pool closes: containers'
    cgroups live in the machine's own hierarchy and would outlive their host."""
    for host in hosts:
        pool.ssh(host, "docker rm -f $(docker ps -aq) 2>/dev/null; systemctl stop docker", check=False)
