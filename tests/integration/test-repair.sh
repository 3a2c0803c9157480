#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# repair: a lost or damaged index segment is rebuilt from the packs' own indexes, after which
# every snapshot restores bit-exact; a damaged or missing pack is listed as what each snapshot
# lost, by byte range; nothing is written without --force; and a backup that stores the lost
# chunks again heals the snapshots that referenced them.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd openssl od

repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
randfile "$T/img1" 2 one
# compressible: stored in compression groups
randfile "$T/noise" 1 text
od -An -tx1 -v "$T/noise" | tr -d ' \n' | head -c $((2 * 1048576)) > "$T/img2"
randfile "$T/img3" 2 three
packs() { find "$repo/packs" -name '*.pack' | sort; }
segs() { find "$repo/index" -name '*.idx' | sort; }
ids=()
for i in 1 2 3; do
    before=$(packs) before_segs=$(segs)
    bv backup "$repo" "$T/img$i" --name="n$i" >/dev/null
    pack[$i]=$(comm -13 <(echo "$before") <(packs) | head -1)
    seg[$i]=$(comm -13 <(echo "$before_segs") <(segs) | head -1)
    ids[$i]=$(bv list "$repo" --json | grep -o '"id": *"[0-9a-f]*"' | tail -1 | grep -o '[0-9a-f]\{32\}')
done
restore_all() { # every snapshot restores bit-exact
    for i in 1 2 3; do
        bv restore "$repo" "${ids[$i]}" "$T/out" >/dev/null 2>"$T/r.err" || { cat "$T/r.err" >&2; die "restore of n$i: $1"; }
        assert_same "$T/img$i" "$T/out"
        rm "$T/out"
    done
}
state() { (cd "$repo" && find index packs snapshots -type f | sort | xargs sha256sum); }

bv repair "$repo" >/dev/null 2>"$T/e"
grep -qx "ok: 3 packs, [0-9]* objects whole, 3 snapshots whole; nothing to repair" "$T/e" || { cat "$T/e" >&2; die "repair of a whole repository"; }
expect_fail 2 "^error: expected 'blkvault repair REPO' (see 'blkvault help repair')$" bv repair
bv repair --help | grep_q "^Usage: blkvault repair REPO" || die "repair --help"

# 1. an index segment deleted: restores fail; repair names it and writes nothing; --force rebuilds
rm "${seg[1]}"
expect_fail 4 "^error: restore of snapshot ${ids[1]:0:8} stopped: missing data (the repository needs repair) at image offset 0 (0x0): map node [0-9a-f]\{64\} (not in the index); '$T/out' was not left behind as a file$" \
    bv restore "$repo" n1 "$T/out"
rm -f "$T/out"
state > "$T/before"
expect_fail 4 "error: the index of '$repo' needs a rebuild: run 'blkvault repair $repo --force' (nothing was written)" bv repair "$repo"
grep -q "^index: [1-9][0-9]* objects it does not locate, 0 entries that locate nothing whole, 0 damaged segments$" "$T/.err" || { cat "$T/.err" >&2; die "repair's index summary"; }
grep -q "^lost:" "$T/.out" && die "nothing is lost when only the index is"
state | cmp -s - "$T/before" || die "repair without --force changed the repository"
# --force needs locks/gc to itself: a reader holding it makes repair wait for nothing and fail
(exec 9<"$repo/locks/gc"; flock -s 9; exec sleep 60) & holder=$!
on_exit "kill $holder 2>/dev/null || :"
for _ in $(seq 50); do flock -n -x "$repo/locks/gc" true || break; sleep 0.1; done
expect_fail 7 "error: repository '$repo' is in use (an export, a reader or gc holds locks/gc): stop it, then repair again" bv repair "$repo" --force
kill "$holder"; wait "$holder" 2>/dev/null || :
bv repair "$repo" --force >/dev/null 2>"$T/e" || { cat "$T/e" >&2; die "repair --force of a deleted segment"; }
grep -qx "index rebuilt from 3 packs: 1 segments written, 2 removed" "$T/e" || { cat "$T/e" >&2; die "rebuild summary"; }
assert_eq "$(find "$repo/index" -name '*.idx' | wc -l)" 1 "segments after the rebuild"
bv verify "$repo" --read-data >/dev/null 2>"$T/e" || { cat "$T/e" >&2; die "verify after the rebuild"; }
restore_all "after the index was rebuilt"
bv repair "$repo" 2>&1 >/dev/null | grep_q "nothing to repair" || die "a second repair found work"

