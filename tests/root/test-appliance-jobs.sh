#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The appliance's jobs beyond a plain source, on loop devices (targets made with --no-luks):
# a command whose stdout is the image (source = command:CMD and command = CMD), restored
# bit-exact, and a command that fails midway publishes nothing; pre and post with their
# environment, a failing pre skips the backup; on-success / on-failure of a job, a target and
# [global]; the state runs record and `blkvault status` (text and --json); the age alarm
# (`status --check-age`: exit 11, the warning, on-failure); SIGTERM cancels a run cleanly (nothing
# published, the drive unmounted); a restore from the drive mounted read-only; power-off = yes (a
# loop device is detached).
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd losetup mkfs.ext4 sha256sum python3
[ -e /dev/loop-control ] || skip "no loop devices"

conf=$T/etc/blkvault.conf
state=$T/state
mkdir -p "$T/etc" "$T/mnt"
opts=(--config="$conf" --run-dir="$T/run")
randfile "$T/a.img" 3 jobs-a
randfile "$T/b.img" 1 jobs-b
loop_target dev usb-1 300M "${opts[@]}"
on_exit "umount -l $T/run/target-usb-1 $T/mnt"
uuid=$(blkid -s UUID -o value "$dev")
key=$T/keys/usb-1.key
# snapshot names on the drive
names() { mount "$dev" "$T/mnt"; bv list "$T/mnt/blkvault" --key-file="$key" --json | python3 -c 'import json,sys; print(" ".join(s["name"] for s in json.load(sys.stdin)))'; umount "$T/mnt"; }
restore() { mount "$dev" "$T/mnt"; bv restore "$T/mnt/blkvault" "$1" "$2" --key-file="$key" >/dev/null || { umount "$T/mnt"; die "restore $1"; }; umount "$T/mnt"; }

# -- a command's stdout is the image; pre, post and the hooks see their environment
cat > "$conf" <<EOF
[global]
on-success = echo "global ok: \$BLKVAULT_TARGET \$BLKVAULT_RESULT: \$BLKVAULT_SUMMARY" >> $T/hooks
on-failure = echo "global failed: \$BLKVAULT_TARGET \$BLKVAULT_RESULT: \$BLKVAULT_SUMMARY" >> $T/hooks
[job cmd]
source = command:cat $T/a.img
targets = usb-1
pre = echo "pre \$BLKVAULT_JOB \$BLKVAULT_TARGET" >> $T/hooks
post = echo "post \$BLKVAULT_JOB \$BLKVAULT_TARGET \$BLKVAULT_RESULT" >> $T/hooks
on-success = echo "job ok: \$BLKVAULT_JOB \$BLKVAULT_TARGET: \$BLKVAULT_SUMMARY" >> $T/hooks
[job cmd2]
command = cat $T/b.img
max-age = 2d
schedule = Mon..Fri *-*-* 02:30:00
EOF
bv target run usb-1 "${opts[@]}" >"$T/out" 2>"$T/err" || { cat "$T/out" "$T/err"; die "target run with command jobs"; }
grep -qx 'job cmd: snapshot [0-9a-f]\{8\}, 3.0 MiB new, verified' "$T/out" || die "job line of cmd"
grep -qx "job cmd2: snapshot [0-9a-f]\{8\}, 1.0 MiB new, verified" "$T/out" || die "job line of cmd2"
assert_eq "$(tail -n1 "$T/out")" "target usb-1: 2 jobs, 0 failed, 4.0 MiB new; safe to unplug"
snap=$(grep '^job cmd:' "$T/out" | sed 's/^job cmd: snapshot \([0-9a-f]*\),.*/\1/')
assert_eq "$(sed 's/snapshot [0-9a-f]*,/snapshot X,/' "$T/hooks")" "pre cmd usb-1
post cmd usb-1 ok
job ok: cmd usb-1: job cmd on usb-1: snapshot X, 3.0 MiB new, verified
global ok: usb-1 ok: target usb-1: 2 jobs, 0 failed, 4.0 MiB new; safe to unplug" "hooks of a good run"
restore cmd "$T/cmd.img"
assert_same "$T/a.img" "$T/cmd.img"
restore cmd2 "$T/cmd2.img"
assert_same "$T/b.img" "$T/cmd2.img"

