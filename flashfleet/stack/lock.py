"""A stack's lock: ``stacks/<stack>.lock.yaml``, beside its stack file, reviewed in git.

The lock pins what a stack's name alone leaves floating. Today that is the weights: for each
repository the stack downloads (the checkpoint, and the draft where the recipe has one), the
commit its revision resolved to when `flashfleet lock` ran, and every file of that commit with
its size and hash as the Hub lists them (sha256 for LFS files, the git blob id otherwise). The
nodes download that commit, not the branch, and check each file against the lock before anything
is served. The image: for the base image the node pulls (`repository:tag`), the digest the tag
named in its registry when `flashfleet lock` ran, and each platform's manifest digest; the nodes
pull and run it by that digest, so a tag moved since is not what runs. The packages: for each
Python distribution the nodes pip-install (the derived image's Transformers, tokenizers and
torchcodec, the weights download client, the Mooncake wheel), the version its specifier named
on the index the nodes install from, and every file of that version with its sha256; the nodes
install exactly those bytes. The vendors' apt packages (the NVIDIA driver, Docker Engine, the NVIDIA
container toolkit, the AMD driver and ROCm): for each repository directory the nodes' sources may
name (each distribution and architecture the nodes may run), every package apt takes from it for
the role, with its version and SHA256 as the repository's index lists them; the nodes check what
apt would fetch against them before installing, and install exactly those versions. What the
derived image apt-installs from its base's distribution (FFmpeg): a snapshot of that archive, the
hash of each suite's signed index in it, and each package's version and SHA256; the build reads
that snapshot only. The AMIs an AWS stack's instances boot: the id each public SSM parameter
(the Deep Learning AMI, a router's Ubuntu) named in the stack's region; the instances boot that
id. `plan` shows each part as locked or floating.

Written by `flashfleet lock` (flashfleet/cli/lock.py), read here with the stack file: a lock that
cannot be read is refused like a broken stack file, never ignored.
"""

from __future__ import annotations

import difflib
import hashlib
import io
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)

from flashfleet.stack.inert_text import all_not_inert, path_text

_STRICT = ConfigDict(extra="forbid", frozen=True)


def _sorted(value: Any) -> Any:
    """A mapping in key order: a lock resolved today and one read back from its file hash alike."""
    return dict(sorted(value.items())) if isinstance(value, dict) else value


SHA1 = r"^[0-9a-f]{40}$"
SHA256 = r"^[0-9a-f]{64}$"
DIGEST = r"^sha256:[0-9a-f]{64}$"


class LockedFile(BaseModel):
    """One file of a locked commit, as the Hub lists it."""

    model_config = _STRICT

    size: StrictInt = Field(ge=0)
    # An LFS file (a weights shard): the sha256 of its bytes. Otherwise the git blob id (sha1 of
    # "blob <size>\0" and the bytes), which is all the Hub gives for a small file.
    sha256: str | None = Field(default=None, pattern=SHA256)
    git_oid: str | None = Field(default=None, pattern=SHA1)


def hub_file_name(name: str) -> str:
    """A file name as the Hub lists a repository's files: a relative POSIX path of named parts.
    The nodes join it to their snapshot folder, and remove it there on a size or hash mismatch:
    an absolute path or a `..` would reach any file on the node (the download program checks
    again, roles/model_weights/files/weights_fetch.py)."""
    if not name or "\\" in name or not name.isprintable():
        raise ValueError(f"{name!r} is not a repository file name: a relative POSIX path of printable text")
    if name.startswith("/"):
        raise ValueError(f"{name!r} is not a repository file name: an absolute path")
    if any(part in ("", ".", "..") for part in name.split("/")):
        raise ValueError(f"{name!r} is not a repository file name: an empty, `.` or `..` part")
    return name


HubFileName = Annotated[str, AfterValidator(hub_file_name)]


class LockedRepo(BaseModel):
    """One repository the stack downloads, resolved to a commit."""

    model_config = _STRICT

    revision: str = Field(min_length=1)  # what was asked for (the catalog's, e.g. main)
    commit: str = Field(pattern=SHA1)  # what it resolved to
    files: dict[HubFileName, LockedFile] = Field(min_length=1)

    _files_in_order = field_validator("files", mode="before")(_sorted)


