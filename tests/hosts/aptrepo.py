"""A signed local apt repository whose packages carry the real vendor names and layouts.

The packages are tiny: they ship the stand-in tools from `standin/` at the paths the real
packages use, plus real systemd units, so a role's key download, repository definition,
version pinning, install, service and config steps all run against them unchanged. Each repo
mirrors the URL layout of its vendor (CUDA and libnvidia-container flat repos, Docker and
radeon dists/ repos) under one HTTP root that tests pass to the roles as base URLs.

With `engine_debs` (the real Debian engine fetched by scripts/setup.d/25-docker-engine.sh),
Docker's repository serves the real docker.io under Docker's package names instead of the
stand-in engine: `docker-ce` is docker.io renamed, `containerd.io` depends on containerd.

With `debian_debs` (Debian's ffmpeg and what it needs beyond the rootfs, fetched by
scripts/setup.d/27-sglang-image-build.sh), `debian/` is a Debian archive for bookworm (and an
empty bookworm-updates) holding those real packages: the stand-in SGLang base images' apt sources
point at it, so a real `docker build` runs `apt-get install ffmpeg` against it; `snapshot` keeps
it as a snapshot service keeps an archive at a moment.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

STANDIN = Path(__file__).parent / "standin"
DRIVER_BRANCH = "595"
DRIVER = "595.91.07"  # the version the hardware profile pins
DRIVER_NEWER = "595.99.01"  # also in the repo: pinning must keep it out
TOOLKIT = "1.20.1"
DOCKER = "29.1.3"
ROCM = "7.0.2"
CACHE = Path(os.environ.get("FLASHFLEET_TEST_HOSTS_CACHE", "/var/cache/flashfleet/test-hosts"))
ENGINE_DEBS = CACHE / "docker-engine-debs"
# The real derived-image build's inputs: debs/ (ffmpeg) and wheels/ (the role's pins)
IMAGE_BUILD = CACHE / "sglang-image-build"


def deb_field(deb: Path, name: str) -> str:
    return subprocess.run(["dpkg-deb", "-f", str(deb), name], check=True, capture_output=True,
                          text=True).stdout.strip()  # fmt: skip


def real_engine_version(engine_debs: Path = ENGINE_DEBS) -> str:
    """The real engine's Debian version without Docker's epoch (20.10.24+dfsg1-1+deb12u1+b6)."""
    return deb_field(next(engine_debs.glob("docker-ce_*.deb")), "Version").split(":", 1)[1]


def real_engine_debs(engine_debs: Path) -> list[Deb]:
    """Docker's other package names over the real Debian engine (`docker-ce` is docker.io
    itself, renamed by the set-up step): the CLI ships inside it, containerd is Debian's."""
    containerd = deb_field(next(engine_debs.glob("containerd_*.deb")), "Version")
    ours = f"5:{real_engine_version(engine_debs)}"
    return [
        Deb("docker-ce-cli", ours, depends=f"docker-ce (= {ours})",
            files={"/usr/share/doc/docker-ce-cli/standin": "the CLI ships in docker-ce here\n"}),
        Deb("containerd.io", containerd, depends=f"containerd (= {containerd})"),
    ]  # fmt: skip


@dataclass
class Deb:
    name: str
    version: str
    tools: dict[str, str] = field(default_factory=dict)  # installed path -> standin file
    files: dict[str, str] = field(default_factory=dict)  # installed path -> content
    units: dict[str, str] = field(default_factory=dict)  # unit name -> ExecStart
    depends: str = ""
    conffiles: tuple[str, ...] = ()


def unit(description: str, exec_start: str) -> str:
    return textwrap.dedent(f"""\
        [Unit]
        Description={description}

        [Service]
        ExecStart={exec_start}
        Restart=no
        # systemd in a test host sometimes cannot move a restarted process into the cgroup its
        # last run left behind ("Failed to kill control group ... Input/output error", then
        # status=219/CGROUP): an artefact of nested cgroups, never of the daemon, so only that
        # status starts it again. Any other exit stays a failure.
        RestartForceExitStatus=219
        RestartSec=1

        [Install]
        WantedBy=multi-user.target
        """)


