#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The error paths of gc, prune, repair and scheduled verify, each with its exact message and exit
# status: an entry of the repository that is refused (a lease, gc/, gc/epoch, a condemned list or pack,
# verify-state that is a FIFO, a symbolic link or a directory; a pack or lock file repair meets)
# is named, as is one that does not parse; a damaged index segment stops gc; another gc or writer
# holding the lock is said so. No command hangs on a FIFO, and the repository is whole afterwards.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd openssl python3 flock mkfifo timeout

repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
randfile "$T/a.img" 1 gc-errors-a
randfile "$T/b.img" 1 gc-errors-b
bv backup "$repo" "$T/a.img" --name=a -q
bv backup "$repo" "$T/b.img" --name=b -q
mkdir -p "$repo/gc" "$repo/leases"
t() { timeout 20 "$BLKVAULT" "$@"; }

# hold FILE: a process holds flock(LOCK_EX) on FILE until the test kills it (HOLDER is its pid)
hold() {
    python3 -c 'import fcntl, sys, time; f = open(sys.argv[1], "a"); fcntl.flock(f, fcntl.LOCK_EX); time.sleep(600)' "$1" \
        >/dev/null 2>&1 &
    HOLDER=$!
    on_exit "kill $HOLDER"
    for _ in $(seq 100); do flock -x -n "$1" true || return 0; sleep 0.1; done
    die "the holder of $1 did not lock it"
}
release() { kill "$HOLDER"; wait "$HOLDER" 2>/dev/null || true; }

# a lease that is a FIFO, then a symbolic link: gc, its dry run and prune's gc name it
lease=leases/00112233445566aa.lease
mkfifo "$repo/$lease"
for cmd in "gc $repo" "gc $repo --dry-run" "prune $repo --keep-last=2"; do
    # shellcheck disable=SC2086
    expect_fail 1 "^error: refusing '$lease' in repository '$repo': it is a FIFO$" t $cmd
done
rm "$repo/$lease" && ln -s "$T/a.img" "$repo/$lease"
expect_fail 1 "^error: refusing '$lease' in repository '$repo': it is a symbolic link$" t gc "$repo"
expect_fail 1 "^error: refusing '$lease' in repository '$repo': it is a symbolic link$" t gc "$repo" --dry-run
rm "$repo/$lease"

# gc/ itself, and gc/epoch
mv "$repo/gc" "$T/gc.real" && ln -s "$T/gc.real" "$repo/gc"
expect_fail 1 "^error: refusing 'gc' in repository '$repo': it is a symbolic link$" t gc "$repo"
expect_fail 1 "^error: refusing 'gc' in repository '$repo': it is a symbolic link$" t gc "$repo" --dry-run
rm "$repo/gc" && mv "$T/gc.real" "$repo/gc"
mkfifo "$repo/gc/epoch"
expect_fail 1 "^error: refusing 'gc/epoch' in repository '$repo': it is a FIFO$" t gc "$repo"
rm "$repo/gc/epoch" && echo twelve >"$repo/gc/epoch"
expect_fail 4 "^error: cannot open repository '$repo': 'gc/epoch' is damaged (Bad message)$" t gc "$repo"
rm "$repo/gc/epoch"

# a condemned list that is a FIFO, then one that does not parse: gc stops rather than forget it
list=gc/0011223344556677.idx
mkfifo "$repo/$list"
expect_fail 1 "^error: refusing '$list' in repository '$repo': it is a FIFO$" t gc "$repo"
rm "$repo/$list" && echo garbage >"$repo/$list"
expect_fail 4 "^error: cannot collect garbage in '$repo' (nothing was lost): '$list': Bad message$" t gc "$repo"
rm "$repo/$list"

