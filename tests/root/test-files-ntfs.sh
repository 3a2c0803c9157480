#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# blkvault files on NTFS without root (issue 25): an NTFS made by mkntfs and filled through
# ntfs-3g (FUSE) is put into p1 of a GPT disk beside an ext4 p2, and backed up; the NTFS alone is
# backed up as a whole disk too. Then, as nobody, with a key only nobody reads, files
# ls/cat/get/find of the snapshots are compared with the files themselves (the NTFS mounted
# read-only with ntfs-3g on the host): names beyond ASCII, a compressed file, a sparse file, a
# named data stream, Interix links and fifos as ntfs-3g makes them; diff between two snapshots;
# a damaged chunk under one file fails that file with its path and leaves the others (exit 4);
# a volume libntfs-3g refuses, a link loop, a missing stream.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/root/files-lib.sh"
need_root
need_cmd mkntfs ntfs-3g sfdisk setpriv setfattr getfattr python3 mkfifo mkfs.ext4 fusermount
[ -c /dev/fuse ] || skip "no /dev/fuse for ntfs-3g"
export TZ=UTC
chmod 755 "$T"
mnt=$T/mnt
mkdir "$mnt"
ntfs=$T/ntfs.img   # the NTFS alone: filled through ntfs-3g, copied into p1
img=$T/disk.img
p1_start=2048 p1_sectors=131072 p2_start=133120 p2_sectors=20480
truncate -s $((p1_sectors * 512)) "$ntfs"
mkntfs -q -F -f -L winvol "$ntfs" 2>/dev/null
truncate -s 80M "$img"
sfdisk -q "$img" <<EOF
label: gpt
start=$p1_start, size=$p1_sectors, name=windows
start=$p2_start, size=$p2_sectors, name=linux
EOF
ext=$T/ext.img
truncate -s $((p2_sectors * 512)) "$ext"
mkfs.ext4 -q -L data "$ext"
dd if="$ext" of="$img" bs=512 seek=$p2_start conv=notrunc status=none
into_disk() { dd if="$ntfs" of="$img" bs=512 seek=$p1_start conv=notrunc status=none; }
mount_ntfs() { ntfs-3g -o "$1" "$ntfs" "$mnt"; }
on_exit "umount '$mnt' 2>/dev/null || true"

# the big file first, backed up alone: its data lands in the packs of that first backup, which
# the damage test below breaks (what is added next goes to later packs)
mount_ntfs rw
mkdir -p "$mnt/Users/ana"
randfile "$mnt/Users/ana/big.bin" 20 ntfs-big
umount "$mnt"
into_disk
repo=$T/repo
head -c 64 /dev/urandom >"$T/root.key"
chmod 600 "$T/root.key"
bv init "$repo" --key-file="$T/root.key" >/dev/null
bv backup "$repo" "$img" --name=disk --key-file="$T/root.key" -q >/dev/null
(cd "$repo" && find packs -type f) | sort >"$T/big-packs"
[ -s "$T/big-packs" ] || die "the first backup wrote no pack"

