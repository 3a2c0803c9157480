#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A qcow2 image that carries a persistent dirty bitmap (a shut-off VM's disk: libvirt's checkpoints
# are such bitmaps) is backed up incrementally with --dirty-bitmap=NAME as a file: qemu-nbd
# --read-only -B NAME serves it, only what the bitmap marks dirty is read (at most the dirty
# 64 KiB granules plus a chunk at each edge), the rest is taken from the last snapshot of the same
# name; each snapshot restores bit-exact against qemu-img convert. A bitmap the image does not
# carry, and --dirty-bitmap on a raw file, a vmdk or --as-file, are refused with their message.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd qemu-img qemu-io qemu-nbd python3

export TMPDIR=$T/tmp # qemu-nbd's private socket directory: nothing may be left in it
mkdir -p "$TMPDIR"
MIB=1048576
img=$T/d.qcow2
repo=$T/repo
jget() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2], ""))' "$1" "$2"; }
restore_check() {
    rm -f "$T/want.raw" "$T/got.raw"
    qemu-img convert -U -f qcow2 -O raw "$img" "$T/want.raw"
    bv restore "$repo" "$1" "$T/got.raw" >/dev/null
    assert_same "$T/want.raw" "$T/got.raw"
}
bv init "$repo" --encryption=none >/dev/null

# 32 MiB: 20 MiB of random data, the rest never written; the bitmap is added before backup 1
randfile "$T/data.raw" 20 image-bitmap
qemu-img convert -q -f raw -O qcow2 "$T/data.raw" "$img"
qemu-img resize -q -f qcow2 "$img" 32M
qemu-img bitmap --add --enable -f qcow2 "$img" bv-1

bv backup "$repo" "$img" --name=disk --dirty-bitmap=bv-1 --json -q >"$T/b1.json" 2>"$T/b1.err"
assert_eq "$(jget "$T/b1.json" read_whole_because)" "no earlier snapshot is named 'disk'"
assert_eq "$(jget "$T/b1.json" bytes_read)" $((20 * MIB)) "backup 1 reads the data"
b1=$(jget "$T/b1.json" snapshot)
restore_check "$b1"
cp "$T/want.raw" "$T/want1.raw"

# written while the VM is off: qemu-io updates the persistent bitmap (three 64 KiB granules)
qemu-io -f qcow2 -c "write -P 0x11 $((3 * MIB + 4096)) 8k" -c "write -P 0x22 $((12 * MIB)) 64k" \
    -c "write -P 0x33 $((28 * MIB)) 64k" "$img" >/dev/null
bv backup "$repo" "$img" --name=disk --dirty-bitmap=bv-1 --json -q >"$T/b2.json" 2>"$T/b2.err"
[ ! -s "$T/b2.err" ] || { cat "$T/b2.err" >&2; die "backup 2 complained"; }
assert_eq "$(jget "$T/b2.json" changed_from)" "$b1" "backup 2's parent"
read2=$(jget "$T/b2.json" bytes_read)
[ "$read2" -ge $((192 * 1024)) ] && [ "$read2" -le $((192 * 1024 + 4 * MIB)) ] ||
    die "backup 2 read $read2 bytes, expected the dirty 192 KiB plus at most a chunk at each edge"
echo "image bitmap: backup 2 read $read2 bytes of a 32 MiB image (20 MiB of data, 192 KiB dirty)"
restore_check "$(jget "$T/b2.json" snapshot)"
bv list "$repo" --json | python3 -c '
import json, sys
s = [x for x in json.load(sys.stdin) if x["id"] == sys.argv[1]][0]["source"]
assert s["kind"] == "image" and s["changed_map"] == "qemu:dirty-bitmap:bv-1", s
assert s["changed_from"] == sys.argv[2], s
' "$(jget "$T/b2.json" snapshot)" "$b1" || die "the snapshot does not record the bitmap and its parent"
# the first snapshot still restores as it was
bv restore "$repo" "$b1" "$T/got1.raw" >/dev/null
assert_same "$T/want1.raw" "$T/got1.raw"
[ -z "$(ls -A "$TMPDIR")" ] || die "left in TMPDIR: $(ls -A "$TMPDIR")"

# errors
expect_fail 1 "error: the qcow2 image '$img' carries no persistent bitmap 'nope' (qemu-img info -U lists" \
    bv backup "$repo" "$img" --name=disk --dirty-bitmap=nope -q
expect_fail 2 "error: --dirty-bitmap needs an NBD source (nbd://HOST/EXPORT or nbd+unix:///EXPORT?socket=PATH) or a qcow2 image" \
    bv backup "$repo" "$T/data.raw" --dirty-bitmap=bv-1 -q
qemu-img convert -q -f raw -O vmdk "$T/data.raw" "$T/d.vmdk"
expect_fail 2 "error: --dirty-bitmap needs an NBD source" bv backup "$repo" "$T/d.vmdk" --dirty-bitmap=bv-1 -q
expect_fail 2 "error: --dirty-bitmap needs an NBD source" bv backup "$repo" "$img" --as-file --dirty-bitmap=bv-1 -q
! pgrep -f "qemu-nbd.*$T/" >/dev/null || die "a qemu-nbd of this test still runs"
echo "PASS"
