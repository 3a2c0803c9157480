#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# An interrupted restore to a file leaves nothing at DEST: the image is written under a temporary
# name (or none: O_TMPFILE) in DEST's directory and given its name only once complete. SIGTERM,
# SIGINT and SIGHUP stop the restore, remove the temporary file and exit 128+signal with a
# message; after SIGKILL nothing is at DEST either (at most a temporary file named
# .blkvault-restore-*), and a rerun succeeds. tests/fault/stall.so holds the restore inside a
# write after 4 MiB, so that the signal arrives mid-way without any timing.
. "$SOURCE_ROOT/tests/lib.sh"

repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
randfile "$T/img" 24 interrupt
bv backup "$repo" "$T/img" --name=img -q >/dev/null
id=$(bv list "$repo" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"][:8])')
mkdir "$T/out"
# start_stalled DEST: a restore held in a write after 4 MiB; sets pid once it is held there
start_stalled() { stall_start $((4 << 20)) "$T/restore.err" "$BLKVAULT" restore "$repo" img "$1" --threads=2 -q; }
# leftovers: what is in the destination directory other than temporary files of a restore
leftovers() { (cd "$T/out" && ls -A | grep -v '^\.blkvault-restore-' || true); }

for sig in TERM INT HUP; do
    start_stalled "$T/out/disk.img"
    [ ! -e "$T/out/disk.img" ] || die "SIG$sig: the restore writes at DEST before it is complete"
    kill -s $sig $pid
    touch "$T/gate"
    rc=0
    wait $pid || rc=$?
    want=$((128 + $(kill -l $sig)))
    [ "$rc" = "$want" ] || { cat "$T/restore.err" >&2; die "SIG$sig: the restore exited $rc, expected $want"; }
    grep -q "^error: restore of snapshot $id to '$T/out/disk.img' interrupted by SIG$sig; nothing was left at '$T/out/disk.img'$" "$T/restore.err" ||
        { cat "$T/restore.err" >&2; die "SIG$sig: no message saying the restore was interrupted"; }
    assert_eq "$(ls -A "$T/out")" "" "SIG$sig: files left in the destination directory"
done

# SIGKILL: nothing at DEST; a temporary file may be left (filesystems without O_TMPFILE)
start_stalled "$T/out/disk.img"
kill -KILL $pid
rc=0
wait $pid || rc=$?
[ "$rc" = 137 ] || die "the restore killed with SIGKILL exited $rc (a restore that had ended by itself?)"
pid=
[ ! -e "$T/out/disk.img" ] || die "SIGKILL left a file at DEST"
assert_eq "$(leftovers)" "" "SIGKILL: files left in the destination directory"
bv restore "$repo" img "$T/out/disk.img" -q
assert_same "$T/img" "$T/out/disk.img"
[ "$(stat -c %a "$T/out/disk.img")" = 600 ] || die "the restored file's mode is $(stat -c %a "$T/out/disk.img"), not 600"
# an existing DEST is still refused before anything is written
expect_fail 1 "^error: '$T/out/disk.img' exists: restore writes a new file (use --force to replace it)$" \
    bv restore "$repo" img "$T/out/disk.img" -q
assert_same "$T/img" "$T/out/disk.img"
echo ok
