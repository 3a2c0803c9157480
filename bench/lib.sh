# SPDX-License-Identifier: LGPL-2.1-or-later
# Shared helpers for the bench/*.sh scripts. Source it; do not run it.
#
#   BENCH_WORK   scratch directory for inputs and repositories (default /var/tmp/blkvault-bench)
#   BENCH_OUT    results directory (default bench/results)
#   BLKVAULT     the blkvault binary (default: build-bench/src/cli/blkvault, a release build)
#   BENCH_BUILD  set to 0 to skip (re)building build-bench
#   BENCH_NODROP set to 1 to skip dropping the page cache (for quick trials; numbers then mean less)

set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC_ROOT=$(cd "$BENCH_DIR/.." && pwd)
BENCH_WORK=${BENCH_WORK:-/var/tmp/blkvault-bench}
BENCH_OUT=${BENCH_OUT:-$BENCH_DIR/results}
BUILD_DIR=${BUILD_DIR:-$SRC_ROOT/build-bench}
BLKVAULT=${BLKVAULT:-$BUILD_DIR/src/cli/blkvault}
IMAGES_DIR=$SRC_ROOT/images

mkdir -p "$BENCH_WORK" "$BENCH_OUT"

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Build the release tree used by every benchmark (never the sanitizer builds).
bench_build() {
    [ "${BENCH_BUILD:-1}" = 0 ] && { [ -x "$BLKVAULT" ] || die "no $BLKVAULT"; return 0; }
    if [ ! -f "$BUILD_DIR/build.ninja" ]; then
        meson setup "$BUILD_DIR" "$SRC_ROOT" -Dbuildtype=release >/dev/null || die "meson setup failed"
    fi
    ninja -C "$BUILD_DIR" >/dev/null || die "build failed"
    [ -x "$BLKVAULT" ] || die "no $BLKVAULT after the build"
}

need() { for c in "$@"; do command -v "$c" >/dev/null || die "missing tool: $c"; done; }

# Drop the page cache (root only); a no-op with BENCH_NODROP=1.
drop_caches() {
    sync
    [ "${BENCH_NODROP:-0}" = 1 ] && return 0
    echo 3 >/proc/sys/vm/drop_caches
}

# Bytes on disk of a path, as du -sb (apparent size summed) and du -sB1 (allocated).
du_bytes() { du -sb "$1" | cut -f1; }
du_alloc() { du -sB1 "$1" | cut -f1; }

# Secrets used by every tool. The blkvault key file holds 32 random bytes.
bench_secrets() {
    BENCH_KEY=$BENCH_WORK/keyfile
    [ -s "$BENCH_KEY" ] || head -c 32 /dev/urandom >"$BENCH_KEY"
    export BORG_PASSPHRASE=bench-passphrase RESTIC_PASSWORD=bench-passphrase
    export BORG_RELOCATED_REPO_ACCESS_IS_OK=yes BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK=yes
    # Per script: scripts running at once must not share (or wipe) each other's borg/restic state.
    local me; me=$(basename "$0" .sh)
    export BORG_BASE_DIR=$BENCH_WORK/borg-home-$me RESTIC_CACHE_DIR=$BENCH_WORK/restic-cache-$me
    export RESTIC_COMPRESSION=auto
}

bv() { "$BLKVAULT" "$@"; }

# The executable of a peer bench/peers-install.sh installed (status "ok"), else FALLBACK:
#   restic=$(peer_exe restic /usr/bin/restic)
peer_exe() {
    local path
    path=$(awk -F'\t' -v n="$1" '$1 == n && $2 == "ok" {print $3}' \
        "${PEERS_CACHE:-/var/cache/blkvault-bench}/status.tsv" 2>/dev/null)
    if [ -n "$path" ] && [ -x "$path" ]; then printf '%s\n' "$path"; else printf '%s\n' "$2"; fi
}

# Load on the machine, for the report.
load_note() { printf 'load average: %s (nproc %s)\n' "$(cut -d' ' -f1-3 /proc/loadavg)" "$(nproc)"; }

# CPU time stolen by the hypervisor: cpu_ticks prints "total steal" from /proc/stat; steal_since
# "TOTAL STEAL" prints the stolen share (%) since then. On a shared VM this says how much of a
# measured difference the neighbours may have made.
cpu_ticks() { awk '/^cpu /{t=0; for (i = 2; i <= 9; i++) t += $i; print t, $9}' /proc/stat; }
steal_since() {
    local t0=$1 s0=$2 t1 s1
    read -r t1 s1 < <(cpu_ticks)
    calc "100 * ($s1 - $s0) / ($t1 - $t0 + 1)" 1
}

