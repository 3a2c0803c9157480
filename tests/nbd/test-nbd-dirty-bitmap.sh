#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Backup of an NBD export (qemu-nbd on a qcow2 image) with libnbd: zero ranges are never read;
# with --dirty-bitmap only what qemu's persistent dirty bitmap marks dirty is read and the rest
# is taken from the last snapshot of the same name; a pairing that cannot be proven (no
# parent, another bitmap, another size) reads everything and says why; a bitmap disabled behind
# the backup's back is caught by the periodic whole read (--full-read-every). Every snapshot
# restores bit-exact against qemu-img convert of the image; an export larger than one block-status
# window (nbdkit data, 3 GiB) reads only its allocated extents and restores bit-exact.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/nbd/nbd-lib.sh"
need_cmd qemu-img qemu-io qemu-nbd python3

MIB=1048576
img=$T/d.qcow2
sock=$T/q.sock
uri="nbd+unix:///?socket=$sock"

# serve [BITMAP...]: qemu-nbd, read-only, on $sock, exporting the bitmaps; stopped by unserve.
QPID=
serve() {
    local b args=()
    for b in "$@"; do args+=(-B "$b"); done
    rm -f "$sock"
    qemu-nbd -r -t -f qcow2 -k "$sock" "${args[@]}" "$img" 2>"$T/qemu-nbd.log" &
    QPID=$!
    wait_socket "$sock" "$QPID" || { cat "$T/qemu-nbd.log" >&2; die "qemu-nbd did not come up"; }
}
unserve() { kill "$QPID"; wait "$QPID" 2>/dev/null || true; QPID=; }
on_exit '[ -z "$QPID" ] || kill "$QPID"'

# json_get FILE KEY: a top-level member of a backup's --json output ("" when absent).
json_get() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2], ""))' "$1" "$2"; }

# restore_check SNAPSHOT: the snapshot restores to exactly what qemu-img reads from the image.
restore_check() {
    rm -f "$T/want.raw" "$T/got.raw"
    qemu-img convert -f qcow2 -O raw "$img" "$T/want.raw"
    bv restore "$T/repo" "$1" "$T/got.raw" >/dev/null
    assert_same "$T/want.raw" "$T/got.raw"
}

bv init "$T/repo" --encryption=none >/dev/null

# 64 MiB: 40 MiB of random data, the rest never written (qcow2 reports it as zeroes)
randfile "$T/data.raw" 40 dirty-bitmap
qemu-img convert -f raw -O qcow2 "$T/data.raw" "$T/tmp.qcow2"
qemu-img resize -q -f qcow2 "$T/tmp.qcow2" 64M
mv "$T/tmp.qcow2" "$img"
qemu-img bitmap --add --enable -f qcow2 "$img" b0

# without a bitmap: everything but the zero ranges is read
serve b0
bv backup "$T/repo" "$uri" --name=plain --json -q >"$T/plain.json"
assert_eq "$(json_get "$T/plain.json" bytes_read)" $((40 * MIB)) "bytes read without a bitmap"
assert_eq "$(json_get "$T/plain.json" bytes_hole)" $((24 * MIB)) "zero range not read"
restore_check "$(json_get "$T/plain.json" snapshot)"

# backup 1 with the bitmap: no parent yet, so everything is read, and the reason is given
bv backup "$T/repo" "$uri" --name=vm --dirty-bitmap=b0 --json -q >"$T/b1.json" 2>"$T/b1.err"
assert_eq "$(json_get "$T/b1.json" bytes_read)" $((40 * MIB)) "first backup reads everything"
assert_eq "$(json_get "$T/b1.json" read_whole_because)" "no earlier snapshot is named 'vm'"
grep -qx "warning: dirty bitmap 'b0' not used, read everything: no earlier snapshot is named 'vm'" "$T/b1.err" ||
    { cat "$T/b1.err" >&2; die "no warning for the first backup"; }
b1=$(json_get "$T/b1.json" snapshot)
unserve

# the guest writes in three places (one in the zero range); the bitmap marks 64 KiB granules
qemu-io -f qcow2 -c "write -P 0x11 $((3 * MIB + 4096)) 8k" -c "write -P 0x22 $((20 * MIB)) 128k" \
    -c "write -P 0x33 $((50 * MIB)) 64k" "$img" >/dev/null
