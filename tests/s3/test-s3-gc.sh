#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# prune and gc on an S3 repository (a real versitygw; docs/LIFECYCLE.md, "gc on S3"):
#  1. a local repository of four snapshots copied to S3; 'blkvault serve' exports the first from
#     S3 while prune forgets it there and gc runs, twice: the export's lease (an object with a
#     heartbeat) keeps its pack, and nbdcopy of the whole export is the original after each gc;
#     once the export ended the next gc deletes that pack: one DELETE for it, and a handful of
#     LISTs (the server's access log counts them); every remaining snapshot restores bit-exact
#     from S3 and verify --read-data passes there;
#  2. an export killed with SIGKILL leaves a lease whose heartbeat stopped: gc honours it for the
#     grace ($BLKVAULT_S3_LEASE_HEARTBEAT x 5 s) and then reaps it and deletes the pack;
#  3. gc killed (SIGKILL) at random moments, then run again: the killed one's gc lease keeps a
#     second gc out (a message naming it) until its grace passed, then gc completes and nothing
#     referenced is lost (restore bit-exact, verify --read-data);
#  4. another machine's gc (a live gc lease) keeps gc out, naming the lease; a DELETE that fails
#     names the pack, and the next gc completes.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/s3/s3-lib.sh"
. "$SOURCE_ROOT/tests/nbd/nbd-lib.sh"
need_cmd nbdcopy openssl python3
s3_start
s3_mb bvgc
export BLKVAULT_CACHE_DIR=$T/cache BLKVAULT_PASSPHRASE=s3-gc-pass
# a lease is alive for 30 s after its last beat: room for prune and gc to end within it (part 2)
# while other tests load the machine (15 s was not, beside the other suites)
export BLKVAULT_S3_LEASE_HEARTBEAT=6
grace=31 # the age, by the server's clock, at which gc takes a lease for dead
loc=s3://bvgc/site
data=$S3_DIR/data/bvgc/site
# waits until every lease at S3 is $grace s old by the server's clock, as gc measures it: a sleep of
# $grace s after the last PUT is not enough, gc may still see 30 s (s3_wait_stale)
leases_stale() {
    local f
    for f in "$data"/leases/*.lease; do
        [ -e "$f" ] || continue
        s3_wait_stale "bvgc/site/leases/${f##*/}" "$grace"
    done
}
jget() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval("d" + sys.argv[1]))' "$1"; }

src=$T/src
bv init "$src" -q
# one name, so that the rules keep the newest: ids[i] is image i's snapshot
ids=(-)
for i in 1 2 3 4 5; do
    randfile "$T/img$i" 5 "s3gc-$i"
    [ "$i" = 5 ] && break
    bv backup "$src" "$T/img$i" --name=disk -q
    ids+=("$(bv list "$src" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[-1]["snapshot"])')")
done
bv copy "$src" "$loc" -q 2>"$T/copy.err" || { cat "$T/copy.err"; die "copy to S3"; }
npacks() { find "$data/packs" -name '*.pack' | wc -l; }
nleases() { find "$data/leases" -maxdepth 1 -type f -name '*.lease' 2>/dev/null | wc -l; }
assert_eq "$(npacks)" 4 "packs at S3 after the copy"
new_snapshot() { # I: image I (made if missing) backed up as ids[I] and copied to S3
    [ -e "$T/img$1" ] || randfile "$T/img$1" 5 "s3gc-$1"
    bv backup "$src" "$T/img$1" --name=disk -q
    ids[$1]=$(bv list "$src" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[-1]["snapshot"])')
    bv copy "$src" "$loc" "${ids[$1]}" -q
}
restores() { # I...: the snapshot of each image I restores bit-exact from S3
    local i
    for i in "$@"; do
        rm -f "$T/out"
        bv restore "$loc" "${ids[$i]}" "$T/out" -q || die "restore of image $i from S3"
        assert_same "$T/img$i" "$T/out"
    done
}
verifies() { bv verify "$loc" --read-data >/dev/null 2>"$T/verify.err" || { cat "$T/verify.err"; die "verify --read-data on S3"; }; }
gc_json() { bv gc "$loc" --json 2>"$T/gc.err" >"$T/gc.json" || { cat "$T/gc.err"; die "gc on S3"; }; }

