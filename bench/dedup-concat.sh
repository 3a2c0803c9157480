#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# HashBackup's concatenation dedup tests, blkvault beside borg and restic.
#
#  (a) 16 files of 8 MiB random data, each backed up as its own snapshot, then their
#      concatenation: dedup % of the concatenation = 1 - new bytes / its size.  Goal >= 99%.
#  (b) 101 files of 1 MiB: the concatenation first, then the files one by one:
#      dedup % of the files = 1 - sum(new bytes) / their total size.  Goal >= 90%.
# Each also with parts that are NOT 4 KiB multiples (8 MiB/1 MiB + 1..4095 bytes): informational.
#
# "New bytes": blkvault backup --json bytes_new (uncompressed new chunk bytes); borg and restic:
# growth of the repository on disk (du -sb), with the tool's own figure beside it (borg
# deduplicated_size, restic data_added). Random data does not compress, so the figures agree.
#
# Usage: bench/dedup-concat.sh [TOOLS...]   (default: hybrid cdc fixed borg restic)  env: KEYS (1)
#   hybrid/cdc/fixed are blkvault repositories with that chunker (default sizes 16K:64K:256K).
source "$(dirname "$0")/lib.sh"

TOOLS=("$@")
[ ${#TOOLS[@]} -gt 0 ] || TOOLS=(hybrid cdc fixed borg restic)
BORG_CHUNKER=${BORG_CHUNKER:-buzhash,14,18,16,4095}   # 16K min, 256K max, 64K average
# Content-defined cut points are keyed per repository: KEYS > 1 repeats every blkvault test with
# that many fresh repositories (keys) and reports the median [min..max].
KEYS=${KEYS:-1}

bench_build
need borg restic
bench_secrets
W=$BENCH_WORK/concat
mkdir -p "$W"

# unaligned_inputs DIR COUNT SIZE: DIR/part-NNN, each 1..4095 bytes longer than SIZE, and DIR/concat.
unaligned_inputs() {
    local d=$1 n=$2 size=$3 i
    [ -f "$d/concat" ] && return 0
    rm -rf "$d"; mkdir -p "$d"
    for ((i = 0; i < n; i++)); do
        head -c $((size + 1 + RANDOM % 4095)) /dev/urandom >"$d/part-$(printf %03d "$i")"
    done
    cat "$d"/part-* >"$d/concat.tmp" && mv "$d/concat.tmp" "$d/concat"
}

# Inputs: the aligned ones from images/make-concat-tests.sh (t1, t2); the unaligned ones (not
# in images/) are generated here.
inputs() {
    local i f d
    if [ ! -f "$W/images/t2/concat" ]; then
        log "aligned inputs from images/make-concat-tests.sh"
        rm -rf "$W/images"
        "$IMAGES_DIR/make-concat-tests.sh" "$W/images" >&2
    fi
    for i in a:t1 b:t2; do
        d=$W/${i%%:*}-aligned-images
        [ -f "$d/concat" ] && continue
        rm -rf "$d"; mkdir -p "$d"
        for f in "$W/images/${i#*:}"/file-*; do ln "$f" "$d/part-${f##*-}"; done
        ln "$W/images/${i#*:}/concat" "$d/concat"
    done
    unaligned_inputs "$W/a-unaligned" 16 $((8 << 20))
    unaligned_inputs "$W/b-unaligned" 101 $((1 << 20))
}

# tool_init TOOL REPO
tool_init() {
    local t=$1 r=$2
    rm -rf "$r"
    case $t in
    hybrid | cdc | fixed) bv init "$r" --chunker="$t" --chunk-size=16K:64K:256K --key-file="$BENCH_KEY" >/dev/null 2>&1 ;;
    borg) borg init -e repokey "$r" >/dev/null 2>&1 ;;
    restic) restic -q -r "$r" init >/dev/null ;;
    esac
}

# tool_backup TOOL REPO FILE NAME: prints "new_bytes tool_figure" (see the header).
tool_backup() {
    local t=$1 r=$2 f=$3 n=$4 before after out
    case $t in
    hybrid | cdc | fixed)
        out=$(bv backup "$r" "$f" --name="$n" --json -q --key-file="$BENCH_KEY")
        printf '%s %s\n' "$(json_get bytes_new <<<"$out")" "$(json_get bytes_stored <<<"$out")"
        ;;
    borg)
        before=$(du_bytes "$r")
        out=$(borg create --json --compression zstd,3 --chunker-params "$BORG_CHUNKER" "$r::$n" "$f")
        after=$(du_bytes "$r")
        printf '%s %s\n' $((after - before)) \
            "$(json_get deduplicated_size <<<"$out")"
        ;;
    restic)
        before=$(du_bytes "$r")
        out=$(restic -r "$r" backup --json "$f" | tail -1)
        after=$(du_bytes "$r")
        printf '%s %s\n' $((after - before)) "$(json_get data_added <<<"$out")"
        ;;
    esac
}

