#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Off-site copies to S3 (issue 23), side by side in one run against one versitygw on 127.0.0.1:
#   - blkvault copy of a local repository to s3://, beside `rclone sync` of the same repository's
#     directory and `restic copy` from a local restic repository of the same data into an S3 one;
#   - first copy (the repositories holding v1 and v2 of bench/peers' image series), then the
#     incremental copy after a small change (v3 backed up into both: images/mutate.sh's v3);
#   - restore of v3 from S3: `blkvault restore s3://...` beside `restic restore` from S3, into RAM
#     ($S3_COPY_OUT, default /dev/shm/blkvault-s3-copy: the disk's write speed is not what is
#     compared), cold (page cache dropped, blkvault's S3 cache and restic's cache emptied) and
#     warm (run again).
# Per step: wall seconds (with a final sync), requests (lines of versitygw's access log the step added), bytes sent
# (the sizes of the objects and parts PUT); medians of --reps runs (each into fresh prefixes).
# Copies run with the page cache dropped first (cold) and again with SRC in it (warm).
#
#   bench/s3-copy.sh [--reps N] [--images DIR] [--quick]
#     --images   a directory with v1.img v2.img v3.img (default: bench/peers' series in
#                $BENCH_WORK/peers/images, built like bench/peers builds it when missing)
#     --quick    no warm rows, one rep unless --reps
#   env: BLKVAULT, BUILD_DIR (default build-bench), VERSITYGW, RESTIC (default restic 0.19.1 of
#        /var/cache/blkvault-bench/bin), BENCH_NODROP=1
# Writes bench/results/s3-copy.md (the table and the goals) and prints it. Run as root.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

REPS=3 IMAGES= QUICK=0
while [ $# -gt 0 ]; do
    case $1 in
        --reps) REPS=$2; shift 2 ;;
        --reps=*) REPS=${1#*=}; shift ;;
        --images) IMAGES=$2; shift 2 ;;
        --images=*) IMAGES=${1#*=}; shift ;;
        --quick) QUICK=1; shift ;;
        *) die "usage: bench/s3-copy.sh [--reps N] [--images DIR] [--quick]" ;;
    esac
done
[ "$(id -u)" = 0 ] || die "needs root (drops the page cache)"
need rclone curl python3
[ -x /usr/bin/time ] || die "no /usr/bin/time (Debian package time): the CPU columns"
RESTIC=${RESTIC:-/var/cache/blkvault-bench/bin/restic-v0.19.1}
[ -x "$RESTIC" ] || RESTIC=$(peer_exe restic "$(command -v restic || echo restic)")
[ -x "$RESTIC" ] || die "no restic (bench/peers-install.sh installs 0.19.1)"
GW=${VERSITYGW:-/var/cache/blkvault-test/versitygw-v1.8.0}
[ -x "$GW" ] || die "no versitygw at $GW (scripts/build-versitygw.sh)"
bench_build
bench_secrets

W=$BENCH_WORK/s3-copy
# restores go to RAM: what is compared is the read from S3, not this machine's disk writes
OUT=${S3_COPY_OUT:-/dev/shm/blkvault-s3-copy}
rm -rf "$W" "$OUT"
mkdir -p "$W"
if [ -z "$IMAGES" ]; then
    IMAGES=$BENCH_WORK/peers/images
    python3 -c "import sys; sys.path.insert(0, '$BENCH_DIR'); import bench_images; \
bench_images.build_series('$IMAGES', '${PEERS_SIZE:-1G}', ${PEERS_CONTENT:-256})" >&2
fi
for v in 1 2 3; do [ -f "$IMAGES/v$v.img" ] || die "$IMAGES/v$v.img is missing"; done

