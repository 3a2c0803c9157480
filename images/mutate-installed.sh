#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# mutate-installed.sh IMAGE v2|v3 [--debs DIR]
# The next version of an installed-system image (make-installed.sh) in place, as apt would leave
# it. v2: more packages installed (git, python3, libssl-dev, pkg-config: a large change); v3 (a
# small one): apt-get clean, pkg-config removed, a few lines appended to logs.
. "$(dirname "$0")/common.sh"

usage() { echo "usage: ${0##*/} IMAGE v2|v3 [--debs DIR]" >&2; exit 2; }
[ $# -eq 2 ] || [ $# -eq 4 ] || usage
img=$1 version=$2 debs=/var/cache/blkvault-bench/debs
[ $# -eq 2 ] || { [ "$3" = --debs ] || usage; debs=$4; }
case $version in v2|v3) ;; *) usage ;; esac
need_root
need_cmd losetup chroot
mkdir -p "$debs"
debs=$(realpath "$debs")

attach "$img"
mount_part 1
have=$(cat "$MNT/.bv-version" 2>/dev/null || echo none)
[ "$have" = $(( ${version#v} - 1 )) ] || die "$img is version $have, $version applies to version $(( ${version#v} - 1 ))"
if [ "$version" = v2 ]; then
    chroot_apt "$MNT" "$debs" install git python3 libssl-dev pkg-config
else
    chroot "$MNT" apt-get -qq clean
    chroot_apt "$MNT" "$debs" purge pkg-config
    for f in dpkg.log apt/history.log alternatives.log; do
        seq -f "%04g bench: a line appended by mutate-installed.sh v3" 1 50 >>"$MNT/var/log/$f"
    done
fi
echo "${version#v}" >"$MNT/.bv-version"
unmount_part "$MNT"
sync
echo "$img: now $version"
