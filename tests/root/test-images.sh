#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# images/: a small partitioned image with ext4, XFS and btrfs and real content; mutated to v2 and
# v3 it still checks clean and its content changed. Also the sparse and concat recipes.
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd sfdisk losetup partx blkid mkfs.ext4 mkfs.xfs mkfs.btrfs e2fsck xfs_repair btrfs openssl

export LC_ALL=C
images=$SOURCE_ROOT/images
img=$T/disk.img

"$images/make-image.sh" "$img" 512M --content-mib 60 >"$T/make.out"
[ "$(stat -c %s "$img")" = $(( 512 * 1048576 )) ] || die "image size"
[ "$(allocated "$img")" -lt $(( 300 * 1048576 )) ] || die "image is not sparse"

# three GPT partitions with the labels, and the filesystems blkid finds inside them
sfdisk -d "$img" >"$T/table"
grep -q '^label: gpt' "$T/table" || die "no GPT table"
assert_eq "$(grep -c ' : start=' "$T/table")" 3 "partition count"
i=0
for want in ext4:bv-ext4 xfs:bv-xfs btrfs:bv-btrfs; do
    i=$(( i + 1 ))
    start=$(sed -n "s/.*img$i : start= *\([0-9]*\),.*/\1/p" "$T/table")
    eval "$(blkid -p -O $(( start * 512 )) -o export "$img" | grep -E '^(TYPE|LABEL)=')"
    assert_eq "$TYPE:$LABEL" "$want" "partition $i"
done

# LOOP attached read-only for checks; fsck_all and snapshot_content need it attached
attach_ro() {
    attach_loop LOOP -r "$img"
    partx -a "$LOOP" 2>/dev/null || true
    for _ in $(seq 50); do [ -b "${LOOP}p3" ] && return 0; sleep 0.1; done
    die "no partition nodes on $LOOP"
}
detach() { detach_loop "$LOOP"; }

fsck_all() {
    e2fsck -fn "${LOOP}p1" >"$T/fsck.out" 2>&1 || { cat "$T/fsck.out"; die "e2fsck ($1)"; }
    xfs_repair -n "${LOOP}p2" >"$T/fsck.out" 2>&1 || { cat "$T/fsck.out"; die "xfs_repair ($1)"; }
    btrfs check --readonly "${LOOP}p3" >"$T/fsck.out" 2>&1 || { cat "$T/fsck.out"; die "btrfs check ($1)"; }
}

# A listing "pN:path<TAB>sha256" of every file of the three filesystems, sorted by path.
snapshot_content() {
    local out=$1 n m
    for n in 1 2 3; do
        m=$T/mnt$n
        mkdir -p "$m"
        mount -o ro "${LOOP}p$n" "$m"
        (cd "$m" && find . -type f -print0 | xargs -0 sha256sum) |
            sed -E "s|^([0-9a-f]{64})  (.*)\$|p$n:\2\t\1|"
        umount "$m"
    done | sort >"$out"
}
# changed_between A B: how many files both listings hold with different content.
changed_between() { join -t $'\t' "$1" "$2" | awk -F'\t' '$2 != $3' | wc -l; }

attach_ro
fsck_all v1
snapshot_content "$T/v1"
detach
n1=$(wc -l <"$T/v1")
[ "$n1" -gt 300 ] || die "only $n1 files in v1"
assert_eq "$(grep -c '/\.bv-version'$'\t' "$T/v1")" 3 "version markers"

"$images/mutate.sh" "$img" v2 >"$T/mutate.out"
grep -q 'partition 3: .* files changed' "$T/mutate.out" || die "mutate v2 said: $(cat "$T/mutate.out")"
attach_ro
fsck_all v2
snapshot_content "$T/v2"
detach
n2=$(wc -l <"$T/v2")
[ "$n2" -gt "$n1" ] || die "v2 did not add files ($n1 -> $n2)"
gone=$(comm -23 <(cut -f1 "$T/v1") <(cut -f1 "$T/v2") | wc -l)
[ "$gone" -gt 10 ] || die "v2 deleted only $gone files"
changed=$(changed_between "$T/v1" "$T/v2")
[ "$changed" -gt 20 ] || die "v2 changed only $changed files in place"

"$images/mutate.sh" "$img" v3 >"$T/mutate.out"
attach_ro
fsck_all v3
snapshot_content "$T/v3"
detach
n3=$(wc -l <"$T/v3")
assert_eq "$n3" $(( n2 - 9 )) "v3 deletes three files per filesystem"
changed=$(changed_between "$T/v2" "$T/v3")
# per filesystem: 2 logs, the version marker, and up to 3 files with 16 new bytes
[ "$changed" -ge 9 ] && [ "$changed" -le 18 ] || die "v3 changed $changed files, expected 9-18"
expect_fail 1 "applies to v2" "$images/mutate.sh" "$img" v3
losetup -l | grep "$img" >/dev/null && die "a loop device is left attached"

# sparse: 64 MiB with 8 MiB of data in 1 MiB extents, reproducible
"$images/make-sparse.sh" "$T/sparse.img" 64M 8 >/dev/null
"$images/make-sparse.sh" "$T/sparse2.img" 64M 8 >/dev/null
assert_same "$T/sparse.img" "$T/sparse2.img"
assert_eq "$(stat -c %s "$T/sparse.img")" $(( 64 * 1048576 )) "sparse size"
[ "$(allocated "$T/sparse.img")" -le $(( 9 * 1048576 )) ] || die "sparse image not sparse"
cmp -s -n 1048576 "$T/sparse.img" /dev/zero && die "no data at offset 0"
cmp -s -i $(( 8 * 1048576 )):0 -n 1048576 "$T/sparse.img" /dev/zero && die "no data at offset 8 MiB"
cmp -s -i $(( 1 * 1048576 )):0 -n $(( 7 * 1048576 )) "$T/sparse.img" /dev/zero || die "data between extents"

echo "ok: $n1 files (v1), $n2 (v2), $n3 (v3)"
