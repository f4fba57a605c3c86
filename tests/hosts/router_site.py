"""The real SGLang router for the test hosts and the stand-in images: sglang-router 0.3.2 and
every package `python -m sglang_router.launch_router` imports, unpacked for Debian 12's Python
3.11 by scripts/setup.d/22-sglang-router.sh (the hosts reach no package index)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .harness import CACHE

ROUTER_CACHE = CACHE / "sglang-router"
LAUNCH = ("-m", "sglang_router.launch_router")


def router_site() -> Path:
    if not (ROUTER_CACHE / ".ok").exists():
        raise RuntimeError(f"{ROUTER_CACHE} missing: run scripts/setup.d/22-sglang-router.sh")
    return ROUTER_CACHE / "site"


def _link_or_copy(src: str, dst: str) -> None:
    # hard links when the destination shares the cache's file system: 112 MB per host otherwise
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def copy_router_site(dest: Path) -> list[str]:
    """Puts the router's packages into `dest` (a site-packages directory); returns the names of
    the top-level entries it added."""
    return copy_site(router_site(), dest)


def copy_site(site: Path, dest: Path) -> list[str]:
    """Puts the packages of `site` into `dest` (hard links where it can); returns the names of the
    top-level entries it added."""
    dest.mkdir(parents=True, exist_ok=True)
    names = sorted(p.name for p in site.iterdir())
    for name in names:
        src = site / name
        if src.is_dir():
            shutil.copytree(src, dest / name, symlinks=True, copy_function=_link_or_copy)
        else:
            _link_or_copy(str(src), str(dest / name))
    return names
