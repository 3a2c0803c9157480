#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# restore's destinations (issue 12): '-' writes the image to standard output (compared by hash),
# an existing file is refused unless --force (then replaced whole), a device smaller than the
# image is refused with both sizes before anything is written, and one that holds a filesystem or
# a partition table is refused unless --force, naming what is there.
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd losetup openssl sha256sum mkfs.ext4 blkid e2fsck sfdisk

repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
randfile "$T/img" 6 restore-dest
truncate -s 8M "$T/img"   # a hole at the end
bv backup "$repo" "$T/img" --name=img -q >/dev/null

# standard output, through a pipe and into a file
assert_eq "$(bv restore "$repo" img@latest - -q | sha256sum)" "$(sha256sum <"$T/img")" "restore to stdout"
bv restore "$repo" img@latest - -q >"$T/out.stdout" 2>"$T/stdout.err"
assert_same "$T/img" "$T/out.stdout"
# every byte went to the pipe, holes too: all of the image is written
grep -Eqx "restored snapshot [0-9a-f]{8} to '-': 8\.0 MiB image, 8\.0 MiB written, in [0-9]+\.[0-9] s" "$T/stdout.err" ||
    { cat "$T/stdout.err" >&2; die "restore to stdout reports another size written"; }
expect_fail 2 "^error: --json and the destination '-' would both use standard output$" bv restore "$repo" img@latest - --json

# an existing file: refused, untouched; --force replaces it
echo precious >"$T/exists"
expect_fail 1 "^error: '$T/exists' exists: restore writes a new file (use --force to replace it)$" \
    bv restore "$repo" img@latest "$T/exists"
assert_eq "$(cat "$T/exists")" precious "a refused restore changed the file"
bv restore "$repo" img@latest "$T/exists" --force -q >/dev/null
assert_same "$T/img" "$T/exists"
assert_eq "$(ls "$T" | grep -c blkvault-)" 0 "temporary files left beside DEST"

# a device smaller than the image: refused before anything is written, both sizes named
truncate -s 4M "$T/small.img"
printf 'untouched' | dd of="$T/small.img" conv=notrunc status=none
attach_loop dev "$T/small.img"
expect_fail 8 "^error: '$dev' is too small for snapshot [0-9a-f]\{8\}: the device has 4194304 bytes (4.0 MiB), the image 8388608 bytes (8.0 MiB); nothing was written$" \
    bv restore "$repo" img@latest "$dev"
assert_eq "$(head -c 9 "$dev")" untouched "the small device was written"
# a file on a filesystem too small for the data: exit 8 (too small), not 6 (the repository is
# full), with the sizes, and nothing left behind
mkdir "$T/tiny"
mount -t tmpfs -o size=2M tmpfs "$T/tiny"
on_exit "umount '$T/tiny'"
expect_fail 8 "^error: the filesystem of '$T/tiny/out' is full: snapshot [0-9a-f]\{8\} has 6291456 bytes (6.0 MiB) of data (image 8.0 MiB); free space there or restore elsewhere; nothing was left behind$" \
    bv restore "$repo" img@latest "$T/tiny/out"
assert_eq "$(ls "$T/tiny")" "" "a restore that filled its filesystem left a file"
umount "$T/tiny"
# a device that holds a filesystem (issue 21, finding 4): refused without --force, naming what is
# there, the filesystem untouched; --force restores over it
truncate -s 8M "$T/fs.img"
mkfs.ext4 -q -F -U 5b1a2c3d-0000-4000-8000-00000000f00d "$T/fs.img"
attach_loop fsdev "$T/fs.img"
sum=$(sha256sum <"$fsdev")
expect_fail 1 "^error: '$fsdev' holds ext4 (UUID 5b1a2c3d-0000-4000-8000-00000000f00d); refusing to restore over it (--force overwrites it)$" \
    bv restore "$repo" img@latest "$fsdev"
assert_eq "$(sha256sum <"$fsdev")" "$sum" "a refused restore changed the device"
assert_eq "$(blkid -o value -s TYPE "$fsdev")" ext4 "the filesystem after a refused restore"
e2fsck -n -f "$fsdev" >/dev/null 2>&1 || die "the ext4 on $fsdev does not check clean after a refused restore"
# mounted: in use, whatever --force says (exit 7), and said before what is on it
mkdir -p "$T/fsmnt"
mount -o ro "$fsdev" "$T/fsmnt"
expect_fail 7 "^error: '$fsdev' is in use: mounted on $T/fsmnt; nothing was written$" \
    bv restore "$repo" img@latest "$fsdev"
expect_fail 7 "^error: '$fsdev' is in use" bv restore "$repo" img@latest "$fsdev" --force
umount "$T/fsmnt"
bv restore "$repo" img@latest "$fsdev" --force -q >/dev/null
# on the device itself, through its backing file: a --force that replaced the /dev node with a
# regular file (written beside it, renamed over it, as for a file) left the disk as it was, and
# a cmp through the node's path compared that file
[ -b "$fsdev" ] || { rm -f "$fsdev"; die "restore --force replaced the device node $fsdev with a file"; }
cmp -n "$(stat -c %s "$T/img")" "$T/img" "$T/fs.img" || die "the restore with --force differs"
# a partition table is named as such
truncate -s 8M "$T/pt.img"
printf 'label: gpt\n' | sfdisk -q "$T/pt.img" >/dev/null 2>&1 || die "sfdisk failed"
attach_loop ptdev "$T/pt.img"
expect_fail 1 "^error: '$ptdev' holds a gpt partition table; refusing to restore over it (--force overwrites it)$" \
    bv restore "$repo" img@latest "$ptdev"
# a large enough device is written
truncate -s 8M "$T/big.img"
attach_loop dev2 "$T/big.img"
bv restore "$repo" img@latest "$dev2" -q >/dev/null
cmp "$T/img" "$dev2" || die "the device restore differs"
echo ok
