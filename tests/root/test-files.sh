#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# blkvault files without root (issue 25): a GPT disk with two ext4 partitions, made and filled by
# the kernel on a loop device, is backed up into an encrypted repository; then, as nobody, with
# a copy of the key file only nobody may read, files ls/cat/get/find of the snapshot are compared
# with the files themselves (the image mounted read-only on the host); diff between two snapshots
# names what was added, removed and changed; and a damaged chunk under one big file fails that
# file, with its path, while the others stay readable (exit 4).
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/root/files-lib.sh"
need_root
need_cmd losetup mkfs.ext4 sfdisk setpriv mount umount python3 mkfifo
[ -e /dev/loop-control ] || skip "no loop devices"
export TZ=UTC
chmod 755 "$T"
mnt=$T/mnt
mkdir "$mnt"

# --- the disk: p1 ext4 'root' with a tree, p2 ext4 'data' -----------------------------------
img=$T/disk.img
truncate -s 160M "$img"
sfdisk -q "$img" <<'EOF'
label: gpt
start=2048, size=262144, name=system
start=264192, size=40960, name=spare
EOF
# a loop device per partition (-P needs udev for the nodes)
part1() { attach_loop "$1" "${@:2}" --offset=$((2048 * 512)) --sizelimit=$((262144 * 512)) "$img"; }
part2() { attach_loop "$1" "${@:2}" --offset=$((264192 * 512)) --sizelimit=$((40960 * 512)) "$img"; }
part1 dev
part2 dev2
mkfs.ext4 -q -L root "$dev"
mkfs.ext4 -q -L data "$dev2"
mount "$dev" "$mnt"
on_exit "umount '$mnt'"
# the big file first, backed up alone in this disk: its data lands in the packs of that first
# backup, which the damage test below breaks (what is added next goes to later packs)
mkdir -p "$mnt/home/user"
randfile "$mnt/home/user/big.bin" 20 files-big
umount "$mnt"
repo=$T/repo
head -c 64 /dev/urandom >"$T/root.key"
chmod 600 "$T/root.key"
bv init "$repo" --key-file="$T/root.key" >/dev/null
bv backup "$repo" "$img" --name=disk --key-file="$T/root.key" -q >/dev/null
(cd "$repo" && find packs -type f) | sort >"$T/big-packs"
[ -s "$T/big-packs" ] || die "the first backup wrote no pack"
mount "$dev" "$mnt"
mkdir -p "$mnt/etc/deep/er/est" "$mnt/home/user" "$mnt/tmp"
echo "127.0.0.1 localhost" >"$mnt/etc/hosts"
printf 'a config\n' >"$mnt/etc/deep/er/est/leaf.conf"
randfile "$mnt/home/user/small.bin" 1 files-small
head -c 3000 /dev/urandom >"$mnt/home/user/odd size.txt"
: >"$mnt/home/user/empty"
truncate -s 5M "$mnt/home/user/sparse"
echo middle | dd of="$mnt/home/user/sparse" bs=1 seek=2M conv=notrunc status=none
printf 'caf\xc3\xa9\n' >"$mnt/home/user/café.txt"
ln -s ../../etc/hosts "$mnt/home/user/rel-link"
ln -s /etc/hosts "$mnt/home/user/abs-link"
ln -s /nowhere "$mnt/home/user/dangling"
ln "$mnt/etc/hosts" "$mnt/etc/hosts.hard"
mkfifo "$mnt/tmp/fifo"
chmod 600 "$mnt/home/user/small.bin"
chmod 4755 "$mnt/home/user/odd size.txt"
chmod 1777 "$mnt/tmp"
chown 1234:5678 "$mnt/home/user/small.bin"
chown -h 1234:5678 "$mnt/home/user/rel-link"
touch -d '2001-02-03 04:05:06.123456789' "$mnt/etc/hosts"
touch -h -d '2002-03-04 05:06:07' "$mnt/home/user/abs-link"
touch -d '2003-04-05 06:07:08' "$mnt/etc/deep"
umount "$mnt"
mount "$dev2" "$mnt"
echo "on the data partition" >"$mnt/readme"
umount "$mnt"
detach_loop "$dev"
detach_loop "$dev2"

