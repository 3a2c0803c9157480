#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# blkvault copy between local repositories (drive rotation; docs/LIFECYCLE.md, "Copies"):
#  1. copy all into a location that does not exist: DST is made related (the same id, opened by
#     SRC's passphrase), every snapshot restores bit-exact from it and verify --read-data passes;
#  2. an incremental copy sends only the packs the new backup wrote, whole; a second run sends
#     nothing;
#  3. copy of named snapshots, into a DST sealed by its own passphrase (--dst-passphrase-file):
#     a pack of which only part is wanted is repacked, the snapshot restores;
#  4. refusals: an unrelated repository, a non-empty directory that is no repository, a snapshot
#     SRC lacks, a bad rate; what a creation killed before its config left is finished;
#  5. --limit-upload and --limit-download hold the rate;
#  6. a gc at DST while the copy is held in a write deletes nothing the copy deduplicated against
#     (it holds DST's lease and commits as a backup does): the copied snapshot restores at once.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd openssl python3

export BLKVAULT_PASSPHRASE=copy-pass
src=$T/src
bv init "$src" -q
jget() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
npacks() { find "$1/packs" -name '*.pack' | wc -l; }
restores() { # REPO SNAPSHOT FILE
    rm -f "$T/restored"
    bv restore "$1" "$2" "$T/restored" -q || die "restore of $2 from $1"
    assert_same "$3" "$T/restored"
}
check() { bv verify "$1" --read-data >/dev/null 2>"$T/verify.err" || { cat "$T/verify.err" >&2; die "verify --read-data of $1"; }; }
snap_id() { bv list "$1" --json | python3 -c 'import json,sys; print([s["id"] for s in json.load(sys.stdin) if s["name"] == sys.argv[1]][-1])' "$2"; }

randfile "$T/a1" 24 copy-a1
bv backup "$src" "$T/a1" --name=a -q
cp "$T/a1" "$T/a2"
randfile "$T/patch" 2 copy-patch
dd if="$T/patch" of="$T/a2" bs=1M seek=5 conv=notrunc status=none
bv backup "$src" "$T/a2" --name=a -q
randfile "$T/b1" 8 copy-b1
bv backup "$src" "$T/b1" --name=b -q

# 1. copy all into a new location
dst=$T/dst
bv copy "$src" "$dst" --json >"$T/c1.json" 2>"$T/c1.err" || { cat "$T/c1.err"; die "copy into a new location"; }
assert_eq "$(jget snapshots_copied <"$T/c1.json")" 3 "snapshots copied"
assert_eq "$(jget packs_whole <"$T/c1.json")" "$(npacks "$src")" "every pack goes whole into an empty DST"
assert_eq "$(jget packs_repacked <"$T/c1.json")" 0 "packs repacked"
assert_eq "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$src/config")" \
    "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$dst/config")" "DST's repository id"
cmp -s "$src/keys/default" "$dst/keys/default" || die "DST is not sealed by SRC's secret"
[ "$(bv list "$src" --json | python3 -c 'import json,sys; print(sorted(s["id"] for s in json.load(sys.stdin)))')" = \
  "$(bv list "$dst" --json | python3 -c 'import json,sys; print(sorted(s["id"] for s in json.load(sys.stdin)))')" ] ||
    die "DST does not list SRC's snapshots"
restores "$dst" "$(snap_id "$src" a | head -1)" "$T/a2"
restores "$dst" b "$T/b1"
first_a=$(bv list "$dst" --json | python3 -c 'import json,sys; print([s["id"] for s in json.load(sys.stdin) if s["name"] == "a"][0])')
restores "$dst" "$first_a" "$T/a1"
check "$dst"

