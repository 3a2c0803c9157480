#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# `restore --skip-damaged` restores what can be restored: over a damaged pack and a missing one
# (the snapshot's map intact in a third) the image is written whole, the rest bit-exact, each
# damaged or missing range zero-filled and listed (offset, length, reason), and the exit status
# is 4; a missing map costs the rest of the image ("map missing"); without the option the
# restore still stops at the damage (exit 4, nothing left behind). A snapshot shares map nodes
# with another wherever their chunks and offsets within a node agree, so losing b's pack may cost
# part of ab's map too ("map missing" in b's part of ab, never in a's).
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd python3

repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
randfile "$T/a" 6 skip-a
randfile "$T/b" 4 skip-b
cat "$T/a" "$T/b" > "$T/ab"
packs() { (cd "$repo" && find packs -name '*.pack' | sort); }
bv backup "$repo" "$T/a" --name=a -q
packs_a=$(packs)
bv backup "$repo" "$T/b" --name=b -q
pack_b=$(packs | grep -vxF "$packs_a")
[ "$(echo "$pack_b" | wc -l)" = 1 ] || die "expected one new pack for b, got: $pack_b"
bv backup "$repo" "$T/ab" --name=ab -q   # its map (and the chunk across a|b) in a pack of its own
pack_a=$(echo "$packs_a" | head -n1)
# damage: one byte in the middle of a's first pack; b's pack lost
flip_byte "$repo/$pack_a" $(( $(stat -c %s "$repo/$pack_a") / 2 ))
rm "$repo/$pack_b"

expect_fail 4 "^error: restore of snapshot .* stopped: " bv restore "$repo" ab "$T/plain.img"
[ ! -e "$T/plain.img" ] || die "a restore without --skip-damaged left a file"

rc=0
bv restore "$repo" ab "$T/out.img" --skip-damaged >"$T/out" 2>"$T/err" || rc=$?
assert_eq "$rc" 4 "exit status of restore --skip-damaged over damage"
[ -f "$T/out.img" ] || { cat "$T/err"; die "no image restored"; }
assert_eq "$(stat -c %s "$T/out.img")" "$(stat -c %s "$T/ab")" "size of the restored image"
grep -q "^error: snapshot [0-9a-f]\{8\} restored to '$T/out.img' with [0-9]* damaged or missing ranges\? (.*) written as zeroes$" "$T/err" ||
    { cat "$T/err"; die "the summary of the damage"; }
grep '^zero-filled: ' "$T/err" | sed 's/^zero-filled: offset \([0-9]*\) (0x[0-9a-f]*), length \([0-9]*\): \([a-z ]*\)$/\1 \2 \3/' > "$T/ranges"
[ -s "$T/ranges" ] || { cat "$T/err"; die "no range listed"; }
python3 - "$T/ab" "$T/out.img" "$T/ranges" "$(stat -c %s "$T/a")" <<'EOF' || die "the restored image is not the original with zeroes in the listed ranges"
import sys
orig = open(sys.argv[1], 'rb').read()
out = bytearray(open(sys.argv[2], 'rb').read())
a_size = int(sys.argv[4])
ranges = [l.split(' ', 2) for l in open(sys.argv[3]).read().splitlines()]
expect = bytearray(orig)
reasons = set()
for off, length, reason in ranges:
    off, length = int(off), int(length)
    assert out[off:off + length] == bytes(length), f"range {off}+{length} is not zeroes"
    expect[off:off + length] = bytes(length)
    reasons.add(reason.strip())
    # a damaged range lies in a (its pack was damaged), a missing one in b (its pack is gone); so
    # does a "map missing" one: the chunker's boundaries are the repository's own, and where they
    # fall alike in b and in ab the two share map nodes, which were in b's pack
    assert (reason.strip() == 'damaged') == (off + length <= a_size), f"{reason} range {off}+{length}"
assert out == expect, "bytes outside the listed ranges differ from the original"
assert 'damaged' in reasons and reasons & {'missing', 'map missing'}, reasons
assert reasons <= {'damaged', 'missing', 'map missing'}, reasons
damaged = sum(int(l) for _, l, r in ranges if r == 'damaged')
assert 0 < damaged < a_size // 2, f"{damaged} damaged bytes of {a_size}: more than the damaged chunk"
missing = sum(int(l) for _, l, r in ranges if r in ('missing', 'map missing'))
assert len(orig) - a_size - 1048576 < missing <= len(orig) - a_size, f"missing {missing}"
EOF

# --json lists them too; an undamaged snapshot restores with exit 0 and no list
bv restore "$repo" ab "$T/j.img" --skip-damaged --json >"$T/j.json" 2>/dev/null && die "--json over damage exited 0" || true
python3 -c "import json,sys; d=json.load(open(sys.argv[1]))['damaged']; assert d and all(set(x)=={'offset','length','reason'} for x in d), d" "$T/j.json" || die "the JSON damaged list"
randfile "$T/c" 1 skip-c
bv backup "$repo" "$T/c" --name=c -q
bv restore "$repo" c "$T/c.img" --skip-damaged >/dev/null 2>"$T/err" || { cat "$T/err"; die "restore --skip-damaged of a whole snapshot"; }
assert_same "$T/c" "$T/c.img"
# b's own map was in b's pack: all of it is gone
rc=0
bv restore "$repo" b "$T/b.img" --skip-damaged >/dev/null 2>"$T/err" || rc=$?
assert_eq "$rc" 4 "exit status of a restore without its map"
assert_eq "$(grep '^zero-filled' "$T/err")" "zero-filled: offset 0 (0x0), length 4194304: map missing" "a snapshot whose map is lost"
cmp -s "$T/b.img" <(head -c 4194304 /dev/zero) || die "the image of a lost map is not zeroes"
expect_fail 2 "^error: --skip-damaged needs a file or device to restore to, not standard output$" bv restore "$repo" c - --skip-damaged
