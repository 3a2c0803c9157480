#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A client that hangs up with requests in flight must not take the export down for the others.
# nbdcopy stops at the first error reply (here: a damaged chunk) and closes its connections while
# nbdkit still has replies to send; nbdkit 1.32 then aborted ("raw_send_socket: Assertion
# `sock >= 0' failed") whenever one connection had several worker threads. Here nbdcopy is made
# to fail that way again and again while a second client reads every undamaged range: its reads
# all complete bit-exact, the server is still serving afterwards, and a server killed with -9
# leaves a socket file that does not stop the next `serve` on the same --socket.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/nbd/nbd-lib.sh"
need_cmd nbdcopy openssl
PY=$(nbd_python) || skip "python3-libnbd is not installed"

img=$T/disk.img
randfile "$img" 32 nbdhangup
repo=$T/repo
plain_repo "$repo" "$img"
# damage the chunk at image offset 24 MiB: nbdcopy meets it after many requests are queued
target=$((24 << 20))
damage_stored "$repo" "$img" $((target + 10))

sock=$T/hang.sock
start_serve hang "$repo" disk --socket="$sock" || die "serve did not start"

# the second client: reads everything but the damaged chunk, pass after pass, until told to stop
"$PY" - "$img" "$SERVE_URI" "$target" "$T/stop" >"$T/reader.out" 2>&1 <<'PY' &
import os, sys, nbd
img = open(sys.argv[1], "rb").read()
target, stop = int(sys.argv[3]), sys.argv[4]
h = nbd.NBD()
h.connect_uri(sys.argv[2])
passes = 0
while passes == 0 or not os.path.exists(stop):
    for off in range(0, len(img), 1 << 20):
        if off <= target < off + (1 << 20):
            continue
        assert h.pread(1 << 20, off) == img[off:off + (1 << 20)], ("wrong data at", off)
    passes += 1
h.shutdown()
print("passes", passes)
PY
reader=$!
on_exit "kill $reader"

for i in $(seq 1 12); do
    rc=0
    nbdcopy "$SERVE_URI" null: 2>"$T/copy$i.err" || rc=$?
    [ "$rc" != 0 ] || die "nbdcopy of the damaged export succeeded"
    grep -q "Input/output error" "$T/copy$i.err" || { cat "$T/copy$i.err" >&2; die "nbdcopy did not fail with EIO"; }
    kill -0 "$SERVE_PID" 2>/dev/null || { cat "$T/hang.log" >&2; die "the server died after nbdcopy $i hung up"; }
done
touch "$T/stop"
rc=0
wait "$reader" || rc=$?
[ "$rc" = 0 ] || { cat "$T/reader.out" "$T/hang.log" >&2; die "the second client's reads failed"; }
grep -q "^passes [1-9]" "$T/reader.out" || die "the second client did not complete a pass"
! grep -q "Assertion" "$T/hang.log" || { cat "$T/hang.log" >&2; die "nbdkit hit an assertion"; }
# and a new client is still served
nbdcopy "$SERVE_URI" "$T/again.img" 2>/dev/null && die "the damaged export copied without an error"
assert_eq "$(nbdinfo --size "$SERVE_URI")" $((32 << 20)) "export size after the hang-ups"

# a server killed with -9 leaves its socket file behind: the next serve on it still starts
nbdkit_pid=$(pgrep -x nbdkit -P "$SERVE_PID" || echo "$SERVE_PID")
# (its private directory, holding the pid file, is left behind too: the next serve removes it)
pid_dir=$(tr '\0' '\n' < "/proc/$nbdkit_pid/cmdline" | sed -n '/^--pidfile$/{n;p}' | xargs -r dirname)
on_exit "rm -rf '$pid_dir'"
kill -9 "$nbdkit_pid" "$SERVE_PID" 2>/dev/null || true
wait "$SERVE_PID" 2>/dev/null || true
for w in $(seq 100); do kill -0 "$nbdkit_pid" 2>/dev/null || break; sleep 0.1; done
[ -S "$sock" ] || die "the killed server left no socket file (the test needs one)"
start_serve again "$repo" disk --socket="$sock" || die "serve on the stale socket of a killed server did not start"
assert_eq "$SERVE_URI" "nbd+unix:///?socket=$sock" "printed URI"
[ -n "$pid_dir" ] && [ ! -e "$pid_dir" ] || die "the killed serve's private directory '$pid_dir' was not removed"
"$PY" - "$img" "$SERVE_URI" <<'PY' || die "read after restart on the stale socket failed"
import sys, nbd
img = open(sys.argv[1], "rb").read()
h = nbd.NBD()
h.connect_uri(sys.argv[2])
assert h.pread(1 << 20, 0) == img[:1 << 20]
h.shutdown()
PY
# a socket a live server answers on is not taken over
expect_fail 1 "'$sock' is in use by a running server" "${NBD_ENV[@]}" "$BLKVAULT" serve "$repo" disk --socket="$sock"
[ ! -s "$T/.out" ] || die "serve on a busy socket printed a URI: $(cat "$T/.out")"
# nor is a file that is no socket removed
echo precious > "$T/file.sock"
expect_fail 1 "'$T/file.sock' exists and is not a socket" "${NBD_ENV[@]}" "$BLKVAULT" serve "$repo" disk --socket="$T/file.sock"
assert_eq "$(cat "$T/file.sock")" precious "the file given as --socket"
stop_serve
[ ! -e "$sock" ] || die "serve left its socket $sock behind"
echo ok
