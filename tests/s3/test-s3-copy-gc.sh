#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# copy to S3 beside gc on the same repository, as three machines (three cache directories) on a
# real versitygw, tests/s3/fault-proxy.py holding a copy's index segment PUT on the way:
#  1. a copy killed (SIGKILL) between its packs and its index segment: its packs are at S3, no
#     segment names them and no record was published; list, verify --read-data and restore of
#     what was there before hold;
#  2. gc meanwhile (another machine) condemns those orphan packs but keeps them while the killed
#     copy's lease lives;
#  3. past that lease's grace, the next copy (a third machine) sends the same snapshot, finding
#     the condemned packs there (create-only PUT: 412), while a gc runs between its packs and its
#     segment. That gc's finalize deleted the packs the copy had counted as there, and the copy
#     then published a record whose data was gone (restore failed: checked failing before the
#     fix). Now a copy that finds a pack there that a condemned list names sends its objects in a
#     new pack; the copy completes (or stops with ESTALE and completes when run again), and every
#     snapshot restores bit-exact; verify --read-data and a last gc pass.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/s3/s3-lib.sh"
need_cmd openssl python3
s3_start
s3_mb bvcg
fault_proxy_start
export BLKVAULT_PASSPHRASE=s3-copy-gc-pass
export BLKVAULT_S3_LEASE_HEARTBEAT=4 # a lease is alive for 20 s after its last beat
grace=21
loc=s3://bvcg/site
data=$S3_DIR/data/bvcg/site
jget() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
keys() { (cd "$data" && find "$1" -type f 2>/dev/null | sort); }
at() { local m=$1; shift; BLKVAULT_CACHE_DIR=$T/cache-$m "$@"; }
restores() { # ID IMAGE
    rm -f "$T/out"
    at reader bv restore "$loc" "$1" "$T/out" -q 2>"$T/restore.err" || { cat "$T/restore.err"; die "restore of $2 from S3"; }
    assert_same "$T/$2" "$T/out"
}
verifies() { at reader bv verify "$loc" --read-data >/dev/null 2>"$T/verify.err" || { cat "$T/verify.err"; die "verify --read-data: $1"; }; }
# wait_fault KIND: until the proxy served a fault of KIND
wait_fault() {
    local i
    for i in $(seq 1 600); do
        grep -q "^$1" "$FAULTS.log" 2>/dev/null && return 0
        sleep 0.1
    done
    cat "$FAULTS.log" "$T"/*.err >&2 2>/dev/null; tail -n 5 "$S3_LOG" >&2; die "the proxy served no $1"
}

src=$T/src
bv init "$src" -q
randfile "$T/img0" 4 s3cg-0
bv backup "$src" "$T/img0" --name=zero -q
id0=$(bv list "$src" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[-1]["snapshot"])')
at one bv copy "$src" "$loc" -q || die "the first copy"
sleep 1
randfile "$T/img1" 6 s3cg-1
bv backup "$src" "$T/img1" --name=one -q
id1=$(bv list "$src" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[-1]["snapshot"])')
keys packs >"$T/packs0"
keys index >"$T/index0"

# 1. a copy killed between its packs and its index segment
echo "hold:60 1 /bvcg/site/index/ PUT" >"$FAULTS"
BLKVAULT_CACHE_DIR=$T/cache-a AWS_ENDPOINT_URL=$FAULT_URL "$BLKVAULT" copy "$src" "$loc" -q 2>"$T/a.err" &
pid=$!
wait_fault hold
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
: >"$FAULTS"
comm -13 "$T/packs0" <(keys packs) >"$T/orphans"
[ -s "$T/orphans" ] || die "the killed copy put no pack"
assert_eq "$(keys index)" "$(cat "$T/index0")" "index segments after a copy killed before its segment"

# 2. gc (machine g) while the killed copy's lease lives: the orphans are condemned, kept
at g bv gc "$loc" --json >"$T/g1.json" 2>"$T/g1.err" || { cat "$T/g1.err"; die "gc after the killed copy"; }
assert_eq "$(jget packs_deleted <"$T/g1.json")" 0 "packs deleted while the killed copy's lease lives"
comm -23 "$T/orphans" <(keys packs) >"$T/gone"
[ ! -s "$T/gone" ] || die "gc deleted the killed copy's packs within its grace: $(cat "$T/gone")"
[ -n "$(keys gc | grep '\.idx$')" ] || die "gc condemned no orphan: $(keys gc)"
at reader bv list "$loc" >"$T/list" || die "list after the killed copy"
! grep -q "${id1:0:8}" "$T/list" || die "a record was published without its segment: $(cat "$T/list")"
restores "$id0" img0
verifies "after the killed copy"

# 3. past the grace, the next copy (machine b) with a gc between its packs and its segment
sleep "$grace"
rm -f "$FAULTS.log"
echo "hold:8 1 /bvcg/site/index/ PUT" >"$FAULTS"
BLKVAULT_CACHE_DIR=$T/cache-b AWS_ENDPOINT_URL=$FAULT_URL "$BLKVAULT" copy "$src" "$loc" --json >"$T/b.json" 2>"$T/b.err" &
pid=$!
wait_fault hold
at g bv gc "$loc" --json >"$T/g2.json" 2>"$T/g2.err" || { cat "$T/g2.err"; die "gc beside the copy"; }
rc=0
wait "$pid" || rc=$?
: >"$FAULTS"
echo "copy beside gc: exit $rc; gc: $(cat "$T/g2.json")" >&2
if [ "$rc" != 0 ]; then
    grep -q "run the copy again" "$T/b.err" || die "the copy beside gc failed: $(cat "$T/b.err")"
    at b bv copy "$src" "$loc" -q 2>"$T/b2.err" || { cat "$T/b2.err"; die "the copy run again"; }
fi
# no gc in between: a condemn that slipped between the copy's epoch check and its record's PUT
# was settled by the copy (LIFECYCLE.md, "A copy's commit against a condemn on another machine")
restores "$id1" img1
restores "$id0" img0
verifies "after the copy beside gc"
sleep "$grace"
at g bv gc "$loc" -q 2>"$T/g3.err" || { cat "$T/g3.err"; die "the last gc"; }
restores "$id1" img1
verifies "after the last gc"
echo ok
