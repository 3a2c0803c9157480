#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The appliance in a real kernel with systemd as PID 1 and USB hotplug over QMP, with the
# project's own udev rule (udev/80-blkvault.rules) and unit (blkvault-target@.service, with the
# build's binary and a test configuration in a drop-in):
#   - a USB drive is formatted with LUKS in the guest (`target format`), a second one --no-luks
#     on the host;
#   - plugging a registered drive runs it with no further action: the job is backed up and
#     verified, "safe to unplug" is in the journal with the run's MESSAGE_ID, the drive is locked
#     (no mapper device, no mount), and no unit failed; an unregistered stick is ignored;
#   - a drive pulled mid-backup (held at its first index write by tests/fault/stall.so, then
#     device_del) fails the service cleanly: no mapper device, no mount, the repository keeps what
#     it had; plugged in again, the run completes;
#   - plugged again at once with the second registered drive: both complete;
#   - opened by hand, each repository verifies and its newest snapshot restores bit-exact.
# One script in two roles (tests/vm/vm-lib.sh): the host plugs and pulls drives when told.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/vm/vm-lib.sh"
stray_uuid=7a4c1f0e-3b2d-4e5f-9a8b-0c1d2e3f4a5b
etc=/run/vmtest/etc   # the service has its own /tmp: what it reads lives under /run
gate=/run/vmtest/gate

unit_state() { systemctl show -P ActiveState "$1"; }
# waits until UNIT has run and ended (inactive or failed), then prints its Result
unit_wait_done() {
    local u=$1 i s
    for i in $(seq 900); do
        s=$(unit_state "$u")
        case $s in inactive | failed) [ "$(systemctl show -P ExecMainStartTimestampMonotonic "$u")" != 0 ] && break ;; esac
        sleep 0.2
    done
    systemctl show -P Result "$u"
}
dev_of() { # the sdX that holds the filesystem or LUKS UUID $1 (waits for udev)
    local i
    for i in $(seq 300); do
        [ -e "/dev/disk/by-uuid/$1" ] && { basename "$(readlink -f "/dev/disk/by-uuid/$1")"; return; }
        sleep 0.2
    done
    die "no device with UUID $1 appeared"
}
locked() { # no mapper device and no mount of a blkvault drive in any mount namespace
    local left
    left=$(dmsetup ls --target crypt 2>/dev/null | grep blkvault || true)
    [ -z "$left" ] || die "$1: mapper devices left: $left"
    ! grep -l -e /dev/mapper/blkvault -e /run/blkvault/target- /proc/[0-9]*/mountinfo 2>/dev/null | grep -q . ||
        die "$1: a blkvault mount is left"
}
no_failed_units() {
    local failed
    failed=$(systemctl --failed --no-legend --plain | awk '{print $1}' | grep -v "^$1$" || true)
    [ -z "$failed" ] || die "$2: failed units: $failed"
}
# what the unit's process wrote (with _TRANSPORT=stdout: without systemd's own lines)
journal_of() { journalctl -q -o cat -u "$1" "${@:2}"; }
# the run's structured message ("safe to unplug" and its fields) of one unit invocation
run_message() {
    journalctl -q -o json -u "$1" MESSAGE_ID=3f1c9a0e6b2d4c5e8a7f01b2c3d4e5f6 |
        python3 -c 'import json,sys; m=[json.loads(l) for l in sys.stdin][-1]; print(m["TARGET"], m["RESULT"], m["JOBS"], m["MESSAGE"])'
}

