#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Huge apparent sizes over NBD. Block status answers at most 4 GiB per request, so an export that
# claims 1 EiB would take 2^28 requests to walk however little it holds (the backup once ran
# "practically forever"): an export above 1 PiB is refused at once, saying why, and nothing is
# published. One of 2 TiB with a few bytes at both ends backs up in seconds and restores to a
# sparse file holding the same bytes; a snapshot of a 4 EiB sparse file is served with its size
# and reads back its data where it lies.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/nbd/nbd-lib.sh"
need_cmd timeout
PY=$(nbd_python) || skip "python3-libnbd is not installed"

repo=$T/repo
bv init "$repo" --encryption=none >/dev/null

# data_export NAME SIZE DATA: nbdkit's data plugin (sparse: only DATA's bytes are stored) on
# $T/NAME.sock, stopped at exit; sets URI
data_export() {
    rm -f "$T/$1.sock"
    nbdkit -f -r -U "$T/$1.sock" data data="$3" size="$2" 2>"$T/$1.log" &
    local pid=$!
    on_exit "kill $pid"
    URI="nbd+unix:///?socket=$T/$1.sock"
    wait_socket "$T/$1.sock" "$pid" || { cat "$T/$1.log" >&2; die "nbdkit data ($1) did not start"; }
}

# 1 EiB with 7 bytes: refused within seconds (124 would be the timeout: the walk of old)
data_export eib 1E '"head" @1099511627776 "mid"'
rc=0
timeout 30 "$BLKVAULT" backup "$repo" "$URI" --name=eib >"$T/eib.out" 2>"$T/eib.err" || rc=$?
[ "$rc" = 1 ] || { cat "$T/eib.err" >&2; die "a backup of a 1 EiB export exited $rc, expected a refusal (1)"; }
grep -qx "error: the NBD export '$URI' claims more than 1 PiB: refused (block status answers 4 GiB at a time, so walking it would take one request per 4 GiB of what it claims)" \
    "$T/eib.err" || { cat "$T/eib.err" >&2; die "no reason given for the refusal"; }
assert_eq "$(bv list "$repo" --json)" "[]" "a refused export published a snapshot"

# 2 TiB with a few bytes at both ends: seconds, and the same bytes back
TIB=$((1 << 40))
data_export tib 2T "\"head\" @$((2 * TIB - 4)) \"tail\""
timeout 60 "$BLKVAULT" backup "$repo" "$URI" --name=tib -q || die "the backup of a 2 TiB export with 8 bytes (124: over 60 s)"
timeout 60 "$BLKVAULT" restore "$repo" tib "$T/tib.img" >/dev/null || die "restore of the 2 TiB snapshot"
assert_eq "$(stat -c %s "$T/tib.img")" $((2 * TIB)) "the restored size"
assert_eq "$(head -c 4 "$T/tib.img")" head "the restored first bytes"
assert_eq "$(tail -c 4 "$T/tib.img")" tail "the restored last bytes"
[ "$(allocated "$T/tib.img")" -le $((1 << 20)) ] || die "the restore of 8 bytes allocated $(allocated "$T/tib.img") bytes"

# a 4 EiB snapshot served: its size, and its data where it lies
huge_dir dir
EIB=$((1 << 60))
truncate -s 4E "$dir/huge.img"
printf 'head' | dd of="$dir/huge.img" conv=notrunc status=none
printf 'tail!' | dd of="$dir/huge.img" bs=1 seek=$((4 * EIB - 5)) conv=notrunc status=none
timeout 60 "$BLKVAULT" backup "$repo" "$dir/huge.img" --name=huge -q || die "the backup of a 4 EiB sparse file"
rm -f "$dir/huge.img"
start_serve huge "$repo" huge || die "serve of the 4 EiB snapshot did not come up"
"$PY" - "$SERVE_URI" <<'PY' || die "the served 4 EiB snapshot reads wrong"
import sys
import nbd

h = nbd.NBD()
h.add_meta_context("base:allocation")
h.connect_uri(sys.argv[1])
size = h.get_size()
assert size == 4 << 60, size
assert h.pread(8, 0) == b"head\0\0\0\0"
assert h.pread(4096, size - 4096) == b"\0" * 4091 + b"tail!"
assert h.pread(4096, 1 << 61) == b"\0" * 4096
ext = []
h.block_status(1 << 30, 0, lambda ctx, off, e, err: ext.extend(e) if ctx == "base:allocation" else None)
assert ext[0] == 4096 and ext[1] & 2 == 0 and ext[3] & 2, ext  # the data block, then zeroes
PY
echo PASS
