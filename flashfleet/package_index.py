"""What a Python package's version is on the index the nodes install from, today: every file of
that version with its sha256, for `flashfleet lock`.

The index is the one the nodes' pip asks. A simple index (PyPI's https://pypi.org/simple/ or a
mirror of it) is read in its JSON form (PEP 691) when it offers one, else its HTML page (PEP
503), whose links carry `#sha256=` as PyPI's do; a find-links page (a folder of wheels served
over HTTP, which the roles then read with --no-index) is read as pip reads it, and a file whose
link carries no hash is fetched and hashed here. The newest version the specifier allows is taken,
as pip would take it (no pre-release unless the specifier names one, no yanked file unless pinned
by ==), and every file of it is listed: pip on a node picks the one that fits the node, and
refuses any whose bytes differ from all of them.
"""

from __future__ import annotations

import hashlib
import html.parser
import re
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flashfleet.stack.lock import LockedPackage

PYPI = "https://pypi.org/simple/"
_JSON = "application/vnd.pypi.simple.v1+json"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class PackageIndexError(RuntimeError):
    """The index did not resolve the package; the message is one line."""


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    sha256: str | None
    yanked: bool


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            found = dict(attrs)
            if found.get("href"):
                self.links.append((str(found["href"]), found))


def _from_html(text: str, base: str) -> list[IndexFile]:
    parser = _Links()
    parser.feed(text)
    out = []
    for href, attrs in parser.links:
        url = urllib.parse.urljoin(base, href)
        path, _, fragment = url.partition("#")
        algo, _, value = fragment.partition("=")
        name = urllib.parse.unquote(path.rstrip("/").rsplit("/", 1)[-1])
        sha = value.lower() if algo == "sha256" and _SHA256.match(value.lower()) else None
        out.append(IndexFile(name, path, sha, "data-yanked" in attrs))
    return out


def _from_json(doc: Any, base: str) -> list[IndexFile]:
    return [
        IndexFile(
            str(f["filename"]),
            urllib.parse.urljoin(base, str(f["url"])).partition("#")[0],
            (f.get("hashes") or {}).get("sha256"),
            bool(f.get("yanked")),
        )
        for f in doc["files"]
    ]


def _version_of(filename: str, project: str) -> Any:
    """The file's version, or None when it is not a distribution of `project`."""
    from packaging.utils import (
        InvalidSdistFilename,
        InvalidWheelFilename,
        canonicalize_name,
        parse_sdist_filename,
        parse_wheel_filename,
    )

    try:
        if filename.endswith(".whl"):
            name, version, *_ = parse_wheel_filename(filename)
        elif filename.endswith((".tar.gz", ".zip")):
            name, version = parse_sdist_filename(filename)
        else:
            return None
    except (InvalidWheelFilename, InvalidSdistFilename):
        return None
    return version if canonicalize_name(name) == canonicalize_name(project) else None


def resolve_package(
    project: str, specifier: str, *, index_url: str | None = None, find_links: str | None = None,
    platform: str | None = None,
) -> LockedPackage:  # fmt: skip
    """The newest version of `project` that `specifier` (such as ``==5.17.0`` or ``>=0.23.1``)
    allows on the index (or the find-links page, which the roles read alone), with every file of
    that version and its sha256. `platform` (x86_64, arm64): the nodes that install it; a version
    with no wheel for them is refused, naming the nearest versions that have one."""
    import httpx2  # huggingface_hub's HTTP client, already a dependency
    from packaging.specifiers import SpecifierSet
    from packaging.utils import canonicalize_name

    wanted = SpecifierSet(specifier)
    where = f"{project}{specifier}"
    if find_links is not None and "://" not in find_links.replace("file://", ""):
        return _pick(
            _folder(find_links, where), project, wanted, page=find_links, client=None, platform=platform
        )
    page = find_links or urllib.parse.urljoin(
        (index_url or PYPI).rstrip("/") + "/", canonicalize_name(project) + "/"
    )
    try:
        with httpx2.Client(timeout=60, follow_redirects=True) as client:
            answer = client.get(page, headers={"Accept": f"{_JSON}, text/html;q=0.1"})
            if answer.status_code != 200:
                raise PackageIndexError(f"{where}: {page} answered {answer.status_code}")
            kind = answer.headers.get("Content-Type", "").split(";")[0].strip()
            base = str(answer.url)
            files = _from_json(answer.json(), base) if kind == _JSON else _from_html(answer.text, base)
            return _pick(files, project, wanted, page=page, client=client, platform=platform)
    except httpx2.TransportError as err:  # refused, unreachable, timed out, a certificate refused
        raise PackageIndexError(f"{where}: {type(err).__name__}: {err}") from None
    except (KeyError, TypeError, ValueError) as err:
        raise PackageIndexError(f"{where}: {page} is not an index page pip reads ({err})") from None


