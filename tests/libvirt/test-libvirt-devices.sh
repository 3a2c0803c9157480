#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# backup libvirt:DOMAIN with devices that are no backable disk (issue 24, red team), with the
# machine's libvirtd and QEMU (TCG): a CD-ROM with an ISO, an empty CD-ROM and a network disk are
# left out of a default backup; named with --disk each is refused with what it is and what to do
# (before: libvirt's "unsupported configuration: no disks selected for backup"); a domain with
# only such devices says so and how to see them. A running domain's raw disk, which libvirt never
# checkpoints, is read whole every time and says why (it said nothing).
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
job=$(lv_job_type "$dom")
[ "$job" = None ] || die "a refused backup left a job (job type '$job')"

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

# a raw disk of a running domain: read whole each time, with the reason, in text and JSON
raw=bvt-$$-raw
truncate -s 16M "$LV_IMAGES/raw.img"
domain_xml "$raw" "<disk type='file' device='disk'><driver name='qemu' type='raw'/><source file='$LV_IMAGES/raw.img'/><target dev='vda' bus='virtio'/></disk>" >"$T/raw.xml"
lv_virsh define "$T/raw.xml" >/dev/null || die "cannot define $raw"
_lv_domains+=("$raw")
lv_virsh start "$raw" >/dev/null || die "cannot start $raw"
why="it is a raw image, of which libvirt keeps no checkpoint (no dirty bitmap): every backup reads it whole (a qcow2 disk backs up incrementally)"
bv backup "$repo" "libvirt:$raw" --no-freeze >"$T/raw1.out" 2>&1 || { cat "$T/raw1.out" >&2; die "the raw disk's backup failed"; }
grep -Fq "read disk vda whole: $why" "$T/raw1.out" || { cat "$T/raw1.out" >&2; die "no reason for reading the raw disk whole"; }
bv backup "$repo" "libvirt:$raw" --no-freeze --json >"$T/raw2.json" 2>"$T/raw2.err" || { cat "$T/raw2.err" >&2; die "the second raw backup failed"; }
assert_eq "$(jget "$T/raw2.json" 'd["disks"][0]["read_whole_because"]')" "$why" "the raw disk's reason in --json"
echo PASS
