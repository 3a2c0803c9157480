#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# blkvault serve --writable: writes land in nbdkit's throw-away cow overlay and read back; after
# the server stops no file of the repository has changed, and it verifies and restores the
# original.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/nbd/nbd-lib.sh"
need_cmd openssl
PY=$(nbd_python) || skip "python3-libnbd is not installed"

img=$T/disk.img
randfile "$img" 16 nbdwrite
truncate -s 24M "$img"
repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
bv backup "$repo" "$img" --name=disk >/dev/null
# every file of the repository and its bytes; locks/ holds empty files that readers create to
# flock, never data
repo_files() { (cd "$repo" && find . -path ./locks -prune -o -type f -exec sha256sum {} + | sort -k2); }
repo_files > "$T/before"

sock=$T/rw.sock
start_serve serve "$repo" disk --writable --socket="$sock" || die "blkvault serve --writable did not start"
assert_eq "$SERVE_URI" "nbd+unix:///?socket=$sock" "printed URI"
grep -q "throw-away overlay" "$T/serve.log" || die "serve did not say writes are thrown away"

"$PY" - "$img" "nbd+unix:///?socket=$sock" <<'PY'
import nbd, os, sys
img = open(sys.argv[1], "rb").read()
h = nbd.NBD()
h.connect_uri(sys.argv[2])
assert not h.is_read_only(), "export is read-only"
blob = os.urandom(3 * 65536 + 17)
for off in (0, 5 * 1048576 + 123, 20 * 1048576):   # data, data, the zero tail
    h.pwrite(blob, off)
h.flush()
for off in (0, 5 * 1048576 + 123, 20 * 1048576):
    assert h.pread(len(blob), off) == blob, off
# untouched data still comes from the snapshot
assert h.pread(1 << 20, 10 << 20) == img[10 << 20:11 << 20]
h.shutdown()
PY
stop_serve

repo_files > "$T/after"
diff -u "$T/before" "$T/after" >&2 || die "serving --writable changed the repository"

bv verify "$repo" --read-data >/dev/null
bv restore "$repo" disk "$T/restored.img" >/dev/null
assert_same "$img" "$T/restored.img"