# 2. a damaged segment: writers refuse the repository until repair --force rebuilds the index
seg=$(find "$repo/index" -name '*.idx' | head -1)
flip_byte "$seg" 100
expect_fail 4 "^error: refusing to write to repository '$repo': index segment 'index/$(basename "$seg")' does not read (Bad message); the repository needs repair (see 'blkvault verify')$" \
    bv backup "$repo" "$T/img1" --name=refused
bv repair "$repo" --force >/dev/null 2>"$T/e" || { cat "$T/e" >&2; die "repair --force of a damaged segment"; }
grep -q "^damaged: index segment index/$(basename "$seg"): Bad message$" "$T/e" || { cat "$T/e" >&2; die "the damaged segment is not named"; }
bv backup "$repo" "$T/img1" --name=n1 >/dev/null
ids[1]=$(bv list "$repo" --json | grep -o '"id": *"[0-9a-f]*"' | tail -1 | grep -o '[0-9a-f]\{32\}')
restore_all "after a damaged segment was rebuilt"
# the same with a segment named in upper-case hex, which the index opens too: the rebuild
# removes it (it left it, and writers kept refusing the repository)
seg=$(find "$repo/index" -name '*.idx' | head -1)
mv "$seg" "$repo/index/ABCDEF0123456789.idx"
flip_byte "$repo/index/ABCDEF0123456789.idx" 100
expect_fail 4 "^error: refusing to write to repository '$repo': index segment 'index/ABCDEF0123456789.idx' does not read" \
    bv backup "$repo" "$T/img1" --name=refused
bv repair "$repo" --force >/dev/null 2>"$T/e" || { cat "$T/e" >&2; die "repair --force of a damaged upper-case segment"; }
[ ! -e "$repo/index/ABCDEF0123456789.idx" ] || die "repair --force left the damaged segment ABCDEF0123456789.idx"
bv repair "$repo" 2>&1 >/dev/null | grep_q "nothing to repair" || die "a repair after the rebuild found work"
restore_all "after a damaged upper-case segment was rebuilt"

