#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A failure anywhere leaves nothing behind, and the next run cleans up what it finds:
#   - blkvault killed with -9 mid-backup leaves libvirt's backup job active (libvirt keeps a job
#     after its client is gone); the next run ends it (its socket is blkvault's, the domain's lock
#     free), removes its files, and backs up incrementally from the last good snapshot;
#   - a backup job of another tool is never touched: the backup fails naming its socket;
#   - the domain destroyed mid-backup: a clear error naming it, nothing published, no job, socket
#     or scratch file left; after a restart the next backup works;
#   - checkpoints: after each good run only the one the newest snapshot recorded is left of the
#     repository's (older ones deleted); the killed run's, of another repository, is left to that
#     repository, whose next good run deletes it; another tool's checkpoint survives;
#   - a repository whose filesystem fills up mid-backup: exit 6 as blkvault(1) says (it was 1),
#     nothing published, nothing left.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/libvirt/libvirt-lib.sh"
need_cmd python3
repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
lv_domain --no-start cl 16M
dom=$LV_DOM
img=$(lv_image "$dom" vda)
randfile "$T/rand" 16 cleanup
qemu-img convert -f raw -O qcow2 "$T/rand" "$img"
lv_virsh start "$dom" >/dev/null
uuid=$(lv_virsh domuuid "$dom")
sock=/var/lib/libvirt/qemu/blkvault-$uuid.sock
nothing_left() { lv_nothing_left "$dom" "$1"; }
snapshots() { bv list "$1" --json | python3 -c 'import json, sys; d = json.load(sys.stdin); print(len(d if isinstance(d, list) else d["snapshots"]))'; }

lv_virsh checkpoint-create-as "$dom" other-tool-cp >/dev/null
bv backup "$repo" "libvirt:$dom" --json >"$T/b1.json"
cp1=$(jget "$T/b1.json" 'd["checkpoint"]')

# killed with -9 while it reads, held in its first pack writes: into an empty repository (into
# $repo nothing would be written, every chunk being there already)
lv_write "$dom" vda "write -P 0x21 1M 64k"
bv init "$T/repo-k" --encryption=none >/dev/null
BV_STALL_WRITE=1 stall_start $((2 * 1024 * 1024)) "$T/k.err" "$BLKVAULT" backup "$T/repo-k" "libvirt:$dom"
kill -KILL "$pid"
wait "$pid" 2>/dev/null || true
lv_job_active "$dom" || die "the killed run left no job (the test no longer shows the leftover)"
[ -S "$sock" ] || die "the killed run left no socket"
[ "$(lv_ours "$dom" | wc -w)" = 2 ] || die "the killed run made no checkpoint: $(lv_ours "$dom")"
killed=$(lv_ours "$dom" | tr ' ' '\n' | grep -vx "$cp1")
sorted() { printf '%s\n' "$@" | sort | xargs; }

lv_copy "$dom" vda "$T/vda.2"
bv backup "$repo" "libvirt:$dom" --json >"$T/b2.json" 2>"$T/b2.err" || { cat "$T/b2.err" >&2; die "the run after the kill failed"; }
grep -q "ended the backup job of '$dom' that a run which died left (socket $sock)" "$T/b2.err" ||
    { cat "$T/b2.err" >&2; die "the run after the kill did not say it ended the leftover job"; }
assert_eq "$(jget "$T/b2.json" 'd["ended_job"]')" "$sock" "ended_job"
assert_eq "$(jget "$T/b2.json" 'd["disks"][0].get("incremental_from", "")')" "$cp1" "after the kill: from the last good checkpoint"
nothing_left "after the run that followed the kill"
bv restore "$repo" "$dom-vda" "$T/out" >/dev/null
assert_same "$T/out" "$T/vda.2"
rm -f "$T/out"
cp2=$(jget "$T/b2.json" 'd["checkpoint"]')
assert_eq "$(lv_ours "$dom")" "$(sorted "$cp2" "$killed")" "blkvault's checkpoints after the run (the first deleted, not repo-k's)"
bv backup "$T/repo-k" "libvirt:$dom" --json >"$T/bk.json" 2>"$T/bk.err" || { cat "$T/bk.err" >&2; die "repo-k's run after the kill failed"; }
ck=$(jget "$T/bk.json" 'd["checkpoint"]')
assert_eq "$(lv_ours "$dom")" "$(sorted "$cp2" "$ck")" "blkvault's checkpoints after repo-k's run (the killed run's deleted)"
grep -qx other-tool-cp <<<"$(lv_virsh checkpoint-list "$dom" --name)" || die "another tool's checkpoint was deleted"

