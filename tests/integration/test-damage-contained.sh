#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Damage is contained to what is damaged (issue 10, findings 3 and 4):
#  - one flipped bit in one snapshot record: list skips it with a warning naming its file; every
#    other snapshot restores bit-exact, by full id and as 'c@latest'; verify reports it;
#  - one flipped bit in one index segment's header: the repository opens for reading with that
#    segment left out and named; the other snapshots restore bit-exact; verify names it (exit 4);
#    a writer refuses, naming it;
#  - a lost pack: a backup of the same data stores its chunks again, the new snapshot restores
#    bit-exact and verifies; verify of the whole repository names the missing pack;
#  - a damaged config or key slot: the error names the file (and for a key slot, the way back:
#    key import), exit 4.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd openssl python3

snap_id() { bv list "$1" --json 2>/dev/null | python3 -c "import json,sys; print([s['id'] for s in json.load(sys.stdin) if s['name'] == sys.argv[1]][0])" "$2"; }
for f in a b c; do randfile "$T/$f" 2 "damage-$f"; done

# ---- a damaged snapshot record ----
repo=$T/snaps
bv init "$repo" --encryption=none >/dev/null
for f in a b c; do bv backup "$repo" "$T/$f" --name=$f -q; done
id_a=$(snap_id "$repo" a); id_b=$(snap_id "$repo" b); id_c=$(snap_id "$repo" c)
rec=$repo/snapshots/$id_a.snap
flip_byte "$rec" $(( $(stat -c %s "$rec") - 1 ))
warn="^warning: skipping snapshot record snapshots/$id_a.snap: Bad message$"
bv list "$repo" >"$T/list.out" 2>"$T/list.err" || { cat "$T/list.err" >&2; die "list failed on one damaged record"; }
grep -q "$warn" "$T/list.err" || { cat "$T/list.err" >&2; die "list did not name the damaged record"; }
assert_eq "$(awk 'NR > 1 { print $1 }' "$T/list.out" | tr '\n' ' ')" "${id_b:0:8} ${id_c:0:8} " "snapshots listed"
bv restore "$repo" "$id_b" "$T/b.out" 2>"$T/restore.err" >/dev/null || { cat "$T/restore.err" >&2; die "restore of b failed"; }
grep -q "$warn" "$T/restore.err" || die "restore did not name the damaged record"
assert_same "$T/b" "$T/b.out"
bv restore "$repo" c@latest "$T/c.out" >/dev/null 2>&1
assert_same "$T/c" "$T/c.out"
expect_fail 1 "no snapshot matches '$id_a'" bv restore "$repo" "$id_a" "$T/a.out"
expect_fail 4 "^damaged: snapshot ${id_a:0:8}, image offset 0 (0x0): snapshot $id_a: Bad message$" bv verify "$repo"
# a record that is a symbolic link is skipped the same way
cp "$repo/snapshots/$id_b.snap" "$T/b.snap"
rm "$repo/snapshots/$id_b.snap" && ln -s "$T/b.snap" "$repo/snapshots/$id_b.snap"
bv list "$repo" >/dev/null 2>"$T/list.err"
grep -q "^warning: skipping snapshot record snapshots/$id_b.snap: it is a symbolic link$" "$T/list.err" ||
    { cat "$T/list.err" >&2; die "list did not name the symbolic link"; }

