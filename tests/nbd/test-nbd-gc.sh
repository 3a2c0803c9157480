#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# gc beside an NBD export (real nbdkit): while clients read the whole image and compare its
# sha256, its snapshot is forgotten and gc runs again and again; the export stays readable and
# bit-exact until it ends (its lease holds the deletion back), then the next gc reclaims the
# snapshot's packs, and what remains verifies and restores bit-exact.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/nbd/nbd-lib.sh"
need_cmd nbdcopy openssl python3

repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
randfile "$T/a" 6 nbdgc-a
head -c $((2 << 20)) /dev/zero >>"$T/a"
randfile "$T/b" 4 nbdgc-b
bv backup "$repo" "$T/a" --name=disk -q
bv backup "$repo" "$T/b" --name=other -q
id=$(bv list "$repo" --json | python3 -c 'import json,sys; print([s["snapshot"] for s in json.load(sys.stdin) if s["name"] == "disk"][0])')
want=$(sha256sum <"$T/a" | cut -d' ' -f1)
npacks() { find "$repo/packs" -name '*.pack' | wc -l; }

start_nbdkit gc repo="$repo" snapshot="$id"
read_all() { nbdcopy "$NBD_URI" - | sha256sum | cut -d' ' -f1; }
assert_eq "$(read_all)" "$want" "the export before gc"

# clients read while gc runs: before and after the snapshot is forgotten
for round in 1 2 3; do
    (for _ in 1 2; do bv gc "$repo" >/dev/null 2>>"$T/gc.err" || echo fail >>"$T/gc.err"; done) &
    gcpid=$!
    [ "$round" != 2 ] || bv delete "$repo" "$id" 2>/dev/null
    assert_eq "$(read_all)" "$want" "the export while gc runs (round $round)"
    wait $gcpid
    ! grep -q . "$T/gc.err" || { cat "$T/gc.err" >&2; die "gc failed beside the export"; }
done
bv gc "$repo" >"$T/out"
grep -qx "deleted 0 packs, 0 B" "$T/out" || { cat "$T/out"; die "gc deleted what the export serves"; }
grep -q "^note: 1 condemned lists wait for older backups, restores or exports to end" "$T/out" ||
    { cat "$T/out"; die "gc did not say that a list waits for the export"; }
assert_eq "$(npacks)" 2 "packs while the forgotten snapshot is served"
assert_eq "$(read_all)" "$want" "the forgotten snapshot, still served"

stop_nbdkit
bv gc "$repo" >"$T/out"
grep -qx "deleted 1 packs, 6.0 MiB" "$T/out" || { cat "$T/out"; die "gc after the export ended"; }
assert_eq "$(npacks)" 1 "packs after the export ended"
[ -z "$(ls "$repo/leases")" ] || die "leases left: $(ls "$repo/leases")"
bv verify "$repo" --read-data >/dev/null 2>&1 || die "verify after gc"
bv restore "$repo" other "$T/b.out" 2>/dev/null
assert_same "$T/b" "$T/b.out"
