#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# --compare-with on loop-mounted btrfs and XFS: the previous version of an image is kept as a
# reflink copy (cp --reflink=always --preserve=timestamps), or in a btrfs snapshot; the next
# backup reads only the extents the two no longer share (FIEMAP), takes the rest from the last
# snapshot, and restores bit-exact. A copy that is not the version the snapshot read (its mtime
# differs) is not trusted: everything is read, with the reason. A periodic whole read checks the
# map. A --used-only snapshot is never a parent (its free blocks were not read). tmpfs cannot map
# extents: an error that says so.
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd losetup mkfs.xfs mkfs.btrfs btrfs python3

MIB=1048576
repo=$T/repo
mnt=$T/mnt
mkdir -p "$mnt"
bv init "$repo" --encryption=none >/dev/null

json_get() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2], ""))' "$1" "$2"; }

# restore_check SNAPSHOT FILE
restore_check() {
    rm -f "$T/got"
    bv restore "$repo" "$1" "$T/got" >/dev/null
    assert_same "$2" "$T/got"
}

# modify FILE SEED: writes 64 KiB at 5 MiB and 4 KiB at 20 MiB (fsynced), as a VM would
modify() {
    randfile "$T/patch" 1 "patch-$2"
    dd if="$T/patch" of="$1" bs=64k count=1 seek=80 conv=notrunc,fsync status=none
    dd if="$T/patch" of="$1" bs=4k count=1 seek=5120 conv=notrunc,fsync status=none
}

# scenario FS DIR: backs up DIR/img, keeps DIR/img.prev, modifies img, backs up with --compare-with
scenario() {
    local fs=$1 dir=$2 name="vm-$1"
    randfile "$dir/img" 32 "compare-$fs"
    truncate -s 48M "$dir/img" # a hole at the end, never read
    bv backup "$repo" "$dir/img" --name="$name" --json -q >"$T/$fs-1.json"
    local b1
    b1=$(json_get "$T/$fs-1.json" snapshot)
    cp --reflink=always --preserve=timestamps "$dir/img" "$dir/img.prev"
    modify "$dir/img" "$fs"
    bv backup "$repo" "$dir/img" --name="$name" --compare-with="$dir/img.prev" --json -q >"$T/$fs-2.json" \
        2>"$T/$fs-2.err"
    [ ! -s "$T/$fs-2.err" ] || { cat "$T/$fs-2.err" >&2; die "$fs: backup 2 complained"; }
    local read2
    read2=$(json_get "$T/$fs-2.json" bytes_read)
    assert_eq "$(json_get "$T/$fs-2.json" changed_from)" "$b1" "$fs: backup 2's parent"
    [ "$read2" -ge $((68 * 1024)) ] && [ "$read2" -le $((68 * 1024 + 4 * MIB)) ] ||
        die "$fs: backup 2 read $read2 bytes, expected the 68 KiB written plus at most a chunk at each edge"
    echo "$fs: --compare-with read $read2 bytes of a 48 MiB image (32 MiB of data, 68 KiB changed)"
    restore_check "$(json_get "$T/$fs-2.json" snapshot)" "$dir/img"

    # a copy whose mtime is not the one the last snapshot recorded: everything is read
    cp --reflink=always "$dir/img" "$dir/img.new"
    touch -d '2001-01-01' "$dir/img.new"
    bv backup "$repo" "$dir/img" --name="$name" --compare-with="$dir/img.new" --force-read --json -q \
        >"$T/$fs-3.json" 2>"$T/$fs-3.err"
    local why="'$dir/img.new' is not the version snapshot $(json_get "$T/$fs-2.json" snapshot | cut -c1-8) read"
    why="$why (its size or mtime differs: keep it with cp --reflink=always --preserve=timestamps, or in a btrfs snapshot)"
    assert_eq "$(json_get "$T/$fs-3.json" read_whole_because)" "$why"
    grep -qxF "warning: '$dir/img.new' not compared with, read everything: $why" "$T/$fs-3.err" ||
        { cat "$T/$fs-3.err" >&2; die "$fs: no warning for a copy of another version"; }
    assert_eq "$(json_get "$T/$fs-3.json" bytes_read)" $((32 * MIB)) "$fs: a whole read"
    restore_check "$(json_get "$T/$fs-3.json" snapshot)" "$dir/img"

    # unchanged since backup 3, compared with a fresh copy: not read, and no note about io_uring
    # (a --compare-with source reads with pread by design, and here reads nothing)
    cp --reflink=always --preserve=timestamps "$dir/img" "$dir/img.prev"
    bv backup "$repo" "$dir/img" --name="$name" --compare-with="$dir/img.prev" >"$T/$fs-u.out" 2>&1
    grep -qxF "unchanged since snapshot $(json_get "$T/$fs-3.json" snapshot | cut -c1-8): not read (--force-read reads it)" \
        "$T/$fs-u.out" || { cat "$T/$fs-u.out" >&2; die "$fs: an unchanged image was not reported unchanged"; }
    ! grep -q io_uring "$T/$fs-u.out" || { cat "$T/$fs-u.out" >&2; die "$fs: a note about io_uring"; }
    rm -f "$dir/img.prev" "$dir/img.new"
}

