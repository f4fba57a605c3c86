#!/usr/bin/env bash
# The real SGLang 0.5.23 argument parser, as a contract oracle for rendered commands.
# pip (not uv): uv ignores the CPU torch wheel on this machine and would fetch a CUDA build.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=.venv-oracle
pip=("$venv/bin/pip" install --quiet --disable-pip-version-check)
if ! { [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import sglang.srt.server_args" 2>/dev/null; }; then
  python3 -m venv "$venv"
  "${pip[@]}" torch==2.13.0 triton
  "${pip[@]}" --no-deps sglang==0.5.23
  "${pip[@]}" numpy msgspec pydantic psutil requests packaging orjson pybase64 pillow starlette pyzmq tqdm ipython aiohttp
  "$venv/bin/python" -c "import sglang.srt.server_args"
fi
# sglang's `--config` reader imports yaml (pyyaml: in every SGLang image, not in the --no-deps set).
"$venv/bin/python" -c "import yaml" 2>/dev/null || "${pip[@]}" pyyaml
# The PD router's own parser (sglang_router.launch_router), for the router argv.
"$venv/bin/python" -c "import sglang_router.launch_router" 2>/dev/null || "${pip[@]}" sglang-router==0.3.2
"$venv/bin/python" -c "import sglang_router.launch_router"
