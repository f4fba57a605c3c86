#!/usr/bin/env bash
# The LeaderWorkerSet controller manager for tests/k8s/cluster, built from its Go module into a
# cache outside the clone, keyed by its version; beside it the module's own CRDs
# (LeaderWorkerSet, DisaggregatedSet) and webhook configurations, which the test fixture points
# at the manager on loopback. A second run, or a fresh clone on the same machine, only checks the
# stamp.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/lib/retry.sh

lws=v0.9.0
stamp="lws $lws"
cache="${FLASHFLEET_LWS_CACHE:-/var/cache/flashfleet/lws}"
if [ -f "$cache/.stamp" ] && [ "$(cat "$cache/.stamp")" = "$stamp" ]; then
  echo "46-lws: controller ready: $cache ($stamp)"
  exit 0
fi
command -v go >/dev/null || { echo "46-lws: needs Go >= 1.26 to build the LeaderWorkerSet controller" >&2; exit 1; }

start=$SECONDS
rm -rf "$cache.new"
mkdir -p "$cache.new/bin" "$cache.new/crds" "$cache.new/webhook"
wrapper=$(mktemp -d)
trap 'rm -rf "$wrapper" "$cache.new"' EXIT
lwsdir=$(retry go mod download -json "sigs.k8s.io/lws@$lws" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
[ -f "$lwsdir/cmd/main.go" ] || { echo "46-lws: no cmd/main.go in sigs.k8s.io/lws@$lws" >&2; exit 1; }
# Its go.mod has no replace directives, yet `go install module/pkg@version` is refused here (it
# asks the proxy for the module's version list): a throwaway module that requires it builds it
# with its own go.mod's versions (minimal version selection picks exactly those).
cd "$wrapper"
go mod init flashfleet.invalid/lws-build >/dev/null 2>&1
go mod edit -require="sigs.k8s.io/lws@$lws"
printf '//go:build tools\n\npackage tools\n\nimport _ "sigs.k8s.io/lws/cmd"\n' >tools.go
retry env GOFLAGS=-mod=mod go mod tidy
echo "46-lws: modules fetched in $((SECONDS - start)) s"
built=$SECONDS
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X sigs.k8s.io/lws/pkg/version.GitVersion=$lws" \
  -o "$cache.new/bin/" sigs.k8s.io/lws/cmd
mv "$cache.new/bin/cmd" "$cache.new/bin/lws-manager"  # the package sigs.k8s.io/lws/cmd is built as `cmd`
echo "46-lws: manager built in $((SECONDS - built)) s"

cp "$lwsdir"/config/crd/bases/*.yaml "$cache.new/crds/"
# the released webhooks, with the objectSelectors its kustomize overlay patches in (so that only
# LeaderWorkerSet pods pass through the pod webhooks)
cp "$lwsdir"/config/webhook/{manifests,mutating-patch,validating-patch}.yaml "$cache.new/webhook/"
chmod -R u+w "$cache.new"

version=$("$cache.new/bin/lws-manager" --version)  # (not piped to grep -q: pipefail takes its SIGPIPE)
[[ $version == *"$lws"* ]] || { echo "46-lws: the manager says: $version" >&2; exit 1; }
echo "$stamp" >"$cache.new/.stamp"
rm -rf "$cache"
mv "$cache.new" "$cache"
echo "46-lws: $stamp in $((SECONDS - start)) s: $cache ($(du -sh "$cache/bin" | cut -f1))"
