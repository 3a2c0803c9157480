#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The appliance's units and udev rule: blkvault-target@.service, blkvault-job@.service and the
# age alarm (blkvault-alarm.service and .timer) pass `systemd-analyze verify` without a warning
# and carry their hardening; `udevadm test` of
# udev/80-blkvault.rules on loop devices: a device with a filesystem UUID (a registered target
# or not: the service tells them apart, and exits 0 for an unregistered one) pulls in
# blkvault-target@KERNELNAME.service, a device without one pulls in nothing.
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd systemd-analyze udevadm losetup mkfs.ext4
[ -e /dev/loop-control ] || skip "no loop devices"
units=$BUILD_ROOT/systemd

mkdir -p "$T/units"
for u in blkvault-target@.service blkvault-job@.service; do
    [ -f "$units/$u" ] || die "$u not built in $units"
    # the installed binary's path, as verify checks that it is executable
    sed "s|^ExecStart=[^ ]*/blkvault |ExecStart=$BLKVAULT |" "$units/$u" > "$T/units/$u"
    for key in ProtectSystem=strict PrivateNetwork=yes NoNewPrivileges=yes DevicePolicy=closed \
               "CapabilityBoundingSet=CAP_SYS_ADMIN CAP_DAC_OVERRIDE CAP_DAC_READ_SEARCH CAP_FOWNER CAP_CHOWN CAP_IPC_LOCK CAP_SYS_RESOURCE"; do
        grep -qx "$key" "$units/$u" || die "$u lacks $key"
    done
done
grep -qx 'BindsTo=dev-%i.device' "$units/blkvault-target@.service" || die "the target service is not bound to its device"
grep -qx 'ExecStart=.*/blkvault target run /dev/%I' "$units/blkvault-target@.service" || die "target service ExecStart"
grep -qx 'ExecStart=.*/blkvault job run %i' "$units/blkvault-job@.service" || die "job service ExecStart"
# the age alarm: a daily timer, enabled through timers.target, starts status --check-age
u=blkvault-alarm.service
timer=$SOURCE_ROOT/systemd/blkvault-alarm.timer
[ -f "$units/$u" ] || die "$u is not built in $units"
sed "s|^ExecStart=[^ ]*/blkvault |ExecStart=$BLKVAULT |" "$units/$u" > "$T/units/$u"
cp "$timer" "$T/units/"
grep -qx 'ExecStart=.*/blkvault status --check-age' "$units/$u" || die "alarm service ExecStart"
for key in ProtectSystem=strict NoNewPrivileges=yes StateDirectory=blkvault PrivateDevices=yes; do
    grep -qx "$key" "$units/$u" || die "$u lacks $key"
done
for key in OnCalendar=daily Persistent=yes WantedBy=timers.target; do
    grep -qx "$key" "$timer" || die "blkvault-alarm.timer lacks $key"
done
for u in blkvault-target@.service blkvault-job@.service; do
    grep -qx StateDirectory=blkvault "$units/$u" || die "$u cannot write the state of its runs"
done
rc=0
(cd "$T/units" && systemd-analyze verify --man=no "$T/units/blkvault-target@sda.service" \
    "$T/units/blkvault-job@vm1.service" "$T/units/blkvault-alarm.service" "$T/units/blkvault-alarm.timer") >"$T/verify.out" 2>&1 || rc=$?
[ "$rc" = 0 ] && [ ! -s "$T/verify.out" ] || { cat "$T/verify.out" >&2; die "systemd-analyze verify complained"; }

