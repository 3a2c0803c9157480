#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A copy whose lease lapsed (docs/LIFECYCLE.md, "The check before the first record") on a real
# versitygw, tests/s3/fault-proxy.py pausing the copy's LIST of snapshots/ (after its lease and its
# read of DST's index):
#  - DST holds snapshots a and c; prune there forgets a. SRC's snapshot b is a's image again, so the
#    copy of b finds every object at DST (in a's packs) and sends only its record;
#  - while the copy waits at the proxy it is stopped (SIGSTOP) for longer than the grace: its lease
#    is not put again. A gc on another machine takes it for dead, reaps it, condemns a's packs and
#    deletes them in the same run;
#  - the copy goes on. A copy skips its read of gc/epoch before its first record only while its
#    lease is fresh; this one's lapsed (its heartbeat puts the lease again once the copy runs, which
#    must not make it look fresh): it reads gc/epoch, finds it moved and stops (ESTALE) without
#    publishing b, whose data is gone. Run again, the copy sends b's objects and b restores.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/s3/s3-lib.sh"
need_cmd python3
s3_start
s3_mb bvcl
fault_proxy_start
export BLKVAULT_PASSPHRASE=s3-copy-lapsed-pass
export BLKVAULT_S3_LEASE_HEARTBEAT=1 # a lease is alive for 5 s after its last beat
loc=s3://bvcl/site
data=$S3_DIR/data/bvcl/site
jget() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
at() { local m=$1; shift; BLKVAULT_CACHE_DIR=$T/cache-$m "$@"; }
last_id() { bv list "$src" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[-1]["snapshot"])'; }

src=$T/src
bv init "$src" -q
randfile "$T/img" 6 s3cl-a
randfile "$T/imgc" 3 s3cl-c
bv backup "$src" "$T/img" --name=site -q
sleep 1
bv backup "$src" "$T/imgc" --name=site -q
idc=$(last_id)
at one bv copy "$src" "$loc" -q || die "the first copy"
at one bv prune "$loc" --keep-last=1 --no-gc -q || die "prune at DST"
sleep 1
bv backup "$src" "$T/img" --name=site -q
idb=$(last_id)

echo "wait:$T/go 1 /bvcl?list-type=2&prefix=site%2Fsnapshots%2F GET" >"$FAULTS"
BLKVAULT_CACHE_DIR=$T/cache-b AWS_ENDPOINT_URL=$FAULT_URL "$BLKVAULT" copy "$src" "$loc" "$idb" --json \
    >"$T/b.json" 2>"$T/b.err" &
pid=$!
on_exit "kill -CONT $pid; kill $pid"
fault_wait_held "$pid" "$T/b.err" "LIST of snapshots/"
kill -STOP "$pid"
sleep 7 # past the grace: the copy's lease looks dead
at g bv gc "$loc" --json >"$T/g.json" 2>"$T/g.err" || { kill -CONT "$pid"; touch "$T/go"; cat "$T/g.err"; die "gc"; }
echo "gc while the copy was stopped: $(cat "$T/g.json")" >&2
[ "$(jget packs_deleted <"$T/g.json")" -gt 0 ] || { kill -CONT "$pid"; touch "$T/go"; die "gc deleted nothing: the lapse was not reproduced"; }
kill -CONT "$pid"
sleep 2 # its heartbeat puts the lease again, less than half the grace before the copy goes on
touch "$T/go"
rc=0
wait "$pid" || rc=$?
: >"$FAULTS"
cat "$T/b.err" >&2
[ "$rc" != 0 ] || die "the copy whose lease lapsed published b ($(cat "$T/b.json"))"
grep -q "gc" "$T/b.err" || die "the copy's error does not say a gc ran beside it"
[ ! -e "$data/snapshots/$idb.snap" ] || die "b's record was published although its data was deleted"

# run again: b's objects are sent anew, and b restores bit-exact
at b bv copy "$src" "$loc" "$idb" -q 2>"$T/b2.err" || { cat "$T/b2.err"; die "the copy run again"; }
for s in "$idb:img" "$idc:imgc"; do
    rm -f "$T/out"
    at reader bv restore "$loc" "${s%%:*}" "$T/out" -q 2>"$T/restore.err" || { cat "$T/restore.err"; die "restore of ${s#*:}"; }
    assert_same "$T/${s#*:}" "$T/out"
done
echo ok
