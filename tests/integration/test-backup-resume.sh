#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Interrupted backups resume (docs/LIFECYCLE.md, "Interrupted backups"): one backup of a 320 MiB
# source is stopped at 40% (SIGINT), again at 70% (SIGTERM) and at 95% (SIGKILL, as a pulled
# drive: nothing is recorded); each stopped run stored only what the runs before it had not, the
# signalled ones say what they kept, and the last run stores only what is left (bytes_new in
# --json), adopting the killed run's packs, and restores bit-exact. A gc that condemns the adopted
# packs while that run holds them deletes nothing it needs.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd openssl python3

MIB=1048576
SIZE=$((320 * MIB))
SLACK=$((34 * MIB)) # one pack (32 MiB) in flight when the writer stops, and a little
repo=$T/repo
bv init "$repo" --encryption=none --compression=none >/dev/null
randfile "$T/src" 320 resume
pid=
on_exit 'kill -KILL $pid'
stored() { find "$repo/packs" -name '*.pack' -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }'; }

# stop PERCENT SIGNAL: a backup held in a write once the packs hold PERCENT of the source, then
# SIGNAL; the packs must then hold no more than PERCENT of it and one pack.
stop() {
    local want=$(($1 * SIZE / 100)) before
    before=$(stored)
    BV_STALL_WRITE=1 stall_start $((want - before)) "$T/backup.err" "$BLKVAULT" backup "$repo" "$T/src" --name=src
    kill -"$2" $pid
    touch "$T/gate"
    rc=0
    wait $pid || rc=$?
    pid=
    local now
    now=$(stored)
    [ "$now" -le $((want + SLACK)) ] || die "stopped at $1% by $2, the packs hold $now bytes: stored again what an earlier run kept"
    [ "$now" -ge $((want - SLACK)) ] || die "stopped at $1% by $2, the packs hold only $now bytes"
}

stop 40 INT
assert_eq "$rc" 130 "exit status after SIGINT"
grep -q "^error: backup of '$T/src' interrupted by SIGINT: nothing was published; it kept [0-9.]* MiB in [0-9]* packs, which the next backup continues from$" "$T/backup.err" ||
    { cat "$T/backup.err"; die "SIGINT: what was kept is not said"; }
stop 70 TERM
assert_eq "$rc" 143 "exit status after SIGTERM"
grep -q "interrupted by SIGTERM: nothing was published; it kept .* which the next backup continues from$" "$T/backup.err" ||
    { cat "$T/backup.err"; die "SIGTERM: what was kept is not said"; }
stop 95 KILL
[ "$(bv list "$repo" --json)" = "[]" ] || die "an interrupted backup published a snapshot"

# The last run, held after it adopted the killed run's packs: a gc meanwhile condemns them (no
# snapshot uses them yet) but deletes nothing while the backup's lease lives.
before=$(stored)
BV_STALL_WRITE=1 stall_start $((4 * MIB)) "$T/backup.err" \
    bash -c 'exec "$@" >"$0"' "$T/last.json" "$BLKVAULT" backup "$repo" "$T/src" --name=src --json
bv gc "$repo" >"$T/gc.out" || { cat "$T/gc.out"; die "gc beside the resumed backup"; }
grep -qx "deleted 0 packs, 0 B" "$T/gc.out" || { cat "$T/gc.out"; die "gc deleted packs a running backup adopted"; }
touch "$T/gate"
wait $pid || { cat "$T/backup.err"; die "the resumed backup failed"; }
pid=
new=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["stats"]["bytes_new"])' <"$T/last.json")
resumed=$(python3 -c 'import json,sys; print(json.load(sys.stdin).get("resumed_packs", 0))' <"$T/last.json")
[ "$resumed" -ge 1 ] || { cat "$T/last.json"; die "the killed run's packs were not adopted"; }
left=$((SIZE - before))
[ "$new" -le $((left + MIB)) ] || die "the last run stored $new bytes new, $left were left"
[ "$new" -le $((5 * SIZE / 100 + SLACK)) ] || die "the last run stored $new bytes new after 95% were kept"
bv restore "$repo" src "$T/out" >/dev/null
assert_same "$T/src" "$T/out"
rm "$T/out"
# gc again: what the condemned list held that the snapshot uses was put back; it still restores
bv gc "$repo" >/dev/null
bv verify "$repo" --read-data >/dev/null || die "verify after gc"
bv restore "$repo" src "$T/out" >/dev/null
assert_same "$T/src" "$T/out"
echo ok
