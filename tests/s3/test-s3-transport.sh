#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Answers spoiled on the way (tests/s3/fault-proxy.py in front of a real versitygw), for the
# commands that read and write an S3 repository:
#  1. a 200 (206) whose body is cut short, one whose Content-Length is larger than its body, and
#     one whose Content-Length is smaller (the rest left on the kept-alive connection), on a
#     pack's GET during restore and on a LIST: retried or refused, never taken as data (restore is
#     bit-exact, or fails naming the object);
#     a connection closed without an answer to a copy's pack PUT is sent again;
#  2. a server that does a copy's PUT (a pack, the index segment, the snapshot record) but answers
#     after BLKVAULT_S3_TIMEOUT: the retry finds the object there and the copy completes; every
#     snapshot restores bit-exact and verify --read-data passes;
#  3. gc whose LIST of gc/ fails (HTTP 500 past the attempts, then an answer that is no listing)
#     stops naming the listing and what was wrong (it said only "Bad message" before: checked
#     failing), deletes nothing, and the next gc completes;
#  4. a pack gone from under a reader (what a reader stopped past its lease's grace meets after a
#     gc): restore and an NBD export fail naming the pack and the HTTP 404 (they said 'missing
#     data (the repository needs repair)' alone before).
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/s3/s3-lib.sh"
. "$SOURCE_ROOT/tests/nbd/nbd-lib.sh"
need_cmd openssl python3 nbdcopy
s3_start
s3_mb bvtr
fault_proxy_start
export BLKVAULT_CACHE_DIR=$T/cache BLKVAULT_PASSPHRASE=s3-transport-pass
loc=s3://bvtr/site
faults_served() { grep -c . "$FAULTS.log" 2>/dev/null || echo 0; }
viaproxy() { AWS_ENDPOINT_URL=$FAULT_URL "$@"; }

src=$T/src
bv init "$src" -q
randfile "$T/img1" 6 s3tr-1
bv backup "$src" "$T/img1" --name=disk -q
bv copy "$src" "$loc" -q || die "copy to S3"

# 1. a spoiled answer to a pack's GET and to a LIST
for fault in cut longlen shortlen; do
    for what in "/bvtr/site/packs/ GET" "/bvtr?list-type=2 GET"; do
        rm -f "$FAULTS.log" "$T/out"
        rm -rf "$T/cache" # nothing from the cache: the packs and listings come through the proxy
        echo "$fault 1 $what" >"$FAULTS"
        rc=0
        viaproxy bv restore "$loc" disk@latest "$T/out" -q 2>"$T/r.err" || rc=$?
        : >"$FAULTS"
        [ "$(faults_served)" = 1 ] || die "$fault on '$what': the proxy served $(faults_served) faults"
        grep -q AddressSanitizer "$T/r.err" && { cat "$T/r.err"; die "$fault on '$what'"; }
        if [ "$rc" = 0 ]; then
            assert_same "$T/img1" "$T/out"
        else
            # refused: it names the object or listing and what was wrong, never 'damaged data'
            grep -q "s3://bvtr/site" "$T/r.err" || die "$fault on '$what' failed without naming the object: $(cat "$T/r.err")"
            ! grep -q "damaged data" "$T/r.err" || die "$fault on '$what' was taken as damage at home: $(cat "$T/r.err")"
        fi
        echo "$fault on '$what': exit $rc $(head -c 300 "$T/r.err")" >&2
    done
done

# a connection closed without an answer to a copy's PUT of a pack, on a kept-alive connection:
# curl sends it again on a new one, which needs the body rewound (it failed before: "necessary
# data rewind wasn't possible", not retried)
randfile "$T/img-reset" 3 s3tr-reset
bv backup "$src" "$T/img-reset" --name=reset -q
rm -f "$FAULTS.log"
echo "reset 1 /bvtr/site/packs/ PUT" >"$FAULTS"
viaproxy bv copy "$src" "$loc" -q 2>"$T/c.err" || { cat "$T/c.err"; die "a copy whose pack PUT met a closed connection"; }
: >"$FAULTS"
[ "$(faults_served)" = 1 ] || die "reset on a PUT: the proxy served $(faults_served) faults"
rm -f "$T/out"
bv restore "$loc" reset@latest "$T/out" -q || die "restore of the snapshot whose PUT met a closed connection"
assert_same "$T/img-reset" "$T/out"

