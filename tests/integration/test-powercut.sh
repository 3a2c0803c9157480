#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A power cut at every fsync of a backup (tests/fault/powercut.c undoes or tears every write and
# undoes every directory entry not yet made durable, then kills the process): after each cut the
# repository opens, `verify --read-data` passes, the earlier snapshot restores bit-exact, the
# interrupted snapshot is either absent or complete, and the next backup succeeds.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd openssl
[ -n "${POWERCUT:-}" ] && [ -f "$POWERCUT" ] || die "POWERCUT (tests/fault/powercut.so) is not built"

randfile "$T/first" 8 first
randfile "$T/second" 20 second
# and 20 MiB that compresses (hex text): those chunks are stored in compression groups
randfile "$T/noise" 10 text
od -An -tx1 -v "$T/noise" | tr -d ' \n' | head -c $((20 * 1048576)) >> "$T/second"
# a sixth of the second image is the first one again: dedup against durable data is exercised
cat "$T/first" "$T/second" > "$T/image"

run_cut() { # run_cut N CMD...: runs CMD with a power cut at fsync N; prints its exit status
    local rc=0
    env LD_PRELOAD="$POWERCUT" BV_POWERCUT_AT="$1" BV_POWERCUT_MODE="$mode" \
        ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" "${@:2}" >/dev/null 2>"$T/cut.err" || rc=$?
    echo "$rc"
}

cuts=0
# every fsync with unsynced writes dropped; with them torn (half written, the
# last sector of that half garbage) at every third
for mode_n in $(seq 1 60 | sed 's/^/drop:/') $(seq 2 3 60 | sed "s/^/torn:/"); do
    mode=${mode_n%%:*} n=${mode_n#*:}
    [ "$mode" = "${done_mode:-}" ] && continue
    repo=$T/repo-$n
    bv init "$repo" --encryption=none >/dev/null
    bv backup "$repo" "$T/first" --name=first >/dev/null
    rc=$(run_cut "$n" "$BLKVAULT" backup "$repo" "$T/image" --name=second)
    case $rc in
        99) cuts=$((cuts + 1)) ;;
        0) done_mode=$mode; rm -rf "$repo"; continue ;;  # finished before its Nth fsync: every point tried
        *) cat "$T/cut.err" >&2; die "backup under powercut.so ($mode cut at $n) exited $rc" ;;
    esac
    bv verify "$repo" --read-data >/dev/null 2>"$T/verify.err" || { cat "$T/verify.err" >&2; die "verify failed after a power cut ($mode) at fsync $n"; }
    bv restore "$repo" first "$T/first.out" >/dev/null
    assert_same "$T/first" "$T/first.out"
    rm "$T/first.out"
    if bv list "$repo" --json | grep '"name": *"second"' >/dev/null; then
        bv restore "$repo" second "$T/second.out" >/dev/null
        assert_same "$T/image" "$T/second.out"
        rm "$T/second.out"
    fi
    bv backup "$repo" "$T/image" --name=again >/dev/null
    bv restore "$repo" again "$T/again.out" >/dev/null
    assert_same "$T/image" "$T/again.out"
    rm -rf "$T/again.out" "$repo"
done
[ "$cuts" -ge 3 ] || die "only $cuts power cuts happened: the fault library is not working"
echo "ok: $cuts power cuts, every one recovered"
