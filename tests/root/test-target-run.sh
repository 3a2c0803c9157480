#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# `blkvault target run` on loop devices formatted by `target format --no-luks` with ext4, XFS and
# btrfs: every job of the target is backed up, verified and pruned by its keep-* (then gc), the
# snapshot restores bit-exact, the drive is left unmounted (restored from a read-only mount of
# it); by device or by name; two drives run at once one after the
# other (the second says it waits for the first); an unregistered drive is ignored (exit 0, one line); a restore-only drive is not
# written to; a failing job gives exit 1 and its message; the errors of a name.
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd losetup mkfs.ext4 mkfs.xfs mkfs.btrfs sha256sum
[ -e /dev/loop-control ] || skip "no loop devices"

conf=$T/etc/blkvault.conf
mkdir -p "$T/etc" "$T/mnt"
opts=(--config="$conf" --run-dir="$T/run")
randfile "$T/vm.img" 6 target-run
cat > "$conf" <<EOF
[job vm]
source = $T/vm.img
keep-daily = 7
EOF
declare -A devs
for fs in ext4 xfs btrfs; do
    loop_target "devs[$fs]" "usb-$fs" 400M --fs="$fs" "${opts[@]}"
done

# by device: the job backed up and verified, the drive unmounted, the snapshot restores
for fs in ext4 xfs btrfs; do
    dev=${devs[$fs]}
    bv target run "$dev" "${opts[@]}" >"$T/out" || { cat "$T/out"; die "target run of $fs failed"; }
    grep -q "^job vm: snapshot [0-9a-f]\{8\}, 6.0 MiB new, verified$" "$T/out" || { cat "$T/out"; die "$fs: job line"; }
    grep -qx "job vm: retention kept 1 snapshots, forgot 0" "$T/out" ||
        { cat "$T/out"; die "$fs: the run did not prune by keep-daily"; }
    assert_eq "$(tail -n1 "$T/out")" "target usb-$fs: 1 jobs, 0 failed, 6.0 MiB new; safe to unplug"
    ! grep -q " $dev " /proc/self/mountinfo || die "$fs: the drive is still mounted"
    mount -o ro "$dev" "$T/mnt"   # as an operator restores: nothing written to the drive
    bv restore "$T/mnt/blkvault" vm "$T/out.img" --key-file="$T/keys/usb-$fs.key" >/dev/null ||
        { umount "$T/mnt"; die "$fs: restore"; }
    umount "$T/mnt"
    assert_same "$T/vm.img" "$T/out.img"
    rm "$T/out.img"
done
# a repository written before backups made locks/gc too still opens on a read-only mount
mount "${devs[ext4]}" "$T/mnt" && rm "$T/mnt/blkvault/locks/gc" && umount "$T/mnt"
mount -o ro "${devs[ext4]}" "$T/mnt"
bv verify "$T/mnt/blkvault" --key-file="$T/keys/usb-ext4.key" >/dev/null || { umount "$T/mnt"; die "verify on a read-only mount without locks/gc"; }
umount "$T/mnt"

# by name; two at once: both complete (the run lock orders them)
bv target run usb-xfs "${opts[@]}" >"$T/a.out" 2>&1 &
pa=$!
bv target run usb-btrfs "${opts[@]}" >"$T/b.out" 2>&1 &
pb=$!
wait $pa || { cat "$T/a.out"; die "concurrent run of usb-xfs failed"; }
wait $pb || { cat "$T/b.out"; die "concurrent run of usb-btrfs failed"; }
# the second snapshot of the day: keep-daily = 7 keeps it and forgets the first
grep -qx "job vm: retention kept 1 snapshots, forgot 1" "$T/a.out" ||
    { cat "$T/a.out"; die "the second run of the day did not forget the first snapshot"; }
assert_eq "$(tail -n1 "$T/a.out")" "target usb-xfs: 1 jobs, 0 failed, 0 B new; safe to unplug"
assert_eq "$(tail -n1 "$T/b.out")" "target usb-btrfs: 1 jobs, 0 failed, 0 B new; safe to unplug"
# a run that must wait for another's lock says so, once, naming it (held in a write of its backup)
randfile "$T/vm.img" 6 target-run-2
BV_STALL_WRITE=1 stall_start $((2 * 1048576)) "$T/held.err" "$BLKVAULT" target run usb-xfs "${opts[@]}"
held=$pid
bv target run usb-btrfs "${opts[@]}" >"$T/w.out" 2>"$T/w.err" &
pw=$!
for _ in $(seq 300); do grep -q "waiting" "$T/w.err" && break; sleep 0.1; done
touch "$T/gate"
wait $held || { cat "$T/held.err"; die "the held run failed"; }
pid=
wait $pw || { cat "$T/w.out" "$T/w.err"; die "the waiting run failed"; }
assert_eq "$(cat "$T/w.err")" "target usb-btrfs: waiting for the run of target usb-xfs (pid $held) to finish"

# unregistered: ignored, exit 0, one line
truncate -s 64M "$T/stray.img"
mkfs.ext4 -q "$T/stray.img"
attach_loop stray "$T/stray.img"
out=$(bv target run "$stray" "${opts[@]}" 2>&1)
assert_eq "$out" "debug: '$stray' (UUID $(blkid -s UUID -o value "$stray")) is not a registered target, ignoring"

# restore-only: mounted read-only, nothing written
sed -i 's/^mode = backup$/mode = restore-only/' "$T/etc/conf.d/50-target-usb-ext4.conf"
before=$(sha256sum < "${devs[ext4]}")
out=$(bv target run usb-ext4 "${opts[@]}")
assert_eq "$out" "target usb-ext4: restore-only, mounted read-only and nothing written; safe to unplug"
assert_eq "$(sha256sum < "${devs[ext4]}")" "$before" "a restore-only drive was written to"

# a failing job: exit 1, the job and what failed named (a missing source by its path)
rm "$T/vm.img"
expect_fail 1 "^error: target usb-xfs: job vm: cannot open its source '$T/vm.img': No such file or directory$" bv target run usb-xfs "${opts[@]}"
grep -qx "target usb-xfs: 1 jobs, 1 failed, 0 B new; safe to unplug" "$T/.out" || die "summary of a failed job"

# names
expect_fail 1 "^error: no target 'usb-zz' in the configuration (see 'blkvault target list')$" bv target run usb-zz "${opts[@]}"
detach_loop "${devs[btrfs]}"
expect_fail 1 "^error: target 'usb-btrfs' (UUID [0-9a-f-]*) is not attached$" bv target run usb-btrfs "${opts[@]}"
