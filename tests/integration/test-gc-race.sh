#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# gc beside a running backup loses nothing:
#  1. a backup held (stall.so) after deduplicating against a snapshot that is then forgotten and
#     collected: gc condemns that data but may not delete it while the backup's older lease lives;
#     the backup, finding at its commit that gc dropped entries it deduplicated against, writes them
#     back into the index from the condemned list: its snapshot restores at once, before any gc;
#  2. a backup held after its first pack is linked but before any index names it: gc condemns the
#     "orphan" but waits for the backup's lease, then finds the pack named and keeps it;
#  3. many iterations of backups started at random moments while snapshots are deleted and gc
#     runs; at the end every snapshot verifies (reading every chunk) and restores bit-exact.
#  4. a held backup whose deduplicated entries are in no condemned list any more fails (exit 4,
#     EUCLEAN) and publishes nothing.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd openssl python3

repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
pid=
on_exit 'kill -KILL $pid'   # a backup left running (held, or in the background) when the test fails
# stalled_backup IMAGE NAME AFTER: a backup held in a write once AFTER bytes are written
stalled_backup() { BV_STALL_WRITE=1 stall_start "$3" "$T/backup.err" "$BLKVAULT" backup "$repo" "$1" --name="$2" -q; }
finish_backup() { touch "$T/gate"; wait $pid || { cat "$T/backup.err" >&2; die "the held backup failed"; }; pid=; }
restores() { bv restore "$repo" "$1" "$T/restored" 2>/dev/null; assert_same "$2" "$T/restored"; rm -f "$T/restored"; }
check() {
    bv verify "$repo" --read-data >/dev/null 2>"$T/verify.err" || { cat "$T/verify.err" >&2; die "verify: $1"; }
}

# 1. resurrection
randfile "$T/x" 4 race-x
randfile "$T/y" 4 race-y
cat "$T/x" "$T/y" >"$T/xy"
bv backup "$repo" "$T/x" --name=x -q
stalled_backup "$T/xy" xy $((1 << 20))
bv delete "$repo" x 2>/dev/null
bv gc "$repo" >"$T/out"
grep -qx "condemned 1 of 1 packs (1 unused, 0 of interrupted backups, 0 rewritten), 4.0 MiB; 0 B copied" "$T/out" ||
    { cat "$T/out"; die "gc beside the held backup"; }
grep -qx "deleted 0 packs, 0 B" "$T/out" || { cat "$T/out"; die "gc deleted what the held backup may use"; }
finish_backup
check "the held backup's snapshot, before any further gc"
restores xy "$T/xy"
bv gc --json "$repo" >"$T/json"
assert_eq "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["entries_resurrected"], d["lists_finalized"], d["packs_deleted"], d["lists_waiting"])' "$T/json")" \
    "0 1 0 0" "gc after the held backup committed (nothing left to resurrect, its list finalized, nothing deleted)"
check "resurrection"
restores xy "$T/xy"

# 2. a pack linked by a running backup before any index names it
randfile "$T/big" 40 race-big
stalled_backup "$T/big" big $((34 << 20))
[ "$(find "$repo/packs" -name '*.pack' | wc -l)" = 3 ] || die "the held backup has not linked its first pack"
bv gc "$repo" >"$T/out"
grep -q "^condemned 1 of 3 packs (0 unused, 1 of interrupted backups, 0 rewritten)" "$T/out" ||
    { cat "$T/out"; die "gc did not take the running backup's pack for an orphan"; }
grep -qx "deleted 0 packs, 0 B" "$T/out" || { cat "$T/out"; die "gc deleted a running backup's pack"; }
finish_backup
bv gc "$repo" >"$T/out"
grep -qx "deleted 0 packs, 0 B" "$T/out" || { cat "$T/out"; die "gc deleted the pack the backup then indexed"; }
check "a running backup's pack"
restores big "$T/big"

# 3. random timing: backups of a changing image while old snapshots are deleted and gc runs
randfile "$T/base" 2 race-base
n=12
for i in $(seq 1 $n); do
    randfile "$T/part" 1 "race-$i"
    cat "$T/base" "$T/part" >"$T/v$i"
    bv backup "$repo" "$T/v$i" --name="v$i" -q 2>"$T/bg.err" &
    pid=$!
    sleep "0.$((RANDOM % 4))$((RANDOM % 10))"
    [ "$i" -le 2 ] || bv delete "$repo" "v$((i - 2))" 2>/dev/null
    bv gc "$repo" >/dev/null 2>"$T/gc.err" || { cat "$T/gc.err" >&2; die "gc failed in iteration $i"; }
    wait $pid || { cat "$T/bg.err" >&2; die "backup $i failed"; }
    pid=
done
bv delete "$repo" big xy 2>/dev/null
bv gc "$repo" >/dev/null   # finalizes what waited for the last backup
bv gc "$repo" >"$T/out"
grep -qx "deleted 0 packs, 0 B" "$T/out" || { cat "$T/out"; die "a third gc still found garbage"; }
check "the random loop"
for i in $((n - 1)) $n; do restores "v$i" "$T/v$i"; done
assert_eq "$(bv list "$repo" --json | python3 -c 'import json,sys; print(sorted(s["name"] for s in json.load(sys.stdin)))')" \
    "['v$((n - 1))', 'v$n']" "snapshots after the loop"
[ -z "$(ls "$repo/leases")" ] || die "leases left: $(ls "$repo/leases")"

# 4. a condemned list lost while a held backup deduplicated against it: the backup fails rather
#    than publish a snapshot that does not read
repo=$T/repo4
bv init "$repo" --encryption=none >/dev/null
bv backup "$repo" "$T/x" --name=x -q
stalled_backup "$T/xy" xy $((1 << 20))
bv delete "$repo" x 2>/dev/null
bv gc "$repo" >/dev/null
rm "$repo"/gc/*.idx
touch "$T/gate"
rc=0; wait $pid || rc=$?; pid=
assert_eq "$rc" 4 "exit code of the backup whose deduplicated entries are gone"
assert_eq "$(cat "$T/backup.err")" \
    "error: backup of '$T/xy' failed (nothing was published): Structure needs cleaning" "the backup's message"
assert_eq "$(bv list "$repo" --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" 0 "snapshots published"