def _pick(
    files: list[IndexFile], project: str, wanted: Any, *, page: str, client: Any, platform: str | None = None
) -> LockedPackage:
    """The newest version of `project` among `files` that `wanted` allows, with each file's sha256."""
    from packaging.version import Version

    from flashfleet.stack.lock import LockedPackage, LockedPackageFile

    where = f"{project}{wanted}"
    by_version: dict[Any, list[IndexFile]] = {}
    for f in files:
        version = _version_of(f.filename, project)
        if version is not None:
            by_version.setdefault(version, []).append(f)
    pinned = any(s.operator in ("==", "===") for s in wanted)
    # as pip: a pre-release only where the specifier names one
    pre = any(Version(s.version).is_prerelease for s in wanted if s.operator != "===")
    allowed = [
        v
        for v, fs in by_version.items()
        if wanted.contains(v, prereleases=pre) and (pinned or not all(f.yanked for f in fs))
    ]
    if not allowed:
        seen = ", ".join(str(v) for v in sorted(by_version)) or "none"
        raise PackageIndexError(f"{where}: {page} lists no version that fits (it lists: {seen})")
    version = max(allowed)
    if platform is not None and not any(fits(f.filename, platform) for f in by_version[version]):
        raise PackageIndexError(_no_wheel(where, str(version), platform, page, by_version))
    hashes = {}
    for f in sorted(by_version[version], key=lambda f: f.filename):
        if not (f.yanked and not pinned):
            hashes[f.filename] = LockedPackageFile(sha256=f.sha256 or _fetched_sha256(client, f.url, where))
    return LockedPackage(version=str(version), files=hashes)


def _folder(path: str, where: str) -> list[IndexFile]:
    """A controller folder of wheels (the roles copy it to the node and install from it alone)."""
    folder = Path(path.removeprefix("file://"))
    if not folder.is_dir():
        raise PackageIndexError(f"{where}: {folder} is not a folder")
    files = sorted(f for f in folder.iterdir() if f.is_file())
    return [IndexFile(f.name, f.as_uri(), _file_sha256(f), yanked=False) for f in files]


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fetched_sha256(client: Any, url: str, where: str) -> str:
    digest = hashlib.sha256()
    with client.stream("GET", url) as answer:
        if answer.status_code != 200:
            raise PackageIndexError(f"{where}: {url} answered {answer.status_code}")
        for chunk in answer.iter_bytes():
            digest.update(chunk)
    return digest.hexdigest()


# A wheel's platform tag for a node's CPU (linux): manylinux/musllinux/linux builds name it
_MACHINE = {"x86_64": "x86_64", "arm64": "aarch64"}


def fits(filename: str, platform: str) -> bool:
    """Whether a file of a distribution installs on a linux node of `platform` (x86_64, arm64)
    without a build: a wheel for that CPU, or a pure-Python one. An sdist does not count: the
    packages pinned per platform compile native code, which a serving image does not build."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    if not filename.endswith(".whl"):
        return False
    try:
        tags = parse_wheel_filename(filename)[3]
    except InvalidWheelFilename:
        return False
    machine = _MACHINE[platform]
    return any(
        t.platform == "any" or (t.platform.endswith(f"_{machine}") and "linux" in t.platform) for t in tags
    )


def _no_wheel(
    where: str, version: str, platform: str, page: str, by_version: dict[Any, list[IndexFile]]
) -> str:
    """The refusal of a version with no wheel for `platform`: the nearest versions that have one."""
    from packaging.version import Version

    have = sorted(v for v, fs in by_version.items() if any(fits(f.filename, platform) for f in fs))
    below = [v for v in have if v < Version(version)][-1:]
    above = [v for v in have if v > Version(version)][:1]
    nearest = ", ".join(str(v) for v in below + above) or "none"
    return f"{where}: {page} has no linux {platform} wheel of {version} (nearest with one: {nearest})"