# a condemned pack that turned into a FIFO before its list could be finalized: gc does not
# unlink what is not a pack file, and names it (a live lease older than the list holds it back)
randfile "$T/c.img" 1 gc-errors-c
before=$(cd "$repo/packs" && find . -name '*.pack' | sort)
bv backup "$repo" "$T/c.img" --name=c -q
cpack=$(cd "$repo/packs" && find . -name '*.pack' | sort | comm -13 <(echo "$before") - | sed 's|^\./||')
hold "$repo/leases/00000000000000cc.lease"
bv delete "$repo" c 2>/dev/null
bv gc "$repo" >"$T/out"
grep -qx "deleted 0 packs, 0 B" "$T/out" || { cat "$T/out"; die "gc deleted with an older lease live"; }
release
mv "$repo/packs/$cpack" "$T/cpack.real" && mkfifo "$repo/packs/$cpack"
expect_fail 1 "^error: refusing 'packs/$cpack' in repository '$repo': it is a FIFO$" t gc "$repo"
rm "$repo/packs/$cpack" && mv "$T/cpack.real" "$repo/packs/$cpack"
bv gc "$repo" >"$T/out"
grep -qx "deleted 1 packs, 1.0 MiB" "$T/out" || { cat "$T/out"; die "gc once the pack was a file again"; }

# a damaged index segment hides what is in use: gc deletes nothing
seg=$(cd "$repo/index" && ls | head -1)
cp "$repo/index/$seg" "$T/seg.real"
printf garbage | dd of="$repo/index/$seg" bs=1 conv=notrunc status=none
expect_fail 4 "^error: cannot collect garbage in '$repo': a damaged index segment, snapshot record or map hides what is in use (run 'blkvault verify')$" \
    t gc "$repo"
cp "$T/seg.real" "$repo/index/$seg"

# another gc, another writer
hold "$repo/locks/gc"
expect_fail 5 "^error: repository '$repo' is locked by another garbage collection (run gc again once it is done)$" t gc "$repo"
expect_fail 5 "^error: repository '$repo' is locked by another garbage collection (run gc again once it is done)$" \
    t prune "$repo" --keep-last=2
release
hold "$repo/locks/write"
expect_fail 5 "^error: repository '$repo' is locked by another writer (a backup or key change is running)$" t repair "$repo"
release

# repair: a lock file it cannot take, a pack it must not follow (as repair --force and writers do)
rm -f "$repo/locks/write" && mkfifo "$repo/locks/write"
expect_fail 1 "^error: refusing 'locks/write' in repository '$repo': it is a FIFO$" t repair "$repo"
rm "$repo/locks/write"
pack=$(cd "$repo/packs" && find . -name '*.pack' | sed 's|^\./||' | head -1)
mv "$repo/packs/$pack" "$T/pack.real" && ln -s "$T/pack.real" "$repo/packs/$pack"
expect_fail 1 "^error: refusing 'packs/$pack' in repository '$repo': it is a symbolic link$" t repair "$repo"
grep -q "^lost:" "$T/.out" && die "repair listed losses for a pack it refused"
expect_fail 1 "^error: refusing 'packs/$pack' in repository '$repo': it is a symbolic link$" t repair "$repo" --force
rm "$repo/packs/$pack" && mv "$T/pack.real" "$repo/packs/$pack"

# scheduled verify: verify-state that is a FIFO, a symbolic link, a directory
mkfifo "$repo/verify-state"
expect_fail 1 "^error: refusing 'verify-state' in repository '$repo': it is a FIFO$" t verify "$repo" --read-data --sample=50
rm "$repo/verify-state" && ln -s "$T/a.img" "$repo/verify-state"
expect_fail 1 "^error: refusing 'verify-state' in repository '$repo': it is a symbolic link$" \
    t verify "$repo" --read-data --max-duration=1h
rm "$repo/verify-state" && mkdir "$repo/verify-state"
expect_fail 1 "^error: refusing 'verify-state' in repository '$repo': it is a directory, not a regular file$" \
    t verify "$repo" --read-data --sample=50
rmdir "$repo/verify-state"

# and nothing of it harmed the repository
bv gc "$repo" >/dev/null
bv verify "$repo" --read-data --sample=100 >/dev/null 2>"$T/v.err" || { cat "$T/v.err" >&2; die "verify afterwards"; }
bv restore "$repo" b "$T/b.out" >/dev/null
assert_same "$T/b.img" "$T/b.out"
