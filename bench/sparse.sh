#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A 16 GiB sparse image holding 256 MiB of data against a 256 MiB dense random file:
# backup time of each (median of RUNS, page cache dropped before each run, a fresh repository
# each run), their ratio (goal: sparse <= 2 x dense), then a restore of the sparse image,
# checked bit-exact (cmp) and sparse (allocated size close to the data size).
#
# Usage: bench/sparse.sh        env: SPARSE_SIZE (16G), SPARSE_DATA (MiB, 256), RUNS (3)
source "$(dirname "$0")/lib.sh"

SPARSE_SIZE=${SPARSE_SIZE:-16G}
SPARSE_DATA=${SPARSE_DATA:-256}   # MiB
RUNS=${RUNS:-3}

bench_build
bench_secrets
W=$BENCH_WORK/sparse
mkdir -p "$W"
SPARSE=$W/sparse-$SPARSE_SIZE.img
DENSE=$W/dense-${SPARSE_DATA}M.img

if [ ! -f "$SPARSE" ]; then
    log "building $SPARSE with images/make-sparse.sh"
    "$IMAGES_DIR/make-sparse.sh" "$SPARSE.tmp" "$SPARSE_SIZE" "$SPARSE_DATA" >&2
    mv "$SPARSE.tmp" "$SPARSE"
fi
if [ ! -f "$DENSE" ]; then
    head -c $((SPARSE_DATA << 20)) /dev/urandom >"$DENSE.tmp" && mv "$DENSE.tmp" "$DENSE"
fi

OUT=$(results_file sparse)
{
    printf 'Sparse image: %s, apparent %s, allocated %s MiB; dense file: %s MiB random.\n' \
        "$(basename "$SPARSE")" "$SPARSE_SIZE" "$(mib "$(du_alloc "$SPARSE")")" "$(mib "$(stat -c %s "$DENSE")")"
    printf 'Each run: fresh repository (default settings, key file), `sync; echo 3 > /proc/sys/vm/drop_caches`,\n'
    printf 'then `/usr/bin/time -v blkvault backup REPO IMAGE --json -q --key-file=KEY`.\n\n'
} >>"$OUT"
table_start "$OUT" "image|run|wall s|user s|sys s|peak RSS MiB|bytes_read MiB|bytes_hole MiB|bytes_zero MiB|bytes_new MiB|load"

declare -A WALLS
for img in dense sparse; do
    src=$DENSE; [ $img = sparse ] && src=$SPARSE
    WALLS[$img]=""
    for ((i = 1; i <= RUNS; i++)); do
        repo=$W/repo-$img
        rm -rf "$repo"
        bv init "$repo" --key-file="$BENCH_KEY" >/dev/null 2>&1
        drop_caches
        TIMED_STDOUT=$W/backup.json timed "sparse-$img-backup-$i" "$BLKVAULT" backup "$repo" "$src" --json -q --key-file="$BENCH_KEY"
        j=$(cat "$W/backup.json")
        table_row "$OUT" "$img|$i|$T_WALL|$T_USER|$T_SYS|$(calc "$T_RSS/1024" 0)|$(mib "$(json_get bytes_read <<<"$j")")|$(mib "$(json_get bytes_hole <<<"$j")")|$(mib "$(json_get bytes_zero <<<"$j")")|$(mib "$(json_get bytes_new <<<"$j")")|$(cut -d' ' -f1 /proc/loadavg)"
        WALLS[$img]="${WALLS[$img]} $T_WALL"
        log "$img run $i: $T_WALL s"
    done
done
md=$(median ${WALLS[dense]})
ms=$(median ${WALLS[sparse]})
ratio=$(calc "$ms/$md" 2)
{
    printf '\nMedian backup wall time: dense %s s, sparse %s s; sparse/dense = **%s**\n' "$md" "$ms" "$ratio"
    printf 'Throughput over the apparent size: sparse %s MiB/s (%s over 16 GiB), dense %s MiB/s.\n\n' \
        "$(calc "$(stat -c %s "$SPARSE")/1048576/$ms" 0)" "$SPARSE_SIZE" "$(calc "$(stat -c %s "$DENSE")/1048576/$md" 0)"
} >>"$OUT"
goal "$OUT" "sparse backup <= 2 x dense (measured $ratio x)" "$(holds "$ratio <= 2")"

# Restore the sparse image (from the last sparse repository).
rest=$W/restored.img
rm -f "$rest"
drop_caches
timed sparse-restore "$BLKVAULT" restore "$W/repo-sparse" latest "$rest" -q --key-file="$BENCH_KEY"
rw=$T_WALL; rc=$T_CPU; rr=$T_RSS
same=0; cmp "$SPARSE" "$rest" && same=1
alloc_src=$(du_alloc "$SPARSE"); alloc_rest=$(du_alloc "$rest")
{
    printf '\nRestore of the sparse image: %s s wall, %s s CPU, %s MiB peak RSS.\n' "$rw" "$rc" "$(calc "$rr/1024" 0)"
    printf 'Restored apparent size %s bytes (source %s); allocated %s MiB (source %s MiB).\n' \
        "$(stat -c %s "$rest")" "$(stat -c %s "$SPARSE")" "$(mib "$alloc_rest")" "$(mib "$alloc_src")"
} >>"$OUT"
goal "$OUT" "restored image bit-exact (cmp)" "$same"
goal "$OUT" "restored image sparse (allocated $(mib "$alloc_rest") MiB <= 1.1 x source $(mib "$alloc_src") MiB)" \
    "$(holds "$alloc_rest <= 1.1 * $alloc_src")"
printf -- '- %s at end\n' "$(load_note)" >>"$OUT"
rm -f "$rest"
cat "$OUT"