# timed LABEL CMD...: run CMD under /usr/bin/time -v; stdout of CMD goes to $TIMED_STDOUT
# (default /dev/null), stderr to $BENCH_WORK/LABEL.err. Sets T_WALL (s, from clock_gettime),
# T_USER, T_SYS, T_CPU (s), T_RSS (KiB peak RSS of the largest process) and appends a line to
# $BENCH_OUT/timings.tsv. Fails if CMD fails.
timed() {
    local label=$1; shift
    local tf=$BENCH_WORK/.time.$$ err=$BENCH_WORK/$label.err t0 t1 rc=0
    t0=$(date +%s.%N)
    /usr/bin/time -v -o "$tf" "$@" >"${TIMED_STDOUT:-/dev/null}" 2>"$err" || rc=$?
    t1=$(date +%s.%N)
    if [ $rc -ne 0 ]; then
        log "$label failed (exit $rc): $*"; tail -5 "$err" >&2; return $rc
    fi
    T_WALL=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", b-a}')
    T_USER=$(awk -F': ' '/User time/{print $2}' "$tf")
    T_SYS=$(awk -F': ' '/System time/{print $2}' "$tf")
    T_RSS=$(awk -F': ' '/Maximum resident set size/{print $2}' "$tf")
    T_CPU=$(awk -v u="$T_USER" -v s="$T_SYS" 'BEGIN{printf "%.2f", u+s}')
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date +%FT%T)" "$label" "$T_WALL" "$T_USER" "$T_SYS" \
        "$T_RSS" "$(cut -d' ' -f1 /proc/loadavg)" >>"$BENCH_OUT/timings.tsv"
    rm -f "$tf"
}

# Arithmetic helpers (awk, floating point).
calc() { awk "BEGIN{printf \"%.${2:-2}f\", $1}"; }
mib() { calc "$1/1048576" "${2:-1}"; }
# pct PART WHOLE: 100*PART/WHOLE
pct() { calc "100*($1)/($2)" "${3:-1}"; }
# holds EXPR: 1 if the awk comparison EXPR (e.g. "1.2 <= 2") is true, else 0; for goal.
holds() { awk "BEGIN{print ($1) ? 1 : 0}"; }

# json_get FIELD: the first value of "FIELD" (number or string) in the JSON on stdin.
# Plain sed, no python: interpreter start-up dominates loops of small backups.
json_get() {
    { tr -d '\n'; echo; } | sed -n -E "s/.*\"$1\"[[:space:]]*:[[:space:]]*\"?([^\",}]*).*/\1/p" | head -1
}

# Median of numbers given as arguments.
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END{if(NR%2) print a[(NR+1)/2]; else printf "%.3f\n", (a[NR/2]+a[NR/2+1])/2}'; }

# Result tables: table_start FILE "col|col|..."; table_row FILE "v|v|..."; markdown.
table_start() {
    local f=$1 h=$2
    printf '| %s |\n' "${h//|/ | }" >>"$f"
    printf '|%s\n' "$(printf '%s' "$h" | awk -F'|' '{for(i=1;i<=NF;i++) printf "---|"}')" >>"$f"
}
table_row() { printf '| %s |\n' "${2//|/ | }" >>"$1"; }

# results_file NAME: a fresh markdown file bench/results/NAME.md with a header.
results_file() {
    local f=$BENCH_OUT/$1.md
    {
        printf '# %s (%s)\n\n' "$1" "$(date -u +%FT%TZ)"
        printf -- '- host: %s, %s cores, %s\n' "$(hostname)" "$(nproc)" "$(uname -r)"
        printf -- '- blkvault: %s (git %s)\n' "$BLKVAULT" "$(git -C "$SRC_ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
        printf -- '- %s at start\n\n' "$(load_note)"
    } >"$f"
    printf '%s' "$f"
}

# goal FILE TEXT OK(0/1): record a goal verdict.
goal() { if [ "$3" = 1 ]; then printf -- '- goal %s: **met**\n' "$2" >>"$1"; else printf -- '- goal %s: **MISSED**\n' "$2" >>"$1"; fi; }
