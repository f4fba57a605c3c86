"""The catalog is read strictly: a key its loader does not read is refused, naming the file, the
table and the key (it used to be ignored: a typo'd `imex` left IMEX off without a word)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from flashfleet import catalog
from flashfleet.catalog import instances
from flashfleet.catalog.tables import CatalogError


def _with(name: str, path: tuple[str, ...], key: str) -> Callable[[str], dict[str, Any]]:
    """catalog._load, with `key` added to the table at `path` of file `name`."""
    real = catalog._load

    def load(file: str) -> dict[str, Any]:
        data = copy.deepcopy(real(file))
        if file == name:
            node = data
            for part in path:
                node = node[part]
            node[key] = True
        return data

    return load


CASES = [
    ("hardware.toml", ("gb300",), "imx", catalog.hardware_catalog, "hardware.toml [gb300]: unknown key 'imx'"),
    ("hardware.toml", ("gb300", "driver"), "imx", catalog.hardware_catalog,
     "hardware.toml [gb300] driver: unknown key 'imx'"),
    ("node_packages.toml", ("docker",), "versoin", catalog.node_packages,
     "node_packages.toml [docker]: unknown key 'versoin'"),
    ("node_packages.toml", ("image_apt", "debian"), "suite", catalog.image_apt,
     "node_packages.toml [image_apt.debian]: unknown key 'suite'"),
    ("downloads.toml", ("client",), "max_worker", catalog.download_client,
     "downloads.toml [client]: unknown key 'max_worker'"),
    ("badges.toml", ("cell", 0), "opts", catalog.badge_catalog, "badges.toml [[cell]]: unknown key 'opts'"),
    ("bringup.toml", (), "startups", catalog.bringup_catalog, "bringup.toml: unknown key 'startups'"),
    ("bringup.toml", ("checkpoint", "zai-org/GLM-5.3-Flash"), "size_gib", catalog.bringup_catalog,
     'bringup.toml [checkpoint."zai-org/GLM-5.3-Flash"]: unknown key \'size_gib\''),
    ("bringup.toml", ("source", "aws"), "weight_gbps", catalog.bringup_catalog,
     "bringup.toml [source.aws]: unknown key 'weight_gbps'"),
    ("bringup.toml", ("startup", "jit", "nvidia"), "first_seconds", catalog.bringup_catalog,
     "bringup.toml [startup.jit.nvidia]: unknown key 'first_seconds'"),
    ("bringup.toml", ("startup", "capture"), "second", catalog.bringup_catalog,
     "bringup.toml [startup.capture]: unknown key 'second'"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "path", "key", "loader", "message"), CASES)
def test_an_unread_key_is_refused_naming_the_table(
    monkeypatch: pytest.MonkeyPatch, name: str, path: tuple[Any, ...], key: str, loader: Any, message: str
) -> None:
    read = getattr(loader, "__wrapped__", loader)  # past the cache
    read()  # the real file is read as it is
    monkeypatch.setattr(catalog, "_load", _with(name, path, key))
    with pytest.raises(CatalogError) as err:
        read()
    assert str(err.value).startswith(message), err.value


def test_instance_types_refuse_an_unread_key(monkeypatch: pytest.MonkeyPatch) -> None:
    real = instances._load

    def load() -> dict[str, Any]:
        data = copy.deepcopy(real())
        data["types"]["p5en.48xlarge"]["efa_cards"] = 32
        return data

    instances.instance_catalog.__wrapped__()
    monkeypatch.setattr(instances, "_load", load)
    with pytest.raises(
        CatalogError, match=r"instances.toml \[types.p5en.48xlarge\]: unknown key 'efa_cards'"
    ):
        instances.instance_catalog.__wrapped__()


def test_a_missing_key_is_named() -> None:
    from flashfleet.catalog.tables import table

    with pytest.raises(CatalogError, match=r"x.toml \[t\]: missing key 'b'"):
        table({"a": 1}, "x.toml [t]", ("a", "b"))
