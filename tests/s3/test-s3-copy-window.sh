#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The copy/condemn window (docs/LIFECYCLE.md, "A copy's commit against a condemn on another
# machine") on a real versitygw, tests/s3/fault-proxy.py pausing the copy's record PUT, which comes
# after the copy checked gc/epoch:
#  - DST holds snapshots a and c; prune there forgets a. SRC's snapshot b is a's image again, so the
#    copy of b finds every object at DST and sends only its record;
#  - while that record's PUT waits at the proxy, a gc on another machine (another cache directory)
#    marks c only and condemns a's packs (their list waits for the copy's lease: nothing deleted);
#  - the record goes up, the copy ends. Before, b's record named objects that the index no longer
#    had: its restore failed (EUCLEAN) until a later gc mended it (checked failing before the fix).
#    Now the copy waits for gc leases after its records, sees gc/epoch moved and writes what the
#    condemn dropped back into the index from the list: b restores bit-exact at once, with no gc
#    in between; verify --read-data; then gc (the copy's lease gone) deletes nothing b reads.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/s3/s3-lib.sh"
need_cmd python3
s3_start
s3_mb bvcw
fault_proxy_start
export BLKVAULT_PASSPHRASE=s3-copy-window-pass
export BLKVAULT_S3_LEASE_HEARTBEAT=4
loc=s3://bvcw/site
jget() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
at() { local m=$1; shift; BLKVAULT_CACHE_DIR=$T/cache-$m "$@"; }
last_id() { bv list "$src" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[-1]["snapshot"])'; }
restores() { # ID IMAGE
    rm -f "$T/out"
    at reader bv restore "$loc" "$1" "$T/out" -q 2>"$T/restore.err" || { cat "$T/restore.err"; die "restore of $2 from S3: $3"; }
    assert_same "$T/$2" "$T/out"
}

src=$T/src
bv init "$src" -q
randfile "$T/img" 6 s3cw-a
randfile "$T/imgc" 3 s3cw-c
bv backup "$src" "$T/img" --name=site -q
ida=$(last_id)
sleep 1
bv backup "$src" "$T/imgc" --name=site -q
idc=$(last_id)
at one bv copy "$src" "$loc" -q || die "the first copy"
at one bv prune "$loc" --keep-last=1 --no-gc -q || die "prune at DST"
at reader bv list "$loc" >"$T/list"
! grep -q "${ida:0:8}" "$T/list" || die "prune kept a: $(cat "$T/list")"
sleep 1
bv backup "$src" "$T/img" --name=site -q
idb=$(last_id)

echo "wait:$T/go 1 /bvcw/site/snapshots/ PUT" >"$FAULTS"
BLKVAULT_CACHE_DIR=$T/cache-b AWS_ENDPOINT_URL=$FAULT_URL "$BLKVAULT" copy "$src" "$loc" "$idb" --json \
    >"$T/b.json" 2>"$T/b.err" &
pid=$!
fault_wait_held "$pid" "$T/b.err" "record PUT"
at g bv gc "$loc" --json >"$T/g.json" 2>"$T/g.err" || { touch "$T/go"; cat "$T/g.err"; die "gc inside the window"; }
touch "$T/go"
rc=0
wait "$pid" || rc=$?
: >"$FAULTS"
[ "$rc" = 0 ] || { cat "$T/b.err"; die "the copy beside gc failed ($rc)"; }
echo "gc inside the window: $(cat "$T/g.json")" >&2
[ "$(jget packs_deleted <"$T/g.json")" = 0 ] || die "gc deleted packs while the copy's lease lived"
[ "$(jget packs_dead <"$T/g.json")" -gt 0 ] || die "gc condemned nothing: the window was not reproduced"
assert_eq "$(jget snapshots_copied <"$T/b.json")" 1 "records the copy published"

# at once, no gc in between
restores "$idb" img "right after the copy"
restores "$idc" imgc "right after the copy"
at reader bv verify "$loc" --read-data >/dev/null 2>"$T/verify.err" || { cat "$T/verify.err"; die "verify --read-data after the copy"; }

# the copy's lease is gone: gc finalizes a's list and keeps what b reads
at g bv gc "$loc" -q 2>"$T/g2.err" || { cat "$T/g2.err"; die "gc after the copy"; }
restores "$idb" img "after gc"
restores "$idc" imgc "after gc"
echo ok