def nvidia_debs(version: str) -> list[Deb]:
    rev = f"{version}-1"
    driver_tools = {
        "/usr/bin/nvidia-smi": "nvidia-smi",
        "/usr/bin/nvidia-persistenced": "nvidia-persistenced",
    }
    persistenced = {"nvidia-persistenced": "/usr/bin/nvidia-persistenced"}
    return [
        Deb(f"nvidia-driver-{DRIVER_BRANCH}-open", rev, driver_tools, units=persistenced,
            files={"/usr/share/doc/nvidia-standin/kernel-modules": "open\n"}),
        Deb(f"nvidia-driver-{DRIVER_BRANCH}", rev, driver_tools, units=persistenced,
            files={"/usr/share/doc/nvidia-standin/kernel-modules": "proprietary\n"}),
        Deb(f"nvidia-fabricmanager-{DRIVER_BRANCH}", rev,
            {"/usr/bin/nv-fabricmanager": "nv-fabricmanager"},
            units={"nvidia-fabricmanager": "/usr/bin/nv-fabricmanager"}),
        Deb(f"nvidia-imex-{DRIVER_BRANCH}", rev,
            {"/usr/bin/nvidia-imex": "nvidia-imex", "/usr/bin/nvidia-imex-ctl": "nvidia-imex-ctl"},
            files={"/etc/nvidia-imex/nodes_config.cfg": "",
                   "/etc/nvidia-imex/config.cfg": "IMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg\n"},
            units={"nvidia-imex": "/usr/bin/nvidia-imex"},
            conffiles=("/etc/nvidia-imex/nodes_config.cfg", "/etc/nvidia-imex/config.cfg")),
    ]  # fmt: skip


def standin_engine_debs() -> list[Deb]:
    return [
        Deb("docker-ce", f"5:{DOCKER}-1~debian.12~bookworm", {"/usr/bin/dockerd": "dockerd"},
            units={"docker": "/usr/bin/dockerd"}, depends="docker-ce-cli, containerd.io"),
        Deb("docker-ce-cli", f"5:{DOCKER}-1~debian.12~bookworm", {"/usr/bin/docker": "docker"}),
        Deb("containerd.io", "2.1.5-1~debian.12~bookworm",
            files={"/usr/share/doc/containerd.io/standin": "containerd is not run here\n"}),
    ]  # fmt: skip


def repositories(
    engine_debs: Path | None = None, debian_debs: Path | None = None
) -> dict[str, tuple[str, str | None, list[Deb]]]:
    """repo dir -> (suite/component or flat marker, key path, packages)."""
    rocm_rev = f"{ROCM}.70002-56~22.04"
    docker = real_engine_debs(engine_debs) if engine_debs else standin_engine_debs()
    debian = {"debian": ("bookworm/main", None, [])} if debian_debs else {}
    return {
        **debian,
        "cuda/repos/debian12/x86_64": ("flat", "3bf863cc.pub",
                                       nvidia_debs(DRIVER) + nvidia_debs(DRIVER_NEWER)),
        "libnvidia-container/stable/deb/amd64": ("flat", None, [
            Deb("nvidia-container-toolkit", f"{TOOLKIT}-1",
                {"/usr/bin/nvidia-ctk": "nvidia-ctk",
                 "/usr/bin/nvidia-container-runtime": "nvidia-container-runtime",
                 "/usr/bin/nvidia-container-runtime-hook": "nvidia-container-runtime-hook"}),
        ]),
        "docker/linux/debian": ("bookworm/stable", "gpg", docker),
        "amdgpu/30.10.2/ubuntu": ("jammy/main", None, [
            Deb("amdgpu-dkms", "1:6.14.14.30100200-2212064.22.04",
                files={"/usr/src/amdgpu-standin/installed": "kernel driver built by dkms\n"}),
        ]),
        f"rocm/apt/{ROCM}": ("jammy/main", None, [
            Deb("amd-smi-lib", rocm_rev, {f"/opt/rocm-{ROCM}/bin/amd-smi": "amd-smi"}),
            Deb("rocm", rocm_rev, depends="amd-smi-lib",
                files={f"/opt/rocm-{ROCM}/.info/version": f"{ROCM}-56\n"}),
        ]),
    }  # fmt: skip