# test_a TOOL DIR: prints "dedup% tool_figure_dedup%"
test_a() {
    local t=$1 d=$2 r=$BENCH_WORK/concat-repo-$1 f size x y
    tool_init "$t" "$r"
    for f in "$d"/part-*; do tool_backup "$t" "$r" "$f" "$(basename "$f")" >/dev/null; done
    size=$(stat -c %s "$d/concat")
    read -r x y <<<"$(tool_backup "$t" "$r" "$d/concat" concat)"
    printf '%s %s\n' "$(calc "100*(1-$x/$size)" 2)" "$(calc "100*(1-$y/$size)" 2)"
    rm -rf "$r"
}

# test_b TOOL DIR: prints "dedup% tool_figure_dedup%"
test_b() {
    local t=$1 d=$2 r=$BENCH_WORK/concat-repo-$1 f size=0 sx=0 sy=0 x y
    tool_init "$t" "$r"
    tool_backup "$t" "$r" "$d/concat" concat >/dev/null
    for f in "$d"/part-*; do
        read -r x y <<<"$(tool_backup "$t" "$r" "$f" "$(basename "$f")")"
        sx=$((sx + x)); sy=$((sy + y)); size=$((size + $(stat -c %s "$f")))
    done
    printf '%s %s\n' "$(calc "100*(1-$sx/$size)" 2)" "$(calc "100*(1-$sy/$size)" 2)"
    rm -rf "$r"
}

inputs
OUT=$(results_file "dedup-concat${DEDUP_TAG:+-$DEDUP_TAG}")   # DEDUP_TAG: a separate result file
cat >>"$OUT" <<EOF
Inputs: (a) 16 x 8 MiB random files then their concatenation; (b) 101 x 1 MiB random files,
the concatenation first. Aligned inputs: images/make-concat-tests.sh (t1, t2). "unaligned": each part is 1..4095 bytes longer than 8 MiB / 1 MiB.
blkvault: default settings (16K:64K:256K, zstd 3, AES-256-GCM with a key file), chunker as named;
dedup % from \`backup --json\` bytes_new (and, in brackets, from bytes_stored, which includes
encryption/padding overhead). borg $(borg --version | cut -d' ' -f2): repokey, zstd,3,
--chunker-params $BORG_CHUNKER; dedup % from du -sb growth of the repository (brackets:
borg's deduplicated_size). restic $(restic version | cut -d' ' -f2): default chunker (~1 MiB
average), RESTIC_COMPRESSION=auto; du -sb growth (brackets: data_added).

EOF
table_start "$OUT" "tool|(a) 16x8MiB then concat|(b) concat then 101x1MiB|(a) unaligned|(b) unaligned"
declare -A RES
for t in "${TOOLS[@]}"; do
    row=$t
    for tc in a-aligned b-aligned a-unaligned b-unaligned; do
        log "$t $tc"
        t0=$(date +%s)
        d=$W/$tc; [ "${tc#*-}" = aligned ] && d=$W/$tc-images
        n=1; case $t in hybrid | cdc | fixed) n=$KEYS ;; esac
        xs=()
        for ((k = 0; k < n; k++)); do
            read -r x y <<<"$("test_${tc%%-*}" "$t" "$d")"
            xs+=("$x")
        done
        if [ "$n" -gt 1 ]; then
            x=$(median "${xs[@]}")
            lo=$(printf '%s\n' "${xs[@]}" | sort -g | head -1); hi=$(printf '%s\n' "${xs[@]}" | sort -g | tail -1)
            RES[$t,$tc,min]=$lo
            cell="$x % [$lo..$hi, $n keys]"
        else
            cell="$x % ($y %)"
        fi
        log "$t $tc: $cell in $(($(date +%s) - t0)) s"
        RES[$t,$tc]=$x
        row="$row|$cell"
    done
    table_row "$OUT" "$row"
done
printf '\n' >>"$OUT"
if [ -n "${RES[hybrid,a-aligned]:-}" ]; then
    goal "$OUT" "(a) blkvault hybrid >= 99% (measured ${RES[hybrid,a-aligned]}%)" \
        "$(holds "${RES[hybrid,a-aligned]} >= 99")"
    goal "$OUT" "(b) blkvault hybrid >= 90% (measured ${RES[hybrid,b-aligned]}%)" \
        "$(holds "${RES[hybrid,b-aligned]} >= 90")"
    if [ -n "${RES[hybrid,b-aligned,min]:-}" ]; then
        goal "$OUT" "(a) with every one of $KEYS keys (worst ${RES[hybrid,a-aligned,min]}%)" \
            "$(holds "${RES[hybrid,a-aligned,min]} >= 99")"
        goal "$OUT" "(b) with every one of $KEYS keys (worst ${RES[hybrid,b-aligned,min]}%)" \
            "$(holds "${RES[hybrid,b-aligned,min]} >= 90")"
    fi
fi
printf -- '- %s at end\n' "$(load_note)" >>"$OUT"
cat "$OUT"
