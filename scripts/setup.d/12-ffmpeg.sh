#!/usr/bin/env bash
# Debian's FFmpeg on the controller: the libraries torchcodec loads (and the `ffmpeg` that makes
# the clip it decodes) when the sglang_image role's in-image check runs against the release's
# real packages in the oracle venv (tests/roles/test_release_image_check.py). The serving image
# gets FFmpeg from its own distribution's archive (the role's Dockerfile), not from here.
set -euo pipefail
. "$(dirname "$0")/../lib/retry.sh"
if command -v ffmpeg >/dev/null 2>&1; then
  echo "ffmpeg ready: $(ffmpeg -hide_banner -version | head -1)"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-cache show ffmpeg >/dev/null 2>&1 || retry apt-get update -qq
retry apt-get install -y -qq --no-install-recommends ffmpeg >/dev/null
echo "ffmpeg ready: $(ffmpeg -hide_banner -version | head -1)"