# the state of the run: files, status, --json
grep -qx "result=ok" "$state/job-cmd@usb-1" || die "state of job cmd"
grep -qx "snapshot=$snap[0-9a-f]*" "$state/job-cmd@usb-1" || die "the state names the snapshot"
grep -qx "result=ok" "$state/target-usb-1" || die "state of usb-1"
bv status --config="$conf" >"$T/status"
ts='[0-9]\{4\}-[0-9][0-9]-[0-9][0-9]T[0-9:]\{8\}Z'
grep -qx "target usb-1: last run $ts: ok" "$T/status" || { cat "$T/status"; die "status: target"; }
grep -qx "job cmd (command): last run $ts on usb-1: ok; last good backup $ts on usb-1 ([0-9]*s old); next run not scheduled; max-age 1w: ok" "$T/status" || { cat "$T/status"; die "status: job cmd"; }
grep -qx "job cmd2 (command): last run $ts on usb-1: ok; last good backup $ts on usb-1 ([0-9]*s old); next run [A-Z][a-z][a-z] [0-9-]* 02:30:00 [A-Z]*; max-age 2d: ok" "$T/status" || { cat "$T/status"; die "status: job cmd2"; }
bv status --json --config="$conf" | python3 -c '
import json, sys
s = json.load(sys.stdin)
assert [t["name"] for t in s["targets"]] == ["usb-1"] and s["targets"][0]["result"] == "ok", s
j = {x["name"]: x for x in s["jobs"]}
assert j["cmd"]["alarm"] is False and j["cmd"]["last_good_target"] == "usb-1" and j["cmd"]["result"] == "ok", j
assert j["cmd"]["max_age_seconds"] == 604800 and j["cmd2"]["max_age_seconds"] == 172800, j
assert j["cmd"]["next_run"] is None and j["cmd2"]["next_run"].endswith("02:30:00 " + j["cmd2"]["next_run"].split()[-1]), j
assert 0 <= j["cmd"]["age_seconds"] < 3600, j
' || die "status --json"
out=$(bv status --check-age --config="$conf")
assert_eq "$out" "age check: 2 jobs, 0 without a good backup within their max-age"

# -- failures: a command that fails midway publishes nothing; a failing pre skips the backup;
# post still runs and sees it; on-failure of the job and of the target
rm "$T/hooks"
cat > "$conf" <<EOF
[global]
on-failure = echo "global failed: \$BLKVAULT_SUMMARY" >> $T/hooks
[target-hooks]
[job cmd]
source = command:head -c 1048576 $T/a.img; exit 3
targets = usb-1
post = echo "post \$BLKVAULT_JOB \$BLKVAULT_RESULT" >> $T/hooks
on-failure = echo "job failed: \$BLKVAULT_JOB \$BLKVAULT_RESULT: \$BLKVAULT_SUMMARY" >> $T/hooks
[job pre]
source = $T/a.img
targets = usb-1
pre = exit 4
EOF
sed -i '/^\[target-hooks\]$/d' "$conf"
printf 'on-failure = echo "target failed: $BLKVAULT_TARGET: $BLKVAULT_SUMMARY" >> %s\n' "$T/hooks" >> "$T/etc/conf.d/50-target-usb-1.conf"
expect_fail 1 "^error: target usb-1: job cmd: command failed: exit status 3$" bv target run usb-1 "${opts[@]}"
grep -qx "error: target usb-1: job pre: pre failed: exit status 4" "$T/.err" || { cat "$T/.err"; die "pre's failure"; }
assert_eq "$(tail -n1 "$T/.out")" "target usb-1: 2 jobs, 2 failed, 0 B new; safe to unplug"
assert_eq "$(cat "$T/hooks")" "post cmd failed
job failed: cmd failed: job cmd on usb-1: command failed: exit status 3
target failed: usb-1: target usb-1: 2 jobs, 2 failed, 0 B new; safe to unplug" "hooks of a failed run"
assert_eq "$(names)" "cmd cmd2" "snapshots after the failed run (nothing published)"
grep -qx "result=failed" "$state/job-cmd@usb-1" && grep -qx "step=command" "$state/job-cmd@usb-1" || die "state of the failed job"
grep -qx "last-good=[1-9][0-9]*" "$state/job-cmd@usb-1" || die "the failed run lost the last good backup"
grep -qx "job cmd (command): last run $ts on usb-1: command failed: exit status 3; last good backup $ts on usb-1 ([0-9]*s old); next run not scheduled; max-age 1w: ok" <(bv status --config="$conf") || { bv status --config="$conf"; die "status after a failure"; }
grep -qx "job pre ($T/a.img): last run $ts on usb-1: pre failed: exit status 4; no good backup; next run not scheduled; max-age 1w: ALARM" <(bv status --config="$conf") || die "status of a job never good"