serve b0
dirty=$(nbdinfo --map=qemu:dirty-bitmap:b0 "$uri" | awk '$3 == 1 { n += $2 } END { print n + 0 }')
assert_eq "$dirty" $((64 * 1024 + 128 * 1024 + 64 * 1024)) "dirty bytes in the bitmap"

# backup 2: only the dirty granules (and the parent's chunks that stick out of them) are read
bv backup "$T/repo" "$uri" --name=vm --dirty-bitmap=b0 --json -q >"$T/b2.json" 2>"$T/b2.err"
[ ! -s "$T/b2.err" ] || { cat "$T/b2.err" >&2; die "backup 2 complained"; }
read2=$(json_get "$T/b2.json" bytes_read)
assert_eq "$(json_get "$T/b2.json" changed_from)" "$b1" "backup 2's parent"
assert_eq "$(json_get "$T/b2.json" read_whole_because)" ""
[ "$read2" -ge $((256 * 1024)) ] && [ "$read2" -le $((256 * 1024 + 4 * 1024 * 1024)) ] ||
    die "backup 2 read $read2 bytes, expected the dirty 256 KiB plus at most a chunk at each edge"
echo "dirty-bitmap: backup 2 read $read2 bytes of a 64 MiB image (40 MiB of data, 256 KiB dirty)"
b2=$(json_get "$T/b2.json" snapshot)
restore_check "$b2"
bv list "$T/repo" --json | python3 -c '
import json, sys
s = [x for x in json.load(sys.stdin) if x["id"] == sys.argv[1]][0]["source"]
assert s["kind"] == "nbd" and s["changed_map"] == "qemu:dirty-bitmap:b0", s
assert s["changed_from"] == sys.argv[2] and s["changed_backups"] == 1, s
' "$b2" "$b1" || die "the snapshot does not record the bitmap and its parent"
unserve

# another bitmap: not paired with the last snapshot, read everything
qemu-img bitmap --add --enable -f qcow2 "$img" b1
serve b0 b1
bv backup "$T/repo" "$uri" --name=vm --dirty-bitmap=b1 --json -q >"$T/b3.json" 2>"$T/b3.err"
why="snapshot ${b2:0:8} was not taken with qemu:dirty-bitmap:b1 (a new bitmap)"
assert_eq "$(json_get "$T/b3.json" read_whole_because)" "$why"
grep -qx "warning: dirty bitmap 'b1' not used, read everything: $why" "$T/b3.err" || die "no warning for b1"
assert_eq "$(json_get "$T/b3.json" bytes_read)" $((40 * MIB + 64 * 1024)) "another bitmap reads everything"
restore_check "$(json_get "$T/b3.json" snapshot)"

# no server: the error says so
expect_fail 1 "error: cannot read the NBD export 'nbd+unix:///?socket=$T/none.sock' (is the server running?)" \
    bv backup "$T/repo" "nbd+unix:///?socket=$T/none.sock" --name=vm -q

# a bitmap the server does not export is an error
expect_fail 1 "error: the NBD server at '$uri' exports no dirty bitmap 'nope' (serve it with qemu-nbd -B nope" \
    bv backup "$T/repo" "$uri" --name=vm --dirty-bitmap=nope -q
expect_fail 2 "error: --dirty-bitmap needs an NBD source" bv backup "$T/repo" "$T/data.raw" --dirty-bitmap=b0 -q
unserve

# the size changed: read everything
qemu-img resize -q -f qcow2 "$img" 72M
serve b1
bv backup "$T/repo" "$uri" --name=vm --dirty-bitmap=b1 --json -q >"$T/b4.json" 2>/dev/null
b3=$(json_get "$T/b3.json" snapshot)
assert_eq "$(json_get "$T/b4.json" read_whole_because)" \
    "the size changed from 67108864 to 75497472 bytes since snapshot ${b3:0:8}"
restore_check "$(json_get "$T/b4.json" snapshot)"
unserve

