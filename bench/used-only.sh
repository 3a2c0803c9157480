#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# backup --used-only (issue 25): a GPT image with one ext4 partition holding USED of files and,
# in its free blocks, DELETED of random files that were written, synced and removed (never
# zeroed), backed up whole and with --used-only into fresh repositories, beside
# `partclone.ext4 -c` imaging the same partition. Per case: bytes read, repository size (du -sb),
# CPU seconds (user + system) and wall seconds. On a loaded machine compare CPU and bytes, not
# wall time. Needs root (loop devices, mount).
#
#   bench/used-only.sh [--quick]     (4 GiB image, 1 GiB used, 2.5 GiB deleted; --quick: 1 GiB, 256 MiB, 600 MiB)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need losetup sfdisk mkfs.ext4 partclone.ext4 openssl python3
[ "$(id -u)" = 0 ] || die "needs root (loop devices, mount)"
SIZE_MIB=4096 USED_MIB=1024 DELETED_MIB=2560
[ "${1:-}" = --quick ] && SIZE_MIB=1024 USED_MIB=256 DELETED_MIB=600
bench_build
W=$BENCH_WORK/used-only
rm -rf "$W"
mkdir -p "$W/mnt"
loop=
cleanup() { umount "$W/mnt" 2>/dev/null || true; [ -z "$loop" ] || losetup -d "$loop" 2>/dev/null || true; }
trap cleanup EXIT
randfile() { head -c "$(( $2 * 1048576 ))" /dev/zero | openssl enc -aes-128-ctr -pass "pass:$3" -nosalt -pbkdf2 > "$1" 2>/dev/null; }

log "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
img=$W/disk.img
truncate -s "${SIZE_MIB}M" "$img"
printf 'label: gpt\n,,L\n' | sfdisk -q "$img"
read -r start size < <(sfdisk -J "$img" | python3 -c "
import json, sys
p = json.load(sys.stdin)['partitiontable']['partitions'][0]
print(p['start'] * 512, p['size'] * 512)")
loop=$(losetup -f --show -o "$start" --sizelimit "$size" "$img")
mkfs.ext4 -q "$loop"
mount "$loop" "$W/mnt"
log "writing ${DELETED_MIB} MiB, then deleting it"
for i in $(seq $(( DELETED_MIB / 128 ))); do randfile "$W/mnt/junk$i" 128 "junk-$i"; done
sync
rm -f "$W/mnt"/junk*
sync
log "writing ${USED_MIB} MiB of files that stay"
for i in $(seq $(( USED_MIB / 64 ))); do randfile "$W/mnt/keep$i" 64 "keep-$i"; done
sync
umount "$W/mnt"
losetup -d "$loop"
loop=
in_use=$(( $(dumpe2fs -h "$img?offset=$start" 2>/dev/null | awk -F: '/^Block count/{c=$2} /^Free blocks/{f=$2} /^Block size/{b=$2} END{print (c-f)*b}') ))
[ "$in_use" -gt 0 ] 2>/dev/null || in_use=$(( USED_MIB * 1048576 ))

# measure LABEL CMD...: wall, user+sys CPU of CMD (through /usr/bin/time into $W/time)
measure() {
    local label=$1; shift
    sync
    drop_caches
    /usr/bin/time -f '%e %U %S' -o "$W/time" "$@"
    read -r wall user sys <"$W/time"
    cpu=$(python3 -c "print('%.1f' % ($user + $sys))")
    log "$label: wall ${wall}s, cpu ${cpu}s"
}

rows=()
for mode in whole used-only; do
    repo=$W/repo-$mode
    "$BLKVAULT" init "$repo" --encryption=none >/dev/null
    args=()
    [ "$mode" = used-only ] && args=(--used-only)
    measure "$mode" "$BLKVAULT" backup "$repo" "$img" --name=disk --json -q "${args[@]}" >"$W/$mode.json"
    read_b=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["stats"]["bytes_read"])' "$W/$mode.json")
    rows+=("| blkvault backup${args:+ ${args[*]}} | $read_b | $(du -sb "$repo" | cut -f1) | $cpu | $wall |")
done
loop=$(losetup -r -f --show -o "$start" --sizelimit "$size" "$img")
measure partclone partclone.ext4 -c -q -s "$loop" -o "$W/part.pc" -L "$W/partclone.log"
rows+=("| partclone.ext4 -c | (used blocks) | $(du -sb "$W/part.pc" | cut -f1) | $cpu | $wall |")
losetup -d "$loop"
loop=

out=$BENCH_OUT/used-only.md
{
    echo "# backup --used-only: ${SIZE_MIB} MiB image, ${USED_MIB} MiB of files, ${DELETED_MIB} MiB deleted"
    echo
    echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg); ext4 in use (dumpe2fs): $in_use bytes"
    echo
    echo "| case | bytes read | repository / image bytes | CPU s | wall s |"
    echo "|---|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
    echo
    python3 - "$W/used-only.json" "$in_use" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); used = int(sys.argv[2])
r = d["stats"]["bytes_read"]; s = d["stats"]["bytes_stored"]
print("--used-only read %.3f x and stored %.3f x what ext4 uses (goal: at most 1.2 x): %s"
      % (r / used, s / used, "met" if r <= 1.2 * used and s <= 1.2 * used else "MISSED"))
PY
} | tee "$out"
