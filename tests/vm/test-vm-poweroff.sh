#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# power-off = yes on a real USB drive: a stick hot-added over QMP (usb-storage, so a SCSI disk
# with /sys/block/sda/device/delete) is registered (--no-luks), a run backs up a job to it, and
# after unmounting blkvault powers it off (no udisks in the guest: through sysfs delete): the
# summary says "powered off", the disk is gone from the kernel, and what was written is intact
# (read back after plugging the stick again).
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
    vm_mark replug
    vm_await replugged
    local d=
    for i in $(seq 300); do d=$(ls /sys/block | grep '^sd' | head -n1); [ -n "$d" ] && [ -b "/dev/$d" ] && break; sleep 0.2; done
    [ -n "$d" ] || die "the stick did not come back"
    mount -o ro "/dev/$d" "$T/mnt"
    bv restore "$T/mnt/blkvault" a "$T/back.img" --key-file="$T/keys/stick.key" >/dev/null
    umount "$T/mnt"
    assert_same "$T/a.img" "$T/back.img"
    vm_log "the powered-off stick kept the backup"
}
if vm_in_guest; then guest; exit 0; fi

vm_need
truncate -s 128M "$T/stick.img"
vm_start -- bash "$0"
vm_wait_for ready
vm_qmp usb-plug stick "$T/stick.img" >/dev/null
vm_tell plugged
vm_wait_for replug
# the guest removed the disk; the USB device is still attached in QEMU: unplug it, plug it anew
vm_qmp usb-unplug stick >/dev/null
vm_qmp usb-plug stick2 "$T/stick.img" >/dev/null
vm_tell replugged
vm_finish
