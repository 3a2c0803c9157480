#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# `blkvault serve --export=NAME` run by hand, outside systemd (issue 21, finding 3): it used to
# exec nbdkit without a socket to take, and nbdkit then served the decrypted disk on every
# address, TCP port 10809, without TLS or a word. Now it serves as `serve REPO SNAPSHOT` does: a
# private Unix socket and its URI by default, nothing on TCP, which nbdinfo against the machine's
# network address shows; TCP only with --listen=ADDR:PORT, and then only with TLS (a pre-shared
# key, X.509 certificates) or --insecure spelled out.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/nbd/nbd-lib.sh"
need_cmd nbdcopy openssl python3 ip

# The machine's own non-loopback IPv4 address; without one, a network namespace of our own with
# a dummy interface holding a documentation address (needs root).
addr=$(ip -4 -o addr show scope global | awk '{ sub("/.*", "", $4); print $4; exit }')
if [ -z "$addr" ]; then
    [ -z "${BV_NETNS:-}" ] || die "no address in our own network namespace"
    [ "$(id -u)" = 0 ] || skip "no non-loopback IPv4 address, and not root to make a network namespace with one"
    need_cmd unshare
    exec unshare --net env BV_NETNS=1 bash -c 'ip link set lo up && ip link add bvdummy0 type dummy &&
        ip addr add 198.51.100.7/24 dev bvdummy0 && ip link set bvdummy0 up && exec bash "$0"' "$0"
fi

img=$T/disk.img
randfile "$img" 4 serve-export
repo=$T/repo
printf 'export horse battery\n' >"$T/pass"
chmod 600 "$T/pass"
bv init "$repo" --passphrase-file="$T/pass" >/dev/null
bv backup "$repo" "$img" --name=disk --passphrase-file="$T/pass" >/dev/null
conf=$T/blkvault.conf
printf '[export disk]\nrepository = %s\nsnapshot = disk\npassphrase-file = %s\n' "$repo" "$T/pass" >"$conf"

read_back() {
    nbdcopy "$1" "$T/copy.img" || die "nbdcopy of $1 failed"
    assert_same "$img" "$T/copy.img"
    rm -f "$T/copy.img"
}
# nothing_at URI WHAT: no NBD server answers at URI
nothing_at() {
    if nbdinfo --size "$1" >"$T/reach.out" 2>&1; then
        die "$2: nbdinfo read the export at $1 (size $(cat "$T/reach.out"))"
    fi
}

# --- by hand, no options: a private Unix socket, nothing on the network -------------------------
rc=0
start_serve exp --export=disk --config="$conf" || rc=$?
# nbdkit's own default would be every address, port 10809
nothing_at "nbd://$addr:10809" "serve --export by hand"
[ "$rc" = 0 ] || die "serve --export by hand printed no URI that answers"
case $SERVE_URI in
"nbd+unix:///?socket=/"*) ;;
*) die "serve --export by hand printed '$SERVE_URI', not a Unix socket URI" ;;
esac
assert_eq "$(stat -c %a "$(dirname "${SERVE_URI#*socket=}")")" 700 "mode of the socket's directory"
no_tcp_listener "$(nbdkit_of "$SERVE_PID")" || die "serve --export by hand listens on TCP"
read_back "$SERVE_URI"
grep -q "^serving export disk: snapshot [0-9a-f]\{8\} of '$repo' read-only; stop with Ctrl-C$" "$T/exp.log" ||
    { cat "$T/exp.log" >&2; die "no 'serving' line"; }
stop_serve

# --- TCP only with an explicit address, and TLS or --insecure -------------------------------------
port=$(free_port)
expect_fail 2 "^error: --listen=127.0.0.1:$port would serve the decrypted disk over TCP without TLS: add --tls-psk=FILE or --tls-certificates=DIR, or --insecure to serve it unencrypted and unauthenticated$" \
    "$BLKVAULT" serve --export=disk --config="$conf" --listen=127.0.0.1:"$port"
expect_fail 2 "^error: invalid --listen '$port' (ADDR:PORT, \[ADDR\]:PORT for IPv6: an explicit address)$" \
    "$BLKVAULT" serve --export=disk --config="$conf" --listen="$port" --insecure
expect_fail 2 "^error: invalid --listen '::1:$port' " \
    "$BLKVAULT" serve --export=disk --config="$conf" --listen="::1:$port" --insecure
expect_fail 2 "^error: invalid --listen port '0' (1 to 65535)$" \
    "$BLKVAULT" serve --export=disk --config="$conf" --listen=127.0.0.1:0 --insecure
expect_fail 2 "^error: --insecure goes with --listen=ADDR:PORT (a Unix socket is private without it)$" \
    "$BLKVAULT" serve --export=disk --config="$conf" --insecure
expect_fail 2 "^error: --insecure excludes --tls-psk and --tls-certificates$" \
    "$BLKVAULT" serve --export=disk --config="$conf" --listen=127.0.0.1:"$port" --insecure --tls-psk="$T/x"
expect_fail 2 "^error: --socket excludes --listen$" \
    "$BLKVAULT" serve --export=disk --config="$conf" --listen=127.0.0.1:"$port" --socket="$T/s" --insecure
expect_fail 2 "^error: systemd passed a socket: where the export listens is its socket unit's to say" \
    bash -c 'LISTEN_PID=$$ LISTEN_FDS=1 exec "$@"' - "$BLKVAULT" serve --export=disk --config="$conf" --tls-psk="$T/x"
