#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# `blkvault target format --no-luks` on loop devices with ext4, XFS and btrfs: a 0400 key file,
# the filesystem (found by libblkid with the UUID the config records), a repository inside that
# opens with the key file, the [target NAME] section that config check accepts and target list
# shows; the refusals (a device with a filesystem or a partition table without --yes, a mounted
# device even with --yes, a name already registered, an unknown filesystem); and, since this
# kernel has no device-mapper, the LUKS path refused before anything is written, with the
# message that says so and a retry that works.
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd losetup mkfs.ext4 mkfs.xfs mkfs.btrfs sfdisk blkid cryptsetup dmsetup
[ -e /dev/loop-control ] || skip "no loop devices"

conf=$T/etc/blkvault.conf
opts=(--key-dir="$T/keys" --config="$conf")
mkdir -p "$T/mnt"
declare -A devs
for fs in ext4 xfs btrfs; do
    truncate -s 400M "$T/$fs.img"
    attach_loop dev "$T/$fs.img"
    devs[$fs]=$dev
    bv target format "$dev" --name="usb-$fs" --fs="$fs" --no-luks "${opts[@]}" >"$T/out"
    uuid=$(blkid -s UUID -o value "$dev")
    assert_eq "$(blkid -s TYPE -o value "$dev")" "$fs" "filesystem made by target format"
    assert_eq "$(head -n1 "$T/out")" "target 'usb-$fs' on $dev: $fs, UUID $uuid, repository 'blkvault', registered in $T/etc/conf.d/50-target-usb-$fs.conf"
    grep -qx "Keep a copy of the key file $T/keys/usb-$fs.key somewhere other than this machine and the drive:" "$T/out" ||
        die "format did not say which key file to keep"
    assert_eq "$(stat -c '%a %s' "$T/keys/usb-$fs.key")" "400 64" "key file mode and size"
    grep -qx "uuid = $uuid" "$T/etc/conf.d/50-target-usb-$fs.conf" || die "config entry lacks the uuid"
    mount "$dev" "$T/mnt"
    bv list "$T/mnt/blkvault" --key-file="$T/keys/usb-$fs.key" >/dev/null || { umount "$T/mnt"; die "the repository on $fs does not open with the key file"; }
    expect_fail 7 "^error: '$dev' is in use: mounted on $T/mnt; refusing to format it$" \
        bv target format "$dev" --name=again --yes "${opts[@]}"
    umount "$T/mnt"
done
# the main file may be missing for format and list; config check wants the one it is given
: > "$conf"
assert_eq "$(bv config check --config="$conf")" "configuration ok: 3 targets, 0 jobs, 0 exports (4 files read)"
bv target list --config="$conf" >"$T/list"
assert_eq "$(wc -l < "$T/list")" 3 "targets listed"
grep -q "^usb-xfs  *$(blkid -s UUID -o value "${devs[xfs]}") backup  *no-luks attached ${devs[xfs]}$" "$T/list" || { cat "$T/list"; die "target list"; }

# refusals: a filesystem, a partition table, a registered name, an unknown filesystem
dev=${devs[ext4]}
uuid=$(blkid -s UUID -o value "$dev")
expect_fail 1 "^error: '$dev' holds ext4 (UUID $uuid); refusing to format it (--yes destroys it)$" \
    bv target format "$dev" --name=other --no-luks "${opts[@]}"
expect_fail 1 "^error: target 'usb-xfs' is already registered ($T/etc/conf.d/50-target-usb-xfs.conf:2): give this drive another --name (to reuse the name, remove that section and move the old drive's key file away)$" \
    bv target format "$dev" --name=usb-xfs --no-luks --yes "${opts[@]}"
# the section removed by hand, the old drive's key file still there: said what it is, and kept
mv "$T/etc/conf.d/50-target-usb-xfs.conf" "$T/usb-xfs.conf"
expect_fail 1 "^error: the key file '$T/keys/usb-xfs.key' exists: it opens the drive once registered as usb-xfs; move it away (keep it while that drive's backups matter) or give this drive another --name$" \
    bv target format "$dev" --name=usb-xfs --no-luks --yes "${opts[@]}"
# a format that fails before it starts leaves the drive as it was, although --yes was given
assert_eq "$(blkid -s UUID -o value "$dev")" "$uuid" "the filesystem of a drive whose format was refused"
mv "$T/usb-xfs.conf" "$T/etc/conf.d/50-target-usb-xfs.conf"
expect_fail 2 "^error: unknown filesystem 'vfat' (ext4, xfs or btrfs)$" bv target format "$dev" --name=x --fs=vfat "${opts[@]}"
expect_fail 2 "^error: target format needs --name=NAME$" bv target format "$dev" "${opts[@]}"
truncate -s 64M "$T/pt.img"
echo 'label: gpt' | sfdisk -q "$T/pt.img"
attach_loop pt "$T/pt.img"
expect_fail 1 "^error: '$pt' holds a gpt partition table; refusing to format it (--yes destroys it)$" \
    bv target format "$pt" --name=pt --no-luks "${opts[@]}"
[ ! -e "$T/keys/pt.key" ] || die "a refused format left a key file"

# LUKS: this kernel has no device-mapper; the guest tests (tests/vm) cover the whole path. The
# format is refused before anything is written (issue 21, finding 7: it used to derive the
# keyslot's key for 18 s, leave a LUKS header and then suggest a retry with --no-luks that the
# header made it refuse without --yes), and the retry it suggests works as it is.
# (/dev/mapper/control may exist without device-mapper in the kernel: ask the kernel, after
# loading the module as target format would)
modprobe -q dm_crypt 2>/dev/null || true
if ! dmsetup targets 2>/dev/null | grep_q '^crypt '; then
    truncate -s 64M "$T/blank.img"
    attach_loop blank "$T/blank.img"
    start=$(date +%s)
    expect_fail 1 "^error: this kernel has no dm-crypt (device-mapper's crypt target), which a LUKS drive needs: load it (modprobe dm_crypt), or format '$blank' without LUKS (--no-luks); nothing was written$" \
        bv target format "$blank" --name=luks "${opts[@]}"
    [ $(($(date +%s) - start)) -lt 5 ] || die "the refusal took $(($(date +%s) - start)) s"
    cmp -n $((64 << 20)) "$blank" /dev/zero || die "a LUKS format refused for want of dm-crypt wrote to the drive"
    [ ! -e "$T/keys/luks.key" ] || die "a refused format left its key file"
    [ ! -e "$T/etc/conf.d/50-target-luks.conf" ] || die "a refused format registered its target"
    # with --yes over a partition table: refused all the same, the table kept
    expect_fail 1 "^error: this kernel has no dm-crypt" bv target format "$pt" --name=luks --yes "${opts[@]}"
    assert_eq "$(blkid -p -s PTTYPE -o value "$pt")" gpt "the partition table after a refused LUKS format"
    # the retry the message suggests
    bv target format "$blank" --name=luks --no-luks "${opts[@]}" >/dev/null || die "the suggested retry with --no-luks failed"
    assert_eq "$(blkid -s TYPE -o value "$blank")" ext4 "the drive after the retry with --no-luks"
fi
BLKVAULT_TEST_LUKS_ARGON2=4 expect_fail 2 "^error: BLKVAULT_TEST_LUKS_ARGON2 must be ITERATIONS,MEMORY_KIB (e.g. 4,32768), not '4'$" \
    bv target format "$pt" --name=luks --yes "${opts[@]}"
