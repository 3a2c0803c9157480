#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# `blkvault target format` on a device it cannot open exclusively (exit 7) says who holds it: a
# mount of it here, a mount of one of its partitions, a mount left only in another process's mount
# namespace (an umount here does not release it: a namespace made while it was mounted, as libvirt
# makes one for each QEMU it starts, keeps it; bench/fs-compare's btrfs row once failed so in CI),
# and a process that holds it open. Once released, the same format works.
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd losetup partx mkfs.ext4 mkfs.xfs sfdisk unshare python3
[ -e /dev/loop-control ] || skip "no loop devices"

opts=(--no-luks --yes --key-dir="$T/keys" --config="$T/etc/blkvault.conf" --run-dir="$T/run")
mkdir -p "$T/mnt" "$T/etc"
truncate -s 300M "$T/d.img"
attach_loop dev "$T/d.img"
mkfs.xfs -q -f "$dev"
name=x
busy() {
    expect_fail 7 "^error: '$dev' is in use$1; refusing to format it$" bv target format "$dev" --name="$name" "${opts[@]}"
}

# mounted here
mount "$dev" "$T/mnt"
on_exit "umount '$T/mnt'"
holder=
on_exit 'kill ${holder:-} 2>/dev/null'
busy ": mounted on $T/mnt"
# mounted here and in a mount namespace made meanwhile: here first
# (a slave of ours, where it binds $T/mnt on $T/hold: our umount of $T/mnt reaches it where the
# machine's mounts are shared, scripts/test.sh, that bind mount stays; as a slave it keeps none of
# the other tests' filesystems)
mkdir "$T/hold"
unshare -m --propagation slave sh -c 'mount --bind "$1" "$2" && exec sleep 600' sh "$T/mnt" "$T/hold" &
holder=$!
for _ in $(seq 100); do [ "$(cat /proc/$holder/comm)" = sleep ] && break; sleep 0.1; done
[ "$(readlink /proc/$holder/ns/mnt)" != "$(readlink /proc/self/ns/mnt)" ] || die "unshare made no mount namespace"
busy ": mounted on $T/mnt"
# unmounted here, still mounted there: the process is named (or another one whose namespace, made
# meanwhile elsewhere on the machine, holds a copy of the mount too)
umount "$T/mnt"
busy ": mounted on $T/\(mnt\|hold\) in the mount namespace of process [0-9]* ([^)]*), not in this one"
pid=$(sed -n 's/.* of process \([0-9]*\) .*/\1/p' "$T/.err")
[ "$pid" = "$holder" ] || grep_q " ${T//./\\.}/\(mnt\|hold\) " "/proc/$pid/mountinfo" ||
    { cat "$T/.err"; die "format named a process that does not hold the mount"; }
grep -q "process $holder (sleep)" "$T/.err" || echo "note: format named process $pid, which holds the mount too"
kill "$holder"
wait "$holder" 2>/dev/null || true
holder=

# a process that holds a device open exclusively (another device: the first one's mount may stay
# a moment after its namespace's last process, or longer in a namespace made meanwhile elsewhere)
truncate -s 300M "$T/e.img"
attach_loop dev "$T/e.img"
mkfifo "$T/ready"
python3 -c '
import os, sys, time
ready = open(sys.argv[2], "w")
fd = os.open(sys.argv[1], os.O_RDWR | os.O_EXCL)
ready.write("held\n")
ready.close()
time.sleep(600)' "$dev" "$T/ready" &
holder=$!
assert_eq "$(cat "$T/ready")" held "the exclusive opener"
busy ": open in process $holder (python3)"
kill "$holder"
wait "$holder" 2>/dev/null || true
holder=

# released: the format works
bv target format "$dev" --name=x "${opts[@]}" >/dev/null

# a device one of whose partitions is mounted
truncate -s 300M "$T/p.img"
printf 'label: dos\n,100M\n,\n' | sfdisk -q "$T/p.img"
attach_loop pdev "$T/p.img"
loop_partition p1 "$pdev" 1 "$T/p1"
mkfs.ext4 -q "$T/p1"
mount "$T/p1" "$T/mnt"
on_exit "umount '$T/mnt'"
dev=$pdev name=y
busy ": mounted on $T/mnt (its $p1)"
umount "$T/mnt"
echo "ok: format names who holds a busy device: a mount here, another namespace's, a process, a partition's mount"
