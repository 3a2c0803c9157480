#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A snapshot served by nbdkit reads back bit-exact with the real NBD clients: size, block status
# (zero and hole extents exactly where the image has zero blocks), nbdcopy, qemu-img convert,
# four concurrent readers, a shared lock on the repository while served; encrypted
# repositories with a passphrase file and from the environment; a wrong passphrase fails with a
# clear message.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/nbd/nbd-lib.sh"
need_cmd nbdcopy qemu-img python3 openssl
PY=$(nbd_python) || skip "python3-libnbd is not installed"

# 48 MiB: random data with a 6 MiB zero run written out, a 10 MiB hole, zero 4 KiB blocks
# scattered in data, and data in the last block.
img=$T/disk.img
randfile "$T/rand" 48 nbdread
truncate -s 48M "$img"
dd if="$T/rand" of="$img" bs=1M count=8 conv=notrunc status=none
dd if=/dev/zero of="$img" bs=1M seek=8 count=6 conv=notrunc status=none
dd if="$T/rand" of="$img" bs=1M skip=14 seek=14 count=10 conv=notrunc status=none
# 24..34 MiB stays a hole
dd if="$T/rand" of="$img" bs=1M skip=34 seek=34 count=14 conv=notrunc status=none
for blk in 9000 9001 9005 9500; do dd if=/dev/zero of="$img" bs=4096 seek=$blk count=1 conv=notrunc status=none; done

repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
bv backup "$repo" "$img" --name=disk >/dev/null

start_nbdkit plain repo="$repo" snapshot=disk
assert_eq "$(nbdinfo --size "$NBD_URI")" $((48 << 20)) "export size"

# block status: the 4 KiB blocks reported zero are exactly the image's zero blocks
nbdinfo --map --json "$NBD_URI" > "$T/map.json"
"$PY" - "$img" "$T/map.json" <<'PY'
import json, sys
data = open(sys.argv[1], "rb").read()
bs = 4096
want = [data[i:i + bs] == bytes(bs) for i in range(0, len(data), bs)]
got = [None] * len(want)
pos = 0
for e in json.load(open(sys.argv[2])):
    assert e["offset"] == pos, ("gap in the map", e, pos)
    zero = bool(e["type"] & 2)
    assert e["offset"] % bs == 0 and e["length"] % bs == 0, e
    if zero:
        assert e["type"] == 3, ("zero extents are hole|zero", e)
    for b in range(e["offset"] // bs, (e["offset"] + e["length"]) // bs):
        got[b] = zero
    pos += e["length"]
assert pos == len(data), (pos, len(data))
bad = [i for i in range(len(want)) if want[i] != got[i]]
assert not bad, "blocks misreported: %s" % bad[:10]
print("map: %d zero blocks of %d" % (sum(want), len(want)))
PY

# nbdcopy and qemu-img: bit-exact
nbdcopy "$NBD_URI" "$T/copy.img"
qemu-img compare -q -f raw -F raw "$img" "$T/copy.img" || die "nbdcopy result differs"
assert_same "$img" "$T/copy.img"
qemu-img convert -f raw -O qcow2 "$NBD_URI" "$T/conv.qcow2"
qemu-img compare -q -f raw -F qcow2 "$img" "$T/conv.qcow2" || die "qemu-img convert result differs"

# four concurrent connections, each reading its own quarter in odd-sized pieces: with the
# defaults, then with one worker and a 1 MiB cache (reads queue for the worker, chunks evicted)
concurrent_readers() {
    "$PY" - "$img" "$NBD_URI" <<'PY'
import nbd, sys, threading
data = open(sys.argv[1], "rb").read()
quarter = len(data) // 4
errors = []
def reader(k):
    try:
        h = nbd.NBD()
        h.connect_uri(sys.argv[2])
        off, end = k * quarter + 1000 * k, (k + 1) * quarter
        while off < end:
            n = min(123457, end - off)
            if h.pread(n, off) != data[off:off + n]:
                errors.append("mismatch at %d" % off)
                return
            off += n
        h.shutdown()
    except Exception as e:
        errors.append(repr(e))
threads = [threading.Thread(target=reader, args=(k,)) for k in range(4)]
for t in threads: t.start()
for t in threads: t.join()
assert not errors, errors
PY
}
concurrent_readers
# the server holds an export lease (locked), not the gc lock: gc may run while it serves, and
# the lease goes when it stops
flock -x -n "$repo/locks/gc" true || die "a repository being served keeps garbage collection out"
lease=$(grep -l '"kind":"export"' "$repo"/leases/*.lease) || die "no export lease while serving"
flock -x -n "$lease" true && die "the export lease is not locked while serving"
stop_nbdkit
[ -z "$(ls "$repo/leases")" ] || die "leases left after nbdkit stopped: $(ls "$repo/leases")"
start_nbdkit one-worker repo="$repo" snapshot=disk workers=1 cache=1M
concurrent_readers
stop_nbdkit

# encrypted: passphrase-file= and $BLKVAULT_PASSPHRASE; a wrong passphrase is refused
erepo=$T/erepo
printf 'correct horse\n' > "$T/pass"
BLKVAULT_PASSPHRASE='correct horse' bv init "$erepo" >/dev/null
BLKVAULT_PASSPHRASE='correct horse' bv backup "$erepo" "$img" --name=disk >/dev/null
start_nbdkit enc-file repo="$erepo" snapshot=disk passphrase-file="$T/pass"
nbdcopy "$NBD_URI" "$T/enc1.img"
assert_same "$img" "$T/enc1.img"
stop_nbdkit
BLKVAULT_PASSPHRASE='correct horse' start_nbdkit enc-env repo="$erepo" snapshot=disk
nbdcopy "$NBD_URI" "$T/enc2.img"
assert_same "$img" "$T/enc2.img"
stop_nbdkit

rc=0
"${NBD_ENV[@]}" timeout 60 nbdkit -f -U "$T/bad.sock" -r "$NBD_PLUGIN" repo="$repo" snapshot=disk workers=0 \
    2>"$T/bad.log" || rc=$?
[ "$rc" != 0 ] && [ "$rc" != 124 ] || die "nbdkit accepted workers=0"
grep -q "workers= must be between 1 and 1024" "$T/bad.log" || { cat "$T/bad.log" >&2; die "no clear message for workers=0"; }
# cache=0 is refused, as serve's --cache=0 (the library took 0 as its 64M default, silently)
for c in 0 0M; do
    rc=0
    "${NBD_ENV[@]}" timeout 60 nbdkit -f -U "$T/bad.sock" -r "$NBD_PLUGIN" repo="$repo" snapshot=disk cache=$c \
        2>"$T/bad.log" || rc=$?
    [ "$rc" != 0 ] && [ "$rc" != 124 ] || die "nbdkit accepted cache=$c"
    assert_eq "$(cat "$T/bad.log")" "nbdkit: error: invalid cache=$c (a size such as 256M: the cache cannot be turned off)" \
        "the message for cache=$c"
done

rc=0
BLKVAULT_PASSPHRASE='wrong horse' "${NBD_ENV[@]}" timeout 60 nbdkit -f -U "$T/wrong.sock" -r "$NBD_PLUGIN" \
    repo="$erepo" snapshot=disk 2>"$T/wrong.log" || rc=$?
[ "$rc" != 0 ] || die "nbdkit served with a wrong passphrase"
[ "$rc" != 124 ] || die "nbdkit kept running with a wrong passphrase"
grep -q "cannot open repository '$erepo': wrong or missing passphrase or key" "$T/wrong.log" ||
    { cat "$T/wrong.log" >&2; die "no clear message for a wrong passphrase"; }