# mount_fs FS: a fresh filesystem of kind FS on a loop device at $mnt
mount_fs() {
    truncate -s 512M "$T/$1.fs"
    "mkfs.$1" -q "$T/$1.fs" >/dev/null
    attach_loop LOOP "$T/$1.fs"
    mount "$LOOP" "$mnt"
}
umount_fs() { umount "$mnt"; detach_loop "$LOOP"; }
on_exit 'mountpoint -q "$mnt" && umount "$mnt"'

mount_fs xfs
scenario xfs "$mnt"
umount_fs

mount_fs btrfs
scenario btrfs "$mnt"
# a btrfs snapshot keeps the previous version (same mtime): a read-only snapshot after backup 1
btrfs -q subvolume create "$mnt/sub"
randfile "$mnt/sub/img" 32 compare-subvol
bv backup "$repo" "$mnt/sub/img" --name=vm-sub --json -q >"$T/sub-1.json"
btrfs -q subvolume snapshot -r "$mnt/sub" "$mnt/sub.1"
modify "$mnt/sub/img" sub-1
bv backup "$repo" "$mnt/sub/img" --name=vm-sub --compare-with="$mnt/sub.1/img" --json -q >"$T/sub-2.json"
read2=$(json_get "$T/sub-2.json" bytes_read)
assert_eq "$(json_get "$T/sub-2.json" changed_from)" "$(json_get "$T/sub-1.json" snapshot)" "btrfs snapshot: parent"
[ "$read2" -le $((68 * 1024 + 4 * MIB)) ] || die "btrfs snapshot: backup 2 read $read2 bytes"
echo "btrfs snapshot: --compare-with read $read2 bytes"
restore_check "$(json_get "$T/sub-2.json" snapshot)" "$mnt/sub/img"
# the periodic whole read checks the map against a snapshot kept after backup 2: nothing wrong
btrfs -q subvolume snapshot -r "$mnt/sub" "$mnt/sub.2"
modify "$mnt/sub/img" sub-2
bv backup "$repo" "$mnt/sub/img" --name=vm-sub --compare-with="$mnt/sub.2/img" --full-read-every=2 --json -q \
    >"$T/sub-3.json"
assert_eq "$(json_get "$T/sub-3.json" read_whole_because)" "a whole read every 2 backups (--full-read-every)"
assert_eq "$(json_get "$T/sub-3.json" bytes_map_wrong)" 0 "btrfs snapshot: a right map"
[ "$(json_get "$T/sub-3.json" bytes_map_checked)" -ge $((30 * MIB)) ] || die "btrfs snapshot: too little checked"
restore_check "$(json_get "$T/sub-3.json" snapshot)" "$mnt/sub/img"
# a --used-only snapshot is never the parent of a --compare-with backup: its free blocks were not
# read, and the unchanged ranges would take its holes for them
randfile "$mnt/disk" 32 compare-used
mkfs.ext4 -q -F -E nodiscard "$mnt/disk"
bv backup "$repo" "$mnt/disk" --name=vm-used --used-only --json -q >"$T/used-1.json"
[ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["used_only"]["bytes_free_skipped"])' "$T/used-1.json")" -gt $((8 * MIB)) ] ||
    die "the ext4 image's free blocks were not skipped"
cp --reflink=always --preserve=timestamps "$mnt/disk" "$mnt/disk.prev"
modify "$mnt/disk" used
bv backup "$repo" "$mnt/disk" --name=vm-used --compare-with="$mnt/disk.prev" --json -q >"$T/used-2.json" 2>"$T/used-2.err"
why="snapshot $(json_get "$T/used-1.json" snapshot | cut -c1-8) was taken --used-only (its free blocks were not read)"
assert_eq "$(json_get "$T/used-2.json" read_whole_because)" "$why" "--compare-with paired with a --used-only parent"
grep -qxF "warning: '$mnt/disk.prev' not compared with, read everything: $why" "$T/used-2.err" ||
    { cat "$T/used-2.err" >&2; die "no warning for a --used-only parent"; }
restore_check "$(json_get "$T/used-2.json" snapshot)" "$mnt/disk"
umount_fs

# errors: no FIEMAP on tmpfs-like scratch space is said as such; one file is not two
mkdir -p "$T/tmpfs"
mount -t tmpfs -o size=8M tmpfs "$T/tmpfs"
on_exit "umount '$T/tmpfs'"
head -c 1M /dev/urandom >"$T/tmpfs/a"
cp "$T/tmpfs/a" "$T/tmpfs/b"
expect_fail 1 "error: cannot compare '$T/tmpfs/a' with '$T/tmpfs/b': the filesystem cannot map their extents" \
    bv backup "$repo" "$T/tmpfs/a" --compare-with="$T/tmpfs/b" -q
expect_fail 2 "error: --compare-with needs SOURCE and PATH to be two regular files" \
    bv backup "$repo" "$T/tmpfs/a" --compare-with="$T/tmpfs/a" -q
echo PASS
