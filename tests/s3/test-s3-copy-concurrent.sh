#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Two copies into one S3 repository at the same time (docs/LIFECYCLE.md, "Two copies into one S3
# repository"), as two appliances make them: each with its own cache directory (its own
# locks/write), on a real versitygw.
#  1. two related repositories (B made by copying A, then each backed up into on its own) copied
#     at once into a repository that holds A's first snapshot already: both succeed, no pack DST
#     had is PUT again, no pack key is stored twice (one PUT answered 200 each), and every
#     snapshot of both restores bit-exact from S3; verify --read-data passes;
#  2. two copies of the same source at once into a new prefix: both make it (the loser of the
#     race for the config finds one related to SRC: checked failing before the fix), both
#     succeed, each pack is stored once (the loser of a race is answered 412 and counts the pack
#     as there), each record once, every snapshot restores bit-exact;
#  3. on one machine (one cache directory) the second copy is refused while the first holds
#     locks/write, naming the holder (EXIT_BUSY, as a second backup), and succeeds once it is
#     done, sending nothing again.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/s3/s3-lib.sh"
need_cmd openssl python3
s3_start
s3_mb bvcc
export BLKVAULT_PASSPHRASE=s3-concurrent-pass
jget() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
# the pack keys PUT with status 200 under PREFIX, one line each
pack_puts() {
    grep -E " s3_(PutObject|CompleteMultipartUpload) $1/packs/" "$S3_LOG" | grep ' 200 ' |
        awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^s3_/) { print $(i + 1); break } }' | sort
}
# copy_at CACHE SRC DST OUT: a copy as one appliance makes it, in the background (pid in $!)
copy_at() {
    BLKVAULT_CACHE_DIR=$T/$1 "$BLKVAULT" copy "$2" "$3" --json --limit-upload=6M >"$T/$4.json" 2>"$T/$4.err" &
}
# copies_at_once DST SRC1 TAG1 SRC2 TAG2: two copies into DST at once, as two machines (their own
# caches); both must succeed (their output is $T/TAG.json and $T/TAG.err)
copies_at_once() {
    local p1 p2 r1=0 r2=0
    copy_at one "$2" "$1" "$3"
    p1=$!
    copy_at two "$4" "$1" "$5"
    p2=$!
    wait $p1 || r1=$?
    wait $p2 || r2=$?
    [ $r1 = 0 ] || { cat "$T/$3.err"; die "the copy of $2 ($3) into $1 beside $5's failed"; }
    [ $r2 = 0 ] || { cat "$T/$5.err"; die "the copy of $4 ($5) into $1 beside $3's failed"; }
    cat "$T/$3.json" "$T/$5.json" >&2
}
restores() { # LOCATION NAME IMAGE...: each snapshot NAME<i> restores bit-exact from LOCATION
    local loc=$1 i=0 img
    shift
    for img in "$@"; do
        i=$((i + 1))
        rm -f "$T/out"
        BLKVAULT_CACHE_DIR=$T/reader bv restore "$loc" "$img@latest" "$T/out" -q || die "restore $img from $loc"
        assert_same "$T/$img" "$T/out"
    done
    BLKVAULT_CACHE_DIR=$T/reader bv verify "$loc" --read-data >/dev/null 2>"$T/verify.err" ||
        { cat "$T/verify.err"; die "verify --read-data of $loc"; }
}

