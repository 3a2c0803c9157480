#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Backups of a running libvirt domain (issue 24), side by side in one run: blkvault's
# `backup REPO libvirt:DOMAIN` (a first backup, whole reads of the running disk, an incremental
# one by checkpoint; with a blkvault that has no libvirt source yet, its NBD source reading the
# pull-mode job this script begins and ends, as that source does: see blkvault_has_libvirt) beside virtnbdbackup's full and incremental backups (libvirt pull mode, its
# own checkpoints), on one domain whose disk holds real content and gets the same 1% rewrite
# before each tool's incremental backup.
#
#   bench/libvirt-backup.sh [--reps N] [--quick] [--image FILE] [--install]
#
#   --reps N    rounds of the whole sequence below, medians reported (default 1)
#   --quick     a 512 MiB image of real files (images/make-image.sh) instead of the 4 GiB
#               installed system: a smoke run (tests/root/test-bench-libvirt.sh)
#   --image F   a raw disk image to run instead (converted to qcow2; the file is not changed)
#   --install   install virtnbdbackup first (bench/peers-install.sh virtnbdbackup)
#   env: PERCENT (1): share of the disk rewritten; LVB_PIECE (64k): size of each rewrite;
#        LVB_BLKVAULT (libvirt or nbd; default libvirt when blkvault has that source);
#        VIRTNBDBACKUP (the peer's path, default as peers-install.sh recorded it);
#        BENCH_WORK, BENCH_OUT, BLKVAULT, BENCH_NODROP as in lib.sh.
#
# The domain: TCG, 64 MiB, no guest OS (the block layer needs none), one qcow2 virtio disk made
# from the image: by default the installed Debian 12 system bench/peers builds
# (images/make-installed.sh, 4 GiB; taken from $BENCH_WORK/peers/images/installed/v1.img when it
# is there, else built once into $BENCH_WORK/libvirt-backup/ and kept). The rewrite: PERCENT of
# the disk in LVB_PIECE pieces at random aligned offsets (seeded per round), each piece fresh
# random bytes (incompressible, found nowhere else: no tool can dedup or compress it away),
# written into the running disk through the monitor (`qemu-io -d QDEV "write -s FILE OFF LEN"`,
# QDEV from `info block`), one virsh connection for all of them.
#
# Each round, per tool (the order of the tools alternates between rounds):
#   blkvault:      a fresh repository (encrypted, zstd 3: the settings of every bench); first
#                  backup (cold), whole read (`--force-read`, cold, then warm), the rewrite,
#                  incremental backup (cold)
#   virtnbdbackup: a fresh output directory; full (cold, then warm), the rewrite, inc (cold)
#   then the tool's checkpoints are deleted: virtnbdbackup refuses to run beside checkpoints
#   it did not make ("Foreign checkpoint found").
# Cold: the page cache dropped before the step (QEMU reads the image through it); warm: right
# after a whole read. Per step: wall and CPU seconds of the tool (user + sys of its process
# tree) and of QEMU (its NBD server and block layer; /proc/PID/stat), bytes QEMU read from the
# image (/proc/PID/io rchar: the same yardstick for both tools; read_bytes: from the disk), the
# bytes the tool says it read (blkvault's bytes_read; virtnbdbackup's data written, uncompressed)
# and the repository's or output's size (du -sb), with the 1-min load average.
#
# libvirtd: the lock tests/libvirt/libvirt-lib.sh takes (/run/lock/blkvault-libvirt-test.lock)
# is held for the whole run; virtlogd and libvirtd are started when they are not running and
# only those are stopped at the end; the domain bvb-PID is undefined with its checkpoints.
#
# Results: $BENCH_OUT/libvirt-backup.md (tables, ratios, goals) and libvirt-backup.tsv (every
# step of every round). Goals: the incremental reads under a tenth of a whole read, and is at
# least 2x faster than virtnbdbackup's incremental.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

usage() { echo "usage: bench/libvirt-backup.sh [--reps N] [--quick] [--image FILE] [--install]" >&2; exit 2; }
REPS=1 QUICK=0 IMAGE= INSTALL=0
while [ $# -gt 0 ]; do
    case $1 in
    --reps) [ $# -ge 2 ] || usage; REPS=$2; shift ;;
    --reps=*) REPS=${1#*=} ;;
    --quick) QUICK=1 ;;
    --image) [ $# -ge 2 ] || usage; IMAGE=$2; shift ;;
    --image=*) IMAGE=${1#*=} ;;
    --install) INSTALL=1 ;;
    *) usage ;;
    esac
    shift