# 2. a PUT done but answered too late: retried, the object found there
for what in packs index snapshots; do
    randfile "$T/img-$what" 3 "s3tr-$what"
    bv backup "$src" "$T/img-$what" --name="$what" -q
    rm -f "$FAULTS.log"
    echo "slow:15 1 /bvtr/site/$what/ PUT" >"$FAULTS"
    BLKVAULT_S3_TIMEOUT=2 viaproxy bv copy "$src" "$loc" -q 2>"$T/c.err" ||
        { cat "$T/c.err"; die "a copy whose $what PUT was answered late"; }
    : >"$FAULTS"
    [ "$(faults_served)" = 1 ] || die "late $what PUT: the proxy served $(faults_served) faults"
    grep -q "no answer from $FAULT_URL for 2 s, retrying" "$T/c.err" || die "the late answer was not said: $(cat "$T/c.err")"
    rm -f "$T/out"
    bv restore "$loc" "$what@latest" "$T/out" -q || die "restore of the snapshot whose $what PUT was late"
    assert_same "$T/img-$what" "$T/out"
done
bv verify "$loc" --read-data >/dev/null 2>"$T/v.err" || { cat "$T/v.err"; die "verify --read-data"; }

# 3. gc's LIST of gc/ fails
data=$S3_DIR/data/bvtr/site
npacks=$(find "$data/packs" -name '*.pack' | wc -l)
for fault in 500 junk; do
    rm -f "$FAULTS.log"
    echo "$fault 10 /bvtr?list-type=2&prefix=site%2Fgc%2F GET" >"$FAULTS"
    rc=0
    AWS_MAX_ATTEMPTS=2 viaproxy bv gc "$loc" >/dev/null 2>"$T/gc.err" || rc=$?
    : >"$FAULTS"
    [ "$rc" != 0 ] || die "gc whose LIST of gc/ failed ($fault) succeeded"
    [ "$(faults_served)" -ge 1 ] || die "$fault: the proxy served no fault"
    case $fault in
    500) want="(s3://bvtr/site: LIST of 'gc/': HTTP 500 InternalError after 2 attempts" ;;
    junk) want="(s3://bvtr/site: LIST of 'gc/': the answer does not parse: <NotAnS3Answer>, not a ListBucketResult)" ;;
    esac
    grep -qF "$want" "$T/gc.err" || die "gc's failed LIST of gc/ ($fault): $(cat "$T/gc.err")"
    grep -q "nothing was lost" "$T/gc.err" || die "gc's failed LIST ($fault) does not say nothing was lost: $(cat "$T/gc.err")"
    assert_eq "$(find "$data/packs" -name '*.pack' | wc -l)" "$npacks" "packs after gc failed ($fault)"
done
bv gc "$loc" -q 2>"$T/gc.err" || { cat "$T/gc.err"; die "gc after the failed ones"; }
rm -f "$T/out"
bv restore "$loc" snapshots@latest "$T/out" -q || die "restore after gc"
assert_same "$T/img-snapshots" "$T/out"

# 4. a pack gone from under a reader
pack=$(cd "$data" && find packs -name '*.pack' | head -n 1)
s3_curl -f -X DELETE "http://127.0.0.1:$S3_PORT/bvtr/site/$pack" >/dev/null || die "DELETE $pack"
rm -rf "$T/cache" "$T/out"
rc=0
for snap in disk reset packs index snapshots; do
    bv restore "$loc" "$snap@latest" "$T/out" -q 2>"$T/r.err" || { rc=$?; break; }
    rm -f "$T/out"
done
[ "$rc" = 4 ] || die "restore with a pack gone: exit $rc, not 4: $(cat "$T/r.err")"
grep -qF "missing data (the repository needs repair) at image offset" "$T/r.err" || die "restore with a pack gone: $(cat "$T/r.err")"
grep -qE "\(s3://bvtr/site/$pack: (HEAD|GET): HTTP 404" "$T/r.err" ||
    die "restore with a pack gone does not name it and the 404: $(cat "$T/r.err")"
start_serve s1 "$loc" "$snap@latest" --socket="$T/s1.sock" || die "serve from S3 did not start"
! nbdcopy "$SERVE_URI" "$T/served.img" 2>/dev/null || die "the export read a snapshot whose pack is gone"
grep -qE "\(s3://bvtr/site/$pack: (HEAD|GET): HTTP 404" "$T/s1.log" ||
    die "the export does not name the pack gone and the 404: $(cat "$T/s1.log")"
echo ok
