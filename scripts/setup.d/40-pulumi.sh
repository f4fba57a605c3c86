#!/usr/bin/env bash
# The Pulumi engine for the end-to-end tests and `flashfleet up/down/status`: the `pulumi` CLI
# built from its Go modules into .tools/bin (git-ignored), beside the Python language host and
# the dynamic-provider launcher from scripts/pulumi/. A `pulumi` already on PATH is used as is
# (its own distribution carries the language host). Cached: a second run only checks the stamp,
# and a fresh clone copies the binary kept outside the clone (FLASHFLEET_PULUMI_CACHE).
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/lib/retry.sh

version=v3.274.1
bin="$PWD/.tools/bin"
# Built without optimisation or inlining (-N -l): the engine here only drives tests/e2e's few
# stacks, and its build is the largest CPU job of a cold CI (side by side on this 2-core machine,
# from an empty build cache: 472 CPU-s and 245 s with -N -l, 630 CPU-s and 329 s without).
gcflags="all=-N -l"
stamp="pulumi $version gcflags=$gcflags"

own=$(command -v pulumi || true)
if [ -n "$own" ] && [ "$(dirname "$(readlink -f "$own")")" != "$bin" ]; then
  echo "pulumi on PATH, not building: $own ($(pulumi version))"
  exit 0
fi
# The binary is kept outside the clone too, keyed by the stamp: a fresh clone on a machine that
# built it once copies it (a warm Go cache still spent ~70 s of CPU relinking it).
cache="${FLASHFLEET_PULUMI_CACHE:-/var/cache/flashfleet/pulumi}/$version"
link_tools() {  # the engine looks for language hosts and the dynamic provider beside its binary
  for tool in pulumi-language-python pulumi-resource-pulumi-python; do
    ln -sf "../../scripts/pulumi/$tool" "$bin/$tool"
  done
}
if [ -x "$bin/pulumi" ] && [ "$(cat "$bin/.stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "pulumi $version ready: $bin"
  exit 0
fi
if [ -x "$cache/pulumi" ] && [ "$(cat "$cache/.stamp" 2>/dev/null)" = "$stamp" ]; then
  mkdir -p "$bin"
  cp "$cache/pulumi" "$bin/pulumi"
  link_tools
  "$bin/pulumi" version >/dev/null
  echo "$stamp" >"$bin/.stamp"
  echo "pulumi $version ready: $bin (from $cache)"
  exit 0
fi
command -v go >/dev/null || { echo "40-pulumi: needs Go >= 1.26 to build the Pulumi CLI" >&2; exit 1; }

start=$SECONDS
mkdir -p "$bin"
rm -f "$bin/.stamp"
# pkg/v3's go.mod has replace directives, so `go install …@version` is refused: a throwaway
# module that requires pkg and sdk at the same version builds the command instead.
wrapper=$(mktemp -d)
trap 'rm -rf "$wrapper"' EXIT
(
  cd "$wrapper"
  go mod init flashfleet.invalid/pulumi-build >/dev/null 2>&1
  retry go get "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi@$version" "github.com/pulumi/pulumi/sdk/v3@$version"
  echo "40-pulumi: modules fetched in $((SECONDS - start)) s"
  # The release build's settings (static binary, no cgo user lookup, no gRPC tracing), but gcflags.
  CGO_ENABLED=0 go build -trimpath -tags osusergo,grpcnotrace -gcflags="$gcflags" \
    -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$version" \
    -o "$bin/pulumi" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi
)
link_tools
"$bin/pulumi" version >/dev/null
echo "$stamp" >"$bin/.stamp"
mkdir -p "$cache"
cp "$bin/pulumi" "$cache/pulumi.new" && mv "$cache/pulumi.new" "$cache/pulumi"
echo "$stamp" >"$cache/.stamp"
echo "40-pulumi: pulumi $version built in $((SECONDS - start)) s: $bin ($(du -sh "$bin/pulumi" | cut -f1))"
