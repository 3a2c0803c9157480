#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# blkvault beside borg 1.2 and restic 0.14 on the same real-content disk image, in one run:
# full backup of v1, restore of v1, then an incremental backup of v2 (images/mutate.sh).
# Caches dropped before every backup and restore; each timed command ends with `sync` so that
# data still dirty in the page cache is counted for every tool alike. Every restore is checked
# with cmp (outside the timing).
#
# Settings (comparable: encryption and zstd level 3 for all):
#   blkvault  init --key-file (AES-256-GCM, hybrid 16K:64K:256K, zstd:3); backup; restore
#   borg      init -e repokey; create --compression zstd,3 --chunker-params buzhash,14,18,16,4095;
#             extract --sparse
#   restic    init (repository v2); backup with RESTIC_COMPRESSION=auto (zstd); restore
#             (restic 0.14 has no sparse restore: it writes the zeros)
#
# Goals: blkvault >= 3x borg and >= 2x restic throughput for backup and for restore; blkvault's
# repository no larger than borg's.
#
# Usage: bench/peers.sh [TOOLS...]   (default: blkvault borg restic)
#   env: PEERS_SIZE (image size, default 4G), PEERS_CONTENT (MiB of real content, default 1024)
source "$(dirname "$0")/lib.sh"

TOOLS=("$@")
[ ${#TOOLS[@]} -gt 0 ] || TOOLS=(blkvault borg restic)
PEERS_SIZE=${PEERS_SIZE:-4G}
PEERS_CONTENT=${PEERS_CONTENT:-1024}
BORG_CHUNKER=${BORG_CHUNKER:-buzhash,14,18,16,4095}

bench_build
need borg restic cmp
bench_secrets
W=$BENCH_WORK/peers
mkdir -p "$W"
V1=$W/v1-$PEERS_SIZE.img
V2=$W/v2-$PEERS_SIZE.img

if [ ! -f "$V1" ]; then
    log "building $V1 with images/make-image.sh"
    "$IMAGES_DIR/make-image.sh" "$V1.tmp" "$PEERS_SIZE" --content-mib "$PEERS_CONTENT" >&2
    mv "$V1.tmp" "$V1"
fi
if [ ! -f "$V2" ]; then
    log "building $V2 with images/mutate.sh"
    cp --sparse=always "$V1" "$V2.tmp"
    "$IMAGES_DIR/mutate.sh" "$V2.tmp" v2 >&2
    mv "$V2.tmp" "$V2"
fi
SIZE=$(stat -c %s "$V1")

# Every tool backs up the same path, stage/disk.img (a hard link to v1, then to v2), so that the
# archived name is the same for the incremental run.
STAGE=$W/stage
mkdir -p "$STAGE"

repo_of() { printf '%s/repo-%s' "$W" "$1"; }

tool_init() {
    local t=$1 r; r=$(repo_of "$1")
    rm -rf "$r" "$BORG_BASE_DIR" "$RESTIC_CACHE_DIR"
    case $t in
    blkvault) bv init "$r" --key-file="$BENCH_KEY" >/dev/null 2>&1 ;;
    borg) borg init -e repokey "$r" >/dev/null 2>&1 ;;
    restic) restic -q -r "$r" init >/dev/null ;;
    esac
}

# tool_backup TOOL LABEL NAME: timed backup of stage/disk.img.
tool_backup() {
    local t=$1 label=$2 name=$3 r; r=$(repo_of "$1")
    drop_caches
    case $t in
    blkvault)
        TIMED_STDOUT=$W/$label.json timed "$label" sh -c "\"\$@\" && sync" sh \
            "$BLKVAULT" backup "$r" "$STAGE/disk.img" --name=disk --json -q --key-file="$BENCH_KEY" ;;
    borg)
        TIMED_STDOUT=$W/$label.json timed "$label" sh -c "cd \"$STAGE\" && \"\$@\" && sync" sh \
            borg create --json --compression zstd,3 --chunker-params "$BORG_CHUNKER" "$r::$name" disk.img ;;
    restic)
        TIMED_STDOUT=$W/$label.json timed "$label" sh -c "cd \"$STAGE\" && \"\$@\" && sync" sh \
            restic -r "$r" backup --json disk.img ;;
    esac
}

