#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A full target: the repository lives on a small loop-device filesystem; a backup larger than
# the free space fails clearly (exit 6, "target is full"), earlier snapshots stay intact and
# verify, and after freeing space a new backup succeeds.
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd mkfs.ext4 openssl

mount_small_fs "$T/mnt" 48M

randfile "$T/small" 4 small
randfile "$T/big" 96 big
repo=$T/mnt/repo
bv init "$repo" --encryption=none --compression=none >/dev/null
bv backup "$repo" "$T/small" --name=small >/dev/null
dd if=/dev/zero of="$T/mnt/filler" bs=1M count=12 status=none
expect_fail 6 "target is full" bv backup "$repo" "$T/big" --name=big
bv verify "$repo" --read-data >/dev/null || die "verify failed after ENOSPC"
bv restore "$repo" small "$T/small.out" >/dev/null
assert_same "$T/small" "$T/small.out"
[ "$(bv list "$repo" --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" = 1 ] \
    || die "a failed backup published a snapshot"
# after freeing space a new backup succeeds
rm "$T/mnt/filler"
randfile "$T/small2" 4 small2
bv backup "$repo" "$T/small2" --name=small2 >/dev/null
bv restore "$repo" small2 "$T/small2.out" >/dev/null
assert_same "$T/small2" "$T/small2.out"
echo ok
