# SPDX-License-Identifier: LGPL-2.1-or-later
# Helpers for the nbd tier; source after tests/lib.sh. nbdkit is not built with the sanitizers
# but the plugin may be: then nbdkit runs with the sanitizer runtimes preloaded. libp11-kit
# (pulled in by nbdkit's gnutls) is preloaded after them: its constructor calls newlocale(),
# whose malloc would otherwise start ASan's lazy init inside glibc's locale lock and corrupt it
# (the plugin's first json-c parse then deadlocks).
: "${NBD_PLUGIN:?run through meson test (needs the nbdkit plugin)}"
need_cmd nbdkit nbdinfo

NBD_PRELOAD=$(ldd "$NBD_PLUGIN" | grep -o '/[^ ]*lib\(asan\|ubsan\)[^ ]*' | tr '\n' ' ' || true)
if [ -n "$NBD_PRELOAD" ]; then
    p11=$(ldd "$(command -v nbdkit)" | grep -o '/[^ ]*libp11-kit[^ ]*' || true)
    NBD_PRELOAD="$NBD_PRELOAD $p11"
fi
export BLKVAULT_NBD_PLUGIN=$NBD_PLUGIN

# "${NBD_ENV[@]}" CMD...: runs CMD (nbdkit, or blkvault serve/mount which start nbdkit) with the
# preload; ASan's leak check is off there (nbdkit is not ours). A command prefix, not a shell
# function: env execs CMD, so that `"${NBD_ENV[@]}" nbdkit ... &` sets $! to nbdkit's own pid
# (a function run in the background is a subshell, and killing it would leave nbdkit running).
NBD_ENV=(env)
[ -z "$NBD_PRELOAD" ] || NBD_ENV=(env LD_PRELOAD="$NBD_PRELOAD" ASAN_OPTIONS=detect_leaks=0:abort_on_error=1)

# Waits until a unix socket exists and the export answers (or the pid died).
wait_socket() {
    local sock=$1 pid=${2:-} i
    for i in $(seq 1 600); do
        if [ -S "$sock" ] && nbdinfo --size "nbd+unix:///?socket=$sock" >/dev/null 2>&1; then return 0; fi
        if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then return 1; fi
        sleep 0.1
    done
    return 1
}

# start_nbdkit NAME PLUGIN-ARGS...: nbdkit -f on $T/NAME.sock with the plugin, log in $T/NAME.log,
# killed at exit. Sets NBD_PID and NBD_URI. Fails the test if the export does not come up.
start_nbdkit() {
    local name=$1; shift
    local sock=$T/$name.sock
    rm -f "$sock"
    "${NBD_ENV[@]}" nbdkit -f -U "$sock" -r "$NBD_PLUGIN" "$@" 2>"$T/$name.log" &
    NBD_PID=$! NBD_NAME=$name
    on_exit "kill $NBD_PID; wait $NBD_PID"
    NBD_URI="nbd+unix:///?socket=$sock"
    wait_socket "$sock" "$NBD_PID" || { cat "$T/$name.log" >&2; die "nbdkit ($name) did not start"; }
}

# stop_server PID LOG WHAT: stops a server (SIGTERM); it must exit 0, as nbdkit and serve do on
# SIGTERM, and so must not have ended on its own with an error (or a sanitizer's report) before.
# LOG is shown when it did not.
stop_server() {
    local rc=0
    kill "$1" 2>/dev/null || true
    wait "$1" || rc=$?
    [ "$rc" = 0 ] || { cat "$2" >&2; die "$3 exited $rc when stopped"; }
}

stop_nbdkit() { stop_server "$NBD_PID" "$T/$NBD_NAME.log" "nbdkit ($NBD_NAME)"; }

# The python3 that has libnbd's bindings (python3-libnbd installs them for the system python).
nbd_python() {
    local p
    for p in python3 /usr/bin/python3; do
        if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import nbd' 2>/dev/null; then echo "$p"; return 0; fi
    done
    return 1
}

# start_serve NAME ARGS...: runs `blkvault serve ARGS...` in the background, URI in $T/NAME.out,
# log in $T/NAME.log, stopped at exit. Waits until the URI it
# prints on its first line answers; sets SERVE_PID and SERVE_URI. Returns 1 (log on stderr) if
# the server exits or does not answer within a minute.
start_serve() {
    local name=$1 i; shift
    "${NBD_ENV[@]}" "$BLKVAULT" serve "$@" >"$T/$name.out" 2>"$T/$name.log" &
    SERVE_PID=$! SERVE_NAME=$name
    on_exit "kill $SERVE_PID; wait $SERVE_PID"
    SERVE_URI=
    for i in $(seq 1 600); do
        [ -n "$SERVE_URI" ] || SERVE_URI=$(head -1 "$T/$name.out")
        if [ -n "$SERVE_URI" ] && nbdinfo --size "$SERVE_URI" >/dev/null 2>&1; then return 0; fi
        kill -0 "$SERVE_PID" 2>/dev/null || break
        sleep 0.1
    done
    cat "$T/$name.log" >&2
    return 1
}

# The nbdkit process serving for `blkvault serve` (its child).
nbdkit_of() {
    local p
    for p in $(pgrep -P "$1") "$1"; do
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = nbdkit ] && { echo "$p"; return 0; }
    done
    return 1
}
# no_tcp_listener PID: the process holds no listening TCP socket (/proc/net/tcp*, state 0A).
no_tcp_listener() {
    python3 - "$1" <<'PY'
import os, sys
pid = sys.argv[1]
inodes = set()
for fd in os.listdir(f"/proc/{pid}/fd"):
    try:
        t = os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError:
        continue
    if t.startswith("socket:["):
        inodes.add(t[8:-1])
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    for line in open(table).readlines()[1:]:
        f = line.split()
        if f[3] == "0A" and f[9] in inodes:
            sys.exit(f"listening on TCP {f[1]}")
PY
}
stop_serve() { stop_server "$SERVE_PID" "$T/$SERVE_NAME.log" "blkvault serve ($SERVE_NAME)"; }

# plain_repo REPO IMG: a repository of unencrypted, uncompressed, fixed 64 KiB chunks (the bytes
# stored for a chunk are its plaintext) holding IMG as the snapshot 'disk'.
plain_repo() {
    bv init "$1" --encryption=none --compression=none --chunker=fixed --chunk-size=64K:64K:64K >/dev/null
    bv backup "$1" "$2" --name=disk >/dev/null
}

# damage_stored REPO IMG OFFSET: inverts the byte stored in plain_repo REPO's packs for byte
# OFFSET of IMG (found by the 64 bytes from OFFSET on, which must be in one pack only).
damage_stored() {
    python3 - "$1" "$2" "$3" <<'PY'
import glob, sys
img = open(sys.argv[2], "rb").read()
off = int(sys.argv[3])
needle = img[off:off + 64]
hits = [(p, b.find(needle)) for p in glob.glob(sys.argv[1] + "/packs/*/*.pack")
        for b in [open(p, "rb").read()] if b.find(needle) >= 0]
assert len(hits) == 1, ("the data of image offset %d is in %d places" % (off, len(hits)), hits)
p, i = hits[0]
with open(p, "r+b") as f:
    f.seek(i)
    c = f.read(1)
    f.seek(i)
    f.write(bytes([c[0] ^ 0xff]))
PY
}

# A TCP port nothing listens on at this moment (the kernel's choice on 127.0.0.1).
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
