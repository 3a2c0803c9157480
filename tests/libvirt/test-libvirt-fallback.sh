#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# backup REPO libvirt:DOMAIN when the parent's checkpoint no longer gives a true map: a full read
# with the reason, never a failure, never a wrong map (each snapshot restored bit-exact).
#   - the checkpoint deleted by hand (virsh checkpoint-delete): libvirt no longer has it;
#   - the disk resized (virsh blockresize): QEMU grows the bitmap and calls the new part clean
#     (libvirt 9.0, QEMU 7.2: tried by hand); the pairing's size check reads whole;
#   - the image replaced while the domain was off: libvirt refuses the checkpoint ("missing or
#     broken bitmap"), and blkvault begins again reading whole;
#   - the domain undefined and defined again (undefine needs --checkpoints-metadata, which drops
#     the checkpoints; their bitmaps stay in the qcow2 image), with its UUID and with a new one.
# Then an incremental backup works again from the last full one.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/libvirt/libvirt-lib.sh"
need_cmd python3
repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
lv_domain fb 16M
dom=$LV_DOM
n=0
# backup_expect WHY-PATTERN: writes, backs up, checks the reason and the restore
backup_expect() {
    n=$((n + 1))
    lv_write "$dom" vda "write -P $((n + 16)) $((n * 1024))k 64k"
    lv_copy "$dom" vda "$T/vda.$n"
    bv backup "$repo" "libvirt:$dom" --json >"$T/b$n.json" 2>"$T/b$n.err" || { cat "$T/b$n.err" >&2; die "backup $n failed"; }
    why=$(jget "$T/b$n.json" 'd["disks"][0].get("read_whole_because", "")')
    case $why in $1) ;; *) die "backup $n: read whole because '$why', expected '$1'" ;; esac
    bv restore "$repo" "$dom-vda" "$T/out" >/dev/null
    assert_same "$T/out" "$T/vda.$n"
    rm -f "$T/out"
    cp=$(jget "$T/b$n.json" 'd["checkpoint"]')
}
redefine() { # [new-uuid]
    lv_virsh dumpxml --inactive "$dom" >"$T/dom.xml"
    lv_virsh destroy "$dom" >/dev/null
    lv_virsh undefine "$dom" --checkpoints-metadata >/dev/null
    [ -z "${1:-}" ] || sed -i '/<uuid>/d' "$T/dom.xml"
    lv_virsh define "$T/dom.xml" >/dev/null
    lv_virsh start "$dom" >/dev/null
}

backup_expect "no earlier snapshot*"
backup_expect ""   # incremental: the checkpoint is there
assert_eq "$(jget "$T/b2.json" 'd["disks"][0].get("incremental_from", "")')" "$(jget "$T/b1.json" 'd["checkpoint"]')" "second from the first's checkpoint"

# deleted by hand
lv_virsh checkpoint-delete "$dom" "$cp" >/dev/null
backup_expect "checkpoint '$cp', which snapshot * recorded, no longer exists*"

# resized: 16 MiB to 24 MiB; the snapshot is the new size
lv_virsh blockresize "$dom" vda 24M >/dev/null
backup_expect "the size changed from 16777216 to 25165824 bytes since snapshot *"
assert_eq "$(stat -c %s "$T/vda.$n")" 25165824 "size of the resized disk"

# the image replaced while the domain was off (its checkpoint's bitmap is not in the new one)
img=$(lv_image "$dom" vda)
lv_virsh destroy "$dom" >/dev/null
qemu-img create -q -f qcow2 "$T/new.qcow2" 24M
qemu-io -f qcow2 -c "write -P 0x7e 0 1M" "$T/new.qcow2" >/dev/null
cp "$T/new.qcow2" "$img"
lv_virsh start "$dom" >/dev/null
backup_expect "libvirt refused checkpoint '$cp': *missing or broken bitmap*"

# undefined and defined again with the same UUID: the checkpoints' metadata is gone
redefine
backup_expect "checkpoint '$cp', which snapshot * recorded, no longer exists*"
# the qcow2 image still holds the bitmaps of the dropped checkpoints (seen when QEMU is off)
lv_virsh destroy "$dom" >/dev/null
grep -q "\"name\": \"$cp\"" <<<"$(qemu-img info -U --output=json "$img")" || die "the bitmap of $cp left the image"
lv_virsh start "$dom" >/dev/null

# undefined and defined with a new UUID: the parent is of another domain
redefine new-uuid
backup_expect "snapshot * is of another domain (UUID *, now *)"

# and incremental again from there
backup_expect ""
assert_eq "$(jget "$T/b$n.json" 'd["disks"][0]["stats"]["bytes_read"]')" 65536 "bytes read by the last incremental"
echo ok
