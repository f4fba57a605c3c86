#!/usr/bin/env bash
# The real SGLang 0.5.23 argument parser, as a contract oracle for rendered commands, in the
# environment the release itself asks for: its own torch, torchcodec, transformers and tokenizers
# (its wheel's Requires-Dist, as flashfleet/catalog/image_packages.toml records it), so that the
# sglang_image role's in-image check runs here against the release's real packages
# (tests/roles/test_release_image_check.py; FFmpeg's libraries: scripts/setup.d/12-ffmpeg.sh).
# pip (not uv): pip takes a CPU torch wheel where a machine ships one in its find-links; uv
# ignores it. Without one, this is PyPI's CUDA build with its nvidia-* wheels (about 6 GB).
# Kept outside the clone like the Go builds (a fresh clone links .venv-oracle to it): the same
# site-packages are the faithful base image's (tests/hosts/engine_images.py), and CI's fresh
# clone would otherwise download them again on every run.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/lib/retry.sh
venv="${FLASHFLEET_ORACLE_VENV:-/var/cache/flashfleet/sglang-oracle}"
mkdir -p "$(dirname "$venv")"
# the clone's name for it; a venv left in the clone by an older set-up is replaced by the link
[ -L .venv-oracle ] || rm -rf .venv-oracle
ln -sfn "$venv" .venv-oracle
# The release's x86_64 pins of the four packages, read from the catalog (markers: linux x86_64).
release=$(.venv/bin/python - <<'PY'
import tomllib
from packaging.requirements import Requirement
entry = tomllib.load(open("flashfleet/catalog/image_packages.toml", "rb"))["releases"]["v0.5.23"]
env = {"sys_platform": "linux", "platform_machine": "x86_64"}
reqs = [Requirement(r) for r in entry["requires"]]
print(" ".join(f"{r.name}{r.specifier}" for r in reqs if r.marker is None or r.marker.evaluate(env)))
PY
)
# No pip cache: the venv itself is what is kept, and a garbled download must not be reused.
pip=("$venv/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir)
if ! { [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import sglang.srt.server_args" 2>/dev/null \
  && [ "$(cat "$venv/.release" 2>/dev/null)" = "$release" ]; }; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  # shellcheck disable=SC2086
  retry "${pip[@]}" $release triton
  retry "${pip[@]}" --no-deps sglang==0.5.23
  retry "${pip[@]}" numpy msgspec pydantic psutil requests packaging orjson pybase64 pillow starlette pyzmq tqdm ipython aiohttp
  "$venv/bin/python" -c "import sglang.srt.server_args"
  echo "$release" >"$venv/.release"
fi
# sglang's `--config` reader imports yaml (pyyaml: in every SGLang image, not in the --no-deps set).
"$venv/bin/python" -c "import yaml" 2>/dev/null || retry "${pip[@]}" pyyaml
# The PD router's own parser (sglang_router.launch_router), for the router argv.
"$venv/bin/python" -c "import sglang_router.launch_router" 2>/dev/null || retry "${pip[@]}" sglang-router==0.3.2
"$venv/bin/python" -c "import sglang_router.launch_router"
# SMG (Shepherd Model Gateway, PyPI `smg`), the gateway that left SGLang's tree, beside it: its own
# parser for router argv, and the second router of benchmarks/router_overhead.py.
"$venv/bin/python" -c "import smg.router_args" 2>/dev/null || retry "${pip[@]}" smg==1.13.0
"$venv/bin/python" -c "import smg.launch_router"
