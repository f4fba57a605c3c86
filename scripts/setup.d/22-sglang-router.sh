#!/usr/bin/env bash
# The real routers for the test hosts, which reach nothing but the controller: SMG (`smg
# launch`, what a derived image's cluster runs: smg_rs.abi3.so and setproctitle, grpcio,
# grpcio-health-checking, pyyaml), and sglang-router (its Rust router, sglang_router_rs.abi3.so),
# which the release image runs, with what `python -m sglang_router.launch_router` imports at
# start, for Debian 12's Python 3.11 on x86_64.
# launch_router imports setproctitle and the Python mini load balancer (aiohttp, orjson, uvicorn,
# fastapi) at the top even when it runs the Rust router, so the package's whole dependency set
# is needed either way (and --mini-lb runs with it). The wheels are kept in wheels/ and unpacked
# into site/ (none has a .data directory: unpacking is installing), which the tests copy onto a
# host (tests/serve/lab.py) or into the stand-in image (tests/hosts/engine_images.py).
# Fetched once, cached; prints its time.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/lib/retry.sh
started=$SECONDS

cache="${FLASHFLEET_TEST_HOSTS_CACHE:-/var/cache/flashfleet/test-hosts}"
router="sglang-router==0.3.2"
smg="smg==1.13.0"
out="$cache/sglang-router"
stamp="$router $smg site"
if [ "$(cat "$out/.ok" 2>/dev/null)" = "$stamp" ]; then
  echo "sglang-router and smg ready: $out ($((SECONDS - started)) s)"
  exit 0
fi
rm -rf "$out.tmp" && mkdir -p "$out.tmp/wheels" "$out.tmp/site"
if python3 -m pip --version >/dev/null 2>&1; then pip=(python3 -m pip); else pip=(uv tool run pip); fi
retry "${pip[@]}" download --quiet --disable-pip-version-check --only-binary=:all: \
  --python-version 3.11 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux_2_28_x86_64 -d "$out.tmp/wheels" "$router" "$smg"
for wheel in "$out.tmp"/wheels/*.whl; do python3 -m zipfile -e "$wheel" "$out.tmp/site"; done
if find "$out.tmp/site" -maxdepth 1 -name '*.data' | grep -q .; then
  echo "a wheel has a .data directory: unpacking is not installing it" >&2
  exit 1
fi
echo "$stamp" >"$out.tmp/.ok"
rm -rf "$out" && mv "$out.tmp" "$out"
echo "sglang-router and smg ready: $out: wheels $(du -sh "$out/wheels" | cut -f1) ($(ls "$out/wheels" | wc -l))," \
  "unpacked $(du -sh "$out/site" | cut -f1) ($((SECONDS - started)) s)"
