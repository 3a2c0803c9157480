#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# blkvault files through libguestfs without root (issue 25): a GPT disk with ext4, XFS, btrfs,
# FAT and an LVM physical volume (its logical volume holds ext4), each made by its mkfs here, is
# backed up; then, as nobody, ls, cat, get, find and diff are compared with the files themselves (XFS,
# btrfs and the logical volume mounted read-only on the host; FAT read back with mtools, which the
# host kernel may not mount). Each command boots the appliance once (~50-90 s under TCG), so
# the test runs six: ls of the partitions (which names the logical volumes), ls of an XFS
# directory, cat of an XFS file, one get of paths on every filesystem (with a path that is not there and a
# filesystem that does not mount), find on btrfs, and diff of two snapshots of an XFS+FAT disk
# (one appliance for both: btrfs or LVM in both would need two), one of whose files sits on a
# damaged chunk: that file fails with its path, the others are still compared (exit 4).
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/nbd/nbd-lib.sh"
. "$SOURCE_ROOT/tests/root/files-lib.sh"
need_root
need_cmd losetup sfdisk mkfs.ext4 mkfs.xfs mkfs.btrfs mkfs.vfat mcopy mmd pvcreate vgcreate vgcfgbackup \
    vgcfgrestore setpriv mount umount python3 guestfish
[ -e /dev/loop-control ] || skip "no loop devices"
export TZ=UTC
chmod 755 "$T"
mnt=$T/mnt
mkdir "$mnt"
start=$(date +%s)

# --- the disk: p1 ext4, p2 XFS, p3 btrfs, p4 FAT, p5 LVM (bvvg/data: ext4), p6 a broken XFS ----
img=$T/disk.img
truncate -s 600M "$img"
sfdisk -q "$img" <<'EOF'
label: gpt
start=2048, size=16MiB, name=sys
size=320MiB, name=xfspart
size=128MiB, name=btrfspart
size=40MiB, name=fatpart
size=48MiB, name=lvmpart
size=4MiB, name=broken
EOF
declare -A off size
table() { # the byte offset and size of each partition of $1 into off[N], size[N]
    while read -r n s z; do off[$n]=$((s * 512)) size[$n]=$((z * 512)); done < <(
        sfdisk -d "$1" | sed -n 's/^.*img\([0-9]\) : start= *\([0-9]*\), size= *\([0-9]*\),.*/\1 \2 \3/p')
}
table "$img"
part() { attach_loop "$1" "${@:3}" --offset="${off[$2]}" --sizelimit="${size[$2]}" "$img"; }
fill() { # a tree in $1: modes, owners, times, links, a fifo, a sparse file, a UTF-8 name
    mkdir -p "$1/etc/deep" "$1/home/user"
    echo "127.0.0.1 $2" >"$1/etc/hosts"
    printf 'leaf of %s\n' "$2" >"$1/etc/deep/leaf.txt"
    randfile "$1/home/user/big.bin" 3 "guestfs-$2"
    head -c 3000 /dev/urandom >"$1/home/user/odd size.txt"
    printf 'caf\xc3\xa9\n' >"$1/home/user/café.txt"
    : >"$1/home/user/empty"
    truncate -s 5M "$1/home/user/sparse"
    echo middle | dd of="$1/home/user/sparse" bs=1 seek=2M conv=notrunc status=none
    ln -s ../../etc/hosts "$1/home/user/rel-link"
    ln -s /etc/hosts "$1/home/user/abs-link"
    ln -s /nowhere "$1/home/user/dangling"
    mkfifo "$1/home/fifo"
    chmod 600 "$1/home/user/big.bin"
    chmod 4755 "$1/home/user/odd size.txt"
    chown 1234:5678 "$1/home/user/big.bin"
    chown -h 1234:5678 "$1/home/user/rel-link"
    touch -d '2001-02-03 04:05:06.123456789' "$1/etc/hosts"
    touch -h -d '2002-03-04 05:06:07' "$1/home/user/abs-link"
    touch -d '2003-04-05 06:07:08' "$1/etc/deep"
}
mkfs_fill() { # mkfs_fill N LABEL MKFS...
    local n=$1 label=$2 dev
    part dev "$n"
    "${@:3}" "$dev" >/dev/null
    mount "$dev" "$mnt"
    fill "$mnt" "$label"
    umount "$mnt"
    detach_loop "$dev"
}
mkfs_fill 1 sys mkfs.ext4 -q -L sys
mkfs_fill 2 xroot mkfs.xfs -q -f -L xroot
mkfs_fill 3 broot mkfs.btrfs -q -f -L broot
# FAT: made and filled without a mount (mtools), times kept (-m)
mkdir -p "$T/fat/docs/sub"
echo "on FAT" >"$T/fat/readme.txt"
head -c 200000 /dev/urandom >"$T/fat/docs/blob.bin"
echo deeper >"$T/fat/docs/sub/note.txt"
touch -d '2004-05-06 07:08:10' "$T/fat/readme.txt"
part fatdev 4
mkfs.vfat -n FATTY "$fatdev" >/dev/null
mcopy -s -m -i "$fatdev" "$T/fat/readme.txt" "$T/fat/docs" ::/
detach_loop "$fatdev"
# LVM without device-mapper (none here): the PV and VG by pvcreate/vgcreate, the LV written into
# the VG's metadata (vgcfgrestore), its ext4 made at the LV's place in the PV (1 MiB in, linear)
lvmconf='devices { use_devicesfile = 0 } activation { monitoring = 0 }'
part pv 5
pvcreate -q --config "$lvmconf" "$pv" >/dev/null 2>&1 || die "pvcreate failed"
vgcreate -q --config "$lvmconf" bvvg "$pv" >/dev/null 2>&1 || die "vgcreate failed"
vgcfgbackup -q --config "$lvmconf" -f "$T/vg.txt" bvvg >/dev/null 2>&1 || die "vgcfgbackup failed"
python3 - "$T/vg.txt" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
i = s.index("physical_volumes {")
depth, j = 0, i
while True:
    depth += {"{": 1, "}": -1}.get(s[j], 0)
    if s[j] == "}" and depth == 0:
        break
    j += 1
