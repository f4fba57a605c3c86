#!/usr/bin/env bash
# The whole test suite on a fresh Debian/Ubuntu machine: installs what the tests need
# (scripts/setup.d/*.sh, in order), lints, type-checks, then runs pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
export UV_COMPILE_BYTECODE=1
command -v uv >/dev/null 2>&1 || python3 -m pip install --quiet uv
uv sync --frozen --group dev --quiet
for step in scripts/setup.d/*.sh; do
  [ -e "$step" ] || continue
  echo "== setup: ${step##*/}"
  bash "$step"
done
echo "== ruff"
uv run --frozen --group dev ruff check .
uv run --frozen --group dev ruff format --check .
echo "== mypy"
uv run --frozen --group dev mypy
if [ -d roles ] && ls roles/*/tasks >/dev/null 2>&1; then
  echo "== ansible-lint"
  uv run --frozen --group dev ansible-lint --offline --profile production roles playbooks
fi
echo "== pytest"
uv run --frozen --group dev pytest "$@"
