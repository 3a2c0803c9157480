#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# gc --dry-run changes nothing, not even bookkeeping: a stale lease file (its holder was killed)
# stays, and gc/ and leases/ are not created (a recursive listing with sha256 of every file is
# the same before and after). The real gc then reaps the lease and deletes the forgotten pack.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd openssl python3

repo=$T/repo
# locks/*.holder names who took a lock last (a dry run takes the gc lock too): not the repository's
# content, so not compared
listing() { (cd "$repo" && find . -printf '%y %p\n' | sort &&
             find . -type f ! -name '*.holder' -print0 | sort -z | xargs -0 sha256sum); }
bv init "$repo" --encryption=none >/dev/null
randfile "$T/a.img" 2 dry-a
randfile "$T/b.img" 2 dry-b
bv backup "$repo" "$T/a.img" --name=a -q
bv backup "$repo" "$T/b.img" --name=b -q
bv delete "$repo" a 2>/dev/null
rm -rf "$repo/gc" "$repo/leases"

# no gc/ and no leases/ yet: a dry run creates neither
listing >"$T/before"
bv gc "$repo" --dry-run >"$T/out"
grep -qx "would condemn 1 of 2 packs (1 unused, 0 of interrupted backups, 0 rewritten), 2.0 MiB; 0 B copied" "$T/out" ||
    { cat "$T/out"; die "gc --dry-run"; }
listing >"$T/after"
diff "$T/before" "$T/after" >&2 || die "gc --dry-run changed the repository (no gc/, no leases/)"

# a lease left by a killed holder (unlocked): the dry run counts it, does not reap it
mkdir -p "$repo/leases"
printf '{"kind":"read","epoch":0,"pid":1,"snapshot":""}\n' >"$repo/leases/00112233445566aa.lease"
listing >"$T/before"
bv gc "$repo" --dry-run --json >"$T/out"
listing >"$T/after"
diff "$T/before" "$T/after" >&2 || die "gc --dry-run changed the repository (a stale lease)"

bv gc "$repo" --json >"$T/out"
python3 - "$T/out" <<'PY' || die "gc's counters"
import json, sys
d = json.load(open(sys.argv[1]))
assert (d["leases_reaped"], d["packs_deleted"], d["lists_finalized"]) == (1, 1, 1), d
PY
[ ! -e "$repo/leases/00112233445566aa.lease" ] || die "gc did not reap the stale lease"
bv verify "$repo" --read-data >/dev/null 2>"$T/err" || { cat "$T/err" >&2; die "verify after gc"; }
bv restore "$repo" b "$T/restored" 2>/dev/null
assert_same "$T/b.img" "$T/restored"
