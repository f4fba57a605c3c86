#!/usr/bin/env bash
# What the Mooncake and serving tests install on the test hosts, which reach nothing but the
# controller: the Mooncake store wheel (non-CUDA build, its Python dependencies) and the Debian
# packages its binaries load even over TCP (rdma-core libraries, libnuma, libcurl) plus what
# Ansible's pip module needs (python3-venv, python3-packaging), as a flat
# apt repository the tests serve to the hosts. Fetched once from the package registries, cached.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/lib/retry.sh

cache="${FLASHFLEET_TEST_HOSTS_CACHE:-/var/cache/flashfleet/test-hosts}"
base="$cache/base-bookworm"
out="$cache/mooncake"
mooncake_wheel="mooncake-transfer-engine-non-cuda==0.3.13.post1"
debs="libibverbs1 ibverbs-providers librdmacm1 libnuma1 libcurl4 python3-venv python3-packaging"
stamp="$mooncake_wheel $debs"

if [ -f "$out/.ok" ] && [ "$(cat "$out/.ok")" = "$stamp" ]; then
  echo "mooncake wheels and packages ready: $out"
  exit 0
fi
[ -f "$base/var/lib/dpkg/status" ] || { echo "run 20-test-hosts.sh first" >&2; exit 1; }
rm -rf "$out" && mkdir -p "$out/wheels" "$out/debs"

# The hosts run Debian 12's Python 3.11 on x86_64.
retry python3 -m pip download --quiet --disable-pip-version-check --only-binary=:all: \
  --python-version 3.11 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux_2_28_x86_64 -d "$out/wheels" "$mooncake_wheel"

# The packages plus every dependency the base rootfs lacks (apt on the host resolves the rest).
command -v apt-ftparchive >/dev/null || { retry apt-get update -qq; retry apt-get install -y -qq apt-utils >/dev/null; }
[ -n "$(find /var/lib/apt/lists -name '*_Packages' -print -quit)" ] || retry apt-get update -qq
installed=$(awk '/^Package:/{p=$2} /^Status: install ok installed/{print p}' "$base/var/lib/dpkg/status" | sort -u)
# shellcheck disable=SC2086
needed=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
           --no-replaces --no-enhances --no-pre-depends $debs \
         | awk '/^[a-z0-9]/{print $1}' | sort -u | comm -23 - <(echo "$installed"))
(cd "$out/debs" && retry apt-get download -qq $needed >/dev/null)
(cd "$out/debs" && apt-ftparchive packages . >Packages)
echo "$stamp" >"$out/.ok"
echo "mooncake wheels and packages ready: $out ($(echo "$needed" | wc -w) packages)"
