#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# All disks of one libvirt backup come from one instant: blkvault is held inside a write of the
# first disk's packs (tests/fault/stall.so) while the test writes into both disks; every snapshot
# restores to the disks as they were before those writes (qemu-img convert -U taken then), not
# as they are when each disk's turn comes. Then the held run, once let go, left no job behind.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/libvirt/libvirt-lib.sh"
repo=$T/repo
bv init "$repo" --encryption=none --compression=none >/dev/null
lv_domain inst 64M 64M
dom=$LV_DOM
randfile "$T/a" 8 a
randfile "$T/b" 8 b
# 8 MiB of incompressible data on each disk, through the monitor 1 MiB at a time
for i in 0 1 2 3 4 5 6 7; do
    lv_write "$dom" vda "write -P $((0x10 + i)) ${i}M 1M"
    lv_write "$dom" vdb "write -P $((0x20 + i)) ${i}M 1M"
done
lv_copy "$dom" vda "$T/vda.0"
lv_copy "$dom" vdb "$T/vdb.0"
# held once 1 MiB of vda's packs is written: the job has begun, vdb is not read yet
BV_STALL_WRITE=1 stall_start $((1 << 20)) "$T/held.err" "$BLKVAULT" backup "$repo" "libvirt:$dom" --json
job=$(lv_job_type "$dom")
[ "$job" = Unbounded ] || die "no backup job runs while blkvault is held (job type '$job')"
lv_write "$dom" vda "write -P 0xee 0 2M"
lv_write "$dom" vdb "write -P 0xee 0 2M"
touch "$T/gate"
wait "$pid" || { cat "$T/held.err" >&2; die "the held backup failed"; }
bv restore "$repo" "$dom-vda" "$T/out" >/dev/null
assert_same "$T/out" "$T/vda.0"
rm -f "$T/out"
bv restore "$repo" "$dom-vdb" "$T/out" >/dev/null
cmp "$T/out" "$T/vdb.0" || die "vdb's snapshot is not the disk at the job's start (read after the write?)"
job=$(lv_job_type "$dom")
[ "$job" = None ] || die "a job still runs on $dom (job type '$job')"
echo ok
