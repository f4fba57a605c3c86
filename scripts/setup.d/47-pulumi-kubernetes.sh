#!/usr/bin/env bash
# The pulumi-kubernetes provider plugin, for tests/k8s/cluster's `pulumi up` of the Kubernetes
# stacks against the local control plane (45-kube.sh): built from its Go module into a cache
# outside the clone, keyed by its version, and linked into .tools/bin beside the CLI (the engine
# takes a provider it finds on PATH). The Go module proxy serves one version of the provider
# module, its @latest pseudo-version, which is tag v4.25.0; the Python SDK is pinned to match
# (pyproject.toml), since the SDK asks the engine for the plugin of its own version.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/lib/retry.sh

version=4.25.0
module=github.com/pulumi/pulumi-kubernetes/provider/v4
pseudo=v4.0.0-20260115033456-f47bc2d6f199 # = tag v4.25.0
cache="${FLASHFLEET_PULUMI_KUBERNETES_CACHE:-/var/cache/flashfleet/pulumi-kubernetes}/$version"
bin="$cache/pulumi-resource-kubernetes"
link() { mkdir -p .tools/bin && ln -sf "$bin" .tools/bin/pulumi-resource-kubernetes; }
if [ -x "$bin" ] && [ "$(cat "$cache/.stamp" 2>/dev/null)" = "$module@$pseudo" ]; then
  link
  echo "47-pulumi-kubernetes: provider $version ready: $bin"
  exit 0
fi
command -v go >/dev/null || { echo "47-pulumi-kubernetes: needs Go >= 1.26" >&2; exit 1; }

start=$SECONDS
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
src=$(retry go mod download -json "$module@$pseudo" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
cp -r "$src" "$work/provider"
chmod -R u+w "$work/provider"
cd "$work/provider"
# The module replaces its SDK with ../sdk, which only exists in the repository: the published
# SDK of the same release instead.
go mod edit -dropreplace=github.com/pulumi/pulumi-kubernetes/sdk/v4 \
  -require=github.com/pulumi/pulumi-kubernetes/sdk/v4@v$version
retry go get "github.com/pulumi/pulumi-kubernetes/sdk/v4@v$version"
echo "47-pulumi-kubernetes: modules fetched in $((SECONDS - start)) s"
# The binary embeds the schema and the Terraform mapping; generate.go writes both from the
# files the module ships.
(cd cmd/pulumi-resource-kubernetes && VERSION=$version go run generate.go)
built=$SECONDS
mkdir -p "$cache"
rm -f "$cache/.stamp"
CGO_ENABLED=0 go build -trimpath \
  -ldflags "-s -w -X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=$version" \
  -o "$bin" ./cmd/pulumi-resource-kubernetes
echo "$module@$pseudo" >"$cache/.stamp"
cd - >/dev/null
link
echo "47-pulumi-kubernetes: provider $version built in $((SECONDS - built)) s ($((SECONDS - start)) s in all): $bin ($(du -sh "$bin" | cut -f1))"
