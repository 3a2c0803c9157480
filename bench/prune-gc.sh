#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# prune-gc.sh [--quick] [--versions N]: prune and garbage collection, side by side in one run, on
# repositories holding N (default 30) snapshots of an image series: a real-content image
# (images/make-image.sh) and N-1 versions, each with 24 blocks of 128 KiB rewritten at seeded
# offsets. Each tool keeps the newest 3: blkvault `prune --keep-last=3` (gc included), borg
# `prune --keep-last=3` then `compact`, restic `forget --keep-last 3 --prune` (the newest restic
# bench/peers-install.sh built, else Debian's). Wall time, CPU, peak RSS and the repository size
# before and after. --quick: a 400 MiB image, 6 versions. --compression=C: blkvault's repository
# compression (default: its own default, auto); borg is given zstd,3, so --compression=zstd:3
# compares what gc gives back rather than the two compression policies.
# Goal: blkvault faster than both, with less memory.
. "$(dirname "$0")/lib.sh"

versions=30 size=2G content=600 compression=
while [ $# -gt 0 ]; do
    case $1 in
        --quick) versions=6 size=400M content=48 ;;
        --versions) versions=$2; shift ;;
        --compression=*) compression=${1#--compression=} ;;
        *) die "usage: prune-gc.sh [--quick] [--versions N] [--compression=C]" ;;
    esac
    shift
done
[ "$(id -u)" = 0 ] || die "run as root (images/ needs loop devices; the page cache is dropped)"
need borg openssl
restic_exe=$(peer_exe restic /usr/bin/restic)
[ -x "$restic_exe" ] || die "missing tool: restic"
restic() { "$restic_exe" "$@"; }
bench_build
bench_secrets
work=$BENCH_WORK/prune-gc
rm -rf "$work"
mkdir -p "$work"
img=$work/disk.img

rewrite() { "$IMAGES_DIR/rewrite-regions.sh" "$1" "$2" 24; }

log "image: $size with $content MiB of files, $versions versions"
"$IMAGES_DIR/make-image.sh" "$img" "$size" --content-mib "$content" >/dev/null
bv init "$work/bv" --key-file="$BENCH_KEY" ${compression:+--compression="$compression"} >/dev/null
borg init --encryption=repokey "$work/borg"
restic init -q -r "$work/restic"
for v in $(seq 1 "$versions"); do
    [ "$v" = 1 ] || rewrite "$img" "prune-gc-$v"
    bv backup "$work/bv" "$img" --key-file="$BENCH_KEY" --name=disk -q
    borg create --compression zstd,3 "$work/borg::v$v" "$img"
    restic -q -r "$work/restic" backup "$img" >/dev/null
done
log "backed up $versions versions into each repository"

out=$(results_file prune-gc)
{
    printf 'Repositories of %s snapshots of a %s image series (%s MiB of files; each version rewrites 3 MiB); ' \
        "$versions" "$size" "$content"
    printf 'each tool keeps the newest 3. Timings on a shared machine are noisy. %s; %s.\n\n' \
        "$(borg --version)" "$(restic version | cut -d' ' -f1-2)"
} >>"$out"
table_start "$out" "tool|commands|wall s|CPU s|peak RSS MiB|repository before MiB|after MiB"
declare -A wall rss
run() { # run TOOL LABEL CMD...: timed, with the repository size before and after
    local tool=$1 repo=$2 label=$3; shift 3
    local before; before=$(du_bytes "$repo")
    drop_caches
    timed "prune-gc-$tool" "$@"
    wall[$tool]=$T_WALL rss[$tool]=$T_RSS
    table_row "$out" "$tool|$label|$T_WALL|$T_CPU|$(calc "$T_RSS/1024" 1)|$(mib "$before")|$(mib "$(du_bytes "$repo")")"
}
run blkvault "$work/bv" "blkvault prune --keep-last=3" \
    "$BLKVAULT" prune "$work/bv" --keep-last=3 --key-file="$BENCH_KEY" -q
run borg "$work/borg" "borg prune --keep-last=3 && borg compact" \
    sh -c 'borg prune --keep-last=3 "$1" && borg compact "$1"' _ "$work/borg"
run restic "$work/restic" "restic forget --keep-last 3 --prune" \
    "$restic_exe" -q -r "$work/restic" forget --keep-last 3 --prune
"$BLKVAULT" verify "$work/bv" --key-file="$BENCH_KEY" -q || die "blkvault verify after prune"
printf '\n' >>"$out"
goal "$out" "blkvault prune+gc faster than borg and restic" \
    "$(holds "${wall[blkvault]} < ${wall[borg]} && ${wall[blkvault]} < ${wall[restic]}")"
goal "$out" "blkvault prune+gc uses less memory than borg and restic" \
    "$(holds "${rss[blkvault]} < ${rss[borg]} && ${rss[blkvault]} < ${rss[restic]}")"
log "results: $out"
cat "$out"
