#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# What a new user found in blkvault copy (each failed before its fix):
#  a. a damaged pack at SRC (a flipped byte) travelled to DST: now the copy checks what it sends and
#     stops naming the pack and the offset (exit 4), sending and publishing nothing of it; whole
#     packs and repacked objects both;
#  b. a DST that another writer holds said "Device or resource busy" (exit 7): now as backup says it,
#     naming the holder (exit 5), for a directory and for S3;
#  c. a DST location that holds someone else's objects (a bucket's root, a prefix) or files was
#     taken for a new repository: now refused naming what is there (exit 10), nothing written;
#  d. a hung S3 server stalled a command minutes in silence: BLKVAULT_S3_TIMEOUT bounds an attempt
#     and each retry is said on stderr;
#  e. "copied 1 snapshots": now singular, naming the snapshot; an interrupted copy says that
#     running it again resumes it, and the next one says what it kept; AWS_PROFILE naming no
#     profile is said as such (exit 1, not 3, which is a wrong passphrase or key).
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/s3/s3-lib.sh"
need_cmd openssl python3 flock timeout
s3_start
s3_mb bvuser
s3_mb bvforeign
tool() { "$S3_TOOL" "$@"; }
export BLKVAULT_CACHE_DIR=$T/cache
src=$T/src
bv init "$src" --encryption=none -q
for i in 1 2 3; do
    randfile "$T/img$i" 6 "s3user-$i"
    bv backup "$src" "$T/img$i" --name="n$i" -q
done

# e. wording: one snapshot, named
bv copy "$src" "$T/one" n1 >"$T/one.out" 2>&1 || { cat "$T/one.out"; die "copy of n1"; }
id1=$(bv list "$src" --json | python3 -c 'import json,sys; print([s["id"] for s in json.load(sys.stdin) if s["name"] == "n1"][0])')
grep -q "^copied 1 snapshot to '$T/one': ${id1:0:8} (n1) (0 there already)" "$T/one.out" || { cat "$T/one.out"; die "the one snapshot copied is not named"; }
bv copy "$src" "$T/one" --json >"$T/two.json" || die "copy of the rest"
python3 -c 'import json,sys; d = json.load(open(sys.argv[1])); assert d["snapshots_copied"] == 2 and len(d["copied"]) == 2, d' "$T/two.json" \
    || die "--json does not list the copied snapshots: $(cat "$T/two.json")"

