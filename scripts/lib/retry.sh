# Sourced by the set-up steps (scripts/setup.d). Package registries and the proxies in front of
# them now and then hand over a download cut short or garbled (pip then reports a hash
# mismatch, apt a size mismatch): the same command, run again, fetches it afresh. Checksums
# are still verified by each tool on every attempt; this only gives a bad transfer two more.
retry() {
  local attempt
  for attempt in 1 2 3; do
    "$@" && return 0
    echo "setup: attempt $attempt of 3 failed: $*" >&2
    [ "$attempt" = 3 ] || sleep $((attempt * ${RETRY_PAUSE_S:-10}))
  done
  return 1
}
