#!/usr/bin/env bash
# The whole test suite on a fresh Debian/Ubuntu machine: installs what the tests need
# (scripts/setup.d/*.sh), lints, type-checks, then runs pytest in tiers.
#
# Set-up runs in three background lanes from the start: the engines, at low priority, in order
# (40-pulumi.sh, the Pulumi CLI, a Go build of ~470 CPU-s from an empty cache; 45-kube.sh, the
# Kubernetes control plane and kwok, ~290 s; 46-lws.sh, the LeaderWorkerSet controller, ~260 s;
# 47-pulumi-kubernetes.sh, the provider plugin, ~450 s; the last three cached outside the clone;
# only tests/e2e and tests/k8s/cluster need them), the parser oracle (10-sglang-oracle.sh) and the test hosts' steps in order. Lint and the
# fast tier run meanwhile; then the slow tier (once hosts and oracle are ready), then tests/e2e
# and tests/k8s/cluster (once the engines are built; in the slow tier's own session where they
# already are), each on two pytest-xdist workers. With
# arguments, pytest gets exactly those, after all set-up (so that tests/e2e can be named).
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
# the `uv run`s below take that environment as it is (--no-sync): with UV_COMPILE_BYTECODE, each
# one's own sync re-checked the bytecode of all ~14,000 files (~1 s a run)

# Each step's status is its own (`|| rc`), not errexit's: fast_tier runs in an `||` list, where
# bash ignores `set -e` inside functions.
python_lint() {
  local rc=0
  echo "== ruff"
  uv run --frozen --no-sync --group dev ruff check . || rc=$?
  uv run --frozen --no-sync --group dev ruff format --check . || rc=$?
  echo "== mypy"
  uv run --frozen --no-sync --group dev mypy || rc=$?
  return "$rc"
}

has_roles() { [ -d roles ] && ls roles/*/tasks >/dev/null 2>&1; }
ansible_lint() { uv run --frozen --no-sync --group dev ansible-lint --offline --profile production roles playbooks; }

lint() {
  python_lint || return
  if has_roles; then
    echo "== ansible-lint"
    ansible_lint
  fi
}

# ansible-lint (~40 s, mostly one `ansible-playbook --syntax-check` per playbook) runs beside the
# fast tier's pytest rather than before it; its output follows pytest's, and either failing fails
lint_pid= lint_log=
start_ansible_lint() {
  has_roles || return 0
  lint_log=$(mktemp)
  trap 'rm -f "$lint_log"' EXIT
  ansible_lint >"$lint_log" 2>&1 &
  lint_pid=$!
}
wait_ansible_lint() {
  [ -n "$lint_pid" ] || return 0
  echo "== ansible-lint (ran beside pytest)"
  local lint_rc=0
  wait "$lint_pid" || lint_rc=$?
  cat "$lint_log"
  return "$lint_rc"
}

# two workers (pytest-xdist): the fast tier is CPU-bound in-process work and short subprocesses.
# --dist loadscope keeps each module on one worker: the README walkthrough's blocks build on the
# files earlier blocks wrote in its module's scratch folder, which a split across workers loses.
fast_tier() {
  local started=$SECONDS rc=0
  python_lint || rc=$?
  echo "== ruff and mypy took $((SECONDS - started)) s"
  start_ansible_lint
  echo "== pytest, fast tier (-m 'not slow', 2 workers; needs no set-up)"
  uv run --frozen --no-sync --group dev pytest -m "not slow" -n 2 --dist loadscope --durations=10 "$@" || rc=$?
  wait_ansible_lint || rc=$?
  echo "== fast tier took $((SECONDS - started)) s"
  return "$rc"
}

if [ "${1:-}" = --fast ]; then
  shift
  # property tests draw a quarter of their examples here (tests/property_budget.py); the full run
  # draws them all
  export FLASHFLEET_FAST_TIER=1
  rc=0
  fast_tier "$@" || rc=$?
  exit "$rc"
fi

mkdir -p .tools
# Three lanes start at once: the Pulumi engine build (CPU, at low priority), the parser oracle
# (downloads) and the test hosts' chain (apt, debootstrap; its steps share apt's lock, so they
# run in order). Lint and the fast tier, which need none of them, run in the foreground meanwhile.
declare -A lane_pid lane_started
start_lane() {  # NAME NICENESS STEP...: the steps in order, in the background, in .tools/NAME.log
  local name=$1 niceness=$2
  shift 2
  echo "== setup: ${*##*/} (background, log: .tools/$name.log)"
  lane_started[$name]=$SECONDS
  (
    for step in "$@"; do
      echo "== setup: ${step##*/}"
      started=$SECONDS
      nice -n "$niceness" bash "$step"
      echo "== setup: ${step##*/} took $((SECONDS - started)) s"
    done
  ) >".tools/$name.log" 2>&1 &
  lane_pid[$name]=$!
}
wait_lane() {  # NAME: waits for it, prints its log, fails the run if it failed
  local name=$1 rc=0
  wait "${lane_pid[$name]}" || rc=$?
  cat ".tools/$name.log"
  # each step's own time is in its log above; this is how long after its start it was waited for
  echo "== setup: lane $name ready $((SECONDS - ${lane_started[$name]})) s after it started (rc $rc)"
  return "$rc"
}

