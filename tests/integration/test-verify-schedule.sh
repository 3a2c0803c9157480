#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Scheduled verification: `verify --read-data --sample=PERCENT` reads the packs verified least
# recently first and records them in REPO/verify-state, so successive runs cover every pack; a
# flipped byte in a pack is found by the run that reaches it and read first again by the next
# runs until it is gone; the state survives a power cut at any of its fsyncs; `--written`
# reads only what a snapshot's backup added.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd openssl
[ -n "${POWERCUT:-}" ] && [ -f "$POWERCUT" ] || die "POWERCUT (tests/fault/powercut.so) is not built"

repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
packs() { find "$repo/packs" -name '*.pack' | sort; }
# eight backups of 1 MiB of random data: one pack each
for i in $(seq 1 8); do
    randfile "$T/img$i" 1 "img$i"
    bv backup "$repo" "$T/img$i" --name="n$i" >/dev/null
    [ "$i" != 1 ] || first_pack=$(packs)
done
assert_eq "$(packs | wc -l)" 8 "packs"
never() { sed -n 's/.*"packs_never_read": *\([0-9]*\).*/\1/p' "$T/v.json"; }

# the pack read last in the first cycle (never-verified packs go in id order) gets a flipped byte
last=$(packs | tail -1)
# in its middle: 1 MiB of data; a small map node may come first in a pack (the backup's threads
# decide), and a map node is read by every run, sampled or not
flipped=$(( $(stat -c %s "$last") / 2 ))
flip_byte "$last" "$flipped"
runs=0 found=0
while :; do
    runs=$((runs + 1))
    [ "$runs" -le 8 ] || die "8 runs of --sample=25 did not cover 8 packs"
    rc=0
    bv verify "$repo" --read-data --sample=25 --json >"$T/v.json" 2>"$T/v.err" || rc=$?
    if [ "$(never)" = 0 ]; then
        # the run that reached the last pack found the damage, naming the snapshot and offset
        assert_eq "$rc" 4 "exit status of the run that read the damaged pack"
        grep -q '"what": *"chunk"' "$T/v.json" || die "the damaged chunk is not reported"
        grep -q '"error": *"Bad message"' "$T/v.json" || die "the damage is not Bad message"
        found=1
        break
    fi
    assert_eq "$rc" 0 "exit status of run $runs (damaged pack not read yet)"
done
[ "$runs" -ge 3 ] || die "the sample read too much: all 8 packs covered in $runs runs of 25%"
# coverage: every pack on disk is in the state with a time, the damaged one marked bad
assert_eq "$(sed 1d "$repo/verify-state" | wc -l)" 8 "packs in verify-state"
assert_eq "$(sed 1d "$repo/verify-state" | awk '$2 == 0' | wc -l)" 0 "packs never verified"
bad_id=$(basename "$last" .pack)
assert_eq "$(grep -c " bad$" "$repo/verify-state")" 1 "bad packs in the state"
grep -q "^$bad_id [0-9]* bad$" "$repo/verify-state" || die "the damaged pack is not the bad one"
# the damaged pack is read first by the next run (it stays reported until it is repaired)
# (where in the image: the chunk at the flipped pack offset, which depends on the order workers
# finished when the pack was written)
expect_fail 4 "^damaged: snapshot [0-9a-f]\{8\}, image offset [0-9]* (0x[0-9a-f]*): chunk [0-9a-f]\{64\}: Bad message$" \
    bv verify "$repo" --read-data --sample=1
grep -qx "scheduled: data of 1 of 8 packs read; 0 packs never read yet" "$T/.err" || { cat "$T/.err" >&2; die "sample=1 output"; }
# once the byte is restored the pack is whole again and drops behind the others
flip_byte "$last" "$flipped"
bv verify "$repo" --read-data --sample=1 2>"$T/v.err" >/dev/null || { cat "$T/v.err" >&2; die "verify after the byte was restored"; }
grep -q "^$bad_id [0-9]* ok$" "$repo/verify-state" || die "the restored pack is not ok"

# --max-duration alone reads everything that fits: here every pack
bv verify "$repo" --read-data --max-duration=1h --json >"$T/v.json"
grep -q '"packs_read": *8' "$T/v.json" || { cat "$T/v.json" >&2; die "--max-duration=1h did not read every pack"; }

