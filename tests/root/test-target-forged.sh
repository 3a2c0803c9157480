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
truncate -s 300M "$T/real.img" "$T/forged.img"
attach_loop real "$T/real.img"
bv target format "$real" --name=usb-1 --no-luks --key-dir="$T/keys" "${opts[@]}" >/dev/null
uuid=$(blkid -s UUID -o value "$real")
losetup -d "$real"
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
echo ok
