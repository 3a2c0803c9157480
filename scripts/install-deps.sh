#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Installs everything blkvault needs to build, test and benchmark on Debian 12.
# Idempotent: packages already present are left alone.
set -euo pipefail

build=(meson ninja-build pkg-config gcc git
       liburing-dev libzstd-dev libssl-dev libblkid-dev libjson-c-dev
       libcryptsetup-dev libsystemd-dev libinih-dev nbdkit nbdkit-plugin-dev libnbd-dev
       libcurl4-openssl-dev libxml2-dev   # the S3 client (src/lib/backend/s3-*)
       libext2fs-dev   # ext2/3/4 in src/lib/fs: used blocks (used-ext.c), files through an io_manager (ext-files.c)
       ntfs-3g-dev   # NTFS in src/lib/fs: files through libntfs-3g's device operations (ntfs-files.c)
       libvirt-dev   # libvirt domains: src/lib/virt (connection, disks, pull-mode backups, checkpoints)
       libtirpc-dev   # sanitized builds load libtirpc up front (meson.build: the sanitizers intercept its XDR functions)
       libguestfs-dev   # files on XFS, btrfs, FAT and LVM through the libguestfs appliance (src/cli/files-guestfs.c)
       bash-completion   # its pkg-config file says where the completion goes; the test loads it
       clang libclang-rt-14-dev)   # clang and libFuzzer: the fuzz build (scripts/fuzz.sh)
# real package names only: a virtual or wrong name is never "installed", so every run would call
# apt-get update (nbdfuse is in libnbd-bin)
runtime=(nbdkit libnbd-bin fuse3 qemu-utils util-linux fdisk
         e2fsprogs xfsprogs btrfs-progs cryptsetup-bin python3 python3-libnbd
         partclone dosfstools ntfs-3g mtools   # used blocks of XFS, btrfs, FAT, NTFS (src/lib/fs/used-partclone.c); mkfs.vfat, mkntfs, mcopy in tests
         attr   # setfattr/getfattr: a compressed file and a named stream made through ntfs-3g (tests/root/test-files-ntfs)
         kmod time thin-provisioning-tools   # thin_restore/thin_delta: tests/unit/test-thin-delta
         openssl man-db   # the openssl command (test data) and man (test-man): libssl-dev pulls neither
         curl   # the S3 tests make their buckets with curl --aws-sigv4 (tests/s3/s3-lib.sh)
         prometheus   # promtool check metrics: the textfile (tests/root/test-notify-metrics)
         libguestfs-tools   # virt-cat through serve's nbd://?socket= URI (tests/nbd/test-nbd-serve-guestfs)
         libvirt-daemon-system libvirt-clients libvirt-daemon-driver-qemu   # source libvirt:DOMAIN; the libvirt suite's libvirtd (tests/libvirt/libvirt-lib.sh)
         systemd)   # systemd-analyze, systemd-socket-activate (unit tests); systemd.pc: the unit directory
peers=(borgbackup python3-llfuse restic casync python3-matplotlib
       virtnbdbackup   # bench/libvirt-backup.sh beside blkvault's libvirt source (PyPI has none)
       debootstrap)   # the installed-system image of the benchmarks (images/make-installed.sh)
# the vm suite: Debian's kernel booted under QEMU (tests/vm/), with what the guest runs
vm=(qemu-system-x86 linux-image-amd64 busybox-static udev cryptsetup-bin nbd-client socat
    lvm2   # lvm2: the LVM snapshot job (test-vm-lvm)
    qemu-guest-agent)   # qemu-ga, copied into the libvirt guest's initramfs (tests/libvirt/agent-guest)

missing=()
for p in "${build[@]}" "${runtime[@]}" "${peers[@]}" "${vm[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# Go builds versitygw below; a machine that has none gets Debian's (too old for versitygw, but
# able to fetch the toolchain it needs from the Go module proxy).
if ! command -v go >/dev/null 2>&1 && [ ! -x /usr/local/go/bin/go ]; then
    missing+=(golang-go)
fi
export DEBIAN_FRONTEND=noninteractive
if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: every package is installed; nothing to do (no apt-get update)" >&2
else
    echo "install-deps: missing: ${missing[*]}" >&2
    echo "install-deps: apt-get update" >&2
    apt-get -o DPkg::Lock::Timeout=900 update
    echo "install-deps: apt-get install ${missing[*]}" >&2
    # Without systemd as PID 1 (a container, CI), the postinst scripts of daemons (libvirtd,
    # virtlogd, nbd-client ...) would start them through their init scripts: a policy-rc.d that
    # says no keeps them stopped (the tests start what they need). One already there is kept.
    policy=
    if [ "$(cat /proc/1/comm 2>/dev/null)" != systemd ] && [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\n# scripts/install-deps.sh: no daemon starts during the install\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        policy=/usr/sbin/policy-rc.d
    fi
    rc=0
    apt-get -o DPkg::Lock::Timeout=900 install -y --no-install-recommends "${missing[@]}" || rc=$?
    [ -z "$policy" ] || rm -f "$policy"
    [ $rc = 0 ] || exit $rc
fi

"$(dirname "$0")/build-versitygw.sh"