install_appliance() {
    mkdir -p /run/udev/rules.d /run/systemd/system/blkvault-target@.service.d
    cp "$SOURCE_ROOT/udev/80-blkvault.rules" /run/udev/rules.d/
    sed "s|^ExecStart=[^ ]*/blkvault |ExecStart=$BLKVAULT |" "$BUILD_ROOT/systemd/blkvault-target@.service" \
        >/run/systemd/system/blkvault-target@.service
    # the test's configuration and state (no /etc/blkvault, /var/lib read-only); the ASan build's
    # options; a per-run environment file (the stall library for the pulled drive)
    cat >/run/systemd/system/blkvault-target@.service.d/vmtest.conf <<EOF
[Unit]
ConditionPathExists=
ConditionPathExists=$etc
[Service]
StateDirectory=
Environment=BLKVAULT_CONFIG=$etc/blkvault.conf BLKVAULT_STATE_DIR=/run/vmtest/state ASAN_OPTIONS=$ASAN_OPTIONS UBSAN_OPTIONS=$UBSAN_OPTIONS
EnvironmentFile=-/run/vmtest/unit.env
ReadWritePaths=
ReadWritePaths=/run
$(vm_unit_sees_build_tree)
EOF
    systemctl daemon-reload
    udevadm control --reload
}

# on failure: what the units did (cleanups' output is dropped: appended to the guest's output,
# which vmrun prints)
diagnose() {
    systemctl --no-pager status 'blkvault-target@*' || true
    journalctl --no-pager -o short-monotonic -u 'blkvault-target@*' || true
    dmsetup ls || true
    ls -la /run/vmtest || true
}

