#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# backup REPO libvirt:DOMAIN of a domain renamed between backups, and of a transient one:
#   - renamed (virsh domrename, shut off; libvirt 9.0 moves its checkpoints along): a snapshot
#     name that stays (--name, as a job's) stays incremental from the checkpoint its parent
#     recorded (the pairing goes by the domain's UUID, not by "libvirt:OLD-NAME", which read
#     whole "of another source"); the default name (NEW-vda) is new: a full read that says so;
#     the checkpoint of the old default name (OLD-vda), which no backup picks again, is deleted;
#   - transient (virsh create, never defined): full, then incremental; created again from its
#     XML (same UUID) its checkpoints are gone: a full read with the reason, not a failure.
# Each snapshot restored bit-exact against the disk at its backup.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/libvirt/libvirt-lib.sh"
need_cmd python3
repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
lv_domain rn 16M
n=0
disk() { jget "$T/b$n.json" "d['disks'][0].get('$1', '')"; }
# bk DOM NAME [ARGS]: writes, backs up DOM (its only disk) as NAME, restores NAME bit-exact
bk() {
    n=$((n + 1))
    local d=$1 name=$2; shift 2
    lv_write "$d" vda "write -P $((n + 32)) $((n * 1024))k 64k"
    lv_copy "$d" vda "$T/vda.$n"
    bv backup "$repo" "libvirt:$d" --json "$@" >"$T/b$n.json" 2>"$T/b$n.err" || { cat "$T/b$n.err" >&2; die "backup $n failed"; }
    bv restore "$repo" "$name" "$T/out" >/dev/null
    cmp "$T/out" "$T/vda.$n" || die "backup $n: the snapshot $name is not the disk"
    rm -f "$T/out"
    cp=$(jget "$T/b$n.json" 'd["checkpoint"]')
    echo "backup $n ($name): $(disk stats | python3 -c 'import ast,sys; print(ast.literal_eval(sys.stdin.read())["bytes_read"])') bytes read, from '$(disk incremental_from)' $(disk read_whole_because)"
}

old=$LV_DOM new=$LV_DOM-new
bk "$old" "$old-vda"
bk "$old" vm --name=vm
cp_vm=$cp
lv_virsh destroy "$old" >/dev/null
lv_virsh domrename "$old" "$new" >/dev/null || die "virsh domrename failed"
_lv_domains+=("$new")
lv_virsh start "$new" >/dev/null || die "cannot start $new"
assert_eq "$(lv_ours "$new" | wc -w)" 2 "checkpoints that went along with the rename"

bk "$new" vm --name=vm
assert_eq "$(disk incremental_from) '$(disk read_whole_because)'" "$cp_vm ''" "the renamed domain's backup as vm"
assert_eq "$(disk stats | python3 -c 'import ast,sys; print(ast.literal_eval(sys.stdin.read())["bytes_read"])')" 65536 \
    "bytes read by the renamed domain's incremental backup"
cp_vm=$cp
bk "$new" "$new-vda"
assert_eq "$(disk read_whole_because)" "no earlier snapshot is named '$new-vda'" "the new default name"
assert_eq "$(lv_ours "$new")" "$(printf '%s\n' "$cp_vm" "$cp" | sort | xargs)" \
    "blkvault's checkpoints after the rename (the old default name's deleted)"

# transient
lv_virsh destroy "$new" >/dev/null
tr=bvt-$$-tr
qemu-img create -q -f qcow2 "$LV_IMAGES/$tr-vda.qcow2" 16M
lv_virsh dumpxml --inactive "$new" | sed -e "s|<name>$new</name>|<name>$tr</name>|" -e '/<uuid>/d' \
    -e "s|$LV_IMAGES/[^']*\.qcow2|$LV_IMAGES/$tr-vda.qcow2|" >"$T/tr.xml"
lv_virsh create "$T/tr.xml" >/dev/null || die "cannot create the transient domain"
_lv_domains+=("$tr")
info=$(lv_virsh dominfo "$tr")
grep -q '^Persistent: *no' <<<"$info" || die "$tr is not transient: $info"
bk "$tr" "$tr-vda"
assert_eq "$(disk read_whole_because)" "no earlier snapshot is named '$tr-vda'" "the transient domain's first backup"
cp1=$cp
bk "$tr" "$tr-vda"
assert_eq "$(disk incremental_from)" "$cp1" "the transient domain's second backup"
assert_eq "$(lv_ours "$tr")" "$cp" "the transient domain's checkpoints"
lv_virsh dumpxml "$tr" >"$T/tr2.xml"
lv_virsh destroy "$tr" >/dev/null
lv_virsh create "$T/tr2.xml" >/dev/null || die "cannot create the transient domain again"
assert_eq "$(lv_ours "$tr")" "" "checkpoints of the transient domain created again"
cp2=$cp
bk "$tr" "$tr-vda"
case $(disk read_whole_because) in "checkpoint '$cp2', which snapshot "*" recorded, no longer exists in libvirt") ;;
    *) die "the transient domain created again read whole because '$(disk read_whole_because)'" ;; esac
assert_eq "$(lv_ours "$tr")" "$cp" "the transient domain's checkpoints after it was created again"
lv_nothing_left "$tr" "the end"
echo PASS
