#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# backup REPO libvirt:DOMAIN of a qcow2 disk with a backing chain (an overlay over a base image
# that holds most of the data, as virt-manager's and OpenStack's linked clones are): the
# snapshots hold the disk as the guest sees it (the base's data too, not only the overlay's
# clusters), running full, running incremental and shut off, each restored bit-exact against
# qemu-img convert -U of the chain; restore --libvirt writes into the overlay, the base untouched.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/libvirt/libvirt-lib.sh"
need_cmd python3
repo=$T/repo
bv init "$repo" --encryption=none >/dev/null

dom=bvt-$$-chain
mkdir -p "$LV_IMAGES"
base=$LV_IMAGES/$dom-base.qcow2 top=$LV_IMAGES/$dom-vda.qcow2
qemu-img create -q -f qcow2 "$base" 16M
qemu-io -f qcow2 -c "write -P 0x11 0 4M" -c "write -P 0x22 8M 1M" "$base" >/dev/null
qemu-img create -q -f qcow2 -F qcow2 -b "$base" "$top"
qemu-io -f qcow2 -c "write -P 0x33 1M 64k" "$top" >/dev/null
base_sum=$(sha256sum <"$base")
lv_domain_xml chain "<disk type='file' device='disk'><driver name='qemu' type='qcow2'/><source file='$top'/><target dev='vda' bus='virtio'/></disk>"

n=0
# backup_check WHAT: backs up, restores the snapshot and compares it with the disk as it was
backup_check() {
    n=$((n + 1))
    lv_copy "$dom" vda "$T/vda.$n"
    bv backup "$repo" "libvirt:$dom" --json >"$T/b$n.json" 2>"$T/b$n.err" || { cat "$T/b$n.err" >&2; die "backup $n ($1) failed"; }
    bv restore "$repo" "$dom-vda" "$T/out" >/dev/null
    cmp "$T/out" "$T/vda.$n" || die "backup $n ($1): the snapshot is not the disk the guest sees"
    rm -f "$T/out"
    echo "backup $n ($1): $(jget "$T/b$n.json" 'd["disks"][0]["stats"]["bytes_read"]') bytes read, $(jget "$T/b$n.json" 'd["disks"][0].get("read_whole_because", "incremental")')"
}
backup_check "running, full"
lv_write "$dom" vda "write -P 0x44 2M 64k" "write -P 0x55 8M 64k"
backup_check "running, incremental"
assert_eq "$(jget "$T/b2.json" 'd["disks"][0].get("incremental_from", "")')" "$(jget "$T/b1.json" 'd["checkpoint"]')" "backup 2 from backup 1's checkpoint"
lv_virsh destroy "$dom" >/dev/null
backup_check "shut off"
[ "$(sha256sum <"$base")" = "$base_sum" ] || die "the base image changed"

# restore into the domain: the overlay takes it, the base stays as it was
randfile "$T/data.raw" 16 chain-restore
s=$(bv backup "$repo" "$T/data.raw" --name=other --json -q | python3 -c 'import json,sys; print(json.load(sys.stdin)["snapshot"])')
bv restore "$repo" "$s" --libvirt="$dom" -q || die "restore --libvirt into the overlay failed"
[ "$(sha256sum <"$base")" = "$base_sum" ] || die "restore --libvirt wrote into the base image"
lv_virsh start "$dom" >/dev/null || die "$dom does not start after the restore"
lv_copy "$dom" vda "$T/after.raw"
assert_same "$T/data.raw" "$T/after.raw"
echo PASS
