#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# backup libvirt:DOMAIN with devices that are no backable disk (issue 24, red team), with the
# machine's libvirtd and QEMU (TCG): a CD-ROM with an ISO, an empty CD-ROM and a network disk are
# left out of a default backup; named with --disk each is refused with what it is and what to do
# (before: libvirt's "unsupported configuration: no disks selected for backup"); a domain with
# only such devices says so and how to see them.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/libvirt/libvirt-lib.sh"

repo=$T/repo
bv init "$repo" --encryption=none >/dev/null

# domain_xml NAME DEVICES...: a TCG domain of those <disk> elements
domain_xml() {
    local name=$1; shift
    cat <<XML
<domain type='qemu'><name>$name</name><memory unit='MiB'>64</memory><vcpu>1</vcpu>
<os><type arch='x86_64' machine='pc'>hvm</type></os><on_reboot>destroy</on_reboot>
<devices><emulator>$(command -v qemu-system-x86_64)</emulator>$*</devices></domain>
XML
}
mkdir -p "$LV_IMAGES"
img=$LV_IMAGES/dev-vda.qcow2
iso=$LV_IMAGES/dev.iso
qemu-img create -q -f qcow2 "$img" 16M
head -c 1M /dev/zero >"$iso"
vda="<disk type='file' device='disk'><driver name='qemu' type='qcow2'/><source file='$img'/><target dev='vda' bus='virtio'/></disk>"
hdc="<disk type='file' device='cdrom'><driver name='qemu' type='raw'/><source file='$iso'/><target dev='hdc' bus='ide'/><readonly/></disk>"
hdd="<disk type='file' device='cdrom'><driver name='qemu' type='raw'/><target dev='hdd' bus='ide'/><readonly/></disk>"
vdb="<disk type='network' device='disk'><driver name='qemu' type='raw'/><source protocol='nbd' name='x'><host name='127.0.0.1' port='1'/></source><target dev='vdb' bus='virtio'/></disk>"

dom=bvt-$$-dev
domain_xml "$dom" "$vda$hdc$hdd" >"$T/dev.xml"
lv_virsh define "$T/dev.xml" >/dev/null || die "cannot define $dom"
_lv_domains+=("$dom")
lv_virsh start "$dom" >/dev/null || die "cannot start $dom"

# by default only vda
bv backup "$repo" "libvirt:$dom" --no-freeze >"$T/out" 2>&1 || { cat "$T/out" >&2; die "the default backup failed"; }
assert_eq "$(bv list "$repo" --json | grep -o '"name":"[^"]*"' | sort -u | xargs)" "name:$dom-vda" "snapshots of the default backup"

expect_fail 2 "error: 'hdc' of domain '$dom' is no disk (a CD-ROM or floppy: libvirt backs up none): leave it out of --disk" \
    bv backup "$repo" "libvirt:$dom" --no-freeze --disk=hdc
expect_fail 2 "error: 'hdd' of domain '$dom' is no disk (a CD-ROM or floppy: libvirt backs up none): leave it out of --disk" \
    bv backup "$repo" "libvirt:$dom" --no-freeze --disk=vda --disk=hdd
lv_virsh domjobinfo "$dom" | grep -q 'None' || die "a refused backup left a job"

# shut off, a network disk named: the same words
net=bvt-$$-net
domain_xml "$net" "$vda$vdb" >"$T/net.xml"
lv_virsh define "$T/net.xml" >/dev/null || die "cannot define $net"
_lv_domains+=("$net")
expect_fail 1 "error: disk 'vdb' of domain '$net' has no image file or block device (an empty drive, or a network disk, which blkvault does not back up): leave it out of --disk" \
    bv backup "$repo" "libvirt:$net" --disk=vdb

# only a CD-ROM: nothing to back up, and how to see why
cd=bvt-$$-cd
domain_xml "$cd" "$hdc" >"$T/cd.xml"
lv_virsh define "$T/cd.xml" >/dev/null || die "cannot define $cd"
_lv_domains+=("$cd")
expect_fail 1 "error: domain '$cd' has no disk to back up: only CD-ROMs, empty drives or network disks (virsh domblklist --details $cd shows each device)" \
    bv backup "$repo" "libvirt:$cd"
echo PASS
