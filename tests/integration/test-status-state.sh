#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# `blkvault status` over state files it did not write as they are: error=N beyond any errno
# (error=-2147483648 negated INT_MIN, undefined, and printed "Unknown error -2147483648") keeps
# what result= said, a failed run with Input/output error.
. "$SOURCE_ROOT/tests/lib.sh"

conf=$T/blkvault.conf
cat > "$conf" <<'EOF2'
[target usb-1]
uuid = 0B6C1B2A-1234-4321-ABCD-0123456789AB
key-file = /etc/blkvault/keys/usb-1.key
[job vm1]
source = /dev/vg0/vm1
targets = usb-1
max-age = 7d
EOF2
mkdir -p "$BLKVAULT_STATE_DIR"
for e in -2147483648 2147483648 99999999999999999999 4096 -4096 x ''; do
        printf 'last-run=1700000000\nresult=failed\nstep=backup\nerror=%s\n' "$e" >"$BLKVAULT_STATE_DIR/job-vm1@usb-1"
        rc=0; bv status --config="$conf" >"$T/out" 2>"$T/err" || rc=$?
        assert_eq "$rc" 0 "exit status of status with error=$e"
        [ ! -s "$T/err" ] || { cat "$T/err"; die "status with error=$e wrote to stderr"; }
        assert_eq "$(grep '^job vm1 ' "$T/out")" \
                "job vm1 (/dev/vg0/vm1): last run 2023-11-14T22:13:20Z on usb-1: backup failed: Input/output error; no good backup; next run not scheduled; max-age 1w: ALARM" \
                "status of a failed run with error=$e"
done
# a real errno is still read as written
printf 'last-run=1700000000\nresult=failed\nstep=backup\nerror=28\n' >"$BLKVAULT_STATE_DIR/job-vm1@usb-1"
assert_eq "$(bv status --config="$conf" | grep '^job vm1 ')" \
        "job vm1 (/dev/vg0/vm1): last run 2023-11-14T22:13:20Z on usb-1: backup failed: No space left on device; no good backup; next run not scheduled; max-age 1w: ALARM" \
        "status of a run that failed with ENOSPC"
