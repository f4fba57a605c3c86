"""What a vendor's apt repository holds today for the packages a role installs from it: every
package apt would take from that repository, with its version, size and SHA256, for `flashfleet lock`.

The repository is read as apt reads it: its Packages index (``Packages.xz``, ``.gz`` or plain, in
the directory apt reads it from: a flat repository's own, such as NVIDIA's CUDA one, or a suite's
``dists/<suite>/<component>/binary-<arch>/``), several together where a role adds several.
Each package the role installs is taken at the newest version its pin allows (the role's
``Pin: version`` glob in apt's preferences), and its dependencies are followed inside the same
repository: the first alternative the repository holds, at the newest version the relation allows.
A dependency the repositories do not hold comes from the distribution's own archive and is not
the vendor's; it is not followed here. apt checks every file it fetches against this index, so a
node whose index lists these SHA256s installs exactly the locked bytes.
"""

from __future__ import annotations

import fnmatch
import gzip
import lzma
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flashfleet.stack.lock import LockedDeb

_INDEXES = (("Packages.xz", lzma.decompress), ("Packages.gz", gzip.decompress), ("Packages", bytes))
_RELATIONS = ("pre-depends", "depends")


class AptIndexError(RuntimeError):
    """The repository did not resolve the packages; the message is one line."""


class NoIndex(AptIndexError):
    """The repository has no index in that directory (it does not serve that distribution)."""


@dataclass(frozen=True)
class Entry:
    package: str
    version: str
    sha256: str
    size: int
    relations: tuple[tuple[tuple[str, tuple[str, str] | None], ...], ...]  # AND of ORs