# 2. incremental: only the new backup's packs travel, whole; then nothing does
before=$(npacks "$src")
cp "$T/b1" "$T/b2"
dd if="$T/patch" of="$T/b2" bs=1M seek=3 conv=notrunc status=none
bv backup "$src" "$T/b2" --name=b -q
new=$(( $(npacks "$src") - before ))
bv copy "$src" "$dst" --json >"$T/c2.json" 2>"$T/c2.err" || { cat "$T/c2.err"; die "incremental copy"; }
assert_eq "$(jget snapshots_copied <"$T/c2.json")" 1 "incremental: snapshots copied"
assert_eq "$(jget snapshots_present <"$T/c2.json")" 3 "incremental: snapshots DST had"
assert_eq "$(jget packs_whole <"$T/c2.json")" "$new" "incremental: packs sent (the new backup's)"
assert_eq "$(jget packs_written <"$T/c2.json")" 0 "incremental: packs repacked"
[ "$(jget bytes_sent <"$T/c2.json")" -lt $((3 * 1048576)) ] || die "incremental copy sent $(jget bytes_sent <"$T/c2.json") bytes for a 2 MiB change"
restores "$dst" b "$T/b2"
bv copy "$src" "$dst" --json >"$T/c3.json" 2>/dev/null || die "copy with nothing to do"
assert_eq "$(jget bytes_sent <"$T/c3.json")" 0 "a copy with nothing new sends nothing"
assert_eq "$(jget snapshots_copied <"$T/c3.json")" 0 "a copy with nothing new publishes nothing"
bv copy "$src" "$dst" -q 2>"$T/q.err" || die "copy -q"
[ ! -s "$T/q.err" ] || { cat "$T/q.err"; die "copy -q printed something"; }
# --progress: the progress line on stderr, which is no terminal here; without it, none
bv copy "$src" "$T/prog" b --progress 2>"$T/prog.err" >/dev/null || die "copy --progress"
grep -q "copy .* / .* (100%)" "$T/prog.err" || { cat "$T/prog.err"; die "copy --progress showed no progress"; }
bv copy "$src" "$T/prog2" b 2>"$T/noprog.err" >/dev/null || die "copy without --progress"
if grep -q "(100%)" "$T/noprog.err"; then die "copy showed progress on a stderr that is no terminal"; fi

# 3. named snapshots into a DST of its own passphrase: the newest 'a' uses most of the first
# backup's pack but not the 2 MiB the second one replaced: that pack is repacked
echo other-pass >"$T/dstpass"
dst2=$T/dst2
bv copy "$src" "$dst2" a --dst-passphrase-file="$T/dstpass" --json >"$T/n.json" 2>"$T/n.err" || { cat "$T/n.err"; die "copy of a named snapshot"; }
assert_eq "$(jget snapshots_copied <"$T/n.json")" 1 "named: snapshots copied"
[ "$(jget packs_repacked <"$T/n.json")" -ge 1 ] || die "named: no pack was repacked ($(cat "$T/n.json"))"
[ "$(jget packs_written <"$T/n.json")" -ge 1 ] || die "named: no new pack was written"
BLKVAULT_PASSPHRASE=copy-pass expect_fail 3 "" bv list "$dst2"
BLKVAULT_PASSPHRASE=other-pass bv list "$dst2" --json | python3 -c 'import json,sys; l=json.load(sys.stdin); assert len(l)==1 and l[0]["name"]=="a", l' ||
    die "DST of a named copy"
BLKVAULT_PASSPHRASE=other-pass restores "$dst2" a "$T/a2"
BLKVAULT_PASSPHRASE=other-pass check "$dst2"
# a later copy of everything into it sends what it lacks, and DST opens with SRC's keys
bv copy "$src" "$dst2" --json >"$T/n2.json" 2>"$T/n2.err" || { cat "$T/n2.err"; die "copy of the rest"; }
assert_eq "$(jget snapshots_copied <"$T/n2.json")" 3 "the rest: snapshots copied"
[ "$(jget objects_present <"$T/n2.json")" -gt 0 ] || die "the rest: nothing was found at DST already"
BLKVAULT_PASSPHRASE=other-pass restores "$dst2" "$first_a" "$T/a1"
BLKVAULT_PASSPHRASE=other-pass check "$dst2"

# two snapshots named at once, as the synopsis says ([SNAPSHOT...]): the argument count refused
# more than one ("expected 'blkvault copy SRC DST [SNAPSHOT...]'")
bv copy "$src" "$T/two" a b --json >"$T/two.json" 2>"$T/two.err" || { cat "$T/two.err"; die "copy of two named snapshots"; }
assert_eq "$(jget snapshots_copied <"$T/two.json")" 2 "two named: snapshots copied"
restores "$T/two" b "$T/b2"