mount_ntfs rw,compression
mkdir -p "$mnt/Docs/deep/er" "$mnt/Cmp" "$mnt/Users/ana/Desktop"
echo "hello from ntfs" >"$mnt/Docs/hello.txt"
printf 'leaf\n' >"$mnt/Docs/deep/er/leaf.txt"
printf 'caf\xc3\xa9 \xe2\x82\xac\n' >"$mnt/Docs/café €.txt"
printf 'nihongo\n' >"$mnt/Docs/日本語.txt"
head -c 3000 /dev/urandom >"$mnt/Users/ana/odd size.bin"
randfile "$mnt/Users/ana/small.bin" 1 ntfs-small
: >"$mnt/Users/ana/empty"
truncate -s 5M "$mnt/Users/ana/sparse"
echo middle | dd of="$mnt/Users/ana/sparse" bs=1 seek=2M conv=notrunc status=none
# a compressed file: new files in a directory marked compressed (0x800), with -o compression
setfattr -n system.ntfs_attrib_be -v 0x00000810 "$mnt/Cmp"
{ yes 'compress me, compress me' || true; } | head -c 3000000 >"$mnt/Cmp/text.txt"
attrib=$(getfattr -e hex --only-values -n system.ntfs_attrib_be "$mnt/Cmp/text.txt" 2>/dev/null | od -An -tx1 | tr -d ' \n')
[ $(( 0x${attrib:-0} & 0x800 )) -ne 0 ] || die "ntfs-3g made no compressed file (attributes 0x$attrib)"
# a named data stream (ntfs-3g's user.* extended attributes are streams)
setfattr -n user.Zone.Identifier -v '[ZoneTransfer] ZoneId=3' "$mnt/Docs/hello.txt"
ln -s hello.txt "$mnt/Docs/rel-link"
ln -s /Docs/hello.txt "$mnt/Users/ana/abs-link"
ln -s /nowhere "$mnt/Users/ana/dangling"
ln -s loop2 "$mnt/Users/ana/loop1"
ln -s loop1 "$mnt/Users/ana/loop2"
mkfifo "$mnt/Users/ana/fifo"
touch -d '2001-02-03 04:05:06.1234567' "$mnt/Docs/hello.txt"
touch -d '2003-04-05 06:07:08' "$mnt/Docs/deep"
umount "$mnt"
into_disk
bv backup "$repo" "$img" --name=disk --key-file="$T/root.key" -q >/dev/null
bv backup "$repo" "$ntfs" --name=whole --key-file="$T/root.key" -q >/dev/null
last() { bv list "$repo" --name="$1" --json --key-file="$T/root.key" | python3 -c 'import json,sys; print(json.load(sys.stdin)[-1]["id"])'; }
snap1=$(last disk)
whole=$(last whole)
chmod -R o+rX "$repo"
install -o nobody -m 400 "$T/root.key" "$T/nobody.key"
mkdir "$T/out"
chown nobody "$T/out"
files() { as_nobody "$BLKVAULT" files "$repo" "$@" --key-file="$T/nobody.key"; }
as_nobody test ! -r "$T/root.key" || die "nobody can read root's key file"

mount_ntfs ro

# --- ls: the partitions, then every directory against the mounted tree -----------------------
files "$snap1" ls >"$T/parts"
grep -Eq '^p1 +ntfs .* winvol$' "$T/parts" || { cat "$T/parts"; die "ls lists no p1 ntfs 'winvol' (its label)"; }
grep -Eq '^p2 +ext4 .* data$' "$T/parts" || { cat "$T/parts"; die "ls lists no p2 ext4 'data'"; }
checked=0
while read -r dir; do
    expected_ls "$mnt$dir" >"$T/want"
    files "$snap1" ls "p1:$dir" >"$T/got" || die "files ls p1:$dir failed"
    diff "$T/want" "$T/got" >&2 || die "files ls p1:$dir differs from the mounted directory"
    files "$whole" ls "$dir" >"$T/got" || die "files ls $dir of the whole-disk NTFS failed"
    diff "$T/want" "$T/got" >&2 || die "files ls $dir (whole disk) differs from the mounted directory"
    checked=$((checked + 1))
done < <(cd "$mnt" && find . -type d | sed 's|^\.||; s|^$|/|')
[ "$checked" -ge 7 ] || die "only $checked directories listed"
grep -q '^\$MFT' < <(files "$whole" ls /) && die "ls shows NTFS system files"
expect_fail 1 "^error: cannot print 'data:/lost+found': Is a directory$" files "$snap1" cat data:/lost+found

# --- cat: every regular file byte for byte, a stream, links ---------------------------------
# the partition by its NTFS label (in an MFT record: read by libntfs-3g) and by its GPT name
files "$snap1" cat winvol:/Docs/hello.txt | cmp - "$mnt/Docs/hello.txt" || die "cat by the NTFS label"
files "$snap1" cat windows:/Docs/hello.txt | cmp - "$mnt/Docs/hello.txt" || die "cat by the GPT name"
while read -r f; do
    files "$snap1" cat "p1:$f" >"$T/cat" || die "files cat p1:$f failed"
    cmp "$T/cat" "$mnt$f" || die "files cat p1:$f differs"
    files "$whole" cat "$f" | cmp - "$mnt$f" || die "files cat $f (whole disk) differs"
done < <(cd "$mnt" && find . -type f | sed 's|^\.||')
assert_eq "$(files "$whole" cat '/Docs/hello.txt:Zone.Identifier')" "[ZoneTransfer] ZoneId=3" "a named stream"
files "$whole" cat /Docs/rel-link | cmp - "$mnt/Docs/hello.txt" || die "cat through a relative link"
files "$whole" cat /Users/ana/abs-link | cmp - "$mnt/Docs/hello.txt" || die "cat through an absolute link"
files "$whole" cat '/Docs/日本語.txt' | cmp - "$mnt/Docs/日本語.txt" || die "cat of a name beyond ASCII"

