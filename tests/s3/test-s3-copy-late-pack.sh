#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A copy to S3 that sends a new pack (objects of a SRC pack part of which DST holds already, as
# when a copy resends the objects of a pack a gc condemned: test-s3-copy-gc) whose PUT the
# server does but answers after BLKVAULT_S3_TIMEOUT (tests/s3/fault-proxy.py slow:S): the retry,
# create-only, meets its own object (412 PreconditionFailed). The new pack's name is random, so
# the one there is this copy's: the copy completes (it failed before with the 412: checked
# failing), the snapshot restores bit-exact and verify --read-data passes.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/s3/s3-lib.sh"
need_cmd openssl python3
s3_start
s3_mb bvlp
fault_proxy_start
export BLKVAULT_CACHE_DIR=$T/cache BLKVAULT_PASSPHRASE=s3-late-pack-pass
loc=s3://bvlp/site
faults_served() { grep -c . "$FAULTS.log" 2>/dev/null || echo 0; }

# DST holds the objects of img-a (copied from mid, a repository related to src); src's one
# pack holds those of img-a and img-b: a copy of src sends only img-b's, in a new pack
src=$T/src mid=$T/mid
bv init "$src" -q
bv copy "$src" "$mid" -q || die "the copy of the empty repository"
randfile "$T/img-a" 3 s3lp-a
randfile "$T/img-b" 3 s3lp-b
cat "$T/img-a" "$T/img-b" >"$T/img-ab"
bv backup "$mid" "$T/img-a" --name=a -q
bv copy "$mid" "$loc" -q || die "the copy of img-a"
bv backup "$src" "$T/img-ab" --name=ab -q
[ "$(find "$src/packs" -name '*.pack' | wc -l)" = 1 ] || die "src holds more than one pack"
npacks=$(find "$S3_DIR/data/bvlp/site/packs" -name '*.pack' | wc -l)

rm -f "$FAULTS.log"
echo "slow:15 1 /bvlp/site/packs/ PUT" >"$FAULTS"
BLKVAULT_S3_TIMEOUT=2 AWS_ENDPOINT_URL=$FAULT_URL bv copy "$src" "$loc" --json >"$T/c.json" 2>"$T/c.err" ||
    { cat "$T/c.err"; die "a copy whose new pack's PUT was answered late"; }
: >"$FAULTS"
[ "$(faults_served)" = 1 ] || die "late pack PUT: the proxy served $(faults_served) faults"
grep -q "no answer from $FAULT_URL for 2 s, retrying" "$T/c.err" || die "the late answer was not said: $(cat "$T/c.err")"
python3 -c 'import json,sys; s=json.load(sys.stdin); assert s["packs_written"] == 1, s' <"$T/c.json" ||
    die "the copy sent no new pack: $(cat "$T/c.json")"
assert_eq "$(find "$S3_DIR/data/bvlp/site/packs" -name '*.pack' | wc -l)" "$((npacks + 1))" "packs at DST"
rm -f "$T/out"
bv restore "$loc" ab@latest "$T/out" -q || die "restore of the snapshot whose new pack's PUT was late"
assert_same "$T/img-ab" "$T/out"
bv verify "$loc" --read-data >/dev/null 2>"$T/v.err" || { cat "$T/v.err"; die "verify --read-data"; }
echo ok