guest() {
    on_exit "[ \$rc = 0 ] || diagnose >>$VM_RESULTS/vmrun/output 2>&1"
    vm_log "ready"
    assert_eq "$(cat /proc/1/comm)" systemd "PID 1"
    mkdir -p "$etc" /run/vmtest/src /run/vmtest/state
    randfile /run/vmtest/src/vm.img 8 vmappliance
    printf '[job vm]\nsource = /run/vmtest/src/vm.img\n' >"$etc/blkvault.conf"
    export BLKVAULT_TEST_LUKS_ARGON2=4,32768 BLKVAULT_CONFIG=$etc/blkvault.conf

    # usb-a: a blank stick formatted with LUKS here (no device-mapper on the host), before the
    # rule is there; usb-b: formatted --no-luks on the host (a second kind of drive, and less
    # time under emulation), its entry and key file copied in
    vm_mark plug-blank
    vm_await blank-plugged
    for i in $(seq 300); do [ -e /dev/sda ] && break; sleep 0.2; done
    bv target format /dev/sda --name=usb-a --fs=ext4 --key-dir=$etc/keys >/dev/null || die "format of usb-a"
    mkdir -p "$etc/conf.d"
    cp "$VM_RESULTS/keys/usb-b.key" "$etc/keys/"
    sed "s|^key-file = .*|key-file = $etc/keys/usb-b.key|" "$VM_RESULTS/conf.d/50-target-usb-b.conf" >"$etc/conf.d/50-target-usb-b.conf"
    uuid_a=$(sed -n 's/^uuid = //p' "$etc/conf.d/50-target-usb-a.conf")
    uuid_b=$(sed -n 's/^uuid = //p' "$etc/conf.d/50-target-usb-b.conf")
    assert_eq "$(bv config check | cut -d, -f1)" "configuration ok: 2 targets" "the guest's configuration"
    udevadm settle
    vm_log "formatted usb-a ($uuid_a); usb-b ($uuid_b) registered"
    vm_mark unplug-blank
    vm_await blank-unplugged
    install_appliance
    no_failed_units - "before the plugs"

    # --- a registered drive plugged in runs by itself; an unregistered one plugged with it is
    # ignored
    vm_mark plug-a-stray
    vm_await a-stray-plugged
    dev=$(dev_of "$uuid_a")
    unit=blkvault-target@$dev.service
    assert_eq "$(unit_wait_done "$unit")" success "result of $unit"
    vm_log "usb-a: $unit done"
    journal_of "$unit" >/run/vmtest/a.journal
    grep -q "^job vm: snapshot [0-9a-f]\{8\}, 8.0 MiB new, verified$" /run/vmtest/a.journal ||
        { cat /run/vmtest/a.journal; die "no verified backup in the journal of $unit"; }
    assert_eq "$(run_message "$unit")" "usb-a ok 1 target usb-a: 1 jobs, 0 failed, 8.0 MiB new; safe to unplug" "the run's journal message"
    locked "usb-a"
    stray=$(dev_of "$stray_uuid")
    assert_eq "$(unit_wait_done "blkvault-target@$stray.service")" success "result for the unregistered stick"
    assert_eq "$(journal_of "blkvault-target@$stray.service" _TRANSPORT=stdout)" "debug: '/dev/$stray' (UUID $stray_uuid) is not a registered target, ignoring" "the unregistered stick's journal"
    no_failed_units - "after usb-a and the unregistered stick"
    vm_log "unregistered stick ignored"
    vm_mark unplug-a-stray
    vm_await a-stray-unplugged

    # --- pulled mid-backup: held at its first index write until the service is being stopped
    printf 'LD_PRELOAD=%s\nBV_STALL_AFTER=0\nBV_STALL_GATE=%s\nASAN_OPTIONS=%s:verify_asan_link_order=0\n' \
        "$STALL" "$gate" "$ASAN_OPTIONS" >/run/vmtest/unit.env
    randfile /run/vmtest/src/vm.img 8 vmappliance-2
    vm_mark plug-a
    vm_await a-plugged
    dev=$(dev_of "$uuid_a")
    unit=blkvault-target@$dev.service
    for i in $(seq 900); do [ -e "$gate.waiting" ] && break; [ "$(unit_state "$unit")" = failed ] && break; sleep 0.2; done
    [ -e "$gate.waiting" ] || die "the backup never reached its first index write"
    vm_log "usb-a: held mid-backup; pulling it"
    vm_mark pull-a
    vm_await a-pulled
    for i in $(seq 300); do case $(unit_state "$unit") in active | activating) sleep 0.2 ;; *) break ;; esac; done
    touch "$gate"
    result=$(unit_wait_done "$unit")
    vm_log "usb-a pulled: $unit $result"
    assert_eq "$(unit_state "$unit") $result" "failed exit-code" "state and result of $unit after the pull"
    assert_eq "$(systemctl show -P ExecMainStatus "$unit")" 1 "exit status of the pulled run"
    journal_of "$unit" >/run/vmtest/pull.journal
    grep -qE "^error: target usb-a: job vm: (backup failed: |interrupted by SIGTERM: )" /run/vmtest/pull.journal ||
        { cat /run/vmtest/pull.journal; die "the pulled run did not say that the backup failed"; }
    # the pull cancels the run, or the final sync meets the vanished drive first: then the run says
    # that the filesystem failed instead of "safe to unplug" (issue 21's honest ending)
    grep -qxE "target usb-a: (cancelled, )?1 jobs, 1 failed, 0 B new(; safe to unplug|, but the drive's filesystem failed at the end \(Input/output error\): .*)" \
        /run/vmtest/pull.journal ||
        { cat /run/vmtest/pull.journal; die "the pulled run's summary"; }
    locked "the pulled usb-a"
    rm -f /run/vmtest/unit.env "$gate" "$gate.waiting"
    systemctl reset-failed "$unit"

    # --- plugged again together with the other registered drive: both complete
    vm_mark plug-ab
    vm_await ab-plugged
    for u in "$uuid_a" "$uuid_b"; do
        dev=$(dev_of "$u")
        assert_eq "$(unit_wait_done "blkvault-target@$dev.service")" success "result of blkvault-target@$dev"
    done
    run_message "blkvault-target@$(dev_of "$uuid_a").service" |
        grep -qx "usb-a ok 1 target usb-a: 1 jobs, 0 failed, [0-9.]* [KM]\?i\?B new; safe to unplug" ||
        die "usb-a after the pull: $(run_message "blkvault-target@$(dev_of "$uuid_a").service")"
    assert_eq "$(run_message "blkvault-target@$(dev_of "$uuid_b").service")" "usb-b ok 1 target usb-b: 1 jobs, 0 failed, 8.0 MiB new; safe to unplug"
    locked "usb-a and usb-b"
    no_failed_units - "after two drives at once"
    vm_log "usb-a again and usb-b at once: both completed"

    # --- by hand: usb-a's repository verifies whole after the pull; both restore bit-exact
    mkdir -p /run/vmtest/mnt
    for n in a b; do
        uuid=$uuid_a; [ $n = b ] && uuid=$uuid_b
        if [ $n = a ]; then
            cryptsetup open --readonly --key-file "$etc/keys/usb-a.key" "/dev/$(dev_of "$uuid")" check
            mount -o ro /dev/mapper/check /run/vmtest/mnt
        else
            mount -o ro "/dev/$(dev_of "$uuid")" /run/vmtest/mnt
        fi
        if [ $n = a ]; then
            bv verify /run/vmtest/mnt/blkvault --read-data --key-file="$etc/keys/usb-$n.key" >/dev/null ||
                die "usb-$n: the repository does not verify"
            assert_eq "$(bv list /run/vmtest/mnt/blkvault --json --key-file="$etc/keys/usb-a.key" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" 2 "snapshots on usb-a (the pulled run published none)"
        fi
        bv restore /run/vmtest/mnt/blkvault vm@latest /run/vmtest/out.img --key-file="$etc/keys/usb-$n.key" >/dev/null 2>&1 ||
            die "usb-$n: restore failed"
        assert_eq "$(sha256sum </run/vmtest/out.img)" "$(sha256sum </run/vmtest/src/vm.img)" "usb-$n: sha256 of the restored image"
        rm /run/vmtest/out.img
        umount /run/vmtest/mnt
        [ $n = b ] || cryptsetup close check
    done
    vm_log "repositories verified and restored"
}
if vm_in_guest; then guest; exit 0; fi

