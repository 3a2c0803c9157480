#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A typo costs one section: with a mistake in job b's section and one in drive usb-2's,
# `target run` of usb-1 runs job a (b is reported as not run, exit 1), `job run a` runs, usb-2
# is reported and not run, `status` works (exit 0, naming both mistakes) and `status
# --check-age` fires job b's alarm (exit 11) and runs the on-failure command of [global].
# (Before, one mistake anywhere stopped all of them with exit 1.)
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd losetup mkfs.ext4
[ -e /dev/loop-control ] || skip "no loop devices"

conf=$T/etc/blkvault.conf
mkdir -p "$T/etc"
opts=(--config="$conf" --run-dir="$T/run")
randfile "$T/a.img" 2 typo-a
loop_target dev1 usb-1 300M "${opts[@]}"
loop_target dev2 usb-2 300M "${opts[@]}"
echo "power-of = yes" >> "$T/etc/conf.d/50-target-usb-2.conf"
cat > "$conf" <<EOF
[global]
on-failure = echo "\$BLKVAULT_SUMMARY" >> $T/notified

[job a]
source = $T/a.img
targets = usb-1

[job b]
sorce = $T/a.img
max-age = 1d
EOF
mistakes="$conf:8: [job b] has no source (set source = PATH or command = COMMAND)
$conf:9: unknown key 'sorce' in [job b]
$T/etc/conf.d/50-target-usb-2.conf:8: unknown key 'power-of' in [target usb-2]
warning: 3 mistakes in the configuration: the sections that hold them are skipped (see 'blkvault config check')"

rc=0
bv target run usb-1 "${opts[@]}" >"$T/out" 2>"$T/err" || rc=$?
assert_eq "$rc" 1 "target run with a job that has a mistake: exit status"
grep -q "^job a: snapshot [0-9a-f]\{8\}, 2.0 MiB new, verified$" "$T/out" || { cat "$T/out" "$T/err"; die "job a did not run"; }
assert_eq "$(tail -n1 "$T/out")" "target usb-1: 2 jobs, 1 failed, 2.0 MiB new; safe to unplug"
assert_eq "$(cat "$T/err")" "$mistakes
error: target usb-1: job b: not run: its section of the configuration has a mistake ($conf:9: unknown key 'sorce' in [job b])" \
    "what target run says about the mistakes"
grep -qx "target usb-1: 2 jobs, 1 failed, 2.0 MiB new; safe to unplug" "$T/notified" || die "on-failure of the run"

# job run of a good job runs; of the one with a mistake: refused, naming it
bv job run a "${opts[@]}" >"$T/out" 2>/dev/null || { cat "$T/out"; die "job run a with a mistake elsewhere"; }
assert_eq "$(tail -n1 "$T/out")" "job a: 1 targets, 0 failed"
expect_fail 1 "^error: job b is not run: its section has a mistake ($conf:9: unknown key 'sorce' in \[job b\])$" \
    bv job run b "${opts[@]}"

# the drive with a mistake in its section: not run, reported as a failed run
expect_fail 1 "^error: target usb-2: $T/etc/conf.d/50-target-usb-2.conf:8: unknown key 'power-of' in \[target usb-2\]$" \
    bv target run "$dev2" "${opts[@]}"
grep -qx "error: target usb-2: not run: its section of the configuration has a mistake" "$T/.err" || { cat "$T/.err"; die "usb-2's summary"; }

# status works, and says what is skipped
rc=0
bv status "${opts[@]::1}" >"$T/out" 2>"$T/err" || rc=$?
assert_eq "$rc" 0 "status with mistakes: exit status"
grep -qx "job b: skipped: its section has a mistake ($conf:9: unknown key 'sorce' in \[job b\])" "$T/out" || { cat "$T/out"; die "status: job b"; }
grep -qx "target usb-2: skipped: its section has a mistake ($T/etc/conf.d/50-target-usb-2.conf:8: unknown key 'power-of' in \[target usb-2\])" "$T/out" || { cat "$T/out"; die "status: usb-2"; }
grep -q "^job a ($T/a.img): last run .* on usb-1: ok; .*max-age 1w: ok$" "$T/out" || { cat "$T/out"; die "status: job a"; }

# the age alarm: job b never had a good backup; exit 11 and [global]'s on-failure runs
: > "$T/notified"
rc=0
bv status --check-age "${opts[@]::1}" >"$T/out" 2>"$T/err" || rc=$?
assert_eq "$rc" 11 "status --check-age with a mistake in the job in alarm"
assert_eq "$(cat "$T/out")" "age check: 2 jobs, 1 without a good backup within their max-age"
assert_eq "$(cat "$T/notified")" "job b: no good backup on any drive within its max-age of 1d (last good: never)" "the alarm's notification"
