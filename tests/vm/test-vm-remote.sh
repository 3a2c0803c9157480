#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Guest script (meson: vmrun --systemd --scratch 320M -- bash test-vm-remote.sh): the off-site
# copy as systemd runs it, with systemd as PID 1 and a LUKS drive. A job with copy-to = vault (a
# directory remote); blkvault-target@vda.service (the built unit) backs up, locks the drive and
# says "safe to unplug", then starts blkvault-copy@vault.service from inside its sandbox (no
# network; systemctl --no-block), which unlocks the drive again, mounts it read-only, copies the
# job's snapshot to LOCATION/usb-1 and locks it: no mapper device or mount is left, the copy
# restores bit-exact, its journal entry has its fields, `status` shows the remote's good copy, and
# blkvault-copy@vault.timer loads and is scheduled.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/vm/vm-lib.sh"
vm_guest_only
assert_eq "$(cat /proc/1/comm)" systemd "PID 1"
need_cmd cryptsetup dmsetup mkfs.ext4
export BLKVAULT_TEST_LUKS_ARGON2=4,32768
modprobe -a dm_crypt
# the units see the file system read-only but for /run: the test's files live there
d=/run/bvtest-remote
mkdir -p "$d/state" "$d/vault"
chmod 0755 "$d"
randfile "$d/vm.img" 6 vm-remote
cat >"$d/blkvault.conf" <<CONF
[job vm]
source = $d/vm.img
copy-to = vault

[remote vault]
location = $d/vault
CONF
export BLKVAULT_CONFIG=$d/blkvault.conf BLKVAULT_STATE_DIR=$d/state
vm_log "remote: format"
bv target format /dev/vda --name=usb-1 --key-dir="$d/keys" >"$T/out" || { cat "$T/out"; die "target format"; }
bv config check >/dev/null || die "the test's configuration: $(bv config check 2>&1)"

# the units as built, with the build's binary, pointed at the test's configuration and state
for u in blkvault-target@.service blkvault-copy@.service; do
    sed "s|^ExecStart=[^ ]*/blkvault |ExecStart=$BLKVAULT |" "$BUILD_ROOT/systemd/$u" >"/run/systemd/system/$u"
    mkdir -p "/run/systemd/system/$u.d"
    cat >"/run/systemd/system/$u.d/vmtest.conf" <<EOF
[Unit]
ConditionPathExists=
[Service]
# the guest's /var is the host's, read-only
StateDirectory=
CacheDirectory=
# the guest has no /etc/blkvault (the host's /etc, read-only): only /run is written
ReadWritePaths=
ReadWritePaths=/run
Environment=BLKVAULT_CONFIG=$d/blkvault.conf BLKVAULT_STATE_DIR=$d/state BLKVAULT_TEST_LUKS_ARGON2=4,32768
Environment=ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=${UBSAN_OPTIONS:-}
$(vm_unit_sees_build_tree)
EOF
done
cp "$SOURCE_ROOT/systemd/blkvault-copy@.timer" /run/systemd/system/
systemctl daemon-reload
grep -qx "ExecStart=$BLKVAULT remote copy %i" /run/systemd/system/blkvault-copy@.service || die "the copy unit's command line"
vm_log "remote: units in place"

# the drive's run, as udev would start it; the copy unit follows without being waited for
systemctl start blkvault-target@vda.service ||
    { journalctl -u blkvault-target@vda.service --no-pager; die "blkvault-target@vda.service failed"; }
journalctl --sync
journalctl -u blkvault-target@vda.service -o cat >"$T/target.log"
grep -qx "target usb-1: 1 jobs, 0 failed, 6.0 MiB new; safe to unplug" "$T/target.log" || { cat "$T/target.log"; die "the run's summary"; }
grep -qx "target usb-1: its new snapshots go off-site to vault next (blkvault-copy@vault.service): it reads the drive, mounted read-only; unplugging stops it, and it continues at the next plug-in" "$T/target.log" ||
    { cat "$T/target.log"; die "the run did not start the copy"; }
vm_log "remote: run done"
# the copy unit ran once systemd says it ended (a oneshot unit: "Deactivated successfully", or
# "Failed with result")
end=$(( $(date +%s) + 300 ))
until journalctl -u blkvault-copy@vault.service -o cat | grep -q -e "Deactivated successfully" -e "Failed with result"; do
    [ "$(date +%s)" -lt "$end" ] ||
        { systemctl status blkvault-copy@vault.service --no-pager; journalctl -b --no-pager | tail -40; die "blkvault-copy@vault.service did not run"; }
    sleep 2
done
journalctl --sync
journalctl -u blkvault-copy@vault.service -o cat >"$T/copy.log"
assert_eq "$(systemctl show -P Result blkvault-copy@vault.service)" success "result of blkvault-copy@vault.service ($(cat "$T/copy.log"))"
grep -q "^copy of target usb-1 to vault ($d/vault/usb-1): 1 snapshots copied, 0 there already, [0-9.]* MiB sent (the remote's repository created)$" "$T/copy.log" ||
    { cat "$T/copy.log"; die "the copy's line"; }
journalctl -o json MESSAGE_ID=5b7e2c914d0a4f6e8b3c2d1e0f9a8b7c | python3 -c '
import json, sys
e = [json.loads(l) for l in sys.stdin if l.strip()]
assert len(e) == 1, e
want = {"REMOTE": "vault", "TARGET": "usb-1", "RESULT": "ok", "PRIORITY": "5"}
for k, v in want.items():
    assert e[0].get(k) == v, (k, e[0].get(k), v)
' || die "the copy's journal entry"
vm_log "remote: copy done"

# the drive is locked again: no mapper device, no mount
assert_eq "$(dmsetup ls --target crypt 2>/dev/null | grep -c blkvault)" 0 "blkvault mapper devices after the copy"
! grep -q -e /dev/vda -e /dev/mapper -e /dev/dm- /proc/self/mountinfo || die "a mount is left: $(grep -e vda -e mapper /proc/self/mountinfo)"
bv restore "$d/vault/usb-1" vm "$T/vm.out" --key-file="$d/keys/usb-1.key" -q || die "restore from the vault"
assert_same "$d/vm.img" "$T/vm.out"
bv status >"$T/status" || die "status"
grep -Eq "^remote vault \($d/vault\): last copy [0-9T:-]+Z of usb-1: ok; last good copy [0-9T:-]+Z of usb-1 \([0-9a-z ]+ old\); max-age 1w: ok$" "$T/status" ||
    { cat "$T/status"; die "status of the remote"; }

# the retry timer loads and is scheduled
systemctl start blkvault-copy@vault.timer
assert_eq "$(systemctl show -P ActiveState blkvault-copy@vault.timer)" active "state of the copy's timer"
[ -n "$(systemctl show -P NextElapseUSecRealtime blkvault-copy@vault.timer)" ] || die "the timer has no next elapse"
vm_log "remote: done"
echo ok
