#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# blkvault mount of a snapshot of an S3 repository (issue 23): a local repository holding an ext4
# image is uploaded to versitygw with rclone, then `blkvault mount s3://...` shows its files (the
# plugin reads the bucket), also with --point-in-time; umount leaves nothing behind.
. "$SOURCE_ROOT/tests/lib.sh"
need_root
: "${NBD_PLUGIN:?run through meson test (needs the nbdkit plugin)}"
. "$SOURCE_ROOT/tests/nbd/nbd-lib.sh"
. "$SOURCE_ROOT/tests/s3/s3-lib.sh"
need_cmd mkfs.ext4 losetup nbdfuse fusermount3 openssl rclone
[ -e /dev/fuse ] || skip "no /dev/fuse"
[ -e /dev/loop-control ] || skip "no loop devices"
s3_start
s3_mb bvmount versioned
export BLKVAULT_CACHE_DIR=$T/cache

img=$T/disk.img
truncate -s 64M "$img"
mkfs.ext4 -q -F "$img"
mkdir -p "$T/mnt"
attach_loop loop "$img"
mount "$loop" "$T/mnt"
randfile "$T/big.bin" 5 s3mount
cp "$T/big.bin" "$T/mnt/big.bin"
echo "hello from the bucket" >"$T/mnt/hello.txt"
umount "$T/mnt"
detach_loop "$loop"

repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
bv backup "$repo" "$img" --name=disk >/dev/null
s3_rclone_remote
rclone copy --exclude 'locks/**' --exclude 'tmp/**' --exclude 'leases/**' "$repo" gw:bvmount/m \
    || die "rclone copy failed"
sleep 1.1
pit=@$(date +%s)

mp=$T/view
mkdir -p "$mp"
on_exit "\"$BLKVAULT\" umount \"$mp\""
for args in "" "--point-in-time=$pit"; do
    # shellcheck disable=SC2086
    "${NBD_ENV[@]}" "$BLKVAULT" mount s3://bvmount/m disk "$mp" $args 2>"$T/mount.log" ||
        { cat "$T/mount.log" >&2; die "blkvault mount s3:// $args failed"; }
    assert_eq "$(findmnt -n -o FSTYPE "$mp")" ext4 "filesystem ($args)"
    assert_same "$T/big.bin" "$mp/big.bin"
    assert_eq "$(cat "$mp/hello.txt")" "hello from the bucket" "hello.txt ($args)"
    "$BLKVAULT" umount "$mp" 2>"$T/umount.log" || { cat "$T/umount.log" >&2; die "umount failed"; }
    ! mountpoint -q "$mp" || die "$mp still mounted"
done
echo ok
