#!/usr/bin/env bash
# The real SGLang 0.5.23 argument parser, as a contract oracle for rendered commands.
# pip (not uv): pip takes a CPU torch wheel where a machine ships one in its find-links; uv
# ignores it. Without one, this is PyPI's CUDA build with its nvidia-* wheels (several GB).
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/lib/retry.sh
venv=.venv-oracle
# No pip cache: the venv itself is what is kept, and a garbled download must not be reused.
pip=("$venv/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir)
if ! { [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import sglang.srt.server_args" 2>/dev/null; }; then
  python3 -m venv "$venv"
  retry "${pip[@]}" torch==2.13.0 triton
  retry "${pip[@]}" --no-deps sglang==0.5.23
  retry "${pip[@]}" numpy msgspec pydantic psutil requests packaging orjson pybase64 pillow starlette pyzmq tqdm ipython aiohttp
  "$venv/bin/python" -c "import sglang.srt.server_args"
fi
# sglang's `--config` reader imports yaml (pyyaml: in every SGLang image, not in the --no-deps set).
"$venv/bin/python" -c "import yaml" 2>/dev/null || retry "${pip[@]}" pyyaml
# The PD router's own parser (sglang_router.launch_router), for the router argv.
"$venv/bin/python" -c "import sglang_router.launch_router" 2>/dev/null || retry "${pip[@]}" sglang-router==0.3.2
"$venv/bin/python" -c "import sglang_router.launch_router"
