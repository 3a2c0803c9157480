#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Guest script (meson: vmrun --systemd -- bash test-vm-alarm.sh): the age alarm as systemd runs
# it. blkvault-alarm.service (the built unit, with a drop-in that points it at this test's
# configuration, state and binary) fails with status 11 while a job has no good backup younger
# than its max-age, and the journal holds the warning with its structured fields (MESSAGE_ID,
# JOB, MAX_AGE, LAST_GOOD, LAST_GOOD_TARGET, PRIORITY 4) and the output of the job's
# on-failure command; with a good backup recorded it succeeds. blkvault-alarm.timer loads and
# is scheduled.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/vm/vm-lib.sh"
vm_guest_only
assert_eq "$(cat /proc/1/comm)" systemd "PID 1"
id=8d2e4b7c1a9f4e3d9c6b5a4f3e2d1c0b
# the service has a private /tmp and a read-only file system: its files live in /run
d=/run/bvtest-alarm
mkdir -p "$d/state" /run/systemd/system/blkvault-alarm.service.d
cat > "$d/blkvault.conf" <<EOF
[target usb-1]
uuid = 0b6c1b2a-1234-4321-abcd-0123456789ab
key-file = /k
[job vm1]
source = /dev/vg0/vm1
max-age = 2d
on-failure = echo "alarm hook: \$BLKVAULT_JOB \$BLKVAULT_RESULT: \$BLKVAULT_SUMMARY"
EOF
cp "$BUILD_ROOT/systemd/blkvault-alarm.service" "$SOURCE_ROOT/systemd/blkvault-alarm.timer" /run/systemd/system/
cat > /run/systemd/system/blkvault-alarm.service.d/test.conf <<EOF
[Unit]
ConditionPathExists=
[Service]
# the guest's /var/lib is the host's, read-only: the state is in $d/state
StateDirectory=
Environment=BLKVAULT_CONFIG=$d/blkvault.conf BLKVAULT_STATE_DIR=$d/state ASAN_OPTIONS=${ASAN_OPTIONS:-} UBSAN_OPTIONS=${UBSAN_OPTIONS:-}
ExecStart=
ExecStart=$BLKVAULT status --check-age
$(vm_unit_sees_build_tree)
EOF
systemctl daemon-reload
vm_log "alarm: units in place"

# no good backup: the unit fails with 11, the warning is in the journal with its fields
rc=0; systemctl start blkvault-alarm.service || rc=$?
[ "$rc" != 0 ] || die "the alarm service succeeded without a good backup"
assert_eq "$(systemctl show -P ExecMainStatus blkvault-alarm.service)" 11 "exit status of the alarm"
assert_eq "$(systemctl show -P Result blkvault-alarm.service)" exit-code "result of the alarm"
journalctl --sync
msg="job vm1: no good backup on any drive within its max-age of 2d (last good: never)"
journalctl -o json MESSAGE_ID=$id | python3 -c '
import json, sys
entries = [json.loads(l) for l in sys.stdin if l.strip()]
assert len(entries) == 1, entries
e = entries[0]
want = {"MESSAGE": sys.argv[1], "JOB": "vm1", "MAX_AGE": "172800", "LAST_GOOD": "never", "LAST_GOOD_TARGET": "", "PRIORITY": "4"}
for k, v in want.items():
    assert e.get(k) == v, (k, e.get(k), v)
' "$msg" || die "the alarm's journal entry"
journalctl -u blkvault-alarm.service -o cat > "$T/unit.log"
grep -qx "alarm hook: vm1 failed: $msg" "$T/unit.log" || { cat "$T/unit.log"; die "the on-failure command's output"; }
grep -qx "age check: 1 jobs, 1 without a good backup within their max-age" "$T/unit.log" || { cat "$T/unit.log"; die "the summary line"; }
vm_log "alarm: fired"

# a good backup an hour ago on usb-1: the check passes
printf 'last-run=%s\nresult=ok\nlast-good=%s\n' $(( $(date +%s) - 3600 )) $(( $(date +%s) - 3600 )) > "$d/state/job-vm1@usb-1"
systemctl start blkvault-alarm.service || die "the alarm service failed with a good backup"
assert_eq "$(systemctl show -P ExecMainStatus blkvault-alarm.service)" 0 "exit status of a good check"
journalctl --sync
assert_eq "$(journalctl -o json MESSAGE_ID=$id | wc -l)" 1 "alarm entries after a good check"

# the timer loads and is scheduled
systemctl start blkvault-alarm.timer
assert_eq "$(systemctl show -P ActiveState blkvault-alarm.timer)" active "state of the timer"
[ -n "$(systemctl show -P NextElapseUSecRealtime blkvault-alarm.timer)" ] || die "the timer has no next elapse"
vm_log "alarm: done"