# a. a damaged pack: the byte flipped inside its first object
flip() { # FILE OFFSET: one bit of the byte at OFFSET flipped
    python3 -c 'import sys; f = open(sys.argv[1], "r+b"); o = int(sys.argv[2]); f.seek(o); b = f.read(1); f.seek(o); f.write(bytes([b[0] ^ 0x40]))' "$1" "$2"
}
dmg=$T/dmg
cp -r "$src" "$dmg"
pack=$(find "$dmg/packs" -name '*.pack' -size +1M | head -1)
flip "$pack" 4096
rel=packs/${pack#"$dmg/packs/"}
expect_fail 4 "'$rel' of '$dmg' is damaged at offset [0-9]*" bv copy "$dmg" "$T/dmg-dst"
bv list "$T/dmg-dst" >"$T/dmg.list" 2>&1 || true
[ -z "$(ls "$T/dmg-dst/snapshots" 2>/dev/null)" ] || die "a snapshot was published from a damaged pack: $(ls "$T/dmg-dst/snapshots")"
[ ! -e "$T/dmg-dst/$rel" ] || die "the damaged pack reached DST"
expect_fail 4 "is damaged at offset" bv copy "$dmg" s3://bvuser/dmg
if tool s3://bvuser/dmg list | grep_q '^snapshots/'; then die "a snapshot was published at S3 from a damaged pack"; fi
# repacked: the newest 'a' uses the first backup's pack but for the 2 MiB the second one replaced:
# that pack's wanted objects are read one by one, the damaged first one among them
rsrc=$T/rsrc
bv init "$rsrc" --encryption=none -q
randfile "$T/imga" 6 s3user-a
bv backup "$rsrc" "$T/imga" --name=a -q
first=$(find "$rsrc/packs" -name '*.pack')
randfile "$T/tail" 2 s3user-tail
dd if="$T/tail" of="$T/imga" bs=1M seek=4 conv=notrunc status=none
bv backup "$rsrc" "$T/imga" --name=a -q
flip "$first" 4096
expect_fail 4 "'packs/${first#"$rsrc/packs/"}' of '$rsrc' is damaged at offset [0-9]* (an object there" bv copy "$rsrc" "$T/rdst" a
[ -z "$(ls "$T/rdst/snapshots" 2>/dev/null)" ] || die "a snapshot was published from a repacked damaged object"

# b. a DST another writer holds: named as backup names it
lockdst=$T/lockdst
bv copy "$src" "$lockdst" n1 -q
pid=
BV_STALL_WRITE=1 stall_start $((1 << 20)) "$T/held.err" "$BLKVAULT" backup "$lockdst" "$T/img2" --name=held -q
expect_fail 5 "^error: repository '$lockdst' is locked by another writer (a backup or key change is running): pid $pid on $(hostname) since" \
    bv copy "$src" "$lockdst"
touch "$T/gate"
wait $pid || { cat "$T/held.err"; die "the held backup failed"; }
pid=
bv copy "$src" s3://bvuser/held n1 -q || die "copy to S3"
lockfile=$T/cache/s3/bvuser/held/locks/write
[ -f "$lockfile" ] || die "no lock file at $lockfile: $(find "$T/cache" -name write)"
python3 -c 'import fcntl, sys, time; f = open(sys.argv[1], "a"); fcntl.flock(f, fcntl.LOCK_EX); open(sys.argv[2], "w").close(); time.sleep(600)' \
    "$lockfile" "$T/s3held" &
holder=$!
on_exit "kill $holder"
while [ ! -e "$T/s3held" ]; do sleep 0.05; done
expect_fail 5 "^error: repository 's3://bvuser/held' is locked by another writer" bv copy "$src" s3://bvuser/held
kill $holder; wait $holder 2>/dev/null || true

# c. someone else's objects: refused, named, nothing written
echo cat >"$T/cat.jpg"
tool s3://bvforeign put photos/cat.jpg "$T/cat.jpg"
expect_fail 10 "'s3://bvforeign' holds objects but no blkvault repository (photos/cat.jpg is there)" bv copy "$src" s3://bvforeign
expect_fail 10 "'s3://bvforeign/photos' holds objects but no blkvault repository (cat.jpg is there)" bv copy "$src" s3://bvforeign/photos
assert_eq "$(tool s3://bvforeign list)" "photos/cat.jpg 4" "what the bucket holds after the refusals"
bv copy "$src" s3://bvforeign/blkvault n1 -q || die "a prefix of its own beside someone's objects is fine"
mkdir "$T/notes"
echo hello >"$T/notes/notes.txt"
expect_fail 10 "'$T/notes' holds files but no blkvault repository (notes.txt is there)" bv copy "$src" "$T/notes"
assert_eq "$(ls "$T/notes")" "notes.txt" "the directory after the refusal"

# e. interrupted: says that running it again resumes, and the next copy what it kept
"$BLKVAULT" copy "$src" "$T/slow" --limit-upload=4M >"$T/slow.out" 2>&1 &
cpid=$!
sleep 2.5
kill -INT $cpid
rc=0; wait $cpid || rc=$?
assert_eq "$rc" 130 "exit status of an interrupted copy"
grep -q "interrupted by SIGINT: what was sent stays at '$T/slow'; running the same copy again resumes it" "$T/slow.out" \
    || { cat "$T/slow.out"; die "the interrupted copy gave no hint"; }
bv copy "$src" "$T/slow" >"$T/slow2.out" 2>&1 || { cat "$T/slow2.out"; die "the resumed copy"; }
grep -q "^resumed an interrupted copy: [1-9][0-9]* packs\{0,1\} ([0-9.]* MiB) it had sent kept" "$T/slow2.out" || { cat "$T/slow2.out"; die "the resumed copy did not say so"; }
bv verify "$T/slow" --read-data >/dev/null || die "verify after the resumed copy"

# e. AWS_PROFILE that names no profile
printf '[default]\naws_access_key_id = x\naws_secret_access_key = y\n' >"$T/creds"
expect_fail 1 "AWS_PROFILE 'typo' names no profile" \
    env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY AWS_SHARED_CREDENTIALS_FILE="$T/creds" AWS_PROFILE=typo "$BLKVAULT" list s3://bvuser/held

# d. a server that accepts and never answers
python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(16)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
conns = []
while True:
    c, _ = s.accept(); conns.append(c)
' "$T/hung.port" &
hung=$!
on_exit "kill $hung"
while [ ! -s "$T/hung.port" ]; do sleep 0.05; done
hport=$(cat "$T/hung.port")
start=$(date +%s)
rc=0
AWS_ENDPOINT_URL=http://127.0.0.1:$hport BLKVAULT_S3_TIMEOUT=2 AWS_MAX_ATTEMPTS=3 timeout 60 "$BLKVAULT" list s3://bvuser/x \
    >/dev/null 2>"$T/hung.err" || rc=$?
took=$(( $(date +%s) - start ))
[ "$rc" != 0 ] && [ "$rc" != 124 ] || { cat "$T/hung.err"; die "list on a hung server: exit $rc"; }
grep -q "S3: no answer from http://127.0.0.1:$hport for 2 s, retrying (2/3)" "$T/hung.err" || { cat "$T/hung.err"; die "no word while retrying"; }
grep -q "retrying (3/3)" "$T/hung.err" || { cat "$T/hung.err"; die "the last retry was not said"; }
[ "$took" -lt 30 ] || die "a hung server held the command $took s with BLKVAULT_S3_TIMEOUT=2"
expect_fail 1 "BLKVAULT_S3_TIMEOUT" env BLKVAULT_S3_TIMEOUT=soon "$BLKVAULT" list s3://bvuser/held
echo ok
