#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# make-concat-tests.sh DIR
# The HashBackup dedup test inputs (deterministic pseudo-random data, no root needed):
#   DIR/t1/file-01..16   8 MiB each, and DIR/t1/concat, the 16 files end to end (128 MiB)
#   DIR/t2/file-001..101 1 MiB each, and DIR/t2/concat, the 101 files end to end (101 MiB)
# Backing up the files and then the concatenation should store (almost) nothing new the second
# time: the concatenation shifts no data within a file, only the boundaries between files.
. "$(dirname "$0")/common.sh"

[ $# = 1 ] || { echo "usage: ${0##*/} DIR" >&2; exit 2; }
dir=$1
need_cmd openssl

mkdir -p "$dir/t1" "$dir/t2"
for i in $(seq -w 1 16); do
    prng $(( 8 * 1048576 )) "t1-$i" >"$dir/t1/file-$i"
done
cat "$dir"/t1/file-?? >"$dir/t1/concat"
for i in $(seq -w 1 101); do
    prng 1048576 "t2-$i" >"$dir/t2/file-$i"
done
cat "$dir"/t2/file-??? >"$dir/t2/concat"
echo "$dir: t1 16 x 8 MiB + concat, t2 101 x 1 MiB + concat"