lv = """
	logical_volumes {
		data {
			id = "bvbvbv-0000-1111-2222-3333-4444-555555"
			status = ["READ", "WRITE", "VISIBLE"]
			flags = []
			segment_count = 1
			segment1 {
				start_extent = 0
				extent_count = 8
				type = "striped"
				stripe_count = 1
				stripes = [
					"pv0", 0
				]
			}
		}
	}
"""
open(p, "w").write(s[:j + 1] + lv + s[j + 1:])
PY
vgcfgrestore -q --config "$lvmconf" -f "$T/vg.txt" bvvg >/dev/null 2>&1 || die "vgcfgrestore failed"
detach_loop "$pv"
lvoff=$((off[5] + 1048576))
attach_loop lv --offset="$lvoff" --sizelimit=$((32 << 20)) "$img"
mkfs.ext4 -q -L lvdata "$lv"
mount "$lv" "$mnt"
fill "$mnt" lv
umount "$mnt"
detach_loop "$lv"
# p6: an XFS superblock magic over zeros, which the appliance cannot mount
printf 'XFSB' | dd of="$img" bs=1 seek="${off[6]}" conv=notrunc status=none

repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
bv backup "$repo" "$img" --name=disk -q >/dev/null
chmod -R o+rX "$repo"
mkdir -m 777 "$T/guestfs" "$T/out"
# nobody, with the plugin's preload (the build's sanitizers) for the private serve's nbdkit
XENV=()
files() {
    as_nobody env -u XDG_RUNTIME_DIR "${NBD_ENV[@]}" HOME="$T/guestfs" TMPDIR="$T/guestfs" \
        LIBGUESTFS_CACHEDIR="$T/guestfs" LIBGUESTFS_BACKEND=direct ${XENV[@]+"${XENV[@]}"} "$BLKVAULT" files "$@"
}
boots=0
booted() { # booted LOG: the command said it starts the appliance, and how long it took
    grep -q "^starting the libguestfs appliance (a small virtual machine" "$1" || { cat "$1" >&2; die "no word of the appliance"; }
    grep -Eo "^the appliance started in [0-9.]+ s" "$1" >&2 || { cat "$1" >&2; die "no appliance boot time"; }
    boots=$((boots + 1))
}
setup=$(($(date +%s) - start))

# --- errors without a boot --------------------------------------------------------------------
expect_fail 1 "^error: p5 of snapshot [0-9a-f]\{8\} is an LVM physical volume: name one of its logical volumes, as VG/LV:/path" \
    files "$repo" disk ls p5:/
expect_fail 2 "^error: snapshot [0-9a-f]\{8\} holds 6 partitions: name one, as p1:/etc" files "$repo" disk ls /etc

# --- boot 1: ls of the partitions names the logical volume ------------------------------------
files "$repo" disk ls >"$T/parts" 2>"$T/ls.err" || { cat "$T/ls.err" >&2; die "files ls failed"; }
booted "$T/ls.err"
for want in '^p2 +xfs .* xroot$' '^p3 +btrfs .* broot$' '^p4 +vfat .* FATTY$' '^p5 +LVM2_member .* lvmpart$' \
            '^bvvg/data +ext4 +32.0 MiB  lvm lvdata$'; do
    grep -Eq "$want" "$T/parts" || { cat "$T/parts"; die "ls lists no line like $want"; }
done

