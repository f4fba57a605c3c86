#!/usr/bin/env bash
# What GB300's arm64 derived image costs to check on an x86_64 machine under qemu user emulation
# (Debian's qemu-user-static, registered with binfmt_misc): a Debian 12 arm64 root with FFmpeg, the
# release's aarch64 packages (torch 2.14.1 as PyPI builds it for aarch64, transformers 5.19.0,
# tokenizers 0.23.2) and the pin the derived image adds there (torchcodec 0.17.0: the release
# ships none on aarch64), then the sglang_image role's in-image check, emulated. Prints each
# step's time; the figures decide whether the emulated build fits CI (it runs no test).
#
#   sudo benchmarks/arm64_under_qemu.sh [WORKDIR]      (root: debootstrap, chroot, binfmt_misc)
set -euo pipefail
cd "$(dirname "$0")/.."
work="${1:-/var/tmp/flashfleet-arm64-qemu}"
root="$work/root"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
step() { printf '%-58s %6d s\n' "$1" "$(($(date +%s) - $2))"; }

t=$(date +%s)
command -v qemu-aarch64-static >/dev/null || apt-get install -y -qq qemu-user-static >/dev/null
[ -e /proc/sys/fs/binfmt_misc/register ] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
  # the ELF header of an aarch64 executable; F: the interpreter is opened now, so chroots and
  # containers that do not hold it can run arm64 programs
  printf '%s' ':qemu-aarch64:M::\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00:\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff:/usr/bin/qemu-aarch64-static:F' \
    >/proc/sys/fs/binfmt_misc/register
fi
step "qemu-user-static, binfmt_misc" "$t"

if [ ! -x "$root/usr/bin/python3" ]; then
  rm -rf "$root" && mkdir -p "$root"
  t=$(date +%s)
  debootstrap --arch=arm64 --foreign --variant=minbase --include=python3,ffmpeg bookworm "$root" "$mirror" >/dev/null
  step "debootstrap arm64, first stage (native)" "$t"
  t=$(date +%s)
  chroot "$root" /debootstrap/debootstrap --second-stage >/dev/null
  step "debootstrap arm64, second stage (emulated dpkg)" "$t"
fi

site="$root/usr/local/lib/python3.11/dist-packages"
if [ ! -d "$site/torch" ]; then
  t=$(date +%s)
  # pip on the host, for the arm64 root: nothing emulated here
  # every manylinux tag Debian 12's glibc 2.36 runs (the CUDA wheels use several)
  platforms=(--platform manylinux2014_aarch64)
  for minor in $(seq 17 36); do platforms+=(--platform "manylinux_2_${minor}_aarch64"); done
  python3 -m pip install --quiet --disable-pip-version-check --no-cache-dir --only-binary=:all: \
    "${platforms[@]}" --python-version 3.11 --implementation cp --target "$site" \
    torch==2.14.1 torchcodec==0.17.0 transformers==5.19.0 tokenizers==0.23.2
  step "pip install --target, aarch64 wheels ($(du -sh "$site" | cut -f1))" "$t"
fi

cp roles/sglang_image/files/check_multimodal.py "$root/tmp/"
t=$(date +%s)
chroot "$root" python3 -c 'import torch; print("torch", torch.__version__, torch.__file__)'
step "import torch, emulated" "$t"
t=$(date +%s)
chroot "$root" python3 /tmp/check_multimodal.py --skip-pip-check --expect transformers==5.19.0 \
  --expect tokenizers==0.23.2 --expect torchcodec==0.17.0 --refuse-transformers 5.12.1
step "the in-image check (processor, torchcodec decode), emulated" "$t"
