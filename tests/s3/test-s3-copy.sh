#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# blkvault copy to S3 (a real versitygw; docs/LIFECYCLE.md, "Copies"):
#  1. copy into s3://BUCKET/PREFIX that holds nothing: the repository is created there related to
#     SRC (its config and key slot as they are), one PUT per pack; what the server stores is a
#     repository (versitygw's posix backend keeps each object as a file at its key): every
#     snapshot restores bit-exact from it and verify --read-data passes;
#  2. an incremental copy PUTs only the new backup's packs, one request each, and at most 10 more
#     (the access log, which --json's requests agree with); a copy with nothing new PUTs no pack;
#     a named snapshot whose pack is wanted in part: its objects go up in a new pack;
#  3. copies killed (SIGKILL) at random moments, held reading a pack to send (pread) or after a
#     random delay, then run again: no pack key is PUT twice (access log) and the copy completes;
#     a later copy removes the killed copies' spools in TMPDIR, never a running copy's;
#  4. back home: a restore straight from s3://, copies S3 -> a directory (all, and a named
#     snapshot repacked) and S3 -> S3 restore bit-exact;
#  5. an unrelated repository at the location is refused;
#  6. the server stopped mid-copy: a clear error, nothing published, and the next copy completes.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/s3/s3-lib.sh"
need_cmd openssl python3
s3_start
s3_mb bvcopy
export BLKVAULT_CACHE_DIR=$T/cache BLKVAULT_PASSPHRASE=s3-copy-pass
jget() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
src=$T/src
bv init "$src" -q
for i in 1 2 3; do
    randfile "$T/img$i" 12 "s3copy-$i"
    bv backup "$src" "$T/img$i" --name="n$i" -q
done
npacks() { find "$1/packs" -name '*.pack' | wc -l; }
# mirror PREFIX: what the server holds below PREFIX, as a local repository (its empty folders made)
mirror() {
    rm -rf "$T/mirror"
    cp -r "$S3_DIR/data/bvcopy/$1" "$T/mirror"
    mkdir -p "$T/mirror/"{keys,packs,index,snapshots,locks,tmp,leases,gc}
}
restores_all() { # PREFIX N: snapshots n1..nN restore bit-exact from what the server holds
    mirror "$1"
    for i in $(seq 1 "$2"); do
        rm -f "$T/out"
        bv restore "$T/mirror" "n$i" "$T/out" -q || die "restore n$i from the copy at s3://bvcopy/$1"
        assert_same "$T/img$i" "$T/out"
    done
    bv verify "$T/mirror" --read-data >/dev/null 2>"$T/verify.err" || { cat "$T/verify.err"; die "verify of s3://bvcopy/$1"; }
}
pack_puts() { grep -E " s3_(PutObject|CompleteMultipartUpload) $1/packs/" "$S3_LOG" | grep -c ' 200 ' || true; }

# 1. into a location that holds nothing
bv copy "$src" s3://bvcopy/site --json >"$T/c1.json" 2>"$T/c1.err" || { cat "$T/c1.err"; die "copy to S3"; }
assert_eq "$(jget snapshots_copied <"$T/c1.json")" 3 "snapshots copied"
assert_eq "$(jget packs_whole <"$T/c1.json")" "$(npacks "$src")" "packs sent whole"
assert_eq "$(pack_puts site)" "$(npacks "$src")" "PUTs of packs"
[ "$(jget requests <"$T/c1.json")" -gt 0 ] || die "no S3 request counted"
cmp -s "$src/config" "$S3_DIR/data/bvcopy/site/config" || die "the config at S3 is not SRC's"
cmp -s "$src/keys/default" "$S3_DIR/data/bvcopy/site/keys/default" || die "the key slot at S3 is not SRC's"
restores_all site 3
cat "$T/c1.json" >&2