# a private serve that does not start, an appliance that does not (its kernel built: no boot)
XENV=(BLKVAULT_NBD_PLUGIN=/nonexistent/plugin.so)
expect_fail 1 "^error: nbdkit did not start serving snapshot [0-9a-f]\{8\}: its message above says why$" files "$repo" disk ls p2:/
XENV=(LIBGUESTFS_HV=/bin/false)
expect_fail 1 "^error: the libguestfs appliance did not start: /bin/false exited with error status 1\. (LIBGUESTFS_DEBUG=1 shows its boot)$" \
    files "$repo" disk ls p2:/
XENV=()
ls -d "$T/guestfs"/blkvault-serve.* 2>/dev/null && die "a private serve's directory was left behind"

# --- the trees on the host, read-only -------------------------------------------------------
declare -A hostdir
for n in 2 3; do
    part ro "$n" -r
    mkdir "$T/m$n"
    mount -o ro "$ro" "$T/m$n"
    on_exit "umount '$T/m$n'"
    hostdir[$n]=$T/m$n
done
attach_loop lvro -r --offset="$lvoff" --sizelimit=$((32 << 20)) "$img"
mkdir "$T/mlv"
mount -o ro "$lvro" "$T/mlv"
on_exit "umount '$T/mlv'"

# --- boot 2: ls of an XFS directory, line for line as the mounted one --------------------------
expected_ls "$T/m2/home/user" >"$T/want"
t0=$EPOCHREALTIME
files "$repo" disk ls xroot:/home/user >"$T/got" 2>"$T/ls.err" || { cat "$T/ls.err" >&2; die "files ls xroot:/home/user failed"; }
echo "files ls on XFS: $(awk "BEGIN { print $EPOCHREALTIME - $t0 }") s" >&2
booted "$T/ls.err"
diff "$T/want" "$T/got" >&2 || die "files ls of XFS differs from the mounted directory"

# --- boot 3: cat of an XFS file, byte for byte the mounted one ------------------------------------
files "$repo" disk cat "xroot:/home/user/odd size.txt" >"$T/cat.out" 2>"$T/cat.err" ||
    { cat "$T/cat.err" >&2; die "files cat of an XFS file failed"; }
booted "$T/cat.err"
cmp "$T/m2/home/user/odd size.txt" "$T/cat.out" || die "files cat of an XFS file differs from the mounted one"

# --- boot 4: one get of paths on every filesystem; one not there, one that does not mount ------
rc=0
t0=$EPOCHREALTIME
files "$repo" disk get p1:/etc/deep p2:/home p3:/etc p4:/readme.txt p4:/docs bvvg/data:/home/user p2:/nope p6:/x "$T/out" \
    2>"$T/get.err" || rc=$?
echo "files get on five filesystems: $(awk "BEGIN { print $EPOCHREALTIME - $t0 }") s" >&2
booted "$T/get.err"
[ "$rc" = 1 ] || { cat "$T/get.err" >&2; die "exit status $rc of get with a missing path and a filesystem that does not mount"; }
grep -q "^error: cannot copy 'p2:/nope': No such file or directory$" "$T/get.err" || { cat "$T/get.err" >&2; die "get of a missing path"; }
grep -q "^error: cannot mount the xfs filesystem of p6 of snapshot [0-9a-f]\{8\} in the appliance: " "$T/get.err" ||
    { cat "$T/get.err" >&2; die "get of a filesystem that does not mount"; }
compare_tree "$T/m2/home" "$T/out/home" no || die "get of XFS differs from the mounted tree"
compare_tree "$T/m3/etc" "$T/out/etc" no || die "get of btrfs differs from the mounted tree"
compare_tree "$T/mlv/home/user" "$T/out/user" no || die "get of the LVM logical volume differs from the mounted tree"
cmp "$T/out/deep/leaf.txt" <(printf 'leaf of sys\n') || die "get of ext4 beside the appliance's filesystems"
for f in readme.txt docs/blob.bin docs/sub/note.txt; do
    cmp "$T/fat/$f" "$T/out/$f" || die "get of FAT: $f differs"
done
assert_eq "$(stat -c %Y "$T/out/readme.txt")" "$(date -d '2004-05-06 07:08:10' +%s)" "the mtime of a FAT file"
[ "$(allocated "$T/out/home/user/sparse")" -lt 1048576 ] || die "the sparse file was written whole"
grep -q "^error: copied [0-9]* files (.*) to '$T/out'; what the errors above name was not copied$" "$T/get.err" || { cat "$T/get.err" >&2; die "no summary"; }
[ -p "$T/out/home/fifo" ] || die "the fifo was not made"
[ "$(stat -c %U "$T/out/home/user/big.bin")" = nobody ] || die "nobody's copy is not nobody's"

