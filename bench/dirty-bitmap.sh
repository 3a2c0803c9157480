#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Changed-block backups (issue 14): a qcow2 image of SIZE_MIB random data with a persistent dirty
# bitmap, served by qemu-nbd -B; a whole first backup over NBD, then PERCENT of the image written
# in 64 KiB pieces spread over it, then a backup with --dirty-bitmap, against a whole read of the
# same export (--force-read) in the same run. Prints seconds and bytes_read of each; the goal is a
# dirty-bitmap backup of a 4 GiB image with 1% changed in under a tenth of the whole read.
#
#   bench/dirty-bitmap.sh [--quick]        (SIZE_MIB=4096 PERCENT=1 REPS=3; --quick: 256 MiB)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
SIZE_MIB=${SIZE_MIB:-4096}
PERCENT=${PERCENT:-1}
REPS=${REPS:-3}
[ "${1:-}" = --quick ] && SIZE_MIB=256
need qemu-img qemu-io qemu-nbd nbdinfo python3 openssl
bench_build

work=$BENCH_WORK/dirty-bitmap
rm -rf "$work"
mkdir -p "$work"
img=$work/d.qcow2 sock=$work/q.sock repo=$work/repo
uri="nbd+unix:///?socket=$sock"
qpid=
trap '[ -z "$qpid" ] || kill "$qpid" 2>/dev/null; rm -rf "$work"' EXIT

serve() {
    rm -f "$sock"
    qemu-nbd -r -t -f qcow2 -k "$sock" -B b0 "$img" &
    qpid=$!
    for _ in $(seq 100); do nbdinfo --size "$uri" >/dev/null 2>&1 && return 0; sleep 0.1; done
    die "qemu-nbd did not come up"
}
unserve() { kill "$qpid"; wait "$qpid" 2>/dev/null || true; qpid=; }

# backup ARGS...: "seconds bytes_read" of one backup of the export
backup() {
    local t0 t1
    t0=$(date +%s.%N)
    "$BLKVAULT" backup "$repo" "$uri" --name=vm --json -q "$@" >"$work/out.json" 2>/dev/null
    t1=$(date +%s.%N)
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.2f %d" % (float(sys.argv[3]) - float(sys.argv[2]), d["stats"]["bytes_read"]))' \
        "$work/out.json" "$t0" "$t1"
}

log "making a ${SIZE_MIB} MiB qcow2 image"
head -c "$((SIZE_MIB * 1048576))" /dev/zero | openssl enc -aes-128-ctr -pass pass:dirty -nosalt -pbkdf2 2>/dev/null \
    >"$work/d.raw"
qemu-img convert -f raw -O qcow2 "$work/d.raw" "$img"
rm -f "$work/d.raw"
qemu-img bitmap --add --enable -f qcow2 "$img" b0
"$BLKVAULT" init "$repo" --encryption=none >/dev/null

serve
first=$(backup --dirty-bitmap=b0)
unserve
# PERCENT of the image in 64 KiB writes, evenly spread
pieces=$((SIZE_MIB * 16 * PERCENT / 100))
step=$((SIZE_MIB * 1048576 / pieces))
python3 -c 'import sys; n,s=int(sys.argv[1]),int(sys.argv[2]); print("\n".join("write -P %d %d 64k" % (i % 250 + 1, i * s) for i in range(n)))' \
    "$pieces" "$step" >"$work/writes"
qemu-io -f qcow2 "$img" <"$work/writes" >/dev/null
serve
# REPS rounds of the two, alternating, each against the same parent (the first backup): the
# median of each. A round that is refused its pairing reads everything, and shows it.
changed_runs=() whole_runs=()
for _ in $(seq "$REPS"); do
    changed_runs+=("$(backup --dirty-bitmap=b0)")
    "$BLKVAULT" delete "$repo" vm@latest -q
    "$BLKVAULT" gc "$repo" -q   # the next round stores its new chunks again, as this one did
    whole_runs+=("$(backup --dirty-bitmap=b0 --force-read)")
    "$BLKVAULT" delete "$repo" vm@latest -q
done
unserve
median_pair() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$0} END{print a[int((NR+1)/2)]}'; }
changed=$(median_pair "${changed_runs[@]}")
whole=$(median_pair "${whole_runs[@]}")

log "rounds (seconds bytes_read): dirty-bitmap: ${changed_runs[*]}; whole read: ${whole_runs[*]}"
printf '%-34s %8s %14s\n' case seconds bytes_read
printf '%-34s %8s %14s\n' "first backup (whole read)" $first
printf '%-34s %8s %14s\n' "--dirty-bitmap, ${PERCENT}% changed" $changed
printf '%-34s %8s %14s\n' "--force-read (whole read)" $whole
python3 -c 'import sys; c,w=float(sys.argv[1]),float(sys.argv[2]); print("dirty-bitmap / whole read: %.3f (goal < 0.1)" % (c / w))' \
    "${changed%% *}" "${whole%% *}"