done
[[ $REPS =~ ^[1-9][0-9]*$ ]] || { echo "error: --reps takes a positive number, not '$REPS'" >&2; exit 2; }
[ -z "$IMAGE" ] || [ -f "$IMAGE" ] || { echo "error: $IMAGE: no such image" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "run as root (libvirtd's system instance, the page cache)"
PERCENT=${PERCENT:-1}
PIECE=$(numfmt --from=iec "${LVB_PIECE:-64K}")
need virsh libvirtd virtlogd qemu-system-x86_64 qemu-img python3 openssl flock
[ "$INSTALL" = 0 ] || "$BENCH_DIR/peers-install.sh" virtnbdbackup
VNB=${VIRTNBDBACKUP:-$(peer_exe virtnbdbackup /usr/bin/virtnbdbackup)}
bench_build
bench_secrets

work=$BENCH_WORK/libvirt-backup
mkdir -p "$work"
export LIBVIRT_DEFAULT_URI=qemu:///system
lv() { virsh -q -c "$LIBVIRT_DEFAULT_URI" "$@"; }

# --- the image: real content, built once and kept ----------------------------------------
if [ -z "$IMAGE" ] && [ "$QUICK" = 1 ]; then
    IMAGE=$work/quick.img
    [ -s "$IMAGE" ] || "$SRC_ROOT/images/make-image.sh" "$IMAGE" 512M --content-mib 128 >&2
elif [ -z "$IMAGE" ]; then
    IMAGE=$BENCH_WORK/peers/images/installed/v1.img
    if [ ! -s "$IMAGE" ]; then
        IMAGE=$work/installed.img
        [ -s "$IMAGE" ] || "$SRC_ROOT/images/make-installed.sh" "$IMAGE" 4G >&2
    fi
fi

# --- libvirtd, under the libvirt tests' lock, and the domain -----------------------------
DOM=bvb-$$
IMGDIR=/var/lib/libvirt/images/$DOM   # reachable by the libvirt-qemu user, as the backup socket
DISK=$IMGDIR/$DOM-vda.qcow2
started=()
cleanup() {
    set +e
    if lv dominfo "$DOM" >/dev/null 2>&1; then
        lv domjobabort "$DOM" >/dev/null 2>&1
        lv destroy "$DOM" >/dev/null 2>&1
        for c in $(lv checkpoint-list "$DOM" --name 2>/dev/null); do
            lv checkpoint-delete "$DOM" "$c" --metadata >/dev/null 2>&1
        done
        lv undefine "$DOM" --checkpoints-metadata >/dev/null 2>&1 || lv undefine "$DOM" >/dev/null 2>&1
    fi
    rm -rf "$IMGDIR" "$work/repo" "$work/vnb"
    local p
    for p in "${started[@]}"; do stop_daemon "$p"; done
}
trap cleanup EXIT

# alive PIDFILE COMM: whether the pid file names a live COMM (as tests/libvirt/libvirt-lib.sh)
alive() { local pid; pid=$(cat "$1" 2>/dev/null) && [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ]; }
stop_daemon() {
    local f=/run/$1.pid pid
    alive "$f" "$1" || return 0
    pid=$(cat "$f")
    kill -TERM "$pid" 2>/dev/null || return 0
    for _ in $(seq 100); do [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$1" ] || return 0; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
}
exec {lockfd}>/run/lock/blkvault-libvirt-test.lock
log "waiting for the libvirt tests' lock"
flock "$lockfd"
for d in virtlogd libvirtd; do
    alive "/run/$d.pid" "$d" && continue
    "$d" -d || die "cannot start $d"
    started=("$d" "${started[@]}")
done
for _ in $(seq 100); do lv version >/dev/null 2>&1 && break; sleep 0.1; done
lv version >/dev/null || die "libvirtd does not answer on $LIBVIRT_DEFAULT_URI"

mkdir -p "$IMGDIR/w"
chmod 755 "$IMGDIR" "$IMGDIR/w"
log "converting $IMAGE into $DISK"
qemu-img convert -f raw -O qcow2 "$IMAGE" "$DISK"
SIZE=$(qemu-img info --output=json "$DISK" | python3 -c 'import json, sys; print(json.load(sys.stdin)["virtual-size"])')
cat >"$work/$DOM.xml" <<XML
<domain type='qemu'>
  <name>$DOM</name>
  <memory unit='MiB'>64</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type></os>
  <on_reboot>destroy</on_reboot>
  <devices>
    <emulator>$(command -v qemu-system-x86_64)</emulator>
    <disk type='file' device='disk'><driver name='qemu' type='qcow2'/><source file='$DISK'/><target dev='vda' bus='virtio'/></disk>
  </devices>
</domain>
XML
lv define "$work/$DOM.xml" >/dev/null
lv start "$DOM" >/dev/null
QPID=$(cat "/run/libvirt/qemu/$DOM.pid")
QDEV=$(lv qemu-monitor-command "$DOM" --hmp 'info block' | tr -d '\r' |
    awk -v img="$DISK" 'index($0, img) { f = 1; next } f && /Attached to:/ { print $3; exit } /^[^ ]/ { f = 0 }')
[ -n "$QDEV" ] || die "no qdev path for vda in 'info block'"
log "domain $DOM running (qemu pid $QPID), vda $(mib "$SIZE" 0) MiB ($QDEV)"

# --- the rewrite ----------------------------------------------------------------------------
PIECES=$(( SIZE * PERCENT / 100 / PIECE ))
[ "$PIECES" -ge 1 ] || die "PERCENT=$PERCENT of $SIZE bytes is less than one piece"
# rewrite ROUND: PIECES fresh random pieces at aligned offsets drawn with seed ROUND (the same
# offsets for both tools within a round), through one virsh connection, then a flush
rewrite() {
    local r=$1 t0=$SECONDS
    rm -f "$IMGDIR"/w/*
    prng $(( PIECES * PIECE )) "round-$r-$RANDOM" | split -b "$PIECE" -a 6 -d - "$IMGDIR/w/p"
    chmod 644 "$IMGDIR"/w/*
    python3 - "$SIZE" "$PIECE" "$PIECES" "$r" "$IMGDIR/w" "$DOM" "$QDEV" >"$work/writes" <<'PY'
import random, sys
size, piece, n, seed, wdir, dom, qdev = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6], sys.argv[7]
slots = sorted(random.Random(seed).sample(range(size // piece), n))
for i, s in enumerate(slots):
    print(f"qemu-monitor-command {dom} --hmp 'qemu-io -d {qdev} \"write -s {wdir}/p{i:06d} {s * piece} {piece}\"'")
print(f"qemu-monitor-command {dom} --hmp 'qemu-io -d {qdev} \"flush\"'")
PY
    # qemu-io prints to QEMU's stdout, which libvirt sends to the domain's log: count there
    local qlog=/var/log/libvirt/qemu/$DOM.log at wrote
    at=$(stat -c %s "$qlog")
    lv <"$work/writes" >"$work/writes.out" 2>&1 || die "the rewrite failed: $(tail -3 "$work/writes.out")"
    if grep -qi 'error\|fail\|no such' "$work/writes.out"; then die "the rewrite failed: $(grep -im1 'error\|fail\|no such' "$work/writes.out")"; fi
    for _ in $(seq 50); do   # virtlogd writes the log a moment later
        wrote=$(tail -c +$((at + 1)) "$qlog" | grep -c "^wrote $PIECE/$PIECE bytes at offset" || true)
        [ "$wrote" -lt "$PIECES" ] || break
        sleep 0.1
    done
    [ "$wrote" = "$PIECES" ] || die "the rewrite wrote $wrote of $PIECES pieces (see $qlog)"
    # what the newest checkpoint's bitmap counts now (the bytes an incremental backup must read)
    local c; c=$(lv checkpoint-list "$DOM" --name --leaves | head -1)
    DIRTY=$(lv checkpoint-dumpxml "$DOM" "$c" --size | sed -n "s/.*<disk name='vda'.*size='\([0-9]*\)'.*/\1/p")
    log "  rewrite: $wrote pieces of $PIECE bytes in $((SECONDS - t0)) s; checkpoint $c counts ${DIRTY:-?} dirty bytes"
}
# a piece of a rewrite is the bytes of its file on the running disk
prng() { openssl enc -aes-128-ctr -pass "pass:$2" -nosalt -pbkdf2 -in <(head -c "$1" /dev/zero) 2>/dev/null; }

# --- one measured step ----------------------------------------------------------------------
ROWS=$BENCH_OUT/libvirt-backup.tsv
printf 'round\ttool\tstep\tcache\twall_s\tcpu_s\tqemu_cpu_s\tqemu_read_b\tqemu_disk_read_b\ttool_read_b\tsize_b\tload1\tdirty_b\n' >"$ROWS"
qemu_cpu() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$QPID/stat"; }
qemu_io() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$QPID/io"; }
# step ROUND TOOL STEP CACHE SIZEPATH CMD...: runs CMD (cold: page cache dropped first); a row
# in ROWS; TOOL_READ must be set by the caller's parser afterwards via last_row_fix
step() {
    local r=$1 tool=$2 name=$3 cache=$4 sizepath=$5; shift 5
    [ "$cache" = cold ] && drop_caches
    local c0 rc0 rb0
    c0=$(qemu_cpu) rc0=$(qemu_io rchar) rb0=$(qemu_io read_bytes)
    TIMED_STDOUT=$work/step.out timed "lvb-$tool-${name// /-}" "$@" || die "$tool $name failed: $(tail -3 "$BENCH_WORK/lvb-$tool-${name// /-}.err")"
    S_QCPU=$(calc "$(qemu_cpu) - $c0") S_QREAD=$(( $(qemu_io rchar) - rc0 )) S_QDISK=$(( $(qemu_io read_bytes) - rb0 ))
    S_TOOLREAD=$(tool_read "$tool")
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$tool" "$name" "$cache" "$T_WALL" "$T_CPU" \
        "$S_QCPU" "$S_QREAD" "$S_QDISK" "$S_TOOLREAD" "$(du_bytes "$sizepath")" "$(cut -d' ' -f1 /proc/loadavg)" "${DIRTY:-0}" >>"$ROWS"
    log "  $tool $name ($cache): ${T_WALL} s, cpu ${T_CPU} s, qemu cpu ${S_QCPU} s, qemu read $(mib "$S_QREAD") MiB, tool read $(mib "$S_TOOLREAD") MiB"
}
# what the tool says it read: blkvault's bytes_read; virtnbdbackup's new data files' size
tool_read() {
    case $1 in
    blkvault) json_get bytes_read <"$work/step.out" ;;
    virtnbdbackup) local n; n=$(find "$work/vnb" -name '*.data' -newer "$work/step.mark" -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }'); echo "$n" ;;
    esac
}

# blkvault's libvirt source (issue 24) when this blkvault has one. Else (BV_MODE=nbd, or forced
# with LVB_BLKVAULT=nbd) the bench drives libvirt's pull-mode job itself, as that source does, and
# blkvault reads the export with its NBD source: each backup begins a job with a new checkpoint,
# incremental since the previous one (a checkpoint made before the first backup gives that one a
# bitmap too, so that its snapshot records qemu:dirty-bitmap:backup-vda and the next one pairs
# with it), reads nbd+unix:///vda?socket=S with --dirty-bitmap=backup-vda, and ends the job.
blkvault_has_libvirt() { "$BLKVAULT" backup --help 2>&1 | grep -q 'libvirt:'; }
drop_checkpoints() {
    local c
    # leaves first: delete the newest until none is left
    while c=$(lv checkpoint-list "$DOM" --name --leaves 2>/dev/null | head -1) && [ -n "$c" ]; do
        lv checkpoint-delete "$DOM" "$c" >/dev/null || die "cannot delete checkpoint $c of $DOM"
    done
}
# the socket must be reachable by the libvirt-qemu user (a private mktemp -d is not)
SOCK=/var/lib/libvirt/qemu/$DOM-bench.sock
PULL=$work/pull-job.sh
export PULL_TIMES=$work/pull-times
cat >"$PULL" <<'SH'
#!/usr/bin/env bash
# pull-job.sh DOM SINCE NEW SOCK SCRATCH CMD...: begins libvirt's pull-mode backup of vda with
# checkpoint NEW, incremental since SINCE, runs CMD against the export, ends the job
set -euo pipefail
dom=$1 since=$2 new=$3 sock=$4 scratch=$5; shift 5
d=$(mktemp -d)
trap 'virsh -q domjobabort "$dom" >/dev/null 2>&1 || true; rm -rf "$d" "$scratch"' EXIT
cat >"$d/b.xml" <<XML
<domainbackup mode='pull'><incremental>$since</incremental><server transport='unix' socket='$sock'/>
<disks><disk name='vda' backup='yes' type='file'><scratch file='$scratch'/></disk></disks></domainbackup>
XML
echo "<domaincheckpoint><name>$new</name></domaincheckpoint>" >"$d/c.xml"
t0=$(date +%s.%N)
virsh -q backup-begin "$dom" "$d/b.xml" "$d/c.xml" >&2
t1=$(date +%s.%N)
"$@"
t2=$(date +%s.%N)
virsh -q domjobabort "$dom" >/dev/null 2>&1 || true
t3=$(date +%s.%N)
awk -v a="$t0" -v b="$t1" -v c="$t2" -v e="$t3" \
    'BEGIN { printf "job begin %.2f s, blkvault %.2f s, job end %.2f s\n", b - a, c - b, e - c }' >"${PULL_TIMES:-/dev/null}"
SH
chmod +x "$PULL"
BV_CPT=0
# bv_step ROUND STEP CACHE ARGS...: one blkvault backup of the domain
bv_step() {
    local r=$1 name=$2 cache=$3; shift 3
    local repo=$work/repo
    local b=(backup "$repo" --name=vm --key-file="$BENCH_KEY" --json -q)
    if [ "$BV_MODE" = libvirt ]; then
        step "$r" blkvault "$name" "$cache" "$repo" "$BLKVAULT" "${b[@]:0:2}" "libvirt:$DOM" "${b[@]:2}" "$@"
    else
        step "$r" blkvault "$name" "$cache" "$repo" "$PULL" "$DOM" "bvb-$BV_CPT" "bvb-$((BV_CPT + 1))" "$SOCK" \
            "$IMGDIR/scratch.qcow2" "$BLKVAULT" "${b[@]:0:2}" "nbd+unix:///vda?socket=$SOCK" "${b[@]:2}" \
            --dirty-bitmap=backup-vda "$@"
        BV_CPT=$((BV_CPT + 1))
        log "    of which: $(cat "$work/pull-times")"
    fi
}

round_blkvault() {
    local r=$1 repo=$work/repo
    DIRTY=0
    drop_checkpoints
    rm -rf "$repo"
    bv init "$repo" --key-file="$BENCH_KEY" >/dev/null 2>"$work/init.err" || die "blkvault init failed: $(cat "$work/init.err")"
    if [ "$BV_MODE" = nbd ]; then
        BV_CPT=0
        lv checkpoint-create-as "$DOM" --name bvb-0 >/dev/null
    fi
    bv_step "$r" "first backup" cold
    bv_step "$r" "whole read" cold --force-read
    bv_step "$r" "whole read" warm --force-read
    rewrite "$r"
    bv_step "$r" incremental cold
    drop_checkpoints
}

round_vnb() {
    local r=$1 out=$work/vnb
    DIRTY=0
    drop_checkpoints
    local v=("$VNB" -d "$DOM" -U "$LIBVIRT_DEFAULT_URI" -n -S "$IMGDIR")
    local c
    for c in cold warm; do
        rm -rf "$out"; touch "$work/step.mark"
        step "$r" virtnbdbackup full "$c" "$out" "${v[@]}" -l full -o "$out"
    done
    rewrite "$r"
    touch "$work/step.mark"
    step "$r" virtnbdbackup incremental cold "$out" "${v[@]}" -l inc -o "$out"
    drop_checkpoints
}

RES=$(results_file libvirt-backup)
TOOLS=()
BV_MODE=${LVB_BLKVAULT:-}
if [ -z "$BV_MODE" ]; then
    if blkvault_has_libvirt; then BV_MODE=libvirt; else BV_MODE=nbd; fi
fi
case $BV_MODE in
libvirt) NOTE_BV="its libvirt source: backup REPO libvirt:$DOM" ;;
nbd) NOTE_BV="its NBD source over libvirt's pull-mode export, the job begun and ended by the bench (this blkvault has no libvirt source: backup --help names no libvirt:DOMAIN), --dirty-bitmap=backup-vda" ;;
*) die "LVB_BLKVAULT is libvirt or nbd, not '$BV_MODE'" ;;
esac
TOOLS+=(blkvault)
if [ -x "$VNB" ] && "$VNB" --version >/dev/null 2>&1; then TOOLS+=(virtnbdbackup); VNB_VERSION=$("$VNB" --version 2>&1)
else NOTE_VNB="virtnbdbackup is not installed ($VNB; bench/peers-install.sh virtnbdbackup, or --install)"; fi
log "image $IMAGE; $PIECES pieces of $PIECE bytes per rewrite; tools: ${TOOLS[*]}; $REPS round(s)"
for r in $(seq "$REPS"); do
    order=("${TOOLS[@]}")
    [ $((r % 2)) = 0 ] && [ ${#TOOLS[@]} = 2 ] && order=("${TOOLS[1]}" "${TOOLS[0]}")
    for t in "${order[@]}"; do
        log "round $r: $t"
        case $t in blkvault) round_blkvault "$r" ;; virtnbdbackup) round_vnb "$r" ;; esac
    done
done

python3 "$BENCH_DIR/libvirt_report.py" "$ROWS" "$RES" \
    "image=$IMAGE ($(mib "$SIZE" 0) MiB virtual, $(mib "$(du_alloc "$DISK")" 0) MiB allocated as qcow2)" \
    "rewrite=$PIECES pieces of $PIECE bytes ($PERCENT%) per round" \
    "virtnbdbackup=${VNB_VERSION:-${NOTE_VNB:-}}" "blkvault=$NOTE_BV" \
    "load_end=$(load_note)"
cat "$RES"
