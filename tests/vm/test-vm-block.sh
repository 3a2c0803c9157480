#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Guest script (meson: vmrun --scratch 1G -- bash test-vm-block.sh): the block drivers this
# host's kernel lacks work in the guest. LUKS2 on the virtio disk opens through dm-crypt; ext4,
# XFS and btrfs are made and mounted on the mapper device and keep their files; close removes
# the mapper device. Then a blkvault snapshot of an ext4 image is served by nbdkit with the
# plugin on a unix socket, attached with nbd-client to /dev/nbd0 and mounted: same files.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/vm/vm-lib.sh"
vm_guest_only
: "${NBD_PLUGIN:?run through meson test (needs the nbdkit plugin)}"
. "$SOURCE_ROOT/tests/nbd/nbd-lib.sh"
need_cmd cryptsetup mkfs.ext4 mkfs.xfs mkfs.btrfs nbd-client nbdkit
disk=/dev/vda
[ -b "$disk" ] || die "no scratch disk $disk"

mkdir -p "$T/src/dir" "$T/mnt"
randfile "$T/src/big.bin" 4 vmblock
seq 1 20000 >"$T/src/dir/numbers.txt"

# --- LUKS2 on virtio, three filesystems on the mapper device
vm_log "start"
head -c 64 /dev/urandom >"$T/key"
# pbkdf2 at its minimum: argon2's memory cost is slow under emulation and proves nothing here
cryptsetup luksFormat --batch-mode --type luks2 --pbkdf pbkdf2 --pbkdf-force-iterations 1000 \
    --key-file "$T/key" "$disk"
cryptsetup open --key-file "$T/key" "$disk" vmblock
dev=/dev/mapper/vmblock
[ -b "$dev" ] || die "cryptsetup open made no $dev"
assert_eq "$(lsblk -n -o TYPE "$dev")" crypt "type of $dev"
for fs in ext4 xfs btrfs; do
    case $fs in
    ext4) mkfs.ext4 -q -F "$dev" ;;
    xfs) mkfs.xfs -q -f "$dev" ;;
    btrfs) mkfs.btrfs -q -f "$dev" >/dev/null ;;
    esac
    mount "$dev" "$T/mnt"
    cp -a "$T/src/." "$T/mnt/"
    umount "$T/mnt"
    mount -o ro "$dev" "$T/mnt"
    assert_eq "$(findmnt -n -o FSTYPE "$T/mnt")" "$fs" "filesystem on $dev"
    for f in big.bin dir/numbers.txt; do assert_same "$T/src/$f" "$T/mnt/$f"; done
    umount "$T/mnt"
    vm_log "luks2 + $fs: ok"
done
cryptsetup close vmblock
[ ! -e "$dev" ] || die "$dev left after cryptsetup close"
cryptsetup isLuks "$disk" || die "$disk is no longer LUKS"

# --- a served snapshot through the kernel's nbd driver
vm_log "nbd: backup"
img=$T/fs.img
truncate -s 32M "$img"
mkfs.ext4 -q -F -d "$T/src" "$img"
bv init "$T/repo" --encryption=none >/dev/null
bv backup "$T/repo" "$img" --name=fs >/dev/null
vm_log "nbd: serve"
start_nbdkit fs repo="$T/repo" snapshot=fs
modprobe nbd
nbd-client -unix "$T/fs.sock" /dev/nbd0 -readonly >/dev/null
on_exit "nbd-client -d /dev/nbd0"
assert_eq "$(blockdev --getsize64 /dev/nbd0)" $((32 << 20)) "size of /dev/nbd0"
cmp "$img" /dev/nbd0 || die "/dev/nbd0 differs from the image"
mount -o ro /dev/nbd0 "$T/mnt"
for f in big.bin dir/numbers.txt; do assert_same "$T/src/$f" "$T/mnt/$f"; done
umount "$T/mnt"
nbd-client -d /dev/nbd0 >/dev/null
vm_log "nbd-client + ext4: ok"
