#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# make-installed.sh OUT SIZE [--suite S] [--mirror URL] [--packages "P..."] [--debs DIR]
# An installed Debian system as a sparse raw disk of SIZE: a GPT table with one ext4 partition
# (label bv-root) holding `debootstrap SUITE` (default bookworm) from MIRROR (default: the Debian
# mirror this machine's apt sources name) plus PACKAGES installed with apt-get in the chroot
# (default build-essential). apt keeps the .debs it downloaded in /var/cache/apt/archives, as on
# a real system. Downloads are kept in DIR (default /var/cache/blkvault-bench/debs) and taken from
# there the next time, so a rebuild fetches nothing it fetched before.
# mutate-installed.sh makes the next versions (v2, v3) of such an image.
. "$(dirname "$0")/common.sh"

usage() { echo "usage: ${0##*/} OUT SIZE [--suite S] [--mirror URL] [--packages \"P...\"] [--debs DIR]" >&2; exit 2; }
[ $# -ge 2 ] || usage
out=$1 size=$(to_bytes "$2")
shift 2
suite=bookworm mirror= packages="build-essential" debs=/var/cache/blkvault-bench/debs
while [ $# -gt 0 ]; do
    [ $# -ge 2 ] || usage
    case $1 in
    --suite) suite=$2 ;;
    --mirror) mirror=$2 ;;
    --packages) packages=$2 ;;
    --debs) debs=$2 ;;
    *) usage ;;
    esac
    shift 2
done
[ $(( size / 1048576 )) -ge 1024 ] || die "SIZE must be at least 1G (an installed system)"
need_root
need_cmd sfdisk losetup mkfs.ext4 debootstrap chroot
: "${mirror:=$(apt_mirror)}"
[ -n "$mirror" ] || die "no Debian mirror in /etc/apt/sources.list{,.d}: give --mirror URL"
mkdir -p "$debs"
debs=$(realpath "$debs")

rm -f "$out"
truncate -s "$size" "$out"
on_exit '[ "${finished:-}" = 1 ] || rm -f "$out"'
sfdisk -q "$out" <<TABLE
label: gpt
type=L, name=bv-root
TABLE

attach "$out"
mkfs.ext4 -q -F -L bv-root "${LOOP}p1"
mount_part 1
echo "debootstrap $suite from $mirror into ${LOOP}p1"
debootstrap --cache-dir="$debs" "$suite" "$MNT" "$mirror" >&2
chroot_apt "$MNT" "$debs" install $packages
echo 1 >"$MNT/.bv-version"
used=$(df -B1 --output=used "$MNT" | tail -1)
unmount_part "$MNT"
sync
finished=1
echo "$out: $(( size / 1048576 )) MiB image, $(( used / 1048576 )) MiB used in ext4 ($suite + $packages)"
