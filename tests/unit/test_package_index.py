"""flashfleet.package_index against a stand-in package index on loopback (tests/hosts/pypi.py:
PyPI's simple API in JSON and in HTML, and a find-links folder listing), and a folder here:
which version a specifier resolves to, every file of it with the sha256 of its bytes, and the
one-line refusals. Real pip installing what is locked, and refusing other bytes: the weights
client's job (tests/roles/test_model_weights_job.py) and the roles on test hosts."""

from __future__ import annotations

import hashlib
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from hosts.pypi import PackageIndex, wheel

from flashfleet.package_index import PackageIndexError, resolve_package
from flashfleet.stack.lock import LockedPackage


def tokenizers_files() -> dict[str, bytes]:
    names = [
        "tokenizers-0.23.1-cp39-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        "tokenizers-0.23.2-cp39-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        "tokenizers-0.23.2-cp39-abi3-manylinux_2_17_aarch64.manylinux2014_aarch64.whl",
        "tokenizers-0.23.2.tar.gz",
        "tokenizers-0.24.0rc1-cp39-abi3-manylinux_2_17_x86_64.whl",
        "tokenizers-0.23.0-cp39-abi3-manylinux_2_17_x86_64.whl",
    ]
    return {n: f"bytes of {n}".encode() for n in names}


@pytest.fixture
def index() -> Iterator[PackageIndex]:
    idx = PackageIndex(files=tokenizers_files()).start()
    yield idx
    idx.stop()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def hashes(locked: LockedPackage) -> dict[str, str]:
    return {name: f.sha256 for name, f in locked.files.items()}


@pytest.mark.parametrize("json_api", [True, False])
def test_the_newest_allowed_version_with_every_file_and_its_hash(index: PackageIndex, json_api: bool) -> None:
    index.json_api = json_api
    locked = resolve_package("tokenizers", ">=0.23.1", index_url=index.simple)
    assert locked.version == "0.23.2"  # not the 0.24.0 release candidate
    assert hashes(locked) == {n: sha(b) for n, b in index.files.items() if "-0.23.2" in n}
    assert len(locked.files) == 3  # both wheels and the sdist: pip on a node takes the one that fits


def test_a_pre_release_only_where_the_specifier_names_one(index: PackageIndex) -> None:
    assert resolve_package("tokenizers", "==0.24.0rc1", index_url=index.simple).version == "0.24.0rc1"
    assert resolve_package("tokenizers", ">=0.24.0rc1", index_url=index.simple).version == "0.24.0rc1"


def test_a_yanked_version_only_when_pinned(index: PackageIndex) -> None:
    index.yanked = {n for n in index.files if "-0.23.2" in n}
    assert resolve_package("tokenizers", ">=0.23.1", index_url=index.simple).version == "0.23.1"
    assert resolve_package("tokenizers", "==0.23.2", index_url=index.simple).version == "0.23.2"


def test_a_name_is_asked_as_the_index_normalizes_it(index: PackageIndex) -> None:
    name, data = wheel("Demo_Pkg", "1.0")
    index.files[name] = data
    assert hashes(resolve_package("Demo_Pkg", "==1.0", index_url=index.simple)) == {name: sha(data)}
    assert "/simple/demo-pkg/" in index.requests


def test_find_links_and_a_folder_are_hashed_from_their_bytes(index: PackageIndex, tmp_path: Path) -> None:
    by_page = resolve_package("tokenizers", ">=0.23.1", find_links=index.find_links)
    assert hashes(by_page) == {n: sha(b) for n, b in index.files.items() if "-0.23.2" in n}
    assert not any(r.startswith("/simple/") for r in index.requests)  # the roles read it alone
    index.tampered["tokenizers-0.23.2.tar.gz"] = b"other bytes"
    refetched = resolve_package("tokenizers", ">=0.23.1", find_links=index.find_links)
    assert hashes(refetched)["tokenizers-0.23.2.tar.gz"] == sha(b"other bytes")
    for name, data in index.files.items():
        (tmp_path / name).write_bytes(data)
    assert resolve_package("tokenizers", ">=0.23.1", find_links=str(tmp_path)) == by_page
    assert resolve_package("tokenizers", ">=0.23.1", find_links=tmp_path.as_uri()) == by_page


def test_what_cannot_be_resolved_is_one_line(index: PackageIndex, tmp_path: Path) -> None:
    with pytest.raises(
        PackageIndexError, match=r"^torchcodec==0.9.1: http://.*/simple/torchcodec/ answered 404$"
    ):
        resolve_package("torchcodec", "==0.9.1", index_url=index.simple)
    with pytest.raises(
        PackageIndexError, match=r"lists no version that fits \(it lists: 0\.23\.0, 0\.23\.1, 0\.23\.2, "
    ):
        resolve_package("tokenizers", ">=0.25", index_url=index.simple)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(PackageIndexError, match=r"^tokenizers>=0.23.1: ConnectError: "):
        resolve_package("tokenizers", ">=0.23.1", index_url=f"http://127.0.0.1:{port}/simple/")
    with pytest.raises(PackageIndexError, match="is not a folder"):
        resolve_package("tokenizers", ">=0.23.1", find_links=str(tmp_path / "none"))