# 2. incremental: only the new packs travel
before=$(npacks "$src")
cp "$T/img1" "$T/img4"
randfile "$T/patch" 1 s3copy-patch
dd if="$T/patch" of="$T/img4" bs=1M seek=4 conv=notrunc status=none
bv backup "$src" "$T/img4" --name=n4 -q
new=$(( $(npacks "$src") - before ))
puts_before=$(pack_puts site)
lines_before=$(wc -l <"$S3_LOG")
bv copy "$src" s3://bvcopy/site --json >"$T/c2.json" 2>"$T/c2.err" || { cat "$T/c2.err"; die "incremental copy to S3"; }
cat "$T/c2.json" >&2
assert_eq "$(jget packs_whole <"$T/c2.json")" "$new" "incremental: packs sent"
assert_eq "$(( $(pack_puts site) - puts_before ))" "$new" "incremental: PUTs of packs"
reqs=$(jget requests <"$T/c2.json")
sleep 0.2 # the log's last lines
logged=$(( $(wc -l <"$S3_LOG") - lines_before ))
# issue 23's goal, every request the server saw (the lease's DELETE comes after --json's count):
# the config, gc/epoch, the lease, the LISTs of index/ and snapshots/, the packs, the segment, the
# record, the settle's LIST of leases/ and gc/epoch, the lease's DELETE
if [ "$logged" -gt $((new + 10)) ]; then
    tail -n "$logged" "$S3_LOG" >&2
    die "incremental copy of $new packs made $logged requests (at most new packs + 10)"
fi
[ "$logged" -ge "$reqs" ] || die "the server logged $logged requests, the copy counted $reqs"
echo "incremental copy: $new new packs, $logged requests" >&2
restores_all site 4
puts_before=$(pack_puts site)
bv copy "$src" s3://bvcopy/site --json >"$T/c3.json" 2>/dev/null || die "copy with nothing new"
assert_eq "$(pack_puts site)" "$puts_before" "a copy with nothing new PUTs no pack"

# a named snapshot: the pack of n1 that n4 uses but in part is repacked, and put as a new pack
bv copy "$src" s3://bvcopy/named n4 --json >"$T/n.json" 2>"$T/n.err" || { cat "$T/n.err"; die "copy of n4 to S3"; }
[ "$(jget packs_written <"$T/n.json")" -ge 1 ] || die "copy of n4: nothing repacked ($(cat "$T/n.json"))"
assert_eq "$(pack_puts named)" "$(( $(jget packs_whole <"$T/n.json") + $(jget packs_written <"$T/n.json") ))" "copy of n4: PUTs of packs"
mirror named
bv restore "$T/mirror" n4 "$T/out4" -q || die "restore n4 from s3://bvcopy/named"
assert_same "$T/img4" "$T/out4"
bv verify "$T/mirror" --read-data >/dev/null 2>"$T/verify.err" || { cat "$T/verify.err"; die "verify of s3://bvcopy/named"; }

# 3. killed copies into a new prefix, then run again: no pack is PUT twice, and no spool of a
#    killed copy stays in TMPDIR
export TMPDIR=$T/spool
mkdir -p "$TMPDIR"
spools() { find "$TMPDIR" -maxdepth 1 -name 'blkvault-copy-*' | sort; }
seed=${COPY_KILL_SEED:-$$}
RANDOM=$seed
echo "seed $seed (COPY_KILL_SEED)" >&2
pid=
on_exit 'kill -KILL $pid'
for round in $(seq 1 "${COPY_KILL_ROUNDS:-8}"); do
    if [ $((round % 2)) = 0 ]; then
        "$BLKVAULT" copy "$src" s3://bvcopy/killed -q 2>"$T/k.err" &
        pid=$!
        sleep "0.$((RANDOM % 10))$((RANDOM % 10))"
    else
        # held reading a pack to send (pread of SRC's pack; write(2) of a new pack's spool), then
        # killed before its PUT, maybe with the PUTs of packs read before it under way
        rm -f "$T/gate" "$T/gate.waiting"
        env LD_PRELOAD="$STALL" BV_STALL_WRITE=1 BV_STALL_READ=1 BV_STALL_AFTER=$(( (RANDOM % 40) * 1048576 )) BV_STALL_GATE="$T/gate" \
            ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" "$BLKVAULT" copy "$src" s3://bvcopy/killed -q 2>"$T/k.err" &
        pid=$!
        while [ ! -e "$T/gate.waiting" ] && kill -0 $pid 2>/dev/null; do sleep 0.05; done
    fi
    kill -KILL $pid 2>/dev/null || true
    wait $pid 2>/dev/null || true
    pid=