# activated FAMILY CMD...: CMD with a listening socket of FAMILY (tcp, unix) as fd 3, passed as
# systemd passes one (LISTEN_PID, LISTEN_FDS)
activated() {
    local family=$1; shift
    FAMILY=$family SOCK="$T/activated.sock" timeout 30 python3 -c 'import os, socket, sys
if os.environ["FAMILY"] == "tcp":
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
else:
    s = socket.socket(socket.AF_UNIX)
    s.bind(os.environ["SOCK"])
s.listen()
if s.fileno() != 3:
    os.dup2(s.fileno(), 3)
os.set_inheritable(3, True)
os.environ.update(LISTEN_PID=str(os.getpid()), LISTEN_FDS="1")
os.execvp(sys.argv[1], sys.argv[1:])' "$@"
}
# a TCP socket passed as systemd passes one (a ListenStream=ADDR:PORT drop-in of the socket unit):
# nbdkit served the decrypted disk on it without TLS (the attack after issue 21's fixes); now only
# with --insecure in the service's ExecStart (timeout: before the fix, nbdkit served until killed).
expect_fail 1 "^error: systemd passed a socket that is not a Unix socket (a TCP ListenStream=?): the export would serve the decrypted disk without TLS; add --insecure" \
    activated tcp "$BLKVAULT" serve --export=disk --config="$conf"
rm -f "$T/activated.sock"
expect_fail 2 "^error: --insecure goes with a TCP socket (a Unix socket is private without it)$" \
    activated unix "$BLKVAULT" serve --export=disk --config="$conf" --insecure
expect_fail 1 "^error: no export 'other' in the configuration (an \[export other\] section)$" \
    "$BLKVAULT" serve --export=other --config="$conf"

# start_tcp NAME ARGS...: start_serve on a free port of 127.0.0.1 (tried five times: another test
# may take the port first); sets port
start_tcp() {
    local name=$1 attempt; shift
    for attempt in 1 2 3 4 5; do
        port=$(free_port)
        start_serve "$name" --export=disk --config="$conf" --listen=127.0.0.1:"$port" "$@" && return 0
        grep -q "Address already in use" "$T/$name.log" || die "serve --listen=127.0.0.1:$port $* did not start"
    done
    die "no free port in 5 attempts"
}

# --insecure: served on 127.0.0.1 only, with a warning
start_tcp insecure --insecure
assert_eq "$SERVE_URI" "nbd://127.0.0.1:$port" "printed URI with --insecure"
grep -qx "warning: --insecure: TCP port $port on 127.0.0.1 is open to every local user, unauthenticated and unencrypted" "$T/insecure.log" ||
    { cat "$T/insecure.log" >&2; die "no warning for --insecure"; }
read_back "$SERVE_URI"
nothing_at "nbd://$addr:$port" "--listen=127.0.0.1:$port"
stop_serve

# a pre-shared key
printf 'alice:%s\n' "$(openssl rand -hex 32)" >"$T/keys.psk"
# one that every user may read is refused, as the configuration's key files are
chmod 644 "$T/keys.psk"
expect_fail 1 "^error: the TLS key file '$T/keys.psk': secret file has mode 0644: readable by others than its owner (chmod 0600 or 0400; group read only for group blkvault); refused$" \
    timeout 30 "$BLKVAULT" serve --export=disk --config="$conf" --listen=127.0.0.1:"$(free_port)" --tls-psk="$T/keys.psk"
chmod 600 "$T/keys.psk"
start_tcp psk --tls-psk="$T/keys.psk"
assert_eq "$SERVE_URI" "nbds://alice@127.0.0.1:$port/?tls-psk-file=$T/keys.psk" "printed URI with --tls-psk"
! grep -q "^warning:" "$T/psk.log" || die "serve --tls-psk warned: $(cat "$T/psk.log")"
read_back "$SERVE_URI"
nothing_at "nbd://127.0.0.1:$port" "a plaintext client of the --tls-psk export"
stop_serve

# X.509: a CA, and a certificate for 127.0.0.1 signed by it
certs=$T/certs
mkdir "$certs"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$T/ca-key.pem" -out "$certs/ca-cert.pem" -days 2 \
    -subj /CN=blkvault-test-ca 2>/dev/null || die "openssl: no CA"
openssl req -newkey rsa:2048 -nodes -keyout "$certs/server-key.pem" -out "$T/server.csr" -subj /CN=127.0.0.1 \
    2>/dev/null || die "openssl: no server key"
printf 'subjectAltName = IP:127.0.0.1\n' >"$T/san.cnf"
openssl x509 -req -in "$T/server.csr" -CA "$certs/ca-cert.pem" -CAkey "$T/ca-key.pem" -CAcreateserial \
    -out "$certs/server-cert.pem" -days 2 -extfile "$T/san.cnf" 2>/dev/null || die "openssl: no server certificate"
chmod 600 "$certs/server-key.pem"
start_tcp x509 --tls-certificates="$certs"
assert_eq "$SERVE_URI" "nbds://127.0.0.1:$port/?tls-certificates=$certs" "printed URI with --tls-certificates"
read_back "$SERVE_URI"
nothing_at "nbd://127.0.0.1:$port" "a plaintext client of the --tls-certificates export"
stop_serve
mkdir "$T/nocerts"
expect_fail 1 "^error: cannot read '$T/nocerts/server-cert.pem' (--tls-certificates needs server-cert.pem, server-key.pem and ca-cert.pem): No such file or directory$" \
    "$BLKVAULT" serve --export=disk --config="$conf" --listen=127.0.0.1:1 --tls-certificates="$T/nocerts"
echo ok