# ---- a damaged index segment header ----
repo=$T/index
bv init "$repo" --encryption=none >/dev/null
bv backup "$repo" "$T/a" --name=a -q
seg_a=$(cd "$repo/index" && ls)
assert_eq "$(echo "$seg_a" | wc -l)" 1 "segments after one backup"
bv backup "$repo" "$T/b" --name=b -q
bv backup "$repo" "$T/c" --name=c -q
id_b=$(snap_id "$repo" b)
flip_byte "$repo/index/$seg_a" 20 # the entry count: the header checksum no longer matches
warn="^warning: index segment 'index/$seg_a' does not read (Bad message): left out; what it locates cannot be read until the repository is repaired (see 'blkvault verify')$"
bv list "$repo" >"$T/list.out" 2>"$T/list.err" || { cat "$T/list.err" >&2; die "list failed with one damaged segment"; }
grep -q "$warn" "$T/list.err" || { cat "$T/list.err" >&2; die "list did not name the damaged segment"; }
assert_eq "$(awk 'NR > 1' "$T/list.out" | wc -l)" 3 "snapshots listed with a damaged segment"
bv restore "$repo" "$id_b" "$T/ib.out" >/dev/null 2>&1
assert_same "$T/b" "$T/ib.out"
bv restore "$repo" c@latest "$T/ic.out" >/dev/null 2>&1
assert_same "$T/c" "$T/ic.out"
expect_fail 4 "stopped: missing data (the repository needs repair) at image offset 0" bv restore "$repo" a "$T/ia.out"
grep -q "$warn" "$T/.err" || die "the failed restore did not name the damaged segment"
expect_fail 4 "^damaged: index segment index/$seg_a: Bad message$" bv verify "$repo"
grep -q "^damaged: snapshot .*, image offset 0 (0x0): map node" "$T/.err" || die "verify did not go on to the snapshots"
expect_fail 4 "^error: refusing to write to repository '$repo': index segment 'index/$seg_a' does not read (Bad message); the repository needs repair (see 'blkvault verify')$" \
    bv backup "$repo" "$T/a" -q
assert_eq "$(ls "$repo/snapshots" | wc -l)" 3 "snapshots after a refused backup"

# ---- a lost pack ----
repo=$T/packs
bv init "$repo" --encryption=none >/dev/null
bv backup "$repo" "$T/a" --name=old -q
lost=$(cd "$repo/packs" && find . -name '*.pack' | sed 's|^\./||')
assert_eq "$(echo "$lost" | wc -l)" 1 "packs after one backup"
bv backup "$repo" "$T/b" --name=other -q
rm "$repo/packs/$lost"
bv backup "$repo" "$T/a" --name=new -q 2>"$T/backup.err" || { cat "$T/backup.err" >&2; die "backup after a lost pack failed"; }
grep -q "^warning: pack 'packs/$lost' named by the index is missing: what it held is stored again$" "$T/backup.err" ||
    { cat "$T/backup.err" >&2; die "backup did not name the missing pack"; }
bv restore "$repo" new "$T/new.out" >/dev/null
assert_same "$T/a" "$T/new.out"
bv verify "$repo" new --read-data >/dev/null
bv restore "$repo" other "$T/other.out" >/dev/null
assert_same "$T/b" "$T/other.out"
# the index still names the lost pack: verify of the whole repository says so
expect_fail 4 "^damaged: pack $lost: Structure needs cleaning$" bv verify "$repo"

# a damaged config, a damaged key slot: named, not a bare "Bad message"
repo=$T/files
BLKVAULT_PASSPHRASE=pw bv init "$repo" >/dev/null
BLKVAULT_PASSPHRASE=pw bv key export "$repo" "$T/key.export" >/dev/null 2>&1
cp "$repo/config" "$T/config.good"
printf X | dd of="$repo/config" bs=1 seek=20 conv=notrunc status=none
BLKVAULT_PASSPHRASE=pw expect_fail 4 "" bv list "$repo"
assert_eq "$(cat "$T/.err")" "error: cannot open repository '$repo': its config file is damaged (Bad message)" "a damaged config"
# well-formed, but not what the repository's key authenticated (its MAC)
sed 's/"level": 3/"level": 4/' "$T/config.good" > "$repo/config"
cmp -s "$repo/config" "$T/config.good" && die "the config was not changed"
BLKVAULT_PASSPHRASE=pw expect_fail 4 "" bv list "$repo"
assert_eq "$(cat "$T/.err")" "error: cannot open repository '$repo': its config file is damaged (Bad message)" "a config that fails its MAC"
cp "$T/config.good" "$repo/config"
printf X | dd of="$repo/keys/default" bs=1 seek=60 conv=notrunc status=none
BLKVAULT_PASSPHRASE=pw expect_fail 4 "" bv list "$repo"
assert_eq "$(cat "$T/.err")" "error: cannot open repository '$repo': key slot 'keys/default' is damaged (Bad message): import a key export with 'blkvault key import $repo FILE'" "a damaged key slot"
rm "$repo/keys/default"
BLKVAULT_PASSPHRASE=pw bv key import "$repo" "$T/key.export" >/dev/null 2>&1 || die "key import after a damaged slot"
BLKVAULT_PASSPHRASE=pw bv list "$repo" >/dev/null || die "list after the key import"