done
# and one held half-way through a new backup's pack, so that the last run has work left
randfile "$T/img5" 12 s3copy-5
bv backup "$src" "$T/img5" --name=n5 -q
rm -f "$T/gate" "$T/gate.waiting"
env LD_PRELOAD="$STALL" BV_STALL_WRITE=1 BV_STALL_READ=1 BV_STALL_AFTER=$((6 * 1048576)) BV_STALL_GATE="$T/gate" \
    ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" "$BLKVAULT" copy "$src" s3://bvcopy/killed -q 2>"$T/k.err" &
pid=$!
while [ ! -e "$T/gate.waiting" ] && kill -0 $pid 2>/dev/null; do sleep 0.05; done
[ -e "$T/gate.waiting" ] || { cat "$T/k.err"; die "the copy of n5 was not held"; }
# another copy meanwhile (which sweeps stale spools) leaves the held copy's spool alone
held=$(spools)
[ -n "$held" ] || die "the held copy has no spool in TMPDIR"
bv copy "$src" s3://bvcopy/sweep n5 -q || die "a copy beside the held one"
for s in $held; do [ -d "$s/packs" ] || die "the held copy's spool $s was swept"; done
kill -KILL $pid
wait $pid 2>/dev/null || true
pid=
[ -n "$(spools)" ] || die "the killed copy left no spool (nothing for the next copy to sweep)"
bv copy "$src" s3://bvcopy/killed --json >"$T/k.json" 2>"$T/k.err" || { cat "$T/k.err"; die "the copy after the kills"; }
cat "$T/k.json" >&2
[ "$(jget packs_whole <"$T/k.json")" -ge 1 ] || die "the last run sent nothing"
twice=$(grep -E " s3_(PutObject|CompleteMultipartUpload) killed/packs/" "$S3_LOG" | grep ' 200 ' |
        awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^s3_/) { print $(i + 1); break } }' | sort | uniq -d)
[ -z "$twice" ] || die "packs PUT twice: $twice"
[ -z "$(spools)" ] || die "spools of killed copies left in TMPDIR: $(spools)"
# the sweep takes only what is a spool: not a folder whose name only begins like one, and never
# a filesystem mounted inside a stale spool
mkdir -p "$TMPDIR/blkvault-copy-my-notes" "$TMPDIR/blkvault-copy-Ab12Cd/packs/mnt" "$T/victim"
echo keep >"$TMPDIR/blkvault-copy-my-notes/doc.txt"
echo keep >"$T/victim/v"
echo stale >"$TMPDIR/blkvault-copy-Ab12Cd/packs/x.pack"
mount --bind "$T/victim" "$TMPDIR/blkvault-copy-Ab12Cd/packs/mnt"
on_exit "umount '$TMPDIR/blkvault-copy-Ab12Cd/packs/mnt' 2>/dev/null"
touch -d '2 minutes ago' "$TMPDIR/blkvault-copy-my-notes"
bv copy "$src" s3://bvcopy/sweep n5 -q || die "a copy beside a mount in a stale spool"
[ -e "$TMPDIR/blkvault-copy-my-notes/doc.txt" ] || die "the sweep removed a folder that is not a spool"
[ -e "$T/victim/v" ] || die "the sweep emptied a filesystem mounted in a stale spool"
[ ! -e "$TMPDIR/blkvault-copy-Ab12Cd/packs/x.pack" ] || die "the stale spool was not swept"
umount "$TMPDIR/blkvault-copy-Ab12Cd/packs/mnt"
unset TMPDIR
assert_eq "$(pack_puts killed)" "$(npacks "$src")" "PUTs of packs over every run"
restores_all killed 5

