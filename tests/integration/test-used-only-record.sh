#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A snapshot records that it was taken --used-only ("used_only" in its record, per partition), info
# shows it, and the unchanged-file shortcut takes a parent's map only when the parent was read as
# this backup reads: a whole backup of an unchanged image after a --used-only one reads it (its
# restore holds the deleted files' bytes the free blocks still hold, as the image does), and a
# --used-only backup after a --used-only one of the same unchanged image takes its map unread.
# No root: the GPT image and its ext4 are made by sfdisk and mke2fs on a file, the files deleted
# with debugfs, which frees their blocks without zeroing them.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd mkfs.ext4 sfdisk debugfs python3 openssl
json_get() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }
MIB=1048576
img=$T/disk.img
repo=$T/repo

# old data everywhere first, then a GPT with an ext4 (p1, 48 MiB) and a partition without one (p2)
randfile "$img" 64 old-data
printf 'label: gpt\nstart=2048,size=98304,type=L\nstart=100352,size=16384,type=L\n' | sfdisk -q "$img"
mkdir -p "$T/files/dir"
randfile "$T/files/junk" 16 deleted-junk
randfile "$T/files/dir/keep" 2 kept
mkfs.ext4 -q -F -L rec -E offset=$MIB,nodiscard -d "$T/files" "$img" 48M
debugfs -w -R 'rm /junk' "$img?offset=$MIB" >"$T/debugfs.out" 2>&1 || { cat "$T/debugfs.out"; die "debugfs rm"; }
# the deleted file's bytes are still in the image (free blocks are not zeroed)
probe=$T/probe
dd if="$T/files/junk" of="$probe" bs=4096 skip=1000 count=1 status=none
python3 -c 'import sys; sys.exit(0 if open(sys.argv[2],"rb").read() in open(sys.argv[1],"rb").read() else 1)' \
    "$img" "$probe" || die "the deleted file's bytes are not in the image"

bv init "$repo" --encryption=none >/dev/null
bv backup "$repo" "$img" --name=d --used-only --json -q >"$T/used.json"
used_id=$(json_get "$T/used.json" 'd["snapshot"]')
skipped=$(json_get "$T/used.json" 'd["used_only"]["bytes_free_skipped"]')
[ "$skipped" -ge $((16 * MIB)) ] || die "--used-only skipped only $skipped bytes"

# the record says so: info --json, list --json and info's text, per partition
bv info "$repo" "$used_id" --json >"$T/info.json"
assert_eq "$(json_get "$T/info.json" 'd["used_only"]["bytes_free_skipped"]')" "$skipped" "info --json free skipped"
assert_eq "$(json_get "$T/info.json" '[(p["name"], p.get("fstype"), p.get("label"), p.get("reader")) for p in d["used_only"]["partitions"]]')" \
    "[('p1', 'ext4', 'rec', 'libext2fs'), ('p2', None, None, None)]" "info --json partitions"
assert_eq "$(json_get "$T/info.json" 'd["used_only"]["partitions"][1]["bytes_unknown"]')" $((8 * MIB)) "p2 read whole"
assert_eq "$(json_get "$T/info.json" 'd["used_only"]["partitions"][0]["bytes_used"] == '"$(json_get "$T/used.json" 'd["used_only"]["partitions"][0]["bytes_used"]')")" \
    "True" "info and backup --json disagree on p1's used bytes"
bv list "$repo" --json >"$T/list.json"
assert_eq "$(json_get "$T/list.json" '"used_only" in d[0]')" "True" "list --json has no used_only"
bv info "$repo" "$used_id" >"$T/info.txt"
grep -Eq '^used-only    yes: [0-9.]+ MiB free not read' "$T/info.txt" || { cat "$T/info.txt"; die "info: no used-only line"; }
grep -Eq "^  p1 ext4 'rec': [0-9.]+ [KM]iB used \(read\), [0-9.]+ MiB free \(not read\), .* \(libext2fs\)$" "$T/info.txt" ||
    { cat "$T/info.txt"; die "info: no p1 line"; }
