#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A warning that saves data (issue 12): backing up a block device whose filesystem is mounted
# read-write warns that the image may be inconsistent and names the fix (a snapshot, or
# fsfreeze); so does a disk one of whose partitions is mounted read-write. A read-only mount and
# an unmounted device give no warning, and the backup of the read-only one is bit-exact. A user
# who may not read the device is told that it needs root or the disk group.
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd losetup partx mkfs.ext4 sfdisk sha256sum setpriv unshare
[ -e /dev/loop-control ] || skip "no loop devices"

mnt=$T/mnt
mkdir -p "$mnt"

repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
warning() { # warning DEVICE [HELD]: the exact warning for a filesystem on DEVICE (or HELD in it) on $mnt
    local what=
    [ -z "${2:-}" ] || what=" holds $2, which"
    echo "warning: '$1'$what is mounted read-write on '$mnt': the image may be inconsistent (the filesystem changes while it is read); back up an LVM or filesystem snapshot instead, or freeze it for the backup (fsfreeze --freeze '$mnt', then fsfreeze --unfreeze '$mnt')"
}

# --- a whole device with ext4 ---------------------------------------------------------------
truncate -s 64M "$T/ext4.img"
attach_loop dev "$T/ext4.img"
mkfs.ext4 -q -L bv-rw "$dev"
mount "$dev" "$mnt"
on_exit "umount '$mnt'"
head -c 1M /dev/urandom >"$mnt/file"
bv backup "$repo" "$dev" --name=rw >/dev/null 2>"$T/rw.err" || { cat "$T/rw.err" >&2; die "backup of a rw-mounted device failed"; }
grep -Fxq "$(warning "$dev")" "$T/rw.err" || { cat "$T/rw.err" >&2; die "no (or another) warning for a read-write mount"; }
assert_eq "$(grep -c '^warning:' "$T/rw.err")" 1 "warnings for one read-write mount"
# -q keeps the warning
bv backup "$repo" "$dev" --name=rw -q >/dev/null 2>"$T/rwq.err"
assert_eq "$(grep '^warning:' "$T/rwq.err")" "$(warning "$dev")" "the warning with -q"
# without /sys (a container; unshare -m with /sys unmounted) the mount is still found: the
# device's number is compared with the mounts' as it is. A slave namespace: where the machine's
# mounts are shared (scripts/test.sh), it follows the other tests' umounts, never keeping their
# filesystems (and devices) mounted meanwhile
unshare -m --propagation slave sh -c 'umount -l /sys && [ ! -e /sys/dev/block ] && exec "$@"' sh \
    "$BLKVAULT" backup "$repo" "$dev" --name=nosys >/dev/null 2>"$T/nosys.err" || { cat "$T/nosys.err" >&2; die "backup without /sys failed"; }
assert_eq "$(grep "^warning:" "$T/nosys.err")" "$(warning "$dev")" "the warning without /sys"

# read-only: no warning, and the image is the device bit for bit
mount -o remount,ro "$mnt"
bv backup "$repo" "$dev" --name=ro >/dev/null 2>"$T/ro.err"
grep -q '^warning:' "$T/ro.err" && { cat "$T/ro.err" >&2; die "a warning for a read-only mount"; }
bv restore "$repo" ro "$T/ro.out" -q
assert_eq "$(sha256sum <"$T/ro.out")" "$(sha256sum <"$dev")" "the backup of the read-only device differs"
umount "$mnt"
bv backup "$repo" "$dev" --name=unmounted >/dev/null 2>"$T/un.err"
grep -q '^warning:' "$T/un.err" && { cat "$T/un.err" >&2; die "a warning for an unmounted device"; }

# a user who may not read the device is told it needs root or the disk group (exit 9)
chmod 755 "$T"
mkdir "$T/nobody" && chown 65534:65534 "$T/nobody"
setpriv --reuid=65534 --regid=65534 --clear-groups "$BLKVAULT" init "$T/nobody/r" --encryption=none >/dev/null
expect_fail 9 "^error: cannot read '$dev': Permission denied (reading a block device needs root or the disk group)$" \
    setpriv --reuid=65534 --regid=65534 --clear-groups "$BLKVAULT" backup "$T/nobody/r" "$dev" --name=d

# --- a partition of the disk mounted read-write ----------------------------------------------
truncate -s 64M "$T/disk.img"
printf 'label: gpt\n,32M\n,\n' | sfdisk -q "$T/disk.img" >/dev/null
attach_loop disk "$T/disk.img"
loop_partition p2 "$disk" 2 "$T/p2"
mkfs.ext4 -q "$T/p2"
mount "$T/p2" "$mnt"
on_exit "umount '$mnt'"
bv backup "$repo" "$disk" --name=disk >/dev/null 2>"$T/disk.err"
assert_eq "$(cat "$T/disk.err" | grep '^warning:')" "$(warning "$disk" "/dev/$p2")" \
    "the warning for a mounted partition"
umount "$mnt"
echo ok
