#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The main job on an embedded default, from a fresh Debian 12 machine (as root):
#   1. install the dependencies and build blkvault;
#   2. generate a partitioned disk image (GPT; ext4, XFS and btrfs holding real files);
#   3. make a "USB drive": a loop device with an ext4 filesystem, mounted as the target;
#   4. back the image up into an encrypted repository on it, twice (the second run after a
#      change to the image stores only what changed);
#   5. restore the newest snapshot to a file and compare it with the image, bit for bit;
#   6. serve the snapshot over NBD with nbdkit and read it back with nbdcopy, compare again,
#      and show the export's zero/data map with nbdinfo.
# Everything lives in $WORK (default /var/tmp/blkvault-demo) and is cleaned up at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD

[ "$(id -u)" = 0 ] || { echo "demo: run as root (loop devices and mounts)" >&2; exit 1; }
./scripts/install-deps.sh
builddir=${BUILDDIR:-build}
[ -f "$builddir/build.ninja" ] || meson setup "$builddir" -Dbuildtype=release >/dev/null
ninja -C "$builddir" >/dev/null
bv=$src/$builddir/src/cli/blkvault
plugin=$src/$builddir/nbd-plugin/nbdkit-blkvault-plugin.so

WORK=${WORK:-/var/tmp/blkvault-demo}
rm -rf "$WORK"
mkdir -p "$WORK"
target_mnt=$WORK/usb
nbdkit_pid=
cleanup() {
    if [ -n "$nbdkit_pid" ]; then kill "$nbdkit_pid" 2>/dev/null; wait "$nbdkit_pid" 2>/dev/null; fi
    mountpoint -q "$target_mnt" && umount "$target_mnt"
    [ -n "${loopdev:-}" ] && losetup -d "$loopdev" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT

step() { printf '\n== %s\n' "$*"; }

step "generating a 2 GiB partitioned disk image with real content"
"$src/images/make-image.sh" "$WORK/disk.img" 2G --content-mib 300
sfdisk -l "$WORK/disk.img" | sed -n '/^Device/,$p'

step "preparing a 4 GiB loop-device target with ext4 (the 'USB drive')"
truncate -s 4G "$WORK/usb.img"
loopdev=$(losetup -f --show "$WORK/usb.img")
mkfs.ext4 -q -L bv-usb "$loopdev"
mkdir -p "$target_mnt"
mount "$loopdev" "$target_mnt"
echo "target: $loopdev mounted on $target_mnt"

export BLKVAULT_PASSPHRASE=${BLKVAULT_PASSPHRASE:-demo passphrase}
repo=$target_mnt/repo
step "blkvault init (AES-256-GCM, hybrid chunker, zstd level 3)"
"$bv" init "$repo"

step "blkvault backup (v1)"
"$bv" backup "$repo" "$WORK/disk.img" --name=disk
step "changing the image (v2) and backing it up again"
"$src/images/mutate.sh" "$WORK/disk.img" v2
"$bv" backup "$repo" "$WORK/disk.img" --name=disk
"$bv" list "$repo"
"$bv" info "$repo"

step "blkvault restore disk (newest) to a sparse file, compared with the image"
"$bv" restore "$repo" disk "$WORK/restored.img"
cmp "$WORK/disk.img" "$WORK/restored.img"
echo "restored image is identical ($(du -h --apparent-size "$WORK/restored.img" | cut -f1) apparent, $(du -h "$WORK/restored.img" | cut -f1) allocated)"

step "serving the snapshot over NBD and reading it back with nbdcopy"
sock=$WORK/nbd.sock
# --threads=1: see "SERVING OVER NBD" in blkvault(1) (nbdkit 1.32 aborts on a client hanging up)
nbdkit --foreground --readonly --threads=1 --unix "$sock" "$plugin" repo="$repo" snapshot=disk &
nbdkit_pid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
nbdinfo "nbd+unix:///?socket=$sock" | grep -E 'export-size|can_multi_conn|block_size_preferred' || true
nbdinfo --map --totals "nbd+unix:///?socket=$sock"
nbdcopy "nbd+unix:///?socket=$sock" "$WORK/nbd.img"
cmp "$WORK/disk.img" "$WORK/nbd.img"
echo "NBD read-back is identical"
"$bv" verify "$repo" --read-data

step "done: backup, restore and NBD read-back all bit-exact"
