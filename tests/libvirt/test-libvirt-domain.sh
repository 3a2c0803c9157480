#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The library's libvirt wrappers (src/lib/virt) against the real libvirtd: the connection's URI
# (argument, LIBVIRT_DEFAULT_URI, default), a domain by name and by UUID, its disks (target,
# source, format, virtual size) running and shut off, and errors as an errno plus libvirt's words,
# with nothing printed by libvirt itself.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/libvirt/libvirt-lib.sh"
vt() { "$VIRT_TOOL" "$@"; }

# the URI: the environment's, the argument's, else qemu:///system
assert_eq "$(vt connect)" qemu:///system "URI from LIBVIRT_DEFAULT_URI"
assert_eq "$(env -u LIBVIRT_DEFAULT_URI "$VIRT_TOOL" connect)" qemu:///system "default URI"
assert_eq "$(LIBVIRT_DEFAULT_URI=qemu:///system?x=1 vt --uri=qemu:///system connect)" qemu:///system "URI argument"

# a daemon that does not answer: ECONNREFUSED and libvirt's words, one line, nothing else
expect_fail 1 'virt-tool: connect: .*nonexistent.*\[ECONNREFUSED\]' vt --uri='qemu+unix:///system?socket=/nonexistent' connect
assert_eq "$(wc -l <"$T/.err")" 1 "lines on stderr (libvirt printed something itself?)"
expect_fail 1 'virt-tool: connect: no connection driver available for nosuchdriver:///x \[EINVAL\]' vt --uri='nosuchdriver:///x' connect
assert_eq "$(wc -l <"$T/.err")" 1 "lines on stderr for a bad URI"

# a running domain with two disks
lv_domain two 64M 32M
dom=$LV_DOM
read -r name uuid state < <(vt domain "$dom")
assert_eq "$name" "$dom" "domain name"
assert_eq "$state" running "state"
assert_eq "$uuid" "$(lv_virsh domuuid "$dom")" "UUID"
assert_eq "$(vt domain "$uuid" | cut -d' ' -f1)" "$dom" "domain by UUID"
vt disks "$dom" >"$T/disks"
cat >"$T/want" <<W
vda disk file qcow2 67108864 $LV_IMAGES/$dom-vda.qcow2
vdb disk file qcow2 33554432 $LV_IMAGES/$dom-vdb.qcow2
W
assert_same "$T/disks" "$T/want"

# shut off: the same disks, from the inactive XML
lv_domain --no-start off 48M
assert_eq "$(vt domain "$LV_DOM" | cut -d' ' -f3)" shut-off "state of a defined domain"
assert_eq "$(vt disks "$LV_DOM")" "vda disk file qcow2 50331648 $LV_IMAGES/$LV_DOM-vda.qcow2" "disks shut off"

# a domain that does not exist: ENOENT, named
expect_fail 1 "virt-tool: domain: no domain is named 'bvt-$$-none' \[ENOENT\]" vt domain "bvt-$$-none"
assert_eq "$(wc -l <"$T/.err")" 1 "lines on stderr for a missing domain"
echo "ok"
