#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Ransomware drill: copy --object-lock into a versioned bucket with Object Lock (a real versitygw),
# then someone with the same credentials deletes every object (plain DELETEs: delete markers):
#  1. every object the copy put is retained (COMPLIANCE by default, GOVERNANCE when asked);
#  2. --object-lock is refused, naming why, for a bucket without Object Lock and a local DST,
#     and nothing is written there;
#  3. a later copy with a longer lock extends the retention of what DST's snapshots need (the
#     packs of the first copy too), and --json counts them;
#  4. after the deletes the repository is gone for a plain read (exit 10, pointing to
#     --point-in-time), and list, verify --read-data, restore and files --point-in-time=TIME
#     (between the copies and the deletes) bring every snapshot and file back bit-exact; a version
#     DELETE of a locked object is refused by the server (HTTP 403).
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/s3/s3-lib.sh"
need_cmd openssl python3 mkfs.ext4
s3_start
s3_mb bvlock lock
s3_mb bvplain
export BLKVAULT_CACHE_DIR=$T/cache BLKVAULT_PASSPHRASE=s3-lock-pass
jget() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
tool() { "$S3_TOOL" "$@"; }
src=$T/src
bv init "$src" -q
for i in 1 2; do
    randfile "$T/img$i" 8 "s3lock-$i"
    bv backup "$src" "$T/img$i" --name="n$i" -q
done

# 2. refused where it cannot hold
expect_fail 2 "bucket of 's3://bvplain/site' has no Object Lock enabled" bv copy "$src" s3://bvplain/site --object-lock=1h
[ -z "$(tool s3://bvplain list)" ] || die "a refused copy wrote into the bucket: $(tool s3://bvplain list)"
expect_fail 2 "needs an S3 DST" bv copy "$src" "$T/local" --object-lock=1h
[ ! -e "$T/local" ] || die "a refused copy made $T/local"
expect_fail 2 "invalid --object-lock 'soon'" bv copy "$src" s3://bvlock/site --object-lock=soon
expect_fail 2 "invalid --object-lock-mode" bv copy "$src" s3://bvlock/site --object-lock=1h --object-lock-mode=strict
expect_fail 2 "^error: --object-lock-mode needs --object-lock=DURATION" bv copy "$src" s3://bvlock/site --object-lock-mode=governance

# 1. every object put is retained, COMPLIANCE by default
bv copy "$src" s3://bvlock/site --object-lock=2min --json >"$T/c1.json" 2>"$T/c1.err" || { cat "$T/c1.err"; die "copy --object-lock"; }
assert_eq "$(jget snapshots_copied <"$T/c1.json")" 2 "snapshots copied"
tool s3://bvlock/site list >"$T/keys"
now=$(date +%s)
while read -r key _; do
    case $key in leases/*) continue ;; esac
    tool s3://bvlock/site head "$key" >"$T/head" || die "HEAD $key"
    grep -q ' lock=compliance ' "$T/head" || die "$key is not locked: $(cat "$T/head")"
    until=$(sed -n 's/.*retain-until=\([0-9]*\).*/\1/p' "$T/head")
    [ "$until" -gt "$now" ] || die "$key's retention has passed: $(cat "$T/head")"
done <"$T/keys"
first_pack=$(awk '$1 ~ /^packs\// { print $1; exit }' "$T/keys")
[ -n "$first_pack" ] || die "no pack at DST: $(cat "$T/keys")"
retained=$(jget objects_retained <"$T/c1.json")
[ "$retained" -gt 0 ] || die "the first copy extended nothing (the config and key slot it created before it locked)"

