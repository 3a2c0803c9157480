#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# serve prints URIs that each client takes (issue 25): nbd+unix:///?socket=PATH for qemu and the
# libnbd tools on standard output, the nbd://?socket=PATH form libguestfs wants on standard error;
# --uri-for=libguestfs swaps them. libguestfs itself (guestfish, as a plain user) reads a file from
# the export through the printed URI: slow without KVM (it boots its appliance), once. (virt-cat
# wants an operating system on the disk; guestfish mounts the filesystem it is told to.)
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/nbd/nbd-lib.sh"
need_cmd mkfs.ext4 guestfish setpriv

mkdir "$T/tree"
echo "hello from the snapshot" >"$T/tree/hello"
mkfs.ext4 -q -L guestfs -d "$T/tree" "$T/fs.img" 16M
repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
bv backup "$repo" "$T/fs.img" --name=fs -q >/dev/null

sock=$T/s.sock
start_serve plain "$repo" fs --socket="$sock" || die "serve did not start"
assert_eq "$SERVE_URI" "nbd+unix:///?socket=$sock" "the URI on standard output"
grep -Fxq "for libguestfs (guestfish -a, virt-ls -a, virt-cat -a): nbd://?socket=$sock" "$T/plain.log" ||
    { cat "$T/plain.log" >&2; die "serve did not name libguestfs's URI"; }
stop_server "$SERVE_PID" "$T/plain.log" "serve"

expect_fail 2 "^error: invalid --uri-for 'guestfs' (qemu or libguestfs)$" bv serve "$repo" fs --uri-for=guestfs

# --uri-for=libguestfs: that form on standard output, the other one on standard error
chmod 755 "$T"
chmod -R o+rX "$repo"
mkdir -m 777 "$T/run"
sock=$T/run/g.sock
"${NBD_ENV[@]}" "$BLKVAULT" serve "$repo" fs --socket="$sock" --uri-for=libguestfs >"$T/g.out" 2>"$T/g.log" &
pid=$!
on_exit "kill $pid; wait $pid"
wait_nonempty "$T/g.out" "$pid" "$T/g.log" "serve --uri-for=libguestfs printed no URI" 60
uri=$(head -1 "$T/g.out")
assert_eq "$uri" "nbd://?socket=$sock" "the URI for libguestfs"
grep -Fxq "for qemu and the libnbd tools (nbdinfo, nbdcopy, nbdfuse): nbd+unix:///?socket=$sock" "$T/g.log" ||
    { cat "$T/g.log" >&2; die "serve --uri-for=libguestfs did not name the other URI"; }
nbdinfo --size "nbd+unix:///?socket=$sock" >/dev/null || die "the export does not answer"
chmod 666 "$sock"
# libguestfs as a plain user, through the printed URI (its own appliance; no root, no KVM needed)
mkdir -m 777 "$T/guestfs"
out=$(setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$T/guestfs" TMPDIR="$T/guestfs" \
      LIBGUESTFS_BACKEND=direct LIBGUESTFS_CACHEDIR="$T/guestfs" timeout 1200 \
      guestfish --ro --format=raw -a "$uri" -m /dev/sda cat /hello 2>"$T/virt.err") ||
    { cat "$T/virt.err" >&2; die "guestfish on the printed URI failed"; }
assert_eq "$out" "hello from the snapshot" "guestfish through serve's URI"
stop_server "$pid" "$T/g.log" "serve --uri-for=libguestfs"
