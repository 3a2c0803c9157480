#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# copy --prune (a real versitygw): after the copy DST's own retention (--keep-* as prune takes
# them) forgets there what no rule keeps and gc reclaims its packs, while SRC keeps everything;
# what DST keeps restores bit-exact and verifies; the same into a directory; the option errors.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/s3/s3-lib.sh"
need_cmd openssl python3
s3_start
s3_mb bvcp
export BLKVAULT_CACHE_DIR=$T/cache BLKVAULT_PASSPHRASE=s3-copy-prune
loc=s3://bvcp/site
data=$S3_DIR/data/bvcp/site
src=$T/src
bv init "$src" -q
for i in 1 2 3; do
    randfile "$T/img$i" 4 "cp-prune-$i"
    bv backup "$src" "$T/img$i" --name=disk -q
done
newest=$(bv list "$src" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[-1]["snapshot"])')
count() { bv list "$1" --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))'; }

# the option errors: nothing is copied
expect_fail 2 "copy --prune needs DST's retention" bv copy "$src" "$loc" --prune
expect_fail 2 "give --prune too" bv copy "$src" "$loc" --keep-last=1
expect_fail 2 "copy --prune does not print JSON" bv copy "$src" "$loc" --prune --keep-last=1 --json
expect_fail 2 "invalid --keep-last 'x'" bv copy "$src" "$loc" --prune --keep-last=x
[ ! -e "$data/config" ] || die "a refused copy created DST"

# to S3: three copied, two forgotten there and their packs deleted
bv copy "$src" "$loc" --prune --keep-last=1 >"$T/out" 2>"$T/err" || { cat "$T/err"; die "copy --prune to S3"; }
grep -q "^deleted 2 packs" "$T/out" || { cat "$T/out"; die "copy --prune did not gc DST"; }
assert_eq "$(count "$loc")" 1 "snapshots at DST"
assert_eq "$(count "$src")" 3 "snapshots at SRC"
assert_eq "$(find "$data/packs" -name '*.pack' | wc -l)" 1 "packs at DST"
bv restore "$loc" "$newest" "$T/out.img" -q
assert_same "$T/img3" "$T/out.img"
bv verify "$loc" --read-data >/dev/null 2>"$T/err" || { cat "$T/err"; die "verify of DST"; }
# run again: the forgotten ones are copied again and forgotten again; no lease is left
bv copy "$src" "$loc" --prune --keep-last=1 >"$T/out" 2>"$T/err" || { cat "$T/err"; die "copy --prune again"; }
assert_eq "$(count "$loc")" 1 "snapshots at DST after a second copy --prune"
[ -z "$(ls "$data/leases" 2>/dev/null)" ] || die "leases left at DST: $(ls "$data/leases")"

# into a directory
bv copy "$src" "$T/dst" --prune --keep-last=2 >"$T/out" 2>"$T/err" || { cat "$T/err"; die "copy --prune to a directory"; }
assert_eq "$(count "$T/dst")" 2 "snapshots in the directory"
assert_eq "$(find "$T/dst/packs" -name '*.pack' | wc -l)" 2 "packs in the directory"
bv restore "$T/dst" "$newest" "$T/out2.img" -q
assert_same "$T/img3" "$T/out2.img"
echo ok
