#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# libvirtd restarted while blkvault reads a running domain's backup job (held in a pack write by
# tests/fault/stall.so, the job's export being read): blkvault either fails with an error that
# says libvirtd went away, publishing nothing, or completes with a snapshot that is the disk at
# the job's start bit for bit; either way no backup job, socket or scratch file is left, and the
# next run succeeds (incremental from the last good checkpoint, or a full read with the reason)
# and restores bit-exact. libvirtd is restarted the way it ran (lv_restart_libvirtd) and is left
# running as the test found it.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/libvirt/libvirt-lib.sh"
need_cmd python3
repo=$T/repo
bv init "$repo" --encryption=none --compression=none >/dev/null
lv_domain --no-start rs 32M
dom=$LV_DOM
img=$(lv_image "$dom" vda)
randfile "$T/rand" 32 restart
qemu-img convert -f raw -O qcow2 "$T/rand" "$img"
lv_virsh start "$dom" >/dev/null
uuid=$(lv_virsh domuuid "$dom")
nothing_left() {
    lv_nothing_left "$dom" "$1"
    ls /var/lib/libvirt/qemu/ | grep -q "blkvault-$uuid" && die "files of the job were left ($1)" || true
}
snapshots() { bv list "$1" --json | python3 -c 'import json, sys; d = json.load(sys.stdin); print(len(d if isinstance(d, list) else d["snapshots"]))'; }

bv backup "$repo" "libvirt:$dom" --json >"$T/b1.json"
cp1=$(jget "$T/b1.json" 'd["checkpoint"]')

# 12 MiB of new incompressible data (qemu-io reads it as QEMU's user: under $LV_IMAGES), so that
# the incremental run writes packs and is held in them
randfile "$LV_IMAGES/new" 12 restart-new
chmod 644 "$LV_IMAGES/new"
lv_write "$dom" vda "write -s $LV_IMAGES/new 4M 12M"
lv_copy "$dom" vda "$T/vda.1"
cmp -s "$T/vda.1" "$T/rand" && die "the write into the running disk changed nothing"
BV_STALL_WRITE=1 stall_start $((1 << 20)) "$T/held.err" "$BLKVAULT" backup "$repo" "libvirt:$dom" --json
lv_job_active "$dom" || die "no backup job runs while blkvault is held"
old=$(cat /run/libvirtd.pid)
lv_restart_libvirtd
[ "$(cat /run/libvirtd.pid)" != "$old" ] || die "libvirtd was not restarted"
echo "libvirtd restarted ($old -> $(cat /run/libvirtd.pid)) while blkvault was held in its read"
lv_virsh domstate "$dom" | grep -q running || die "$dom stopped with libvirtd's restart"
touch "$T/gate"
rc=0; wait "$pid" 2>/dev/null || rc=$?
cat "$T/held.err"
if [ $rc = 0 ]; then
    echo "the held backup completed across the restart: checking it bit for bit"
    assert_eq "$(snapshots "$repo")" 2 "snapshots after the held run"
    bv restore "$repo" "$dom-vda" "$T/out" >/dev/null
    assert_same "$T/out" "$T/vda.1"
    rm -f "$T/out"
else
    [ $rc = 1 ] || die "the backup across libvirtd's restart exited $rc"
    grep -q "backup of disk vda of '$dom' failed (nothing was published for it): the connection to libvirtd was lost during the backup (libvirtd restarted?)" "$T/held.err" ||
        die "no clear error for libvirtd's restart"
    assert_eq "$(snapshots "$repo")" 1 "snapshots after the run libvirtd's restart broke"
fi
nothing_left "after the run across libvirtd's restart"

# the next run: incremental from the last good checkpoint, or a full read with the reason
lv_write "$dom" vda "write -P 0x5c 1M 64k"
lv_copy "$dom" vda "$T/vda.2"
bv backup "$repo" "libvirt:$dom" --json >"$T/b3.json" 2>"$T/b3.err" || { cat "$T/b3.err" >&2; die "the run after libvirtd's restart failed"; }
cat "$T/b3.err"
from=$(jget "$T/b3.json" 'd["disks"][0].get("incremental_from", "")')
why=$(jget "$T/b3.json" 'd["disks"][0].get("read_whole_because", "")')
if [ -n "$from" ]; then
    echo "the run after the restart read incrementally from checkpoint $from"
else
    [ -n "$why" ] || die "the run after the restart read whole without a reason"
    echo "the run after the restart read whole: $why"
fi
nothing_left "after the run that followed libvirtd's restart"
bv restore "$repo" "$dom-vda" "$T/out" >/dev/null
assert_same "$T/out" "$T/vda.2"
assert_eq "$(lv_ours "$dom")" "$(jget "$T/b3.json" 'd["checkpoint"]')" "blkvault's checkpoints at the end"
echo "first checkpoint $cp1"
echo ok
