#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Six snapshots of a real image series (images/make-image.sh, mutate.sh v2 and v3, then three
# more versions with seeded rewrites of a few MiB), pruned to the newest: the repository is then
# at most 115% of a fresh repository holding only that snapshot, and it verifies and restores
# bit-exact.
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd sfdisk losetup partx mkfs.ext4 mkfs.xfs mkfs.btrfs openssl python3

export LC_ALL=C
images=$SOURCE_ROOT/images
img=$T/disk.img
repo=$T/repo fresh=$T/fresh
bv init "$repo" --encryption=none >/dev/null
bv init "$fresh" --encryption=none >/dev/null

# rewrite IMAGE SEED: 24 blocks of 128 KiB at seeded offsets in the first 300 MiB
rewrite() {
    local i off
    for i in $(seq 24); do
        off=$(( $(printf '%d' "0x$(printf '%s-%s' "$2" "$i" | sha256sum | cut -c1-6)") % 2400 ))
        head -c $((128 << 10)) /dev/zero | openssl enc -aes-128-ctr -pass "pass:$2-$i" -nosalt -pbkdf2 2>/dev/null |
            dd of="$1" bs=128K seek="$off" conv=notrunc status=none
    done
}
"$images/make-image.sh" "$img" 400M --content-mib 48 >/dev/null
bv backup "$repo" "$img" --name=disk -q
"$images/mutate.sh" "$img" v2 >/dev/null
bv backup "$repo" "$img" --name=disk -q
"$images/mutate.sh" "$img" v3 >/dev/null
bv backup "$repo" "$img" --name=disk -q
for v in 4 5 6; do
    rewrite "$img" "series-$v"
    bv backup "$repo" "$img" --name=disk -q
done
assert_eq "$(bv list "$repo" --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" 6 "snapshots"

bv prune "$repo" --keep-last=1 >"$T/out" 2>"$T/err" || { cat "$T/out" "$T/err"; die "prune"; }
grep -qx "forgot 5 of 6 snapshots" "$T/err" || { cat "$T/err"; die "prune did not forget five"; }
bv backup "$fresh" "$img" --name=disk -q
size=$(du -sb "$repo" | cut -f1)
base=$(du -sb "$fresh" | cut -f1)
echo "pruned repository: $size bytes; fresh repository of the newest snapshot: $base bytes" \
     "($(( size * 1000 / base )) per mille)"
[ $(( size * 100 )) -le $(( base * 115 )) ] || { cat "$T/out"; die "the pruned repository is $size bytes, above 115% of $base"; }
bv verify "$repo" --read-data >/dev/null 2>"$T/verify.err" || { cat "$T/verify.err"; die "verify after prune"; }
bv restore "$repo" disk "$T/restored" 2>/dev/null
assert_same "$img" "$T/restored"
