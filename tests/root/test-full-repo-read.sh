#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A full backup disk still restores: when the repository's filesystem has no free block, a
# reader cannot write its lease file (ENOSPC) and takes the shared locks/gc instead (as on a
# read-only mount), so list, verify --read-data and restore work and are bit-exact; a backup
# fails with exit 6, and on a read-only mount names it.
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd mkfs.ext4 openssl

mount_small_fs "$T/mnt" 32M

repo=$T/mnt/repo
randfile "$T/a.img" 4 full-a
bv init "$repo" --encryption=none >/dev/null
bv backup "$repo" "$T/a.img" --name=a -q
# fill every block and then every inode-free byte of the last block
dd if=/dev/zero of="$T/mnt/filler" bs=64K status=none 2>/dev/null || true
dd if=/dev/zero of="$T/mnt/filler2" bs=1K status=none 2>/dev/null || true
dd if=/dev/zero of="$T/mnt/filler3" bs=1 count=65536 status=none 2>/dev/null || true
sync
(: >"$T/mnt/probe" && printf x >"$T/mnt/probe") 2>/dev/null && die "the filesystem is not full"
rm -f "$T/mnt/probe"

bv list "$repo" >"$T/out" || die "list on a full filesystem"
grep -q " a " "$T/out" || { cat "$T/out"; die "list did not show snapshot a"; }
bv verify "$repo" --read-data >/dev/null 2>"$T/err" || { cat "$T/err" >&2; die "verify on a full filesystem"; }
bv restore "$repo" a "$T/out.img" -q
assert_same "$T/a.img" "$T/out.img"
randfile "$T/b.img" 2 full-b
expect_fail 6 "^error: cannot open repository .*: No space left on device$" bv backup "$repo" "$T/b.img" --name=b -q

# space freed: gc runs and the snapshot still restores
rm -f "$T/mnt/filler" "$T/mnt/filler2" "$T/mnt/filler3"
bv gc "$repo" >/dev/null
bv restore "$repo" a "$T/out2.img" -q
assert_same "$T/a.img" "$T/out2.img"

# a read-only mount: a backup says so (the lock file cannot be made), not that the repository is
# missing (it said "not a blkvault repository (no config file)"), whether locks/ is there empty
# (as init leaves it) or not there at all; readers go on
rm -f "$T/mnt/repo/locks/"*
for round in empty-locks no-locks; do
    mount -o remount,ro "$T/mnt"
    expect_fail 1 "^error: cannot open repository .*: Read-only file system$" bv backup "$repo" "$T/b.img" --name=b -q
    bv restore "$repo" a "$T/out3.img" -q
    assert_same "$T/a.img" "$T/out3.img"
    mount -o remount,rw "$T/mnt"
    rm -rf "$T/mnt/repo/locks" "$T/out3.img"
done