# a wrong map: data changes while the bitmap is disabled (as if its writes had been lost); the
# backup after it trusts the bitmap, and the periodic whole read finds and counts the difference
qemu-img bitmap --disable -f qcow2 "$img" b1
qemu-io -f qcow2 -c "write -P 0x44 $((30 * MIB)) 64k" "$img" >/dev/null
qemu-img bitmap --enable -f qcow2 "$img" b1
serve b1
bv backup "$T/repo" "$uri" --name=vm --dirty-bitmap=b1 --json -q >"$T/b5.json" 2>"$T/b5.err"
assert_eq "$(json_get "$T/b5.json" read_whole_because)" ""
[ "$(json_get "$T/b5.json" bytes_read)" -lt $((4 * MIB)) ] || die "backup 5 read everything"
bv backup "$T/repo" "$uri" --name=vm --dirty-bitmap=b1 --full-read-every=2 --json -q >"$T/b6.json" 2>"$T/b6.err"
assert_eq "$(json_get "$T/b6.json" read_whole_because)" "a whole read every 2 backups (--full-read-every)"
wrong=$(json_get "$T/b6.json" bytes_map_wrong)
[ "$wrong" -ge $((64 * 1024)) ] && [ "$wrong" -le $((64 * 1024 + 4 * 1024 * 1024)) ] ||
    die "the whole read counted $wrong wrong bytes, expected the 64 KiB written behind the bitmap's back"
[ "$(json_get "$T/b6.json" bytes_map_checked)" -ge $((30 * MIB)) ] || die "the whole read checked too little"
grep -q "^warning: the changed-block map was wrong: $wrong bytes it called unchanged had changed" "$T/b6.err" ||
    { cat "$T/b6.err" >&2; die "no warning for the wrong map"; }
echo "wrong map: the whole read checked $(json_get "$T/b6.json" bytes_map_checked) bytes, $wrong wrong"
restore_check "$(json_get "$T/b6.json" snapshot)"
# a whole read of a right map counts nothing wrong
bv backup "$T/repo" "$uri" --name=vm --dirty-bitmap=b1 --force-read --json -q >"$T/b7.json" 2>"$T/b7.err"
assert_eq "$(json_get "$T/b7.json" bytes_map_wrong)" 0 "a right map is not wrong"
! grep -q "was wrong" "$T/b7.err" || die "a right map was called wrong"
unserve
# nbd://HOST:PORT/EXPORT over TCP on the loopback, with an export name
port=$((20000 + RANDOM % 20000))
qemu-nbd -r -t -f qcow2 -b 127.0.0.1 -p "$port" -x vm1 -B b1 "$img" 2>"$T/qemu-nbd.log" &
QPID=$!
for _ in $(seq 100); do nbdinfo --size "nbd://127.0.0.1:$port/vm1" >/dev/null 2>&1 && break; sleep 0.1; done
bv backup "$T/repo" "nbd://127.0.0.1:$port/vm1" --name=tcp --json -q >"$T/tcp.json"
restore_check "$(json_get "$T/tcp.json" snapshot)"
unserve

# a 3 GiB export with data across the 1 GiB windows of block status (nbdkit's data plugin): only
# the allocated extents are read, and the snapshot restores to what nbdcopy reads
sock3=$T/data.sock
nbdkit -f -U "$sock3" data '@1073741820 1 2 3 4 5 6 7 8 @2147483648 9 @3221225000 7' size=3G &
QPID=$!
wait_socket "$sock3" "$QPID" || die "nbdkit did not come up"
bv backup "$T/repo" "nbd+unix:///?socket=$sock3" --name=data --json -q >"$T/data.json"
nbdinfo --map "nbd+unix:///?socket=$sock3" | awk '$3 == 0 { n += $2 } END { print n }' >"$T/allocated"
assert_eq "$(json_get "$T/data.json" bytes_read)" "$(cat "$T/allocated")" "3 GiB export: only allocated extents read"
nbdcopy "nbd+unix:///?socket=$sock3" "$T/want3.raw"
unserve
bv restore "$T/repo" "$(json_get "$T/data.json" snapshot)" "$T/got3.raw" >/dev/null
assert_same "$T/want3.raw" "$T/got3.raw"
echo "PASS"
