#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# What gc and the leases keep in a repository (gc/epoch, gc/*.idx, leases/*.lease), written by
# someone else or damaged (a red-team pass, docs/LIFECYCLE.md): a damaged gc/epoch must not stop
# a restore (readers then keep gc out with the shared locks/gc), and every command that must
# refuse names the file; the epoch never moves backwards.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd openssl timeout mkfifo

randfile "$T/src.img" 2 hostile-gc
repo=$T/r
bv init "$repo" --encryption=none >/dev/null
bv backup "$repo" "$T/src.img" --name=a -q
bv gc "$repo" >/dev/null

# gc/epoch that does not parse, is a FIFO, a symbolic link
for kind in garbage fifo symlink; do
    rm -f "$repo/gc/epoch"
    case $kind in
    garbage) echo abc > "$repo/gc/epoch"; what="is damaged (Bad message)"; rc=4 ;;
    fifo) mkfifo "$repo/gc/epoch"; what="it is a FIFO"; rc=1 ;;
    symlink) echo 1 > "$T/epoch.real"; ln -s "$T/epoch.real" "$repo/gc/epoch"; what="it is a symbolic link"; rc=1 ;;
    esac
    # readers go on: a restore must not depend on gc's bookkeeping
    rm -f "$T/a.out"
    timeout 20 "$BLKVAULT" restore "$repo" a "$T/a.out" >/dev/null 2>"$T/restore.err" ||
        { cat "$T/restore.err" >&2; die "restore with a $kind gc/epoch failed"; }
    assert_same "$T/src.img" "$T/a.out"
    timeout 20 "$BLKVAULT" list "$repo" >/dev/null
    # writers and gc refuse, naming the file
    if [ $kind = garbage ]; then
        pattern="^error: cannot open repository '$repo': 'gc/epoch' $what$"
    else
        pattern="^error: refusing 'gc/epoch' in repository '$repo': $what$"
    fi
    expect_fail $rc "$pattern" timeout 20 "$BLKVAULT" backup "$repo" "$T/src.img" -q
    expect_fail $rc "$pattern" timeout 20 "$BLKVAULT" gc "$repo"
done
rm "$repo/gc/epoch"

# the epoch at its limit: gc refuses to move it (wrapping to 0 would let a list finalize while
# older leases live), naming the file
printf '18446744073709551615\n' > "$repo/gc/epoch"
randfile "$T/b.img" 1 hostile-gc-b
bv backup "$repo" "$T/b.img" --name=b -q
bv delete "$repo" a >/dev/null
expect_fail 1 "^error: cannot collect garbage in '$repo' (nothing was lost): 'gc/epoch' holds the largest epoch (18446744073709551615): remove it once no backup, restore or export runs$" bv gc "$repo"
assert_eq "$(cat "$repo/gc/epoch")" 18446744073709551615 "gc/epoch after a refused gc"
rm "$repo/gc/epoch"

# what gc reads in leases/ and gc/: a lease that is a FIFO, a symbolic link, a directory; a
# condemned list that is a FIFO, that does not parse, that is empty: gc stops, naming it
lease=$repo/leases/0123456789abcdef.lease
mkfifo "$lease"
expect_fail 1 "^error: refusing 'leases/0123456789abcdef.lease' in repository '$repo': it is a FIFO$" timeout 20 "$BLKVAULT" gc "$repo"
rm "$lease" && ln -s /etc/passwd "$lease"
expect_fail 1 "^error: refusing 'leases/0123456789abcdef.lease' in repository '$repo': it is a symbolic link$" bv gc "$repo"
rm "$lease" && mkdir "$lease"
expect_fail 1 "^error: refusing 'leases/0123456789abcdef.lease' in repository '$repo': it is a directory, not a regular file$" bv gc "$repo"
rmdir "$lease"
list=$repo/gc/0123456789abcdef.idx
mkfifo "$list"
expect_fail 1 "^error: refusing 'gc/0123456789abcdef.idx' in repository '$repo': it is a FIFO$" timeout 20 "$BLKVAULT" gc "$repo"
rm "$list" && head -c 100 /dev/zero > "$list"
expect_fail 4 "^error: cannot collect garbage in '$repo' (nothing was lost): 'gc/0123456789abcdef.idx': Bad message$" bv gc "$repo"
rm "$list" && : > "$list"
expect_fail 4 "^error: cannot collect garbage in '$repo' (nothing was lost): 'gc/0123456789abcdef.idx': Bad message$" bv prune "$repo" --keep-last=1
rm "$list"

bv gc "$repo" >/dev/null
bv verify "$repo" --read-data >/dev/null
echo ok
