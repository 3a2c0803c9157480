#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# make-sparse.sh OUT SIZE DATA_MIB [SEED]
# A sparse file of SIZE holding DATA_MIB MiB of pseudo-random data (deterministic for a SEED) in
# 1 MiB extents spread evenly across it, the rest holes: e.g. `make-sparse.sh img 16G 256` is a
# 16 GiB image with 256 MiB of data, one 1 MiB extent every 64 MiB. Needs no root.
. "$(dirname "$0")/common.sh"

[ $# -ge 3 ] && [ $# -le 4 ] || { echo "usage: ${0##*/} OUT SIZE DATA_MIB [SEED]" >&2; exit 2; }
out=$1 size=$(to_bytes "$2") data=$3 seed=${4:-bv-sparse}
need_cmd openssl dd
[[ $data =~ ^[0-9]+$ ]] || die "DATA_MIB must be a number of MiB"
size_mib=$(( size / 1048576 ))
[ $(( size % 1048576 )) = 0 ] || die "SIZE must be a whole number of MiB"
[ "$data" -le "$size_mib" ] || die "$data MiB of data do not fit in $size_mib MiB"

rm -f "$out"
truncate -s "$size" "$out"
if [ "$data" -gt 0 ]; then
    stride=$(( size_mib / data ))
    # one stream of data, cut into 1 MiB extents by successive dd runs reading the same pipe
    prng $(( data * 1048576 )) "$seed" | for (( i = 0; i < data; i++ )); do
        dd of="$out" bs=1M count=1 seek=$(( i * stride )) iflag=fullblock conv=notrunc status=none
    done
fi
echo "$out: $size_mib MiB, $data MiB of data in 1 MiB extents every $(( data ? size_mib / data : 0 )) MiB"