# 1. A and B, related; DST holds A's first snapshot
bv init "$T/a" -q
randfile "$T/base" 10 cc-base
bv backup "$T/a" "$T/base" --name=base -q
randfile "$T/shared" 10 cc-shared
bv backup "$T/a" "$T/shared" --name=shared -q
bv copy "$T/a" "$T/b" -q || die "copy A -> B"
randfile "$T/only-a" 10 cc-only-a
bv backup "$T/a" "$T/only-a" --name=only-a -q
randfile "$T/only-b" 10 cc-only-b
bv backup "$T/b" "$T/only-b" --name=only-b -q
BLKVAULT_CACHE_DIR=$T/one bv copy "$T/a" s3://bvcc/site base -q || die "copy of base"
pack_puts site >"$T/before"
[ -s "$T/before" ] || die "the first copy PUT no pack"
lines=$(wc -l <"$S3_LOG")
copies_at_once s3://bvcc/site "$T/a" a "$T/b" b
# they overlapped: each one's lease was there while the other PUT a pack
tail -n +$((lines + 1)) "$S3_LOG" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^s3_/) { print $i, $(i + 1); break } }' >"$T/during"
first_end=$(grep -n 's3_DeleteObject site/leases/' "$T/during" | head -1 | cut -d: -f1)
leases=$(grep -c 's3_PutObject site/leases/' "$T/during" || true)
[ "$leases" -ge 2 ] && [ -n "$first_end" ] && [ "$(grep -n 's3_PutObject site/leases/' "$T/during" | sed -n 2p | cut -d: -f1)" -lt "$first_end" ] ||
    die "the two copies did not run at the same time"
pack_puts site >"$T/after"
dups=$(uniq -d "$T/after")
[ -z "$dups" ] || die "packs stored twice: $dups"
again=$(comm -12 "$T/before" <(tail -n +$((lines + 1)) "$S3_LOG" | grep -E ' s3_(PutObject|CompleteMultipartUpload) site/packs/' |
        awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^s3_/) { print $(i + 1); break } }' | sort -u))
[ -z "$again" ] || die "packs DST had were sent again: $again"
[ "$(jget snapshots_copied <"$T/a.json")" -ge 1 ] && [ "$(jget snapshots_copied <"$T/b.json")" -ge 1 ] ||
    die "a copy published nothing"
bv list s3://bvcc/site --json | python3 -c '
import json, sys
names = sorted(s["name"] for s in json.load(sys.stdin))
assert names == ["base", "only-a", "only-b", "shared"], names' || die "s3://bvcc/site does not hold the four snapshots once each"
restores s3://bvcc/site base shared only-a only-b

# 2. two copies of the same source at once, into a new prefix
lines=$(wc -l <"$S3_LOG")
# both make DST: the config is create-only, and the loser of that race finds it related to SRC
copies_at_once s3://bvcc/twin "$T/a" t1 "$T/a" t2
pack_puts twin >"$T/twin"
dups=$(uniq -d "$T/twin")
[ -z "$dups" ] || die "packs stored twice in twin: $dups"
assert_eq "$(wc -l <"$T/twin")" "$(find "$T/a/packs" -name '*.pack' | wc -l)" "packs stored in twin"
snaps=$(grep -E ' s3_PutObject twin/snapshots/' "$S3_LOG" | grep -c ' 200 ' || true)
assert_eq "$snaps" 3 "snapshot records stored in twin"
restores s3://bvcc/twin base shared only-a

# 3. one machine: the second copy is refused while the first holds locks/write
randfile "$T/late" 16 cc-late
bv backup "$T/a" "$T/late" --name=late -q
BLKVAULT_CACHE_DIR=$T/three "$BLKVAULT" copy "$T/a" s3://bvcc/site --limit-upload=2M -q 2>"$T/slow.err" &
ps=$!
on_exit "kill $ps 2>/dev/null"
for _ in $(seq 1 100); do
    [ -n "$(find "$T/three" -name write.holder 2>/dev/null)" ] && break
    sleep 0.1
done
expect_fail 5 "is locked by another writer" env BLKVAULT_CACHE_DIR=$T/three "$BLKVAULT" copy "$T/b" s3://bvcc/site
wait $ps || { cat "$T/slow.err"; die "the slow copy failed"; }
BLKVAULT_CACHE_DIR=$T/three bv copy "$T/b" s3://bvcc/site --json >"$T/late.json" 2>"$T/late.err" ||
    { cat "$T/late.err"; die "the copy of B once A's was done"; }
assert_eq "$(jget bytes_sent <"$T/late.json")" 0 "B's copy after A's: bytes sent"
echo ok
