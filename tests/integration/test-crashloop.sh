#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Crash loops beyond backup (test-powercut.sh): `key change`, `repair --force` and `gc` cut at every
# fsync, with unsynced writes dropped and torn (tests/fault/powercut.c), and a malloc-failure
# countdown (tests/fault/mallocfail.c) through backup, key change and repair. After each cut or
# failure the repository opens, verifies, and every committed snapshot restores bit-exact.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd openssl
[ -n "${POWERCUT:-}" ] && [ -f "$POWERCUT" ] || die "POWERCUT (tests/fault/powercut.so) is not built"
[ -n "${MALLOCFAIL:-}" ] && [ -f "$MALLOCFAIL" ] || die "MALLOCFAIL (tests/fault/mallocfail.so) is not built"

preload() { # preload LIB VAR=VALUE... -- CMD...: prints CMD's exit status
    local lib=$1 rc=0; shift
    local vars=()
    while [ "$1" != -- ]; do vars+=("$1"); shift; done; shift
    env LD_PRELOAD="$lib" "${vars[@]}" ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" \
        "$@" >"$T/run.out" 2>"$T/run.err" || rc=$?
    echo "$rc"
}

head -c 64 /dev/urandom > "$T/key1"
head -c 64 /dev/urandom > "$T/key2"
randfile "$T/img1" 3 one
randfile "$T/img2" 2 two
randfile "$T/noise" 1 text
od -An -tx1 -v "$T/noise" | tr -d ' \n' | head -c $((2 * 1048576)) >> "$T/img2"
base=$T/base
bv init "$base" --key-file="$T/key1" >/dev/null
bv backup "$base" "$T/img1" --name=n1 --key-file="$T/key1" >/dev/null
bv backup "$base" "$T/img2" --name=n2 --key-file="$T/key1" >/dev/null
# the same with n1's index segment lost, for repair
broken=$T/broken
cp -a "$base" "$broken"
rm "$(find "$broken/index" -name '*.idx' | sort | head -1)"

check_repo() { # check_repo REPO KEY WHEN: verifies and restores both snapshots bit-exact
    bv verify "$1" --read-data --key-file="$2" >/dev/null 2>"$T/v.err" || { cat "$T/v.err" >&2; die "verify $3"; }
    for i in 1 2; do
        bv restore "$1" "n$i" "$T/out" --key-file="$2" >/dev/null 2>"$T/r.err" || { cat "$T/r.err" >&2; die "restore n$i $3"; }
        assert_same "$T/img$i" "$T/out"
        rm "$T/out"
    done
}
opening_key() { # the key that opens REPO now: key2 (changed) or key1
    if bv list "$1" --key-file="$T/key2" >/dev/null 2>&1; then echo "$T/key2"; else echo "$T/key1"; fi
}

# 1. key change, cut at each fsync: the old key or the new one opens, never neither
cuts=0
for mode in drop torn; do
    for n in $(seq 1 10); do
        rm -rf "$T/repo"; cp -a "$base" "$T/repo"
        rc=$(preload "$POWERCUT" BV_POWERCUT_AT="$n" BV_POWERCUT_MODE="$mode" -- \
             "$BLKVAULT" key change "$T/repo" --key-file="$T/key1" --new-key-file="$T/key2")
        case $rc in
            99) cuts=$((cuts + 1)) ;;
            0) break ;;
            *) cat "$T/run.err" >&2; die "key change ($mode cut at $n) exited $rc" ;;
        esac
        check_repo "$T/repo" "$(opening_key "$T/repo")" "after key change was cut ($mode) at fsync $n"
    done
    [ "$rc" = 0 ] || die "key change did not finish within 10 fsyncs"
    assert_eq "$(opening_key "$T/repo")" "$T/key2" "the key after a finished key change"
done
key_cuts=$cuts

# 2. repair --force, cut at each fsync: the cut leaves nothing damaged (only what the index still
# lacks), and a repair run to its end gives back every snapshot
cuts=0
for mode in drop torn; do
    for n in $(seq 1 20); do
        rm -rf "$T/repo"; cp -a "$broken" "$T/repo"
        rc=$(preload "$POWERCUT" BV_POWERCUT_AT="$n" BV_POWERCUT_MODE="$mode" -- \
             "$BLKVAULT" repair "$T/repo" --force --key-file="$T/key1")
        case $rc in
            99) cuts=$((cuts + 1)) ;;
            0) break ;;
            *) cat "$T/run.err" >&2; die "repair --force ($mode cut at $n) exited $rc" ;;
        esac
        vrc=0
        bv verify "$T/repo" --read-data --key-file="$T/key1" --json >"$T/v.json" 2>/dev/null || vrc=$?
        [ "$vrc" = 0 ] || [ "$vrc" = 4 ] || die "verify after repair was cut ($mode) at $n exited $vrc"
        grep -q '"error": *"Bad message"' "$T/v.json" && { cat "$T/v.json" >&2; die "repair cut ($mode) at $n left damage"; }
        bv repair "$T/repo" --force --key-file="$T/key1" >/dev/null 2>"$T/e" || { cat "$T/e" >&2; die "repair after its cut ($mode) at $n"; }
        check_repo "$T/repo" "$T/key1" "after repair was cut ($mode) at fsync $n"
    done
    [ "$rc" = 0 ] || die "repair did not finish within 20 fsyncs"
    check_repo "$T/repo" "$T/key1" "after a finished repair"