# ---- the server ----
S3_KEY=bench S3_SECRET=bench-secret-0123456789
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$W/gw/iam" "$W/gw/vers" "$W/gw/data"
LOG=$W/gw/access.log
ROOT_ACCESS_KEY=$S3_KEY ROOT_SECRET_KEY=$S3_SECRET "$GW" --port "127.0.0.1:$port" --quiet --access-log "$LOG" \
    --iam-dir "$W/gw/iam" posix --versioning-dir "$W/gw/vers" "$W/gw/data" >"$W/gw/server.log" 2>&1 &
gw_pid=$!
trap 'kill $gw_pid 2>/dev/null || true; rm -rf "$OUT"' EXIT
for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
export AWS_ENDPOINT_URL=http://127.0.0.1:$port AWS_ACCESS_KEY_ID=$S3_KEY AWS_SECRET_ACCESS_KEY=$S3_SECRET
export AWS_REGION=us-east-1 AWS_SHARED_CREDENTIALS_FILE=$W/none AWS_CONFIG_FILE=$W/none
unset AWS_ENDPOINT_URL_S3 AWS_SESSION_TOKEN AWS_PROFILE AWS_DEFAULT_REGION AWS_CA_BUNDLE
curl -sSf --aws-sigv4 aws:amz:us-east-1:s3 --user "$S3_KEY:$S3_SECRET" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
    -X PUT "$AWS_ENDPOINT_URL/bench" >/dev/null || die "cannot make the bucket"
export RCLONE_CONFIG=$W/rclone.conf
cat >"$RCLONE_CONFIG" <<EOF
[gw]
type = s3
provider = Other
access_key_id = $S3_KEY
secret_access_key = $S3_SECRET
endpoint = $AWS_ENDPOINT_URL
region = us-east-1
force_path_style = true
EOF
export BLKVAULT_CACHE_DIR=$W/bv-cache RESTIC_FROM_PASSWORD=$RESTIC_PASSWORD
restic_s3() { echo "s3:$AWS_ENDPOINT_URL/bench/$1"; }

out=$(results_file s3-copy) # its header: the load average at the start

# ---- the local repositories: v1 and v2 (first copy), then v3 as well (incremental) ----
log "$(load_note); local repositories of $IMAGES v1, v2 (and v3)"
bv init "$W/bv12" --key-file "$BENCH_KEY" -q
"$RESTIC" -r "$W/rs12" init -q >/dev/null
for v in 1 2; do
    bv backup "$W/bv12" "$IMAGES/v$v.img" --key-file "$BENCH_KEY" --name=img -q
    (cd "$IMAGES" && "$RESTIC" -r "$W/rs12" backup -q "v$v.img" >/dev/null)
done
cp -a "$W/bv12" "$W/bv123"
cp -a "$W/rs12" "$W/rs123"
bv backup "$W/bv123" "$IMAGES/v3.img" --key-file "$BENCH_KEY" --name=img -q
(cd "$IMAGES" && "$RESTIC" -r "$W/rs123" backup -q v3.img >/dev/null)
bv_repo_mib=$(mib "$(du_bytes "$W/bv12")")
rs_repo_mib=$(mib "$(du_bytes "$W/rs12")")
new_packs=$(( $(find "$W/bv123/packs" -name '*.pack' | wc -l) - $(find "$W/bv12/packs" -name '*.pack' | wc -l) ))
log "blkvault repository $bv_repo_mib MiB, restic's $rs_repo_mib MiB; v3 added $new_packs blkvault packs"

