#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# power-off = yes on a real USB drive: a stick hot-added over QMP (usb-storage, so a SCSI disk
# with /sys/block/sda/device/delete) is registered (--no-luks), a run backs up a job to it, and
# after unmounting blkvault powers it off (no udisks in the guest: through sysfs delete): the
# summary says "powered off", the disk is gone from the kernel, and what was written is intact
# (the host restores it from the stick's image once the guest is off; plugging the stick into the
# guest again made the guest's 9p root return EIO under TCG now and then).
# One script in two roles (tests/vm/vm-lib.sh): the host plugs the stick when the guest is ready.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/vm/vm-lib.sh"

wait_dev() { local i; for i in $(seq 300); do [ -b "$1" ] && return 0; sleep 0.2; done; die "no $1"; }

guest() {
    ! command -v udisksctl >/dev/null || die "udisksctl is installed: this test is about the sysfs path"
    local conf=$T/etc/blkvault.conf
    local opts=(--config="$conf" --run-dir="$T/run")
    mkdir -p "$T/etc" "$T/mnt"
    randfile "$T/a.img" 2 poweroff
    printf '[job a]\ncommand = cat %s\n' "$T/a.img" > "$conf"
    vm_mark ready
    vm_await plugged
    wait_dev /dev/sda
    vm_log "stick plugged"
    bv target format /dev/sda --name=stick --no-luks --key-dir="$T/keys" "${opts[@]}" >/dev/null
    echo "power-off = yes" >> "$T/etc/conf.d/50-target-stick.conf"
    bv target run stick "${opts[@]}" >"$T/out" || { cat "$T/out"; die "target run"; }
    assert_eq "$(tail -n1 "$T/out")" "target stick: 1 jobs, 0 failed, 2.0 MiB new; powered off; safe to unplug"
    for i in $(seq 100); do [ -e /sys/block/sda ] || break; sleep 0.1; done
    [ ! -e /sys/block/sda ] && [ ! -b /dev/sda ] || die "the stick is still there after power-off"
    vm_log "powered off"
    # for the host, which reads the stick's image after the guest is off
    cp "$T/keys/stick.key" "$VM_RESULTS/stick.key"
    sha256sum <"$T/a.img" | cut -d' ' -f1 >"$VM_RESULTS/a.sha"
}
if vm_in_guest; then guest; exit 0; fi

vm_need
truncate -s 128M "$T/stick.img"
vm_start -- bash "$0"
vm_wait_for ready
vm_qmp usb-plug stick "$T/stick.img" >/dev/null
vm_tell plugged
vm_finish
attach_loop loop -r "$T/stick.img"
mkdir -p "$T/mnt"
mount -o ro "$loop" "$T/mnt" || die "cannot mount the stick's filesystem"
on_exit umount "$T/mnt"
"$BLKVAULT" restore "$T/mnt/blkvault" a "$T/back.img" --key-file="$VM_DIR/stick.key" >/dev/null ||
    die "cannot restore from the powered-off stick"
assert_eq "$(sha256sum <"$T/back.img" | cut -d' ' -f1)" "$(cat "$VM_DIR/a.sha")" "the powered-off stick kept the backup"
echo "ok: the powered-off stick kept the backup"
