#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Cache-aware reads (issue 14): the first backup of an image, cold (its pages dropped with
# fadvise DONTNEED, not the whole machine's cache) and warm (cat'd first), with today's
# O_DIRECT default and --no-direct of a baseline binary and the cache-aware default of this
# tree, in one run. Prints one line per case: median seconds of REPS runs and bytes split.
#
#   bench/cache-aware.sh IMAGE [BASELINE_BLKVAULT]     (BLKVAULT: this tree's release binary)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
img=${1:?usage: cache-aware.sh IMAGE [BASELINE_BLKVAULT]}
base=${2:-}
REPS=${REPS:-3}
bench_build

uncache() { python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)" "$1"; }

# run BINARY STATE ARGS...: seconds of one first backup into a new repository
run() {
    local bin=$1 state=$2; shift 2
    local repo=$BENCH_WORK/cache-aware-repo
    rm -rf "$repo"
    "$bin" init "$repo" --encryption=none >/dev/null
    sync
    if [ "$state" = warm ]; then cat "$img" >/dev/null; else uncache "$img"; fi
    local t0 t1
    t0=$(date +%s.%N)
    "$bin" backup "$repo" "$img" --json -q "$@" > "$BENCH_WORK/cache-aware.json"
    t1=$(date +%s.%N)
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('%.2f' % (float(sys.argv[3]) - float(sys.argv[2])), d['stats'].get('bytes_read_cached', '-'), d['stats'].get('bytes_read_direct', '-'))" \
        "$BENCH_WORK/cache-aware.json" "$t0" "$t1"
}

case_line() {
    local label=$1 bin=$2 state=$3; shift 3
    local times=() last=
    for _ in $(seq "$REPS"); do
        last=$(run "$bin" "$state" "$@")
        times+=("${last%% *}")
    done
    local med
    med=$(printf '%s\n' "${times[@]}" | sort -n | sed -n "$(( (REPS + 1) / 2 ))p")
    printf '%-34s %-5s median %6s s  (runs: %s)  cached/direct bytes: %s\n' "$label" "$state" "$med" \
        "${times[*]}" "${last#* }"
}

for state in cold warm; do
    if [ -n "$base" ]; then
        case_line "baseline, O_DIRECT (default)" "$base" "$state"
        case_line "baseline, --no-direct" "$base" "$state" --no-direct
    fi
    case_line "cache-aware (default)" "$BLKVAULT" "$state"
    case_line "cache-aware, --no-direct" "$BLKVAULT" "$state" --no-direct
done
