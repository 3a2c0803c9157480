#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Installs everything blkvault needs to build, test and benchmark on Debian 12.
# Idempotent: packages already present are left alone.
set -euo pipefail

build=(meson ninja-build pkg-config gcc git
       liburing-dev libzstd-dev libssl-dev libblkid-dev libjson-c-dev
       libcryptsetup-dev libsystemd-dev nbdkit nbdkit-plugin-dev libnbd-dev
       clang libclang-rt-14-dev)   # clang and libFuzzer: the fuzz build (scripts/fuzz.sh)
runtime=(nbdkit libnbd-bin nbdfuse fuse3 qemu-utils util-linux fdisk
         e2fsprogs xfsprogs btrfs-progs cryptsetup-bin python3 python3-libnbd
         kmod rsync time)
peers=(borgbackup python3-llfuse restic)

missing=()
for p in "${build[@]}" "${runtime[@]}" "${peers[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
echo "installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=900 update -qq
apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
