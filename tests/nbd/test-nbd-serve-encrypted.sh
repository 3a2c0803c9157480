#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# blkvault serve on encrypted repositories: the secret from --passphrase-file, --key-file and
# $BLKVAULT_PASSPHRASE reaches nbdkit and the export reads back bit-exact, on a Unix socket and on
# a TCP port (--listen=localhost:N --insecure, the printed nbd://localhost:N URI); a wrong or missing secret fails
# before nbdkit starts, with exit status 3 and a message that says so.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/nbd/nbd-lib.sh"
need_cmd nbdcopy openssl python3

# 20 MiB: random data, a zero run written out, a hole at the end
img=$T/disk.img
randfile "$T/rand" 16 nbdserve
cp "$T/rand" "$img"
dd if=/dev/zero of="$img" bs=1M seek=4 count=3 conv=notrunc status=none
truncate -s 20M "$img"

pass='correct horse'
printf '%s\n' "$pass" > "$T/pass"
printf 'wrong horse\n' > "$T/wrong-pass"
head -c 64 "$T/rand" > "$T/key"
head -c 64 /dev/zero > "$T/wrong-key"

erepo=$T/erepo
BLKVAULT_PASSPHRASE=$pass bv init "$erepo" >/dev/null
bv backup "$erepo" "$img" --name=disk --passphrase-file="$T/pass" >/dev/null
krepo=$T/krepo
bv init "$krepo" --key-file="$T/key" >/dev/null
bv backup "$krepo" "$img" --name=disk --key-file="$T/key" >/dev/null

# read_back NAME: the served export, copied with nbdcopy, is the image
read_back() {
    assert_eq "$(nbdinfo --size "$SERVE_URI")" $((20 << 20)) "export size ($1)"
    nbdcopy "$SERVE_URI" "$T/$1.img"
    assert_same "$img" "$T/$1.img"
    rm -f "$T/$1.img"
}

# on a Unix socket, each way of giving the secret
start_serve pf "$erepo" disk --socket="$T/pf.sock" --passphrase-file="$T/pass" || die "serve --passphrase-file did not start"
assert_eq "$SERVE_URI" "nbd+unix:///?socket=$T/pf.sock" "printed URI"
grep -q "read-only" "$T/pf.log" || die "serve did not say the export is read-only"
read_back pf
stop_serve

start_serve kf "$krepo" disk --socket="$T/kf.sock" --key-file="$T/key" || die "serve --key-file did not start"
read_back kf
stop_serve

BLKVAULT_PASSPHRASE=$pass start_serve env "$erepo" disk --socket="$T/env.sock" || die "serve with \$BLKVAULT_PASSPHRASE did not start"
read_back env
stop_serve

# on TCP: a port that was free a moment ago (another process may take it first: try again then)
started=
for attempt in 1 2 3 4 5; do
    port=$(free_port)
    if start_serve tcp "$erepo" disk --listen=localhost:"$port" --insecure --passphrase-file="$T/pass" 2>"$T/tcp.err"; then
        started=1
        break
    fi
    grep -qi "address already in use" "$T/tcp.log" || { cat "$T/tcp.log" >&2; die "serve --listen=localhost:$port did not start"; }
done
[ -n "$started" ] || die "serve --listen found no free port in 5 attempts"
assert_eq "$SERVE_URI" "nbd://localhost:$port" "printed URI"
# it listens on loopback addresses only (/proc/net/tcp*: state 0A is LISTEN)
python3 - "$port" <<'PY' || die "serve --listen=localhost:PORT listens beyond localhost"
import sys
port, found = int(sys.argv[1]), []
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    for line in open(table).readlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        addr, p = local.rsplit(":", 1)
        if state == "0A" and int(p, 16) == port:
            found.append(addr)
loopback = {"0100007F", "00000000000000000000000001000000"}
assert found and set(found) <= loopback, found
PY
read_back tcp
SERVE_URI=nbd://127.0.0.1:$port read_back tcp-ip
stop_serve

# a wrong or missing secret: exit 3 before nbdkit starts, with a message that says so (the timeout
# turns a server that starts anyway into a failure rather than a hang)
wrong="cannot open repository '$erepo': wrong passphrase or key"
expect_fail 3 "$wrong" timeout 60 "$BLKVAULT" serve "$erepo" disk --socket="$T/bad1.sock" --passphrase-file="$T/wrong-pass"
BLKVAULT_PASSPHRASE='wrong horse' expect_fail 3 "$wrong" timeout 60 "$BLKVAULT" serve "$erepo" disk --socket="$T/bad2.sock"
expect_fail 3 "cannot open repository '$krepo': wrong passphrase or key" \
    timeout 60 "$BLKVAULT" serve "$krepo" disk --socket="$T/bad3.sock" --key-file="$T/wrong-key"
port=$(free_port)
expect_fail 3 "$wrong" timeout 60 "$BLKVAULT" serve "$erepo" disk --listen=localhost:"$port" --insecure --passphrase-file="$T/wrong-pass"
expect_fail 3 "the repository is encrypted: set BLKVAULT_PASSPHRASE" \
    timeout 60 env -u BLKVAULT_PASSPHRASE "$BLKVAULT" serve "$erepo" disk --socket="$T/bad4.sock" </dev/null
for s in bad1 bad2 bad3 bad4; do
    [ ! -e "$T/$s.sock" ] || die "serve with a wrong secret created its socket $s.sock"
done
nbdinfo --size "nbd://127.0.0.1:$port" >/dev/null 2>&1 && die "serve with a wrong passphrase listens on port $port"
echo ok
