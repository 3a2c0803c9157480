#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A repository's lock names its holder: while a backup holds locks/write, a second backup fails
# (exit 5) naming the first one's pid, host and command line; gc while another gc holds
# locks/gc names that one. (Before, the message named no one.) A record's control characters are
# shown escaped.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd openssl

repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
randfile "$T/a" 4 holder-a
pid=
on_exit 'kill -KILL $pid'
BV_STALL_WRITE=1 stall_start $((1 << 20)) "$T/backup.err" "$BLKVAULT" backup "$repo" "$T/a" --name=a -q
host=$(hostname)
expect_fail 5 "^error: repository '$repo' is locked by another writer (a backup or key change is running): pid $pid on $host since [0-9TZ:-]*: $BLKVAULT backup $repo $T/a --name=a -q$" \
    bv backup "$repo" "$T/a" --name=b
touch "$T/gate"
wait $pid || { cat "$T/backup.err" >&2; die "the held backup failed"; }
pid=
bv backup "$repo" "$T/a" --name=b -q   # the lock is free again

# gc: held by this shell as gc holds it (flock on locks/gc), recorded as gc would
printf 'pid=4242\nhost=elsewhere\nsince=1700000000\ncommand=blkvault gc %s\n' "$repo" > "$repo/locks/gc.holder"
exec 9<"$repo/locks/gc"
flock -x 9
expect_fail 5 "^error: repository '$repo' is locked by another garbage collection, pid 4242 on elsewhere since 2023-11-14T22:13:20Z: blkvault gc $repo (run gc again once it is done)$" \
    bv gc "$repo"
# A record is the repository's (a stick's) text: its control characters reach the terminal escaped,
# not as a title change, a cleared screen or a colour.
printf 'pid=4242\nhost=else\033]0;owned\007where\ncommand=\033[2Jblkvault gc\n' > "$repo/locks/gc.holder"
expect_fail 5 "pid 4242 on else\\\\x1b]0;owned\\\\x07where since ?: \\\\x1b\\[2Jblkvault gc (run gc" bv gc "$repo"
if LC_ALL=C grep -q "$(printf '\033')" "$T/.err"; then die "a holder record's escape sequence reached the terminal"; fi
exec 9<&-
bv gc "$repo" >/dev/null   # free again

# A backup's (or copy's) index compaction holds locks/gc for a moment and records itself as one:
# gc waits for it rather than failing as beside another gc (test-gc-race lost a gc so, about one
# run in a dozen). Held here by this shell, recorded as a compaction records itself.
printf 'pid=%d\nhost=%s\nsince=1700000000\npurpose=compaction\ncommand=blkvault backup %s\n' $$ "$host" "$repo" > "$repo/locks/gc.holder"
exec 9<"$repo/locks/gc"
flock -x 9
bv gc "$repo" 9<&- >"$T/gc.out" 2>"$T/gc.err" &   # not holding the shell's lock itself
pid=$!
sleep 1
kill -0 $pid 2>/dev/null || { cat "$T/gc.err" >&2; die "gc did not wait for an index compaction"; }
exec 9<&-
wait $pid || { cat "$T/gc.err" >&2; die "gc failed after the compaction ended"; }
pid=
grep -q "^deleted " "$T/gc.out" || { cat "$T/gc.out"; die "gc after the compaction printed no result"; }