# another tool's backup job: not touched, named
cat >"$T/other.xml" <<X
<domainbackup mode='pull'><server transport='unix' socket='/var/lib/libvirt/qemu/bvt-$$-other.sock'/><disks><disk name='vda' backup='yes' type='file'><scratch file='$LV_IMAGES/other-scratch.qcow2'/></disk></disks></domainbackup>
X
lv_virsh backup-begin "$dom" "$T/other.xml" >/dev/null
on_exit "lv_virsh domjobabort $dom"
expect_fail 7 "runs a backup job that is not blkvault's (socket /var/lib/libvirt/qemu/bvt-$$-other.sock): not touched" \
    bv backup "$repo" "libvirt:$dom"
lv_job_active "$dom" || die "blkvault ended another tool's job"
lv_virsh domjobabort "$dom"

# destroyed mid-backup: an error naming the domain, nothing published, nothing left
bv init "$T/repo-d" --encryption=none >/dev/null
BV_STALL_WRITE=1 stall_start $((2 * 1024 * 1024)) "$T/d.err" "$BLKVAULT" backup "$T/repo-d" "libvirt:$dom"
lv_virsh destroy "$dom" >/dev/null
touch "$T/gate"
rc=0; wait "$pid" || rc=$?
[ $rc = 1 ] || { cat "$T/d.err" >&2; die "the backup of a destroyed domain exited $rc"; }
grep -q "backup of disk vda of '$dom' failed (nothing was published for it): the domain stopped during the backup" "$T/d.err" ||
    { cat "$T/d.err" >&2; die "no clear error for the destroyed domain"; }
assert_eq "$(snapshots "$T/repo-d")" 0 "snapshots after the destroyed run"
nothing_left "after the domain was destroyed"
lv_virsh start "$dom" >/dev/null
lv_copy "$dom" vda "$T/vda.3"
bv backup "$repo" "libvirt:$dom" --json >"$T/b3.json" 2>"$T/b3.err" || { cat "$T/b3.err" >&2; die "the run after the restart failed"; }
bv restore "$repo" "$dom-vda" "$T/out" >/dev/null
assert_same "$T/out" "$T/vda.3"
nothing_left "after the run that followed the restart"
# repo-d's next good run deletes the checkpoint of its destroyed run (no snapshot recorded it)
bv backup "$T/repo-d" "libvirt:$dom" --json >"$T/bd.json" 2>"$T/bd.err" || { cat "$T/bd.err" >&2; die "repo-d's run failed"; }
assert_eq "$(lv_ours "$dom")" "$(sorted "$(jget "$T/b3.json" 'd["checkpoint"]')" "$ck" "$(jget "$T/bd.json" 'd["checkpoint"]')")" \
    "blkvault's checkpoints at the end"
grep -qx other-tool-cp <<<"$(lv_virsh checkpoint-list "$dom" --name)" || die "another tool's checkpoint was deleted"

# a full repository: 12 MiB of random data into a 16 MiB filesystem
mount_small_fs "$T/small" 16M
bv init "$T/small/repo" --encryption=none >/dev/null
lv_write "$dom" vda "write -P 0x5a 0 1M"
head -c 12M /dev/urandom >"$LV_IMAGES/rnd"; chmod 644 "$LV_IMAGES/rnd"
lv_write "$dom" vda "write -s $LV_IMAGES/rnd 1M 12M"
expect_fail 6 "backup of disk vda of '$dom' failed (nothing was published for it): No space left on device" \
    bv backup "$T/small/repo" "libvirt:$dom" --no-freeze
assert_eq "$(snapshots "$T/small/repo")" 0 "snapshots after the run that filled the repository"
nothing_left "after the repository filled up"
echo ok
