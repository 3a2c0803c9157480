#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A drive filled by a failed run recovers by itself: on a small target (ext4 on a loop device,
# target format --no-luks) a job backs up; its next run meets a source too large for the drive
# and fails with ENOSPC, leaving its packs; the run after that meets the full drive, collects them
# once, says so, backs up again and succeeds; the snapshot restores bit-exact. After another failed
# run, a source that could add more than the free space and all gc could delete (160 MiB, 128 of
# them zeroes) is collected for before the job, which says so. A drive with room keeps what an
# interrupted run left (its next backup continues from it): no gc before the jobs
# (tests/root/test-target-resume.sh).
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd losetup mkfs.ext4 python3
[ -e /dev/loop-control ] || skip "no loop devices"

conf=$T/etc/blkvault.conf
mkdir -p "$T/etc" "$T/mnt"
opts=(--config="$conf" --run-dir="$T/run")
cat > "$conf" <<EOF2
[job vm]
source = $T/vm.img
keep-last = 1
EOF2
loop_target dev usb-full 128M --fs=ext4 "${opts[@]}"
on_exit "umount -l $T/run/target-usb-full $T/mnt"
key=$T/keys/usb-full.key

randfile "$T/vm.img" 24 full-1
bv target run usb-full "${opts[@]}" >"$T/out" 2>&1 || { cat "$T/out"; die "the first run failed"; }
# the failed run: a source that does not fit fills the drive
randfile "$T/vm.img" 160 full-big
expect_fail 1 "job vm: backup failed: No space left on device" bv target run usb-full "${opts[@]}"
# the next run, with a source that fits once the failed run's packs are gone
randfile "$T/vm.img" 32 full-2
bv target run usb-full "${opts[@]}" >"$T/out" 2>&1 || { cat "$T/out"; die "the run after the failed one failed"; }
grep -q "^job vm: the drive was full: gc deleted [1-9][0-9]* packs, [0-9.]* MiB, and the backup ran again$" "$T/out" ||
    { cat "$T/out"; die "the run did not say it collected when the drive was full"; }
! grep -q "short of room" "$T/out" || { cat "$T/out"; die "gc ran before the jobs: what it deleted might have been continued from"; }
grep -q "^job vm: snapshot [0-9a-f]\{8\}, 32.0 MiB new, verified$" "$T/out" || { cat "$T/out"; die "job line"; }
mount "$dev" "$T/mnt"
bv restore "$T/mnt/blkvault" vm "$T/out.img" --key-file="$key" >/dev/null || die "restore"
n=$(bv list "$T/mnt/blkvault" --key-file="$key" --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
umount "$T/mnt"
assert_same "$T/vm.img" "$T/out.img"
assert_eq "$n" 1 "snapshots kept by keep-last = 1"
rm "$T/out.img"

# another failed run; then a source that could add more than the free space and what gc could
# delete together: collected before the job (its zeroes are not stored: it fits)
randfile "$T/vm.img" 160 full-big
expect_fail 1 "job vm: backup failed: No space left on device" bv target run usb-full "${opts[@]}"
randfile "$T/vm.img" 32 full-3
head -c $((128 * 1048576)) /dev/zero >>"$T/vm.img"
bv target run usb-full "${opts[@]}" >"$T/out" 2>&1 || { cat "$T/out"; die "the run with a large source failed"; }
grep -q "^target usb-full: the drive was short of room: gc deleted [1-9][0-9]* packs, [0-9.]* MiB before the jobs$" "$T/out" ||
    { cat "$T/out"; die "the run did not say it collected before its jobs"; }
! grep -q "the drive was full" "$T/out" || { cat "$T/out"; die "the backup met a full drive after gc before the jobs"; }
mount "$dev" "$T/mnt"
bv restore "$T/mnt/blkvault" vm "$T/out.img" --key-file="$key" >/dev/null || die "restore"
umount "$T/mnt"
assert_same "$T/vm.img" "$T/out.img"
rm "$T/out.img"

# with room: a run leaves the drive alone before its jobs
bv target run usb-full "${opts[@]}" >"$T/out" 2>&1 || { cat "$T/out"; die "a run with room failed"; }
! grep -q "short of room" "$T/out" || { cat "$T/out"; die "gc ran before the jobs on a drive with room"; }

# a command's output that fills the drive cannot be read again: its job collects and fails, and
# the next run has the room
cat > "$conf" <<EOF2
[job vm]
command = cat $T/vm.img
keep-last = 1
EOF2
randfile "$T/vm.img" 160 full-big
expect_fail 1 "job vm: backup failed: No space left on device" bv target run usb-full "${opts[@]}"
grep -qx "job vm: the drive was full: gc deleted [1-9][0-9]* packs, [0-9.]* MiB (the next run has the room)" "$T/.out" ||
    { cat "$T/.out"; die "the command's job did not say it collected"; }
randfile "$T/vm.img" 32 full-4
bv target run usb-full "${opts[@]}" >"$T/out" 2>&1 || { cat "$T/out"; die "the run after the command filled the drive failed"; }
! grep -q "the drive was full\|short of room" "$T/out" || { cat "$T/out"; die "the command's next run found no room"; }
grep -q "^job vm: snapshot [0-9a-f]\{8\}, 32.0 MiB new, verified$" "$T/out" || { cat "$T/out"; die "the command's job line"; }
echo ok