def build_deb(deb: Deb, out: Path) -> Path:
    root = out / f"{deb.name}_{deb.version.split(':')[-1]}"
    (root / "DEBIAN").mkdir(parents=True)
    upstream = deb.version.split(":")[-1].split("-")[0]
    for path, source in deb.tools.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text((STANDIN / source).read_text().replace("@VERSION@", upstream))
        target.chmod(0o755)
    for path, content in deb.files.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    for name, exec_start in deb.units.items():
        target = root / f"lib/systemd/system/{name}.service"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(unit(f"{name} ({deb.name} stand-in)", exec_start))
    control = [f"Package: {deb.name}", f"Version: {deb.version}", "Architecture: amd64",
               "Maintainer: flashfleet tests <tests@flashfleet.invalid>",
               f"Description: stand-in for {deb.name}"]  # fmt: skip
    if deb.depends:
        control.append(f"Depends: {deb.depends}")
    (root / "DEBIAN/control").write_text("\n".join(control) + "\n")
    if deb.conffiles:
        (root / "DEBIAN/conffiles").write_text("\n".join(deb.conffiles) + "\n")
    if deb.name == "amd-smi-lib":  # the real package links the ROCm tree into PATH
        (root / "DEBIAN/postinst").write_text(
            f"#!/bin/sh\nln -sfn /opt/rocm-{ROCM} /opt/rocm\nln -sf /opt/rocm/bin/amd-smi /usr/bin/amd-smi\n"
        )
        (root / "DEBIAN/postinst").chmod(0o755)
    deb_file = out / f"{root.name}_amd64.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "-b", str(root), str(deb_file)],
                   check=True, capture_output=True)  # fmt: skip
    return deb_file


