#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Space always comes back: an image of real files (a tar of 128 MiB of this system's /usr, in
# sorted path order: dense, every region holds file data) backed up in 12 versions, each rewriting
# 32 scattered 128 KiB regions; `prune --keep-last=2` (which runs gc) and a second `gc` must leave
# the repository at most 110% of a fresh one holding only the newest 2 versions (measured 100.1-100.4%;
# before, 121%). gc re-encodes
# the compression groups whose members died in part (only the live members travel); before it
# kept every group whole while one member lived. Both kept versions restore bit-exact and verify.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd openssl tar python3

img=$T/disk.img
python3 - "$T/files" <<'PY'
import os, sys
total, out = 0, open(sys.argv[1], "w")
for top in ("/usr/lib", "/usr/share"):
    for d, dirs, files in os.walk(top):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(d, f)
            if os.path.islink(p) or not os.path.isfile(p) or total >= 128 << 20:
                continue
            total += os.path.getsize(p)
            out.write(p + "\n")
PY
tar -cf "$img" --no-recursion -T "$T/files" 2>/dev/null || die "cannot tar the files"
[ "$(stat -c %s "$img")" -ge $((120 << 20)) ] || die "the image holds only $(stat -c %s "$img") bytes of /usr"

rewrite() { "$SOURCE_ROOT/images/rewrite-regions.sh" "$img" "$1" 32; }
size() { find "$1" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }'; }

# encrypted (a key file: no scrypt): re-encoded groups are authenticated and sealed anew
head -c 64 /dev/urandom >"$T/key"
bv() { "$BLKVAULT" "$@" --key-file="$T/key"; }
bv init "$T/repo" >/dev/null
bv init "$T/fresh" >/dev/null
for v in $(seq 1 12); do
    [ "$v" = 1 ] || rewrite "gc-space-$v"
    bv backup "$T/repo" "$img" --name=disk --force-read -q
    [ "$v" -lt 11 ] || bv backup "$T/fresh" "$img" --name=disk --force-read -q
    [ "$v" != 11 ] || cp --sparse=always "$img" "$T/v11.img"
done
before=$(size "$T/repo")
bv prune "$T/repo" --keep-last=2 --no-gc >/dev/null
bv gc "$T/repo" --json >"$T/gc.json"
regrouped=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["groups_reencoded"])' <"$T/gc.json")
[ "$regrouped" -gt 0 ] || { cat "$T/gc.json"; die "gc re-encoded no partly unused group"; }
bv gc "$T/repo" >/dev/null
after=$(size "$T/repo") fresh=$(size "$T/fresh")
echo "repository: $before bytes with 12 versions, $after after prune --keep-last=2 and gc; a fresh one of the 2: $fresh ($((after * 1000 / fresh / 10)).$((after * 1000 / fresh % 10))%)"
[ $((after * 100)) -le $((fresh * 110)) ] || die "after prune and gc the repository holds $after bytes, more than 110% of a fresh one ($fresh)"
bv verify "$T/repo" --read-data >/dev/null || die "verify after gc"
ids=$(bv list "$T/repo" --json | python3 -c 'import json,sys; print(" ".join(s["id"] for s in json.load(sys.stdin)))')
set -- $ids
bv restore "$T/repo" "$1" "$T/out" >/dev/null
assert_same "$T/v11.img" "$T/out"
rm "$T/out"
bv restore "$T/repo" "$2" "$T/out" >/dev/null
assert_same "$img" "$T/out"
echo ok