# usage errors
expect_fail 2 "error: invalid --sample '0' (1 to 100)" bv verify "$repo" --read-data --sample=0
expect_fail 2 "error: invalid --sample 'x' (1 to 100)" bv verify "$repo" --read-data --sample=x
expect_fail 2 "error: --max-duration=soon: expected a duration such as 30min, 2h or 1d" bv verify "$repo" --read-data --max-duration=soon
expect_fail 2 "error: --sample and --max-duration need --read-data and no SNAPSHOT" bv verify "$repo" --sample=10
expect_fail 2 "error: --sample and --max-duration need --read-data and no SNAPSHOT" bv verify "$repo" n1 --read-data --sample=10
expect_fail 2 "error: --written needs --read-data and a SNAPSHOT" bv verify "$repo" --read-data --written

# a state file that does not parse is started anew, with a warning
echo garbage > "$repo/verify-state"
bv verify "$repo" --read-data --sample=10 >/dev/null 2>"$T/v.err"
grep -qx "warning: verify-state in the repository did not parse; starting the schedule anew" "$T/v.err" || { cat "$T/v.err" >&2; die "no warning for a damaged state"; }
assert_eq "$(head -1 "$repo/verify-state")" "blkvault-verify-state 1" "state rewritten"

# a power cut at each fsync of a sampled run: the state is the old or the new one, never torn
cuts=0
for n in 1 2 3 4; do
    cp "$repo/verify-state" "$T/state.before"
    rc=0
    env LD_PRELOAD="$POWERCUT" BV_POWERCUT_AT="$n" ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" \
        "$BLKVAULT" verify "$repo" --read-data --sample=30 >/dev/null 2>"$T/cut.err" || rc=$?
    case $rc in
        99) cuts=$((cuts + 1)) ;;
        0) ;;
        *) cat "$T/cut.err" >&2; die "verify under powercut.so (cut at $n) exited $rc" ;;
    esac
    head -1 "$repo/verify-state" | grep_q -x "blkvault-verify-state 1" || die "state torn by the cut at $n"
    bv verify "$repo" --read-data --sample=30 >/dev/null 2>"$T/v.err" || { cat "$T/v.err" >&2; die "verify after the cut at $n"; }
    grep -q "warning" "$T/v.err" && { cat "$T/v.err" >&2; die "the state did not parse after the cut at $n"; }
done
[ "$cuts" -ge 1 ] || die "no power cut happened during a sampled verify"

# --written: the second backup of a name appends to the first; damage in the first backup's pack
# is not read by --written of the second snapshot, and is found by a whole read of it
randfile "$T/tail" 1 tail
cat "$T/img1" "$T/tail" > "$T/grown"
bv backup "$repo" "$T/grown" --name=n1 >/dev/null
second=$(bv list "$repo" --json | grep -o '"id": *"[0-9a-f]*"' | tail -1 | grep -o '[0-9a-f]\{32\}')
bv verify "$repo" "$second" --read-data --written --json >"$T/w.json"
bv verify "$repo" "$second" --read-data --json >"$T/a.json"
w=$(sed -n 's/.*"chunks_checked": *\([0-9]*\).*/\1/p' "$T/w.json")
a=$(sed -n 's/.*"chunks_checked": *\([0-9]*\).*/\1/p' "$T/a.json")
[ "$w" -gt 0 ] && [ "$w" -lt "$a" ] || die "--written read $w chunks of the $a the snapshot references"
# a byte in a data chunk both snapshots use (writers append in the order workers finish, so
# where such a chunk lies is found by trying: the whole read of the second snapshot must fail
# on a chunk, not on a map node)
size=$(stat -c %s "$first_pack") at=
for k in 2 3 4 5 6 7; do
    flip_byte "$first_pack" $((size / k))
    if ! bv verify "$repo" "$second" --read-data >/dev/null 2>"$T/v.err" && grep -q ": chunk " "$T/v.err" &&
       ! grep -q "map node" "$T/v.err"; then at=$((size / k)); break; fi
    flip_byte "$first_pack" $((size / k))
done
[ -n "$at" ] || die "no offset of the first pack holds a chunk the second snapshot uses"
bv verify "$repo" "$second" --read-data --written >/dev/null 2>"$T/v.err" || { cat "$T/v.err" >&2; die "--written read the first backup's data"; }
flip_byte "$first_pack" "$at"
echo "ok: damage found after $runs sampled runs, $cuts power cuts survived, --written read $w of $a chunks"
