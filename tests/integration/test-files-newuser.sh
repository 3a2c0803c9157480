#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# What a new user of blkvault files found unclear (issue 25), each as it reads now:
#  - list's CONTENT column: two spaces after NAME as between the other columns, and each
#    partition as "fstype 'label'", comma-separated ("gpt: ext4'a' ext4'b'" before);
#  - files ls p1:/ on a disk without a partition table (a filesystem on the whole disk) says
#    there is no partition table and the path form to use ("has no partition 'p1'" before);
#  - files get refusing an existing DEST entry names --force ("File exists" before).
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd mkfs.ext4 sfdisk
export TZ=UTC
repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
mkdir -p "$T/tree/etc"
echo "127.0.0.1 localhost" >"$T/tree/etc/hosts"

# a GPT disk with two labelled ext4 partitions and one without a filesystem
truncate -s 48M "$T/gpt.img"
printf 'label: gpt\nstart=2048,size=32768,type=L\nstart=34816,size=32768,type=L\nstart=67584,size=16384,type=L\n' |
    sfdisk -q "$T/gpt.img"
mkfs.ext4 -q -F -L root -E offset=$((2048 * 512)) -d "$T/tree" "$T/gpt.img" 16M
mkfs.ext4 -q -F -L data -E offset=$((34816 * 512)) "$T/gpt.img" 16M
bv backup "$repo" "$T/gpt.img" --name=partitioned-disk-image -q >/dev/null
# a filesystem on the whole disk
mkfs.ext4 -q -F -L whole -d "$T/tree" "$T/whole.img" 16M
bv backup "$repo" "$T/whole.img" --name=whole -q >/dev/null

bv list "$repo" >"$T/list"
header=$(head -n1 "$T/list")
[[ "$header" =~ ^ID\ +TIME\ +SIZE\ +NAME\ {2,}CONTENT$ ]] || { cat "$T/list"; die "list header: '$header'"; }
grep -qE "  partitioned-disk-image    gpt: ext4 'root', ext4 'data', \?$" "$T/list" || { cat "$T/list"; die "list CONTENT of the GPT disk"; }
grep -qE "  whole  +ext4 'whole'$" "$T/list" || { cat "$T/list"; die "list CONTENT of the whole-disk filesystem"; }
# the NAME column is as wide for every row: CONTENT starts in one column
assert_eq "$(awk 'NR > 1 { print index($0, $NF == "?" ? "gpt:" : "ext4") }' "$T/list" | sort -u | wc -l)" 1 "CONTENT is not aligned"

# p1: on a disk without a partition table
expect_fail 1 "^error: snapshot [0-9a-f]\{8\} has no partition table: its ext4 filesystem is the whole disk; name paths without a partition, as /etc/hosts (not p1:/etc/hosts)$" \
    bv files "$repo" whole ls p1:/etc/hosts
expect_fail 1 "^error: snapshot [0-9a-f]\{8\} has no partition table: its ext4 filesystem is the whole disk; name paths without a partition, as / (not p1:/)$" \
    bv files "$repo" whole ls p1:/
assert_eq "$(bv files "$repo" whole cat /etc/hosts)" "127.0.0.1 localhost" "the path form the message names"
# on a partitioned disk, a partition that is not there still says so
expect_fail 1 "^error: snapshot [0-9a-f]\{8\} has no partition 'p7' (see 'blkvault files REPO [0-9a-f]\{8\} ls')$" \
    bv files "$repo" partitioned-disk-image ls p7:/

# get into a DEST that has the file: refused, naming --force; then --force replaces it
mkdir -p "$T/out"
bv files "$repo" whole get /etc/hosts "$T/out" >/dev/null
echo changed >"$T/out/hosts"
expect_fail 1 "^error: cannot create '$T/out/hosts': File exists (--force replaces it)$" \
    bv files "$repo" whole get /etc/hosts "$T/out"
assert_eq "$(cat "$T/out/hosts")" "changed" "a refused get wrote the file"
bv files "$repo" whole get /etc "$T/out" >/dev/null
expect_fail 1 "^error: cannot create '$T/out/etc/hosts': File exists (--force replaces it)$" \
    bv files "$repo" whole get /etc "$T/out"
bv files "$repo" whole get /etc/hosts "$T/out" --force >/dev/null
assert_eq "$(cat "$T/out/hosts")" "127.0.0.1 localhost" "get --force"

# ls and find --json: an array of entries (name, path, type, size, mode, uid, gid, mtime), or of
# the partitions for ls without PATH on a partitioned disk
jq_() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }
assert_eq "$(bv files "$repo" partitioned-disk-image ls --json | jq_ '[(p["name"], p.get("fstype"), p.get("label")) for p in d]')" \
    "[('p1', 'ext4', 'root'), ('p2', 'ext4', 'data'), ('p3', None, None)]" "ls --json of the partitions"
assert_eq "$(bv files "$repo" partitioned-disk-image ls root:/etc --json | jq_ '[(e["name"], e["path"], e["type"], e["size"], oct(e["mode"])) for e in d]')" \
    "[('hosts', 'root:/etc/hosts', 'file', 20, '0o644')]" "ls --json of a directory"
mtime=$(stat -c %Y "$T/tree/etc/hosts")
assert_eq "$(bv files "$repo" whole ls /etc/hosts --json | jq_ 'd[0]["mtime"]')" "$mtime" "ls --json mtime"
assert_eq "$(bv files "$repo" whole find / --name='*host*' --json | jq_ '[(e["path"], e["type"]) for e in d]')" \
    "[('/etc/hosts', 'file')]" "find --json"
assert_eq "$(bv files "$repo" whole find /etc --json | jq_ '[e["type"] for e in d]')" "['directory', 'file']" "find --json types"
expect_fail 2 "^error: --json is for ls and find, not cat$" bv files "$repo" whole cat /etc/hosts --json
echo "ok"