class LockedImage(BaseModel):
    """One image the nodes pull (``repository:tag``), resolved to what its registry served."""

    model_config = _STRICT

    # what `docker pull` asks for: the image index's digest for a multi-platform tag, else the
    # one manifest's
    digest: str = Field(pattern=DIGEST)
    # os/arch (linux/amd64, linux/arm64) -> that platform's manifest digest: each architecture
    # the stack's nodes need is in the tag
    platforms: dict[str, Annotated[str, Field(pattern=DIGEST)]] = Field(min_length=1)


class LockedPackageFile(BaseModel):
    """One file of a locked distribution (a wheel for one platform, or the sdist)."""

    model_config = _STRICT

    sha256: str = Field(pattern=SHA256)


class LockedPackage(BaseModel):
    """One Python distribution a node installs, resolved on the index it installs from: the
    version, and every file of that version with its sha256 (pip on the node takes the one that
    fits it, and refuses bytes that match none)."""

    model_config = _STRICT

    version: str = Field(min_length=1)
    files: dict[str, LockedPackageFile] = Field(min_length=1)

    @property
    def sha256s(self) -> list[str]:
        return sorted(f.sha256 for f in self.files.values())

    _files_in_order = field_validator("files", mode="before")(_sorted)


class LockedDeb(BaseModel):
    """One Debian package apt takes from a vendor's repository, as its index lists it."""

    model_config = _STRICT

    version: str = Field(min_length=1)
    sha256: str = Field(pattern=SHA256)
    size: StrictInt = Field(ge=0)


class LockedImageApt(BaseModel):
    """What the derived image apt-installs from its base's distribution archive (FFmpeg): a
    snapshot of that archive, which never changes after its moment, with the hash of each suite's
    signed index (InRelease: it lists every Packages index's hash, each of which lists every
    package's), and the version and file of each package asked for. With the base locked by
    digest, the build installs the same packages, dependencies included, whenever it runs."""

    model_config = _STRICT

    distribution: str = Field(pattern=r"^[a-z]+ [a-z]+$")  # the base's: os-release ID and codename
    arch: str = Field(pattern=r"^[a-z0-9]+$")  # Debian's name for the node's (amd64, arm64)
    snapshot: str = Field(min_length=1)  # <archive>/<YYYYMMDDTHHMMSSZ>
    components: list[str] = Field(min_length=1)
    suites: dict[str, Annotated[str, Field(pattern=SHA256)]] = Field(
        min_length=1
    )  # suite -> InRelease sha256
    packages: dict[str, LockedDeb] = Field(min_length=1)

    _in_order = field_validator("suites", "packages", mode="before")(_sorted)


class LockedAmi(BaseModel):
    """The AMI a public SSM parameter (AWS's Deep Learning AMI, Canonical's Ubuntu) named in the
    stack's region when `flashfleet lock` ran: an id names one image for good."""

    model_config = _STRICT

    region: str = Field(min_length=1)
    ami: str = Field(pattern=r"^ami-[0-9a-f]{8,17}$")


