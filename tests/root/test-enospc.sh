#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A full target: the repository lives on a small loop-device filesystem; a backup larger than
# the free space fails clearly (exit 6, "target is full"), earlier snapshots stay intact and
# verify, and after freeing space a new backup succeeds. A failed backup that kept packs (the
# next backup of it would continue from them) fills a filesystem: a backup of something else
# that then meets the full filesystem collects them (gc, once) and succeeds.
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

mount_small_fs "$T/mnt2" 128M
repo=$T/mnt2/repo
bv init "$repo" --encryption=none --compression=none >/dev/null
randfile "$T/a" 16 enospc-a
randfile "$T/big2" 160 enospc-big2
randfile "$T/c" 40 enospc-c
bv backup "$repo" "$T/a" --name=a >/dev/null
expect_fail 6 "the repository's target is full (earlier snapshots are intact; [0-9.]* MiB in [1-9][0-9]* packs were kept for the next backup, 'blkvault gc' deletes them)" \
    bv backup "$repo" "$T/big2" --name=big2
bv backup "$repo" "$T/c" --name=c >"$T/out" 2>&1 || { cat "$T/out"; die "backup after a failed one on a full target"; }
grep -qx "note: the target of '$repo' is full: collecting garbage once, then backing up again" "$T/out" ||
    { cat "$T/out"; die "the backup did not say it collected garbage"; }
grep -q "^gc deleted [1-9][0-9]* packs, " "$T/out" || { cat "$T/out"; die "gc deleted nothing"; }
bv restore "$repo" c "$T/c.out" >/dev/null
assert_same "$T/c" "$T/c.out"
bv restore "$repo" a "$T/a.out" >/dev/null
assert_same "$T/a" "$T/a.out"
echo ok
