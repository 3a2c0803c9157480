#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A repository's .tmp-* names are anyone's on a stick: one that is not a regular file, or that
# cannot be deleted, is left alone and gc goes on (docs/LIFECYCLE.md, "Temporary files").
# Mounted nodev as target run mounts a drive, a device node named .tmp-* does not even open
# (EACCES), and an immutable .tmp-* file (the flag travels with the filesystem) does not unlink
# (EPERM): either made every gc (and prune, and a backup's collection for room) fail after its
# work, blaming the folder. gc must exit 0, delete the ordinary leftovers, leave these, and the
# snapshot must still restore.
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd mkfs.ext4 chattr mknod

mount_small_fs "$T/mnt" 64M
mount -o remount,nodev "$T/mnt" || die "cannot remount $T/mnt nodev"
repo=$T/mnt/repo
bv init "$repo" --encryption=none >/dev/null
randfile "$T/x" 2 gc-tmp-hostile
bv backup "$repo" "$T/x" --name=x -q
mknod "$repo/index/.tmp-0123456789abcdef" c 1 3
mknod "$repo/packs/.tmp-1123456789abcdef" b 7 0
mkfifo "$repo/snapshots/.tmp-2123456789abcdef"
head -c 4096 /dev/zero >"$repo/packs/.tmp-3123456789abcdef"
chattr +i "$repo/packs/.tmp-3123456789abcdef"
on_exit "chattr -i '$repo/packs/.tmp-3123456789abcdef'"
head -c 4096 /dev/zero >"$repo/index/.tmp-4123456789abcdef"

bv gc "$repo" >"$T/gc.out" 2>&1 || { cat "$T/gc.out"; die "gc failed on .tmp-* entries it should leave alone"; }
grep -qx "deleted 1 temporary files interrupted writers left, 4.0 KiB" "$T/gc.out" || { cat "$T/gc.out"; die "gc's line"; }
[ -c "$repo/index/.tmp-0123456789abcdef" ] && [ -b "$repo/packs/.tmp-1123456789abcdef" ] &&
    [ -p "$repo/snapshots/.tmp-2123456789abcdef" ] || die "a .tmp-* that is not a regular file was removed"
[ -f "$repo/packs/.tmp-3123456789abcdef" ] || die "the immutable file went"
[ ! -e "$repo/index/.tmp-4123456789abcdef" ] || die "an ordinary leftover is left"
bv prune "$repo" --keep-last=1 >/dev/null 2>&1 || die "prune (its gc) failed"
bv restore "$repo" x "$T/x.out" >/dev/null
assert_same "$T/x" "$T/x.out"
echo ok