# udevadm test reads rules from /run/udev/rules.d too: put the rule there for the test only
[ ! -e /run/udev ] && made_run_udev=1 || made_run_udev=0
[ ! -e /run/udev/rules.d/80-blkvault.rules ] || skip "/run/udev/rules.d/80-blkvault.rules exists already"
mkdir -p /run/udev/rules.d
cp "$SOURCE_ROOT/udev/80-blkvault.rules" /run/udev/rules.d/
on_exit "rm -f /run/udev/rules.d/80-blkvault.rules; [ $made_run_udev = 0 ] || rm -rf /run/udev"
truncate -s 64M "$T/fs.img" "$T/raw.img"
mkfs.ext4 -q "$T/fs.img"
attach_loop fs "$T/fs.img"
attach_loop raw "$T/raw.img"
uuid=$(blkid -s UUID -o value "$fs")
udevadm test --action=add "/sys/class/block/${fs#/dev/}" >"$T/fs.out" 2>&1 || { cat "$T/fs.out" >&2; die "udevadm test failed"; }
grep -q "^Reading rules file: /run/udev/rules.d/80-blkvault.rules$" "$T/fs.out" || die "udevadm test did not read the rule"
grep -qx "SYSTEMD_WANTS=blkvault-target@${fs#/dev/}.service" "$T/fs.out" || { grep SYSTEMD "$T/fs.out" >&2; die "a device with a filesystem UUID did not pull in its target service"; }
udevadm test --action=add "/sys/class/block/${raw#/dev/}" >"$T/raw.out" 2>&1 || { cat "$T/raw.out" >&2; die "udevadm test failed"; }
! grep -q "blkvault-target@" "$T/raw.out" || die "a device without a filesystem pulled in a target service"
# the service of an unregistered drive: exit 0 at once, one line
out=$(bv target run "$fs" --config="$T/none.conf")
assert_eq "$out" "debug: '$fs' (UUID $uuid) is not a registered target, ignoring"

# the generator: a timer per scheduled job, wanted by timers.target, that verifies with its
# service; the socket of every export, wanted by sockets.target (issue 21, finding 6: nothing
# made it start); a configuration with mistakes makes none
ln -s "$BLKVAULT" "$T/blkvault-generator"
cat > "$T/gen.conf" <<'EOF'
[job vm1]
source = /dev/vg0/vm1
schedule = Mon..Fri *-*-* 02:30:00
[job adhoc]
source = /srv/img
[export disk]
repository = /srv/repo
[remote offsite]
location = s3://bv-offsite/site
EOF
mkdir -p "$T/gen" "$T/gen-bad"
BLKVAULT_CONFIG=$T/gen.conf "$T/blkvault-generator" "$T/gen" "$T/gen-early" "$T/gen-late"
assert_eq "$(cd "$T/gen" && find . | sort | tr '\n' ' ')" ". ./blkvault-job@vm1.timer ./sockets.target.wants ./sockets.target.wants/blkvault-nbd@disk.socket ./timers.target.wants ./timers.target.wants/blkvault-copy@offsite.timer ./timers.target.wants/blkvault-job@vm1.timer " "generated files"
# a remote's copy: its retry timer (the installed template) wanted by timers.target
case $(readlink "$T/gen/timers.target.wants/blkvault-copy@offsite.timer") in
/*/blkvault-copy@.timer) ;;
*) die "the remote's timer links to '$(readlink "$T/gen/timers.target.wants/blkvault-copy@offsite.timer")', not the template" ;;
esac
case $(readlink "$T/gen/sockets.target.wants/blkvault-nbd@disk.socket") in
/*/blkvault-nbd@.socket) ;;
*) die "the export's socket links to '$(readlink "$T/gen/sockets.target.wants/blkvault-nbd@disk.socket")', not the template" ;;
esac
assert_eq "$(readlink "$T/gen/timers.target.wants/blkvault-job@vm1.timer")" "../blkvault-job@vm1.timer"
grep -qx "OnCalendar=Mon..Fri \*-\*-\* 02:30:00" "$T/gen/blkvault-job@vm1.timer" || die "timer schedule"
cp "$T/gen/blkvault-job@vm1.timer" "$T/units/"
rc=0
(cd "$T/units" && systemd-analyze verify --man=no "$T/units/blkvault-job@vm1.timer") >"$T/verify.out" 2>&1 || rc=$?
[ "$rc" = 0 ] && [ ! -s "$T/verify.out" ] || { cat "$T/verify.out" >&2; die "systemd-analyze verify of the generated timer complained"; }
printf '[job x]\nschedule = daily\n[export y]\nsnapshot = latest\n[remote z]\nregion = x\n' > "$T/gen-bad.conf"
BLKVAULT_CONFIG=$T/gen-bad.conf "$T/blkvault-generator" "$T/gen-bad" "$T/e" "$T/l" 2>"$T/gen.err"
assert_eq "$(cat "$T/gen.err")" "blkvault-generator: $T/gen-bad.conf:1: [job x] has no source (set source = PATH or command = COMMAND)
blkvault-generator: $T/gen-bad.conf:3: [export y] has no repository
blkvault-generator: $T/gen-bad.conf:5: [remote z] has no location (s3://BUCKET[/PREFIX] or a directory)"
assert_eq "$(ls -A "$T/gen-bad")" "" "units made from sections with mistakes"