class AptRepository:
    """Builds every repository under `root`, signed with a throwaway key in `gnupg_home`."""

    def __init__(
        self, root: Path, gnupg_home: Path, engine_debs: Path | None = None, debian_debs: Path | None = None
    ) -> None:
        self.root = root
        self.gnupg = gnupg_home
        self.engine_debs = engine_debs
        self.debian_debs = debian_debs
        self.debs: dict[str, Path] = {}
        self.layouts: dict[str, str] = {}  # repository -> "flat" or "<suite>/<component>"

    def _gpg(self, *args: str) -> None:
        subprocess.run(["gpg", "--batch", "--yes", "--homedir", str(self.gnupg), *args],
                       check=True, capture_output=True)  # fmt: skip

    def build(self) -> None:
        self.gnupg.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._gpg("--passphrase", "", "--quick-gen-key", "flashfleet test repo", "ed25519",
                  "sign", "never")  # fmt: skip
        key = self.root / "repo-key.asc"
        self.root.mkdir(parents=True, exist_ok=True)
        self._gpg("--armor", "--output", str(key), "--export")
        work = self.root.parent / "debs"
        for rel, (layout, key_name, debs) in repositories(self.engine_debs, self.debian_debs).items():
            repo = self.root / rel
            pool = repo if layout == "flat" else repo / "pool"
            pool.mkdir(parents=True, exist_ok=True)
            if self.engine_debs and rel.startswith("docker/"):
                # docker.io and what it needs: on a node the distro's archive has those
                for real in self.engine_debs.glob("*.deb"):
                    shutil.copy(real, pool / real.name)
            if self.debian_debs and rel == "debian":
                for real in self.debian_debs.glob("*.deb"):
                    shutil.copy(real, pool / real.name)
            for deb in debs:
                built = build_deb(deb, work)
                target = pool / built.name
                built.rename(target)
                self.debs.setdefault(f"{deb.name}={deb.version}", target)
            self.layouts[rel] = layout
            self._publish_index(rel)
            if rel == "debian":  # Debian's archive also has a -updates suite (empty here)
                updates = repo / "dists/bookworm-updates"
                (updates / "main/binary-amd64").mkdir(parents=True)
                (updates / "main/binary-amd64/Packages").write_text("")
                self._release(updates, "bookworm-updates", "main", "")
            if key_name:  # the CUDA repo's own key file, docker's `gpg`
                (repo / key_name).write_text(key.read_text())
        (self.root / "rocm/rocm.gpg.key").write_text(key.read_text())
        (self.root / "libnvidia-container/gpgkey").write_text(key.read_text())

    def _publish_index(self, rel: str) -> None:
        """The repository's Packages index over its pool, and its signed Release."""
        repo, layout = self.root / rel, self.layouts[rel]
        if layout == "flat":
            self._index(repo, repo)
            return
        suite, component = layout.split("/")
        dist = repo / "dists" / suite
        (dist / component / "binary-amd64").mkdir(parents=True, exist_ok=True)
        packages = subprocess.run(
            ["apt-ftparchive", "packages", "pool"], cwd=repo, check=True, capture_output=True, text=True
        ).stdout
        (dist / component / "binary-amd64/Packages").write_text(packages)
        # AMD's pin (`o=repo.radeon.com`) matches on the Release file's Origin
        origin = "repo.radeon.com" if rel.startswith(("amdgpu", "rocm")) else ""
        self._release(dist, suite, component, origin)

    def publish(self, rel: str, deb: Deb) -> Path:
        """A package added to the repository `rel` (a vendor's release after a lock was made): built,
        indexed and the Release signed again, as the vendor publishes it."""
        repo = self.root / rel
        built = build_deb(deb, self.root.parent / "debs")
        target = (repo if self.layouts[rel] == "flat" else repo / "pool") / built.name
        built.rename(target)
        self._publish_index(rel)
        return target

    def snapshot(self, rel: str, moment: str) -> str:
        """The repository `rel` as it is now, kept under snapshot/<rel>/<moment>/ as a snapshot
        service keeps an archive (it never changes afterwards); its path below the root."""
        kept = f"snapshot/{rel}/{moment}"
        # the indexes are copied (publishing rewrites them in place); the packages' files never
        # change once published, so they are linked
        shutil.copytree(self.root / rel / "dists", self.root / kept / "dists")
        shutil.copytree(self.root / rel / "pool", self.root / kept / "pool", copy_function=os.link)
        return kept

    def withdraw(self, rel: str, published: Path) -> None:
        """A package `publish` added, taken out again."""
        published.unlink()
        self._publish_index(rel)

    def _index(self, repo: Path, dist: Path) -> None:
        packages = subprocess.run(["apt-ftparchive", "packages", "."], cwd=repo, check=True,
                                  capture_output=True, text=True).stdout  # fmt: skip
        (repo / "Packages").write_text(packages)
        self._release(dist, None, None, "")

    def _release(self, dist: Path, suite: str | None, component: str | None, origin: str) -> None:
        opts = ["-o", f"APT::FTPArchive::Release::Origin={origin}"] if origin else []
        if suite:
            opts += ["-o", f"APT::FTPArchive::Release::Suite={suite}",
                    "-o", f"APT::FTPArchive::Release::Codename={suite}",
                    "-o", f"APT::FTPArchive::Release::Components={component}",
                    "-o", "APT::FTPArchive::Release::Architectures=amd64"]  # fmt: skip
        release = subprocess.run(["apt-ftparchive", *opts, "release", "."], cwd=dist,
                                 check=True, capture_output=True, text=True).stdout  # fmt: skip
        (dist / "Release").write_text(release)
        self._gpg("--clearsign", "--output", str(dist / "InRelease"), str(dist / "Release"))
        self._gpg("--armor", "--detach-sign", "--output", str(dist / "Release.gpg"),
                  str(dist / "Release"))  # fmt: skip