# 1. prune and gc beside an export of the forgotten snapshot
start_serve s1 "$loc" "${ids[1]}" --socket="$T/s1.sock" || die "serve from S3 did not start"
read_all() { nbdcopy "$SERVE_URI" - | sha256sum | cut -d' ' -f1; }
want=$(sha256sum <"$T/img1" | cut -d' ' -f1)
assert_eq "$(read_all)" "$want" "the export before prune"
[ "$(nleases)" -ge 1 ] || die "serve on S3 holds no lease"
bv prune "$loc" --keep-last=3 >"$T/prune.out" 2>"$T/prune.err" || { cat "$T/prune.err"; die "prune on S3"; }
grep -q "^forget  ${ids[1]:0:8} " "$T/prune.out" || { cat "$T/prune.out"; die "prune did not forget the oldest"; }
grep -qx "deleted 0 packs, 0 B" "$T/prune.out" || { cat "$T/prune.out"; die "prune's gc deleted what the export reads"; }
grep -q "^note: 1 condemned lists wait" "$T/prune.out" || { cat "$T/prune.out"; die "no list waits for the export"; }
assert_eq "$(npacks)" 4 "packs while n1 is served"
assert_eq "$(read_all)" "$want" "the forgotten snapshot, served after prune's gc"
gc_json
assert_eq "$(jget '["packs_deleted"]' <"$T/gc.json")" 0 "packs deleted by gc while the export lives"
assert_eq "$(jget '["lists_waiting"]' <"$T/gc.json")" 1 "lists waiting while the export lives"
nbdcopy "$SERVE_URI" "$T/served.img"
assert_same "$T/img1" "$T/served.img"
stop_serve
leases_stale # the export's leases (one per connection) end with it, or, if it died, after the grace

lines=$(wc -l <"$S3_LOG")
gc_json
tail -n +"$((lines + 1))" "$S3_LOG" >"$T/gc.log"
assert_eq "$(jget '["packs_deleted"]' <"$T/gc.json")" 1 "packs deleted once the export ended"
assert_eq "$(npacks)" 3 "packs after the export ended"
lists=$(grep -c " s3_ListObjectsV2 " "$T/gc.log" || true)
deletes=$(grep -c " s3_DeleteObject " "$T/gc.log" || true)
pack_deletes=$(grep " s3_DeleteObject " "$T/gc.log" | grep -c " site/packs/" || true)
other_deletes=$(grep " s3_DeleteObject " "$T/gc.log" | grep -c " site/packs/\| site/gc/" || true)
reaped=$(jget '["leases_reaped"]' <"$T/gc.json")
grep " s3_ListObjectsV2 " "$T/gc.log" | grep -o "prefix=[^ &]*" | sort | uniq -c >&2 || true
echo "gc that deleted 1 of 4 packs: $lists LIST, $deletes DELETE ($pack_deletes of packs, $reaped reaped leases), $(wc -l <"$T/gc.log") requests in all" >&2
assert_eq "$pack_deletes" 1 "DELETEs of packs"
[ "$other_deletes" = 2 ] || { grep " s3_DeleteObject " "$T/gc.log" >&2; die "DELETEs of packs and condemned lists: $other_deletes (the pack, the finalized list)"; }
assert_eq "$(grep " s3_DeleteObject " "$T/gc.log" | grep -c " site/leases/" || true)" "$((reaped + 1))" "DELETEs of leases (the reaped, its own)"
[ "$lists" -le 12 ] || die "gc made $lists LIST requests for a repository of a few dozen objects"
! grep " s3_DeleteObject " "$T/gc.log" | grep -v ' 20[04] ' | grep_q . || die "a DELETE failed"
restores 2 3 4
verifies