class StackLock(BaseModel):
    model_config = _STRICT

    stack: str
    locked_on: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")  # the day `flashfleet lock` resolved it
    weights: dict[str, LockedRepo] = Field(min_length=1)
    images: dict[str, LockedImage] = Field(default_factory=dict)
    # what the nodes pip-install, by the name they install it as: the derived image's pins, the
    # weights download client, the Mooncake wheel
    packages: dict[str, LockedPackage] = Field(default_factory=dict)
    # what the nodes apt-install from a vendor's repository, by the repository directory the
    # node's sources name (one per distribution and architecture the nodes may run) and package
    apt: dict[str, dict[str, LockedDeb]] = Field(default_factory=dict)
    # what the derived image apt-installs from its base's distribution archive, by the base image
    # (repository:tag, as in images)
    image_apt: dict[str, LockedImageApt] = Field(default_factory=dict)
    # the AMIs an AWS stack's instances boot, by the SSM parameter that named them
    amis: dict[str, LockedAmi] = Field(default_factory=dict)

    _in_order = field_validator("weights", "images", "packages", "apt", "image_apt", "amis", mode="before")(
        _sorted
    )

    @model_validator(mode="after")
    def _inert(self) -> StackLock:
        # what a registry or the Hub answered is free text too: refused when the lock is made,
        # not only when it is read back
        if refused := all_not_inert(self.model_dump(mode="json")):
            where, why = refused[0]
            raise ValueError(f"{path_text(where)}: {why}")
        return self

    @property
    def digest(self) -> str:
        """The hash of what the lock pins (not the day it was written): what a benchmark's
        fingerprint and an evidence record carry."""
        # a lock that pins no package hashes as it did before packages (pip, apt) were locked
        unpinned = {"locked_on"} | {
            part for part in ("packages", "apt", "image_apt", "amis") if not getattr(self, part)
        }
        pinned = self.model_dump_json(exclude=unpinned, exclude_none=True)
        return hashlib.sha256(pinned.encode()).hexdigest()

    def pins_same(self, other: StackLock) -> bool:
        return other.digest == self.digest


class LockError(ValueError):
    """The lock file cannot be used; the message is one line."""


def lock_file_name(stack: str) -> str:
    return f"{stack.replace('/', '-')}.lock.yaml"


def lock_path(stack_file: Path, stack: str) -> Path:
    return stack_file.parent / lock_file_name(stack)


def dump_lock(lock: StackLock) -> str:
    """The lock as the reviewable text `flashfleet lock` writes: sorted keys, one file a line."""
    from ruamel.yaml import YAML

    out = io.StringIO()
    out.write(
        f"# The lock of stack {lock.stack}: written by `flashfleet lock {lock.stack}`, checked on the\n"
        "# nodes. Review its diff like code; `flashfleet lock --update` moves it.\n"
    )
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = None  # a file's size and hash on its own line, in braces
    yaml.width = 200
    data = lock.model_dump(mode="json", exclude_none=True)
    data["weights"] = {
        repo: {**entry, "files": dict(sorted(entry["files"].items()))}
        for repo, entry in sorted(data["weights"].items())
    }
    data["images"] = dict(sorted(data["images"].items()))
    data["packages"] = {
        name: {**entry, "files": dict(sorted(entry["files"].items()))}
        for name, entry in sorted(data["packages"].items())
    }
    data["apt"] = {index: dict(sorted(debs.items())) for index, debs in sorted(data["apt"].items())}
    data["image_apt"] = dict(sorted(data["image_apt"].items()))
    data["amis"] = dict(sorted(data["amis"].items()))
    for part in ("packages", "apt", "image_apt", "amis"):
        if not data[part]:
            del data[part]  # a lock written before these were locked reads back the same
    yaml.dump(data, out)
    return out.getvalue()


def read_lock(path: Path) -> StackLock | None:
    """The lock at `path`, None when there is none; LockError when it is there but unusable."""
    from flashfleet.stack.yamlfile import YamlFileError, load_yaml_file

    if not path.exists():
        if path.is_symlink():  # a link to nothing is not "no lock": someone put it there
            raise LockError("a link to a file that does not exist; a lock is a plain file")
        return None
    try:
        doc: Any = load_yaml_file(path)
    except YamlFileError as err:
        raise LockError(str(err)) from None
    if refused := all_not_inert(doc):  # named by its own path, whatever field holds it
        where, why = refused[0]
        raise LockError(f"{path_text(where)}: {why}")
    try:
        return StackLock.model_validate(doc)
    except ValidationError as err:
        first = err.errors()[0]
        # a mapping key's own error ends in "[key]": the key itself names the place
        field = path_text(tuple(p for p in first["loc"] if p != "[key]")) or "(top level)"
        raise LockError(f"{field}: {first['msg'].removeprefix('Value error, ')}") from None


def lock_diff(old: StackLock, new: StackLock, name: str) -> str:
    """What `--update` would change, as a unified diff of the two files' text."""
    before, after = dump_lock(old).splitlines(keepends=True), dump_lock(new).splitlines(keepends=True)
    return "".join(difflib.unified_diff(before, after, name, name))
