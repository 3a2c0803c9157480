#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# --thin-delta on the host, without device-mapper: the pool's metadata comes from thin_restore
# (tests/unit/thin/meta.xml: thin device 2 is a snapshot of 1 with blocks 4-5 remapped, 32-35
# unmapped and 40-42 newly mapped, 64 KiB blocks), an image file stands for the devices' content.
# The first backup (a delta of device 1 with itself) reads everything: no earlier snapshot. After
# the image changes as the delta says, the backup with the delta from 1 to 2 reads only the
# changed blocks and restores bit-exact; the same delta again is refused for pairing (the last
# snapshot read device 2, not 1) and reads everything, saying why. A delta that maps blocks past
# the end of the source, or whose ranges use more data blocks than its pool has, is refused.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd thin_restore thin_delta python3

KIB=1024
repo=$T/repo
img=$T/thin.img
bv init "$repo" --encryption=none >/dev/null
json_get() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2], ""))' "$1" "$2"; }

truncate -s 8M "$T/meta.bin"
thin_restore -q -i "$SOURCE_ROOT/tests/unit/thin/meta.xml" -o "$T/meta.bin"
thin_delta --snap1 1 --snap2 1 "$T/meta.bin" >"$T/d11.xml"
thin_delta --snap1 1 --snap2 2 "$T/meta.bin" >"$T/d12.xml"

# backup 1: device 1 (4 MiB of random data)
randfile "$img" 4 thin-delta
bv backup "$repo" "$img" --name=lv --thin-delta="$T/d11.xml" --json -q >"$T/b1.json" 2>"$T/b1.err"
assert_eq "$(json_get "$T/b1.json" read_whole_because)" "no earlier snapshot is named 'lv'"
grep -qx "warning: thin delta '$T/d11.xml' not used, read everything: no earlier snapshot is named 'lv'" \
    "$T/b1.err" || { cat "$T/b1.err" >&2; die "no warning for the first backup"; }
assert_eq "$(json_get "$T/b1.json" bytes_read)" $((4096 * KIB)) "the first backup reads everything"
b1=$(json_get "$T/b1.json" snapshot)

# device 2: blocks 4-5 and 40-42 rewritten, 32-35 unmapped (zeroes)
randfile "$T/new" 1 thin-delta-new
dd if="$T/new" of="$img" bs=64k seek=4 count=2 conv=notrunc status=none
dd if=/dev/zero of="$img" bs=64k seek=32 count=4 conv=notrunc status=none
dd if="$T/new" of="$img" bs=64k skip=2 seek=40 count=3 conv=notrunc status=none
bv backup "$repo" "$img" --name=lv --thin-delta="$T/d12.xml" --json -q >"$T/b2.json" 2>"$T/b2.err"
[ ! -s "$T/b2.err" ] || { cat "$T/b2.err" >&2; die "backup 2 complained"; }
assert_eq "$(json_get "$T/b2.json" changed_from)" "$b1" "backup 2's parent"
read2=$(json_get "$T/b2.json" bytes_read)
[ "$read2" -ge $((576 * KIB)) ] && [ "$read2" -le $((576 * KIB + 6 * 1024 * KIB)) ] ||
    die "backup 2 read $read2 bytes, expected the 9 changed blocks (576 KiB) plus at most a chunk at each edge"
echo "thin delta: backup 2 read $read2 bytes of 4 MiB (576 KiB changed)"
bv restore "$repo" "$(json_get "$T/b2.json" snapshot)" "$T/got" >/dev/null
assert_same "$img" "$T/got"
bv list "$repo" --json | python3 -c '
import json, sys
s = [x for x in json.load(sys.stdin) if x["id"] == sys.argv[1]][0]["source"]
assert s["changed_map"] == "lvm-thin:2" and s["changed_from"] == sys.argv[2], s
' "$(json_get "$T/b2.json" snapshot)" "$b1" || die "the snapshot does not record the thin device"

# the same delta again: the last snapshot read device 2, so 1 -> 2 does not pair with it
bv backup "$repo" "$img" --name=lv --thin-delta="$T/d12.xml" --force-read --json -q >"$T/b3.json" 2>"$T/b3.err"
b2=$(json_get "$T/b2.json" snapshot)
assert_eq "$(json_get "$T/b3.json" read_whole_because)" "snapshot ${b2:0:8} was not taken with lvm-thin:1"
assert_eq "$(json_get "$T/b3.json" bytes_read)" $((4096 * KIB)) "an unpaired delta reads everything"

# a delta of another device: it maps blocks 40-42 (2.6-2.75 MiB), past the end of a 2 MiB image;
# once clipped to the image, making a stale snapshot without a word
head -c 2M "$img" >"$T/small.img"
expect_fail 2 "^error: '$T/d12.xml' does not fit '$T/small.img': it maps blocks past the end of the device, or the device is not whole 512-byte sectors (a delta of another device?); nothing was read$" \
    bv backup "$repo" "$T/small.img" --name=lv --thin-delta="$T/d12.xml" -q
# a delta that disagrees with itself: its pool has 150 blocks, the ranges use data block 200
thin_delta --verbose --snap1 1 --snap2 2 "$T/meta.bin" | sed 's/nr_data_blocks="1024"/nr_data_blocks="150"/' >"$T/d12-pool.xml"
grep -q 'nr_data_blocks="150"' "$T/d12-pool.xml" || die "thin_delta --verbose printed no nr_data_blocks"
expect_fail 2 "^error: '$T/d12-pool.xml' is not thin_delta's output (thin_delta --snap1 OLD --snap2 NEW METADATA), or its ranges disagree with its pool's nr_data_blocks$" \
    bv backup "$repo" "$img" --name=lv --thin-delta="$T/d12-pool.xml" -q
assert_eq "$(bv list "$repo" --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" 3 \
    "a refused delta published a snapshot"

# not thin_delta's output, and a source that cannot have one
echo '<superblock>' >"$T/bad.xml"
expect_fail 2 "error: '$T/bad.xml' is not thin_delta's output (thin_delta --snap1 OLD --snap2 NEW METADATA)" \
    bv backup "$repo" "$img" --thin-delta="$T/bad.xml" -q
expect_fail 2 "error: --thin-delta needs a block device or a file as SOURCE" \
    bv backup "$repo" "$T" --name=dir --thin-delta="$T/d12.xml" -q
# --skip-unreadable is not honoured by a changed-block source: refused, not ignored (an EIO then
# failed the backup with advice to use the option it was given)
expect_fail 2 "^error: --skip-unreadable cannot be combined with --thin-delta or --compare-with (back up without them to store unreadable blocks as zeroes)$" \
    bv backup "$repo" "$img" --thin-delta="$T/d12.xml" --skip-unreadable -q
echo PASS
