#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# gc: prune reclaims forgotten snapshots' packs; a pack partly in use is rewritten (its live
# objects copied); an orphan pack (no index names it) is reclaimed; --dry-run changes nothing;
# a live lease older than the condemned list holds the deletion back until it ends (then the
# next gc deletes and reaps it). After each step every remaining snapshot verifies (reading every
# chunk) and restores bit-exact. A backup killed after linking its first pack leaves an orphan that
# one gc reclaims.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd openssl python3 flock

repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
packs_bytes() { du -sb "$repo/packs" | cut -f1; }
npacks() { find "$repo/packs" -name '*.pack' | wc -l; }
check_all() {
    bv verify "$repo" --read-data >/dev/null 2>"$T/verify.err" || { cat "$T/verify.err" >&2; die "verify after $1"; }
    local s
    for s in "${@:2}"; do
        bv restore "$repo" "$s" "$T/restored" 2>/dev/null
        assert_same "$T/$s.img" "$T/restored"
        rm -f "$T/restored"
    done
}
backup() { bv backup "$repo" "$T/$1.img" --name="$1" -q; }

expect_fail 2 "^error: invalid --max-unused '101' (0 to 100)$" bv gc "$repo" --max-unused=101
expect_fail 2 "^error: invalid --max-unused '10%%' (0 to 100)$" bv gc "$repo" --max-unused=10%%
# a percentage, as the help says: with its sign too
bv gc "$repo" --max-unused=10% --dry-run >/dev/null || die "gc --max-unused=10% was refused"
expect_fail 2 "^error: expected 'blkvault gc REPO' (see 'blkvault help gc')$" bv gc

# A. two snapshots, one forgotten by prune: its pack goes in the same run
randfile "$T/a.img" 4 gc-a
randfile "$T/b.img" 4 gc-b
backup a
backup b
bv gc "$repo" --dry-run >"$T/out"
grep -qx "would condemn 0 of 2 packs (0 unused, 0 of interrupted backups, 0 rewritten), 0 B; 0 B copied" "$T/out" ||
    { cat "$T/out"; die "gc --dry-run of a repository without garbage"; }
bv prune "$repo" --name=a --keep-last=1 >/dev/null 2>&1
bv delete "$repo" a 2>/dev/null
bv gc "$repo" --dry-run >"$T/out"
grep -qx "would condemn 1 of 2 packs (1 unused, 0 of interrupted backups, 0 rewritten), 4.0 MiB; 0 B copied" "$T/out" ||
    { cat "$T/out"; die "gc --dry-run after a delete"; }
assert_eq "$(npacks)" 2 "packs after a dry run"
randfile "$T/c.img" 1 gc-c
backup c
bv prune "$repo" --name=c --keep-last=1 >"$T/out" 2>"$T/err"   # keeps c: gc reclaims a's pack
grep -qx "condemned 1 of 3 packs (1 unused, 0 of interrupted backups, 0 rewritten), 4.0 MiB; 0 B copied" "$T/out" ||
    { cat "$T/out"; die "prune's gc"; }
grep -qx "deleted 1 packs, 4.0 MiB" "$T/out" || { cat "$T/out"; die "prune's gc did not delete the pack"; }
assert_eq "$(npacks)" 2 "packs after prune"
check_all "prune and gc" b c

# B. a pack partly in use is rewritten: d = X + Y, e = X + Z; forgetting d leaves Y unused
randfile "$T/x" 3 gc-x
randfile "$T/y" 3 gc-y
randfile "$T/z" 1 gc-z
cat "$T/x" "$T/y" >"$T/d.img"
cat "$T/x" "$T/z" >"$T/e.img"
backup d
backup e
bv delete "$repo" d 2>/dev/null
bv gc "$repo" --json >"$T/json"
assert_eq "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["packs_dead"], d["packs_orphan"], d["packs_rewritten"], d["packs_deleted"], d["bytes_copied"] > 2900000, d["lists_waiting"])' "$T/json")" \
    "0 0 1 1 True 0" "gc rewrote the pack that was half unused"
check_all "a rewrite" b c e