def _fetch(url: str, timeout_s: float = 60) -> bytes | None:
    """The file at `url` (http(s) or file); None when the repository does not have it."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            return bytes(resp.read())
    except urllib.error.HTTPError as err:
        if err.code == 404:
            return None
        raise AptIndexError(f"{url}: the repository answered {err.code}") from None
    except FileNotFoundError:
        return None
    except (OSError, urllib.error.URLError) as err:
        raise AptIndexError(f"{url}: {type(err).__name__}: {err}") from None


def _release(snapshot: str, suite: str) -> bytes:
    """A suite's signed index in an archive's snapshot; a snapshot without it is an error."""
    url = f"{snapshot.rstrip('/')}/dists/{suite}/InRelease"
    raw = _fetch(url)
    if raw is None:
        raise AptIndexError(f"{url}: the archive answered 404")
    return raw


def read_index(url: str, timeout_s: float = 60) -> list[Entry]:
    """Every package of the index in the repository directory `url` (http(s) or file)."""
    from debian.deb822 import Packages

    base = url if url.endswith("/") else f"{url}/"
    for name, decode in _INDEXES:
        raw = _fetch(base + name, timeout_s)
        if raw is None:
            continue
        try:
            text = decode(raw).decode("utf-8")
        except (OSError, lzma.LZMAError, UnicodeDecodeError) as err:
            raise AptIndexError(f"{base}{name}: cannot be read: {err}") from None
        out = []
        for para in Packages.iter_paragraphs(text, use_apt_pkg=False):
            if not all(k in para for k in ("Package", "Version", "SHA256", "Size")):
                raise AptIndexError(f"{base}{name}: an entry without Package, Version, SHA256 or Size")
            relations = tuple(
                tuple((alt["name"], alt.get("version")) for alt in group)
                for kind in _RELATIONS
                for group in para.relations[kind] or []
            )
            out.append(Entry(para["Package"], para["Version"], para["SHA256"], int(para["Size"]), relations))
        return out
    raise NoIndex(f"{base}: no Packages index (Packages.xz, Packages.gz or Packages)")


def _allows(version: str, relation: tuple[str, str] | None) -> bool:
    from debian.debian_support import version_compare

    if relation is None:
        return True
    op, want = relation
    order = version_compare(version, want)
    return {"<<": order < 0, "<=": order <= 0, "=": order == 0, ">=": order >= 0, ">>": order > 0}[op]


def _newest(entries: list[tuple[Entry, str]]) -> tuple[Entry, str]:
    from functools import cmp_to_key

    from debian.debian_support import version_compare

    def order(a: tuple[Entry, str], b: tuple[Entry, str]) -> int:
        return version_compare(a[0].version, b[0].version)

    return max(entries, key=cmp_to_key(order))


def resolve(
    urls: Sequence[str], install: Sequence[str], pins: Mapping[str, str] | None = None
) -> dict[str, dict[str, LockedDeb]]:
    """Every package apt takes from the repository directories `urls` (read together, as apt reads
    a node's sources) to install `install`, by the directory that holds it: the packages asked for
    and the dependencies the directories hold. `pins`: package -> the version glob the role's apt
    preferences pin it to (the rest: the newest)."""
    from flashfleet.stack.lock import LockedDeb

    globs = dict(pins or {})
    by_name: dict[str, list[tuple[Entry, str]]] = {}
    for url in urls:
        for entry in read_index(url):
            by_name.setdefault(entry.package, []).append((entry, url))
    where = ", ".join(urls)
    chosen: dict[str, tuple[Entry, str]] = {}
    todo: list[tuple[str, tuple[str, str] | None]] = [(n, None) for n in install]
    while todo:
        name, relation = todo.pop(0)
        glob = globs.get(name, "*")
        fits = [
            (e, url) for e, url in by_name.get(name, [])
            if fnmatch.fnmatchcase(e.version, glob) and _allows(e.version, relation)
        ]  # fmt: skip
        if name in chosen:
            if chosen[name] not in fits:
                raise AptIndexError(f"{where}: {name} {chosen[name][0].version} does not satisfy {relation}")
            continue
        if not fits:
            wanted = f" {glob}" if glob != "*" else ""
            wanted += f" ({relation[0]} {relation[1]})" if relation else ""
            raise AptIndexError(f"{where}: the repository has no {name}{wanted}")
        chosen[name] = _newest(fits)
        for group in chosen[name][0].relations:
            # the first alternative these directories hold; a group they hold none of is the
            # distribution's to satisfy
            held = next(((n, rel) for n, rel in group if n in by_name), None)
            if held is not None:
                todo.append(held)
    out: dict[str, dict[str, LockedDeb]] = {}
    for name, (e, url) in sorted(chosen.items()):
        out.setdefault(url, {})[name] = LockedDeb(version=e.version, sha256=e.sha256, size=e.size)
    return out


def published_moment(snapshot: str, suites: Sequence[str]) -> str | None:
    """The moment (YYYYMMDDTHHMMSSZ) the archive published the newest of `suites` as this snapshot
    serves them: each suite's InRelease `Date`. A snapshot at that moment serves the same suites,
    and is in the past, which a moment taken from the clock may not yet be; None without dates."""
    from email.utils import parsedate_to_datetime

    base = snapshot.rstrip("/")
    dates = []
    for suite in suites:
        text = _release(base, suite).decode("utf-8", "replace")
        for line in text.splitlines():
            if line.startswith("Date:"):
                try:
                    dates.append(parsedate_to_datetime(line.removeprefix("Date:").strip()))
                except (TypeError, ValueError):
                    raise AptIndexError(f"{base}/dists/{suite}/InRelease: a Date it cannot read") from None
                break
    return max(dates).strftime("%Y%m%dT%H%M%SZ") if len(dates) == len(suites) else None


def resolve_snapshot(
    snapshot: str, suites: Sequence[str], components: Sequence[str], arch: str, install: Sequence[str]
) -> tuple[dict[str, str], dict[str, LockedDeb]]:
    """A distribution archive's snapshot (`<archive>/<timestamp>`, which never changes): the
    sha256 of each suite's signed index (``dists/<suite>/InRelease``), and each package of
    `install` at the newest version its suites hold for `arch` (Debian's name), as apt takes it
    from several suites of one archive. Its dependencies are the archive's, at whatever this
    snapshot holds: they are fixed by the snapshot, not listed."""
    import hashlib

    from flashfleet.stack.lock import LockedDeb

    base = snapshot.rstrip("/")
    releases = {s: hashlib.sha256(_release(base, s)).hexdigest() for s in suites}
    found: dict[str, list[tuple[Entry, str]]] = {}
    for suite in suites:
        for component in components:
            for entry in read_index(f"{base}/dists/{suite}/{component}/binary-{arch}/"):
                if entry.package in install:
                    found.setdefault(entry.package, []).append((entry, suite))
    missing = [name for name in install if name not in found]
    if missing:
        raise AptIndexError(
            f"{base}: no {', '.join(missing)} for {arch} in {', '.join(suites)} ({', '.join(components)})"
        )
    packages = {}
    for name in install:
        e, _ = _newest(found[name])
        packages[name] = LockedDeb(version=e.version, sha256=e.sha256, size=e.size)
    return releases, packages
