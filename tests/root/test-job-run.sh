#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# `blkvault job run NAME`: the job alone (not the target's other jobs) goes to each attached
# target it names, restore-only targets left alone; with none attached it says so and exits 0;
# an unknown job is an error.
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd losetup mkfs.ext4
[ -e /dev/loop-control ] || skip "no loop devices"

conf=$T/etc/blkvault.conf
mkdir -p "$T/etc" "$T/mnt"
opts=(--config="$conf" --run-dir="$T/run")
randfile "$T/a.img" 2 job-a
randfile "$T/b.img" 3 job-b
devs=()
for n in 1 2; do
    loop_target "devs[$n]" "usb-$n" 300M "${opts[@]}"
done

cat > "$conf" <<EOF
[job a]
source = $T/a.img
targets = usb-1, usb-2
[job b]
source = $T/b.img
targets = usb-1
EOF

bv job run a "${opts[@]}" >"$T/out"
assert_eq "$(grep -c '^job a: snapshot [0-9a-f]\{8\}, 2.0 MiB new, verified$' "$T/out")" 2 "job a on both targets"
! grep -q '^job b' "$T/out" || die "job run a also ran job b"
grep -qx "target usb-1: 1 jobs, 0 failed, 2.0 MiB new; safe to unplug" "$T/out" || die "usb-1 summary"
grep -qx "target usb-2: 1 jobs, 0 failed, 2.0 MiB new; safe to unplug" "$T/out" || die "usb-2 summary"
assert_eq "$(tail -n1 "$T/out")" "job a: 2 targets, 0 failed" "job a's summary, the last line"
mount "${devs[1]}" "$T/mnt"
names=$(bv list "$T/mnt/blkvault" --key-file="$T/keys/usb-1.key" --json | python3 -c 'import json,sys; print(" ".join(s["name"] for s in json.load(sys.stdin)))')
umount "$T/mnt"
assert_eq "$names" "a" "snapshots on usb-1 after job run a"

# on a terminal: a progress line for each job's backup on each drive, cleared before the report
python3 "$SOURCE_ROOT/tests/onpty.py" "$T/run.tty" -- "$BLKVAULT" job run a "${opts[@]}" >"$T/out"
sed 's/\x1b\[K//g' "$T/run.tty" | tr '\r' '\n' | sed '/^$/d' > "$T/tty.lines"
for t in usb-1 usb-2; do
    grep -Eq "^backup of job a to $t [0-9.]+ (B|KiB|MiB) / [0-9.]+ (B|KiB|MiB) \([0-9]+%\)" "$T/tty.lines" ||
        { cat -A "$T/tty.lines"; die "job run showed no progress line for $t"; }
done
assert_eq "$(tail -n1 "$T/out")" "job a: 2 targets, 0 failed" "job run on a terminal"
python3 "$SOURCE_ROOT/tests/onpty.py" "$T/run.tty" -- "$BLKVAULT" target run usb-2 "${opts[@]}" >/dev/null
grep -Eq "backup of job a to usb-2 .*\(100%\)" "$T/run.tty" || { cat -A "$T/run.tty"; die "target run showed no progress"; }
python3 "$SOURCE_ROOT/tests/onpty.py" "$T/run.tty" -- "$BLKVAULT" target run usb-2 -q "${opts[@]}" >/dev/null
! grep -q "backup of job" "$T/run.tty" || die "target run -q showed progress"

# a state directory that cannot be written: a warning for each record, the run still succeeds
bv job run a "${opts[@]}" --state-dir="$T/a.img" >/dev/null 2>"$T/err"
assert_eq "$(cat "$T/err")" "warning: cannot record the run of job a in '$T/a.img': Not a directory
warning: cannot record the run of target usb-1 in '$T/a.img': Not a directory
warning: cannot record the run of job a in '$T/a.img': Not a directory
warning: cannot record the run of target usb-2 in '$T/a.img': Not a directory" "warnings of an unwritable state directory"

# a restore-only target is skipped, and named: it is attached, so "none is attached" would be
# wrong; nothing attached at all: said, exit 0
sed -i 's/^mode = backup$/mode = restore-only/' "$T/etc/conf.d/50-target-usb-1.conf"
assert_eq "$(bv job run b "${opts[@]}")" "job b: its attached targets are restore-only (usb-1); nothing done"
detach_loop "${devs[1]}" || die "cannot detach usb-1's loop device ${devs[1]}"
assert_eq "$(bv job run b "${opts[@]}")" "job b: none of its targets is attached; nothing done"
expect_fail 1 "^error: no job 'c' in the configuration$" bv job run c "${opts[@]}"
expect_fail 2 "^error: expected 'blkvault job run NAME' (see 'blkvault help job')$" bv job start a
