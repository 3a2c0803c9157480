# SPDX-License-Identifier: LGPL-2.1-or-later
# Helpers shared by the image scripts: sourced, never run. Needs root for loop devices and mounts.
set -euo pipefail
export LC_ALL=C

die() { echo "${0##*/}: $*" >&2; exit 1; }
need_root() { [ "$(id -u)" = 0 ] || die "must run as root (loop devices, mounts)"; }
need_cmd() { for c in "$@"; do command -v "$c" >/dev/null 2>&1 || die "$c is not installed"; done; }

# Bytes of a size such as 512M, 2G, 16G (binary units).
to_bytes() { numfmt --from=iec "$1" 2>/dev/null || die "bad size '$1'"; }

# Deterministic pseudo-random bytes: prng BYTES SEED (no SIGPIPE: the input is finite).
prng() { openssl enc -aes-128-ctr -pass "pass:$2" -nosalt -pbkdf2 -in <(head -c "$1" /dev/zero) 2>/dev/null; }

# Cleanup stack run at exit, also on failure: unmounts and loop detaches, last in first out.
_cleanups=()
on_exit() { _cleanups=("$*" "${_cleanups[@]}"); }
_run_cleanups() {
    local rc=$?
    for c in "${_cleanups[@]}"; do eval "$c" >/dev/null 2>&1 || true; done
    exit $rc
}
trap _run_cleanups EXIT

# attach IMAGE: sets LOOP to a loop device with partition nodes ${LOOP}p1... (detached at exit).
attach() {
    LOOP=$(losetup -f --show -P "$1") || die "losetup failed for $1"
    on_exit "losetup -d $LOOP"
    local n
    n=$(sfdisk -d "$1" 2>/dev/null | grep -c '^[^ ]* : start=' || true)
    [ "$n" -gt 0 ] || return 0
    # this kernel's own partition scan may not know the table (no GPT parser built in):
    # partx reads it in userspace and adds the partitions with BLKPG
    sleep 0.2
    [ -b "${LOOP}p$n" ] || partx -a "$LOOP" 2>/dev/null || true
    for _ in $(seq 50); do
        [ -b "${LOOP}p$n" ] && return 0
        sleep 0.1
    done
    die "partition nodes of $LOOP did not appear"
}

# mount_part N: mounts ${LOOP}pN on a fresh directory, sets MNT (unmounted at exit).
mount_part() {
    MNT=$(mktemp -d "${TMPDIR:-/var/tmp}/bvimg-mnt.XXXXXX")
    on_exit "rmdir $MNT"
    mount "${LOOP}p$1" "$MNT"
    on_exit "umount $MNT"
}

# unmount_part DIR: unmounts now (the exit hook then finds nothing to do).
unmount_part() { umount "$1"; rmdir "$1"; }

# copy_budget DEST MIB DIR...: copies regular files of DIRs (sorted by path) into DEST, keeping
# their paths, until about MIB MiB are copied. Hard links of a file already taken are skipped
# (tar would store them once), so MIB counts distinct data. Prints the bytes copied.
copy_budget() {
    local dest=$1 budget=$(( $2 * 1048576 )) total=0 ino size path list
    local -A seen=()
    shift 2
    list=$(mktemp)
    while IFS=$'\t' read -r -d '' ino size path; do
        [ -z "${seen[$ino]:-}" ] || continue
        [ $(( total + size )) -le "$budget" ] || continue
        seen[$ino]=1
        printf '%s\0' "${path#/}" >>"$list"
        total=$(( total + size ))
        [ $(( budget - total )) -lt 4096 ] && break
    done < <(find "$@" -xdev -type f -readable -printf '%D:%i\t%s\t%p\0' 2>/dev/null | sort -z -t $'\t' -k3)
    # tar exits 1 when a file changed while read (a live system): still a usable copy
    { tar -C / --null --no-recursion -T "$list" -cf - 2>/dev/null || [ $? = 1 ]; } | tar -C "$dest" -xf -
    rm -f "$list"
    echo "$total"
}

# The Debian mirror this machine's apt sources name (the first URI ending in /debian), or nothing.
apt_mirror() {
    cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
        grep -v '^[[:space:]]*#' | grep -oE '(https?|file)://[^[:space:]]+/debian/?([[:space:]]|$)' |
        head -1 | tr -d '[:space:]' || true
}

# chroot_apt ROOT DEBS ARGS...: apt-get -y ARGS in the Debian tree ROOT (proc and dev mounted,
# services never started), the .debs it needs taken from DEBS when there and the ones it
# downloads copied into DEBS. Only what apt asks for goes into ROOT's own archive cache.
chroot_apt() {
    local root=$1 debs=$2 f
    shift 2
    cp /etc/resolv.conf "$root/etc/resolv.conf"
    printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
    chmod 755 "$root/usr/sbin/policy-rc.d"
    mount -t proc proc "$root/proc"
    on_exit "umount $root/proc"
    mount --bind /dev "$root/dev"
    on_exit "umount $root/dev"
    export DEBIAN_FRONTEND=noninteractive
    chroot "$root" apt-get -qq update
    # apt prints 'URI' FILE SIZE HASH for each .deb it would fetch
    chroot "$root" apt-get -qq --print-uris "$@" | awk '{print $2}' | while read -r f; do
        [ ! -f "$debs/$f" ] || cp "$debs/$f" "$root/var/cache/apt/archives/$f"
    done
    chroot "$root" apt-get -y -o Dpkg::Use-Pty=0 "$@" >&2
    cp -n "$root"/var/cache/apt/archives/*.deb "$debs/" 2>/dev/null || true
    rm -f "$root/usr/sbin/policy-rc.d"
    umount "$root/dev" "$root/proc"
}
