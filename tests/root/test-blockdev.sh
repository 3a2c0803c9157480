#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Block devices as sources and destinations: a loop device holding each of ext4, XFS and btrfs
# (with real files) is backed up from /dev/loopN, restored to a file and to another loop
# device, bit-exact; a partitioned image (GPT with three filesystems) is backed up and `list`
# shows what libblkid found on it.
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd losetup mkfs.ext4 mkfs.xfs mkfs.btrfs sfdisk python3
[ -e /dev/loop-control ] || skip "no loop devices"

repo=$T/repo
bv init "$repo" --encryption=none >/dev/null

fill() { # fill MOUNTPOINT: real files from this system
    cp -a /usr/share/doc/. "$1/" 2>/dev/null || true
    mkdir -p "$1/bin" && cp -a /usr/bin/[a-c]* "$1/bin/" 2>/dev/null || true
}

for fs in ext4 xfs btrfs; do
    truncate -s 320M "$T/$fs.img"
    attach_loop dev "$T/$fs.img"
    case $fs in
        ext4) mkfs.ext4 -q -L bv-$fs "$dev" ;;
        xfs) mkfs.xfs -q -L bv-$fs "$dev" ;;
        btrfs) mkfs.btrfs -q -L bv-$fs "$dev" >/dev/null ;;
    esac
    mkdir -p "$T/mnt"
    mount "$dev" "$T/mnt"
    fill "$T/mnt"
    umount "$T/mnt"

    bv backup "$repo" "$dev" --name="$fs" --json > "$T/$fs.json"
    python3 - "$T/$fs.json" "$fs" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["size"] == 320 << 20, s
# a fresh filesystem is mostly zero blocks: never stored
assert s["bytes_zero"] > 100 << 20, s
PY
    bv restore "$repo" "$fs" "$T/$fs.out" >/dev/null
    cmp "$dev" "$T/$fs.out" || die "$fs: restored file differs from the device"
    # onto another block device of the same size (zero extents written as zeroes)
    truncate -s 320M "$T/$fs.target"
    head -c 8M /dev/urandom | dd of="$T/$fs.target" conv=notrunc status=none  # garbage to be zeroed
    attach_loop tdev "$T/$fs.target"
    bv restore "$repo" "$fs" "$tdev" >/dev/null
    cmp "$dev" "$tdev" || die "$fs: restored device differs from the source device"
    blkid -o value -s LABEL "$tdev" | grep -x "bv-$fs" >/dev/null || die "$fs: restored device has no filesystem label"
    rm "$T/$fs.out"
done

# The snapshot records what libblkid found on the source.
bv list "$repo" --json | python3 -c '
import json, sys
snaps = {s["name"]: s for s in json.load(sys.stdin)}
for fs in ("ext4", "xfs", "btrfs"):
    src = snaps[fs]["source"]
    assert src["kind"] == "blockdev", src
    assert src["probe"].get("fstype") == fs and src["probe"].get("label") == "bv-" + fs, src
'

# A partitioned image: GPT with ext4, XFS and btrfs partitions.
truncate -s 900M "$T/disk.img"
printf 'label: gpt\n,280M\n,300M\n,\n' | sfdisk -q "$T/disk.img"
# Partition devices need udev or devtmpfs here; a loop device over each partition's range
# works everywhere.
part() { # part VAR N: a loop device over partition N of disk.img
    local start size
    read -r start size < <(sfdisk -J "$T/disk.img" | python3 -c "
import json, sys
p = json.load(sys.stdin)['partitiontable']['partitions'][$2 - 1]
print(p['start'] * 512, p['size'] * 512)")
    attach_loop "$1" -o "$start" --sizelimit "$size" "$T/disk.img"
}
part p1 1; part p2 2; part p3 3
mkfs.ext4 -q -L p-ext4 "$p1"
mkfs.xfs -q -L p-xfs "$p2"
mkfs.btrfs -q -L p-btrfs "$p3" >/dev/null
mount "$p1" "$T/mnt" && fill "$T/mnt" && umount "$T/mnt"
attach_loop dev "$T/disk.img"
bv backup "$repo" "$dev" --name=disk >/dev/null
bv restore "$repo" disk "$T/disk.out" >/dev/null
cmp "$dev" "$T/disk.out" || die "partitioned disk differs after restore"
bv list "$repo" --json | python3 -c '
import json, sys
disk = [s for s in json.load(sys.stdin) if s["name"] == "disk"][0]
probe = disk["source"]["probe"]
assert probe["pttype"] == "gpt", probe
parts = probe["partitions"]
assert [p.get("fstype") for p in parts] == ["ext4", "xfs", "btrfs"], parts
assert [p.get("label") for p in parts] == ["p-ext4", "p-xfs", "p-btrfs"], parts
'
bv list "$repo" | grep "  gpt: ext4 'p-ext4', xfs 'p-xfs', btrfs 'p-btrfs'$" >/dev/null || { bv list "$repo"; die "list does not show the partitions"; }
bv verify "$repo" --read-data >/dev/null
echo ok
