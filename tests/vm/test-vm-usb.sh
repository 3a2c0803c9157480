#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# systemd as PID 1 in the guest, and USB hotplug over QMP: a udev rule placed in
# /run/udev/rules.d matches a stick's filesystem UUID and pulls in a unit through SYSTEMD_WANTS;
# hot-adding the stick (device_add usb-storage) starts the unit with no further action, the unit
# reads the stick, and hot-removing it (device_del) makes the block device go away.
# One script in two roles (tests/vm/vm-lib.sh): the host part starts the guest with this script
# as its command and plugs the stick when the guest says it is ready.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/vm/vm-lib.sh"
uuid=5e1f0a3c-9b7d-4c2e-8f61-0d4b2a7c9e15

guest() {
    mkdir -p /run/udev/rules.d /run/systemd/system
    cat >/run/udev/rules.d/99-vmtest-usb.rules <<EOF
ACTION=="add", SUBSYSTEM=="block", ENV{ID_FS_UUID}=="$uuid", TAG+="systemd", ENV{SYSTEMD_WANTS}+="vmtest-usb@%k.service"
EOF
    cat >/run/systemd/system/vmtest-usb@.service <<EOF
[Unit]
Description=vm test: read the stick %i
BindsTo=dev-%i.device
After=dev-%i.device

[Service]
Type=oneshot
ExecStart=/bin/sh -c 'mkdir -p /run/vmtest && mount -o ro /dev/%i /run/vmtest && cat /run/vmtest/hello >$VM_RESULTS/unit.tmp && umount /run/vmtest && mv $VM_RESULTS/unit.tmp $VM_RESULTS/unit-%i'
EOF
    # no daemon-reload (slow under emulation): systemd finds a unit file that appeared in
    # /run/systemd/system when it is first asked for it
    udevadm control --reload
    vm_log "ready"
    assert_eq "$(cat /proc/1/comm)" systemd "PID 1"
    vm_mark ready
    vm_await unit-sda
    vm_log "unit done"
    assert_eq "$(cat "$VM_RESULTS/unit-sda")" "hello from the stick" "what the unit read"
    assert_eq "$(udevadm info -q property --property=ID_BUS --value /dev/sda)" usb "ID_BUS of sda"
    for i in $(seq 300); do
        [ "$(systemctl show -P ActiveState vmtest-usb@sda.service)" = inactive ] && break
        sleep 0.2
    done
    assert_eq "$(systemctl show -P Result vmtest-usb@sda.service)" success "result of vmtest-usb@sda"
    vm_mark unplug
    vm_log "unplug"
    for i in $(seq 300); do [ -e /dev/sda ] || break; sleep 0.2; done
    [ ! -e /dev/sda ] || die "/dev/sda still there after device_del"
    vm_log "usb hotplug: rule, unit and removal ok"
}
if vm_in_guest; then guest; exit 0; fi

vm_need
need_cmd mkfs.ext4
mkdir -p "$T/stick"
echo "hello from the stick" >"$T/stick/hello"
truncate -s 32M "$T/usb.img"
mkfs.ext4 -q -F -U "$uuid" -d "$T/stick" "$T/usb.img"

vm_start --systemd -- bash "$0"
vm_wait_for ready
vm_qmp usb-plug stick "$T/usb.img" >/dev/null
vm_wait_for unplug
vm_qmp usb-unplug stick >/dev/null
vm_finish
