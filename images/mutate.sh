#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# mutate.sh IMAGE VERSION
# Applies one deterministic mutation in place to an image made by make-image.sh, on each of its
# three filesystems, as an incremental backup would see it between two runs:
#   v2 (a large change): a new tree of real files (about a fifth of what the filesystem holds),
#      every 25th existing file rewritten in place (a 4 KiB block in its middle), every 30th
#      deleted, the logs grown;
#   v3 (a small change): three files deleted, two logs appended to, 16 bytes changed in three
#      files.
# Each filesystem records its version in /.bv-version: v2 applies to version 1, v3 to version 2.
. "$(dirname "$0")/common.sh"

[ $# = 2 ] || { echo "usage: ${0##*/} IMAGE v2|v3" >&2; exit 2; }
image=$1 version=${2#v}
case $version in 2|3) ;; *) die "unknown version '$2' (v2 or v3)" ;; esac
[ -f "$image" ] || die "$image: no such image"
need_root
need_cmd losetup sfdisk openssl tar dd

# The trees v2 adds: not the ones make-image.sh used on the same filesystem.
added_trees=("/usr/lib/python3 /usr/share/zoneinfo" "/usr/share/locale" "/usr/share/doc /usr/share/perl")

# overwrite FILE OFFSET BYTES SEED: replaces bytes in place with pseudo-random ones.
overwrite() {
    prng "$3" "$4" | dd of="$1" bs=64K iflag=fullblock oflag=seek_bytes seek="$2" conv=notrunc status=none
}

files_of() {
    mapfile -d '' FILES < <(find "$1" -xdev -type f ! -path "$1/log/*" ! -name .bv-version -print0 | sort -z)
    [ "${#FILES[@]}" -gt 40 ] || die "$1 holds too few files to mutate"
}

mutate_v2() {
    local mnt=$1 n=$2 i f size changed=0 deleted=0 used
    files_of "$mnt"
    for (( i = 0; i < ${#FILES[@]}; i += 25 )); do
        f=${FILES[i]} size=$(stat -c %s "$f")
        [ "$size" -gt 0 ] || continue
        overwrite "$f" $(( size / 2 / 4096 * 4096 )) $(( size < 4096 ? size : 4096 )) "v2-$n-$i"
        changed=$(( changed + 1 ))
    done
    for (( i = 7; i < ${#FILES[@]}; i += 30 )); do
        rm -f "${FILES[i]}"
        deleted=$(( deleted + 1 ))
    done
    used=$(du -sm "$mnt" | cut -f1)
    mkdir -p "$mnt/v2-added"
    # shellcheck disable=SC2086 # the tree list splits on purpose
    size=$(copy_budget "$mnt/v2-added" $(( used / 5 > 4 ? used / 5 : 4 )) ${added_trees[n - 1]})
    for i in 1 2 3 4 5 6; do
        seq -f "%08g app$i: v2 request served in 15 ms, status ok" 1 3000 >>"$mnt/log/app-$i.log"
    done
    echo "partition $n: $changed files changed, $deleted deleted, $(( size / 1048576 )) MiB added"
}

mutate_v3() {
    local mnt=$1 n=$2 i
    files_of "$mnt"
    for i in 3 11 19; do
        rm -f "${FILES[i * ${#FILES[@]} / 23]}"
    done
    for i in 1 3; do
        seq -f "%08g app$i: v3 request served in 9 ms, status ok" 1 200 >>"$mnt/log/app-$i.log"
    done
    for i in 5 13 21; do
        f=${FILES[i * ${#FILES[@]} / 23]}
        [ "$(stat -c %s "$f")" -ge 116 ] && overwrite "$f" 100 16 "v3-$n-$i"
    done
    echo "partition $n: 3 files deleted, 2 logs appended to, 16 bytes changed in 3 files"
}

attach "$image"
for n in 1 2 3; do
    mount_part "$n"
    have=$(cat "$MNT/.bv-version" 2>/dev/null || echo none)
    [ "$have" = $(( version - 1 )) ] || die "partition $n is at version $have, v$version applies to v$(( version - 1 ))"
    "mutate_v$version" "$MNT" "$n"
    echo "$version" >"$MNT/.bv-version"
    unmount_part "$MNT"
done
sync
