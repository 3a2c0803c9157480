#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Guest script (meson: vmrun --scratch 96M --scratch 320M --scratch 160M -- bash THIS):
# `blkvault target format` with LUKS2 on three virtio disks, one each with ext4, XFS and btrfs,
# then `target run` backs up the job and verifies it, and leaves the drive locked: no mapper
# device, no mount.
# Opened by hand as an operator without this machine would (cryptsetup and the key file), each
# drive's snapshot restores bit-exact, and `blkvault mount` of it takes the kernel's nbd path
# (nbd-client on /dev/nbdN, not nbdfuse) and shows the files of the backed-up filesystem.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/vm/vm-lib.sh"
vm_guest_only
: "${NBD_PLUGIN:?run through meson test (needs the nbdkit plugin)}"
. "$SOURCE_ROOT/tests/nbd/nbd-lib.sh"
need_cmd cryptsetup dmsetup mkfs.ext4 mkfs.xfs mkfs.btrfs nbd-client nbdkit sha256sum
# argon2 at its benchmarked cost is slow under emulation and proves nothing here
export BLKVAULT_TEST_LUKS_ARGON2=4,32768

# where a guest stalls: the kernel stacks of processes in uninterruptible sleep (request_module,
# a dm ioctl), every 150 s while the test runs
stuck_report() {
    while sleep 150; do
        for p in $(ps -eo pid=,stat= | awk '$2 ~ /^D/ {print $1}'); do
            echo "--- stuck: $p $(tr '\0' ' ' </proc/$p/cmdline)"
            cat "/proc/$p/stack"
        done
    done
}
stuck_report &
on_exit "kill $!"
vm_log "modules"
modprobe -a dm_crypt nbd

# the job's source: an ext4 image with files, so that a mounted snapshot shows them
mkdir -p "$T/src/dir" "$T/mnt" "$T/view"
randfile "$T/src/big.bin" 3 vmtarget
seq 1 20000 >"$T/src/dir/numbers.txt"
truncate -s 16M "$T/vm.img"
mkfs.ext4 -q -F -d "$T/src" "$T/vm.img"
conf=$T/etc/blkvault.conf
mkdir -p "$T/etc"
cat >"$conf" <<EOF
[job vm]
source = $T/vm.img
EOF
opts=(--config="$conf")
on_exit "umount $T/view; umount $T/mnt; cryptsetup close restore"

locked() { # DEV NAME: no blkvault mapper device and no mount of the drive are left
    assert_eq "$(dmsetup ls --target crypt 2>/dev/null | grep -c blkvault)" 0 "blkvault mapper devices after $2"
    ! ls /dev/mapper | grep -q blkvault || die "$2: /dev/mapper still has $(ls /dev/mapper)"
    ! grep -q -e "$1" -e /dev/mapper -e /dev/dm- /proc/self/mountinfo || die "$2: a mount is left: $(grep -e "$1" -e mapper /proc/self/mountinfo)"
}

declare -A disk=([ext4]=/dev/vda [xfs]=/dev/vdb [btrfs]=/dev/vdc)
for fs in ext4 xfs btrfs; do
    dev=${disk[$fs]}
    vm_log "$fs: format $dev"
    bv target format "$dev" --name="usb-$fs" --fs="$fs" --key-dir="$T/keys" "${opts[@]}" >"$T/out" ||
        { cat "$T/out"; die "target format of $dev with $fs failed"; }
    uuid=$(blkid -s UUID -o value "$dev")
    assert_eq "$(blkid -s TYPE -o value "$dev")" crypto_LUKS "$dev after format"
    assert_eq "$(head -n1 "$T/out")" "target 'usb-$fs' on $dev: LUKS2 with $fs, UUID $uuid, repository 'blkvault', registered in $T/etc/conf.d/50-target-usb-$fs.conf"
    grep -qx "without it neither the drive's LUKS container nor the repository on it can be opened." "$T/out" ||
        { cat "$T/out"; die "format did not say what the key file protects"; }
    locked "$dev" "format of $fs"
    if [ "$fs" = ext4 ]; then
        # the test knob: fixed argon2id costs instead of the benchmark
        cryptsetup luksDump "$dev" >"$T/dump"
        for want in "PBKDF:      argon2id" "Time cost:  4" "Memory:     32768" "Threads:    1"; do
            grep -q "^[[:space:]]*$want\$" "$T/dump" || { cat "$T/dump"; die "keyslot lacks '$want'"; }
        done
    fi
    vm_log "$fs: run"
    bv target run "$dev" "${opts[@]}" >"$T/out" || { cat "$T/out"; die "target run of $fs failed"; }
    grep -q "^job vm: snapshot [0-9a-f]\{8\}, [0-9.]* [KM]i\?B new, verified$" "$T/out" || { cat "$T/out"; die "$fs: job line"; }
    tail -n1 "$T/out" | grep -q "^target usb-$fs: 1 jobs, 0 failed, [0-9.]* [KM]i\?B new; safe to unplug$" ||
        { cat "$T/out"; die "$fs: summary line"; }
    locked "$dev" "run of $fs"
    cryptsetup isLuks "$dev" || die "$dev is no longer LUKS after the run"

    # by hand, with the key file only: the snapshot restores bit-exact and mounts through nbd
    cryptsetup open --readonly --key-file "$T/keys/usb-$fs.key" "$dev" restore
    mount -o ro /dev/mapper/restore "$T/mnt"
    assert_eq "$(findmnt -n -o FSTYPE "$T/mnt")" "$fs" "filesystem inside the LUKS container"
    bv restore "$T/mnt/blkvault" vm "$T/restored.img" --key-file="$T/keys/usb-$fs.key" >/dev/null 2>&1 ||
        die "$fs: restore failed"
    assert_eq "$(sha256sum <"$T/restored.img")" "$(sha256sum <"$T/vm.img")" "$fs: sha256 of the restored image"
    rm "$T/restored.img"
    if [ "$fs" = xfs ]; then
        vm_log "$fs: blkvault mount"
        "${NBD_ENV[@]}" "$BLKVAULT" mount "$T/mnt/blkvault" vm "$T/view" --key-file="$T/keys/usb-$fs.key" 2>"$T/mount.log" ||
            { cat "$T/mount.log"; die "blkvault mount failed"; }
        grep -q "^attached the export to /dev/nbd[0-9]* (nbd-client)$" "$T/mount.log" || { cat "$T/mount.log"; die "blkvault mount did not use nbd-client"; }
        nbd=$(sed -n 's|^attached the export to \(/dev/nbd[0-9]*\) (nbd-client)$|\1|p' "$T/mount.log")
        assert_eq "$(cat "/sys/block/${nbd#/dev/}/size")" $((16 << 11)) "sectors of $nbd"
        assert_eq "$(findmnt -n -o FSTYPE "$T/view")" ext4 "filesystem of the mounted snapshot"
        findmnt -n -o OPTIONS "$T/view" | grep -q '^ro' || die "the snapshot is not mounted read-only"
        for f in big.bin dir/numbers.txt; do assert_same "$T/src/$f" "$T/view/$f"; done
        "$BLKVAULT" umount "$T/view" 2>"$T/umount.log" || { cat "$T/umount.log"; die "blkvault umount failed"; }
        ! mountpoint -q "$T/view" || die "$T/view still mounted"
        assert_eq "$(cat "/sys/block/${nbd#/dev/}/size")" 0 "sectors of $nbd after umount (detached)"
    fi
    umount "$T/mnt"
    cryptsetup close restore
    vm_log "$fs: ok"
done
