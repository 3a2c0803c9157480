#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A job with source = libvirt:DOMAIN (issue 24), run as the units run it (`blkvault job run`) on
# two registered drives, each with its own repository, against a real running domain with two
# disks: one snapshot per disk named JOB-TARGET, verified; the second run after a write is
# incremental on both drives (each from its own checkpoint: bytes read at most the dirty
# granules), and neither drive's run deletes the other's checkpoints; keep-last prunes per disk
# name; `status` shows each disk's last good backup (text and JSON); every snapshot restores
# bit-exact; the runs have the units' UMask=0077 (the scratch directory stays reachable by QEMU's
# user). disk = vda backs up one disk, named JOB. A checkpoint named as before repositories had
# prefixes, which no snapshot here recorded, is left alone.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/libvirt/libvirt-lib.sh"
need_cmd losetup mkfs.ext4 python3
[ -e /dev/loop-control ] || skip "no loop devices"

conf=$T/etc/blkvault.conf
mkdir -p "$T/etc" "$T/mnt"
export BLKVAULT_STATE_DIR=$T/state
opts=(--config="$conf" --run-dir="$T/run")
devs=()
for n in 1 2; do
    loop_target "devs[$n]" "usb-$n" 300M "${opts[@]}"
done
lv_domain job 64M 32M
dom=$LV_DOM
cat >"$conf" <<EOF
[job web]
source = libvirt:$dom
targets = usb-1, usb-2
keep-last = 2
[job one]
source = libvirt:$dom
disk = vda
targets = usb-1
EOF

# job_run NAME: as the units run it, with their UMask=0077
job_run() { (umask 077 && bv job run "$1" "${opts[@]}"); }
ours() { lv_virsh checkpoint-list "$dom" --name | grep '^blkvault-' | sort | xargs; }
# on_drive N CMD...: CMD with $repo the repository on drive N (mounted meanwhile) and $key its key
on_drive() {
    local n=$1; shift
    mount "${devs[$n]}" "$T/mnt" || die "cannot mount usb-$n"
    repo=$T/mnt/blkvault key=$T/keys/usb-$n.key
    "$@"
    local rc=$?
    umount "$T/mnt"
    return $rc
}
list_json() { bv list "$repo" --key-file="$key" --json >"$1"; }
restore_to() { bv restore "$repo" "$1" "$2" --key-file="$key" >/dev/null; }

# a legacy checkpoint (no repository id in its name) no snapshot here recorded: another's, kept
lv_virsh checkpoint-create-as "$dom" blkvault-20261101T000000Z-0badc0de >/dev/null ||
    die "cannot create a legacy-named checkpoint"
lv_write "$dom" vda "write -P 0x11 0 1M" "write -P 0x22 20M 512k"
lv_write "$dom" vdb "write -P 0x33 1M 256k"
lv_copy "$dom" vda "$T/vda.1"
lv_copy "$dom" vdb "$T/vdb.1"
job_run web >"$T/out1" 2>"$T/err1" || { cat "$T/out1" "$T/err1"; die "first job run"; }
for t in usb-1 usb-2; do
    grep -qx "target $t: 1 jobs, 0 failed, .* new; safe to unplug" "$T/out1" || { cat "$T/out1"; die "$t summary"; }
done
assert_eq "$(grep -c "^job web: domain $dom, 2 disks, .* new, verified$" "$T/out1")" 2 "job lines of the first run"
assert_eq "$(grep -c "^job web: disk vda: snapshot [0-9a-f]\{8\} (web-vda), .* read whole$" "$T/out1")" 2 "vda read whole"
grep -q "^job web: disk vdb: read whole: no earlier snapshot is named 'web-vdb'$" "$T/out1" ||
    { cat "$T/out1"; die "the first run's reason for a full read"; }
# no guest agent in this domain: the job says its backup is crash-consistent, as backup does
grep -q "no guest agent answers (.*): the backup of '$dom' is crash-consistent" "$T/err1" ||
    { cat "$T/err1"; die "the job did not say how consistent its backup is"; }
cps1=$(ours)
assert_eq "$(wc -w <<<"$cps1")" 3 "checkpoints after the first run (one per drive, the legacy one)"

# the second run: a write in between, incremental on both drives, each from its own checkpoint
lv_write "$dom" vda "write -P 0x44 3M 64k" "write -P 0x55 40M 128k"
lv_copy "$dom" vda "$T/vda.2"
lv_copy "$dom" vdb "$T/vdb.2"
job_run web >"$T/out2" 2>"$T/err2" || { cat "$T/out2" "$T/err2"; die "second job run"; }
assert_eq "$(grep -c "^job web: disk vda: snapshot [0-9a-f]\{8\} (web-vda), .* incremental from checkpoint 'blkvault-[0-9a-f]\{16\}-" "$T/out2")" 2 \
    "vda incremental on both drives"
assert_eq "$(grep -c "^job web: disk vdb: .*, 0 B read, .* incremental from checkpoint" "$T/out2")" 2 \
    "the unchanged vdb read nothing on both drives"
