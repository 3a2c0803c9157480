#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Instant restore over NBD, on a real-content disk image (images/make-image.sh, 2 GiB):
#   1. blkvault restore of the snapshot vs a sequential read of the whole export with nbdcopy,
#      page cache dropped before each: the read alone (nbdcopy to null:, against restore into
#      RAM) and a copy into a new file on disk (against restore into the same directory) are the
#      goal (nbdcopy >= 80% of restore's speed); a copy into a file in RAM is reported too.
#   2. random 4 KiB reads inside the image's data (bench/nbd-randread.py): cold (fresh nbdkit,
#      page cache dropped) and warm (again), p50 / p99 latency;
#   3. the same random reads through `borg mount` and `restic mount` (FUSE) of the same image.
# Usage: bench/nbd-bench.sh [--no-peers]   (root: images and drop_caches). Results in
# bench/results/nbd-bench.md. NBD_READS (default 2000) sets the number of random reads.
. "$(dirname "$0")/lib.sh"
peers=1
[ "${1:-}" = --no-peers ] && peers=0
need nbdkit nbdcopy python3 /usr/bin/time
bench_build
bench_secrets
PLUGIN=$BUILD_DIR/nbd-plugin/nbdkit-blkvault-plugin.so
PY=python3
python3 -c 'import nbd' 2>/dev/null || PY=/usr/bin/python3
RR="$PY $BENCH_DIR/nbd-randread.py"
W=$BENCH_WORK/nbd
mkdir -p "$W"
out=$BENCH_OUT/nbd-bench.md
reads=${NBD_READS:-2000}

img=$W/disk.img
if [ ! -s "$img" ]; then
    log "building $img (make-image.sh 2G, 512 MiB of content)"
    bash "$IMAGES_DIR/make-image.sh" "$img" 2G --content-mib 512 >/dev/null
fi
[ -s "$W/offsets" ] || $RR --make-offsets "$img" "$reads" nbd-bench > "$W/offsets"

repo=$W/repo
if [ ! -d "$repo" ]; then
    bv init "$repo" --key-file="$BENCH_KEY" >/dev/null
    bv backup "$repo" "$img" --name=v1 --key-file="$BENCH_KEY" >/dev/null
fi
data_mib=$(( $(du_alloc "$img") / 1048576 ))

nbd_pid=
# The export as users get it: blkvault serve (which runs nbdkit with the plugin, read-only, and
# its thread setting).
start_export() {
    rm -f "$W/sock"
    BLKVAULT_NBD_PLUGIN=$PLUGIN "$BLKVAULT" serve "$repo" v1 --socket="$W/sock" --key-file="$BENCH_KEY" \
        >/dev/null 2>"$W/nbdkit.log" &
    nbd_pid=$!
    for i in $(seq 300); do nbdinfo --size "nbd+unix:///?socket=$W/sock" >/dev/null 2>&1 && return 0; sleep 0.1; done
    die "nbdkit did not start: $(cat "$W/nbdkit.log")"
}
stop_export() { [ -z "$nbd_pid" ] || { kill "$nbd_pid"; wait "$nbd_pid" 2>/dev/null || true; nbd_pid=; }; }
trap 'stop_export' EXIT
URI="nbd+unix:///?socket=$W/sock"

