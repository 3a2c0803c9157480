#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# What backups of running domains leave in libvirt, tidied by the library (src/lib/virt/virt-tidy.c)
# against the real libvirtd: a backup job a dead blkvault left (socket blkvault-UUID.sock, the
# domain's lock free) is aborted and its scratch file and socket go; a job that is another tool's
# is never touched, nor one of a run that holds the domain's lock (EBUSY, named); blkvault's checkpoints no snapshot needs are deleted and
# every other checkpoint (another prefix, a kept one, one only named like ours) survives.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/libvirt/libvirt-lib.sh"
vt() { "$VIRT_TOOL" "$@"; }

lv_domain tidy 16M
dom=$LV_DOM
# begin_job SOCKET [CHECKPOINT]: a pull-mode backup job of vda as a blkvault run would begin it
begin_job() {
    local cp=""
    cat >"$T/b.xml" <<X
<domainbackup mode='pull'><server transport='unix' socket='$1'/><disks><disk name='vda' backup='yes' type='file'><scratch file='$LV_IMAGES/scratch-vda.qcow2'/></disk></disks></domainbackup>
X
    [ -z "${2:-}" ] || { echo "<domaincheckpoint><name>$2</name></domaincheckpoint>" >"$T/c.xml"; cp=$T/c.xml; }
    lv_virsh backup-begin "$dom" "$T/b.xml" $cp >/dev/null || die "backup-begin $1 failed"
    on_exit "lv_virsh domjobabort $dom"
}
job_active() { local i; i=$(lv_virsh domjobinfo "$dom"); [[ $i == *Operation:*Backup* ]]; }

# no job: nothing to do
assert_eq "$(vt tidy "$dom")" "no backup job" "tidy without a job"

# a job whose blkvault died (kill -9): the lock is free; aborted, scratch and socket removed
uuid=$(lv_virsh domuuid "$dom")
sock=/var/lib/libvirt/qemu/blkvault-$uuid.sock
begin_job "$sock" blkvault-t-20261127T000001Z-000000c1
[ -S "$sock" ] && [ -f "$LV_IMAGES/scratch-vda.qcow2" ] || die "the job has no socket or scratch file"
assert_eq "$(vt tidy "$dom")" "aborted $sock" "tidy of a dead run's job"
job_active && die "the dead run's job is still active"
[ -e "$sock" ] && die "its socket $sock is left"
[ -e "$LV_IMAGES/scratch-vda.qcow2" ] && die "its scratch file is left"

# a job of another tool: not touched, named
begin_job "/var/lib/libvirt/qemu/bvt-$$-other.sock"
expect_fail 1 "virt-tool: tidy: domain '$dom' runs a backup job that is not blkvault's (socket /var/lib/libvirt/qemu/bvt-$$-other.sock): not touched \[EBUSY\]" vt tidy "$dom"
job_active || die "tidy aborted another tool's job"
lv_virsh domjobabort "$dom"

# a job of a live run (it holds the domain's lock): not touched
lock=/run/lock/blkvault-libvirt-$uuid.lock
( exec 9>"$lock"; flock 9; exec sleep 600 ) & live=$!
on_exit "kill $live; rm -f $lock"
for _ in $(seq 50); do flock -n "$lock" true || break; sleep 0.1; done
begin_job "$sock"
expect_fail 1 "virt-tool: tidy: domain '$dom' is being backed up by another blkvault run (it holds $lock) \[EBUSY\]" vt tidy "$dom"
job_active || die "tidy aborted a live run's job"
lv_virsh domjobabort "$dom"

# checkpoints: blkvault-t-20261127T000001Z-000000c1 (from above), c2, c3 of the prefix, one of another tool's
# and one only named like ours (blkvault-t-mine: by hand, or another tool's), never deleted
for c in blkvault-t-20261127T000002Z-000000c2 blkvault-t-20261127T000003Z-000000c3 other-c1 blkvault-u-20261127T000001Z-000000c1 \
    blkvault-t-mine; do
    begin_job "/var/lib/libvirt/qemu/bvt-$$-cp.sock" "$c"
    lv_virsh domjobabort "$dom"
done
assert_eq "$(vt prune "$dom" blkvault-t- blkvault-t-20261127T000003Z-000000c3)" "deleted 2" "checkpoints pruned"
assert_eq "$(lv_virsh checkpoint-list "$dom" --name | sort | xargs)" "blkvault-t-20261127T000003Z-000000c3 blkvault-t-mine blkvault-u-20261127T000001Z-000000c1 other-c1" \
    "checkpoints left"
# the kept one still gives an incremental backup
cat >"$T/i.xml" <<X
<domainbackup mode='pull'><incremental>blkvault-t-20261127T000003Z-000000c3</incremental><server transport='unix' socket='/var/lib/libvirt/qemu/bvt-$$-i.sock'/><disks><disk name='vda' backup='yes' type='file'><scratch file='$LV_IMAGES/scratch-vda.qcow2'/></disk></disks></domainbackup>
X
lv_virsh backup-begin "$dom" "$T/i.xml" >/dev/null || die "incremental from the kept checkpoint failed"
lv_virsh domjobabort "$dom"
# an empty prefix would be everyone's: refused
expect_fail 1 "virt-tool: prune: .*\[EINVAL\]" vt prune "$dom" ""
assert_eq "$(lv_virsh checkpoint-list "$dom" --name | wc -l)" 4 "checkpoints after a refused prune"
echo ok
