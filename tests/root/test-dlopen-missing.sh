#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The optional libraries are loaded on first use (src/lib/util/dlib.h): with libvirt, libvirt-qemu,
# libguestfs, libcryptsetup, libext2fs, libntfs-3g and libsystemd made unloadable (each replaced
# by an empty file in a private mount namespace), blkvault still starts, and backup, list, verify
# and restore of an image work; what needs one of them fails with an error that names it:
# a libvirt: source (libvirt.so.0), files of an ext4 snapshot (libext2fs.so.2), files of an XFS
# snapshot (libguestfs.so.0), backup --used-only of ext4 (read whole, saying why).
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd unshare mount mkfs.ext4 mkfs.xfs
LIBDIR=$(dirname "$(ldd "$BLKVAULT" | awk '$1 ~ /^libc\.so/ {print $3}')")
HIDE="libvirt.so.0 libvirt-qemu.so.0 libguestfs.so.0 libcryptsetup.so.12 libext2fs.so.2 libntfs-3g.so.89 libsystemd.so.0"
for l in $HIDE; do [ -e "$LIBDIR/$l" ] || skip "$LIBDIR/$l is not installed"; done

# without: runs "$@" with the optional libraries unloadable (in a slave mount namespace: where the
# machine's mounts are shared, scripts/test.sh, it follows the other tests' umounts, never keeping
# their filesystems mounted meanwhile)
without() {
    unshare -m --propagation slave bash -c 'for l in '"$HIDE"'; do mount --bind /dev/null "'"$LIBDIR"'/$l" || exit 99; done; exec "$@"' \
        without "$@"
}
# expect_error WHAT LIBRARY CMD...: CMD fails, and says it could not load LIBRARY
expect_error() {
    local what=$1 lib=$2
    shift 2
    if without "$@" >"$T/out" 2>"$T/err"; then
        die "$what succeeded without $lib"
    fi
    grep -q "^error: .*cannot load $lib" "$T/err" || { cat "$T/err" >&2; die "$what: no error naming $lib"; }
}

ldd "$BLKVAULT" | grep -E 'lib(virt|guestfs|cryptsetup|ext2fs|ntfs-3g|systemd)\.' &&
    die "blkvault links an optional library (above): it must load it on first use"

without "$BLKVAULT" --version >/dev/null || die "blkvault --version does not start without the optional libraries"
repo=$T/repo
without "$BLKVAULT" init "$repo" --encryption=none -q || die "init failed"
head -c 3M /dev/urandom >"$T/img"
without "$BLKVAULT" backup "$repo" "$T/img" --name=img -q || die "backup of an image failed"
without "$BLKVAULT" list "$repo" | grep_q ' img' || die "list does not show the snapshot"
without "$BLKVAULT" verify "$repo" -q || die "verify failed"
without "$BLKVAULT" restore "$repo" img@latest "$T/img.out" -q || die "restore failed"
cmp "$T/img" "$T/img.out" || die "the restored image differs"

expect_error "backup libvirt:" libvirt.so.0 "$BLKVAULT" backup "$repo" libvirt:bvt-$$-none

# ext4: files need libext2fs; --used-only reads it whole and says why
truncate -s 64M "$T/ext4.img"
mkfs.ext4 -q -F "$T/ext4.img"
"$BLKVAULT" backup "$repo" "$T/ext4.img" --name=ext4 -q || die "backup of ext4 failed"
expect_error "files of ext4" libext2fs.so.2 "$BLKVAULT" files "$repo" ext4@latest ls /
without "$BLKVAULT" backup "$repo" "$T/ext4.img" --name=ext4u --used-only >"$T/out" 2>"$T/err" ||
    { cat "$T/err" >&2; die "backup --used-only failed without libext2fs"; }
grep -q "cannot load libext2fs.so.2" "$T/out" "$T/err" || { cat "$T/out" "$T/err" >&2; die "backup --used-only does not say why it read ext4 whole"; }

# XFS: files go through libguestfs (the error comes before any appliance boots)
truncate -s 300M "$T/xfs.img"
mkfs.xfs -q -f "$T/xfs.img"
"$BLKVAULT" backup "$repo" "$T/xfs.img" --name=xfs -q || die "backup of xfs failed"
expect_error "files of xfs" libguestfs.so.0 "$BLKVAULT" files "$repo" xfs@latest ls /
echo "ok: blkvault runs without its optional libraries and names the one a command needs"
