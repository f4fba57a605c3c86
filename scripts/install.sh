#!/usr/bin/env bash
# Installs flashfleet into the project's .venv (the locked dependencies, not the developer
# tools), with no change to the system Python: see scripts/lib/uv.sh for how uv is found.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/uv.sh
ensure_uv .
export UV_COMPILE_BYTECODE=1
uv sync --frozen --quiet
echo "installed: $(.venv/bin/flashfleet --version) in .venv (activate with: . .venv/bin/activate)"