# -- the age alarm: job cmd's last good backup 8 days ago, job pre never
old=$(( $(date +%s) - 8 * 86400 ))
sed -i "s/^last-good=.*/last-good=$old/" "$state/job-cmd@usb-1"
rm "$T/hooks"
rc=0; bv status --check-age --config="$conf" >"$T/out" 2>"$T/err" || rc=$?
assert_eq "$rc" 11 "exit status of an alarm"
assert_eq "$(cat "$T/out")" "age check: 2 jobs, 2 without a good backup within their max-age"
oldtime=$(date -u -d "@$old" +%Y-%m-%dT%H:%M:%SZ)
assert_eq "$(cat "$T/err")" "warning: job cmd: no good backup on any drive within its max-age of 1w (last good: $oldtime on usb-1)
warning: job pre: no good backup on any drive within its max-age of 1w (last good: never)" "alarm warnings"
assert_eq "$(cat "$T/hooks")" "job failed: cmd failed: job cmd: no good backup on any drive within its max-age of 1w (last good: $oldtime on usb-1)
global failed: job pre: no good backup on any drive within its max-age of 1w (last good: never)" "on-failure of the alarm"
bv status --json --config="$conf" | python3 -c '
import json, sys
j = {x["name"]: x for x in json.load(sys.stdin)["jobs"]}
assert j["cmd"]["alarm"] is True and j["pre"]["alarm"] is True and j["pre"]["last_good"] is None, j
assert 8 * 86400 <= j["cmd"]["age_seconds"] < 8 * 86400 + 3600, j
' || die "status --json in alarm"
# an on-failure command that fails is warned about; a state directory that cannot be read is an error
sed -i 's/^on-failure = echo "global failed.*$/on-failure = exit 5/' "$conf"
rc=0; bv status --check-age --config="$conf" >/dev/null 2>"$T/err" || rc=$?
assert_eq "$rc" 11 "exit status of an alarm whose on-failure fails"
grep -qx "warning: the on-failure command of \[global\] exited with status 5" "$T/err" || { cat "$T/err"; die "a failing on-failure"; }
expect_fail 1 "^error: cannot read the state of target usb-1 in '$T/a.img': Not a directory$" bv status --config="$conf" --state-dir="$T/a.img"

# -- SIGTERM cancels a run: the command ends, nothing is published, the drive is unmounted
cat > "$conf" <<EOF
[job slow]
command = head -c 1048576 $T/a.img; sleep 60 & echo \$! > $T/sleep.pid; touch $T/started; wait; cat $T/a.img
EOF
rm -f "$T/started"
"$BLKVAULT" target run usb-1 "${opts[@]}" >"$T/out" 2>"$T/err" & pid=$!
for _ in $(seq 300); do [ -e "$T/started" ] && break; sleep 0.1; done
[ -e "$T/started" ] || die "the slow command did not start"
kill -TERM $pid
rc=0; wait $pid || rc=$?
assert_eq "$rc" 1 "exit status of a cancelled run"
assert_eq "$(cat "$T/err")" "error: target usb-1: job slow: interrupted by SIGTERM: nothing was published or kept"
assert_eq "$(tail -n1 "$T/out")" "target usb-1: cancelled, 1 jobs, 1 failed, 0 B new; safe to unplug"
! grep -q " $T/run/" /proc/self/mountinfo || die "the cancelled run left its mount"
for _ in $(seq 50); do kill -0 "$(cat "$T/sleep.pid")" 2>/dev/null || break; sleep 0.1; done
! kill -0 "$(cat "$T/sleep.pid")" 2>/dev/null || die "the cancelled command's child still runs"
assert_eq "$(names)" "cmd cmd2" "snapshots after the cancelled run"

# -- a drive mounted read-only (a restore-only target, a stick mounted by hand) restores: the
# readers' lock file exists although only backups wrote the repository (the earlier list made it:
# remove it, then run a backup)
mount "$dev" "$T/mnt"
rm "$T/mnt/blkvault/locks/gc"
umount "$T/mnt"
printf '[job cmd]\ncommand = cat %s\n' "$T/a.img" > "$conf"
bv target run usb-1 "${opts[@]}" >/dev/null || die "the run before the read-only restore"
mount -o ro "$dev" "$T/mnt"
rc=0; bv restore "$T/mnt/blkvault" cmd "$T/ro.img" --key-file="$key" >/dev/null 2>"$T/err" || rc=$?
umount "$T/mnt"
[ "$rc" = 0 ] || { cat "$T/err"; die "restore from a read-only mount"; }
assert_same "$T/a.img" "$T/ro.img"

# -- power-off = yes: the drive's disk is powered off after the run; a loop device is detached
cat > "$conf" <<EOF
[job cmd]
command = cat $T/a.img
EOF
sed -i '/^on-failure/d' "$T/etc/conf.d/50-target-usb-1.conf"
echo "power-off = yes" >> "$T/etc/conf.d/50-target-usb-1.conf"
bv target run "$dev" "${opts[@]}" >"$T/out" || { cat "$T/out"; die "run with power-off"; }
assert_eq "$(tail -n1 "$T/out")" "target usb-1: 1 jobs, 0 failed, 0 B new; powered off; safe to unplug"
for _ in $(seq 50); do losetup "$dev" >/dev/null 2>&1 || break; sleep 0.1; done
! losetup "$dev" >/dev/null 2>&1 || die "power-off left the loop device attached"