# --- find --------------------------------------------------------------------------------------
(cd "$mnt" && find . | sed 's|^\.|p1:|; s|^p1:$|p1:/|' | LC_ALL=C sort) >"$T/want"
files "$snap1" find p1:/ | LC_ALL=C sort >"$T/got"
diff "$T/want" "$T/got" >&2 || die "files find differs from find"
(cd "$mnt" && find . -name '*.txt' | LC_ALL=C sort) >"$T/want"
files "$whole" find / --name='*.txt' | sed 's|^|.|' | LC_ALL=C sort >"$T/got"
diff "$T/want" "$T/got" >&2 || die "files find --name differs from find -name"

# --- get: the whole tree as nobody (modes, times, links, fifos, sparse) ----------------------
# NTFS keeps no Unix modes: what ntfs-3g shows (0777) is made up, and get applies the umask to it
(umask 027 && files "$snap1" get p1:/ "$T/out/all") 2>"$T/get.err" || { cat "$T/get.err" >&2; die "files get p1:/ failed"; }
compare_tree "$mnt" "$T/out/all" no 20 027 || die "files get (as nobody) differs from the mounted tree"
assert_eq "$(stat -c %a "$T/out/all/Docs/hello.txt" "$T/out/all/Docs")" "750
750" "modes of a file and a directory from NTFS under umask 027"
[ "$(allocated "$T/out/all/Users/ana/sparse")" -lt 1048576 ] || die "the sparse file was written whole"
# named streams come along as user.* extended attributes, as ntfs-3g shows them
assert_eq "$(getfattr --only-values -n user.Zone.Identifier "$T/out/all/Docs/hello.txt")" \
    "$(getfattr --only-values -n user.Zone.Identifier "$mnt/Docs/hello.txt")" "a stream kept by get"
files "$whole" get /Cmp/text.txt /Docs/rel-link "$T/out" 2>/dev/null || die "get of two paths"
cmp "$T/out/text.txt" "$mnt/Cmp/text.txt" || die "get of a compressed file"
assert_eq "$(readlink "$T/out/rel-link")" hello.txt "get of a symbolic link"
files "$whole" get '/Docs/hello.txt:Zone.Identifier' "$T/out/zone" 2>/dev/null || die "get of a stream"
assert_eq "$(cat "$T/out/zone")" "[ZoneTransfer] ZoneId=3" "get of a named stream"

# a DEST without user extended attributes (ramfs): the file is copied, its stream said and left out
mkdir "$T/ram"
mount -t ramfs none "$T/ram"
on_exit "umount -l '$T/ram'"
chmod 777 "$T/ram"
files "$whole" get /Docs/hello.txt "$T/ram" 2>"$T/ram.err" || { cat "$T/ram.err" >&2; die "get into ramfs"; }
cmp "$T/ram/hello.txt" "$mnt/Docs/hello.txt" || die "get into ramfs: the content"
grep -q "^warning: '$T/ram/hello.txt': its stream 'Zone.Identifier' is not kept as an extended attribute: Operation not supported$" \
    "$T/ram.err" || { cat "$T/ram.err" >&2; die "no warning for a stream left out"; }

# --- errors ------------------------------------------------------------------------------------
expect_fail 1 "^error: cannot list 'p1:/nope': No such file or directory$" files "$snap1" ls p1:/nope
expect_fail 1 "^error: cannot print '/Docs': Is a directory$" files "$whole" cat /Docs
expect_fail 1 "^error: cannot read '/Docs/hello.txt/x': Not a directory$" files "$whole" cat /Docs/hello.txt/x
expect_fail 1 "^error: cannot read '/Docs/hello.txt:nostream': No such file or directory$" \
    files "$whole" cat /Docs/hello.txt:nostream
expect_fail 1 "^error: cannot read '/Users/ana/loop1': Too many levels of symbolic links$" \
    files "$whole" cat /Users/ana/loop1
expect_fail 1 "^error: cannot read '/Users/ana/dangling': No such file or directory$" \
    files "$whole" cat /Users/ana/dangling
umount "$mnt"

# a volume libntfs-3g refuses: $MFT's first record without its FILE magic (the boot sector says
# NTFS, so the partition is listed as one)
cp "$ntfs" "$T/bad.img"
python3 - "$T/bad.img" <<'PY'
import struct, sys
with open(sys.argv[1], "r+b") as f:
    b = f.read(512)
    f.seek(struct.unpack_from("<q", b, 0x30)[0] * b[13] * struct.unpack_from("<H", b, 11)[0])
    f.write(b"BAAD")
