#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Hybrid against fixed chunking on a VM-image series with in-place changes:
# images/make-image.sh builds v1, images/mutate.sh makes v2 and v3 from it; v1, v2, v3 are backed
# up in turn into a default (hybrid 16K:64K:256K) repository and into a
# --chunker=fixed --chunk-size=16K:64K:256K repository (fixed cuts every AVG = 64 KiB).
# Reported after each version: info --json stored_bytes and du -sb of the repository.
# Goal: hybrid <= 1.10 x fixed after each version.
#
# Usage: bench/hybrid-vs-fixed.sh   env: HVF_SIZE (4G), HVF_CONTENT (MiB of content, 600)
source "$(dirname "$0")/lib.sh"

HVF_SIZE=${HVF_SIZE:-4G}
HVF_CONTENT=${HVF_CONTENT:-600}
CHUNKERS=(hybrid fixed)

bench_build
bench_secrets
W=$BENCH_WORK/hvf
mkdir -p "$W"

img() { printf '%s/%s-%s.img' "$W" "$1" "$HVF_SIZE"; }
if [ ! -f "$(img v1)" ]; then
    log "building v1"
    "$IMAGES_DIR/make-image.sh" "$(img v1).tmp" "$HVF_SIZE" --content-mib "$HVF_CONTENT" >&2
    mv "$(img v1).tmp" "$(img v1)"
fi
prev=v1
for v in v2 v3; do
    if [ ! -f "$(img $v)" ]; then
        log "building $v"
        cp --sparse=always "$(img $prev)" "$(img $v).tmp"
        "$IMAGES_DIR/mutate.sh" "$(img $v).tmp" "$v" >&2
        mv "$(img $v).tmp" "$(img $v)"
    fi
    prev=$v
done

OUT=$(results_file hybrid-vs-fixed)
{
    printf 'Images: %s, v1 allocated %s MiB, v2 %s MiB, v3 %s MiB (images/make-image.sh, images/mutate.sh).\n' \
        "$HVF_SIZE" "$(mib "$(du_alloc "$(img v1)")" 0)" "$(mib "$(du_alloc "$(img v2)")" 0)" "$(mib "$(du_alloc "$(img v3)")" 0)"
    printf 'Repositories: `blkvault init --key-file=KEY` (hybrid 16K:64K:256K) and\n'
    printf '`blkvault init --chunker=fixed --chunk-size=16K:64K:256K --key-file=KEY`; v1, v2, v3 backed up in turn.\n\n'
} >>"$OUT"
table_start "$OUT" "version|chunker|bytes_new MiB|bytes_stored MiB|stored_bytes MiB (info)|du -sb MiB|chunks|backup s"

declare -A S D
for c in "${CHUNKERS[@]}"; do
    r=$W/repo-$c
    rm -rf "$r"
    bv init "$r" --chunker="$c" --chunk-size=16K:64K:256K --key-file="$BENCH_KEY" >/dev/null 2>&1
    for v in v1 v2 v3; do
        j=$(bv backup "$r" "$(img $v)" --name=disk --json -q --key-file="$BENCH_KEY")
        info=$(bv info "$r" --json --key-file="$BENCH_KEY")
        S[$c,$v]=$(json_get stored_bytes <<<"$info")
        D[$c,$v]=$(du_bytes "$r")
        table_row "$OUT" "$v|$c|$(mib "$(json_get bytes_new <<<"$j")")|$(mib "$(json_get bytes_stored <<<"$j")")|$(mib "${S[$c,$v]}")|$(mib "${D[$c,$v]}")|$(json_get chunks <<<"$j")|$(calc "$(json_get seconds <<<"$j")" 1)"
        log "$c $v: stored $(mib "${S[$c,$v]}") MiB, du $(mib "${D[$c,$v]}") MiB"
    done
done
printf '\n' >>"$OUT"
table_start "$OUT" "version|hybrid/fixed (stored_bytes)|hybrid/fixed (du -sb)"
for v in v1 v2 v3; do
    rs=$(calc "${S[hybrid,$v]}/${S[fixed,$v]}" 3)
    rd=$(calc "${D[hybrid,$v]}/${D[fixed,$v]}" 3)
    table_row "$OUT" "$v|$rs|$rd"
done
printf '\n' >>"$OUT"
for v in v1 v2 v3; do
    rs=$(calc "${S[hybrid,$v]}/${S[fixed,$v]}" 3)
    rd=$(calc "${D[hybrid,$v]}/${D[fixed,$v]}" 3)
    goal "$OUT" "hybrid <= 1.10 x fixed after $v (stored_bytes $rs, du $rd)" \
        "$(holds "$rs <= 1.10 && $rd <= 1.10")"
done
printf -- '- %s at end\n' "$(load_note)" >>"$OUT"
cat "$OUT"