# tool_restore TOOL LABEL: timed restore of the newest backup into $W/out-TOOL; sets RESTORED.
tool_restore() {
    local t=$1 label=$2 r out; r=$(repo_of "$1")
    out=$W/out-$t
    rm -rf "$out"; mkdir -p "$out"
    drop_caches
    case $t in
    blkvault)
        timed "$label" sh -c "\"\$@\" && sync" sh "$BLKVAULT" restore "$r" latest "$out/disk.img" -q --key-file="$BENCH_KEY" ;;
    borg)
        timed "$label" sh -c "cd \"$out\" && \"\$@\" && sync" sh borg extract --sparse "$r::v1" disk.img ;;
    restic)
        timed "$label" sh -c "\"\$@\" && sync" sh restic -r "$r" restore latest --target "$out" ;;
    esac
    RESTORED=$(find "$out" -name disk.img -type f | head -1)
}

OUT=$(results_file peers)
{
    printf 'Image: %s (%s MiB apparent, %s MiB allocated), built by images/make-image.sh;\n' \
        "$(basename "$V1")" "$(mib "$SIZE" 0)" "$(mib "$(du_alloc "$V1")" 0)"
    printf 'v2 by images/mutate.sh (%s MiB allocated). Throughput = image size / wall time.\n' "$(mib "$(du_alloc "$V2")" 0)"
    printf 'Versions: blkvault git %s; %s; restic %s.\n\n' "$(git -C "$SRC_ROOT" rev-parse --short HEAD)" \
        "$(borg --version)" "$(restic version | cut -d' ' -f2)"
} >>"$OUT"