# 3. a later copy with a longer lock: everything DST's snapshots need is extended
# n3 is an ext4 filesystem: its files are read back with files --point-in-time after the deletes
mkdir -p "$T/root3/etc"
head -c 3000 /dev/urandom | base64 >"$T/root3/etc/hosts"
truncate -s 8M "$T/img3"
mkfs.ext4 -q -d "$T/root3" "$T/img3" || die "mkfs.ext4 -d"
bv backup "$src" "$T/img3" --name=n3 -q
bv copy "$src" s3://bvlock/site --object-lock=1d --json >"$T/c2.json" 2>"$T/c2.err" || { cat "$T/c2.err"; die "second copy"; }
assert_eq "$(jget snapshots_copied <"$T/c2.json")" 1 "snapshots copied by the second copy"
[ "$(jget objects_retained <"$T/c2.json")" -ge "$(grep -c . "$T/keys")" ] || die "the second copy extended too little: $(cat "$T/c2.json")"
until=$(tool s3://bvlock/site head "$first_pack" | sed -n 's/.*retain-until=\([0-9]*\).*/\1/p')
[ "$until" -gt $(( $(date +%s) + 43200 )) ] || die "$first_pack was not extended: until $until"
# a third copy right after has nothing to extend: one HEAD of the config says so
bv copy "$src" s3://bvlock/site --object-lock=1d --json >"$T/c3.json" 2>"$T/c3.err" || { cat "$T/c3.err"; die "third copy"; }
assert_eq "$(jget objects_retained <"$T/c3.json")" 0 "objects extended by a copy right after one"
# GOVERNANCE when asked
bv copy "$src" s3://bvlock/gov n1 --object-lock=1h --object-lock-mode=governance -q || die "copy in governance mode"
tool s3://bvlock/gov head config | grep_q ' lock=governance ' || die "governance mode: $(tool s3://bvlock/gov head config)"

bv list s3://bvlock/site >"$T/list.before" || die "list before the deletes"
sleep 2
pit=$(date -u +%Y-%m-%dT%H:%M:%SZ)
sleep 2

# 4. ransomware: every current object deleted with the copy's own credentials
tool s3://bvlock/site list >"$T/keys.all"
while read -r key _; do
    tool s3://bvlock/site delete "$key" || die "a plain DELETE of $key failed"
done <"$T/keys.all"
[ -z "$(tool s3://bvlock/site list)" ] || die "objects left after the deletes"
# no repository there now (exit 10, as a directory without a config), and the way back is said
expect_fail 10 "s3://bvlock/site/config: GET: HTTP 404" bv list s3://bvlock/site
grep -q -- "--point-in-time=TIME reads the repository as it was" "$T/.err" || die "list after the deletes does not point to --point-in-time: $(cat "$T/.err")"
bv list --point-in-time="$pit" s3://bvlock/site >"$T/list.pit" 2>"$T/list.err" || { cat "$T/list.err"; die "list --point-in-time after the deletes"; }
assert_eq "$(cat "$T/list.pit")" "$(cat "$T/list.before")" "list --point-in-time"
bv files --point-in-time="$pit" s3://bvlock/site n3@latest cat /etc/hosts >"$T/hosts" 2>"$T/files.err" ||
    { cat "$T/files.err"; die "files cat --point-in-time after the deletes"; }
assert_same "$T/root3/etc/hosts" "$T/hosts"
bv verify --read-data --point-in-time="$pit" s3://bvlock/site >/dev/null 2>"$T/verify.err" || { cat "$T/verify.err"; die "verify --read-data --point-in-time"; }
for i in 1 2 3; do
    rm -f "$T/out"
    bv restore --point-in-time="$pit" s3://bvlock/site "n$i" "$T/out" -q || die "restore n$i --point-in-time"
    assert_same "$T/img$i" "$T/out"
done
# the server refuses to delete a locked version
tool s3://bvlock/site versions >"$T/versions"
ver=$(awk -v k="$first_pack" '$1 == k && $4 == "object" { print $2; exit }' "$T/versions")
[ -n "$ver" ] || die "no version of $first_pack: $(cat "$T/versions")"
if tool --version="$ver" s3://bvlock/site delete "$first_pack" 2>"$T/err"; then die "a locked version was deleted"; fi
grep -q 'HTTP 403' "$T/err" || die "deleting a locked version: $(cat "$T/err")"
echo ok