# --- the repository: readable by nobody, the key in a file only nobody reads -----------------
bv backup "$repo" "$img" --name=disk --key-file="$T/root.key" -q >/dev/null
snap1=$(bv list "$repo" --name=disk --json --key-file="$T/root.key" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)[-1]["id"])')
chmod -R o+rX "$repo"
install -o nobody -m 400 "$T/root.key" "$T/nobody.key"
head -c 64 /dev/urandom >"$T/wrong.key"
chmod 644 "$T/wrong.key"
mkdir "$T/out"
chown nobody "$T/out"
files() { as_nobody "$BLKVAULT" files "$repo" "$@" --key-file="$T/nobody.key"; }
# nobody cannot use root's key, nor read the disk image: only the repository and its own key
as_nobody test ! -r "$T/root.key" || die "nobody can read root's key file"

part1 ro -r
mount -o ro "$ro" "$mnt"
on_exit "umount '$mnt'"

# --- ls: the partitions, then every directory against the mounted tree -----------------------
files "$snap1" ls >"$T/parts"
grep -Eq '^p1 +ext4 .* root$' "$T/parts" || { cat "$T/parts"; die "ls lists no p1 ext4 'root'"; }
grep -Eq '^p2 +ext4 .* data$' "$T/parts" || { cat "$T/parts"; die "ls lists no p2 ext4 'data'"; }
checked=0
while read -r dir; do
    expected_ls "$mnt$dir" >"$T/want"
    files "$snap1" ls "p1:$dir" >"$T/got" || die "files ls p1:$dir failed"
    diff "$T/want" "$T/got" >&2 || die "files ls p1:$dir differs from the mounted directory"
    checked=$((checked + 1))
done < <(cd "$mnt" && find . -type d | sed 's|^\.||; s|^$|/|')
[ "$checked" -ge 8 ] || die "only $checked directories listed"
# by label, and the one file
files "$snap1" ls root:/etc/hosts | grep_q ' 2001-02-03 04:05:06 root:/etc/hosts$\| 2001-02-03 04:05:06 /etc/hosts$' ||
    die "ls of one file by label"
assert_eq "$(files "$snap1" cat data:/readme)" "on the data partition" "cat by label of p2"
# --json of one file: its name is the last component, as for a directory's entries (was the path)
assert_eq "$(files "$snap1" ls p1:/etc/hosts --json | python3 -c 'import json,sys; e=json.load(sys.stdin)[0]; print(e["name"], e["path"])')" \
    "hosts p1:/etc/hosts" "ls --json of one file"

# --- cat: every regular file, byte for byte --------------------------------------------------
while read -r f; do
    files "$snap1" cat "p1:$f" >"$T/cat" || die "files cat p1:$f failed"
    cmp "$T/cat" "$mnt$f" || die "files cat p1:$f differs"
done < <(cd "$mnt" && find . -type f | sed 's|^\.||')
files "$snap1" cat p1:/home/user/rel-link | cmp - "$mnt/etc/hosts" || die "cat through a relative link"
files "$snap1" cat p1:/home/user/abs-link | cmp - "$mnt/etc/hosts" || die "cat through an absolute link (in the snapshot)"

# --- find ------------------------------------------------------------------------------------
(cd "$mnt" && find . | sed 's|^\.|p1:|; s|^p1:$|p1:/|' | LC_ALL=C sort) >"$T/want"
files "$snap1" find p1:/ | LC_ALL=C sort >"$T/got"
diff "$T/want" "$T/got" >&2 || die "files find differs from find"
(cd "$mnt" && find . -name '*.txt' | sed 's|^\.|p1:|' | LC_ALL=C sort) >"$T/want"
files "$snap1" find p1:/ --name='*.txt' | LC_ALL=C sort >"$T/got"
diff "$T/want" "$T/got" >&2 || die "files find --name differs from find -name"

# --- get: the whole tree as nobody (modes, times, links; owners are nobody's), then as root --
files "$snap1" get p1:/ "$T/out/all" 2>"$T/get.err" || { cat "$T/get.err" >&2; die "files get p1:/ failed"; }
compare_tree "$mnt" "$T/out/all" no || die "files get (as nobody) differs from the mounted tree"
[ "$(stat -c %U "$T/out/all/home/user/small.bin")" = nobody ] || die "nobody's copy is not nobody's"
grep -q "fifo" "$T/get.err" && die "a fifo was refused"
# sparse stays sparse
[ "$(allocated "$T/out/all/home/user/sparse")" -lt 1048576 ] || die "the sparse file was written whole"
# several paths into a directory, and a refusal to overwrite without --force
files "$snap1" get p1:/etc/hosts p1:/home/user/abs-link "$T/out" 2>/dev/null
cmp "$T/out/hosts" "$mnt/etc/hosts" || die "get of two paths into a directory"
assert_eq "$(readlink "$T/out/abs-link")" /etc/hosts "get of a symbolic link"
expect_fail 1 "^error: cannot create '$T/out/hosts': File exists (--force replaces it)$" files "$snap1" get p1:/etc/hosts "$T/out"
expect_fail 1 "^error: copied 0 files (0 B) to '$T/out'; what the errors above name was not copied$" files "$snap1" get p1:/etc/hosts "$T/out"
files "$snap1" get p1:/etc/hosts "$T/out" --force 2>/dev/null || die "get --force"
# as root the owners are kept too
bv files "$repo" "$snap1" get p1:/ "$T/rootcopy" --key-file="$T/root.key" 2>/dev/null || die "get as root failed"
compare_tree "$mnt" "$T/rootcopy" yes || die "files get (as root) differs from the mounted tree"

