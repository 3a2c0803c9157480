#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# backup REPO libvirt:DOMAIN across disks hot-plugged and hot-unplugged between backups (virsh
# attach-disk / detach-disk --live): the new disk is read whole with the reason, the others stay
# incremental; once a disk is unplugged, the checkpoint its last snapshot recorded is deleted
# (no checkpoint of blkvault's is kept for a disk the domain no longer has: each one costs every
# other disk a bitmap too); another image plugged in as the same target is read whole, never
# through the old disk's map. Each snapshot restored bit-exact against the disk at its backup.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/libvirt/libvirt-lib.sh"
need_cmd python3
repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
lv_domain hp 16M
dom=$LV_DOM
n=0
disk() { jget "$T/b$n.json" "[k for k in d['disks'] if k['disk'] == '$1'][0].get('$2', '')"; }
# backup_all TARGET...: writes to each, backs up, restores each disk's snapshot bit-exact
backup_all() {
    n=$((n + 1))
    local t
    for t in "$@"; do
        lv_write "$dom" "$t" "write -P $((n + 32)) $((n * 1024))k 64k"
        lv_copy "$dom" "$t" "$T/$t.$n"
    done
    bv backup "$repo" "libvirt:$dom" --json >"$T/b$n.json" 2>"$T/b$n.err" || { cat "$T/b$n.err" >&2; die "backup $n failed"; }
    assert_eq "$(jget "$T/b$n.json" '" ".join(k["disk"] for k in d["disks"])')" "$*" "disks of backup $n"
    for t in "$@"; do
        bv restore "$repo" "$dom-$t" "$T/out" >/dev/null
        cmp "$T/out" "$T/$t.$n" || die "backup $n: the snapshot of $t is not the disk"
        rm -f "$T/out"
        echo "backup $n $t: $(disk "$t" stats | python3 -c 'import ast,sys; print(ast.literal_eval(sys.stdin.read())["bytes_read"])') bytes read, from '$(disk "$t" incremental_from)' $(disk "$t" read_whole_because)"
    done
    cp=$(jget "$T/b$n.json" 'd["checkpoint"]')
}
plug() { # TARGET IMAGE
    qemu-img create -q -f qcow2 "$2" 16M
    qemu-io -f qcow2 -c "write -P 0x61 0 2M" "$2" >/dev/null
    chown libvirt-qemu: "$2" 2>/dev/null || true
    # on USB: its unplug needs no guest to answer (a virtio disk's waits for the guest's ACPI)
    lv_virsh attach-disk "$dom" "$2" "$1" --driver qemu --subdriver qcow2 --targetbus usb --live >/dev/null ||
        die "cannot attach $2 as $1"
}

backup_all vda
cp1=$cp
# plugged in: sdb read whole (no earlier snapshot), vda incremental from backup 1
plug sdb "$LV_IMAGES/$dom-sdb.qcow2"
backup_all vda sdb
assert_eq "$(disk vda incremental_from)" "$cp1" "vda after sdb was plugged in"
case $(disk sdb read_whole_because) in "no earlier snapshot is named '$dom-sdb'") ;;
    *) die "sdb read whole because '$(disk sdb read_whole_because)'" ;; esac
cp2=$cp
backup_all vda sdb
assert_eq "$(disk vda incremental_from) $(disk sdb incremental_from)" "$cp2 $cp2" "both incremental from backup 2"
cp3=$cp
assert_eq "$(lv_ours "$dom")" "$cp3" "blkvault's checkpoints after backup 3"

# unplugged: vda incremental; sdb's last checkpoint is no longer kept
lv_virsh detach-disk "$dom" sdb --live >/dev/null || die "cannot detach sdb"
for _ in $(seq 50); do grep -q '^ *sdb ' <<<"$(lv_virsh domblklist "$dom")" || break; sleep 0.2; done
backup_all vda
assert_eq "$(disk vda incremental_from)" "$cp3" "vda after sdb was unplugged"
assert_eq "$(lv_ours "$dom")" "$cp" "blkvault's checkpoints after sdb was unplugged (only the new one)"
cp4=$cp

# another image plugged in as sdb: read whole with a reason, vda still incremental
plug sdb "$LV_IMAGES/$dom-sdb2.qcow2"
backup_all vda sdb
assert_eq "$(disk vda incremental_from)" "$cp4" "vda after another sdb was plugged in"
[ -n "$(disk sdb read_whole_because)" ] || die "the new sdb was not read whole"
assert_eq "$(disk sdb incremental_from)" "" "the new sdb's incremental_from"
echo PASS
