#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# blkvault serve keeps the decrypted export to its user: without options it listens on a Unix
# socket in a private 0700 directory (no TCP port at all), which another user cannot reach; TCP
# only with --listen=ADDR:PORT, and then with --tls-psk or --insecure (warned about); the passphrase is in
# the environment of neither nbdkit nor serve while it serves. Options are checked before
# anything starts, and the URI is printed only once the server listens: a busy port exits
# non-zero with nothing on standard output.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/nbd/nbd-lib.sh"
need_cmd nbdcopy openssl python3 setpriv

img=$T/disk.img
randfile "$img" 8 nbdprivate
pass='private horse battery'
repo=$T/repo
BLKVAULT_PASSPHRASE=$pass bv init "$repo" >/dev/null
BLKVAULT_PASSPHRASE=$pass bv backup "$repo" "$img" --name=disk >/dev/null

read_back() {
    nbdcopy "$1" "$T/copy.img" || die "nbdcopy of $1 failed"
    assert_same "$img" "$T/copy.img"
    rm -f "$T/copy.img"
}
# no_secret_in_env PID WHAT: /proc/PID/environ does not hold the passphrase.
no_secret_in_env() {
    ! grep -qaF "$pass" "/proc/$1/environ" || die "the passphrase is in the environment of $2 (pid $1)"
}

# --- the default: a private Unix socket ----------------------------------------------------
BLKVAULT_PASSPHRASE=$pass start_serve def "$repo" disk || die "serve without options did not start"
case $SERVE_URI in
"nbd+unix:///?socket=/"*) ;;
*) die "serve without options printed '$SERVE_URI', not a Unix socket URI" ;;
esac
sock=${SERVE_URI#*socket=}
dir=$(dirname "$sock")
assert_eq "$(stat -c '%a %U' "$dir")" "700 $(id -un)" "mode and owner of the socket's directory"
kit=$(nbdkit_of "$SERVE_PID") || die "no nbdkit process under serve"
no_tcp_listener "$kit" || die "serve without options listens on TCP"
no_secret_in_env "$kit" nbdkit
no_secret_in_env "$SERVE_PID" "blkvault serve"
read_back "$SERVE_URI"
# another user cannot reach the export
if [ "$(id -u)" = 0 ]; then
    rc=0
    setpriv --reuid=nobody --regid=nogroup --clear-groups nbdcopy "$SERVE_URI" - >"$T/nobody.out" 2>"$T/nobody.err" || rc=$?
    [ "$rc" != 0 ] && [ ! -s "$T/nobody.out" ] || die "user nobody read the export"
    grep -q "Permission denied" "$T/nobody.err" || { cat "$T/nobody.err" >&2; die "nobody's failure was not 'Permission denied'"; }
fi
stop_serve
[ ! -e "$dir" ] || die "serve left its private directory $dir behind"
# serve's own probe of the server (is it up?) leaves no error in nbdkit's log
! grep -q "error" "$T/def.log" || { cat "$T/def.log" >&2; die "an error was logged while serving"; }

# --- options are checked before anything starts ---------------------------------------------
expect_fail 2 "^error: invalid --cache 'banana' (a size such as 256M)$" "$BLKVAULT" serve "$repo" disk --cache=banana
expect_fail 2 "^error: invalid --listen port '0' (1 to 65535)$" "$BLKVAULT" serve "$repo" disk --listen=127.0.0.1:0 --insecure
expect_fail 2 "^error: invalid --listen port 'http' (1 to 65535)$" "$BLKVAULT" serve "$repo" disk --listen=127.0.0.1:http --insecure
expect_fail 2 "^error: invalid --listen address 'no such host.invalid': " "$BLKVAULT" serve "$repo" disk --listen='no such host.invalid:10999' --insecure
expect_fail 2 "^error: --socket excludes --listen" "$BLKVAULT" serve "$repo" disk --socket="$T/s" --listen='[::1]:10999' --insecure
expect_fail 2 "^error: --listen=127.0.0.1:10999 would serve the decrypted disk over TCP without TLS" "$BLKVAULT" serve "$repo" disk --listen=127.0.0.1:10999
expect_fail 2 "^error: --tls-psk and --tls-certificates exclude each other$" "$BLKVAULT" serve "$repo" disk --tls-psk="$T/x" --tls-certificates="$T"
expect_fail 1 "^error: cannot read the TLS key file '$T/none.psk': No such file or directory" \
    "$BLKVAULT" serve "$repo" disk --listen=127.0.0.1:10999 --tls-psk="$T/none.psk"
printf 'not a key\n' > "$T/bad.psk"
chmod 0600 "$T/bad.psk" # a PSK file others can read is refused before it is read (test-nbd-serve-export)
expect_fail 1 "^error: '$T/bad.psk' holds no USER:HEXKEY line (make one with 'psktool -u USER -p FILE')$" \
    "$BLKVAULT" serve "$repo" disk --listen=127.0.0.1:10999 --tls-psk="$T/bad.psk"
[ ! -s "$T/.out" ] || die "a refused serve printed a URI"

# --- a busy port: non-zero exit before any URI -----------------------------------------------
python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True); time.sleep(600)' >"$T/holder.port" &
holder=$!
on_exit "kill $holder"
wait_nonempty "$T/holder.port" "$holder" "" "the port holder did not start"
busy=$(cat "$T/holder.port")
rc=0
BLKVAULT_PASSPHRASE=$pass timeout 60 "${NBD_ENV[@]}" "$BLKVAULT" serve "$repo" disk --listen=127.0.0.1:"$busy" --insecure \
    >"$T/busy.out" 2>"$T/busy.err" || rc=$?