# ---- measuring a step ----
# step NAME CMD...: runs CMD (output to $W/NAME.out, errors to $W/NAME.err); appends to $W/rows.tsv
# "NAME wall requests MiB-put load CPU-tool CPU-server" from the access log's new lines, the
# tool's user + system time (/usr/bin/time) and versitygw's over the step (/proc/PID/stat): on a
# shared machine the CPU seconds are the firmer measure.
gw_ticks() { awk '{ print $14 + $15 }' "/proc/$gw_pid/stat"; }
step() {
    local name=$1; shift
    local before t0 t1 g0 g1
    [ "$1" = bv ] && set -- "$BLKVAULT" "${@:2}" # /usr/bin/time runs no shell function
    before=$(wc -l <"$LOG")
    g0=$(gw_ticks)
    t0=$(date +%s.%N)
    /usr/bin/time -f '%U %S' -o "$W/$name.time" "$@" >"$W/$name.out" 2>"$W/$name.err" ||
        { tail -5 "$W/$name.err" >&2; die "$name failed: $*"; }
    sync
    t1=$(date +%s.%N)
    sleep 0.2 # the log's last lines
    g1=$(gw_ticks)
    tail -n +$((before + 1)) "$LOG" | awk -v name="$name" -v t0="$t0" -v t1="$t1" -v la="$(cut -d' ' -f1 /proc/loadavg)" \
        -v cpu="$(awk '{ print $1 + $2 }' "$W/$name.time")" -v gw="$((g1 - g0))" -v hz="$(getconf CLK_TCK)" '
        { n++; for (i = 1; i <= NF; i++) if ($i ~ /^s3_/) {
              if ($i == "s3_PutObject" || $i == "s3_UploadPart") put += $(i + 6); break } }
        END { printf "%s\t%.2f\t%d\t%.1f\t%s\t%.2f\t%.2f\n", name, t1 - t0, n, put / 1048576, la, cpu, gw / hz }' >>"$W/rows.tsv"
    log "$(tail -1 "$W/rows.tsv")"
}
cold() { [ "$1" = cold ] && drop_caches; return 0; }
restore_cache_clear() { rm -rf "$BLKVAULT_CACHE_DIR" "$RESTIC_CACHE_DIR"; }

: >"$W/rows.tsv"
for rep in $(seq 1 "$REPS"); do
    for temp in cold warm; do
        [ "$temp" = warm ] && [ "$QUICK" = 1 ] && continue
        p=r$rep-$temp
        # first copy
        [ "$temp" = warm ] && cat "$W"/bv12/packs/*/* "$W"/rs12/data/*/* >/dev/null
        cold $temp; step "first-$temp-blkvault-$rep" bv copy "$W/bv12" "s3://bench/$p-bv" --key-file "$BENCH_KEY" --json
        cold $temp; step "first-$temp-rclone-$rep" rclone sync "$W/bv12" "gw:bench/$p-rc"
        "$RESTIC" -r "$(restic_s3 "$p-rs")" init -q --from-repo "$W/rs12" --copy-chunker-params >/dev/null
        cold $temp; step "first-$temp-restic-$rep" "$RESTIC" -r "$(restic_s3 "$p-rs")" copy -q --from-repo "$W/rs12"
        # incremental copy after the small change (v3)
        [ "$temp" = warm ] && cat "$W"/bv123/packs/*/* "$W"/rs123/data/*/* >/dev/null
        cold $temp; step "incr-$temp-blkvault-$rep" bv copy "$W/bv123" "s3://bench/$p-bv" --key-file "$BENCH_KEY" --json
        cold $temp; step "incr-$temp-rclone-$rep" rclone sync "$W/bv123" "gw:bench/$p-rc"
        cold $temp; step "incr-$temp-restic-$rep" "$RESTIC" -r "$(restic_s3 "$p-rs")" copy -q --from-repo "$W/rs123"
        # restore of v3 from S3: cold once the caches are emptied, warm when run again
        [ "$temp" = cold ] && restore_cache_clear
        rm -rf "$OUT"; mkdir -p "$OUT"
        cold $temp; step "restore-$temp-blkvault-$rep" bv restore "s3://bench/$p-bv" img@latest "$OUT/v3.img" \
            --key-file "$BENCH_KEY"
        cmp -s "$IMAGES/v3.img" "$OUT/v3.img" || die "blkvault restore from S3 is not v3"
        rm -rf "$OUT"; mkdir -p "$OUT"
        cold $temp; step "restore-$temp-restic-$rep" "$RESTIC" -r "$(restic_s3 "$p-rs")" restore latest --target "$OUT" -q
        cmp -s "$IMAGES/v3.img" "$OUT/v3.img" || die "restic restore from S3 is not v3"
        rm -rf "$OUT"
    done