vm_need
[ -n "${STALL:-}" ] && [ -f "$STALL" ] || die "STALL (tests/fault/stall.so) is not built"
need_cmd mkfs.ext4 mkfs.btrfs losetup
[ -e /dev/loop-control ] || skip "no loop devices (usb-b is formatted on the host)"
truncate -s 400M "$T/a.img"
truncate -s 200M "$T/b.img"
truncate -s 32M "$T/stray.img"
mkfs.ext4 -q -F -U "$stray_uuid" "$T/stray.img"
# usb-b: `target format --no-luks` on a loop device; the guest sees the results directory
mkdir -p "$T/vm"
attach_loop loop "$T/b.img"
bv target format "$loop" --name=usb-b --fs=btrfs --no-luks --key-dir="$T/vm/keys" --config="$T/vm/blkvault.conf" >/dev/null ||
    die "target format --no-luks of usb-b"
detach_loop "$loop"

# on the guest's marker WAIT: plug (+ID) or unplug (-ID) the sticks, then tell it DONE
host_step() {
    local wait=$1 done=$2 s
    shift 2
    vm_wait_for "$wait"
    for s in "$@"; do
        case $s in
        +*) vm_qmp usb-plug "${s#+}" "$T/${s#+}.img" >/dev/null ;;
        -*) vm_qmp usb-unplug "${s#-}" >/dev/null ;;
        esac
    done
    vm_tell "$done"
}
vm_start --systemd --timeout 1150 -- bash "$0"
host_step plug-blank blank-plugged +a
host_step unplug-blank blank-unplugged -a
host_step plug-a-stray a-stray-plugged +a +stray
host_step unplug-a-stray a-stray-unplugged -a -stray
host_step plug-a a-plugged +a
host_step pull-a a-pulled -a
host_step plug-ab ab-plugged +a +b
vm_finish