engine_steps=() oracle_steps=() host_steps=()
for step in scripts/setup.d/*.sh; do
  [ -e "$step" ] || continue
  case "${step##*/}" in
    40-pulumi.sh | 45-kube.sh | 46-lws.sh | 47-pulumi-kubernetes.sh) engine_steps+=("$step") ;;
    10-sglang-oracle.sh) oracle_steps+=("$step") ;;
    *) host_steps+=("$step") ;;
  esac
done
[ "${#engine_steps[@]}" -eq 0 ] || start_lane engine 19 "${engine_steps[@]}"
[ "${#oracle_steps[@]}" -eq 0 ] || start_lane oracle 0 "${oracle_steps[@]}"
[ "${#host_steps[@]}" -eq 0 ] || start_lane hosts 0 "${host_steps[@]}"
wait_setup() { for name in oracle hosts; do [ -z "${lane_pid[$name]:-}" ] || wait_lane "$name"; done; }
wait_engine() { [ -z "${lane_pid[engine]:-}" ] || wait_lane engine; }

if [ "$#" -gt 0 ]; then
  wait_setup
  wait_engine
  lint
  echo "== pytest $*"
  exec uv run --frozen --no-sync --group dev pytest "$@"
fi
rc=0
fast_tier || rc=$?
wait_setup
# two workers: a slow test mostly waits (on hosts booting, apt, ansible's SSH round trips, a
# server loading), so two overlap well on two cores. `--dist loadscope` keeps each folder's
# session-wide hosts, and each module's hosts, on one worker (tests/conftest.py: xdist_scope).
# With the engines already built (their caches warm, as on a CI machine that ran before), tests/e2e
# and tests/k8s/cluster join the slow tier's session: one queue on two workers packs the scopes
# better than two sessions one after the other, whose first ends with one worker idle. From an
# empty cache the engines take tens of minutes, and the slow tier starts without waiting for them.
lane_done() { [ -n "${lane_pid[$1]:-}" ] && ! kill -0 "${lane_pid[$1]}" 2>/dev/null; }
started=$SECONDS
if [ -z "${lane_pid[engine]:-}" ] || lane_done engine; then
  wait_engine || rc=$?
  echo "== pytest, slow tier with tests/e2e and tests/k8s/cluster (engines ready; 2 workers)"
  uv run --frozen --no-sync --group dev pytest -m slow -n 2 --dist loadscope --durations=25 \
    --junitxml .tools/slow-tier.xml || rc=$?
  echo "== slow tier took $((SECONDS - started)) s"
  exit "$rc"
fi
echo "== pytest, slow tier but tests/e2e and tests/k8s/cluster (2 workers)"
uv run --frozen --no-sync --group dev pytest -m slow --ignore=tests/e2e --ignore=tests/k8s/cluster -n 2 --dist loadscope \
  --durations=25 --junitxml .tools/slow-tier.xml || rc=$?
echo "== slow tier took $((SECONDS - started)) s"
wait_engine || rc=$?
started=$SECONDS
echo "== pytest tests/e2e and tests/k8s/cluster (the real Pulumi engine and Kubernetes control plane; 2 workers)"
uv run --frozen --no-sync --group dev pytest tests/e2e tests/k8s/cluster -n 2 --dist loadscope --durations=10 \
  --junitxml .tools/e2e.xml || rc=$?
echo "== e2e took $((SECONDS - started)) s"
exit "$rc"