# C. an orphan: a pack file no index names (as an interrupted backup leaves) is reclaimed
other=$T/other
bv init "$other" --encryption=none >/dev/null
bv backup "$other" "$T/z" -q
orphan=$(find "$other/packs" -name '*.pack')
mkdir -p "$repo/packs/$(basename "$(dirname "$orphan")")"
cp "$orphan" "$repo/packs/$(basename "$(dirname "$orphan")")/"
before=$(npacks)
bv gc "$repo" >"$T/out"
grep -q "^condemned 1 of $before packs (0 unused, 1 of interrupted backups, 0 rewritten)" "$T/out" ||
    { cat "$T/out"; die "gc did not condemn the orphan"; }
[ ! -e "$repo/packs/$(basename "$(dirname "$orphan")")/$(basename "$orphan")" ] || die "the orphan pack is still there"
check_all "an orphan" b c e

# D. a live lease older than the condemned list: nothing is deleted until it ends
lease=$repo/leases/00000000000000aa.lease
echo '{"kind":"read","epoch":0,"pid":1,"snapshot":""}' >"$lease"
# one process holds the lock (killing it ends the lease), with no fd of the test's output
python3 -c 'import fcntl, sys, time; f = open(sys.argv[1]); fcntl.flock(f, fcntl.LOCK_EX); time.sleep(600)' "$lease" >/dev/null 2>&1 &
holder=$!
on_exit "kill $holder"
for _ in $(seq 100); do flock -x -n "$lease" true || break; sleep 0.1; done
bv delete "$repo" b 2>/dev/null
size=$(packs_bytes)
bv gc "$repo" >"$T/out"
grep -qx "deleted 0 packs, 0 B" "$T/out" || { cat "$T/out"; die "gc deleted with an older lease live"; }
grep -qx "note: 1 condemned lists wait for older backups, restores or exports to end (a later gc deletes them)" "$T/out" ||
    { cat "$T/out"; die "gc did not say a list waits"; }
assert_eq "$(packs_bytes)" "$size" "packs with an older lease live"
kill "$holder"; wait "$holder" 2>/dev/null || true
bv gc "$repo" >"$T/out"
grep -qx "deleted 1 packs, 4.0 MiB" "$T/out" || { cat "$T/out"; die "gc after the lease ended"; }
[ ! -e "$lease" ] || die "the dead lease was not reaped"
[ -z "$(ls "$repo/gc" | grep -v '^epoch$')" ] || die "lists left in gc/: $(ls "$repo/gc")"
check_all "the lease ended" c e

# E. a backup killed after its first pack was linked, in a repository with no index yet: its
# lease dies with it, and one gc reclaims the pack
fresh=$T/fresh
bv init "$fresh" --encryption=none >/dev/null
randfile "$T/big" 40 gc-big
BV_STALL_WRITE=1 stall_start $((34 << 20)) "$T/backup.err" "$BLKVAULT" backup "$fresh" "$T/big" -q
kill -KILL $pid; wait $pid 2>/dev/null || true; pid=
assert_eq "$(find "$fresh/packs" -name '*.pack' | wc -l)" 1 "packs the killed backup linked"
bv gc "$fresh" >"$T/out"
# a pack is closed once it reaches 32 MiB: its size depends on where the chunks were cut
grep -qx "condemned 1 of 1 packs (0 unused, 1 of interrupted backups, 0 rewritten), 32\.[0-9] MiB; 0 B copied" "$T/out" ||
    { cat "$T/out"; die "gc of the killed backup's pack"; }
grep -qx "deleted 1 packs, 32\.[0-9] MiB" "$T/out" || { cat "$T/out"; die "gc did not delete the killed backup's pack"; }
[ -z "$(ls "$fresh/leases")" ] || die "the killed backup's lease was not reaped"
bv backup "$fresh" "$T/big" --name=big -q
bv restore "$fresh" big "$T/big.out" 2>/dev/null
assert_same "$T/big" "$T/big.out"

# F. a file in snapshots/ that is no snapshot record (list ignores it, as every reader does) does
# not make gc believe a backup committed since its mark: it condemns and deletes as before
bv delete "$fresh" big 2>/dev/null
touch "$fresh/snapshots/notes.snap" "$fresh/snapshots/00112233.snap"
bv gc "$fresh" >"$T/out"
grep -qx "condemned 2 of 2 packs (2 unused, 0 of interrupted backups, 0 rewritten), 40\.[0-9] MiB; 0 B copied" "$T/out" ||
    { cat "$T/out"; die "gc beside stray .snap files"; }
grep -qx "deleted 2 packs, 40\.[0-9] MiB" "$T/out" || { cat "$T/out"; die "gc beside stray .snap files did not delete"; }
