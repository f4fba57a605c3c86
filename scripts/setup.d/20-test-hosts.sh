#!/usr/bin/env bash
# Real systemd test hosts for the Ansible roles (systemd-nspawn in network namespaces):
# installs the host tools (sudo: the playbooks' `become` on tests that use this machine
# as a local-connection node; Debian's docker-registry, the real OCI registry the lock and image
# tests serve images from) and builds the base Debian rootfs once, then caches it.
# The hosts themselves are started and stopped by the pytest session (tests/hosts/harness.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/lib/retry.sh

need_apt=()
for tool in debootstrap:debootstrap systemd-nspawn:systemd-container iptables:iptables \
            ip:iproute2 ssh:openssh-client ssh-keygen:openssh-client dpkg-deb:dpkg \
            apt-ftparchive:apt-utils gpg:gpg gpg-agent:gpg-agent sudo:sudo \
            docker-registry:docker-registry openssl:openssl; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || need_apt+=("${tool##*:}")
done
if ((${#need_apt[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  retry apt-get update -qq
  retry apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

# Every booted host's systemd, journald, logind and dockerd each take inotify instances of the
# machine's one per-user budget (root's, as nspawn runs them): at the kernel default of 128, two
# test workers' hosts exhaust it and the next host's systemd exits at boot ("Failed to allocate
# manager object: Too many open files"). Raised here, never lowered (kind's known-issues
# page raises the same two limits for many nodes on one machine).
raise_sysctl() {
  local key=$1 want=$2 have
  have=$(sysctl -n "$key")
  if [ "$have" -lt "$want" ]; then sysctl -qw "$key=$want"; echo "$key: $have -> $want"; fi
}
raise_sysctl fs.inotify.max_user_instances 8192
raise_sysctl fs.inotify.max_user_watches 524288

# The base rootfs: what every test host boots (real systemd + sshd + python3 for Ansible).
cache="${FLASHFLEET_TEST_HOSTS_CACHE:-/var/cache/flashfleet/test-hosts}"
base="$cache/base-bookworm"
packages=python3,python3-apt,python3-venv,systemd,systemd-sysv,dbus,iproute2,openssh-server,sudo,ca-certificates,procps,gnupg
stamp="$base.ok"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$packages" ]; then
  rm -rf "$base" "$stamp"
  mkdir -p "$cache"
  echo "building test-host rootfs (debootstrap, about a minute)"
  bootstrap() {
    rm -rf "$base.tmp"
    debootstrap --variant=minbase --include="$packages" bookworm "$base.tmp" >"$cache/debootstrap.log" 2>&1 \
      || { tail -20 "$cache/debootstrap.log"; return 1; }
  }
  retry bootstrap
  # sshd needs host keys; systemd must not wait for hardware it will never see.
  chroot "$base.tmp" ssh-keygen -A >/dev/null
  rm -f "$base.tmp/etc/machine-id" && : >"$base.tmp/etc/machine-id"
  chroot "$base.tmp" apt-get clean
  mv "$base.tmp" "$base"
  echo "$packages" >"$stamp"
fi

# Wheels the test hosts install from the controller (the model_weights role's download client,
# at the version the role pins): fetched here so the hosts need no route to the package index.
hub_version=$(sed -n 's/^model_weights_hub_version: "\(.*\)"$/\1/p' roles/model_weights/defaults/main.yml)
wheels="$cache/wheels-huggingface_hub-$hub_version"
if [ ! -f "$wheels/.ok" ]; then
  if python3 -m pip --version >/dev/null 2>&1; then pip=(python3 -m pip); else pip=(uv tool run pip); fi
  mkdir -p "$wheels"
  retry "${pip[@]}" download --quiet --disable-pip-version-check --only-binary=:all: \
    --python-version 3.11 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux_2_28_x86_64 -d "$wheels" "huggingface_hub==$hub_version"
  touch "$wheels/.ok"
fi
ln -sfn "$wheels" "$cache/wheels"
echo "test-host rootfs ready: $base"
