#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Error paths of the CLI on a damaged or unusable repository, each with its exit status (see EXIT
# STATUS in blkvault(1)) and message: restore and verify when a pack of a snapshot is missing
# (the repository needs repair; no partial destination is left; other snapshots still restore;
# a repository left with no pack at all),
# and init when the repository cannot be created (missing parent, a file, a non-empty directory,
# an existing repository, an encrypted one without a secret), which leaves nothing behind.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd openssl python3

packs() { (cd "$1/packs" && find . -name '*.pack' | sed 's|^\./||' | sort); }
snap_id() { bv list "$1" --json | python3 -c "import json,sys; print([s['id'] for s in json.load(sys.stdin) if s['name'] == sys.argv[1]][0])" "$2"; }

# a: 3 MiB, b: 2 MiB, each in its own pack; c is b followed by a: its data before 2 MiB is in
# b's pack (or new), its copy of a dedups into a's pack from somewhere past 2 MiB on
repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
randfile "$T/a" 3 errors-a
randfile "$T/b" 2 errors-b
cat "$T/b" "$T/a" > "$T/c"
bv backup "$repo" "$T/a" --name=a >/dev/null
pack_a=$(packs "$repo")
assert_eq "$(echo "$pack_a" | wc -l)" 1 "packs after the first backup"
bv backup "$repo" "$T/b" --name=b >/dev/null
bv backup "$repo" "$T/c" --name=c >/dev/null
id_a=$(snap_id "$repo" a)
id_b=$(snap_id "$repo" b)
id_c=$(snap_id "$repo" c)
bv verify "$repo" --read-data >/dev/null
rm "$repo/packs/$pack_a"

# restore: exit 4 (damaged or missing data), the snapshot and the offset named, no file left
mkdir "$T/out"
expect_fail 4 "restore of snapshot ${id_a:0:8} stopped: missing data (the repository needs repair) at image offset 0 (0x0): map node [0-9a-f]\{64\} ([0-9]* bytes at offset [0-9]* of pack 'packs/$pack_a'); '$T/out/a.img' was not left behind as a file" \
    bv restore "$repo" a "$T/out/a.img"
expect_fail 4 "restore of snapshot ${id_c:0:8} stopped: missing data (the repository needs repair) at image offset " \
    bv restore "$repo" c "$T/out/c.img"
off=$(sed -n 's/.*at image offset \([0-9]*\) (0x.*/\1/p' "$T/.err")
[ -n "$off" ] && [ "$off" -ge $((2 << 20)) ] && [ "$off" -lt $((5 << 20)) ] ||
    die "restore of c named offset '$off', not one in the copy of a (2 MiB to 5 MiB)"
expect_fail 4 "missing data (the repository needs repair)" bv restore "$repo" c "$T/out/c1.img" --threads=1
assert_eq "$(ls -A "$T/out")" "" "restores that stopped left files behind"
# the snapshot whose packs are all there still restores
bv restore "$repo" b "$T/out/b.img" >/dev/null
assert_same "$T/b" "$T/out/b.img"

# verify: exit 4, the missing pack and the snapshots that need it named (and only those), with
# and without --read-data, for the whole repository and for one snapshot
for args in "" "--read-data"; do
    # shellcheck disable=SC2086
    expect_fail 4 "^error: [0-9]* problems found in '$repo'$" bv verify "$repo" $args
    n=$(sed -n 's/^error: \([0-9]*\) problems found.*/\1/p' "$T/.err")
    assert_eq "$n" "$(grep -c '^damaged: ' "$T/.err")" "verify $args: problems counted and problems printed"
    grep -q "^damaged: pack $pack_a: Structure needs cleaning$" "$T/.err" || { cat "$T/.err" >&2; die "verify $args did not name the missing pack"; }
    grep -q "^damaged: snapshot ${id_a:0:8}, image offset 0 (0x0): map node" "$T/.err" || { cat "$T/.err" >&2; die "verify $args did not name snapshot a"; }
    # c's map nodes may or may not be shared with a (cut points are keyed per repository): only
    # reading its data is sure to find what it lost
    if [ -n "$args" ]; then
        grep -q "^damaged: snapshot ${id_c:0:8}, image offset [0-9]* (0x[0-9a-f]*): chunk [0-9a-f]\{64\}: Structure needs cleaning$" "$T/.err" ||
            { cat "$T/.err" >&2; die "verify $args did not name snapshot c"; }
    fi
    ! grep -q "snapshot ${id_b:0:8}" "$T/.err" || { cat "$T/.err" >&2; die "verify $args blamed snapshot b"; }
done
expect_fail 4 "damaged: snapshot ${id_a:0:8}, image offset 0 (0x0): map node" bv verify "$repo" a
rc=0
bv verify "$repo" --json >"$T/verify.json" 2>"$T/verify.err" || rc=$?
assert_eq "$rc" 4 "verify --json exit status"
python3 - "$T/verify.json" "$pack_a" "$id_a" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
assert v["ok"] is False, v
assert {"what": "pack", "detail": sys.argv[2], "error": "Structure needs cleaning"} in v["problems"], v
assert any(p.get("snapshot") == sys.argv[3] and p["offset"] == 0 for p in v["problems"]), v
PY

# a repository whose only pack is gone: verify reports it (exit 4), it does not crash
repo1=$T/one-pack
bv init "$repo1" --encryption=none >/dev/null
bv backup "$repo1" "$T/b" --name=b >/dev/null
only=$(packs "$repo1")
rm "$repo1/packs/$only"
for args in "" "--read-data"; do
    # shellcheck disable=SC2086
    expect_fail 4 "^damaged: pack $only: Structure needs cleaning$" bv verify "$repo1" $args
done

# init: cannot create repository, exit 1, and nothing created or changed
expect_fail 1 "^error: cannot create repository '$T/nosuch/repo': No such file or directory$" \
    bv init "$T/nosuch/repo" --encryption=none
[ ! -e "$T/nosuch" ] || die "init created the missing parent"
cp "$T/a" "$T/a.before"
expect_fail 1 "^error: cannot create repository '$T/a': Not a directory$" bv init "$T/a" --encryption=none
assert_same "$T/a.before" "$T/a"
mkdir "$T/notempty"
echo keep > "$T/notempty/file"
expect_fail 1 "^error: cannot create repository '$T/notempty': Directory not empty$" bv init "$T/notempty" --encryption=none
assert_eq "$(ls -A "$T/notempty")" "file" "init wrote into a non-empty directory"
cp "$repo/config" "$T/config.before"
expect_fail 1 "^error: cannot create repository '$repo': File exists$" bv init "$repo" --encryption=none
assert_same "$T/config.before" "$repo/config"
expect_fail 3 "^error: the repository is encrypted: set BLKVAULT_PASSPHRASE, or use --passphrase-file, --passphrase-fd, --passphrase-command or --key-file$" \
    env -u BLKVAULT_PASSPHRASE "$BLKVAULT" init "$T/nosecret" </dev/null
[ ! -e "$T/nosecret" ] || die "init without a secret created the directory"
echo ok
