#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# gc deletes the .tmp-* files that interrupted writers left (docs/LIFECYCLE.md, "Temporary
# files": on a filesystem without O_TMPFILE packs, segments, records and leases are written
# under such names, flock'ed by their writer until renamed): in the repository's folders, only
# regular files no live writer holds (one held with flock(1) stays until its holder ends), never
# through a symbolic link, never other names; the snapshots still restore.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd flock

repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
randfile "$T/x" 2 gc-tmp-x
bv backup "$repo" "$T/x" --name=x -q
for f in packs/.tmp-0123456789abcdef index/.tmp-1123456789abcdef snapshots/.tmp-2123456789abcdef \
    leases/.tmp-3123456789abcdef .tmp-4123456789abcdef packs/.tmp-5123456789abcdef; do
    head -c 1048576 /dev/zero >"$repo/$f"
done
echo keep >"$T/outside"
ln -s "$T/outside" "$repo/index/.tmp-6123456789abcdef"
mkdir "$repo/packs/.tmp-7123456789abcdef"
echo keep >"$repo/packs/tmp-8123456789abcdef"
holder=
on_exit 'kill $holder'
flock -o "$repo/packs/.tmp-5123456789abcdef" sleep 60 >/dev/null 2>&1 &  # -o: flock holds it, not sleep
holder=$!
while flock -n -x "$repo/packs/.tmp-5123456789abcdef" true; do sleep 0.05; done # until it holds it

bv gc "$repo" >"$T/gc.out" || { cat "$T/gc.out"; die "gc"; }
grep -qx "deleted 5 temporary files interrupted writers left, 5.0 MiB" "$T/gc.out" || { cat "$T/gc.out"; die "gc's line"; }
[ -f "$repo/packs/.tmp-5123456789abcdef" ] || die "gc deleted a temporary file its writer holds"
[ -L "$repo/index/.tmp-6123456789abcdef" ] && [ -f "$T/outside" ] || die "a symbolic link named .tmp-* was followed or removed"
[ -d "$repo/packs/.tmp-7123456789abcdef" ] || die "a directory named .tmp-* was removed"
[ -f "$repo/packs/tmp-8123456789abcdef" ] || die "a file not named .tmp-* was removed"
for f in index/.tmp-1123456789abcdef snapshots/.tmp-2123456789abcdef leases/.tmp-3123456789abcdef .tmp-4123456789abcdef; do
    [ ! -e "$repo/$f" ] || die "$f is left"
done
gc_json() { bv gc "$repo" --json | python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
assert_eq "$(gc_json tmp_deleted)" 0 "a second gc while the writer holds its file"
pkill -P $holder sleep || true # flock ends with it
wait $holder 2>/dev/null || true
holder=
assert_eq "$(gc_json tmp_deleted)" 1 "gc once the writer ended"
bv restore "$repo" x "$T/x.out" >/dev/null
assert_same "$T/x" "$T/x.out"
echo ok