done
load_end=$(load_note)

# ---- the table: medians ----
med() { # PHASE TOOL COLUMN(2 wall, 3 requests, 4 MiB, 6 CPU s of the tool, 7 of versitygw)
    local v
    v=$(awk -F'\t' -v p="$1-" -v t="-$2-" -v c="$3" 'index($1, p) == 1 && index($1, t) { print $c }' "$W/rows.tsv")
    [ -n "$v" ] && median $v || echo -
}
{
    printf -- '- images: %s (v1, v2: first copy; v3, a small change: incremental; restore of v3)\n' "$IMAGES"
    printf -- '- local repositories: blkvault %s MiB, restic %s MiB; v3 added %s blkvault packs\n' \
        "$bv_repo_mib" "$rs_repo_mib" "$new_packs"
    printf -- '- versitygw %s on 127.0.0.1 (posix backend, %s); rclone %s; restic %s\n' "$("$GW" --version 2>/dev/null | head -1 | awk '{print $NF}')" \
        "$(df -h --output=source "$W" | tail -1)" "$(rclone version | head -1 | awk '{print $2}')" \
        "$("$RESTIC" version | awk '{print $2}')"
    printf -- '- medians of %s reps; requests: access-log lines; MiB put: sizes of PutObject and UploadPart\n' "$REPS"
    printf -- '- %s at end\n\n' "$load_end"
} >>"$out"
table_start "$out" "step|page cache|tool|wall s|requests|MiB put|vs blkvault (wall)|CPU s (tool)|CPU s (versitygw)"
for phase in first incr restore; do
    for temp in cold warm; do
        bw=$(med "$phase-$temp" blkvault 2)
        [ "$bw" = - ] && continue
        for tool in blkvault rclone restic; do
            w=$(med "$phase-$temp" "$tool" 2)
            [ "$w" = - ] && continue
            table_row "$out" "$phase|$temp|$tool|$w|$(med "$phase-$temp" "$tool" 3)|$(med "$phase-$temp" "$tool" 4)|$(calc "$w / $bw" 2)x|$(med "$phase-$temp" "$tool" 6)|$(med "$phase-$temp" "$tool" 7)"
        done
    done
done
printf '\n' >>"$out"
for temp in cold warm; do
    bf=$(med "first-$temp" blkvault 2)
    [ "$bf" = - ] && continue
    goal "$out" "first copy ($temp) at least as fast as rclone sync ($bf s against $(med "first-$temp" rclone 2) s)" \
        "$(holds "$bf <= $(med "first-$temp" rclone 2)")"
    bi=$(med "incr-$temp" blkvault 2)
    for tool in rclone restic; do
        ti=$(med "incr-$temp" "$tool" 2)
        goal "$out" "incremental copy ($temp) 5x faster than $tool ($bi s against $ti s)" "$(holds "5 * $bi <= $ti")"
    done
    req=$(med "incr-$temp" blkvault 3)
    goal "$out" "incremental copy ($temp) at most new packs + 10 requests ($req for $new_packs new packs)" \
        "$(holds "$req <= $new_packs + 10")"
    br=$(med "restore-$temp" blkvault 2) rr=$(med "restore-$temp" restic 2)
    goal "$out" "restore from S3 ($temp) at least 2x restic's speed ($br s against $rr s)" "$(holds "2 * $br <= $rr")"
done
printf '\nEvery step (name, wall s, requests, MiB put, 1-min load, CPU s of the tool, of versitygw):\n\n```\n' >>"$out"
cat "$W/rows.tsv" >>"$out"
printf '```\n' >>"$out"
cat "$out"
