"""Where the router's smg comes from: the derived image installs it, by the lock, on a stack whose
router is smg, and nowhere else; the settings `plan` shows are the ones the argv carries."""

from __future__ import annotations

import pytest

from flashfleet.catalog.multimodal_packages import image_packages_catalog
from flashfleet.planning import load_stack
from flashfleet.planning.packages import pip_installs
from flashfleet.planning.plan_view import router_program
from flashfleet.recipes.router_settings import SMG_VERSION, router_settings


def test_the_catalog_pin_is_the_version_the_settings_cite() -> None:
    assert image_packages_catalog().router.smg == SMG_VERSION


@pytest.mark.parametrize(
    ("stack", "program", "installs_smg"),
    [
        ("h200-replicas", "smg", True),
        ("gb300-2p1d", "smg", True),
        ("gb300-pd", "smg", True),  # the seed's single-node PD pair: its router is smg too
        ("h200-lowlat", None, False),  # one instance: no router, no smg
        ("mi355x-k8s-replicas", "sglang_router", False),  # the release image's own router
    ],
)
def test_smg_is_installed_exactly_where_it_routes(
    stack: str, program: str | None, installs_smg: bool
) -> None:
    spec = load_stack(stack).spec
    assert spec.router_program == program
    installs = pip_installs(spec)
    assert ("smg" in installs) == installs_smg
    if installs_smg:
        smg = installs["smg"]
        assert (smg.installer, smg.specifier) == ("sglang_image", f"=={SMG_VERSION}")


def test_plan_shows_each_setting_the_argv_carries_with_its_source() -> None:
    b = load_stack("gb300-2p1d")
    view = router_program(b.spec, b.recipe)
    assert view is not None
    assert view.command == "smg launch"
    router = next(p for p in b.recipe.processes if p.role == "router")
    shown = {s.flag for s in view.settings}
    assert shown == {s.shown() for s in router_settings("pd")}
    for flag in shown:
        words = flag.split()
        i = router.argv.index(words[0])
        assert list(router.argv[i : i + len(words)]) == words
    assert all(s.source.startswith("https://") for s in view.settings)


def test_every_setting_cites_a_public_source_and_differs_from_smg_only_with_a_reason() -> None:
    for shape in ("replicas", "pd"):
        for s in router_settings(shape):  # type: ignore[arg-type]
            assert "https://" in s.source, s
            assert s.why, s
    timeout = {s.name: s for s in router_settings("pd")}["request_timeout_secs"]
    assert timeout.value is not None
    assert timeout.value < int(timeout.smg_default)
