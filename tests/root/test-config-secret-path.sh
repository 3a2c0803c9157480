#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A secret file is only as safe as the directories on the way to it (issue 21, finding 5, and
# the attack after its fixes): the key file was checked with stat() when the configuration was
# read and opened by path when the drive ran, so a key file reached through a directory that
# another user can write could be swapped in between, for a key of theirs (whose repository on
# a forged stick then gets the backup) or for nothing. As sshd's StrictModes does, every
# directory and symbolic link on the way to a secret file, as written and as resolved, must be
# owned by root (or the user running blkvault) and not writable by group or others (a sticky
# directory such as /tmp excepted); otherwise `config check` and the drive's run refuse,
# naming the directory.
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd losetup mkfs.ext4
[ -e /dev/loop-control ] || skip "no loop devices"

etc=$T/etc
conf=$etc/blkvault.conf
mkdir -p "$etc/conf.d"
: >"$conf"
opts=(--config="$conf" --run-dir="$T/run" --state-dir="$T/state")
loop_target dev usb 300M --config="$conf"
key=$T/keys/usb.key
tconf=$etc/conf.d/50-target-usb.conf
tline=$(grep -n '^key-file' "$tconf" | cut -d: -f1) # the mistake is at the key-file line
bv config check --config="$conf" >/dev/null || die "the configuration as root wrote it was refused"
set_key() { sed -i "s|^key-file = .*|key-file = $1|" "$tconf"; }

# the key in a directory nobody owns
mkdir -m 0700 "$T/nobodys"
cp -p "$key" "$T/nobodys/usb.key"
chown nobody "$T/nobodys"
set_key "$T/nobodys/usb.key"
why="'$T/nobodys/usb.key': its directory '$T/nobodys' is owned by nobody, not root (chown root)"
expect_fail 1 "^$tconf:$tline: $why$" bv config check --config="$conf"
expect_fail 1 "^error: target usb: $tconf:$tline: $why$" bv target run "$dev" "${opts[@]}"

# in a directory root owns that others can write
mkdir -m 0777 "$T/open"
chmod 0777 "$T/open"
cp -p "$key" "$T/open/usb.key"
set_key "$T/open/usb.key"
expect_fail 1 "^$tconf:$tline: '$T/open/usb.key': its directory '$T/open' has mode 0777: writable by group or others (chmod go-w)$" \
    bv config check --config="$conf"

# through a root-owned link in a safe directory to a file in the open one: the resolved way counts
mkdir -m 0755 "$T/safe"
ln -s "$T/open/usb.key" "$T/safe/usb.key"
set_key "$T/safe/usb.key"
expect_fail 1 "^$tconf:$tline: '$T/safe/usb.key': its directory '$T/open' has mode 0777: writable by group or others (chmod go-w)$" \
    bv config check --config="$conf"

# through a link nobody owns (in a sticky directory, where nobody may replace their own link)
mkdir -m 1777 "$T/sticky"
chmod 1777 "$T/sticky"
ln -s "$key" "$T/sticky/usb.key"
chown -h nobody "$T/sticky/usb.key"
set_key "$T/sticky/usb.key"
expect_fail 1 "^$tconf:$tline: '$T/sticky/usb.key': it is reached through '$T/sticky/usb.key', a symbolic link owned by nobody, not root$" \
    bv config check --config="$conf"

# a root-owned file in the sticky directory, or a root-owned link there to the safe key: fine
chown -h root "$T/sticky/usb.key"
bv config check --config="$conf" >/dev/null || die "a root-owned link in a sticky directory was refused"
rm "$T/sticky/usb.key"
cp -p "$key" "$T/sticky/usb.key"
bv config check --config="$conf" >/dev/null || die "a root-owned key in a sticky directory was refused"

# and the key where it was: the drive runs
set_key "$key"
bv config check --config="$conf" >/dev/null || die "the key in its own directory was refused"
echo ok
