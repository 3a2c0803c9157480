#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Unchanged files (issue 14): a regular file whose device, inode, size, mtime and ctime equal
# what its last snapshot recorded is not read (bytes_read 0) and restores bit-exact; a changed
# byte with the mtime put back by touch -d is read (ctime differs); --force-read and
# --full-read-every=N read anyway.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd openssl python3

repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
jget() { python3 -c "import json,sys; d=json.load(open(sys.argv[1]))
for k in sys.argv[2].split('.'): d=d.get(k, '') if isinstance(d, dict) else ''
print(d)" "$1" "$2"; }

img=$T/disk.img
randfile "$img" 8 seed-unchanged
truncate -s 24M "$img"   # a hole at the end
dd if=/dev/zero of="$img" bs=1M count=2 seek=4 conv=notrunc status=none  # zeroes inside

bv backup "$repo" "$img" --json > "$T/b1.json"
[ "$(jget "$T/b1.json" bytes_read)" -gt 0 ] || die "first backup read nothing"
assert_eq "$(jget "$T/b1.json" reused_from)" "" "first backup claims a reuse"

# unchanged: nothing read, the parent's map, restores bit-exact
bv backup "$repo" "$img" --json > "$T/b2.json"
assert_eq "$(jget "$T/b2.json" bytes_read)" 0 "unchanged file was read"
assert_eq "$(jget "$T/b2.json" stats.bytes_read)" 0 "unchanged file was read (stats)"
assert_eq "$(jget "$T/b2.json" reused_from)" "$(jget "$T/b1.json" snapshot)" "reused_from"
assert_eq "$(jget "$T/b2.json" bytes_data)" "$(jget "$T/b1.json" bytes_data)" "bytes_data of the reuse"
bv restore "$repo" "$(jget "$T/b2.json" snapshot)" "$T/r2" >/dev/null
assert_same "$img" "$T/r2"
# the snapshot records the identity and the reuse
bv list "$repo" --json > "$T/list.json"
python3 - "$T/list.json" "$(stat -c '%d %i %s' "$img")" <<'PY'
import json, sys
snaps = json.load(open(sys.argv[1]))
dev, ino, size = map(int, sys.argv[2].split())
src = snaps[-1]["source"]
assert (src["dev"], src["ino"], src["size"]) == (dev, ino, size), src
assert src["mtime_ns"] > 0 and src["ctime_ns"] > 0, src
assert src["reused_from"] == snaps[0]["snapshot"] and src["unread_backups"] == 1, src
assert "reused_from" not in snaps[0]["source"] and "unread_backups" not in snaps[0]["source"]
PY

# the text output says so
out=$(bv backup "$repo" "$img" -q 2>&1)
[[ "$out" == *"unchanged since snapshot"* ]] || die "no unchanged note: $out"

# one byte changed, mtime restored: ctime differs, so it is read
mtime=$(stat -c %y "$img")
printf 'X' | dd of="$img" bs=1 seek=12345 conv=notrunc status=none
touch -d "$mtime" "$img"
assert_eq "$(stat -c %y "$img")" "$mtime" "touch -d did not restore the mtime"
bv backup "$repo" "$img" --json > "$T/b3.json"
[ "$(jget "$T/b3.json" bytes_read)" -gt 0 ] || die "a changed file (same mtime) was not read"
assert_eq "$(jget "$T/b3.json" reused_from)" "" "changed file reused"
bv restore "$repo" "$(jget "$T/b3.json" snapshot)" "$T/r3" >/dev/null
assert_same "$img" "$T/r3"

# --force-read reads an unchanged file
bv backup "$repo" "$img" --json --force-read > "$T/b4.json"
[ "$(jget "$T/b4.json" bytes_read)" -gt 0 ] || die "--force-read did not read"

# another name, or another path of the same content, is read
bv backup "$repo" "$img" --json --name=other > "$T/b5.json"
[ "$(jget "$T/b5.json" bytes_read)" -gt 0 ] || die "a new name was not read"

# --full-read-every=3: two unread backups in a row, then a read
for i in 1 2 3; do
    bv backup "$repo" "$img" --json --full-read-every=3 > "$T/f$i.json"
done
assert_eq "$(jget "$T/f1.json" bytes_read)" 0 "full-read-every: first unread"
assert_eq "$(jget "$T/f2.json" bytes_read)" 0 "full-read-every: second unread"
[ "$(jget "$T/f3.json" bytes_read)" -gt 0 ] || die "--full-read-every=3 did not read on the third backup"
bv backup "$repo" "$img" --json --full-read-every=3 > "$T/f4.json"
assert_eq "$(jget "$T/f4.json" bytes_read)" 0 "full-read-every: the count restarts after a read"
bv restore "$repo" "$(jget "$T/f4.json" snapshot)" "$T/r4" >/dev/null
assert_same "$img" "$T/r4"

# a bad count is refused
expect_fail 2 "error: invalid --full-read-every '0' (1 to 1000000)" bv backup "$repo" "$img" --full-read-every=0
echo ok