PY
bv backup "$repo" "$T/bad.img" --name=bad --key-file="$T/root.key" -q >/dev/null
chmod -R o+rX "$repo"
bad=$(last bad)
expect_fail 1 "^error: cannot open the ntfs filesystem of the disk of snapshot ${bad:0:8}: libntfs-3g refused it: Record 0 has no FILE magic" \
    files "$bad" ls /

# a volume marked dirty (not cleanly unmounted): read as it is, with a warning
cp "$ntfs" "$T/dirty.img"
python3 - "$T/dirty.img" <<'PY'
import struct, sys
# VOLUME_IS_DIRTY in $Volume's VOLUME_INFORMATION (MFT record 3), in $MFT and $MFTMirr alike,
# away from the bytes the update sequence replaces
def mark(f, mft, rec_size):
    f.seek(mft + 3 * rec_size)
    rec = f.read(rec_size)
    assert rec[:4] == b"FILE"
    at = struct.unpack_from("<H", rec, 0x14)[0]
    while True:
        kind, length = struct.unpack_from("<II", rec, at)
        assert kind != 0xFFFFFFFF, "no VOLUME_INFORMATION"
        if kind == 0x70:
            flags = at + struct.unpack_from("<H", rec, at + 0x14)[0] + 10
            assert flags % 512 < 510
            f.seek(mft + 3 * rec_size + flags)
            f.write(struct.pack("<H", struct.unpack_from("<H", rec, flags)[0] | 1))
            return
        at += length
with open(sys.argv[1], "r+b") as f:
    b = f.read(512)
    cluster = b[13] * struct.unpack_from("<H", b, 11)[0]
    rec_size = b[0x40] * cluster if b[0x40] < 128 else 1 << (256 - b[0x40])
    for where in (0x30, 0x38):
        mark(f, struct.unpack_from("<q", b, where)[0] * cluster, rec_size)
PY
bv backup "$repo" "$T/dirty.img" --name=dirty --key-file="$T/root.key" -q >/dev/null
chmod -R o+rX "$repo"
dirty=$(last dirty)
files "$dirty" cat /Docs/hello.txt 2>"$T/dirty.err" | cmp - "$T/out/all/Docs/hello.txt" || die "cat of a dirty volume"
grep -q "^warning: the ntfs filesystem of the disk was not cleanly unmounted when snapshot ${dirty:0:8} was taken" \
    "$T/dirty.err" || { cat "$T/dirty.err" >&2; die "no warning for a dirty volume"; }

# --- diff: a second snapshot after adding, removing and changing files ------------------------
mount_ntfs rw
echo new >"$mnt/Docs/new.txt"
mkdir "$mnt/Docs/newdir" && echo x >"$mnt/Docs/newdir/inner"
rm "$mnt/Users/ana/empty"
rm -r "$mnt/Docs/deep/er"
printf 'HELLO from ntfs\n' | dd of="$mnt/Docs/hello.txt" conv=notrunc status=none   # same size
echo more >>"$mnt/Users/ana/odd size.bin"
touch -d '2010-01-01' "$mnt/Users/ana/small.bin"
rm "$mnt/Users/ana/dangling" && mkdir "$mnt/Users/ana/dangling"
umount "$mnt"
into_disk
bv backup "$repo" "$img" --name=disk --key-file="$T/root.key" -q >/dev/null
chmod -R o+rX "$repo"
snap2=$(last disk)
cat >"$T/want" <<'EOF'
- p1:/Docs/deep/er
- p1:/Docs/deep/er/leaf.txt
M p1:/Docs/hello.txt
+ p1:/Docs/new.txt
+ p1:/Docs/newdir
+ p1:/Docs/newdir/inner
T p1:/Users/ana/dangling
- p1:/Users/ana/empty
M p1:/Users/ana/odd size.bin
m p1:/Users/ana/small.bin
EOF
files "$snap1" diff "$snap2" 2>"$T/diff.err" | grep -v ' p2:' >"$T/got" || true
diff "$T/want" "$T/got" >&2 || { cat "$T/diff.err" >&2; die "files diff"; }
grep -q "^3 added, 3 removed, 4 changed from snapshot ${snap1:0:8} to ${snap2:0:8}$" "$T/diff.err" ||
    { cat "$T/diff.err" >&2; die "no diff summary"; }
files "$snap1" diff "$snap2" p1:/Users --content 2>/dev/null >"$T/got"
assert_eq "$(cut -c1 "$T/got" | tr -d '\n')" "T-Mm" "diff --content of one directory"

# --- damage: a byte flipped in the middle of each pack of the first backup (the big file) -----
check_damage "$snap1" /Users ana "odd size.bin"
echo "files on NTFS: ls, cat, get, find, diff, damage and refusals checked ($checked directories)"