cps2=$(ours)
assert_eq "$(wc -w <<<"$cps2")" 3 "checkpoints after the second run (each drive's newest, the legacy one)"
grep -q 'blkvault-20261101T000000Z-0badc0de' <<<"$cps2" || die "the legacy checkpoint of no snapshot here was deleted"
for c in $cps1; do
    [ "$c" = blkvault-20261101T000000Z-0badc0de ] && continue
    ! grep -qw "$c" <<<"$cps2" || die "checkpoint $c of the first run was kept"
done

for n in 1 2; do
    check_drive() {
        list_json "$T/list$n.json"
        local ids
        ids=$(jget "$T/list$n.json" '" ".join(s["snapshot"] for s in d if s["name"] == "web-vda")')
        assert_eq "$(wc -w <<<"$ids")" 2 "web-vda snapshots on usb-$n"
        # each drive's second snapshot of vda read only its dirty granules, from its own checkpoint
        local read cp id
        read=$(jget "$T/list$n.json" '[s for s in d if s["name"] == "web-vda"][-1]["stats"]["bytes_read"]')
        echo "usb-$n: incremental read of vda: $read bytes (dirty: 196608)"
        [ "$read" -gt 0 ] && [ "$read" -le $((192 * 1024)) ] || die "usb-$n read $read bytes of vda incrementally"
        cp=$(jget "$T/list$n.json" '[s for s in d if s["name"] == "web-vda"][-1]["source"]["libvirt"]["checkpoint"]')
        id=$(bv info "$repo" --key-file="$key" --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["repository"][:16])')
        case $cp in "blkvault-$id-"*) ;; *) die "usb-$n's checkpoint $cp does not name its repository $id" ;; esac
        grep -qw "$cp" <<<"$cps2" || die "usb-$n's checkpoint $cp is gone"
        restore_to web-vda "$T/out.vda"
        assert_same "$T/vda.2" "$T/out.vda"
        restore_to web-vdb "$T/out.vdb"
        assert_same "$T/vdb.2" "$T/out.vdb"
        restore_to "${ids%% *}" "$T/out.vda1"
        assert_same "$T/vda.1" "$T/out.vda1"
        rm -f "$T"/out.*
    }
    on_drive $n check_drive
done

# status: each disk's last good backup (the newest over the drives), incremental
bv status --config="$conf" >"$T/status"
grep -q "^job web (libvirt:$dom): last run .* on usb-[12]: ok; last good backup" "$T/status" ||
    { cat "$T/status"; die "status: job web's line"; }
for d in vda vdb; do
    grep -q "^job web: disk $d: last good backup [0-9T:-]*Z on usb-[12]: snapshot [0-9a-f]\{8\} (web-$d), incremental$" "$T/status" ||
        { cat "$T/status"; die "status: disk $d"; }
done
bv status --config="$conf" --json >"$T/status.json"
assert_eq "$(jget "$T/status.json" '[(x["disk"], x["name"], x["incremental"]) for x in [j for j in d["jobs"] if j["name"] == "web"][0]["disks"]]')" \
    "[('vda', 'web-vda', True), ('vdb', 'web-vdb', True)]" "status --json: disks"

# keep-last = 2: a third run forgets each disk's oldest snapshot on each drive
lv_write "$dom" vdb "write -P 0x66 2M 64k"
lv_copy "$dom" vdb "$T/vdb.3"
job_run web >"$T/out3" 2>"$T/err3" || { cat "$T/out3" "$T/err3"; die "third job run"; }
assert_eq "$(grep -c '^job web: retention kept 4 snapshots, forgot 2' "$T/out3")" 2 "retention per disk name"
prune_check() {
    list_json "$T/list3.json"
    assert_eq "$(jget "$T/list3.json" '" ".join(sorted(s["name"] for s in d))')" "web-vda web-vda web-vdb web-vdb" \
        "snapshots on usb-1 after keep-last = 2"
    restore_to web-vdb "$T/out.vdb"
    assert_same "$T/vdb.3" "$T/out.vdb"
}
on_drive 1 prune_check

# disk = vda: one disk, named after the job alone
job_run one >"$T/out4" 2>"$T/err4" || { cat "$T/out4" "$T/err4"; die "job one"; }
grep -q "^job one: disk vda: snapshot [0-9a-f]\{8\} (one), " "$T/out4" || { cat "$T/out4"; die "job one's disk line"; }
grep -q "^job one: domain $dom, 1 disk, " "$T/out4" || { cat "$T/out4"; die "job one's line"; }
one_check() {
    list_json "$T/list4.json"
    assert_eq "$(jget "$T/list4.json" '[s["source"]["libvirt"]["disk"] for s in d if s["name"] == "one"]')" "['vda']" \
        "job one's snapshot"
}
on_drive 1 one_check
grep -q "blkvault-20261101T000000Z-0badc0de" <<<"$(ours)" || die "the legacy checkpoint was deleted at last"
echo "libvirt job: ok"
