#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A drive that only pretends to be a registered --no-luks target (a red-team pass): its
# filesystem carries the registered UUID (mkfs -U; anyone who held the real drive can read it)
# and an unencrypted repository at the registered path. Plugged in, it received a plaintext
# backup of every job. A target's repository is always encrypted with its key file (target
# format makes it so); one that is not is refused before any job writes to it.
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd losetup mkfs.ext4 blkid
[ -e /dev/loop-control ] || skip "no loop devices"

conf=$T/etc/blkvault.conf
mkdir -p "$T/etc" "$T/mnt"
opts=(--config="$conf" --run-dir="$T/run")
randfile "$T/secret.img" 1 forged-secret
loop_target real usb-1 300M "${opts[@]}"
truncate -s 300M "$T/forged.img"
uuid=$(blkid -s UUID -o value "$real")
detach_loop "$real"
printf '[job secret]\nsource = %s\ntargets = usb-1\n' "$T/secret.img" > "$conf"

# the forged drive
mkfs.ext4 -q -U "$uuid" "$T/forged.img"
attach_loop forged "$T/forged.img"
mount "$forged" "$T/mnt"
bv init "$T/mnt/blkvault" --encryption=none >/dev/null
umount "$T/mnt"
expect_fail 3 "^error: target usb-1: the repository 'blkvault' on the drive is not encrypted, so it is not the one registered with key file '$T/keys/usb-1.key' (a drive that only pretends to be usb-1?); nothing was written$" \
    bv target run usb-1 "${opts[@]}"
mount -o ro "$forged" "$T/mnt"
assert_eq "$(ls -A "$T/mnt/blkvault/snapshots")" "" "snapshots on the forged drive"
umount "$T/mnt"
# the same drive with an encrypted repository under another key: refused before anything is
# written, on the drive too (no lock taken, no lease)
mount "$forged" "$T/mnt"
rm -rf "$T/mnt/blkvault"
head -c 32 /dev/urandom > "$T/other.key"
bv init "$T/mnt/blkvault" --key-file="$T/other.key" >/dev/null
umount "$T/mnt"
expect_fail 3 "^error: target usb-1: the repository 'blkvault' on the drive does not open with key file '$T/keys/usb-1.key' (a drive that only pretends to be usb-1?); nothing was written$" \
    bv target run usb-1 "${opts[@]}"
mount -o ro "$forged" "$T/mnt"
[ ! -e "$T/mnt/blkvault/leases" ] || die "the refused run made leases/ on the forged drive"
assert_eq "$(ls -A "$T/mnt/blkvault/snapshots")" "" "snapshots on the forged drive"
umount "$T/mnt"
# the drive's 'blkvault' a symbolic link to a host repository that opens with the same key file:
# nothing on the drive may lead off it, so it is refused before any lock, lease or backup, in
# the host repository too
bv init "$T/host" --key-file="$T/keys/usb-1.key" >/dev/null
mount "$forged" "$T/mnt"
rm -rf "$T/mnt/blkvault"
ln -s "$T/host" "$T/mnt/blkvault"
umount "$T/mnt"
expect_fail 1 "^error: target usb-1: the repository 'blkvault' on the drive is reached through a symbolic link, which may lead off the drive (refused); nothing was written$" \
    bv target run usb-1 "${opts[@]}"
[ ! -e "$T/host/leases" ] || die "the refused run made leases/ in the host repository"
assert_eq "$(ls -A "$T/host/snapshots")" "" "snapshots in the host repository"
assert_eq "$(ls -A "$T/host/locks")" "" "locks taken in the host repository"


# the forged drive as ext2 (mkfs.ext2 -U): a stick must not choose which filesystem driver parses
# it (ext2 mounted by the ext4 driver without a journal, or a module loaded on demand): only what
# target format makes is mounted (a red-team finding: it was mounted read-write)
mkfs.ext2 -q -F -U "$uuid" "$forged"
expect_fail 1 "^error: target usb-1: its filesystem is not one that target format makes (ext4, xfs or btrfs): refused, nothing was mounted" \
    bv target run usb-1 "${opts[@]}"
! grep -q " $T/mnt " /proc/self/mounts || die "the ext2 stick was left mounted"

# the real drive, but the host lost the target's key file: said so, the drive is not blamed
losetup -d "$forged"
attach_loop real "$T/usb-1.img"
mv "$T/keys/usb-1.key" "$T/keys/moved"
expect_fail 1 "^error: target usb-1: cannot read its key file '$T/keys/usb-1.key' (No such file or directory); nothing was written$" \
    bv target run usb-1 "${opts[@]}"
mv "$T/keys/moved" "$T/keys/usb-1.key"

# the real drive again, with its job's state file damaged (a FIFO): the run replaces it (it warned
# "cannot record" at every run, so status never saw another good backup on this drive)
mkdir -p "$BLKVAULT_STATE_DIR"
rm -f "$BLKVAULT_STATE_DIR/job-secret@usb-1" && mkfifo "$BLKVAULT_STATE_DIR/job-secret@usb-1"
bv target run usb-1 "${opts[@]}" >"$T/run.out" 2>"$T/run.err" || { cat "$T/run.out" "$T/run.err" >&2; die "the run on the real drive"; }
[ ! -s "$T/run.err" ] || { cat "$T/run.err" >&2; die "the run warned"; }
[ -f "$BLKVAULT_STATE_DIR/job-secret@usb-1" ] || die "the damaged state file was not replaced"
out=$(bv status --config="$conf" --check-age 2>"$T/status.err")
assert_eq "$out" "age check: 1 jobs, 0 without a good backup within their max-age"
[ ! -s "$T/status.err" ] || { cat "$T/status.err" >&2; die "status warned"; }
echo ok
