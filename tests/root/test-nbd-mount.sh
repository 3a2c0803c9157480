#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# blkvault mount / umount of a partitioned image holding ext4, XFS and btrfs: each partition
# mounted through nbdkit + nbdfuse (or nbd-client) + a read-only loop device shows the original
# files; umount leaves nothing behind, also after the serving nbdkit was killed.
. "$SOURCE_ROOT/tests/lib.sh"
need_root
: "${NBD_PLUGIN:?run through meson test (needs the nbdkit plugin)}"
. "$SOURCE_ROOT/tests/nbd/nbd-lib.sh"
PY=$(nbd_python) || PY=python3
need_cmd sfdisk losetup mkfs.ext4 mkfs.xfs mkfs.btrfs nbdfuse fusermount3 openssl
[ -e /dev/fuse ] || skip "no /dev/fuse"
[ -e /dev/loop-control ] || skip "no loop devices"

img=$T/disk.img
truncate -s 700M "$img"
sfdisk -q "$img" <<'PARTS'
label: gpt
start=1MiB, size=64MiB, name=ext4
size=320MiB, name=xfs
size=160MiB, name=btrfs
PARTS
# one loop device per partition (offset/size: this host's kernel may not scan loop partitions)
part_loop() { sfdisk -J "$img" | "$PY" -c "import json,sys; p=json.load(sys.stdin)['partitiontable']['partitions'][$1-1]; print(p['start']*512, p['size']*512)"; }
mkdir -p "$T/src" "$T/mnt"
randfile "$T/src/big.bin" 5 mountbig
seq 1 20000 > "$T/src/numbers.txt"
mkdir -p "$T/src/dir/sub" && echo "hello from blkvault" > "$T/src/dir/sub/hello.txt"
declare -A fstype=([1]=ext4 [2]=xfs [3]=btrfs)
for i in 1 2 3; do
    read -r off size < <(part_loop $i)
    attach_loop loop -o "$off" --sizelimit "$size" "$img"
    case $i in
    1) mkfs.ext4 -q -F "$loop" ;;
    2) mkfs.xfs -q -f "$loop" ;;
    3) mkfs.btrfs -q -f "$loop" >/dev/null ;;
    esac
    mount "$loop" "$T/mnt"
    cp -a "$T/src/." "$T/mnt/"
    echo "partition $i" > "$T/mnt/which"
    umount "$T/mnt"
    detach_loop "$loop"
done

repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
bv backup "$repo" "$img" --name=parts >/dev/null

mp=$T/view
mkdir -p "$mp"
state_dir() { echo "/run/blkvault/mounts/$(realpath "$mp" | sed 's|^/||; s|/|-|g')"; }
check_clean() {
    ! mountpoint -q "$mp" || die "$mp still mounted"
    [ ! -e "$(state_dir)" ] || die "state directory $(state_dir) left behind"
    ! losetup -a | grep "$(state_dir)" >/dev/null || die "loop device left behind: $(losetup -a)"
    ! grep -q "$(state_dir)" /proc/self/mountinfo || die "fuse mount left behind"
}
on_exit "\"$BLKVAULT\" umount \"$mp\""

for i in 1 2 3; do
    "${NBD_ENV[@]}" "$BLKVAULT" mount "$repo" parts "$mp" --partition=$i 2>"$T/mount$i.log" ||
        { cat "$T/mount$i.log" >&2; die "blkvault mount --partition=$i failed"; }
    grep -q "mounted partition $i (${fstype[$i]}) of snapshot [0-9a-f]* read-only" "$T/mount$i.log" || { cat "$T/mount$i.log" >&2; die "no mount message"; }
    assert_eq "$(findmnt -n -o FSTYPE "$mp")" "${fstype[$i]}" "filesystem of partition $i"
    findmnt -n -o OPTIONS "$mp" | grep '^ro' >/dev/null || die "partition $i not mounted read-only"
    assert_eq "$(cat "$mp/which")" "partition $i" "contents of partition $i"
    for f in big.bin numbers.txt dir/sub/hello.txt; do assert_same "$T/src/$f" "$mp/$f"; done
    "$PY" -c 'import json,sys; s=json.load(open(sys.argv[1])); assert s["loop_device"].startswith("/dev/loop") and s["nbdkit_pid"] > 0, s' \
        "$(state_dir)/state.json" || die "state file does not record the loop device and nbdkit"
    "$BLKVAULT" umount "$mp" 2>"$T/umount$i.log" || { cat "$T/umount$i.log" >&2; die "umount failed"; }
    check_clean
done

# without --partition: the first partition with a filesystem
"${NBD_ENV[@]}" "$BLKVAULT" mount "$repo" parts "$mp" 2>"$T/mount-auto.log" || { cat "$T/mount-auto.log" >&2; die "mount failed"; }
assert_eq "$(cat "$mp/which")" "partition 1" "default partition"
# a busy mountpoint is refused with a clear error and stays mounted
( cd "$mp" && exec sleep 30 ) & busy=$!
on_exit "kill $busy"
# (held once its working directory is there: a fixed pause may be too short on a busy machine)
for _ in $(seq 200); do [ "$(readlink "/proc/$busy/cwd")" = "$(realpath "$mp")" ] && break; sleep 0.05; done
expect_fail 7 "^error: cannot unmount '$mp': it is busy (a process has a file open or its working directory there)$" \
    "$BLKVAULT" umount "$mp"
kill $busy; wait $busy 2>/dev/null || true
mountpoint -q "$mp" || die "busy umount removed the mount anyway"

# nbdkit killed under the mount: umount still cleans up everything
pid=$(cat "$(state_dir)/nbdkit.pid")
kill -9 "$pid"
for w in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
"$BLKVAULT" umount "$mp" 2>"$T/umount-killed.log" || { cat "$T/umount-killed.log" >&2; die "umount after a killed nbdkit failed"; }
check_clean

# errors: no such partition, not a blkvault mount
expect_fail 1 "^error: snapshot [0-9a-f]\{8\} has no partition 7 (it has 3 partitions)$" "${NBD_ENV[@]}" "$BLKVAULT" mount "$repo" parts "$mp" --partition=7
check_clean
expect_fail 1 "^error: '$mp' is not a blkvault mount (no state in '$(state_dir)')$" "$BLKVAULT" umount "$mp"
# a state directory left behind (no state file in it) blocks a mount until umount removes it
mkdir -p "$(state_dir)"
expect_fail 7 "^error: '$mp' has a blkvault mount already (state in '$(state_dir)'); run 'blkvault umount $mp' first$" "${NBD_ENV[@]}" "$BLKVAULT" mount "$repo" parts "$mp"
"$BLKVAULT" umount "$mp" 2>"$T/umount-stale.log" || { cat "$T/umount-stale.log" >&2; die "umount of a stale state directory failed"; }
check_clean
