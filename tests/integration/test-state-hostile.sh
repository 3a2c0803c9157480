#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The state files runs leave (BLKVAULT_STATE_DIR), damaged or written under a wrong clock (a
# red-team pass): `blkvault status` reads them without undefined behaviour (the suite runs with
# UBSan halting), and a last good backup dated in the future (the clock was set ahead during
# that run) does not silence the age alarm for years.
. "$SOURCE_ROOT/tests/lib.sh"

conf=$T/blkvault.conf
mkdir -p "$BLKVAULT_STATE_DIR"
cat > "$conf" <<CONF
[target usb-1]
uuid = 0b6c1234-0000-0000-0000-000000000001
key-file = $T/usb-1.key
[job j]
source = $T/src.img
targets = usb-1
max-age = 1d
CONF
state=$BLKVAULT_STATE_DIR/job-j@usb-1

# an error number that cannot be negated
printf 'last-run=1\nresult=failed\nstep=backup\nerror=-2147483648\nstatus=0\nlast-good=0\n' > "$state"
bv status --config="$conf" >"$T/out" 2>&1 || { cat "$T/out" >&2; die "status with error=-2147483648"; }
bv status --config="$conf" --json >"$T/out" 2>&1 || { cat "$T/out" >&2; die "status --json with error=-2147483648"; }

# one state file that does not read (a FIFO, too large) costs only what it describes: status
# warns, naming it, and judges the job by its other drives; the alarm still runs for every job
cat >> "$conf" <<CONF
[target usb-2]
uuid = 0b6c1234-0000-0000-0000-000000000002
key-file = $T/usb-2.key
CONF
sed -i 's/^targets = usb-1$/targets = usb-1, usb-2/' "$conf"
now=$(date +%s)
printf 'last-run=%s\nresult=ok\nlast-good=%s\n' "$now" "$now" > "$BLKVAULT_STATE_DIR/job-j@usb-2"
for kind in fifo large; do
    rm -f "$state"
    case $kind in
    fifo) mkfifo "$state" ;;
    large) head -c 100000 /dev/zero | tr '\0' x > "$state" ;;
    esac
    out=$(timeout 20 "$BLKVAULT" status --config="$conf" --check-age 2>"$T/err") || { cat "$T/err" >&2; die "status --check-age with a $kind state file"; }
    assert_eq "$out" "age check: 1 jobs, 0 without a good backup within their max-age"
    grep -q "^warning: cannot read the state of job j on usb-1 ('$state'): .*, ignoring$" "$T/err" ||
        { cat "$T/err" >&2; die "status did not name the $kind state file"; }
done
rm -f "$state" "$BLKVAULT_STATE_DIR/job-j@usb-2"

# a good backup recorded at 2099-01-01 by a clock set ahead, read today
printf 'last-run=4070944800\nresult=ok\nlast-good=4070944800\n' > "$state"
expect_fail 11 "^warning: job j: no good backup on any drive within its max-age of 1d" bv status --config="$conf" --check-age
assert_eq "$(cat "$T/.out")" "age check: 1 jobs, 1 without a good backup within their max-age"
# within a day ahead (a clock a little fast) still counts
printf 'last-run=%s\nresult=ok\nlast-good=%s\n' $(( $(date +%s) + 3600 )) $(( $(date +%s) + 3600 )) > "$state"
out=$(bv status --config="$conf" --check-age)
assert_eq "$out" "age check: 1 jobs, 0 without a good backup within their max-age"
echo ok
