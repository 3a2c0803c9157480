#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# backup REPO libvirt:DOMAIN of a running domain with two disks: one pull-mode job for both (one
# snapshot each, DOMAIN-TARGET), then an incremental one from the checkpoint the first recorded,
# reading at most the dirty extents (64 KiB granularity); every snapshot restored bit-exact
# against qemu-img convert -U of the disk as it was at that backup (nothing written between the
# copy and the backup); the job ended and its socket and scratch files gone after each run.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/libvirt/libvirt-lib.sh"
need_cmd python3
repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
lv_domain two 64M 32M
dom=$LV_DOM
uuid=$(lv_virsh domuuid "$dom")

no_job_left() {
    local job
    job=$(lv_job_type "$dom")
    [ "$job" = None ] || die "a job still runs on $dom (job type '$job')"
    [ ! -e "/var/lib/libvirt/qemu/blkvault-$uuid.d" ] || die "the scratch directory was left"
    [ ! -e "/var/lib/libvirt/qemu/blkvault-$uuid.sock" ] || die "the socket was left"
}
# backup_timed LABEL JSON ARGS...: a backup of the domain, its --json in JSON, its time printed
backup_timed() {
    local label=$1 out=$2 t0 t1; shift 2
    t0=$(date +%s.%N)
    bv backup "$repo" "libvirt:$dom" --json "$@" >"$out"
    t1=$(date +%s.%N)
    echo "$label: $(python3 -c "print(round($t1 - $t0, 2))") s"
}
check_restore() { # SNAPSHOT-NAME COPY
    bv restore "$repo" "$1" "$T/out" >/dev/null
    assert_same "$T/out" "$2"
    rm -f "$T/out"
}

lv_write "$dom" vda "write -P 0x11 0 1M" "write -P 0x22 20M 512k"
lv_write "$dom" vdb "write -P 0x33 1M 256k"
lv_copy "$dom" vda "$T/vda.1"
lv_copy "$dom" vdb "$T/vdb.1"
backup_timed "full backup of 96 MiB (2 disks)" "$T/b1.json"
cp=$(jget "$T/b1.json" 'd["checkpoint"]')
case $cp in blkvault-*) ;; *) die "checkpoint '$cp' is not blkvault's" ;; esac
assert_eq "$(jget "$T/b1.json" '" ".join(x["name"] for x in d["disks"])')" "$dom-vda $dom-vdb" "snapshot names"
assert_eq "$(jget "$T/b1.json" 'd["disks"][0]["read_whole_because"]')" "no earlier snapshot is named '$dom-vda'" "first: why whole"
grep -qx "$cp" <<<"$(lv_virsh checkpoint-list "$dom" --name)" || die "libvirt has no checkpoint $cp"
no_job_left
check_restore "$dom-vda" "$T/vda.1"
check_restore "$dom-vdb" "$T/vdb.1"
# the record: domain, UUID, disk, virtual size, checkpoint
bv list "$repo" --json >"$T/list.json"
assert_eq "$(jget "$T/list.json" '[s["source"]["libvirt"] for s in (d if isinstance(d, list) else d["snapshots"]) if s["name"].endswith("-vdb")][0]')" \
    "{'domain': '$dom', 'uuid': '$uuid', 'disk': 'vdb', 'disk_size': 33554432, 'checkpoint': '$cp'}" "recorded libvirt member"

# the disk changes: 64 KiB at 3 MiB and 128 KiB at 40 MiB (whole granules), vdb not at all
lv_write "$dom" vda "write -P 0x44 3M 64k" "write -P 0x55 40M 128k"
lv_copy "$dom" vda "$T/vda.2"
lv_copy "$dom" vdb "$T/vdb.2"
backup_timed "incremental backup" "$T/b2.json"
cp2=$(jget "$T/b2.json" 'd["checkpoint"]')
[ "$cp2" != "$cp" ] || die "the second backup made no checkpoint of its own"
assert_eq "$(jget "$T/b2.json" 'd["disks"][0]["incremental_from"]')" "$cp" "vda counted from"
assert_eq "$(jget "$T/b2.json" 'd["disks"][0]["changed_from"]')" "$(jget "$T/b1.json" 'd["disks"][0]["snapshot"]')" "vda's parent"
read_vda=$(jget "$T/b2.json" 'd["disks"][0]["stats"]["bytes_read"]')
read_vdb=$(jget "$T/b2.json" 'd["disks"][1]["stats"]["bytes_read"]')
echo "incremental read: vda $read_vda bytes, vdb $read_vdb bytes"
[ "$read_vda" -le $((64 * 1024 + 128 * 1024)) ] || die "the incremental read $read_vda bytes of vda (dirty: 196608)"
[ "$read_vda" -gt 0 ] || die "the incremental read nothing of vda"
[ "$read_vdb" = 0 ] || die "the incremental read $read_vdb bytes of the unchanged vdb"
no_job_left
check_restore "$dom-vda" "$T/vda.2"
check_restore "$dom-vdb" "$T/vdb.2"
# the first snapshots still restore as they were
first_vda=$(jget "$T/b1.json" 'd["disks"][0]["snapshot"]')
check_restore "$first_vda" "$T/vda.1"

# --full-read-every=2: the third backup reads whole, and the bitmap is checked against it
lv_write "$dom" vda "write -P 0x66 5M 64k"
lv_copy "$dom" vda "$T/vda.3"
bv backup "$repo" "libvirt:$dom" --disk=vda --full-read-every=2 --json >"$T/b3.json"
assert_eq "$(jget "$T/b3.json" 'len(d["disks"])')" 1 "--disk=vda: one disk"
case $(jget "$T/b3.json" 'd["disks"][0].get("read_whole_because", "")') in *full-read-every*) ;;
    *) die "--full-read-every=2 did not read whole" ;; esac
assert_eq "$(jget "$T/b3.json" 'd["disks"][0]["stats"].get("bytes_map_wrong", 0)')" 0 "bitmap wrong"
check_restore "$dom-vda" "$T/vda.3"
no_job_left

# --name with one disk is the snapshot's name; a disk the domain lacks is refused, named
bv backup "$repo" "libvirt:$dom" --disk=vdb --name=only-b --json >"$T/b4.json"
assert_eq "$(jget "$T/b4.json" 'd["disks"][0]["name"]')" only-b "--name with one disk"
expect_fail 2 "domain '$dom' has no disk 'vdz'" bv backup "$repo" "libvirt:$dom" --disk=vdz
expect_fail 1 "no domain is named 'bvt-$$-none'" bv backup "$repo" "libvirt:bvt-$$-none"
no_job_left
echo ok
