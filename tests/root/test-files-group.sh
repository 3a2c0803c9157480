#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A repository shared with a group for blkvault files (chgrp -R, chmod -R g+rX, set-group-id
# folders): what later backups add (packs, pack folders, index segments, snapshot records,
# leases) is group-readable too, so a member of the group reads the newest snapshot as it read
# the first (found by a new user: the next backup's files were 0600 and files failed). A
# repository nobody shared keeps 0600 files and 0700 folders, whatever the umask.
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd setpriv mkfs.ext4
chmod 755 "$T"
as_member() { setpriv --reuid=65534 --regid=100 --clear-groups "$@"; } # nobody, in group users

mkdir -p "$T/tree/etc"
echo one >"$T/tree/etc/motd"
mkfs.ext4 -q -F -d "$T/tree" "$T/disk.img" 16M
repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
bv backup "$repo" "$T/disk.img" --name=disk -q >/dev/null
chgrp -R users "$repo"
chmod -R g+rX "$repo"
find "$repo" -type d -exec chmod g+s {} +
assert_eq "$(as_member "$BLKVAULT" files "$repo" disk cat /etc/motd)" "one" "the group reads the first snapshot"

# a later backup, under a umask that would take the group's bits
echo two >"$T/tree/etc/motd"
randfile "$T/tree/etc/big" 4 group-big
mkfs.ext4 -q -F -d "$T/tree" "$T/disk.img" 16M
(umask 077 && bv backup "$repo" "$T/disk.img" --name=disk -q >/dev/null)
unshared=$(find "$repo" -path "$repo/locks" -prune -o \( -type f ! -perm -g+r -print \) -o \( -type d ! -perm -g+rx -print \))
[ -z "$unshared" ] || { ls -laR "$repo" >&2; die "not group-readable after a backup: $unshared"; }
out=$(as_member "$BLKVAULT" files "$repo" disk cat /etc/motd 2>&1) || die "the group cannot read the new snapshot: $out"
assert_eq "$out" "two" "the group reads the newest snapshot"
as_member "$BLKVAULT" files "$repo" disk cat /etc/big | cmp - "$T/tree/etc/big" || die "the group's copy of a new file differs"
# the files added are the repository's group's (set-group-id folders), not root's
others=$(find "$repo" ! -group users -print)
[ -z "$others" ] || die "not of group users: $others"

# a repository nobody shared stays private
bv init "$T/private" --encryption=none >/dev/null
(umask 022 && bv backup "$T/private" "$T/disk.img" --name=disk -q >/dev/null)
open=$(find "$T/private" -mindepth 1 \( -type f -perm /g+r,o+r -print \) -o \( -type d -perm /g+rx,o+rx -print \))
[ -z "$open" ] || die "a private repository's files are readable by others: $open"
echo "ok: a group-shared repository stays group-readable across backups; a private one stays private"
