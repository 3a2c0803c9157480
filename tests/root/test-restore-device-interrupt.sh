#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A restore to a block device that is interrupted (SIGTERM) says so: exit 143 and "restore to
# /dev/loopN interrupted at offset X of SIZE: the device holds a partial image", where everything
# below X is already the image's. A rerun then restores the device bit-exact. tests/fault/stall.so
# holds the restore inside a write after 4 MiB, so that the signal arrives mid-way.
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd losetup
[ -e /dev/loop-control ] || skip "no loop devices"

repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
randfile "$T/img" 24 devinterrupt
size=$((24 << 20))
bv backup "$repo" "$T/img" --name=img -q >/dev/null
truncate -s 32M "$T/dev.img"
attach_loop dev "$T/dev.img"
stall_start $((4 << 20)) "$T/restore.err" "$BLKVAULT" restore "$repo" img "$dev" --threads=2 -q
kill -TERM $pid
touch "$T/gate"
rc=0
wait $pid || rc=$?
[ "$rc" = 143 ] || { cat "$T/restore.err" >&2; die "the interrupted restore exited $rc, expected 143"; }
grep -q "^error: restore to $dev interrupted at offset [0-9]* of $size: the device holds a partial image$" \
    "$T/restore.err" || { cat "$T/restore.err" >&2; die "no message saying the device holds a partial image"; }
x=$(sed -n 's/.* interrupted at offset \([0-9]*\) of .*/\1/p' "$T/restore.err")
[ "$x" -ge $((4 << 20)) ] && [ "$x" -lt "$size" ] || die "interrupted at offset $x: not past 4 MiB and before the end"
cmp -n "$x" "$T/img" "$dev" || die "the device's first $x bytes are not the image's"

bv restore "$repo" img "$dev" -q
cmp -n "$size" "$T/img" "$dev" || die "the rerun did not restore the device"
echo ok
