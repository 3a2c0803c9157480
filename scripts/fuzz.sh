#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Runs every fuzz target under libFuzzer for a short while (BLKVAULT_FUZZ_SECONDS each, default
# 20), starting from its seed corpus in tests/fuzz/corpus/<target>/. The fuzz build (clang,
# -Dfuzzing=true, ASan and UBSan) lives in its own build directory (build-fuzz, or
# $FUZZ_BUILDDIR); the library is instrumented too (see meson.build), so the coverage figure
# libFuzzer prints counts the parsers' branches. Prints one line per target with its final
# coverage ("fuzz TARGET ... cov: N (floor F) ..."); a crash fails the run and its input is copied
# into the seed corpus (tests/fuzz/corpus/<target>/crash-<sha1>) so that the ordinary replay test
# keeps it. A target whose coverage stays below BLKVAULT_FUZZ_MIN_COV (default 300 points) fails
# too: its seeds or its target no longer reach the code under test. BLKVAULT_FUZZ_JOBS targets
# (default 2: one a core) run at once, each for its whole BLKVAULT_FUZZ_SECONDS.
# --build-only builds the targets and runs nothing (scripts/test.sh builds them early, niced, while
# the tests run); a run and a build of one build directory wait for each other ($builddir.lock).
# Usage: scripts/fuzz.sh [--build-only] [TARGET...]
set -uo pipefail
cd "$(dirname "$0")/.."

seconds=${BLKVAULT_FUZZ_SECONDS:-20}
min_cov=${BLKVAULT_FUZZ_MIN_COV:-300}
# A target over a small parser has a lower floor: thin-delta's whole parser (source/thin-delta.c,
# 280 lines, with what it links) reaches about 255 points and no more; files-parts (fs/files-parts.c,
# GPT, MBR and the filesystem magics, 290 lines) about 250.
declare -A floor_of=([thin-delta]=200 [files-parts]=200)
jobs=${BLKVAULT_FUZZ_JOBS:-2}
builddir=${FUZZ_BUILDDIR:-build-fuzz}
build_only=
if [ "${1:-}" = --build-only ]; then build_only=1; shift; fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(ls tests/fuzz/corpus)
fi
command -v clang >/dev/null || { echo "fuzz: clang is not installed (scripts/install-deps.sh)"; exit 1; }

build() {
    if [ ! -f "$builddir/build.ninja" ]; then
        CC=clang meson setup "$builddir" -Dfuzzing=true -Db_sanitize=address,undefined -Db_lundef=false \
            -Dnbd_plugin=disabled >"$builddir.setup.log" 2>&1 || { cat "$builddir.setup.log"; return 1; }
    fi
    if ! ninja -C "$builddir" "${targets[@]/#/tests/fuzz/fuzz-}" >"$builddir.build.log" 2>&1; then
        tail -50 "$builddir.build.log"
        return 1
    fi
}
exec {lock_fd}>"$builddir.lock"
flock "$lock_fd"
build || exit 1
exec {lock_fd}>&-
[ -z "$build_only" ] || exit 0

work=$(mktemp -d "${TMPDIR:-/var/tmp}/bvfuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
export ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# fuzz_one TARGET: runs it and writes its line to $work/TARGET.out (and its log's end and where its
# failing input went, when it failed); $work/TARGET.failed marks a failure.
fuzz_one() {
    local t=$1 rc cov execs crashes verdict floor f dest
    mkdir -p "$work/$t/corpus" "$work/$t/artifacts"
    # new inputs go to the scratch corpus (first directory); the seeds are only read
    "$builddir/tests/fuzz/fuzz-$t" -max_total_time="$seconds" -print_final_stats=1 \
        -artifact_prefix="$work/$t/artifacts/" "$work/$t/corpus" "tests/fuzz/corpus/$t" \
        >"$work/$t.log" 2>&1
    rc=$?
    cov=$(grep -o 'cov: [0-9]*' "$work/$t.log" | tail -1 | cut -d' ' -f2)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t.log")
    crashes=$(find "$work/$t/artifacts" -type f | wc -l)
    verdict=ok
    floor=${floor_of[$t]:-$min_cov}
    [ "$floor" -le "$min_cov" ] || floor=$min_cov
    if [ "$rc" != 0 ]; then
        verdict="FAILED (exit $rc)"
    elif [ "${cov:-0}" -lt "$floor" ]; then
        verdict="FAILED (coverage below the floor)"
    fi
    {
        printf 'fuzz %-16s %3s s  cov: %-5s (floor %s)  execs: %-9s %s\n' "$t" "$seconds" "${cov:-?}" "$floor" \
            "${execs:-?}" "$verdict"
        if [ "$verdict" != ok ] || [ "$crashes" != 0 ]; then
            : >"$work/$t.failed"
            tail -40 "$work/$t.log"
            for f in "$work/$t/artifacts"/*; do
                [ -f "$f" ] || continue
                dest="tests/fuzz/corpus/$t/crash-$(sha1sum "$f" | cut -c1-40)"
                cp "$f" "$dest"
                echo "fuzz $t: the failing input is now $dest (commit it with the fix)"
            done
        fi
    } >"$work/$t.out"
}

running=0
for t in "${targets[@]}"; do
    if [ "$running" -ge "$jobs" ]; then
        wait -n
        running=$((running - 1))
    fi
    fuzz_one "$t" &
    running=$((running + 1))
done
wait
failed=0
for t in "${targets[@]}"; do
    cat "$work/$t.out" 2>/dev/null || { echo "fuzz $t: no result"; : >"$work/$t.failed"; }
    [ ! -e "$work/$t.failed" ] || failed=$((failed + 1))
done
echo "fuzz: ${#targets[@]} targets, $failed failed"
[ "$failed" = 0 ]