grep -qxF "  p2: 8.0 MiB read whole because no filesystem found" "$T/info.txt" || { cat "$T/info.txt"; die "info: no p2 line"; }

# a whole backup of the unchanged image: read whole, not the --used-only snapshot's map taken.
# mke2fs zeroed parts of the image with fallocate: unwritten extents, which SEEK_DATA reports as
# holes once their pages leave the page cache (a drop_caches on a busy machine made this test
# fail now and then); evicted here, so that it always sees them as holes
python3 -c 'import os,sys; fd=os.open(sys.argv[1],os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)' "$img"
bv backup "$repo" "$img" --name=d --json >"$T/whole.json" 2>"$T/whole.err"
assert_eq "$(json_get "$T/whole.json" '"reused_from" in d')" "False" "a whole backup took the --used-only map"
[ "$(json_get "$T/whole.json" 'd["stats"]["bytes_read"] + d["stats"]["bytes_hole"]')" -eq $((64 * MIB)) ] ||
    die "the whole backup did not read it all (holes aside)"
grep -q "that one was taken --used-only (without its free blocks): read it whole" "$T/whole.err" ||
    { cat "$T/whole.err"; die "no note on why the unchanged image was read"; }
bv info "$repo" "$(json_get "$T/whole.json" 'd["snapshot"]')" --json >"$T/whole-info.json"
assert_eq "$(json_get "$T/whole-info.json" '"used_only" in d')" "False" "a whole snapshot says used_only"
bv restore "$repo" "$(json_get "$T/whole.json" 'd["snapshot"]')" "$T/whole.img" >/dev/null
cmp "$img" "$T/whole.img" || die "the whole snapshot's restore differs from the image (free blocks' data lost)"

# --used-only again: its parent is the whole one now, so it reads; once more: takes that map unread
bv backup "$repo" "$img" --name=d --used-only --json >"$T/u2.json" 2>"$T/u2.err"
assert_eq "$(json_get "$T/u2.json" '"reused_from" in d')" "False" "--used-only took the whole snapshot's map"
grep -q "that one was read whole: read it" "$T/u2.err" || { cat "$T/u2.err"; die "no note on the whole parent"; }
u2=$(json_get "$T/u2.json" 'd["snapshot"]')
bv backup "$repo" "$img" --name=d --used-only --json -q >"$T/u3.json"
assert_eq "$(json_get "$T/u3.json" 'd.get("reused_from")')" "$u2" "--used-only did not take the --used-only parent's map"
assert_eq "$(json_get "$T/u3.json" 'd["stats"]["bytes_read"]')" 0 "an unchanged --used-only backup read"
u3=$(json_get "$T/u3.json" 'd["snapshot"]')
bv info "$repo" "$u3" --json >"$T/u3-info.json"
assert_eq "$(json_get "$T/u3-info.json" 'd["used_only"]["bytes_free_skipped"]')" "$skipped" "the reused snapshot's record"
bv restore "$repo" "$used_id" "$T/u1.img" >/dev/null
bv restore "$repo" "$u3" "$T/u3.img" >/dev/null
cmp "$T/u1.img" "$T/u3.img" || die "the reused --used-only snapshot differs from the first"
if python3 -c 'import sys; sys.exit(0 if open(sys.argv[2],"rb").read() in open(sys.argv[1],"rb").read() else 1)' \
    "$T/u3.img" "$probe"; then die "a --used-only restore holds the deleted file's bytes"; fi
# and after it, a whole backup reads again (the newest parent is used-only)
bv backup "$repo" "$img" --name=d --json -q >"$T/w2.json"
assert_eq "$(json_get "$T/w2.json" '"reused_from" in d')" "False" "a whole backup took the --used-only map"
echo "ok: used-only recorded ($skipped free bytes), whole and used-only snapshots never stand for each other"