# --- errors: a path that is not there, a disk needing a partition, no key ------------------------
expect_fail 1 "^error: cannot list 'p1:/nope': No such file or directory$" files "$snap1" ls p1:/nope
expect_fail 2 "^error: snapshot ${snap1:0:8} holds 2 partitions: name one, as p1:/etc" files "$snap1" ls /etc
expect_fail 1 "^error: snapshot ${snap1:0:8} has no partition 'p9'" files "$snap1" ls p9:/
expect_fail 1 "^error: cannot print 'p1:/etc': Is a directory$" files "$snap1" cat p1:/etc
# a fifo is not a directory (cat said "Is a directory" of it)
expect_fail 1 "^error: cannot print 'p1:/tmp/fifo': not a regular file (fifo)$" files "$snap1" cat p1:/tmp/fifo
expect_fail 2 "^error: expected 'blkvault files REPO SNAPSHOT cat PATH'" files "$snap1" cat
expect_fail 3 "" as_nobody "$BLKVAULT" files "$repo" "$snap1" ls --key-file="$T/wrong.key"
umount "$mnt"
detach_loop "$ro"

# --- diff: a second snapshot after adding, removing and changing files ------------------------
part1 rw
mount "$rw" "$mnt"
echo new >"$mnt/etc/new.conf"
mkdir "$mnt/etc/newdir" && echo x >"$mnt/etc/newdir/inner"
rm "$mnt/home/user/empty"
rm -r "$mnt/etc/deep/er"
printf '127.0.0.2 localhost\n' | dd of="$mnt/etc/hosts" conv=notrunc status=none   # same size
touch -d '2001-02-03 04:05:06.123456789' "$mnt/etc/hosts"                           # same mtime
echo more >>"$mnt/home/user/odd size.txt"
chmod 644 "$mnt/home/user/small.bin"
rm "$mnt/home/user/dangling" && mkdir "$mnt/home/user/dangling"
umount "$mnt"
detach_loop "$rw"
bv backup "$repo" "$img" --name=disk --key-file="$T/root.key" -q >/dev/null
chmod -R o+rX "$repo"
snap2=$(bv list "$repo" --name=disk --json --key-file="$T/root.key" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)[-1]["id"])')
cat >"$T/want" <<'EOF'
- p1:/etc/deep/er
- p1:/etc/deep/er/est
- p1:/etc/deep/er/est/leaf.conf
M p1:/etc/hosts
M p1:/etc/hosts.hard
+ p1:/etc/new.conf
+ p1:/etc/newdir
+ p1:/etc/newdir/inner
T p1:/home/user/dangling
- p1:/home/user/empty
M p1:/home/user/odd size.txt
m p1:/home/user/small.bin
EOF
files "$snap1" diff "$snap2" 2>"$T/diff.err" | grep -v ' p2:' >"$T/got" || true
diff "$T/want" "$T/got" >&2 || { cat "$T/diff.err" >&2; die "files diff"; }
grep -q "^3 added, 4 removed, 5 changed from snapshot ${snap1:0:8} to ${snap2:0:8}$" "$T/diff.err" || { cat "$T/diff.err" >&2; die "no diff summary"; }
files "$snap1" diff "$snap2" p1:/home >"$T/got" 2>/dev/null
assert_eq "$(cut -c1 "$T/got" | tr -d '\n')" "T-Mm" "diff of one directory"
# --content reads every file: the same answer here
files "$snap1" diff "$snap2" p1:/ --content 2>/dev/null >"$T/got"
diff "$T/want" "$T/got" >&2 || die "files diff --content"

# --- damage: a byte flipped in the middle of each pack of the first backup (the big file) -----
check_damage "$snap1" /home user "odd size.txt"
echo "files: ls, cat, get, find, diff and damage checked ($checked directories)"
