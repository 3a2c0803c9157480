# SPDX-License-Identifier: LGPL-2.1-or-later
# Core dumps for the tests that search them for keys; source after tests/lib.sh. Cores go where
# kernel.core_pattern says: a plain relative pattern writes into the dying process's directory,
# $T/cwd, which becomes the test's directory; a pipe or an absolute pattern is replaced for the
# test's duration by a file in $T/cwd (root only) and restored at exit. A control process that
# dies of SIGSEGV must leave a core, so that "no core" from blkvault means something.
need_cmd python3 openssl

_pattern=$(cat /proc/sys/kernel/core_pattern)
mkdir -p "$T/cwd"
if [[ $_pattern == /* || $_pattern == \|* ]]; then
    [ "$(id -u)" = 0 ] || skip "kernel.core_pattern is '$_pattern' and only root may point it at a file"
    on_exit "printf '%s\n' '$_pattern' > /proc/sys/kernel/core_pattern"
    echo "$T/cwd/core.%p" > /proc/sys/kernel/core_pattern
fi
ulimit -c unlimited
# ASan turns core dumps off (RLIMIT_CORE 0) and handles SIGSEGV itself unless told otherwise
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:disable_coredump=0:handle_segv=0"
cd "$T/cwd"
cores() { find "$T/cwd" -maxdepth 1 -name 'core*' -type f; }

# kill_when PROGRAM PID: waits until PID runs PROGRAM (not the shell that forked it), then
# sends it SIGSEGV and waits for it to die
kill_when() {
    while [ "$(cat "/proc/$2/comm" 2>/dev/null)" != "$1" ]; do
        kill -0 "$2" 2>/dev/null || die "$1 ($2) exited early"
        sleep 0.05
    done
    kill -SEGV "$2"
    ! wait "$2" || die "$1 survived SIGSEGV"
}

sleep 60 &
kill_when sleep $!
[ -n "$(cores)" ] || skip "this environment writes no core for a crashing process (core_pattern '$_pattern')"
rm -f "$T/cwd"/core*

# check_cores REPO PASSPHRASE WHAT: passes when no core was written or none holds key material
check_cores() {
    local found
    mapfile -t found < <(cores)
    if [ ${#found[@]} -eq 0 ]; then
        echo "ok: $3 left no core"
        return 0
    fi
    python3 "$SOURCE_ROOT/tests/keys.py" "$1" "$2" "${found[@]}" || die "$3: see above"
    echo "ok: $3 left a core without key material"
    rm -f "${found[@]}"
}
