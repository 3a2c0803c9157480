#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Someone is told: after every run of a drive the Prometheus textfile of [global] metrics holds
# the run (checked with promtool), and [global] notify is run once per change of state: a failed
# run is told once (not again on the next failure), the success after it as a recovery; the age
# alarm of a job whose timer stopped is told once over two `status --check-age` (both exit 11),
# and once more when it is over. `status` names the last notification and what plugging in
# each drive will do.
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd losetup mkfs.ext4 promtool
[ -e /dev/loop-control ] || skip "no loop devices"

conf=$T/etc/blkvault.conf
prom=$T/prom/blkvault.prom
mkdir -p "$T/etc" "$T/prom"
opts=(--config="$conf" --run-dir="$T/run")
randfile "$T/a.img" 2 notify-a
loop_target dev usb-1 300M "${opts[@]}"
cat > "$conf" <<EOF
[global]
notify = echo "\$BLKVAULT_EVENT \$BLKVAULT_SUBJECT \$BLKVAULT_RESULT \$BLKVAULT_SUMMARY" >> $T/notified
metrics = $prom

[job a]
source = $T/a.img
keep-last = 3
max-age = 1d
EOF
: > "$T/notified"
# metric NAME LABELS: the value of one sample of the textfile
metric() { awk -v k="$1$2" '$1 == k { print $2 }' "$prom"; }
check_prom() {
    promtool check metrics < "$prom" >"$T/promtool.out" 2>&1 || { cat "$T/promtool.out" "$prom"; die "promtool check metrics: $1"; }
}

# a good run: its metrics, no notification (nothing changed)
bv target run usb-1 "${opts[@]}" >/dev/null
check_prom "after a good run"
l='{job="a",target="usb-1"}'
assert_eq "$(metric blkvault_last_run_status "$l")" 0 "status of a good run"
assert_eq "$(metric blkvault_last_run_new_bytes "$l")" 2097152 "new bytes"
good=$(metric blkvault_last_success_timestamp_seconds "$l")
[ "$good" -gt 1700000000 ] || die "last success timestamp '$good'"
[ "$(metric blkvault_last_run_stored_bytes "$l")" -gt 2000000 ] || die "stored bytes: $(metric blkvault_last_run_stored_bytes "$l")"
[ "$(metric blkvault_repository_size_bytes "$l")" -gt 2000000 ] || die "repository size: $(metric blkvault_repository_size_bytes "$l")"
[ -n "$(metric blkvault_last_run_duration_seconds "$l")" ] || die "no duration"
assert_eq "$(metric blkvault_target_last_run_status '{target="usb-1"}')" 0 "the target's status"
assert_eq "$(metric blkvault_age_alarm '{job="a"}')" 0 "age alarm after a good run"
assert_eq "$(stat -c %a "$prom")" 644 "the textfile's mode (node-exporter reads it as its own user)"
[ ! -s "$T/notified" ] || die "a good first run notified: $(cat "$T/notified")"

# two failed runs: the metric says failed, one notification
mv "$T/a.img" "$T/a.away"
for i in 1 2; do
    rc=0; bv target run usb-1 "${opts[@]}" >/dev/null 2>&1 || rc=$?
    assert_eq "$rc" 1 "failed run $i"
done
check_prom "after a failed run"
assert_eq "$(metric blkvault_last_run_status "$l")" 1 "status of a failed run"
assert_eq "$(metric blkvault_last_success_timestamp_seconds "$l")" "$good" "last success after a failure"
assert_eq "$(grep -c . "$T/notified")" 1 "notifications of two failed runs"
grep -qx "failure job-a@usb-1 failed job a on usb-1: cannot open its source '$T/a.img': No such file or directory" "$T/notified" || { cat "$T/notified"; die "the failure's notification"; }
# the recovery
mv "$T/a.away" "$T/a.img"
bv target run usb-1 "${opts[@]}" >/dev/null
assert_eq "$(sed -n 2p "$T/notified" | cut -d' ' -f1-3)" "recovery job-a@usb-1 ok" "the recovery's notification"
assert_eq "$(grep -c . "$T/notified")" 2 "notifications after the recovery"

# the timer stopped: the last good backup two days old; two age checks, one notification
st=$BLKVAULT_STATE_DIR/job-a@usb-1
old=$(( $(date +%s) - 2 * 86400 ))
sed -i "s/^last-good=.*/last-good=$old/; s/^last-run=.*/last-run=$old/" "$st"
: > "$T/notified"
for i in 1 2; do
    rc=0; bv status --check-age --config="$conf" >/dev/null 2>&1 || rc=$?
    assert_eq "$rc" 11 "status --check-age $i with the timer stopped"
done
assert_eq "$(grep -c . "$T/notified")" 1 "notifications of two age checks in alarm"
grep -q "^alarm alarm-a failed job a: no good backup on any drive within its max-age of 1d" "$T/notified" || { cat "$T/notified"; die "the alarm's notification"; }
check_prom "in alarm"
assert_eq "$(metric blkvault_age_alarm '{job="a"}')" 1 "age alarm metric"
bv status --config="$conf" >"$T/out"
grep -q "^last notification: [0-9TZ:-]*: alarm of alarm-a: job a: no good backup" "$T/out" || { cat "$T/out"; die "status: the last notification"; }
grep -qx "target usb-1: plugged in, it will back up and verify a, prune and collect garbage for a, unmount" "$T/out" || { cat "$T/out"; die "status: what plugging usb-1 in does"; }
# a run: the alarm is over, told once
bv target run usb-1 "${opts[@]}" >/dev/null
bv status --check-age --config="$conf" >/dev/null
bv status --check-age --config="$conf" >/dev/null
assert_eq "$(cut -d' ' -f1-3 "$T/notified" | tr '\n' ' ')" "alarm alarm-a failed alarm-cleared alarm-a ok " "notifications after the alarm"

# a notify command that fails is told again next time (not recorded), with a warning
sed -i "s|^notify = .*|notify = exit 3|" "$conf"
mv "$T/a.img" "$T/a.away"
bv target run usb-1 "${opts[@]}" >/dev/null 2>"$T/err" || true
grep -qx "warning: the notify command (failure of job-a@usb-1) exited with status 3" "$T/err" || { cat "$T/err"; die "a failing notify command"; }
bv target run usb-1 "${opts[@]}" >/dev/null 2>"$T/err" || true
grep -qx "warning: the notify command (failure of job-a@usb-1) exited with status 3" "$T/err" || { cat "$T/err"; die "a failed notification is not tried again"; }

# metrics = no: no textfile is written; a directory that does not exist is warned about
rm "$prom"
sed -i "s|^metrics = .*|metrics = no|" "$conf"
bv status --check-age --config="$conf" >/dev/null 2>&1 || true
[ ! -e "$prom" ] || die "metrics = no wrote the textfile"
sed -i "s|^metrics = .*|metrics = $T/none/x.prom|" "$conf"
bv status --check-age --config="$conf" >/dev/null 2>"$T/err" || true
grep -qx "warning: cannot write the metrics '$T/none/x.prom': No such file or directory" "$T/err" || { cat "$T/err"; die "metrics into a missing directory"; }