# --- boot 5: find --name on btrfs ----------------------------------------------------------------
(cd "$T/m3" && find . -name '*.txt' | sed 's|^\.|broot:|' | LC_ALL=C sort) >"$T/want"
files "$repo" disk find broot:/ --name='*.txt' 2>"$T/find.err" | LC_ALL=C sort >"$T/got"
booted "$T/find.err"
[ "$(wc -l <"$T/want")" -ge 2 ] || die "nothing to find"
diff "$T/want" "$T/got" >&2 || die "files find --name on btrfs differs from find -name"

# --- boot 6: diff of two snapshots of an XFS+FAT disk, one file on a damaged chunk ----------------
img=$T/disk2.img
truncate -s 460M "$img"
sfdisk -q "$img" <<'EOF2'
label: gpt
start=2048, size=320MiB, name=x
size=40MiB, name=b
EOF2
table "$img"
part x 1
part b 2
mkfs.xfs -q -f "$x"
mkfs.vfat "$b" >/dev/null
# the huge file first, backed up alone: its data lands in the packs of that backup, broken below
mount "$x" "$mnt"
randfile "$mnt/huge.bin" 24 guestfs-huge
umount "$mnt"
repo2=$T/repo2
bv init "$repo2" --encryption=none >/dev/null
bv backup "$repo2" "$img" --name=two -q >/dev/null
(cd "$repo2" && find packs -type f) | sort >"$T/huge-packs"
[ -s "$T/huge-packs" ] || die "the first backup wrote no pack"
mount "$x" "$mnt" && fill "$mnt" x && umount "$mnt"
mcopy -s -m -i "$b" "$T/fat/readme.txt" "$T/fat/docs" ::/
bv backup "$repo2" "$img" --name=two -q >/dev/null
mount "$x" "$mnt"
echo new >"$mnt/etc/new.conf"
mkdir "$mnt/etc/newdir" && echo x >"$mnt/etc/newdir/inner"
rm "$mnt/home/user/empty"
rm -r "$mnt/etc/deep"
printf '127.0.0.2 x\n' | dd of="$mnt/etc/hosts" conv=notrunc status=none   # same size
touch -d '2001-02-03 04:05:06.123456789' "$mnt/etc/hosts"                   # same mtime
echo more >>"$mnt/home/user/odd size.txt"
chmod 644 "$mnt/home/user/big.bin"
rm "$mnt/home/user/dangling" && mkdir "$mnt/home/user/dangling"
umount "$mnt"
echo added >"$T/added.txt"
mcopy -i "$b" "$T/added.txt" ::/added.txt
detach_loop "$x"
detach_loop "$b"
bv backup "$repo2" "$img" --name=two -q >/dev/null
ids=$(bv list "$repo2" --name=two --json | python3 -c 'import json,sys; print(" ".join(s["id"] for s in json.load(sys.stdin)))')
read -r _ snap1 snap2 <<<"$ids"
while read -r p; do
    flip_byte "$repo2/$p" $(($(stat -c %s "$repo2/$p") / 2))
done <"$T/huge-packs"
chmod -R o+rX "$repo2"
cat >"$T/want" <<'EOF2'
- p1:/etc/deep
- p1:/etc/deep/leaf.txt
M p1:/etc/hosts
+ p1:/etc/new.conf
+ p1:/etc/newdir
+ p1:/etc/newdir/inner
m p1:/home/user/big.bin
T p1:/home/user/dangling
- p1:/home/user/empty
M p1:/home/user/odd size.txt
+ p2:/added.txt
EOF2
rc=0
files "$repo2" "$snap1" diff "$snap2" --content >"$T/got" 2>"$T/diff.err" || rc=$?
booted "$T/diff.err"
[ "$(grep -c '^starting the libguestfs appliance' "$T/diff.err")" = 1 ] || { cat "$T/diff.err" >&2; die "diff booted twice"; }
diff "$T/want" "$T/got" >&2 || { cat "$T/diff.err" >&2; die "files diff"; }
[ "$rc" = 4 ] || { cat "$T/diff.err" >&2; die "exit status $rc of diff with a damaged file"; }
grep -q "^error: cannot read 'p1:/huge.bin': damaged data in the snapshot (the appliance's read failed with an I/O error): Bad message$" \
    "$T/diff.err" || { cat "$T/diff.err" >&2; die "diff did not name the damaged file"; }
grep -q "^4 added, 3 removed, 4 changed from snapshot ${snap1:0:8} to ${snap2:0:8}$" "$T/diff.err" ||
    { cat "$T/diff.err" >&2; die "no diff summary"; }
[ "$boots" = 6 ] || die "$boots appliance boots, not 6"
echo "files through libguestfs: ls, cat, get, find, diff and damage checked with $boots boots; setup ${setup} s, all $(($(date +%s) - start)) s" >&2
