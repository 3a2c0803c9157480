#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# backup --used-only: a GPT image with an ext4 partition whose free blocks hold hundreds of MiB of
# deleted random files, and a partition without a filesystem. Only what ext4 uses is read (its
# block bitmaps, through libext2fs) and the unknown partition whole; the free blocks become holes.
# The restored image passes e2fsck -fn and its files equal the originals. An image another process
# has open for writing, and a device mounted read-write, are read whole, saying why; a device
# mounted read-only is read used-only.
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd losetup sfdisk mkfs.ext4 e2fsck python3 openssl
MIB=1048576
repo=$T/repo
mkdir -p "$T/mnt" "$T/orig"
bv init "$repo" --encryption=none >/dev/null

# jq-like: json_get FILE EXPR (a Python expression on d)
# wait_no_writer FILE: until nobody has FILE open for writing (a read lease can be taken): a
# process killed, or a loop device detached, lets go of it a moment later
wait_no_writer() {
    python3 - "$1" <<'PY' || die "$1 is still open for writing"
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
for _ in range(100):
    try:
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK)
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
        sys.exit(0)
    except OSError:
        time.sleep(0.1)
sys.exit(1)
PY
}

json_get() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

truncate -s 768M "$T/disk.img"
printf 'label: gpt\n,600M,L\n,32M,L\n' | sfdisk -q "$T/disk.img"
part() { # part VAR N [LOSETUP-ARGS]: a loop device over partition N of disk.img
    local start size
    read -r start size < <(sfdisk -J "$T/disk.img" | python3 -c "
import json, sys
p = json.load(sys.stdin)['partitiontable']['partitions'][$2 - 1]
print(p['start'] * 512, p['size'] * 512)")
    attach_loop "$1" "${@:3}" -o "$start" --sizelimit "$size" "$T/disk.img"
}
part p1 1
part p2 2
mkfs.ext4 -q -L used-ext4 "$p1"
randfile "$T/p2.data" 32 used-p2
dd if="$T/p2.data" of="$p2" bs=1M conv=fsync status=none
mount "$p1" "$T/mnt"
# deleted data: written, synced, removed; ext4 does not zero freed blocks
for i in 1 2 3; do randfile "$T/mnt/junk$i" 100 "junk-$i"; done
sync
rm "$T/mnt"/junk*
sync
# what stays: random files (incompressible), a tree, a symbolic link
randfile "$T/orig/big" 48 keep-big
mkdir -p "$T/orig/dir/sub"
for i in 1 2 3 4; do randfile "$T/orig/dir/f$i" 1 "keep-$i"; done
seq 1 100000 >"$T/orig/dir/sub/numbers"
ln -s dir/sub/numbers "$T/orig/link"
cp -a "$T/orig/." "$T/mnt/"
umount "$T/mnt"
detach_loop "$p1"
detach_loop "$p2"

# a whole read, for comparison
bv backup "$repo" "$T/disk.img" --name=whole --json -q >"$T/whole.json"
whole_read=$(json_get "$T/whole.json" 'd["stats"]["bytes_read"]')
whole_stored=$(json_get "$T/whole.json" 'd["stats"]["bytes_stored"]')
# --used-only of the same, unchanged image under the same name: read, not the whole snapshot's
# map taken unread ("unchanged since snapshot ...: not read" kept the free blocks' old data)
bv backup "$repo" "$T/disk.img" --name=whole --used-only >"$T/again.out" 2>&1 || { cat "$T/again.out"; die "--used-only after a whole backup"; }
if grep -q "not read (--force-read reads it)" "$T/again.out"; then cat "$T/again.out"; die "--used-only took the whole snapshot's map"; fi
grep -q "unchanged since snapshot .*, but that one was read whole: read it" "$T/again.out" || { cat "$T/again.out"; die "no note on the whole parent"; }
grep -qxF "p2: 32.0 MiB read whole because no filesystem found" "$T/again.out" || { cat "$T/again.out"; die "--used-only after a whole backup did not map the partitions"; }

# used blocks only (a new name: nothing to dedup against but the whole one's chunks)
bv init "$T/repo2" --encryption=none >/dev/null
bv backup "$T/repo2" "$T/disk.img" --name=used --used-only --json -q >"$T/used.json" 2>"$T/used.err"
[ ! -s "$T/used.err" ] || { cat "$T/used.err" >&2; die "--used-only complained"; }
assert_eq "$(json_get "$T/used.json" 'd["used_only"].get("read_whole_because", "")')" ""
assert_eq "$(json_get "$T/used.json" '[(p["number"], p.get("fstype"), p.get("reader")) for p in d["used_only"]["partitions"]]')" \
    "[(1, 'ext4', 'libext2fs'), (2, None, None)]"
assert_eq "$(json_get "$T/used.json" 'd["used_only"]["partitions"][1]["read_whole_because"]')" "no filesystem found"
used=$(json_get "$T/used.json" 'd["used_only"]["partitions"][0]["bytes_used"]')
skipped=$(json_get "$T/used.json" 'd["used_only"]["bytes_free_skipped"]')
unknown=$(json_get "$T/used.json" 'sum(p["bytes_unknown"] for p in d["used_only"]["partitions"])')
read=$(json_get "$T/used.json" 'd["stats"]["bytes_read"]')
stored=$(json_get "$T/used.json" 'd["stats"]["bytes_stored"]')
files=$(du -sb "$T/orig" | cut -f1)
echo "whole: read $whole_read, stored $whole_stored; --used-only: read $read, stored $stored;" \
     "ext4 uses $used (files $files), $skipped free skipped, $unknown unknown"
# ext4's own metadata (journal, inode tables, bitmaps) on top of the files: at most 48 MiB
[ "$used" -ge "$files" ] && [ "$used" -le $((files + 48 * MIB)) ] || die "ext4 said $used bytes used for $files of files"
[ "$skipped" -ge $((400 * MIB)) ] || die "only $skipped bytes skipped of ~500 MiB free"
[ "$unknown" -eq $((32 * MIB)) ] || die "unknown bytes: $unknown, not the 32 MiB partition"
# read: at most 1.2x what is in use, plus the unknown partition and the partition table's
[ "$read" -le $(( used * 12 / 10 + unknown + 2 * MIB )) ] || die "--used-only read $read bytes"
# 300 MiB of deleted data, of which the 52 MiB of files kept may have taken over some blocks:
# a whole read reads at least 248 MiB more than --used-only (250 was seen missed by 1 MB)
[ "$whole_read" -ge $((read + 200 * MIB)) ] || die "a whole read ($whole_read) is not much more than --used-only ($read)"
[ "$stored" -le $(( (files + unknown) * 12 / 10 )) ] || die "--used-only stored $stored bytes"
[ "$stored" -le $((whole_stored / 3)) ] || die "--used-only stored $stored, a whole backup $whole_stored"
echo "ratio read/used: $(python3 -c "print(round($read / $used, 3))"), stored/(files+unknown):" \
     "$(python3 -c "print(round($stored / ($files + $unknown), 3))")"
grep -qxF "p2: 32.0 MiB read whole because no filesystem found" < <(bv backup "$T/repo2" "$T/disk.img" \
    --name=used --used-only --force-read 2>&1) || die "no summary line for p2"

# restored: e2fsck passes, the files are the same, the unknown partition too
bv restore "$T/repo2" used "$T/restored.img" >/dev/null
cmp <(head -c 1M "$T/disk.img") <(head -c 1M "$T/restored.img") || die "the partition table differs"
mv "$T/disk.img" "$T/disk.orig"
mv "$T/restored.img" "$T/disk.img"
part r1 1 -r
part r2 2 -r
e2fsck -fn "$r1" >"$T/fsck.out" 2>&1 || { cat "$T/fsck.out" >&2; die "e2fsck -fn of the restored ext4"; }
cmp "$r2" "$T/p2.data" || die "the unknown partition differs"
mount -o ro "$r1" "$T/mnt"
on_exit "umount -l '$T/mnt'"
diff -r --no-dereference "$T/orig" "$T/mnt" -x lost+found || die "restored files differ"
umount "$T/mnt"
detach_loop "$r1"
detach_loop "$r2"
mv "$T/disk.img" "$T/restored.img"
mv "$T/disk.orig" "$T/disk.img"

# another process has the image open for writing: read whole, saying why
sleep 600 3>>"$T/disk.img" &
writer=$!
on_exit "kill $writer"
bv backup "$T/repo2" "$T/disk.img" --name=used --used-only --force-read --json >"$T/w.json" 2>"$T/w.err"
kill "$writer"
wait_no_writer "$T/disk.img"
why="another process has it open for writing"
assert_eq "$(json_get "$T/w.json" 'd["used_only"]["read_whole_because"]')" "$why"
grep -qxF "warning: '$T/disk.img' read whole, not only its used blocks: $why" "$T/w.err" ||
    { cat "$T/w.err" >&2; die "no warning for an image open for writing"; }
[ "$(json_get "$T/w.json" 'd["stats"]["bytes_read"]')" -ge $((read + 250 * MIB)) ] ||
    die "an image open for writing: not a whole read"

# the image changes while it is read (a writer that came after the check): its mtime and ctime
# differ at the end, so the backup fails and publishes nothing (a fresh repository: it writes)
bv init "$T/repo3" --encryption=none >/dev/null
BV_STALL_WRITE=1 stall_start $((8 * MIB)) "$T/stale.err" \
    "$BLKVAULT" backup "$T/repo3" "$T/disk.img" --name=stale --used-only -q
touch "$T/disk.img"
touch "$T/gate"
rc=0
wait "$pid" || rc=$?
assert_eq "$rc" 1 "a backup of an image that changed under it: exit status"
assert_eq "$(cat "$T/stale.err")" "error: backup of '$T/disk.img' failed: it changed while its used blocks were read \
(another process wrote it; nothing was published): Stale file handle"
bv list "$T/repo3" --json | python3 -c 'import json,sys; assert json.load(sys.stdin) == []' ||
    die "a backup of an image that changed under it was published"

# the ext4 partition as a device: mounted read-write it is read whole, read-only it is mapped
part d1 1
mount "$d1" "$T/mnt"
bv backup "$T/repo2" "$d1" --name=dev --used-only --json >"$T/rw.json" 2>"$T/rw.err"
why=$(json_get "$T/rw.json" 'd["used_only"]["read_whole_because"]')
assert_eq "$why" "/dev/${d1#/dev/} is mounted read-write on '$T/mnt'"
grep -qF "warning: '$d1' read whole, not only its used blocks: $why" "$T/rw.err" ||
    { cat "$T/rw.err" >&2; die "no warning for a device mounted read-write"; }
assert_eq "$(json_get "$T/rw.json" 'd["stats"]["bytes_read"]')" $((600 * MIB)) "a device mounted read-write: a whole read"
umount "$T/mnt"
mount -o ro "$d1" "$T/mnt"
bv backup "$T/repo2" "$d1" --name=dev --used-only --json -q >"$T/ro.json" 2>"$T/ro.err"
assert_eq "$(json_get "$T/ro.json" 'd["used_only"].get("read_whole_because", "")')" ""
assert_eq "$(json_get "$T/ro.json" '[(p["number"], p.get("reader")) for p in d["used_only"]["partitions"]]')" \
    "[(0, 'libext2fs')]"
ro_read=$(json_get "$T/ro.json" 'd["stats"]["bytes_read"]')
[ "$ro_read" -le $(( used * 12 / 10 + MIB )) ] || die "a device mounted read-only: --used-only read $ro_read"
umount "$T/mnt"
echo "a device mounted read-only: read $ro_read of 600 MiB"
# a read-write loop device over the image writes it too
bv backup "$T/repo2" "$T/disk.img" --name=used --used-only --force-read --json >"$T/l.json" 2>/dev/null
assert_eq "$(json_get "$T/l.json" 'd["used_only"]["read_whole_because"]')" "another process has it open for writing"
detach_loop "$d1"
wait_no_writer "$T/disk.img"

# a job with used-only = yes, run to a drive: the same map, the run says what it did not read
conf=$T/etc/blkvault.conf
mkdir -p "$T/etc"
opts=(--config="$conf" --run-dir="$T/run")
loop_target drive usb-u 1G "${opts[@]}"
cat >"$conf" <<CONF
[job img]
source = $T/disk.img
used-only = yes
CONF
bv job run img "${opts[@]}" >"$T/job.out" 2>"$T/job.err" || { cat "$T/job.out" "$T/job.err" >&2; die "job run"; }
grep -qE "^job img: read [0-9.]+ MiB of 768.0 MiB \([0-9]+ bytes\), only the used blocks: [0-9.]+ MiB free not read$" \
    "$T/job.out" || { cat "$T/job.out" "$T/job.err" >&2; die "the job's run did not say it read only used blocks"; }
# another process writes the image: the job reads it whole, with the reason
sleep 600 3>>"$T/disk.img" &
writer=$!
on_exit "kill $writer"
bv job run img "${opts[@]}" >"$T/job.out" 2>"$T/job.err" || { cat "$T/job.out" "$T/job.err" >&2; die "job run 2"; }
kill "$writer"
grep -qxF "warning: job img: read whole, not only its used blocks: another process has it open for writing" \
    "$T/job.err" || { cat "$T/job.out" "$T/job.err" >&2; die "no warning from the job"; }

# an MBR table with an extended partition: its logical ext4 is mapped, the container's boot
# records are read, the restore passes e2fsck
truncate -s 200M "$T/mbr.img"
printf 'label: dos\n,20M,L\n,,E\n,,L\n' | sfdisk -q "$T/mbr.img"
read -r start size < <(sfdisk -J "$T/mbr.img" | python3 -c "
import json, sys
p = json.load(sys.stdin)['partitiontable']['partitions'][2]
print(p['start'] * 512, p['size'] * 512)")
attach_loop lg -o "$start" --sizelimit "$size" "$T/mbr.img"
mkfs.ext4 -q "$lg"
mount "$lg" "$T/mnt"
randfile "$T/mnt/junk" 100 mbr-junk
sync
rm "$T/mnt/junk"
cp "$T/orig/dir/f1" "$T/mnt/"
umount "$T/mnt"
detach_loop "$lg"
wait_no_writer "$T/mbr.img"
bv backup "$T/repo2" "$T/mbr.img" --used-only --json >"$T/mbr.json" 2>"$T/mbr.err"
assert_eq "$(json_get "$T/mbr.json" '[(p["number"], p.get("reader"), p.get("read_whole_because")) for p in d["used_only"]["partitions"]]')" \
    "[(1, None, 'no filesystem found'), (2, None, 'an extended partition: its logical ones are listed each'), (5, 'libext2fs', None)]"
[ "$(json_get "$T/mbr.json" 'd["used_only"]["bytes_free_skipped"]')" -ge $((100 * MIB)) ] || die "MBR: free space not skipped"
bv restore "$T/repo2" mbr.img "$T/mbr-restored.img" >/dev/null
attach_loop lg -r -o "$start" --sizelimit "$size" "$T/mbr-restored.img"
e2fsck -fn "$lg" >"$T/fsck.out" 2>&1 || { cat "$T/fsck.out" >&2; die "e2fsck -fn of the restored logical ext4"; }
