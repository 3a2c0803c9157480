#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Guest script (meson: vmrun --scratch 256M --scratch 48M -- bash test-vm-lvm.sh): a job whose
# source is an LVM logical volume with snapshot = yes, in a kernel with device-mapper. The LV
# holds an ext4 filesystem that a writer keeps changing during the backup; blkvault makes the
# snapshot (lvcreate --snapshot), backs it up to a registered drive (a --no-luks target on vdb)
# and removes it: the restored image is bit-exact the snapshot's content (kept by a wrapper
# around the real lvremove, which copies it just before removing it) and fsck finds it clean;
# no snapshot is left. The snapshot is removed too when the backup fails (the drive is full)
# and when the run is cancelled by SIGTERM right after the snapshot was made; one left by a run
# that died is replaced; a failed lvcreate is reported with its message.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/vm/vm-lib.sh"
vm_guest_only
need_cmd pvcreate vgcreate lvcreate lvremove lvs mkfs.ext4 e2fsck sha256sum
pv=/dev/vda usb=/dev/vdb
[ -b "$pv" ] && [ -b "$usb" ] || die "no scratch disks $pv $usb"
modprobe -a dm-mod dm-snapshot || die "no device-mapper snapshot target"

vm_lvm_config "$pv"
# wrappers around the real tools: keep the snapshot's content before it is removed; cancel the
# run (SIGTERM to blkvault) right after a snapshot was made
vm_wrap lvremove 'for a; do case $a in */blkvault-snap-*) [ -z "$KEEP_SNAPSHOT" ] || dd if=/dev/$a of="$KEEP_SNAPSHOT" bs=1M status=none;; esac; done'
vm_lvcreate_cancel
export PATH=$T/bin:$PATH

vm_log "lvm: volumes"
pvcreate -q "$pv" && vgcreate -q vg0 "$pv" >/dev/null
lvcreate -q -y -L 32M -n data vg0 >/dev/null
lvcreate -q -y -L 48M -n big vg0 >/dev/null
[ -b /dev/vg0/data ] && [ -b /dev/vg0/big ] || die "lvcreate made no /dev/vg0/data and /dev/vg0/big"
mkfs.ext4 -q /dev/vg0/data
mkdir -p "$T/data" "$T/mnt"
mount /dev/vg0/data "$T/data"
on_exit "umount -l $T/data"
randfile "$T/data/base.bin" 4 lvm-base
# random data that does not fit on the 48M drive (with dedup and compression)
head -c 48M /dev/urandom > /dev/vg0/big

vm_lvm_job "$usb"

# a writer changes the filesystem all through the backup
writer() { local i=0; while :; do head -c 262144 /dev/urandom > "$T/data/w$((i % 16))"; sync -f "$T/data"; i=$((i + 1)); done; }
writer & wpid=$!
on_exit "kill $wpid"
vm_log "lvm: backup while written"
KEEP_SNAPSHOT=$T/snap.img bv target run usb-1 "${opts[@]}" >"$T/out" 2>"$T/err" || { cat "$T/out" "$T/err"; die "target run of the LVM job"; }
kill $wpid; wait $wpid 2>/dev/null || true
grep -q "^job data: snapshot [0-9a-f]\{8\}, .* new, verified$" "$T/out" || { cat "$T/out"; die "job line"; }
assert_eq "$(tail -n1 "$T/out")" "$(sed -n 's/^\(target usb-1: 1 jobs, 0 failed, .* new; safe to unplug\)$/\1/p' "$T/out")"
assert_eq "$(lvs --noheadings -o lv_name vg0 | tr -d ' ' | sort | tr '\n' ' ')" "big data " "volumes after the run (no snapshot left)"
[ -s "$T/snap.img" ] || die "the wrapper kept no snapshot content"
mount "$usb" "$T/mnt"
bv restore "$T/mnt/blkvault" data "$T/restored.img" --key-file="$T/keys/usb-1.key" >/dev/null || { umount "$T/mnt"; die "restore"; }
umount "$T/mnt"
assert_eq "$(stat -c %s "$T/restored.img")" $((32 << 20)) "size of the restored image"
assert_eq "$(sha256sum < "$T/restored.img")" "$(sha256sum < "$T/snap.img")" "the restored image against the snapshot's content"
e2fsck -fn "$T/restored.img" >"$T/fsck" 2>&1 || { cat "$T/fsck"; die "fsck of the restored image"; }
mkdir -p "$T/r"
mount -o ro,loop "$T/restored.img" "$T/r"
assert_same "$T/data/base.bin" "$T/r/base.bin"
umount "$T/r"
rm "$T/snap.img" "$T/restored.img"
vm_log "lvm: consistent"

# cancelled (SIGTERM) right after the snapshot was made: removed, nothing published
expect_fail 1 "^error: target usb-1: job data: interrupted by SIGTERM: nothing was published or kept$" env CANCEL_AFTER_SNAPSHOT=1 "$BLKVAULT" job run data "${opts[@]}"
assert_eq "$(lvs --noheadings -o lv_name vg0 | tr -d ' ' | sort | tr '\n' ' ')" "big data " "volumes after a cancelled run"
! grep -q " $T/run/" /proc/self/mountinfo || die "the cancelled run left its mount"
mount "$usb" "$T/mnt"
n=$(bv list "$T/mnt/blkvault" --key-file="$T/keys/usb-1.key" --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
umount "$T/mnt"
assert_eq "$n" 1 "snapshots on the drive (only the good run's)"
# a snapshot left by a run that died (kill -9) is replaced by the next run
lvcreate -q -y --snapshot -L 8M -n blkvault-snap-data vg0/data >/dev/null
bv job run data "${opts[@]}" >/dev/null || die "a run after a stale snapshot"
assert_eq "$(lvs --noheadings -o lv_name vg0 | tr -d ' ' | sort | tr '\n' ' ')" "big data " "volumes after replacing a stale snapshot"
vm_log "lvm: removed when cancelled, a stale one replaced"
# the backup fails (the drive is full): the snapshot is removed all the same
cat >> "$conf" <<EOF
[job big]
source = /dev/vg0/big
snapshot = yes
targets = usb-1
EOF
expect_fail 1 "^error: target usb-1: job big: backup failed: No space left on device$" bv job run big "${opts[@]}"
assert_eq "$(lvs --noheadings -o lv_name vg0 | tr -d ' ' | sort | tr '\n' ' ')" "big data " "volumes after a failed backup"
vm_log "lvm: removed after a failure"

# no room in the volume group for the snapshot: the job fails at step snapshot with lvcreate's
# message, and nothing is left behind
lvcreate -q -y -l 100%FREE -n filler vg0 >/dev/null
expect_fail 1 '^error: target usb-1: job data: snapshot failed: exit status 5 (Insufficient suitable allocatable extents found for logical volume blkvault-snap-data.)$' \
    bv job run data "${opts[@]}"
assert_eq "$(lvs --noheadings -o lv_name vg0 | tr -d ' ' | sort | tr '\n' ' ')" "big data filler " "volumes after a failed lvcreate"
umount "$T/data"
vm_log "lvm: done"
