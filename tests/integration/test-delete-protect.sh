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
id_b=$(snap_id "$repo" b)

assert_eq "$(bv protect "$repo" a 2>&1)" "snapshot ${id_a:0:8} is protected" "protect's line"
expect_fail 1 "^error: snapshot ${id_a:0:8} is protected (use --force, or 'blkvault protect --unprotect'); nothing was deleted$" bv delete "$repo" a
# a protected snapshot among others forgets nothing, as a typo does (b is named first)
expect_fail 1 "^error: snapshot ${id_a:0:8} is protected (use --force, or 'blkvault protect --unprotect'); nothing was deleted$" \
    bv delete "$repo" b a
expect_fail 1 "^error: no snapshot matches 'nosuch' (see 'blkvault list')$" bv delete "$repo" b nosuch
assert_eq "$(cat "$T/.err")" "error: no snapshot matches 'nosuch' (see 'blkvault list')" "the only message for nosuch"
# snapshots are named as restore names them: a bare 'latest' of two names is refused, NAME@latest
# is that name's newest, a name is shown escaped
expect_fail 2 "^error: 'latest' is ambiguous: the repository holds snapshots of 2 names (a, b); say which with NAME@latest$" \
    bv delete "$repo" latest
expect_fail 2 "^error: 'latest' is ambiguous: the repository holds snapshots of 2 names (a, b); say which with NAME@latest$" \
    bv protect "$repo" latest
expect_fail 1 "^error: no snapshot matches 'no\\\\x1bsuch' (see 'blkvault list')$" bv protect "$repo" $'no\esuch'
assert_eq "$(bv list "$repo" --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" 2 "snapshots after refused deletes"
expect_fail 2 "^error: expected 'blkvault delete REPO SNAPSHOT\.\.\.' (see 'blkvault help delete')$" bv delete "$repo"
expect_fail 2 "^error: expected 'blkvault protect REPO SNAPSHOT' (see 'blkvault help protect')$" bv protect "$repo"

assert_eq "$(bv protect "$repo" a@latest --unprotect 2>&1)" "snapshot ${id_a:0:8} is no longer protected" "unprotect's line"
[ ! -e "$repo/snapshots/$id_a.protect" ] || die "the marker stayed after --unprotect"
# a snapshot named twice (by name and by id) is deleted once
assert_eq "$(bv delete "$repo" b@latest "$id_b" 2>&1)" "snapshot ${id_b:0:8} deleted" "delete's line"
assert_eq "$(bv list "$repo" --json | python3 -c 'import json,sys; print([s["name"] for s in json.load(sys.stdin)])')" "['a']" "snapshots after delete"
bv protect "$repo" a 2>/dev/null
bv delete "$repo" a --force 2>/dev/null
[ -z "$(ls "$repo/snapshots")" ] || die "files left in snapshots/: $(ls "$repo/snapshots")"

randfile "$T/v2.img" 1 delete-protect-v2
bv backup "$repo" "$T/v2.img" --name=vm1 -q

# a marker that is a directory (someone else's): delete --force forgets the snapshot and says so
# (it said "cannot delete snapshot: Is a directory" after the record was gone)
vm1=$(bv list "$repo" --json | python3 -c 'import json,sys; print([s["snapshot"] for s in json.load(sys.stdin) if s["name"] == "vm1"][0])')
bv protect "$repo" "$vm1" --unprotect 2>/dev/null
mkdir "$repo/snapshots/$vm1.protect"
expect_fail 1 "snapshot ${vm1:0:8} is protected" bv delete "$repo" "$vm1"
bv delete "$repo" "$vm1" --force >"$T/del.out" 2>&1 || { cat "$T/del.out" >&2; die "delete --force with a directory marker"; }
grep -qx "snapshot ${vm1:0:8} deleted" "$T/del.out" || { cat "$T/del.out" >&2; die "delete --force did not say it deleted"; }
[ ! -e "$repo/snapshots/$vm1.snap" ] || die "the record stayed"