done
repair_cuts=$cuts

# 2b. gc (the gc branch), cut at each fsync after n3 (a third snapshot, half shared) is deleted:
# n1 and n2 stay whole after every cut, and a gc run to its end afterwards succeeds
randfile "$T/img3" 2 three
cat "$T/img3" "$T/img1" > "$T/img3b"
gcbase=$T/gcbase
cp -a "$base" "$gcbase"
bv backup "$gcbase" "$T/img3b" --name=n3 --key-file="$T/key1" >/dev/null
bv delete "$gcbase" n3 --key-file="$T/key1" >/dev/null 2>&1
cuts=0
for mode in drop torn; do
    for n in $(seq 1 30); do
        rm -rf "$T/repo"; cp -a "$gcbase" "$T/repo"
        rc=$(preload "$POWERCUT" BV_POWERCUT_AT="$n" BV_POWERCUT_MODE="$mode" -- \
             "$BLKVAULT" gc "$T/repo" --key-file="$T/key1")
        case $rc in
            99) cuts=$((cuts + 1)) ;;
            0) break ;;
            *) cat "$T/run.err" >&2; die "gc ($mode cut at $n) exited $rc" ;;
        esac
        check_repo "$T/repo" "$T/key1" "after gc was cut ($mode) at fsync $n"
        bv gc "$T/repo" --key-file="$T/key1" >/dev/null 2>"$T/e" || { cat "$T/e" >&2; die "gc after its cut ($mode) at $n"; }
        bv restore "$T/repo" n2 "$T/out" --key-file="$T/key1" >/dev/null && assert_same "$T/img2" "$T/out" && rm "$T/out"
    done
    [ "$rc" = 0 ] || die "gc did not finish within 30 fsyncs"
    check_repo "$T/repo" "$T/key1" "after a finished gc"
done
gc_cuts=$cuts

# 3. a malloc failure at the Nth allocation of the program's own code: a clean failure
fails=0
countdown() { # countdown FIXTURE KEY CMD...: fails each sampled allocation of CMD in a copy of FIXTURE
    local fixture=$1 key=$2; shift 2
    rm -rf "$T/repo"; cp -a "$fixture" "$T/repo"
    preload "$MALLOCFAIL" BV_MALLOC_COUNT="$T/count" -- "$@" >/dev/null
    local total a=1 b=2 t
    total=$(cat "$T/count")
    [ "$total" -gt 10 ] || die "only $total allocations counted in '$*'"
    for n in $(while [ "$a" -le "$total" ]; do echo "$a"; t=$((a + b)); a=$b; b=$t; done; echo "$total"); do
        rm -rf "$T/repo"; cp -a "$fixture" "$T/repo"
        rc=$(preload "$MALLOCFAIL" BV_MALLOC_FAIL_AT="$n" -- "$@")
        grep -q "Sanitizer\|runtime error" "$T/run.err" && { cat "$T/run.err" >&2; die "'$*' with allocation $n failing: sanitizer report"; }
        case $rc in
            0) ;;
            1|4) grep -q "^error: " "$T/run.err" || { cat "$T/run.err" >&2; die "'$*' failed at allocation $n without an error message"; }
                 fails=$((fails + 1)) ;;
            *) cat "$T/run.err" >&2; die "'$*' with allocation $n failing exited $rc" ;;
        esac
        # the broken fixture stays broken until a repair runs to its end
        [ "$fixture" != "$broken" ] || bv repair "$T/repo" --force --key-file="$key" >/dev/null 2>&1 ||
            die "repair after '$*' lost allocation $n"
        check_repo "$T/repo" "$(opening_key "$T/repo")" "after '$*' lost allocation $n"
    done
}
countdown "$base" "$T/key1" "$BLKVAULT" backup "$T/repo" "$T/img2" --name=n3 --key-file="$T/key1"
countdown "$base" "$T/key1" "$BLKVAULT" key change "$T/repo" --key-file="$T/key1" --new-key-file="$T/key2"
countdown "$broken" "$T/key1" "$BLKVAULT" repair "$T/repo" --force --key-file="$T/key1"
[ "$key_cuts" -ge 2 ] && [ "$repair_cuts" -ge 2 ] && [ "$gc_cuts" -ge 2 ] && [ "$fails" -ge 10 ] ||
    die "too few faults: $key_cuts $repair_cuts $gc_cuts $fails"
echo "ok: $key_cuts cuts in key change, $repair_cuts in repair, $gc_cuts in gc, $fails clean allocation failures"
