#!/usr/bin/env bash
# The whole test suite on a fresh Debian/Ubuntu machine: installs what the tests need
# (scripts/setup.d/*.sh, in order), lints, type-checks, then runs pytest.
#
# The Pulumi engine (40-pulumi.sh, a Go build of ~15 min on a cold 2-core machine) is needed
# only by tests/e2e: it builds in the background, at low priority, while the rest of the suite
# runs, and tests/e2e runs last, once it is built. With arguments, pytest gets exactly those
# (after the build, so that tests/e2e can be named).
#
# `scripts/test.sh --fast [PYTEST ARGS]`: the fast tier, for iterating: lint, type checks and
# every test not marked slow (no test host, Docker engine, Pulumi engine, parser oracle or
# ansible-runner run; tests/conftest.py fails a test that reaches for one unmarked). No set-up
# beyond `uv sync`. Pytest runs on two workers there (`-n 0` in PYTEST ARGS runs it in one).
set -euo pipefail
cd "$(dirname "$0")/.."
export UV_COMPILE_BYTECODE=1
. scripts/lib/uv.sh
ensure_uv .
uv sync --frozen --group dev --quiet

python_lint() {
  echo "== ruff"
  uv run --frozen --group dev ruff check .
  uv run --frozen --group dev ruff format --check .
  echo "== mypy"
  uv run --frozen --group dev mypy
}

has_roles() { [ -d roles ] && ls roles/*/tasks >/dev/null 2>&1; }
ansible_lint() { uv run --frozen --group dev ansible-lint --offline --profile production roles playbooks; }

lint() {
  python_lint
  if has_roles; then
    echo "== ansible-lint"
    ansible_lint
  fi
}

if [ "${1:-}" = --fast ]; then
  shift
  started=$SECONDS
  python_lint
  echo "== ruff and mypy took $((SECONDS - started)) s"
  # ansible-lint (~40 s, mostly one `ansible-playbook --syntax-check` per playbook) runs beside
  # pytest rather than before it; its output follows pytest's, and either failing fails the tier
  lint_log=$(mktemp)
  trap 'rm -f "$lint_log"' EXIT
  lint_pid=
  if has_roles; then
    ansible_lint >"$lint_log" 2>&1 &
    lint_pid=$!
  fi
  echo "== pytest, fast tier (-m 'not slow')"
  # two workers (pytest-xdist): the fast tier is CPU-bound in-process work and short subprocesses;
  # every test keeps to its own tmp_path and port-0 servers, so order and sharing do not matter
  rc=0
  uv run --frozen --group dev pytest -m "not slow" -n 2 --durations=10 "$@" || rc=$?
  if [ -n "$lint_pid" ]; then
    echo "== ansible-lint (ran beside pytest)"
    lint_rc=0
    wait "$lint_pid" || lint_rc=$?
    cat "$lint_log"
    [ "$lint_rc" -eq 0 ] || rc=$lint_rc
  fi
  echo "== fast tier took $((SECONDS - started)) s"
  exit "$rc"
fi

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
lint
if [ "$#" -gt 0 ]; then
  wait_for_engine
  echo "== pytest $*"
  exec uv run --frozen --group dev pytest "$@"
fi
echo "== pytest (all but tests/e2e)"
rc=0
uv run --frozen --group dev pytest --ignore=tests/e2e --durations=25 || rc=$?
wait_for_engine
echo "== pytest tests/e2e (the real Pulumi engine)"
uv run --frozen --group dev pytest tests/e2e || rc=$?
exit "$rc"
