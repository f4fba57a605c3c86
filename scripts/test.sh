#!/usr/bin/env bash
# The whole test suite on a fresh Debian/Ubuntu machine: installs what the tests need
# (scripts/setup.d/*.sh, in order), lints, type-checks, then runs pytest.
#
# The Pulumi engine (40-pulumi.sh, a Go build of ~15 min on a cold 2-core machine) is needed
# only by tests/e2e: it builds in the background, at low priority, while the rest of the suite
# runs, and tests/e2e runs last, once it is built. With arguments, pytest gets exactly those
# (after the build, so that tests/e2e can be named).
set -euo pipefail
cd "$(dirname "$0")/.."
export UV_COMPILE_BYTECODE=1
command -v uv >/dev/null 2>&1 || python3 -m pip install --quiet uv
uv sync --frozen --group dev --quiet

mkdir -p .tools
engine_log=.tools/40-pulumi.log
engine_started=$SECONDS
echo "== setup: 40-pulumi.sh (background, log: $engine_log)"
nice -n 19 bash scripts/setup.d/40-pulumi.sh >"$engine_log" 2>&1 &
engine_pid=$!
wait_for_engine() {
  local rc=0
  wait "$engine_pid" || rc=$?
  cat "$engine_log"
  # its own build time is in the log above; this is how long after its start it was waited for
  echo "== setup: 40-pulumi.sh ready $((SECONDS - engine_started)) s after it started (rc $rc)"
  return "$rc"
}

for step in scripts/setup.d/*.sh; do
  [ -e "$step" ] || continue
  [ "${step##*/}" = 40-pulumi.sh ] && continue
  echo "== setup: ${step##*/}"
  started=$SECONDS
  bash "$step"
  echo "== setup: ${step##*/} took $((SECONDS - started)) s"
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
if [ "$#" -gt 0 ]; then
  wait_for_engine
  echo "== pytest $*"
  exec uv run --frozen --group dev pytest "$@"
fi
echo "== pytest (all but tests/e2e)"
rc=0
uv run --frozen --group dev pytest --ignore=tests/e2e || rc=$?
wait_for_engine
echo "== pytest tests/e2e (the real Pulumi engine)"
uv run --frozen --group dev pytest tests/e2e || rc=$?
exit "$rc"
