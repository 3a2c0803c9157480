#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Runs every benchmark script in turn and writes bench/results/summary.md: each script's
# result file followed by the list of goals, met or missed. A script that fails is reported
# as such and the others still run.
#
# Usage: bench/run-all.sh [SCRIPT...]   (default: dedup-concat hybrid-vs-fixed sparse peers nbd-bench)
#   SUMMARY_ONLY=1 rebuilds summary.md from the result files already in bench/results.
source "$(dirname "$0")/lib.sh"

SCRIPTS=("$@")
[ ${#SCRIPTS[@]} -gt 0 ] || SCRIPTS=(dedup-concat hybrid-vs-fixed sparse peers nbd-bench)

bench_build
SUMMARY=$BENCH_OUT/summary.md
{
    printf '# blkvault benchmark summary (%s)\n\n' "$(date -u +%FT%TZ)"
    printf -- '- host: %s, %s cores, %s, git %s\n' "$(hostname)" "$(nproc)" "$(uname -r)" \
        "$(git -C "$SRC_ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
    printf -- '- %s at start\n\n' "$(load_note)"
} >"$SUMMARY"

declare -A STATUS
for s in "${SCRIPTS[@]}"; do
    if [ "${SUMMARY_ONLY:-0}" = 1 ]; then
        STATUS[$s]="result of an earlier run"; continue
    fi
    log "=== $s"
    t0=$(date +%s)
    # bench/peers (no .sh) writes a directory: its report is copied to bench/results/peers.md
    cmd=("$BENCH_DIR/$s.sh")
    [ -x "$BENCH_DIR/$s" ] && cmd=("$BENCH_DIR/$s" --out "$BENCH_OUT/$s")
    if BLKVAULT=$BLKVAULT BENCH_BUILD=0 "${cmd[@]}" >"$BENCH_OUT/$s.log" 2>&1; then
        [ -f "$BENCH_OUT/$s/$s.md" ] && cp "$BENCH_OUT/$s/$s.md" "$BENCH_OUT/$s.md"
        STATUS[$s]="ok in $(($(date +%s) - t0)) s"
    else
        STATUS[$s]="FAILED (exit $?) after $(($(date +%s) - t0)) s, see bench/results/$s.log"
    fi
    log "$s: ${STATUS[$s]}"
done

{
    printf '## Goals\n\n'
    for s in "${SCRIPTS[@]}"; do
        printf -- '- **%s**: %s\n' "$s" "${STATUS[$s]}"
        [ -f "$BENCH_OUT/$s.md" ] && grep -- '^- goal' "$BENCH_OUT/$s.md" | sed 's/^/  /'
    done
    printf '\n'
    for s in "${SCRIPTS[@]}"; do
        [ -f "$BENCH_OUT/$s.md" ] || continue
        printf '\n---\n\n'
        sed 's/^# /## /' "$BENCH_OUT/$s.md"
    done
    printf '\n- %s at end\n' "$(load_note)"
} >>"$SUMMARY"
cat "$SUMMARY"