[ "$rc" = 1 ] || { cat "$T/busy.err" >&2; die "serve on a busy port exited $rc, expected 1"; }
[ ! -s "$T/busy.out" ] || die "serve on a busy port printed '$(cat "$T/busy.out")'"
grep -q "Address already in use" "$T/busy.err" || { cat "$T/busy.err" >&2; die "no 'Address already in use'"; }
grep -qx "error: nbdkit did not start serving (exit status 1): its message above says why (a port in use? pick another in --listen)" "$T/busy.err" ||
    { cat "$T/busy.err" >&2; die "no error line for the busy port"; }
kill "$holder"

# --- TCP without TLS, with --insecure: served, with a warning --------------------------------
started=
for attempt in 1 2 3 4 5; do
    port=$(free_port)
    if BLKVAULT_PASSPHRASE=$pass start_serve tcp "$repo" disk --listen=localhost:"$port" --insecure; then started=1; break; fi
    grep -q "Address already in use" "$T/tcp.log" || die "serve --listen=localhost:$port did not start"
done
[ -n "$started" ] || die "no free port in 5 attempts"
assert_eq "$SERVE_URI" "nbd://localhost:$port" "printed URI"
grep -qx "warning: --insecure: TCP port $port on localhost is open to every local user, unauthenticated and unencrypted" "$T/tcp.log" ||
    { cat "$T/tcp.log" >&2; die "no warning for unprotected TCP"; }
read_back "$SERVE_URI"
stop_serve

# --- TCP with a pre-shared key --------------------------------------------------------------
printf 'alice:%s\n' "$(openssl rand -hex 32)" > "$T/keys.psk"
chmod 600 "$T/keys.psk"
started=
for attempt in 1 2 3 4 5; do
    port=$(free_port)
    if BLKVAULT_PASSPHRASE=$pass start_serve tls "$repo" disk --listen=localhost:"$port" --tls-psk="$T/keys.psk"; then started=1; break; fi
    grep -q "Address already in use" "$T/tls.log" || die "serve --tls-psk did not start"
done
[ -n "$started" ] || die "no free port in 5 attempts"
assert_eq "$SERVE_URI" "nbds://alice@localhost:$port/?tls-psk-file=$T/keys.psk" "printed URI"
! grep -q "^warning:" "$T/tls.log" || die "serve --tls-psk warned: $(cat "$T/tls.log")"
read_back "$SERVE_URI"
# without the key, or with a user the file does not hold, nothing is served
nbdinfo --size "nbd://localhost:$port" >/dev/null 2>&1 && die "the TLS export answered a plaintext client"
nbdinfo --size "nbds://bob@localhost:$port/?tls-psk-file=$T/keys.psk" >/dev/null 2>&1 && die "the TLS export answered user bob"
no_secret_in_env "$(nbdkit_of "$SERVE_PID")" nbdkit
stop_serve

# --- the plugin's passphrase-fd=N, as serve and mount use it -------------------------------
start_nbdkit pfd repo="$repo" snapshot=disk passphrase-fd=3 3< <(printf '%s\n' "$pass")
read_back "$NBD_URI"
stop_nbdkit
expect_fail 1 "passphrase-fd=99 is not an open file descriptor above 2" \
    "${NBD_ENV[@]}" nbdkit -f -U "$T/x.sock" -r "$NBD_PLUGIN" repo="$repo" snapshot=disk passphrase-fd=99
head -c 5000 /dev/zero | tr '\0' x > "$T/long"
expect_fail 1 "cannot read the passphrase from passphrase-fd=: File too large" timeout 60 \
    "${NBD_ENV[@]}" nbdkit -f -U "$T/x.sock" -r "$NBD_PLUGIN" repo="$repo" snapshot=disk passphrase-fd=3 3<"$T/long"
printf 'x' > "$T/pf"
expect_fail 1 "passphrase-file=, passphrase-fd= and key-file= exclude each other" \
    "${NBD_ENV[@]}" nbdkit -f -U "$T/x.sock" -r "$NBD_PLUGIN" repo="$repo" snapshot=disk passphrase-fd=3 \
    passphrase-file="$T/pf" 3</dev/null
echo ok
