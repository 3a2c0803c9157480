#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Guest script (meson: vmrun --scratch 128M --scratch 96M -- bash test-vm-thin.sh): a job whose
# source is a thin LV with snapshot = yes keeps the snapshot of its last good backup and reads
# only what thin_delta reports changed since. A thin pool on vda holds an ext4 filesystem with
# 8 MiB of data. Run 1 reads everything (no kept snapshot, and says so); after 768 KiB are
# rewritten in three places, run 2 reads a few MiB of the 32 MiB volume, at least what changed,
# and its snapshot restores bit-exact to the kept snapshot's content, fsck clean. A cancelled run
# removes its new snapshot and leaves the kept one as it was. A thin_delta
# that fails (a wrapper), a kept snapshot that is gone and one replaced by another thin device
# (not what the last backup read, although the pool gave it the same thin device id) make the
# run read everything, each saying why. The pool's metadata snapshot is never left held
# (dmsetup status), and no new snapshot is left behind.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/vm/vm-lib.sh"
vm_guest_only
need_cmd pvcreate vgcreate lvcreate lvremove lvs dmsetup thin_delta thin_check mkfs.ext4 e2fsck
pv=/dev/vda usb=/dev/vdb
[ -b "$pv" ] && [ -b "$usb" ] || die "no scratch disks $pv $usb"
modprobe -a dm-mod dm-thin-pool || die "no device-mapper thin-pool target"

vm_lvm_config "$pv"
# thin_delta fails when FAIL_THIN_DELTA is set
vm_wrap thin_delta '[ -z "$FAIL_THIN_DELTA" ] || { echo "injected failure" >&2; exit 1; }'
# cancel the run (SIGTERM to blkvault) right after the new snapshot was made
vm_lvcreate_cancel
export PATH=$T/bin:$PATH

vm_log "thin: pool and volume"
pvcreate -q "$pv" && vgcreate -q vg0 "$pv" >/dev/null
lvcreate -q -y --type thin-pool -L 96M -n pool vg0 >/dev/null
lvcreate -q -y --type thin -V 32M --thinpool pool -n data vg0 >/dev/null
[ -b /dev/vg0/data ] || die "lvcreate made no /dev/vg0/data"
mkfs.ext4 -q /dev/vg0/data
mkdir -p "$T/data" "$T/mnt"
mount /dev/vg0/data "$T/data"
on_exit "umount -l $T/data"
randfile "$T/data/base.bin" 8 thin-base
sync -f "$T/data"

vm_lvm_job "$usb"
base=blkvault-thin-data+usb-1
lvnames() { lvs --noheadings -o lv_name vg0 | tr -d ' ' | sort | tr '\n' ' '; }
# no metadata snapshot held: thin-pool status field 7 is the held root, "-" when none
held() { dmsetup status vg0-pool-tpool | awk '{print $7}'; }
# run NAME [ENV...]: a job run, its output in $T/NAME.out and .err
run() {
    local name=$1; shift
    env "$@" "$BLKVAULT" job run data "${opts[@]}" >"$T/$name.out" 2>"$T/$name.err" ||
        { cat "$T/$name.out" "$T/$name.err"; die "job run $name"; }
    assert_eq "$(held)" "-" "the pool's held metadata root after run $name"
    assert_eq "$(lvnames)" "$base data pool " "volumes after run $name (the kept snapshot only)"
}
bytes_read() { sed -n 's/^job data: read .* (\([0-9]*\) bytes).*$/\1/p' "$T/$1.out"; }
snap_of() { sed -n 's/^job data: snapshot \([0-9a-f]\{8\}\), .*$/\1/p' "$T/$1.out"; }
full=$((32 << 20))
expect_full() {
    assert_eq "$(cat "$T/$1.err")" "warning: job data: thin delta not used, read everything: $2" "warning of run $1"
    assert_eq "$(bytes_read "$1")" $full "bytes read by run $1"
}

vm_log "thin: run 1"
run 1
expect_full 1 "no thin snapshot vg0/$base is kept from an earlier backup to this drive"
grep -qx "job data: read 32.0 MiB of 32.0 MiB ($full bytes)" "$T/1.out" || { cat "$T/1.out"; die "read line of run 1"; }

# 768 KiB rewritten in three places
for at in 1 3 6; do
    dd if=/dev/urandom of="$T/data/base.bin" bs=256k seek=$((at * 4)) count=1 conv=notrunc,fsync status=none
done
sync -f "$T/data"
vm_log "thin: run 2"
run 2
[ ! -s "$T/2.err" ] || { cat "$T/2.err"; die "run 2 warned"; }
read2=$(bytes_read 2)
grep -q "^job data: read .* ($read2 bytes) with the thin delta$" "$T/2.out" || { cat "$T/2.out"; die "read line of run 2"; }
[ "$read2" -ge $((768 << 10)) ] && [ "$read2" -le $((4 << 20)) ] ||
    die "run 2 read $read2 bytes: expected at least the 768 KiB changed and far below the 32 MiB volume"
echo "thin: run 2 read $read2 of $full bytes"
dd if=/dev/vg0/$base of="$T/snap.img" bs=1M status=none
mount "$usb" "$T/mnt"
bv restore "$T/mnt/blkvault" "$(snap_of 2)" "$T/restored.img" --key-file="$T/keys/usb-1.key" >/dev/null ||
    { umount "$T/mnt"; die "restore"; }
umount "$T/mnt"
assert_eq "$(sha256sum < "$T/restored.img")" "$(sha256sum < "$T/snap.img")" "the restored image against the kept snapshot"
e2fsck -fn "$T/restored.img" >"$T/fsck" 2>&1 || { cat "$T/fsck"; die "fsck of the restored image"; }
rm "$T/snap.img" "$T/restored.img"

# a run that fails (cancelled): the new snapshot is removed, the kept one stays as it was
uuid() { lvs --noheadings -o lv_uuid "vg0/$base" | tr -d ' '; }
kept=$(uuid)
expect_fail 1 "^error: target usb-1: job data: interrupted by SIGTERM: nothing was published or kept$" \
    env CANCEL_AFTER_SNAPSHOT=1 "$BLKVAULT" job run data "${opts[@]}"
assert_eq "$(held)" "-" "the pool's held metadata root after a cancelled run"
assert_eq "$(lvnames)" "$base data pool " "volumes after a cancelled run"
assert_eq "$(uuid)" "$kept" "the kept snapshot after a cancelled run"

vm_log "thin: fallbacks"
run 3 FAIL_THIN_DELTA=1
expect_full 3 "thin_delta failed: exit status 1 (injected failure)"
lvremove -q -y "vg0/$base" >/dev/null
run 4
expect_full 4 "no thin snapshot vg0/$base is kept from an earlier backup to this drive"
# another thin device under the kept snapshot's name: not what run 4 read
lvremove -q -y "vg0/$base" >/dev/null
lvcreate -q -y --snapshot -n "$base" vg0/data >/dev/null
id=$(lvs --noheadings --separator : -o thin_id,lv_uuid "vg0/$base" | tr -d ' ')
run 5
expect_full 5 "snapshot $(snap_of 4) was not taken with lvm-thin:$id"
umount "$T/data"
vm_log "thin: done"
