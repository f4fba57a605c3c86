#!/usr/bin/env bash
# A real Docker engine for the test hosts: Debian's docker.io (20.10) and the packages it needs
# beyond the test-host rootfs, downloaded once. tests/hosts/aptrepo.py serves them from the
# local apt repository behind Docker's package names, so the container_runtime role installs a
# real dockerd on the hosts exactly as it does on a node.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/lib/retry.sh

cache="${FLASHFLEET_TEST_HOSTS_CACHE:-/var/cache/flashfleet/test-hosts}"
base="$cache/base-bookworm"
debs="$cache/docker-engine-debs"
[ -f "$base/var/lib/dpkg/status" ] || { echo "missing $base: run 20-test-hosts.sh first" >&2; exit 1; }
layout="docker.io renamed docker-ce"  # what the cache holds; a change rebuilds it
if [ "$(cat "$debs/.ok" 2>/dev/null)" != "$layout" ]; then
  rm -rf "$debs.tmp" && mkdir -p "$debs.tmp/partial"
  export DEBIAN_FRONTEND=noninteractive
  apt-cache show docker.io >/dev/null 2>&1 || retry apt-get update -qq
  # Resolved against the rootfs's own package list: exactly what a host lacks, nothing more.
  retry apt-get install -y -qq --download-only --no-install-recommends \
    -o Dir::State::status="$base/var/lib/dpkg/status" \
    -o Dir::Cache::archives="$debs.tmp" \
    -o Debug::NoLocking=true docker.io >/dev/null
  rm -rf "$debs.tmp/partial" "$debs.tmp/lock"
  # Docker's name over Debian's engine: docker.io declares Conflicts with docker-ce and
  # docker-ce-cli, so it cannot sit behind them; it is renamed, under Docker's epoch (the
  # role pins `5:<version>-*`). Files, scripts and units stay as Debian built them.
  upstream=$(ls "$debs.tmp"/docker.io_*.deb)
  dpkg-deb -R "$upstream" "$debs.tmp/tree"
  sed -i -e 's/^Package: docker.io$/Package: docker-ce/' -e 's/^Version: /Version: 5:/' \
    -e 's/^Conflicts: .*/Conflicts: docker-ce-rootless-extras/' "$debs.tmp/tree/DEBIAN/control"
  dpkg-deb -Zgzip -z1 -b "$debs.tmp/tree" "$debs.tmp/docker-ce_$(basename "${upstream#*_}")" >/dev/null
  rm -rf "$debs.tmp/tree" "$upstream"
  echo "$layout" >"$debs.tmp/.ok"
  rm -rf "$debs" && mv "$debs.tmp" "$debs"
fi
echo "docker engine packages ready: $(ls "$debs"/*.deb | wc -l) debs in $debs"
