#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# An interrupted appliance run resumes (issue 22): on a 300M target (ext4, target format
# --no-luks) a job backs up a 200 MiB random image; `target run` is stopped by SIGTERM once about
# 120 MiB are written. Its job line says what the backup kept. The drive then has less free than
# the source, but enough with what was kept: the next run deletes nothing before its job (no "gc
# deleted"), says it continued, stores only what is left, and its snapshot restores bit-exact.
# A SIGTERM that comes after the job's snapshot was published (during prune) leaves a run that
# says it was done, not cancelled.
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd losetup mkfs.ext4 python3
[ -e /dev/loop-control ] || skip "no loop devices"

MIB=1048576
SIZE=$((200 * MIB))
conf=$T/etc/blkvault.conf
mkdir -p "$T/etc" "$T/mnt"
export BLKVAULT_STATE_DIR=$T/state
opts=(--config="$conf" --run-dir="$T/run")
cat > "$conf" <<EOF2
[job vm]
source = $T/vm.img
EOF2
loop_target dev usb-resume 300M --fs=ext4 "${opts[@]}"
on_exit "umount -l $T/run/target-usb-resume $T/mnt"
key=$T/keys/usb-resume.key
randfile "$T/vm.img" 200 resume-1
stored() { find "$T/mnt/blkvault/packs" -name '*.pack' -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }'; }

# the interrupted run: held in a write after 120 MiB, then SIGTERM
BV_STALL_WRITE=1 stall_start $((120 * MIB)) "$T/run1.err" \
    bash -c 'exec "$@" >"$0"' "$T/run1.out" "$BLKVAULT" target run usb-resume "${opts[@]}"
kill -TERM $pid
touch "$T/gate"
rc=0
wait $pid || rc=$?
pid=
[ "$rc" -ne 0 ] || { cat "$T/run1.out" "$T/run1.err"; die "the interrupted run exited 0"; }
grep -q "^error: target usb-resume: job vm: interrupted by SIGTERM: nothing was published; it kept [0-9.]* MiB in [0-9]* packs, which the next backup continues from$" "$T/run1.err" ||
    { cat "$T/run1.out" "$T/run1.err"; die "the interrupted run did not say what it kept"; }
mount "$dev" "$T/mnt"
kept=$(stored)
avail=$(($(stat -f -c '%a * %S' "$T/mnt")))
umount "$T/mnt"
[ "$kept" -ge $((64 * MIB)) ] || die "the interrupted run kept only $kept bytes"
# the case of the report: less free than the source (the old rule collected), enough with what was kept
[ "$avail" -lt "$SIZE" ] || die "the drive has $avail bytes free after the interrupted run: not short of room"

bv target run usb-resume "${opts[@]}" >"$T/run2.out" 2>&1 || { cat "$T/run2.out"; die "the run after the interrupted one failed"; }
! grep -q "gc deleted" "$T/run2.out" || { cat "$T/run2.out"; die "the run deleted what the interrupted one kept"; }
grep -q "^job vm: continued from what the interrupted run kept ([0-9.]* MiB)$" "$T/run2.out" ||
    { cat "$T/run2.out"; die "the run did not say it continued"; }
new=$(sed -n 's/^bytes-new=//p' "$T/state/job-vm@usb-resume")
[ -n "$new" ] || die "no bytes-new in the job's state"
# what was in flight when the run stopped (read, not yet in a committed pack) is stored again
[ "$new" -le $((SIZE - kept + 8 * MIB)) ] || die "the resumed run stored $new bytes new, $((SIZE - kept)) were left"
mount -o ro "$dev" "$T/mnt"
bv restore "$T/mnt/blkvault" vm "$T/out.img" --key-file="$key" >/dev/null || die "restore"
umount "$T/mnt"
assert_same "$T/vm.img" "$T/out.img"
rm "$T/out.img"

# SIGTERM after the snapshot was published (the run waits for the gc lock to prune): the job is
# done and the run says so, neither "cancelled" nor "interrupted"; exit 0
printf 'keep-last = 1\n' >>"$conf"
randfile "$T/vm.img" 8 resume-late
repo=$T/run/target-usb-resume/blkvault
BV_STALL_WRITE=1 stall_start $((2 * MIB)) "$T/late.err" \
    bash -c 'exec "$@" >"$0"' "$T/late.out" "$BLKVAULT" target run usb-resume "${opts[@]}"
flock "$repo/locks/gc" -c "touch '$T/held'; while [ ! -e '$T/release' ]; do sleep 0.1; done" &
holder=$!
on_exit "touch '$T/release'"
for _ in $(seq 300); do [ -e "$T/held" ] && break; sleep 0.1; done
before=$(ls "$repo/snapshots" | wc -l)
touch "$T/gate"
for _ in $(seq 300); do [ "$(ls "$repo/snapshots" | wc -l)" -gt "$before" ] && break; sleep 0.1; done
[ "$(ls "$repo/snapshots" | wc -l)" -gt "$before" ] || die "the run did not publish its snapshot"
sleep 0.5 # into prune's wait for locks/gc
kill -TERM $pid
touch "$T/release"
wait $holder
rc=0
wait $pid || rc=$?
pid=
grep -q "^job vm: snapshot [0-9a-f]\{8\}, 8.0 MiB new, verified$" "$T/late.out" || { cat "$T/late.out" "$T/late.err"; die "late SIGTERM: job line"; }
assert_eq "$(tail -n1 "$T/late.out")" "target usb-resume: 1 jobs, 0 failed, 8.0 MiB new; safe to unplug"
! grep -q "interrupted\|cancelled" "$T/late.out" "$T/late.err" || { cat "$T/late.out" "$T/late.err"; die "late SIGTERM: said cancelled"; }
assert_eq "$rc" 0 "exit status of a run whose job finished before SIGTERM"
echo ok
