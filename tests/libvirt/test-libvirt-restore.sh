#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# restore --libvirt=DOMAIN[:TARGET] (issue 24) with the machine's libvirtd and QEMU (TCG): a snapshot
# is written into a shut-off domain's qcow2 disk and into a raw one, in place through qemu-nbd; the
# domain then starts (virsh start) and the disk reads (qemu-img convert -U) bit-exact as the
# snapshot, the other disk untouched. TARGET defaults to the snapshot's own disk (a snapshot named
# DOMAIN-TARGET), else the only disk. Refused with their message: a running domain (its name
# shell-quoted in the virsh command it suggests), several disks
# and no TARGET, an unknown disk, an unknown domain, another size, a DEST beside --libvirt.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/libvirt/libvirt-lib.sh"
need_cmd python3

MIB=1048576
repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
jsnap() { python3 -c 'import json,sys; print(json.load(sys.stdin)["snapshot"])'; }

lv_domain --no-start rst 16M 16M
dom=$LV_DOM
randfile "$T/data.raw" 12 libvirt-restore
truncate -s 16M "$T/data.raw"
s_vdb=$(bv backup "$repo" "$T/data.raw" --name="$dom-vdb" --json -q | jsnap)
s_other=$(bv backup "$repo" "$T/data.raw" --name=other --json -q | jsnap)

# the snapshot's own disk (DOMAIN-vdb), then the domain starts with it
bv restore "$repo" "$s_vdb" --libvirt="$dom" >"$T/out" 2>&1 || { cat "$T/out" >&2; die "restore --libvirt failed"; }
grep -q "restoring snapshot ${s_vdb:0:8} into disk vdb of domain '$dom' ($(lv_image "$dom" vdb)), a qcow2 image" "$T/out" ||
    { cat "$T/out" >&2; die "no line naming the disk"; }
lv_virsh start "$dom" >/dev/null || die "the domain does not start after the restore"
lv_copy "$dom" vdb "$T/vdb.raw"
assert_same "$T/data.raw" "$T/vdb.raw"
lv_copy "$dom" vda "$T/vda.raw"
cmp -s "$T/vda.raw" <(head -c $((16 * MIB)) /dev/zero) || die "vda was written"
grep -q '"format": "qcow2"' <<<"$(qemu-img info -U --output=json "$(lv_image "$dom" vdb)")" || die "vdb is no longer qcow2"

# running: refused, nothing written
expect_fail 1 "error: domain '$dom' is running: restoring into its disk under it would corrupt it; shut it down first (virsh shutdown $dom), or restore to a new file; nothing was written" \
    bv restore "$repo" "$s_other" --libvirt="$dom:vda"
lv_virsh destroy "$dom" >/dev/null
# a running domain whose name a shell splits: the command in the refusal quotes it, and run by a
# shell it names the domain
lv_domain 'sp ce$x' 16M
expect_fail 1 "(virsh shutdown 'bvt-$$-sp ce\$x'), or restore" bv restore "$repo" "$s_other" --libvirt="$LV_DOM"
cmd=$(sed -n 's/.*shut it down first (\(virsh shutdown .*\)), or restore.*/\1/p' "$T/.err")
eval "set -- $cmd"
assert_eq "$#:$3" "3:$LV_DOM" "the words of the printed command ($cmd)"
lv_virsh destroy "$LV_DOM" >/dev/null

expect_fail 1 "error: domain '$dom' has several disks (vda, vdb): name the one to restore into with --libvirt=$dom:TARGET" \
    bv restore "$repo" "$s_other" --libvirt="$dom"
expect_fail 1 "error: domain '$dom' has no disk 'vdz' (its disks: vda, vdb)" bv restore "$repo" "$s_other" --libvirt="$dom:vdz"
expect_fail 1 "error: no domain 'bvt-$$-none' at qemu:///system: " bv restore "$repo" "$s_other" --libvirt="bvt-$$-none"
expect_fail 2 "error: --libvirt names where to restore: no DEST, --in-place or --force with it" \
    bv restore "$repo" "$s_other" "$T/x.raw" --libvirt="$dom"
expect_fail 2 "error: invalid --libvirt '$dom:' (DOMAIN or DOMAIN:TARGET, such as vm1:vda)" \
    bv restore "$repo" "$s_other" --libvirt="$dom:"
bv restore "$repo" "$s_other" --libvirt="$dom:vda" -q
lv_copy "$dom" vda "$T/vda.raw"
assert_same "$T/data.raw" "$T/vda.raw"

# another size: nothing written, the resize named
lv_domain --no-start small 8M
expect_fail 1 "but snapshot ${s_other:0:8} is 16.0 MiB (16777216 bytes): nothing was written; resize the image first (qemu-img resize -f qcow2 $(lv_image "$LV_DOM" vda) 16777216)" \
    bv restore "$repo" "$s_other" --libvirt="$LV_DOM"

# a raw disk, the domain's only one: the default target
raw=$LV_IMAGES/bvt-$$-raw-vda.raw
truncate -s 16M "$raw"
lv_domain_xml --no-start raw "<disk type='file' device='disk'><driver name='qemu' type='raw'/><source file='$raw'/><target dev='vda' bus='virtio'/></disk>"
ino=$(stat -c %i "$raw")
bv restore "$repo" "$s_other" --libvirt="bvt-$$-raw" -q
assert_eq "$(stat -c %i "$raw")" "$ino" "the raw image was replaced, not written"
lv_virsh start "bvt-$$-raw" >/dev/null || die "the raw domain does not start after the restore"
lv_copy "bvt-$$-raw" vda "$T/raw.out"
assert_same "$T/data.raw" "$T/raw.out"
echo "PASS"