# 4. back home: restore straight from S3, copy S3 -> a directory (all; then a named snapshot whose
# pack is read in part, repacked), S3 -> S3
rm -f "$T/out"
bv restore s3://bvcopy/site n2 "$T/out" -q || die "restore from s3://bvcopy/site"
assert_same "$T/img2" "$T/out"
bv copy s3://bvcopy/site "$T/home" --json >"$T/h.json" 2>"$T/h.err" || { cat "$T/h.err"; die "copy S3 -> a directory"; }
assert_eq "$(jget snapshots_copied <"$T/h.json")" 4 "home: snapshots copied"
for i in 1 2 3 4; do
    rm -f "$T/out"
    bv restore "$T/home" "n$i" "$T/out" -q || die "restore n$i from the copy brought home"
    assert_same "$T/img$i" "$T/out"
done
bv verify "$T/home" --read-data >/dev/null 2>"$T/verify.err" || { cat "$T/verify.err"; die "verify of the copy brought home"; }
bv copy s3://bvcopy/site "$T/home" --json >"$T/h2.json" 2>/dev/null || die "copy S3 -> a directory again"
assert_eq "$(jget bytes_sent <"$T/h2.json")" 0 "home again: bytes sent"
bv copy s3://bvcopy/site "$T/home2" n4 --json >"$T/h3.json" 2>"$T/h3.err" || { cat "$T/h3.err"; die "copy of n4 S3 -> a directory"; }
[ "$(jget packs_written <"$T/h3.json")" -ge 1 ] || die "copy of n4 from S3: nothing repacked ($(cat "$T/h3.json"))"
rm -f "$T/out"
bv restore "$T/home2" n4 "$T/out" -q || die "restore n4 from home2"
assert_same "$T/img4" "$T/out"
bv copy s3://bvcopy/named s3://bvcopy/again --json >"$T/h4.json" 2>"$T/h4.err" || { cat "$T/h4.err"; die "copy S3 -> S3"; }
rm -f "$T/out"
bv restore s3://bvcopy/again n4 "$T/out" -q || die "restore n4 from s3://bvcopy/again"
assert_same "$T/img4" "$T/out"

# 5. an unrelated repository there
bv init "$T/other" -q
expect_fail 2 "is a repository not related to '$T/other'" bv copy "$T/other" s3://bvcopy/site

# 6. the server stops while a copy is held before its PUT: the copy fails naming what the storage
# answered, publishes nothing; once the server is back the copy completes
randfile "$T/img6" 6 s3copy-6
bv backup "$src" "$T/img6" --name=n6 -q
rm -f "$T/gate" "$T/gate.waiting"
env LD_PRELOAD="$STALL" BV_STALL_WRITE=1 BV_STALL_READ=1 BV_STALL_AFTER=$((1 << 20)) BV_STALL_GATE="$T/gate" AWS_MAX_ATTEMPTS=2 \
    ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" "$BLKVAULT" copy "$src" s3://bvcopy/site -q 2>"$T/down.err" &
pid=$!
while [ ! -e "$T/gate.waiting" ] && kill -0 $pid 2>/dev/null; do sleep 0.05; done
[ -e "$T/gate.waiting" ] || { cat "$T/down.err"; die "the copy of n6 was not held"; }
s3_stop
touch "$T/gate"
rc=0
wait $pid || rc=$?
pid=
cat "$T/down.err" >&2
[ "$rc" != 0 ] || die "a copy to a server that stopped succeeded"
grep -q "^error: copy from '$src' to 's3://bvcopy/site' failed at 'packs/.*' (.*127.0.0.1.*); what was sent stays: running the same copy again resumes it: " "$T/down.err" ||
    die "the failed copy did not say where and what the storage answered"
s3_start
bv list s3://bvcopy/site --json | python3 -c 'import json,sys; assert all(s["name"] != "n6" for s in json.load(sys.stdin))' ||
    die "the failed copy published n6"
bv copy "$src" s3://bvcopy/site -q || die "the copy once the server is back"
rm -f "$T/out"
bv restore s3://bvcopy/site n6 "$T/out" -q || die "restore n6"
assert_same "$T/img6" "$T/out"
echo ok