# 3. bit rot in the pack of n2 (compression groups): what n2 lost is listed by byte range, where
# verify finds the damage; nothing is written without --force
flip_byte "${pack[2]}" 5000
first=$({ bv verify "$repo" "${ids[2]}" --read-data --json 2>/dev/null || :; } | grep -o '"offset": *[0-9]*' | grep -o '[0-9]*$' | sort -n | head -1)
[ -n "$first" ] || die "verify did not find the flipped byte"
state > "$T/before"
expect_fail 4 "error: the index of '$repo' needs a rebuild" bv repair "$repo"
grep -q "^damaged: object [0-9a-f]\{64\} in pack ${pack[2]#"$repo/packs/"} at offset [0-9]*: Bad message$" "$T/.err" || { cat "$T/.err" >&2; die "the damaged object is not named"; }
grep -q "^lost: snapshot ${ids[2]:0:8} (n2, [^)]*): bytes $first-[0-9]* ([^)]*): data$" "$T/.out" || { cat "$T/.out" >&2; die "n2's loss is not listed from offset $first"; }
[ "$(grep -c "^lost:" "$T/.out")" = "$(grep -c "^lost: snapshot ${ids[2]:0:8}" "$T/.out")" ] || die "another snapshot is listed as lossy"
state | cmp -s - "$T/before" || die "repair without --force changed the repository"
expect_fail 4 "error: data is lost in '$repo': back its sources up again to heal what they still hold" bv repair "$repo" --force
# the damaged chunks are no longer indexed: backing n2's source up again stores them again, and
# the old snapshot reads whole. The image file is unchanged, but its last snapshot lost chunks:
# it is read again without --force-read (taking the old map would make a snapshot damaged from
# birth, which a run's verify --written would call good)
bv backup "$repo" "$T/img2" --name=n2 >/dev/null 2>"$T/e" || { cat "$T/e" >&2; die "backup of n2 after the rebuild"; }
grep -q "unchanged since" "$T/e" && die "an unchanged image whose snapshot lost chunks was not read again"
grep -qxF "warning: '$T/img2' is unchanged, but its last snapshot ${ids[2]:0:8} lost chunks (see 'blkvault repair'): read it again" "$T/e" || { cat "$T/e" >&2; die "no word of why the source was read"; }
bv verify "$repo" n2@latest >/dev/null 2>"$T/e" || { cat "$T/e" >&2; die "the new snapshot of n2 is damaged"; }
bv repair "$repo" >/dev/null 2>"$T/e" || { cat "$T/e" >&2; die "repair after the healing backup"; }
grep -qx "ok: [0-9]* packs, [0-9]* objects whole, 5 snapshots whole; nothing to repair" "$T/e" || { cat "$T/e" >&2; die "repair after healing"; }
restore_all "after the healing backup"
bv verify "$repo" "${ids[2]}" --read-data >/dev/null 2>"$T/e" || { cat "$T/e" >&2; die "verify of the healed snapshot"; }

# 4. a pack deleted: listed as lost (a writer already stores it again), healed by a backup
rm "${pack[3]}"
expect_fail 4 "^error: the index of '$repo' needs a rebuild: run 'blkvault repair $repo --force' (nothing was written)$" bv repair "$repo"
# (its map nodes were in that pack too: the whole image is lost with them)
grep -q "^lost: snapshot ${ids[3]:0:8} (n3, [^)]*): bytes 0-2097151 (2.0 MiB): map$" "$T/.out" || { cat "$T/.out" >&2; die "n3's loss is not listed"; }
grep -qx "1 snapshots of 5 lost 2.0 MiB in 1 ranges" "$T/.err" || { cat "$T/.err" >&2; die "the summary of what is lost"; }
# --force rebuilds the index without the pack, and says that data is lost still
expect_fail 4 "^error: data is lost in '$repo': back its sources up again to heal what they still hold$" \
    bv repair "$repo" --force
grep -qx "warning: pack 'packs/${pack[3]#"$repo/packs/"}' named by the index is missing: what it held is stored again" "$T/.err" ||
    { cat "$T/.err" >&2; die "the missing pack is not named"; }
grep -qx "index rebuilt from 3 packs: 1 segments written, 2 removed" "$T/.err" || { cat "$T/.err" >&2; die "rebuild summary without the pack"; }
bv backup "$repo" "$T/img3" --name=n3 --force-read >/dev/null 2>&1
bv repair "$repo" >/dev/null 2>"$T/e" || { cat "$T/e" >&2; die "repair after the pack was stored again"; }
restore_all "after a lost pack was stored again"
# 5. a pack whose own index (its footer) is damaged still holds whole objects: repair names it,
# loses nothing, and a rebuild keeps what the chunk index locates in it
size=$(stat -c %s "${pack[1]}")
flip_byte "${pack[1]}" $((size - 1))
rm "$(ls -t "$repo"/index/*.idx | head -1)" # the last backup's: a rebuild is needed, n1 stays indexed
bv repair "$repo" --force >/dev/null 2>"$T/e" || { cat "$T/e" >&2; die "repair --force with a damaged pack footer"; }
grep -qx "damaged: pack ${pack[1]#"$repo/packs/"}: Bad message" "$T/e" || { cat "$T/e" >&2; die "the damaged pack footer is not named"; }
restore_all "after a rebuild beside a pack with a damaged footer"
echo "ok: index rebuilt, losses listed by range, healed by backups"
