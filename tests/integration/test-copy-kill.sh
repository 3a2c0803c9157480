#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A copy killed at any moment and run again completes without sending again a pack it had
# finished (docs/LIFECYCLE.md, "Copies"): copies into a new location are killed (SIGKILL) again
# and again, held in a write at a random byte (stall.so) or after a random delay (creation,
# mark, publish); then one more run completes. The pack files at DST before that last run are
# never sent again by it (its packs_whole counts only the others, packs_resumed adopts those no
# index segment named), every snapshot restores bit-exact from DST and verify --read-data passes.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd openssl python3

MIB=1048576
src=$T/src
dst=$T/dst
bv init "$src" --encryption=none -q
for i in 1 2 3 4 5 6; do
    randfile "$T/img$i" 6 "kill-$i"
    bv backup "$src" "$T/img$i" --name="n$i" -q
done
cat "$T/img1" "$T/img2" "$T/img3" >"$T/big"
randfile "$T/tail" 3 kill-tail
cat "$T/tail" >>"$T/big"
bv backup "$src" "$T/big" --name=big -q
total=$(find "$src/packs" -name '*.pack' -printf '%s\n' | awk '{ s += $1 } END { print s }')
nsrc=$(find "$src/packs" -name '*.pack' | wc -l)
jget() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
pid=
on_exit 'kill -KILL $pid'

# held_kill random|BYTES: a copy held in a write at a random byte of what is left to send (or at
# BYTES), then killed; a copy with less left than that completes.
held_kill() {
    local have left after
    have=$( [ -d "$dst/packs" ] && find "$dst/packs" -name '*.pack' -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }' || echo 0)
    left=$(( total > have ? total - have : 1 ))
    after=$1
    [ "$after" = random ] && after=$(( (RANDOM * 32768 + RANDOM) % left ))
    rm -f "$T/gate" "$T/gate.waiting"
    env LD_PRELOAD="$STALL" BV_STALL_WRITE=1 BV_STALL_AFTER="$after" BV_STALL_GATE="$T/gate" \
        ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" "$BLKVAULT" copy "$src" "$dst" -q 2>"$T/copy.err" &
    pid=$!
    while [ ! -e "$T/gate.waiting" ] && kill -0 $pid 2>/dev/null; do sleep 0.05; done
    kill -KILL $pid 2>/dev/null || true
    wait $pid 2>/dev/null || true
    pid=
}
complete() { [ -f "$dst/config" ] && [ "$(bv list "$dst" --json 2>/dev/null | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" = 7 ]; }
completed=0

seed=${COPY_KILL_SEED:-$$}
RANDOM=$seed
echo "seed $seed (COPY_KILL_SEED)" >&2
for round in $(seq 1 "${COPY_KILL_ROUNDS:-12}"); do
    if [ $((round % 3)) = 0 ]; then
        # after a random delay: creating DST, marking, publishing
        "$BLKVAULT" copy "$src" "$dst" -q 2>"$T/copy.err" &
        pid=$!
        sleep "0.$((RANDOM % 10))$((RANDOM % 10))"
        kill -KILL $pid 2>/dev/null || true
        wait $pid 2>/dev/null || true
    else
        held_kill random
        rm -f "$T/gate.waiting"
    fi
    pid=
    [ -d "$dst" ] || continue
    # what a killed copy published reads at once
    if [ -f "$dst/config" ]; then
        for id in $(bv list "$dst" --json 2>/dev/null | python3 -c 'import json,sys; [print(s["id"]) for s in json.load(sys.stdin)]'); do
            bv verify "$dst" "$id" >/dev/null 2>&1 || die "round $round: snapshot $id published at DST does not verify"
        done
    fi
    # a copy that went to the end: start again, for more interruptions
    if complete; then
        completed=$((completed + 1))
        rm -rf "$dst"
    fi
done
echo "$completed copies went to the end between kills" >&2

# one more, killed half-way, so that the last run has work left
rm -rf "$dst"
held_kill $((total / 2))
complete && die "a copy held half-way completed"

# the last run: packs at DST already are not sent again
there=$( [ -d "$dst/packs" ] && find "$dst/packs" -name '*.pack' -printf '%f\n' | sort || true)
from_src=$(comm -12 <(echo "$there") <(find "$src/packs" -name '*.pack' -printf '%f\n' | sort) | grep -c . || true)
bv copy "$src" "$dst" --json >"$T/last.json" 2>"$T/last.err" || { cat "$T/last.err"; die "the last copy failed"; }
cat "$T/last.json" >&2
whole=$(jget packs_whole <"$T/last.json")
[ "$whole" -eq $((nsrc - from_src)) ] ||
    die "the last copy sent $whole packs whole; $from_src of SRC's $nsrc were at DST already"
for f in $there; do
    [ -f "$(find "$dst/packs" -name "$f")" ] || die "pack $f went away"
done
assert_eq "$(jget snapshots_copied <"$T/last.json")" "$((7 - $(jget snapshots_present <"$T/last.json")))" "snapshots"
for i in 1 2 3 4 5 6; do
    rm -f "$T/out"
    bv restore "$dst" "n$i" "$T/out" -q || die "restore n$i"
    assert_same "$T/img$i" "$T/out"
done
rm -f "$T/out"
bv restore "$dst" big "$T/out" -q || die "restore big"
assert_same "$T/big" "$T/out"
bv verify "$dst" --read-data >/dev/null 2>"$T/verify.err" || { cat "$T/verify.err"; die "verify --read-data of DST"; }
# a copy after that sends nothing
bv copy "$src" "$dst" --json >"$T/again.json" 2>/dev/null || die "copy again"
assert_eq "$(jget bytes_sent <"$T/again.json")" 0 "a copy with nothing left to send"
echo ok
