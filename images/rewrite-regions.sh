#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# rewrite-regions.sh IMAGE SEED COUNT
# Rewrites COUNT regions of 128 KiB of IMAGE, in place, with pseudo-random bytes, at offsets
# drawn from SEED in the first 90% of the image: a version of a disk where scattered blocks
# changed (bench/prune-gc.sh, tests/integration/test-gc-space.sh). Needs no root.
. "$(dirname "$0")/common.sh"

[ $# = 3 ] || { echo "usage: ${0##*/} IMAGE SEED COUNT" >&2; exit 2; }
img=$1 seed=$2 count=$3
blocks=$(( $(stat -c %s "$img") / 131072 * 9 / 10 ))
[ "$blocks" -gt 0 ] || die "'$img' is smaller than 128 KiB"
for i in $(seq "$count"); do
    off=$(( $(printf '%d' "0x$(printf '%s-%s' "$seed" "$i" | sha256sum | cut -c1-8)") % blocks ))
    prng 131072 "$seed-$i" | dd of="$img" bs=128K seek="$off" conv=notrunc status=none
done
