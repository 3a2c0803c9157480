#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Maintenance of a repository on a read-only mount (a drive mounted ro, a snapshot of a share):
# readers still verify and repair reads (they take the shared locks/gc); what must write says
# which entry it could not write: gc and prune's gc name gc/, prune the snapshot record it could
# not forget, a scheduled verify names verify-state after reading, and repair --force cannot
# open for writing. Nothing changes.
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd openssl mount umount python3

repo=$T/repo ro=$T/ro
bv init "$repo" --encryption=none >/dev/null
randfile "$T/a.img" 1 ro-a
bv backup "$repo" "$T/a.img" --name=a -q
bv backup "$repo" "$T/a.img" --name=a -q --force-read
first=$(bv list "$repo" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])').snap
rm -rf "$repo/gc" "$repo/verify-state"
mkdir "$ro"
mount --bind "$repo" "$ro"
on_exit "umount $ro"
mount -o remount,bind,ro "$ro"
listing() { (cd "$repo" && find . -printf '%y %p\n' | sort); }
listing >"$T/before"

bv verify "$ro" --read-data >/dev/null
bv repair "$ro" 2>&1 >/dev/null | grep_q "nothing to repair" || die "repair (reading) of a read-only repository"
expect_fail 1 "^error: cannot verify '$ro': 'verify-state': Read-only file system$" bv verify "$ro" --read-data --sample=50
expect_fail 1 "^error: cannot collect garbage in '$ro' (nothing was lost): 'gc': Read-only file system$" bv gc "$ro"
expect_fail 1 "^error: cannot collect garbage in '$ro' (nothing was lost): 'gc': Read-only file system$" \
    bv prune "$ro" --keep-last=2
expect_fail 1 "^error: cannot open repository '$ro': Read-only file system$" bv repair "$ro" --force
# prune without gc: the snapshot it could not forget is named
expect_fail 1 "^error: cannot prune '$ro': cannot forget 'snapshots/$first': Read-only file system$" \
    bv prune "$ro" --keep-last=1 --no-gc
listing | diff "$T/before" - >&2 || die "maintenance of the read-only mount changed the repository"
bv restore "$ro" a "$T/a.out" >/dev/null
assert_same "$T/a.img" "$T/a.out"