# 4. refusals
bv init "$T/other" -q
expect_fail 2 "^error: '$T/other' is a repository not related to '$src': copy goes only between related repositories (the same id and keys); to make one, copy into a location that does not exist yet ('blkvault copy $src NEWDIR')$" \
    bv copy "$src" "$T/other"
[ "$(bv list "$T/other" --json)" = "[]" ] || die "the unrelated repository was written"
mkdir "$T/junk"
echo x >"$T/junk/notes"
expect_fail 10 "^error: '$T/junk' holds files but no blkvault repository (notes is there): copy creates a repository only in a location that is missing or empty (for S3, a bucket or a prefix that holds no object)$" \
    bv copy "$src" "$T/junk"
# what a creation killed before its config left (the layout, a key slot) is finished, not refused
mkdir -p "$T/half/"{keys,packs,index,snapshots,locks,tmp}
echo '{"half":"written"}' >"$T/half/keys/default"
bv copy "$src" "$T/half" b -q || die "copy into what an interrupted creation left"
cmp -s "$src/keys/default" "$T/half/keys/default" || die "the half-written key slot was not replaced"
restores "$T/half" b "$T/b2"
expect_fail 1 "^error: no snapshot matches 'nosuch' (see 'blkvault list')$" bv copy "$src" "$T/none" nosuch
[ ! -e "$T/none" ] || die "a copy of a snapshot SRC lacks created DST"
bv copy "$src" "$T/latest" b@latest --json >"$T/l.json" 2>/dev/null || die "copy of b@latest"
assert_eq "$(jget snapshots_copied <"$T/l.json")" 1 "copy of b@latest"
restores "$T/latest" b "$T/b2"
expect_fail 2 "^error: invalid rate 'fast' (bytes per second, with a K, M or G suffix: 20M)$" \
    bv copy "$src" "$dst" --limit-upload=fast
expect_fail 10 "" bv copy "$T/nosuch" "$dst"

# 5. --limit-upload: 8 MiB at 4 MiB/s take about two seconds
start=$(date +%s%N)
bv copy "$src" "$T/slow" b --limit-upload=4M --json >"$T/slow.json" 2>/dev/null || die "copy with --limit-upload"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
sent=$(jget bytes_sent <"$T/slow.json")
[ "$ms" -ge $(( sent * 1000 / (4 * 1048576) * 9 / 10 )) ] || die "--limit-upload=4M: $sent bytes in $ms ms"
start=$(date +%s%N)
bv copy "$src" "$T/slow2" b --limit-download=4M --json >"$T/slow2.json" 2>/dev/null || die "copy with --limit-download"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
got=$(jget bytes_read <"$T/slow2.json")
[ "$got" -gt 0 ] || die "--limit-download: nothing read"
[ "$ms" -ge $(( got * 1000 / (4 * 1048576) * 9 / 10 )) ] || die "--limit-download=4M: $got bytes in $ms ms"

# 6. gc at DST beside a held copy: x is at DST; the copy of xy (x then y) finds x's objects there
# and is held writing y's; x is deleted at DST and collected: gc condemns x's pack but may not
# delete it while the copy's lease lives; the copy's commit puts x's entries back.
r6=$T/r6
bv init "$r6" -q
randfile "$T/x" 4 race-x
randfile "$T/y" 4 race-y
cat "$T/x" "$T/y" >"$T/xy"
bv backup "$r6" "$T/x" --name=x -q
bv copy "$r6" "$T/d6" -q
bv backup "$r6" "$T/xy" --name=xy -q
pid=
on_exit 'kill -KILL $pid'
BV_STALL_WRITE=1 stall_start $((1 << 20)) "$T/held.err" "$BLKVAULT" copy "$r6" "$T/d6" xy -q
bv delete "$T/d6" x 2>/dev/null
bv gc "$T/d6" >"$T/gc.out" || { cat "$T/gc.out"; die "gc at DST beside the copy"; }
grep -qx "deleted 0 packs, 0 B" "$T/gc.out" || { cat "$T/gc.out"; die "gc deleted what the held copy uses"; }
touch "$T/gate"
wait $pid || { cat "$T/held.err"; die "the held copy failed"; }
pid=
restores "$T/d6" xy "$T/xy"
check "$T/d6"
bv gc "$T/d6" >/dev/null
restores "$T/d6" xy "$T/xy"
check "$T/d6"
echo "ok"
