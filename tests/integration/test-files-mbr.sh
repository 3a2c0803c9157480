#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# blkvault files on the other disk layouts (issue 25): an MBR table with a primary partition and
# two logical ones in an extended partition (a chain of EBRs), each ext filesystem made by
# mke2fs at its offset; a filesystem without a table (the whole disk); a partition that holds no
# filesystem, refused by name (a filesystem that does not mount: tests/root/test-files-guestfs).
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd mkfs.ext4 mkfs.ext2 sfdisk
export TZ=UTC

img=$T/mbr.img
truncate -s 64M "$img"
sfdisk -q "$img" <<'EOF'
label: dos
start=2048, size=16384, type=83
start=18432, size=49152, type=5
start=20480, size=20480, type=83
start=43008, size=20480, type=83
start=69632, size=8192, type=83
EOF
for d in one five six; do mkdir -p "$T/$d/dir"; echo "in $d" >"$T/$d/dir/file"; done
ln -s dir/file "$T/six/link"
mkfs.ext4 -q -F -L first -E offset=$((2048 * 512)) -d "$T/one" "$img" 8M
mkfs.ext4 -q -F -L fifth -E offset=$((20480 * 512)) -d "$T/five" "$img" 10M
mkfs.ext2 -q -F -L sixth -E offset=$((43008 * 512)) -d "$T/six" "$img" 10M
sfdisk -l "$img" >/dev/null || die "sfdisk does not read its own table back"
repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
bv backup "$repo" "$img" --name=mbr -q >/dev/null

bv files "$repo" mbr ls >"$T/parts"
grep -Eq '^p1 +ext4 .* first$' "$T/parts" || { cat "$T/parts"; die "no p1 ext4 'first'"; }
grep -Eq '^p5 +ext4 .* fifth$' "$T/parts" || { cat "$T/parts"; die "no logical p5 ext4 'fifth'"; }
grep -Eq '^p6 +ext2 .* sixth$' "$T/parts" || { cat "$T/parts"; die "no logical p6 ext2 'sixth'"; }
grep -Eq '^p3 +\? ' "$T/parts" || { cat "$T/parts"; die "no p3 without a filesystem"; }
assert_eq "$(bv files "$repo" mbr cat p1:/dir/file)" "in one" "cat of the primary partition"
assert_eq "$(bv files "$repo" mbr cat p5:/dir/file)" "in five" "cat of the first logical partition"
assert_eq "$(bv files "$repo" mbr cat sixth:/link)" "in six" "cat by label through a link on ext2"
bv files "$repo" mbr find sixth:/ >"$T/find"
assert_eq "$(tr '\n' ' ' <"$T/find")" "sixth:/ sixth:/dir sixth:/dir/file sixth:/link sixth:/lost+found " "find on ext2"
expect_fail 1 "^error: p3 of snapshot [0-9a-f]\{8\} holds no filesystem known here: files reads ext2, ext3, ext4" \
    bv files "$repo" mbr ls p3:/
bv files "$repo" mbr get p5:/dir "$T/got" 2>/dev/null
cmp "$T/got/file" "$T/five/dir/file" || die "get from a logical partition"

# a disk without a table: one filesystem, paths without a prefix, ls without a path its root
mkfs.ext4 -q -L whole -d "$T/one" "$T/whole.img" 8M
bv backup "$repo" "$T/whole.img" --name=whole -q >/dev/null
bv files "$repo" whole ls >"$T/root"
grep -q ' dir$' "$T/root" || { cat "$T/root"; die "ls of a disk without a table lists no root"; }
assert_eq "$(bv files "$repo" whole cat /dir/file)" "in one" "cat of a whole-disk filesystem"
assert_eq "$(bv files "$repo" whole cat whole:/dir/file)" "in one" "cat of a whole-disk filesystem by label"

