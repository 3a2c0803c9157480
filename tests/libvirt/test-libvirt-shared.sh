#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# backup REPO libvirt:DOMAIN of two running domains that share a raw disk (<shareable/>):
#   - the shared disk is left out with a warning (and in --json shared_disks_left_out): a
#     backup job cannot hold it at one instant (the other domain writes it past this QEMU's
#     copy-before-write filter, and QEMU 7.2 refuses the filter its lock; given to libvirt 9.0's
#     job, libvirtd crashed: tried here); the domain's own disks are backed up, libvirtd lives;
#   - --disk=vdb (the shared one) is refused with the reason (exit 2), nothing begun;
#   - both domains backed up at once into one repository (--wait) and into two, each restored
#     bit-exact; the same domain into two repositories at once: the second run is refused by
#     the domain's lock, the first is unharmed and its checkpoint the only one left.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/libvirt/libvirt-lib.sh"
need_cmd python3
mkdir -p "$LV_IMAGES"
shared=$LV_IMAGES/shared.raw
truncate -s 16M "$shared"
define() { # NAME
    local name=bvt-$$-$1
    qemu-img create -q -f qcow2 "$LV_IMAGES/$name-vda.qcow2" 16M
    lv_domain_xml "$1" "<disk type='file' device='disk'><driver name='qemu' type='qcow2'/><source file='$LV_IMAGES/$name-vda.qcow2'/><target dev='vda' bus='virtio'/></disk>
<disk type='file' device='disk'><driver name='qemu' type='raw' cache='none'/><source file='$shared'/><target dev='vdb' bus='virtio'/><shareable/></disk>"
}
define a
define b
a=bvt-$$-a b=bvt-$$-b
bv init "$T/repo" --encryption=none >/dev/null
bv init "$T/repo2" --encryption=none >/dev/null
lv_write "$a" vdb "write -P 0x41 0 1M"
lv_write "$b" vdb "write -P 0x42 2M 1M"

# one domain: vdb left out with a warning, vda backed up, libvirtd still answers
lv_write "$a" vda "write -P 0x43 0 1M"
lv_copy "$a" vda "$T/a-vda.1"
bv backup "$T/repo" "libvirt:$a" --json >"$T/a.json" 2>"$T/a.err" || { cat "$T/a.err"; die "backup of $a failed"; }
cat "$T/a.err"
lv_virsh version >/dev/null 2>&1 || die "libvirtd no longer answers after the backup of a domain with a shared disk"
assert_eq "$(jget "$T/a.json" '[k["disk"] for k in d["disks"]], d["shared_disks_left_out"]')" "(['vda'], 'vdb')" \
    "disks backed up and left out"
grep -q "warning: not backed up: disk(s) vdb of '$a', shared with other domains (<shareable/>)" "$T/a.err" ||
    die "no warning that the shared disk was left out"
bv restore "$T/repo" "$a-vda" "$T/out" -q
assert_same "$T/out" "$T/a-vda.1"
rm -f "$T/out"
expect_fail 2 "error: disk 'vdb' of domain '$a' is shared with other domains (<shareable/>): a backup job cannot hold it at one instant" \
    bv backup "$T/repo" "libvirt:$a" --disk=vdb
lv_nothing_left "$a" "after --disk=vdb"

# both at once, into one repository (one waits for the other) and into two
for i in 1 2; do
    lv_write "$a" vda "write -P $((0x50 + i)) $((i * 2))M 64k"
    lv_write "$b" vda "write -P $((0x60 + i)) $((i * 2))M 64k"
    lv_copy "$a" vda "$T/a.$i"
    lv_copy "$b" vda "$T/b.$i"
    r1=$T/repo r2=$T/repo
    [ $i = 2 ] && r2=$T/repo2
    bv backup "$r1" "libvirt:$a" --wait 2>"$T/a$i.err" >/dev/null & pa=$!
    bv backup "$r2" "libvirt:$b" --wait 2>"$T/b$i.err" >/dev/null & pb=$!
    wait $pa || { cat "$T/a$i.err"; die "round $i: the backup of $a failed"; }
    wait $pb || { cat "$T/b$i.err"; die "round $i: the backup of $b failed"; }
    bv restore "$r1" "$a-vda" "$T/out" -q && assert_same "$T/out" "$T/a.$i"
    rm -f "$T/out"
    bv restore "$r2" "$b-vda" "$T/out" -q && assert_same "$T/out" "$T/b.$i"
    rm -f "$T/out"
    lv_nothing_left "$a" "round $i"
    lv_nothing_left "$b" "round $i"
done

# the same domain into two repositories at once: the domain's lock refuses the second
[ -f "${VIRTGATE:-}" ] || die "VIRTGATE (tests/fault/virtgate.so) is not built"
rm -f "$T/vgate" "$T/vgate.waiting"
(exec env LD_PRELOAD="$VIRTGATE" ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" BV_VIRT_GATE="$T/vgate" \
    "$BLKVAULT" backup "$T/repo" "libvirt:$a" --json >"$T/g.json" 2>"$T/g.err") &
gpid=$!
on_exit "kill -KILL $gpid"
for _ in $(seq 300); do [ -e "$T/vgate.waiting" ] && break; sleep 0.1; done
[ -e "$T/vgate.waiting" ] || { cat "$T/g.err"; die "blkvault never reached virDomainBackupBegin"; }
rc=0
bv backup "$T/repo2" "libvirt:$a" 2>"$T/x.err" >/dev/null || rc=$?
cat "$T/x.err"
[ $rc != 0 ] || die "a second backup of $a ran while the first held the domain"
grep -q "domain '$a' is being backed up by another blkvault run" "$T/x.err" || die "no clear error for the second run"
touch "$T/vgate"
wait $gpid || { cat "$T/g.err"; die "the first backup failed beside the refused second"; }
lv_nothing_left "$a" "after the two runs"
assert_eq "$(lv_ours "$a")" "$(jget "$T/g.json" 'd["checkpoint"]')" "checkpoints of $a after the refused second run"
echo PASS