# Phase by phase (every tool's v1 backup, then every restore, then every v2 backup), so that
# the tools of one phase run close together in time under similar load from the machine.
declare -A R
loadnow() { cut -d' ' -f1 /proc/loadavg; }
# backup_phase VERSION KEY: every tool backs up stage/disk.img as VERSION (v1 into a new
# repository); wall, CPU, RSS and load go to R[tool,KEY*], the repository size to R[tool,repoN].
backup_phase() {
    local v=$1 k=$2 t
    for t in "${TOOLS[@]}"; do
        [ "$v" = v1 ] && tool_init "$t"
        log "$t: backup $v"
        R[$t,${k}load]=$(loadnow)
        tool_backup "$t" "peers-$t-backup-$v" "$v"
        R[$t,${k}w]=$T_WALL R[$t,${k}u]=$T_USER R[$t,${k}s]=$T_SYS R[$t,${k}rss]=$T_RSS
        R[$t,repo${v#v}]=$(du_bytes "$(repo_of "$t")")
        log "$t: backup $v $T_WALL s, repo $(mib "${R[$t,repo${v#v}]}") MiB"
    done
}
ln -f "$V1" "$STAGE/disk.img"
backup_phase v1 b
for t in "${TOOLS[@]}"; do
    log "$t: restore v1"
    R[$t,rload]=$(loadnow)
    tool_restore "$t" "peers-$t-restore-v1"
    R[$t,rw]=$T_WALL R[$t,ru]=$T_USER R[$t,rs]=$T_SYS R[$t,rrss]=$T_RSS
    R[$t,ralloc]=$(du_alloc "$RESTORED")
    R[$t,rok]=no
    cmp "$V1" "$RESTORED" && R[$t,rok]=yes
    log "$t: restore $T_WALL s, bit-exact ${R[$t,rok]}"
    rm -rf "$W/out-$t"
done
ln -f "$V2" "$STAGE/disk.img"
backup_phase v2 i

mibs() { calc "$SIZE/1048576/$1" 0; }
row() { # row TITLE KEY-FORMAT...
    local title=$1 fmt=$2 line t
    line=$title
    for t in "${TOOLS[@]}"; do line="$line|$($fmt "$t")"; done
    table_row "$OUT" "$line"
}
f_bw() { printf '%s' "${R[$1,bw]}"; }
f_bt() { mibs "${R[$1,bw]}"; }
f_bc() { printf '%s + %s' "${R[$1,bu]}" "${R[$1,bs]}"; }
f_brss() { calc "${R[$1,brss]}/1024" 0; }
f_repo1() { mib "${R[$1,repo1]}"; }
f_rw() { printf '%s' "${R[$1,rw]}"; }
f_rt() { mibs "${R[$1,rw]}"; }
f_rc() { printf '%s + %s' "${R[$1,ru]}" "${R[$1,rs]}"; }
f_rrss() { calc "${R[$1,rrss]}/1024" 0; }
f_ralloc() { printf '%s MiB, %s' "$(mib "${R[$1,ralloc]}")" "${R[$1,rok]}"; }
f_iw() { printf '%s' "${R[$1,iw]}"; }
f_it() { mibs "${R[$1,iw]}"; }
f_ic() { printf '%s + %s' "${R[$1,iu]}" "${R[$1,is]}"; }
f_irss() { calc "${R[$1,irss]}/1024" 0; }
f_grow() { mib $((R[$1,repo2] - R[$1,repo1])); }
f_repo2() { mib "${R[$1,repo2]}"; }
f_load() { printf '%s / %s / %s' "${R[$1,bload]}" "${R[$1,rload]}" "${R[$1,iload]}"; }

hdr="measure"; for t in "${TOOLS[@]}"; do hdr="$hdr|$t"; done
table_start "$OUT" "$hdr"
row "backup v1 wall s" f_bw
row "backup v1 MiB/s" f_bt
row "backup v1 CPU user + sys s" f_bc
row "backup v1 peak RSS MiB" f_brss
row "repository after v1 MiB (du -sb)" f_repo1
row "restore v1 wall s" f_rw
row "restore v1 MiB/s" f_rt
row "restore v1 CPU user + sys s" f_rc
row "restore v1 peak RSS MiB" f_rrss
row "restored file allocated, bit-exact" f_ralloc
row "backup v2 (incremental) wall s" f_iw
row "backup v2 MiB/s" f_it
row "backup v2 CPU user + sys s" f_ic
row "backup v2 peak RSS MiB" f_irss
row "repository growth by v2 MiB" f_grow
row "repository after v2 MiB" f_repo2
row "1-min load before backup v1 / restore / backup v2" f_load
printf '\n' >>"$OUT"

if [ -n "${R[blkvault,bw]:-}" ]; then
    for p in borg restic; do
        [ -n "${R[$p,bw]:-}" ] || continue
        need_x=3; [ $p = restic ] && need_x=2
        b=$(calc "${R[$p,bw]}/${R[blkvault,bw]}" 2)
        rr=$(calc "${R[$p,rw]}/${R[blkvault,rw]}" 2)
        ii=$(calc "${R[$p,iw]}/${R[blkvault,iw]}" 2)
        printf -- '- blkvault/%s throughput: backup v1 **%sx**, restore **%sx**, incremental backup %sx\n' "$p" "$b" "$rr" "$ii" >>"$OUT"
        goal "$OUT" "backup >= ${need_x}x $p (measured ${b}x)" "$(holds "$b >= $need_x")"
        goal "$OUT" "restore >= ${need_x}x $p (measured ${rr}x)" "$(holds "$rr >= $need_x")"
    done
    if [ -n "${R[borg,repo1]:-}" ]; then
        goal "$OUT" "repository <= borg's after v1 ($(mib "${R[blkvault,repo1]}") vs $(mib "${R[borg,repo1]}") MiB)" \
            "$(holds "${R[blkvault,repo1]} <= ${R[borg,repo1]}")"
        goal "$OUT" "repository <= borg's after v2 ($(mib "${R[blkvault,repo2]}") vs $(mib "${R[borg,repo2]}") MiB)" \
            "$(holds "${R[blkvault,repo2]} <= ${R[borg,repo2]}")"
    fi
    printf -- '- blkvault backup v1 counters: %s\n- blkvault backup v2 counters: %s\n' \
        "$(cat "$W/peers-blkvault-backup-v1.json")" "$(cat "$W/peers-blkvault-backup-v2.json")" >>"$OUT"
fi
printf -- '- %s at end\n' "$(load_note)" >>"$OUT"
rm -f "$STAGE/disk.img"
cat "$OUT"
