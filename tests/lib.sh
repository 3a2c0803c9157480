# SPDX-License-Identifier: LGPL-2.1-or-later
# Shared helpers for shell tests. Source it first: `. "$SOURCE_ROOT/tests/lib.sh"`.
# Exit codes: 0 pass, 1 fail, 77 skip (always with a reason on stderr).
set -euo pipefail

: "${SOURCE_ROOT:?run through meson test}"
: "${BUILD_ROOT:?run through meson test}"
: "${BLKVAULT:=$BUILD_ROOT/src/cli/blkvault}"

skip() { echo "SKIP: $*" >&2; exit 77; }
die() { echo "FAIL: $*" >&2; exit 1; }
# grep_q ARGS...: grep -q that reads all of its input. grep -q stops at the first match, and a
# writer of several lines is then killed by SIGPIPE, which fails `CMD | grep -q` under pipefail
# although the line matched (virsh under load, seen in CI)
grep_q() { grep "$@" >/dev/null; }
need_cmd() { for c in "$@"; do command -v "$c" >/dev/null 2>&1 || skip "$c is not installed"; done; }
need_root() { [ "$(id -u)" = 0 ] || skip "needs root (loop devices, mounts)"; }

# A scratch directory removed at exit (also on failure); cleanup hooks run first, last-in first-out.
T=$(mktemp -d "${TMPDIR:-/var/tmp}/bvtest.XXXXXX")
_cleanups=()
on_exit() { _cleanups=("$*" "${_cleanups[@]}"); }
_run_cleanups() {
    local rc=$?
    for c in "${_cleanups[@]}"; do eval "$c" >/dev/null 2>&1 || true; done
    rm -rf "$T"
    exit $rc
}
trap _run_cleanups EXIT
# Runs of the appliance record their state here, never in the host's /var/lib/blkvault.
export BLKVAULT_STATE_DIR=$T/state