# 2. an export killed: its lease is honoured for the grace, then reaped
start_serve s2 "$loc" "${ids[2]}" --socket="$T/s2.sock" || die "serve n2 from S3 did not start"
assert_eq "$(read_all)" "$(sha256sum <"$T/img2" | cut -d' ' -f1)" "the export of n2"
nbdkit=$(nbdkit_of "$SERVE_PID") || die "no nbdkit under serve"
kill -9 "$nbdkit" "$SERVE_PID"
wait "$SERVE_PID" 2>/dev/null || true
killed=$(date +%s)
assert_eq "$(nleases)" 1 "the killed export's lease"
bv prune "$loc" --keep-last=2 --no-gc -q
gc_json
[ $(( $(date +%s) - killed )) -lt $((grace - 2)) ] || die "prune and gc took longer than the grace: the test cannot tell"
assert_eq "$(jget '["packs_deleted"]' <"$T/gc.json")" 0 "packs deleted within the grace of a killed export"
assert_eq "$(jget '["leases_live"]' <"$T/gc.json")" 1 "a lease within its grace is live"
assert_eq "$(npacks)" 3 "packs within the grace"
leases_stale
gc_json
assert_eq "$(jget '["leases_reaped"]' <"$T/gc.json")" 1 "the dead lease reaped after its grace"
assert_eq "$(jget '["packs_deleted"]' <"$T/gc.json")" 1 "the pack deleted after the grace"
assert_eq "$(nleases)" 0 "leases after the reap"
restores 3 4
verifies

# 3. gc killed at random moments, then run again: each round forgets the snapshot the last kept
bv prune "$loc" --keep-last=1 --no-gc -q
last=4
for round in 1 2 3; do
    if [ "$round" -gt 1 ]; then
        last=$((5 + round))
        new_snapshot "$last"
        bv prune "$loc" --keep-last=1 --no-gc -q
    fi
    "$BLKVAULT" gc "$loc" >/dev/null 2>&1 &
    pid=$!
    sleep "0.$(( RANDOM % 8 ))"
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    # the killed gc's lease, if it took one and did not delete it: a second gc steps back, naming it,
    # or runs (the lease was gone, or being deleted as it died)
    rc=0
    "$BLKVAULT" gc "$loc" >"$T/gc2.out" 2>"$T/gc2.err" || rc=$?
    if [ "$rc" = 5 ]; then
        grep -q "is locked by another garbage collection, its lease 'leases/[0-9a-f]*\.lease' is live: {\"kind\":\"gc\"" \
            "$T/gc2.err" || { cat "$T/gc2.err"; die "the second gc did not name the killed one's lease"; }
        leases_stale
    elif [ "$rc" != 0 ]; then
        cat "$T/gc2.err"; die "gc after a killed gc exited $rc"
    fi
    restores "$last"
done
gc_json
[ "$(jget '["lists_waiting"]' <"$T/gc.json")" = 0 ] || { cat "$T/gc.json"; die "lists wait after the last gc"; }
assert_eq "$(npacks)" 1 "packs once gc completed"
restores "$last"
verifies

# 4. another machine's gc holds a gc lease: this one steps back, naming it
s3_curl -f -X PUT --data-binary '{"kind":"gc","epoch":0,"pid":1,"snapshot":""}' \
    "$AWS_ENDPOINT_URL/bvgc/site/leases/00000000000000aa.lease" >/dev/null || die "PUT of a gc lease"
[ -e "$data/leases/00000000000000aa.lease" ] || die "the gc lease was not stored"
expect_fail 5 "another garbage collection, its lease 'leases/00000000000000aa.lease' is live: {\"kind\":\"gc\"" \
    bv gc "$loc"
expect_fail 5 "another garbage collection, its lease 'leases/00000000000000aa.lease'" bv prune "$loc" --keep-last=1
leases_stale # that gc died: its lease goes stale
gc_json
assert_eq "$(jget '["leases_reaped"]' <"$T/gc.json")" 1 "the other gc's stale lease reaped"
# a DELETE that fails names the pack; the next gc completes
new_snapshot 5
bv prune "$loc" --keep-last=1 --no-gc -q >/dev/null
fault_proxy_start
echo "503 100 /bvgc/site/packs/ DELETE" >"$FAULTS"
AWS_ENDPOINT_URL=$FAULT_URL AWS_MAX_ATTEMPTS=1 expect_fail 1 "cannot collect garbage in '$loc'.*'packs/.*\.pack'" bv gc "$loc"
grep -q 503 "$FAULTS.log" || die "no DELETE met the fault"
: >"$FAULTS"
gc_json
assert_eq "$(jget '["packs_deleted"]' <"$T/gc.json")" 1 "the pack the failed DELETE left"
restores 5
verifies
echo ok
