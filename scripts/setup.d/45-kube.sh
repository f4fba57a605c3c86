#!/usr/bin/env bash
# A real Kubernetes control plane for tests/k8s/cluster: etcd, kube-apiserver, kube-scheduler,
# kube-controller-manager, kubectl and kwok (which simulates the GPU nodes and their pods), built
# from the Go module proxy into a cache outside the clone, keyed by the versions; plus the
# LeaderWorkerSet CRD and kwok's stage definitions, both read from their modules. A second run,
# or a fresh clone on the same machine, only checks the stamp.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/lib/retry.sh

kubernetes=v1.36.3 staging=v0.36.3 etcd=v3.6.8 kwok=v0.8.0 lws=v0.7.0
stamp="kubernetes $kubernetes etcd $etcd kwok $kwok lws $lws"
cache="${FLASHFLEET_KUBE_CACHE:-/var/cache/flashfleet/kube}"
if [ -f "$cache/.stamp" ] && [ "$(cat "$cache/.stamp")" = "$stamp" ]; then
  echo "45-kube: control plane ready: $cache ($stamp)"
  exit 0
fi
command -v go >/dev/null || { echo "45-kube: needs Go >= 1.26 to build the control plane" >&2; exit 1; }
command -v openssl >/dev/null || { echo "45-kube: needs openssl (the test CA)" >&2; exit 1; }

start=$SECONDS
rm -rf "$cache.new"
mkdir -p "$cache.new/bin" "$cache.new/stages" "$cache.new/crds"
wrapper=$(mktemp -d)
trap 'rm -rf "$wrapper" "$cache.new"' EXIT
cd "$wrapper"
go mod init flashfleet.invalid/kube-build >/dev/null 2>&1
# k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with ./staging/...,
# which only applies inside its own module: here each one is replaced by its published release
# (the sample-* ones are examples the build does not need, and not all are served).
kgomod=$(retry go mod download -json "k8s.io/kubernetes@$kubernetes" | sed -n 's/^\s*"GoMod": "\(.*\)",$/\1/p')
mapfile -t staged < <(sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$kgomod" | grep -v '/sample-')
[ "${#staged[@]}" -gt 20 ] || { echo "45-kube: found only ${#staged[@]} staging modules in $kgomod" >&2; exit 1; }
edits=(-require="k8s.io/kubernetes@$kubernetes")
for m in "${staged[@]}"; do edits+=(-replace="$m=$m@$staging"); done
go mod edit "${edits[@]}"
cat >tools.go <<'EOF'
//go:build tools

package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
EOF
retry go get "go.etcd.io/etcd/server/v3@$etcd" "sigs.k8s.io/kwok@$kwok"
retry env GOFLAGS=-mod=mod go mod tidy
echo "45-kube: modules fetched in $((SECONDS - start)) s"

built=$SECONDS
minor=${kubernetes#v1.}
minor=${minor%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  # without these the server reports v0.0.0-master+$Format:%H$, which kubectl cannot parse
  ldflags+=" -X $pkg.gitVersion=$kubernetes -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done
CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$cache.new/bin/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl \
  sigs.k8s.io/kwok/cmd/kwok go.etcd.io/etcd/server/v3
mv "$cache.new/bin/server" "$cache.new/bin/etcd"  # the package go.etcd.io/etcd/server/v3 is built as `server`
echo "45-kube: binaries built in $((SECONDS - built)) s"

# kwok's node and pod lifecycles (Ready nodes, Running pods, completed Job pods) ship in its module
kwokdir=$(go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
cp "$kwokdir"/kustomize/stage/node/fast/node-initialize.yaml "$kwokdir"/kustomize/stage/node/heartbeat/node-heartbeat.yaml \
  "$kwokdir"/kustomize/stage/pod/fast/pod-{ready,complete,delete}.yaml "$cache.new/stages/"
lwsdir=$(retry go mod download -json "sigs.k8s.io/lws@$lws" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
cp "$lwsdir"/config/crd/bases/*.yaml "$cache.new/crds/"
chmod -R u+w "$cache.new"

"$cache.new/bin/kubectl" version --client >/dev/null
echo "$stamp" >"$cache.new/.stamp"
rm -rf "$cache"
mv "$cache.new" "$cache"
echo "45-kube: $stamp in $((SECONDS - start)) s: $cache ($(du -sh "$cache/bin" | cut -f1))"
