#!/usr/bin/env bash
# The real SGLang 0.5.23 argument parser, as a contract oracle for rendered commands.
# pip (not uv): uv ignores the CPU torch wheel on this machine and would fetch a CUDA build.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=.venv-oracle
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import sglang.srt.server_args" 2>/dev/null; then
  exit 0
fi
python3 -m venv "$venv"
pip=("$venv/bin/pip" install --quiet --disable-pip-version-check)
"${pip[@]}" torch==2.13.0 triton
"${pip[@]}" --no-deps sglang==0.5.23
"${pip[@]}" numpy msgspec pydantic psutil requests packaging orjson pybase64 pillow starlette pyzmq tqdm ipython aiohttp
"$venv/bin/python" -c "import sglang.srt.server_args"