# 1. sequential: restore vs nbdcopy, median of $NBD_RUNS (default 5) runs each, page cache
# dropped and a fresh nbdkit before each. Destinations: a new file on disk next to the
# repository (what a user does), a new file in RAM (tmpfs: no disk, so CPU decides), and
# nbdcopy to null: (the read alone, run in the same rounds as the restores into RAM it is
# compared with, so that the machine's load drifts alike for both). nbdcopy writes a new file
# with --destination-is-zero, as restore knows its new file is empty.
runs=${NBD_RUNS:-5}
# Each tool is loaded once (--version) after the drop, so that the times compare reading the
# repository, not loading programs: nbdcopy and its libraries take 50-80 ms to load cold here,
# blkvault 20 ms, whatever the size of the snapshot.
seq_run() { # seq_run DIR: one restore and one nbdcopy into DIR; appends to R_$tag and C_$tag
    local dir=$1
    rm -f "$dir/restored.img" "$dir/copied.img"; drop_caches; "$BLKVAULT" --version >/dev/null
    timed nbd-restore "$BLKVAULT" restore "$repo" v1 "$dir/restored.img" --key-file="$BENCH_KEY"
    RT+=("$T_WALL")
    # A new file, as restore's: nbdcopy opens an existing one and truncates it, which would
    # put freeing the last round's 600 MiB inside its timing.
    rm -f "$dir/restored.img" "$dir/copied.img"
    start_export; drop_caches; nbdcopy --version >/dev/null
    timed nbd-nbdcopy sh -c 'nbdcopy --destination-is-zero "$1" "$2" && sync' sh "$URI" "$dir/copied.img"
    CT+=("$T_WALL")
    stop_export
    if [ "$dest" = ram ]; then
        start_export; drop_caches; nbdcopy --version >/dev/null
        timed nbd-nbdcopy-null nbdcopy "$URI" null:
        NT+=("$T_WALL")
        stop_export
    fi
}
declare -A seq_restore seq_copy seq_steal
for dest in disk ram; do
    case $dest in
        disk) D=$W/seq ;;
        ram) D=${NBD_BENCH_DEST:-/dev/shm/blkvault-nbd-bench} ;;
    esac
    mkdir -p "$D"
    RT=() CT=() NT=()
    read -r t0 s0 < <(cpu_ticks)
    for run in $(seq "$runs"); do seq_run "$D"; done
    seq_steal[$dest]=$(steal_since "$t0" "$s0")
    cmp "$img" "$D/copied.img" || die "nbdcopy copy differs from the image"
    rm -rf "$D"
    seq_restore[$dest]=$(median "${RT[@]}")
    seq_copy[$dest]=$(median "${CT[@]}")
done
t_null=$(median "${NT[@]}")

# 2. random reads through the export: cold, then warm
declare -A res
start_export; drop_caches
res[blkvault-cold]=$($RR "$URI" "$W/offsets" --verify "$img")
res[blkvault-warm]=$($RR "$URI" "$W/offsets")
stop_export

# 3. borg and restic mounts of the same image
peer_reads() {
    local name=$1 file=$2
    drop_caches
    res[$name-cold]=$($RR "$file" "$W/offsets" --verify "$img") || res[$name-cold]='{"error":"failed"}'
    res[$name-warm]=$($RR "$file" "$W/offsets") || res[$name-warm]='{"error":"failed"}'
}
if [ $peers = 1 ] && command -v borg >/dev/null && [ -e /dev/fuse ]; then
    b=$W/borg
    if [ ! -d "$b" ]; then
        borg init -e repokey "$b" >/dev/null 2>&1
        (cd "$W" && borg create --compression zstd,3 --sparse "$b::v1" disk.img) >/dev/null 2>&1 || log "borg create failed"
    fi
    mkdir -p "$W/borg-mnt"
    if borg mount "$b::v1" "$W/borg-mnt" 2>"$W/borg-mount.err"; then
        peer_reads borg "$W/borg-mnt/disk.img"
        borg umount "$W/borg-mnt" || fusermount3 -u "$W/borg-mnt"
    else
        log "borg mount failed: $(cat "$W/borg-mount.err")"
    fi
