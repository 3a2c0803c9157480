#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# restore --in-place writes a snapshot into an existing disk image through qemu-nbd (real qemu-nbd,
# qemu-img): a qcow2 stays a qcow2 (same inode, its persistent bitmaps kept), a raw file keeps its
# inode; ranges the snapshot holds as zeroes or holes are zeroed over older data; the image then
# reads (qemu-img convert -U) bit-exact as the snapshot. Refused with their message: another size
# (with the qemu-img resize to run), an image a running QEMU holds (write lock), an image qemu
# cannot open, a missing destination, --force; nothing is left running.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd qemu-img qemu-io qemu-nbd python3

export TMPDIR=$T/tmp
mkdir -p "$TMPDIR"
MIB=1048576
repo=$T/repo
bv init "$repo" --encryption=none >/dev/null

# the snapshot: 32 MiB, random data with a 4 MiB zero run and an 8 MiB hole at the end
randfile "$T/src.raw" 24 in-place
dd if=/dev/zero of="$T/src.raw" bs=1M seek=8 count=4 conv=notrunc status=none
truncate -s 32M "$T/src.raw"
snap=$(bv backup "$repo" "$T/src.raw" --name=disk --json -q | python3 -c 'import json,sys; print(json.load(sys.stdin)["snapshot"])')

# a qcow2 full of other data, with a bitmap of its own
randfile "$T/other.raw" 32 other
qemu-img convert -q -f raw -O qcow2 "$T/other.raw" "$T/d.qcow2"
qemu-img bitmap --add -f qcow2 "$T/d.qcow2" keep
ino=$(stat -c %i "$T/d.qcow2")
bv restore "$repo" "$snap" "$T/d.qcow2" --in-place >"$T/out" 2>&1 || { cat "$T/out" >&2; die "restore --in-place failed"; }
grep -q "restored snapshot ${snap:0:8} to '$T/d.qcow2'" "$T/out" || { cat "$T/out" >&2; die "no result line"; }
assert_eq "$(stat -c %i "$T/d.qcow2")" "$ino" "the qcow2 was replaced, not written"
qemu-img info -U --output=json "$T/d.qcow2" >"$T/info.json"
python3 -c 'import json,sys; i=json.load(open(sys.argv[1])); assert i["format"] == "qcow2", i
assert [b["name"] for b in i["format-specific"]["data"]["bitmaps"]] == ["keep"], i' "$T/info.json" ||
    die "the qcow2 lost its format or its bitmap"
qemu-img check -q "$T/d.qcow2" || die "qemu-img check finds the qcow2 damaged"
qemu-img convert -U -f qcow2 -O raw "$T/d.qcow2" "$T/got.raw"
assert_same "$T/src.raw" "$T/got.raw"

# a raw file of the size: written in place
cp "$T/other.raw" "$T/d.raw"
ino=$(stat -c %i "$T/d.raw")
bv restore "$repo" "$snap" "$T/d.raw" --in-place -q
assert_eq "$(stat -c %i "$T/d.raw")" "$ino" "the raw file was replaced, not written"
assert_same "$T/src.raw" "$T/d.raw"

# another size: nothing written, the resize to run is named
qemu-img create -q -f qcow2 "$T/small.qcow2" 16M
expect_fail 1 "error: the qcow2 image '$T/small.qcow2' is 16.0 MiB (16777216 bytes) but snapshot ${snap:0:8} is 32.0 MiB (33554432 bytes): nothing was written; resize the image first (qemu-img resize -f qcow2 $T/small.qcow2 33554432) and restore again" \
    bv restore "$repo" "$snap" "$T/small.qcow2" --in-place
qemu-img create -q -f qcow2 "$T/big.qcow2" 64M
expect_fail 1 "(qemu-img resize -f qcow2 --shrink $T/big.qcow2 33554432)" bv restore "$repo" "$snap" "$T/big.qcow2" --in-place

# an image a running QEMU holds (qemu-nbd writable holds the write lock, as a VM does)
qemu-nbd -t -f qcow2 -k "$T/held.sock" "$T/d.qcow2" 2>"$T/held.log" &
held=$!
on_exit "kill $held 2>/dev/null || true"
for _ in $(seq 100); do [ -S "$T/held.sock" ] && break; sleep 0.1; done
[ -S "$T/held.sock" ] || { cat "$T/held.log" >&2; die "qemu-nbd did not come up"; }
expect_fail 1 "error: cannot write the qcow2 image '$T/d.qcow2': a running VM uses it (qemu-nbd: Failed to get \"write\" lock); shut the VM down first; nothing was written" \
    bv restore "$repo" "$snap" "$T/d.qcow2" --in-place
kill "$held"; wait "$held" 2>/dev/null || true

# a qcow2 qemu cannot open (its header cut short)
head -c 4096 "$T/d.qcow2" >"$T/cut.qcow2"
expect_fail 1 "error: cannot write the qcow2 image '$T/cut.qcow2': qemu cannot open it: " \
    bv restore "$repo" "$snap" "$T/cut.qcow2" --in-place
expect_fail 2 "error: --in-place needs an existing disk image file to write into ('$T/none.qcow2' does not exist)" \
    bv restore "$repo" "$snap" "$T/none.qcow2" --in-place
expect_fail 2 "error: --in-place writes into '$T/d.raw' as it is: --force (which replaces a file) does not go with it" \
    bv restore "$repo" "$snap" "$T/d.raw" --in-place --force
[ -z "$(ls -A "$TMPDIR")" ] || die "left in TMPDIR: $(ls -A "$TMPDIR")"
! pgrep -f "qemu-nbd.*$T/" >/dev/null || die "a qemu-nbd of this test still runs"
echo "PASS"
