#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# An S3 endpoint that answers a LIST with keys outside the prefix it was asked for (a broken or
# hostile store, or a proxy in between): the listing is refused (EBADMSG),
# naming the location, never read past the key's end (ASan) nor taken as objects of the
# repository. Neighbouring prefixes (s3://b/repo and s3://b/repo2) stay apart.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/s3/s3-lib.sh"
s3_start
s3_mb bvhostile
fault_proxy_start
export BLKVAULT_CACHE_DIR=$T/cache
export BLKVAULT_PASSPHRASE='s3 hostile test'

randfile "$T/disk.img" 4 hostile
bv init "$T/repo" >/dev/null
bv backup "$T/repo" "$T/disk.img" --name=one >/dev/null
bv copy "$T/repo" s3://bvhostile/repo >/dev/null
bv copy "$T/repo" s3://bvhostile/repo2 >/dev/null
bv backup "$T/repo" "$T/disk.img" --name=two >/dev/null
bv copy "$T/repo" s3://bvhostile/repo2 two >/dev/null

# neighbouring prefixes: repo lists its one snapshot, repo2 its two
bv list s3://bvhostile/repo >"$T/l1"
bv list s3://bvhostile/repo2 >"$T/l2"
grep -q one "$T/l1" && ! grep -q two "$T/l1" || die "s3://bvhostile/repo lists: $(cat "$T/l1")"
grep -q one "$T/l2" && grep -q two "$T/l2" || die "s3://bvhostile/repo2 lists: $(cat "$T/l2")"

# a LIST of the snapshot records answered with keys that are not under the prefix asked for:
# 'repo/s' (shorter than repo/snapshots/) and 'other/snapshots/x'
for key in repo/s other/snapshots/x; do
    echo "badlist:$key 5 /bvhostile?list-type=2&prefix=repo%2Fsnapshots" >"$FAULTS"
    rc=0
    AWS_ENDPOINT_URL=$FAULT_URL bv list s3://bvhostile/repo >"$T/out" 2>"$T/err" || rc=$?
    [ "$rc" != 0 ] || die "a listing with the key $key outside the prefix was taken: $(cat "$T/out")"
    grep -q "AddressSanitizer" "$T/err" && die "key $key: $(cat "$T/err")"
    # which listing and what was wrong (only "Bad message" before)
    grep -qF "s3://bvhostile/repo: LIST of 'snapshots/': the answer does not parse: key '$key' is outside the prefix 'repo/snapshots/' asked for" "$T/err" ||
        die "key $key: unclear message: $(cat "$T/err")"
    [ -s "$FAULTS.log" ] || die "the proxy served no bad listing"
    rm -f "$FAULTS.log"
done
: >"$FAULTS"
AWS_ENDPOINT_URL=$FAULT_URL bv list s3://bvhostile/repo | grep_q one || die "list through the proxy"