fi
if [ $peers = 1 ] && command -v restic >/dev/null && [ -e /dev/fuse ]; then
    r=$W/restic
    if [ ! -d "$r" ]; then
        restic -q -r "$r" init >/dev/null
        (cd "$W" && restic -q -r "$r" backup disk.img) >/dev/null || log "restic backup failed"
    fi
    mkdir -p "$W/restic-mnt"
    restic -r "$r" mount "$W/restic-mnt" >"$W/restic-mount.log" 2>&1 &
    rpid=$!
    f=
    for i in $(seq 300); do
        f=$(ls -d "$W"/restic-mnt/snapshots/latest/*/disk.img "$W"/restic-mnt/snapshots/latest/disk.img 2>/dev/null | head -1) || true
        [ -n "$f" ] && break; sleep 0.2
    done
    if [ -n "$f" ]; then peer_reads restic "$f"; else log "restic mount did not show the image"; fi
    fusermount3 -u "$W/restic-mnt" 2>/dev/null || kill "$rpid"
    wait "$rpid" 2>/dev/null || true
fi

declare -A ratio=([disk]=$(calc "${seq_restore[disk]} / ${seq_copy[disk]}")
    [ram]=$(calc "${seq_restore[ram]} / ${seq_copy[ram]}") [null]=$(calc "${seq_restore[ram]} / $t_null"))
f() { $PY -c 'import json,sys; d=json.loads(sys.argv[1]); print(d.get(sys.argv[2], "-"))' "$1" "$2"; }
{
    printf '# NBD export benchmark (%s)\n\n' "$(date -u +%Y-%m-%dT%H:%MZ)"
    printf 'Image: %s, 2 GiB, %s MiB allocated (make-image.sh, real files from /usr). Repository\n' "$img" "$data_mib"
    printf 'encrypted (aes-256-gcm, key file), zstd 3. Release build. %s\n\n' "$(load_note)"
    printf '| sequential, whole snapshot (median of %s) | restore s | nbdcopy s | nbdcopy / restore speed |\n|---|---|---|---|\n' "$runs"
    for dest in disk ram; do
        printf '| into a new file (%s) | %s | %s | %s |\n' "$dest" "${seq_restore[$dest]}" "${seq_copy[$dest]}" \
            "${ratio[$dest]}"
    done
    printf '| nbdcopy to null: (the read alone) vs restore (ram) | %s | %s | %s |\n\n' "${seq_restore[ram]}" "$t_null" \
        "${ratio[null]}"
    printf 'CPU steal (hypervisor) during the rounds: disk %s%%, ram and null %s%%. Before each run: a fresh\n' \
        "${seq_steal[disk]}" "${seq_steal[ram]}"
    printf 'export, page cache dropped, then the tool loaded once (--version), so that the repository is\n'
    printf 'read cold but the programs are not loaded from disk inside the timing.\n\n'
    printf 'Target: nbdcopy >= 0.80 x the speed of restore, for the read alone and for a copy into a file on\n'
    printf 'disk. Into a file in RAM nothing waits for a disk: there nbdcopy'"'"'s own writing (pwrite,\n'
    printf 'sync_file_range and fadvise per 256 KiB request) runs on the same cores as the server.\n\n'
    printf '| random 4 KiB reads (%s, in data) | p50 us | p99 us | mean us | MiB/s |\n|---|---|---|---|---|\n' "$reads"
    for k in blkvault-cold blkvault-warm borg-cold borg-warm restic-cold restic-warm; do
        [ -n "${res[$k]:-}" ] || continue
        printf '| %s | %s | %s | %s | %s |\n' "$k" "$(f "${res[$k]}" p50_us)" "$(f "${res[$k]}" p99_us)" \
            "$(f "${res[$k]}" mean_us)" "$(f "${res[$k]}" mib_s)"
    done
} | tee "$out"
goal "$out" "sequential read through nbdcopy (to null:) >= 0.80 x restore (measured ${ratio[null]})" \
    "$(holds "${seq_restore[ram]} / $t_null >= 0.80")"
goal "$out" "nbdcopy into a new file on disk >= 0.80 x restore (measured ${ratio[disk]})" \
    "$(holds "${seq_restore[disk]} / ${seq_copy[disk]} >= 0.80")"
tail -2 "$out"