# attach_loop VAR LOSETUP-ARGS...: attaches a loop device and sets VAR to it; it is detached at
# exit. detach_loop DEV detaches it earlier (retried: a device a filesystem just released can be
# busy for a moment). Both detach DEV only while it is still backed by the file attach_loop gave
# it: once this test (or the program it tests) has let the device go, its number may be another
# test's, and detaching that would pull the device from under the other test.
declare -A _loop_file=()
detach_loop() {
    local back
    back=$(losetup -n -O BACK-FILE "$1" 2>/dev/null) || return 0
    [ -n "$back" ] && [ "$back" = "${_loop_file[$1]:-}" ] || return 0
    for _ in 1 2 3 4 5; do losetup -d "$1" 2>/dev/null && break; sleep 0.5; done
    # a device still open (another test's blkid scan of every device, udev) is only marked to go
    # at its last close: wait until it is gone, or what follows finds it still attached
    for _ in $(seq 1 100); do
        [ "$(cat "/sys/block/${1#/dev/}/loop/backing_file" 2>/dev/null)" = "$back" ] || return 0
        sleep 0.1
    done
    return 1
}
attach_loop() {
    local _l
    _l=$(losetup -f --show "${@:2}") || die "cannot attach a loop device (losetup ${*:2})"
    _loop_file[$_l]=$(losetup -n -O BACK-FILE "$_l")
    on_exit "detach_loop $_l"
    printf -v "$1" %s "$_l"
}

# loop_partition VAR DISK N NODE: partition N of the loop device DISK (which carries a partition
# table) as the block node NODE, its kernel name (loop0p2) in VAR. This kernel reads no partition
# table itself: partx adds them, and they stay when the device is detached, so stale ones of the
# device number's last user are dropped first, and ours at exit. Without udev no node appears in
# /dev: NODE is made with mknod.
loop_partition() {
    local _p _maj _min
    on_exit "partx -d '$2'"
    partx -d "$2" 2>/dev/null || true
    partx -a "$2" 2>/dev/null || true
    _p=$(basename "$2")p$3
    for _ in $(seq 1 50); do [ -e "/sys/class/block/$_p/dev" ] && break; sleep 0.1; done
    [ -e "/sys/class/block/$_p/dev" ] || die "the kernel made no partition $_p"
    IFS=: read -r _maj _min <"/sys/class/block/$_p/dev"
    mknod "$4" b "$_maj" "$_min"
    printf -v "$1" %s "$_p"
}

# loop_target VAR NAME SIZE ARGS...: a loop device of SIZE (on $T/NAME.img) made the target NAME
# by `blkvault target format --no-luks` with ARGS (--fs, --config, ...), its key in
# $T/keys/NAME.key; VAR is set to the device.
loop_target() {
    local _dev
    truncate -s "$3" "$T/$2.img"
    attach_loop _dev "$T/$2.img"
    bv target format "$_dev" --name="$2" --no-luks --key-dir="$T/keys" "${@:4}" >/dev/null
    printf -v "$1" %s "$_dev"
}

# mount_small_fs DIR SIZE: a new ext4 filesystem of SIZE in the image DIR.img, mounted on DIR
# until exit: a target small enough for a test to fill.
mount_small_fs() {
    truncate -s "$2" "$1.img"
    mkfs.ext4 -q -F "$1.img"
    mkdir -p "$1"
    mount -o loop "$1.img" "$1" || die "cannot mount $1.img (ext4) on a loop device"
    on_exit "umount -l '$1'"
}

# stall_start AFTER ERR CMD...: runs CMD in the background under tests/fault/stall.so, which
# holds it inside a write once AFTER bytes are written (with BV_STALL_WRITE=1 in the environment,
# write(2) counts too); CMD's stderr goes to ERR. Returns once CMD is held there, with its pid
# in $pid (killed at exit); `touch "$T/gate"` lets it go on.
stall_start() {
    local after=$1 err=$2; shift 2
    [ -n "${STALL:-}" ] && [ -f "$STALL" ] || die "STALL (tests/fault/stall.so) is not built"
    [ -n "${_stall_cleanup:-}" ] || { on_exit 'kill -KILL ${pid:-}'; _stall_cleanup=1; }
    rm -f "$T/gate" "$T/gate.waiting"
    env LD_PRELOAD="$STALL" BV_STALL_AFTER="$after" BV_STALL_GATE="$T/gate" \
        ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" "$@" 2>"$err" &
    pid=$!
    while [ ! -e "$T/gate.waiting" ]; do
        kill -0 $pid 2>/dev/null || { cat "$err" >&2; die "'$*' ended before it was held in a write after $after bytes"; }
        sleep 0.05
    done
}

# Runs blkvault; the test's repositories are unencrypted unless a test sets a secret.
# wait_nonempty FILE PID LOG WHAT [SECONDS]: waits until FILE holds bytes while process PID lives;
# when PID exits first or SECONDS (default 10) pass, prints LOG (if not "") and dies with WHAT.
wait_nonempty() {
    local file=$1 pid=$2 log=$3 what=$4 i
    for i in $(seq 1 $(( ${5:-10} * 10 ))); do
        [ -s "$file" ] && return 0
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    [ -s "$file" ] && return 0
    [ -z "$log" ] || cat "$log" >&2
    die "$what"
}

bv() { "$BLKVAULT" "$@"; }

# expect_fail EXIT_CODE PATTERN CMD...: CMD must exit with EXIT_CODE and print PATTERN on stderr.
expect_fail() {
    local want=$1 pattern=$2; shift 2
    local rc=0
    "$@" >"$T/.out" 2>"$T/.err" || rc=$?
    [ "$rc" = "$want" ] || { cat "$T/.err" >&2; die "'$*' exited $rc, expected $want"; }
    grep -q -- "$pattern" "$T/.err" || { cat "$T/.err" >&2; die "'$*' did not say '$pattern'"; }
}

assert_same() { cmp "$1" "$2" || die "$1 and $2 differ"; }
assert_eq() { [ "$1" = "$2" ] || die "${3:-values differ}: '$1' != '$2'"; }

# huge_dir VAR: sets VAR to a directory on a filesystem that allows 4 EiB sparse files: $T's,
# else a private one on tmpfs (/dev/shm; ext4 stops at 16 TiB), removed at exit. Skips if none.
huge_dir() {
    local _d=$T
    if ! truncate -s 4E "$_d/.huge" 2>/dev/null; then
        [ -d /dev/shm ] || skip "no filesystem here allows 4 EiB files"
        _d=$(mktemp -d /dev/shm/bvtest.XXXXXX)
        on_exit "rm -rf '$_d'"
        truncate -s 4E "$_d/.huge" 2>/dev/null || skip "neither $T nor /dev/shm allows 4 EiB files"
    fi
    rm -f "$_d/.huge"
    printf -v "$1" %s "$_d"
}

# Allocated (not apparent) size of a file in bytes.
allocated() { echo $(( $(stat -c %b "$1") * $(stat -c %B "$1") )); }

# flip_byte FILE OFFSET: inverts every bit of one byte in place (writing a fixed value instead
# would leave the byte as it was 1 time in 256).
flip_byte() {
    local b
    b=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
    [ -n "$b" ] || die "flip_byte: $1 has no byte at offset $2"
    printf "\\$(printf '%03o' $((b ^ 255)))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}
# Deterministic random data: randfile PATH MIB SEED
randfile() { head -c "$(( $2 * 1048576 ))" /dev/zero | openssl enc -aes-128-ctr -pass "pass:$3" -nosalt -pbkdf2 > "$1" 2>/dev/null; }
