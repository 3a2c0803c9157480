#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# delete and protect: a protected snapshot is refused by delete (exit 1) until --force or
# --unprotect; an unknown name forgets nothing (exit 1); deleted snapshots leave list; the rest
# still verifies and restores.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd openssl python3

snap_id() { bv list "$1" --json | python3 -c "import json,sys; print([s['id'] for s in json.load(sys.stdin) if s['name'] == sys.argv[1]][0])" "$2"; }
repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
randfile "$T/a" 1 dp-a
randfile "$T/b" 1 dp-b
bv backup "$repo" "$T/a" --name=a >/dev/null
bv backup "$repo" "$T/b" --name=b >/dev/null
id_a=$(snap_id "$repo" a)

bv protect "$repo" a 2>/dev/null
expect_fail 1 "snapshot ${id_a:0:8} is protected (use --force, or 'blkvault protect --unprotect')" bv delete "$repo" a
expect_fail 1 "cannot find snapshot 'nosuch' in '$repo'" bv delete "$repo" b nosuch
assert_eq "$(bv list "$repo" --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" 2 "snapshots after refused deletes"
expect_fail 2 "expected: blkvault delete REPO SNAP..." bv delete "$repo"
expect_fail 2 "expected: blkvault protect REPO SNAP" bv protect "$repo"

bv protect "$repo" a --unprotect 2>/dev/null
[ ! -e "$repo/snapshots/$id_a.protect" ] || die "the marker stayed after --unprotect"
bv delete "$repo" b 2>/dev/null
assert_eq "$(bv list "$repo" --json | python3 -c 'import json,sys; print([s["name"] for s in json.load(sys.stdin)])')" "['a']" "snapshots after delete"
bv protect "$repo" a 2>/dev/null
bv delete "$repo" a --force 2>/dev/null
[ -z "$(ls "$repo/snapshots")" ] || die "files left in snapshots/: $(ls "$repo/snapshots")"
