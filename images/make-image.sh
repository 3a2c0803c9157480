#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# make-image.sh OUT SIZE [--content-mib N]
# A sparse raw disk image of SIZE with a GPT table and three partitions: ext4 (40%, label bv-ext4),
# XFS (30%, bv-xfs) and btrfs (the rest, bv-btrfs), filled with about N MiB (default: a quarter
# of SIZE, at most 1024) of real files copied from this system, plus a few log files that
# mutate.sh appends to. Files are chosen in sorted path order, so sizes reproduce on one system.
# Filesystem UUIDs are random, so two images can be attached at once.
. "$(dirname "$0")/common.sh"

usage() { echo "usage: ${0##*/} OUT SIZE [--content-mib N]" >&2; exit 2; }
[ $# -ge 2 ] || usage
out=$1 size=$(to_bytes "$2")
shift 2
content=
while [ $# -gt 0 ]; do
    case $1 in
    --content-mib) [ $# -ge 2 ] || usage; content=$2; shift 2 ;;
    *) usage ;;
    esac
done
size_mib=$(( size / 1048576 ))
[ "$size_mib" -ge 400 ] || die "SIZE must be at least 400M (btrfs and XFS need room)"
: "${content:=$(( size_mib / 4 > 1024 ? 1024 : size_mib / 4 ))}"
need_root
need_cmd sfdisk losetup mkfs.ext4 mkfs.xfs mkfs.btrfs openssl tar

rm -f "$out"
truncate -s "$size" "$out"
on_exit '[ "${finished:-}" = 1 ] || rm -f "$out"'

ext4_mib=$(( size_mib * 40 / 100 )) xfs_mib=$(( size_mib * 30 / 100 ))
sfdisk -q "$out" <<TABLE
label: gpt
size=${ext4_mib}MiB, type=L, name=bv-ext4
size=${xfs_mib}MiB, type=L, name=bv-xfs
type=L, name=bv-btrfs
TABLE

attach "$out"
mkfs.ext4 -q -F -L bv-ext4 "${LOOP}p1"
# mkfs.xfs refuses filesystems under 300 MiB unless it believes it runs under a test harness
if [ "$xfs_mib" -lt 300 ]; then
    TEST_DIR=1 TEST_DEV=1 QA_CHECK_FS=1 mkfs.xfs -q -f -L bv-xfs "${LOOP}p2"
else
    mkfs.xfs -q -f -L bv-xfs "${LOOP}p2"
fi
mkfs.btrfs -q -f -L bv-btrfs "${LOOP}p3" >/dev/null

# What each filesystem gets: different trees, so the three hold different data.
trees=("/usr/share/doc /usr/bin /usr/share/man"
       "/usr/lib/x86_64-linux-gnu"
       "/usr/share/locale /usr/include /usr/lib/python3")
total=0
for n in 1 2 3; do
    mount_part "$n"
    # shellcheck disable=SC2086 # the tree list splits on purpose
    copied=$(copy_budget "$MNT" $(( content / 3 )) ${trees[n - 1]})
    mkdir -p "$MNT/log"
    for i in 1 2 3 4 5 6; do
        seq -f "%08g app$i: request served in 12 ms, status ok" 1 $(( 4000 * i )) >"$MNT/log/app-$i.log"
    done
    echo 1 >"$MNT/.bv-version"
    total=$(( total + copied ))
    echo "partition $n: $(( copied / 1048576 )) MiB of files from ${trees[n - 1]}"
    unmount_part "$MNT"
done
sync
finished=1
echo "$out: $(( size_mib )) MiB image, $(( total / 1048576 )) MiB of files in ext4/XFS/btrfs"
