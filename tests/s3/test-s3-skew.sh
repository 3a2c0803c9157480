#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# gc on S3 with a server whose clock is 10 minutes off this machine's (docs/LIFECYCLE.md, "gc on
# S3", clocks): a lease's age is measured by the server's clock (its Last-Modified against the
# Date of the same HEAD), so the skew changes nothing. Through tests/s3/fault-proxy.py, which
# moves every time the server states (Date, Last-Modified, listings) by the skew:
#  1. the server 10 minutes behind (this machine ahead): gc beside an export of a pruned snapshot
#     takes its live lease for live, deletes nothing, and nbdcopy of the export is the original
#     (before the fix it reaped the lease and deleted the pack the export reads: checked failing);
#  2. the server 10 minutes ahead: once the export ended and its grace passed, gc reaps its lease
#     and deletes the pack, as without the skew (before, the dead lease looked live 10 more
#     minutes); what is left restores bit-exact.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/s3/s3-lib.sh"
. "$SOURCE_ROOT/tests/nbd/nbd-lib.sh"
need_cmd nbdcopy openssl python3
s3_start
s3_mb bvskew
fault_proxy_start
export BLKVAULT_PASSPHRASE=s3-skew-pass
export BLKVAULT_S3_LEASE_HEARTBEAT=2 # a lease is alive for 10 s after its last beat
grace=11
loc=s3://bvskew/site
data=$S3_DIR/data/bvskew/site
jget() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
npacks() { find "$data/packs" -name '*.pack' | wc -l; }
# gc_skewed SECONDS: gc through the proxy, the server's clock moved by SECONDS, as another machine
gc_skewed() {
    echo "skew:$1 100000" >"$FAULTS"
    BLKVAULT_CACHE_DIR=$T/gc-cache AWS_ENDPOINT_URL=$FAULT_URL bv gc "$loc" --json >"$T/gc.json" 2>"$T/gc.err" ||
        { cat "$T/gc.err"; die "gc with the server's clock $1 s off"; }
    : >"$FAULTS"
    grep -q '^skew' "$FAULTS.log" || die "the proxy moved no time"
}

src=$T/src
bv init "$src" -q
for i in 1 2; do
    randfile "$T/img$i" 4 "s3skew-$i"
    bv backup "$src" "$T/img$i" --name=disk -q
    sleep 1 # one second each: list orders snapshots by time
done
id1=$(bv list "$src" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["snapshot"])')
id2=$(bv list "$src" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[1]["snapshot"])')
export BLKVAULT_CACHE_DIR=$T/cache
bv copy "$src" "$loc" -q || die "copy to S3"
packs=$(npacks)

# 1. the server's clock 10 minutes behind: a live export's lease stays live
start_serve s1 "$loc" "$id1" --socket="$T/s1.sock" || die "serve from S3 did not start"
want=$(sha256sum <"$T/img1" | cut -d' ' -f1)
assert_eq "$(nbdcopy "$SERVE_URI" - | sha256sum | cut -d' ' -f1)" "$want" "the export before prune"
bv prune "$loc" --keep-last=1 --no-gc -q || die "prune at S3"
sleep 3 # the lease is at least a beat old
gc_skewed -600
assert_eq "$(jget leases_reaped <"$T/gc.json")" 0 "live leases reaped with the server 10 minutes behind"
assert_eq "$(jget packs_deleted <"$T/gc.json")" 0 "packs deleted beside a live export (server 10 minutes behind)"
assert_eq "$(npacks)" "$packs" "packs at S3 beside a live export"
nbdcopy "$SERVE_URI" "$T/served.img" || die "the export after gc"
assert_same "$T/img1" "$T/served.img"
stop_serve

# 2. the server's clock 10 minutes ahead: a dead lease is reaped after its grace, no later
sleep "$grace"
gc_skewed 600
[ "$(jget packs_deleted <"$T/gc.json")" -ge 1 ] ||
    die "gc deleted nothing once the export ended (server 10 minutes ahead): $(cat "$T/gc.json")"
[ "$(npacks)" -lt "$packs" ] || die "the pruned snapshot's pack is still at S3"
rm -f "$T/out"
bv restore "$loc" "$id2" "$T/out" -q || die "restore after gc"
assert_same "$T/img2" "$T/out"
echo ok
