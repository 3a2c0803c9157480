#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Usage errors of a libvirt source (issue 24), said before any connection (no libvirtd needed):
# "libvirt:" without a domain name says the source needs one (it said the source did not exist);
# a disk named twice, by --disk or in a job's disk = list, is refused, as is
# an empty --libvirt-uri (libvirt would take it for its default); --disk without a libvirt source.
# (A copy-to list naming a remote twice is refused as a disk list is.)
. "$SOURCE_ROOT/tests/lib.sh"
repo=$T/repo
bv init "$repo" --encryption=none >/dev/null

expect_fail 2 "^error: source 'libvirt:' names no domain: write libvirt:DOMAIN (virsh list --all lists them)$" \
    bv backup "$repo" libvirt:
expect_fail 2 "^error: source 'libvirt:' names no domain" bv backup "$repo" libvirt: --disk=vda
expect_fail 2 "^error: --disk=vda is given twice (each disk is backed up once)$" \
    bv backup "$repo" libvirt:web01 --disk=vda --disk=vdb --disk=vda
expect_fail 2 "^error: --libvirt-uri needs a URI (qemu:///system ...)$" bv backup "$repo" libvirt:web01 --libvirt-uri=
expect_fail 2 "^error: --disk, --libvirt-uri and --no-freeze need a libvirt source (libvirt:DOMAIN)$" \
    bv backup "$repo" "$T/none" --disk=vda

# a job's disk = list naming a target twice; so a target's copy-to list naming a remote twice
printf '[job web]\nsource = libvirt:web01\ndisk = vda, vdb vda\n' >"$T/v.conf"
expect_fail 1 "^$T/v.conf:3: disk names disk 'vda' twice$" bv config check --config="$T/v.conf"
printf '[job web]\nsource = libvirt:web01\ndisk = vda, vdb\n' >"$T/v.conf"
bv config check --config="$T/v.conf" >/dev/null || die "disk = vda, vdb was refused"
printf '[job web]\nsource = /dev/sdb\ncopy-to = home, home\n' >"$T/v.conf"
expect_fail 1 "^$T/v.conf:3: copy-to names remote name 'home' twice$" bv config check --config="$T/v.conf"
echo "PASS"
