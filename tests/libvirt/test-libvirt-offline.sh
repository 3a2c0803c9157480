#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Shut-off domains (issue 24), with the machine's libvirtd and QEMU (TCG): backup libvirt:DOMAIN of
# a domain that does not run reads its disks directly (qcow2 through qemu-nbd --read-only, raw as
# a file). Libvirt 9.0 cannot create a checkpoint of a shut-off domain ("cannot create checkpoint
# for inactive domain"), so such a backup keeps the checkpoint its parent recorded: the qcow2's
# persistent bitmap of that checkpoint still counts every write since it, so the offline backup
# reads only what it marks (qemu-nbd -B) and records the same checkpoint, and the next running
# backup pairs with it. Written while off (qemu-io on the image), the incremental offline backup
# reads at most the dirty 64 KiB granules plus a chunk at each edge; every snapshot restores
# bit-exact against the disk as it was (qemu-img convert -U). Without the bitmap (removed by
# hand), the offline backup reads the disk whole and says why.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/libvirt/libvirt-lib.sh"
need_cmd python3 qemu-io

MIB=1048576
repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
# jq FILE EXPR: a value of the backup's JSON (disks[0] of it as d)
jq() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); d=r["disks"][0]; v=eval(sys.argv[2]); print("" if v is None else v)' "$1" "$2"; }
# check NAME SNAPSHOT: the snapshot restores to the disk vda as it is now
check() {
    lv_copy "$dom" vda "$T/$1.want"
    bv restore "$repo" "$2" "$T/$1.got" >/dev/null
    assert_same "$T/$1.want" "$T/$1.got"
    rm -f "$T/$1.got"
}

lv_domain --no-start off 32M
dom=$LV_DOM
img=$(lv_image "$dom" vda)
qemu-io -f qcow2 -c "write -P 0x5a 0 8M" -c "write -P 0x66 20M 2M" "$img" >/dev/null

# 1: never ran, no parent: read whole, no checkpoint recorded
bv backup "$repo" "libvirt:$dom" --json >"$T/b1.json" 2>"$T/b1.err" || { cat "$T/b1.err" >&2; die "offline backup 1 failed"; }
assert_eq "$(jq "$T/b1.json" 'd.get("read_whole_because")')" "no earlier snapshot is named '$dom-vda'"
assert_eq "$(jq "$T/b1.json" 'r.get("checkpoint")')" ""
check b1 "$(jq "$T/b1.json" 'd["snapshot"]')"

# 2: running: the job creates checkpoint CK (a full read: its parent recorded none)
lv_virsh start "$dom" >/dev/null
bv backup "$repo" "libvirt:$dom" --json >"$T/b2.json" 2>"$T/b2.err" || { cat "$T/b2.err" >&2; die "running backup 2 failed"; }
ck=$(jq "$T/b2.json" 'r.get("checkpoint")')
case $ck in blkvault-*) ;; *) die "no checkpoint from the running backup: '$ck'" ;; esac
check b2 "$(jq "$T/b2.json" 'd["snapshot"]')"
lv_virsh destroy "$dom" >/dev/null # QEMU ends on SIGTERM and stores the bitmap
grep -q "\"name\": \"$ck\"" <<<"$(qemu-img info -U --output=json "$img")" || die "the image carries no bitmap $ck"
expect_fail 1 "cannot create checkpoint for inactive domain" lv_virsh checkpoint-create-as "$dom" probe

# 3: written while off, then backed up off: only the dirty granules are read, CK kept
qemu-io -f qcow2 -c "write -P 0x11 $((3 * MIB + 4096)) 8k" -c "write -P 0x22 $((12 * MIB)) 64k" \
    -c "write -P 0x33 $((30 * MIB)) 64k" "$img" >/dev/null
bv backup "$repo" "libvirt:$dom" --json >"$T/b3.json" 2>"$T/b3.err" || { cat "$T/b3.err" >&2; die "offline backup 3 failed"; }
assert_eq "$(jq "$T/b3.json" 'd.get("read_whole_because")')" ""
assert_eq "$(jq "$T/b3.json" 'd.get("incremental_from")')" "$ck"
assert_eq "$(jq "$T/b3.json" 'd.get("changed_from")')" "$(jq "$T/b2.json" 'd["snapshot"]')"
read3=$(jq "$T/b3.json" 'd["stats"]["bytes_read"]')
[ "$read3" -ge $((192 * 1024)) ] && [ "$read3" -le $((192 * 1024 + 4 * MIB)) ] ||
    die "offline backup 3 read $read3 bytes, expected the dirty 192 KiB plus at most a chunk at each edge"
echo "shut-off domain: the incremental backup read $read3 bytes of a 32 MiB disk (192 KiB dirty)"
check b3 "$(jq "$T/b3.json" 'd["snapshot"]')"
bv list "$repo" --json | python3 -c '
import json, sys
s = [x for x in json.load(sys.stdin) if x["id"] == sys.argv[1]][0]["source"]
assert s["kind"] == "libvirt" and s["libvirt"]["checkpoint"] == sys.argv[2], s
' "$(jq "$T/b3.json" 'd["snapshot"]')" "$ck" || die "snapshot 3 does not record checkpoint $ck"
# the earlier snapshots still restore as they were
bv restore "$repo" "$(jq "$T/b1.json" 'd["snapshot"]')" "$T/b1.again" >/dev/null
assert_same "$T/b1.want" "$T/b1.again"

# 4: running again: the job counts from CK, which the offline snapshot kept, and pairs with it
lv_virsh start "$dom" >/dev/null
lv_write "$dom" vda "write -P 0x44 $((16 * MIB)) 64k"
bv backup "$repo" "libvirt:$dom" --json >"$T/b4.json" 2>"$T/b4.err" || { cat "$T/b4.err" >&2; die "running backup 4 failed"; }
assert_eq "$(jq "$T/b4.json" 'd.get("incremental_from")')" "$ck"
assert_eq "$(jq "$T/b4.json" 'd.get("changed_from")')" "$(jq "$T/b3.json" 'd["snapshot"]')"
check b4 "$(jq "$T/b4.json" 'd["snapshot"]')"
ck4=$(jq "$T/b4.json" 'r.get("checkpoint")')
lv_virsh destroy "$dom" >/dev/null

# 5: the bitmap removed by hand: read whole, the reason given
qemu-img bitmap --remove -f qcow2 "$img" "$ck4"
bv backup "$repo" "libvirt:$dom" --json >"$T/b5.json" 2>"$T/b5.err" || { cat "$T/b5.err" >&2; die "offline backup 5 failed"; }
assert_eq "$(jq "$T/b5.json" 'd.get("read_whole_because")')" \
    "the image '$img' carries no bitmap '$ck4' (checkpoint of snapshot $(jq "$T/b4.json" 'd["snapshot"][:8]'))"
check b5 "$(jq "$T/b5.json" 'd["snapshot"]')"
echo "PASS"
