#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A repository someone else wrote (issue 10, finding 1 and the FIFO config): every path inside it
# is resolved beneath its directory and never through a symbolic link, and what is read must be a
# regular file. A symlinked tmp/ must not make backup or key change empty the directory it points
# to; a symlinked or foreign-typed entry is refused with a message that names it; a config that
# is a FIFO does not hang. Nothing outside the repository is touched.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd openssl timeout mkfifo

randfile "$T/src.img" 1 hostile
precious() { mkdir -p "$T/v"; echo precious > "$T/v/a"; }
survived() { assert_eq "$(cat "$T/v/a" 2>/dev/null)" precious "the file outside the repository"; }

# the exact reproduction: backup
repo=$T/r
bv init "$repo" --encryption=none >/dev/null
precious
rmdir "$repo/tmp"
ln -s "$T/v" "$repo/tmp"
expect_fail 1 "^error: refusing 'tmp' in repository '$repo': it is a symbolic link$" bv backup "$repo" "$T/src.img" -q
survived
assert_eq "$(ls -A "$repo/snapshots")" "" "snapshots after a refused backup"

# key change of an encrypted repository
export BLKVAULT_PASSPHRASE=old-horse BLKVAULT_NEW_PASSPHRASE=new-horse
erepo=$T/e
bv init "$erepo" >/dev/null
bv backup "$erepo" "$T/src.img" --name=one -q
rmdir "$erepo/tmp"
ln -s "$T/v" "$erepo/tmp"
expect_fail 1 "^error: refusing 'tmp' in repository '$erepo': it is a symbolic link$" bv key change "$erepo"
survived
# the key was not changed: the old passphrase still opens it once tmp/ is a directory again
rm "$erepo/tmp" && mkdir "$erepo/tmp"
bv list "$erepo" >/dev/null
# keys/ through a symbolic link: refused by every command that needs the key
mv "$erepo/keys" "$T/keys" && ln -s "$T/keys" "$erepo/keys"
expect_fail 1 "^error: refusing 'keys' in repository '$erepo': it is a symbolic link$" bv list "$erepo"
expect_fail 1 "^error: refusing 'keys' in repository '$erepo': it is a symbolic link$" bv key change "$erepo"
rm "$erepo/keys" && mv "$T/keys" "$erepo/keys"
bv restore "$erepo" one "$T/one.out" >/dev/null
assert_same "$T/src.img" "$T/one.out"
unset BLKVAULT_PASSPHRASE BLKVAULT_NEW_PASSPHRASE

# every directory of the repository, swapped for a symbolic link to a copy of itself: refused by
# readers and writers alike, naming it
repo=$T/dirs
bv init "$repo" --encryption=none >/dev/null
bv backup "$repo" "$T/src.img" --name=one -q
for d in packs index snapshots locks leases; do
    mv "$repo/$d" "$T/$d.real" && ln -s "$T/$d.real" "$repo/$d"
    # readers take a lease, not a lock: locks/ is the writers' and gc's
    [ "$d" = locks ] || expect_fail 1 "^error: refusing '$d' in repository '$repo': it is a symbolic link$" bv list "$repo"
    expect_fail 1 "^error: refusing '$d' in repository '$repo': it is a symbolic link$" bv backup "$repo" "$T/src.img" -q
    rm "$repo/$d" && mv "$T/$d.real" "$repo/$d"
done
# a directory that is a plain file
rmdir "$repo/tmp" && touch "$repo/tmp"
expect_fail 1 "^error: refusing 'tmp' in repository '$repo': it is a regular file, not a directory$" bv backup "$repo" "$T/src.img" -q
rm "$repo/tmp" && mkdir "$repo/tmp"

# the config: a symbolic link, then a FIFO (which must not hang any command)
cp "$repo/config" "$T/config.real"
rm "$repo/config" && ln -s "$T/config.real" "$repo/config"
expect_fail 1 "^error: refusing 'config' in repository '$repo': it is a symbolic link$" bv list "$repo"
rm "$repo/config" && mkfifo "$repo/config"
for cmd in list verify info; do
    expect_fail 1 "^error: refusing 'config' in repository '$repo': it is a FIFO$" timeout 20 "$BLKVAULT" $cmd "$repo"
done
expect_fail 1 "^error: refusing 'config' in repository '$repo': it is a FIFO$" timeout 20 "$BLKVAULT" backup "$repo" "$T/src.img" -q
rm "$repo/config" && cp "$T/config.real" "$repo/config"

