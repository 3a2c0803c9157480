#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# An incremental backup of a running domain reads at most the dirty extents at the bitmap's
# granularity (asked of QEMU), also when the changes are scattered through a disk full of data:
# the clean parts of the chunks a dirty range cuts into come from the parent's stored chunks,
# not from the disk again. Both snapshots restore bit-exact (qemu-img convert -U).
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/libvirt/libvirt-lib.sh"
need_cmd python3
repo=$T/repo
size=$((32 * 1024 * 1024))
bv init "$repo" --encryption=none >/dev/null
lv_domain --no-start gran 32M
dom=$LV_DOM
# data everywhere (chunks of every size cover the disk), written before the domain starts
head -c "$size" /dev/urandom >"$T/data.raw"
qemu-img convert -n -f raw -O qcow2 "$T/data.raw" "$(lv_image "$dom" vda)" || die "cannot fill the disk"
rm -f "$T/data.raw"
lv_virsh start "$dom" >/dev/null || die "cannot start $dom"

check_restore() { # SNAPSHOT COPY
    bv restore "$repo" "$1" "$T/out" >/dev/null
    assert_same "$T/out" "$2"
    rm -f "$T/out"
}

lv_copy "$dom" vda "$T/vda.1"
bv backup "$repo" "libvirt:$dom" --json >"$T/b1.json"
cp=$(jget "$T/b1.json" 'd["checkpoint"]')
snap1=$(jget "$T/b1.json" 'd["disks"][0]["snapshot"]')

# the granularity of the bitmap behind the checkpoint, as QEMU has it
lv_virsh qemu-monitor-command "$dom" '{"execute": "query-block"}' >"$T/block.json"
gran=$(python3 - "$T/block.json" "$cp" <<'PY'
import json, sys
cp = sys.argv[2]
for dev in json.load(open(sys.argv[1]))["return"]:
    for b in dev.get("inserted", {}).get("dirty-bitmaps", []) + dev.get("dirty-bitmaps", []):
        if b.get("name") == cp:
            print(b["granularity"]); sys.exit(0)
sys.exit("no bitmap named " + cp)
PY
) || die "QEMU shows no bitmap for checkpoint $cp"
echo "bitmap granularity: $gran bytes"
[ "$gran" -ge 4096 ] || die "granularity '$gran'"

# scattered writes, neither aligned to the granularity nor sized to it
writes=() dirty=$T/dirty
: >"$dirty"
RANDOM=24
for i in $(seq 1 24); do
    off=$(((RANDOM % 7800) * 4096 + (i % 3) * 512))
    len=$(((RANDOM % 24 + 1) * 4096))
    [ $((off + len)) -le "$size" ] || continue
    writes+=("write -P $((i + 1)) $off $len")
    echo "$off $len" >>"$dirty"
done
lv_write "$dom" vda "${writes[@]}"
dirty_bytes=$(python3 - "$dirty" "$gran" "$size" <<'PY'
import sys
g, size = int(sys.argv[2]), int(sys.argv[3])
granules = set()
for line in open(sys.argv[1]):
    off, n = map(int, line.split())
    granules.update(range(off // g, (off + n + g - 1) // g))
print(sum(min(g, size - k * g) for k in granules))
PY
)
echo "${#writes[@]} writes dirty $dirty_bytes bytes at $gran-byte granularity"

lv_copy "$dom" vda "$T/vda.2"
bv backup "$repo" "libvirt:$dom" --json >"$T/b2.json"
assert_eq "$(jget "$T/b2.json" 'd["disks"][0]["changed_from"]')" "$snap1" "the incremental's parent"
read=$(jget "$T/b2.json" 'd["disks"][0]["stats"]["bytes_read"]')
echo "incremental: read $read bytes of the disk"
[ "$read" -gt 0 ] || die "the incremental read nothing"
[ "$read" -le "$dirty_bytes" ] || die "the incremental read $read bytes, more than the $dirty_bytes dirty"
parent=$(jget "$T/b2.json" 'd["disks"][0]["bytes_from_parent"]')
echo "$parent bytes of the chunks cut into came from the parent's"
[ "$parent" -gt 0 ] || die "no chunk was cut into: the pattern tests nothing"
check_restore "$(jget "$T/b2.json" 'd["disks"][0]["snapshot"]')" "$T/vda.2"
check_restore "$snap1" "$T/vda.1"
echo ok
