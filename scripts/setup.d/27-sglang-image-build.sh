#!/usr/bin/env bash
# What the sglang_image role's real `docker build` installs on a test host, which reaches nothing
# but the controller: the wheels of what the derived image adds to its release (transformers and
# tokenizers on v0.5.20) and their dependencies for the stand-in base's Python (Debian 12, 3.11, x86_64), and Debian's
# ffmpeg with every package it needs beyond the test-host rootfs the stand-in base is made of.
# The tests serve the wheels as pip's find-links and the debs as the base image's Debian
# archive (tests/hosts/aptrepo.py). The release's own torch and torchcodec are not fetched here
# (the oracle venv holds them: scripts/setup.d/10-sglang-oracle.sh).
# Fetched once, cached; prints its size.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/lib/retry.sh

cache="${FLASHFLEET_TEST_HOSTS_CACHE:-/var/cache/flashfleet/test-hosts}"
base="$cache/base-bookworm"
out="$cache/sglang-image-build"
# What the derived image adds to release v0.5.20 on an H200 node (tests/engine's release: its own
# transformers and tokenizers fall short of the seed), as flashfleet decides it.
requirements=$(uv run --frozen --no-sync python -c '
from flashfleet.catalog import hardware_catalog
from flashfleet.stack.image_packages import image_packages
print(" ".join(p.requirement for p in image_packages("v0.5.20", hardware_catalog()["h200"]).installs))')
# The pin the derived image carried before it followed the release, which the faithful base's
# check must refuse (torchcodec 0.9 is built for torch 2.9; the release ships torch 2.14.1).
requirements="$requirements torchcodec==0.9.1"
stamp="$requirements ffmpeg"
if [ "$(cat "$out/.ok" 2>/dev/null)" = "$stamp" ]; then
  echo "derived-image build inputs ready: $out ($(du -sh "$out" | cut -f1))"
  exit 0
fi
[ -f "$base/var/lib/dpkg/status" ] || { echo "missing $base: run 20-test-hosts.sh first" >&2; exit 1; }
rm -rf "$out.tmp" && mkdir -p "$out.tmp/wheels" "$out.tmp/debs/partial"

if python3 -m pip --version >/dev/null 2>&1; then pip=(python3 -m pip); else pip=(uv tool run pip); fi
# shellcheck disable=SC2086
retry "${pip[@]}" download --quiet --disable-pip-version-check --only-binary=:all: \
  --python-version 3.11 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux_2_28_x86_64 -d "$out.tmp/wheels" $requirements

export DEBIAN_FRONTEND=noninteractive
apt-cache show ffmpeg >/dev/null 2>&1 || retry apt-get update -qq
# Resolved against the rootfs's own package list, as the Dockerfile's
# `apt-get install --no-install-recommends ffmpeg` resolves it inside the base.
retry apt-get install -y -qq --download-only --no-install-recommends \
  -o Dir::State::status="$base/var/lib/dpkg/status" \
  -o Dir::Cache::archives="$out.tmp/debs" \
  -o Debug::NoLocking=true ffmpeg >/dev/null
rm -rf "$out.tmp/debs/partial" "$out.tmp/debs/lock"
echo "$stamp" >"$out.tmp/.ok"
rm -rf "$out" && mv "$out.tmp" "$out"
echo "derived-image build inputs ready: $out: wheels $(du -sh "$out/wheels" | cut -f1)" \
  "($(ls "$out/wheels" | wc -l)), debs $(du -sh "$out/debs" | cut -f1) ($(ls "$out/debs" | wc -l))"