# a lock file that is a FIFO, a symbolic link
mkfifo "$repo/locks/write.fifo"
rm -f "$repo/locks/write" && mv "$repo/locks/write.fifo" "$repo/locks/write"
expect_fail 1 "^error: refusing 'locks/write' in repository '$repo': it is a FIFO$" timeout 20 "$BLKVAULT" backup "$repo" "$T/src.img" -q
rm "$repo/locks/write" && ln -s "$T/v/a" "$repo/locks/write"
expect_fail 1 "^error: refusing 'locks/write' in repository '$repo': it is a symbolic link$" bv backup "$repo" "$T/src.img" -q
rm "$repo/locks/write"
survived

# a pack and a pack folder: a writer lists packs/ and refuses them
pack=$(cd "$repo/packs" && find . -name '*.pack' | sed 's|^\./||' | head -1)
sub=${pack%%/*}
mv "$repo/packs/$pack" "$T/pack.real" && ln -s "$T/pack.real" "$repo/packs/$pack"
expect_fail 1 "^error: refusing 'packs/$pack' in repository '$repo': it is a symbolic link$" bv backup "$repo" "$T/src.img" -q
rm "$repo/packs/$pack" && mv "$T/pack.real" "$repo/packs/$pack"
mv "$repo/packs/$sub" "$T/sub.real" && ln -s "$T/sub.real" "$repo/packs/$sub"
expect_fail 1 "^error: refusing 'packs/$sub' in repository '$repo': it is a symbolic link$" bv backup "$repo" "$T/src.img" -q
# a reader meets it when it reads: the pack is not followed, and reads as missing
expect_fail 4 "stopped: missing data (the repository needs repair) at image offset 0" bv restore "$repo" one "$T/never.out"
[ ! -e "$T/never.out" ] || die "a refused restore left its destination"
rm "$repo/packs/$sub" && mv "$T/sub.real" "$repo/packs/$sub"

# an index segment that is a FIFO: readers leave it out with a warning naming it (no hang)
seg=$(cd "$repo/index" && ls | head -1)
mv "$repo/index/$seg" "$T/seg.real" && mkfifo "$repo/index/$seg"
expect_fail 4 "^error: refusing to write to repository '$repo': index segment 'index/$seg' is a FIFO" \
    timeout 20 "$BLKVAULT" backup "$repo" "$T/src.img" -q
timeout 20 "$BLKVAULT" list "$repo" >/dev/null 2>"$T/list.err" || { cat "$T/list.err" >&2; die "list with a FIFO segment failed"; }
grep -q "^warning: index segment 'index/$seg' is a FIFO: left out" "$T/list.err" || { cat "$T/list.err" >&2; die "list did not name the segment"; }
rm "$repo/index/$seg" && mv "$T/seg.real" "$repo/index/$seg"

# what gc and a sampled verify open beyond what every command does: gc/, leases/ and
# verify-state, each named when it is a symbolic link or of another type (no hang on a FIFO)
grepo=$T/g
bv init "$grepo" --encryption=none >/dev/null
randfile "$T/gone.img" 1 gone # something for gc to condemn
bv backup "$grepo" "$T/src.img" --name=kept -q
bv backup "$grepo" "$T/gone.img" --name=gone -q
bv gc "$grepo" >/dev/null # makes gc/
bv delete "$grepo" gone >/dev/null
bv verify "$grepo" --read-data --sample=50 >/dev/null 2>&1
for d in gc leases; do
    [ -d "$grepo/$d" ] || die "no $d/ after a gc"
    mv "$grepo/$d" "$T/$d.real" && ln -s "$T/v" "$grepo/$d"
    expect_fail 1 "^error: refusing '$d' in repository '$grepo': it is a symbolic link$" bv gc "$grepo"
    rm "$grepo/$d" && mv "$T/$d.real" "$grepo/$d"
done
mv "$grepo/verify-state" "$T/vs.real"
ln -s "$T/v/a" "$grepo/verify-state"
expect_fail 1 "^error: refusing 'verify-state' in repository '$grepo': it is a symbolic link$" bv verify "$grepo" --read-data --sample=50
rm "$grepo/verify-state" && mkfifo "$grepo/verify-state"
expect_fail 1 "^error: refusing 'verify-state' in repository '$grepo': it is a FIFO$" timeout 20 "$BLKVAULT" verify "$grepo" --read-data --sample=50
rm "$grepo/verify-state" && mv "$T/vs.real" "$grepo/verify-state"
bv gc "$grepo" >/dev/null || die "gc once every entry is back"
survived

# and after all that the repository is whole
bv verify "$repo" --read-data >/dev/null
bv backup "$repo" "$T/src.img" --name=two -q
bv restore "$repo" two "$T/two.out" >/dev/null
assert_same "$T/src.img" "$T/two.out"
survived
