#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# gc/epoch that goes back while a backup runs (a metadata restore, an rsync, a cleanup of gc/):
# removed, rolled back below the running backup's lease, or rolled back to that lease's own epoch
# after gc condemned. The backup reads from a FIFO and deduplicates against snapshot 'old', which
# is then deleted and collected. An absent epoch read as 0 let gc finalize at once and delete the
# packs the backup used, and the backup's commit healed only when 'epoch > lease': it published a
# snapshot that did not restore ("0 B new", exit 0; verify exit 4, restore "missing data").
# Now the epoch cannot go back (docs/LIFECYCLE.md, "An epoch that cannot go back"): the backup's
# snapshot verifies and restores bit-exact, or the backup fails naming the damage and publishes
# nothing.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd openssl mkfifo

randfile "$T/old" 4 epoch-old
epoch() { cat "$1/gc/epoch"; }

# race MODE: MODE is rm (gc/epoch removed before gc), older (1 written before gc) or lease (after
# gc condemned, the epoch of the backup's lease written back)
race() {
    local repo=$T/repo-$1 rc=0
    bv init "$repo" --encryption=none >/dev/null
    bv backup "$repo" "$T/old" --name=old -q
    for i in 1 2; do # two gc cycles: the epoch is 2
        randfile "$T/junk" 1 "epoch-junk-$i"
        bv backup "$repo" "$T/junk" --name=junk -q
        bv delete "$repo" junk >/dev/null 2>&1
        bv gc "$repo" >/dev/null
    done
    assert_eq "$(epoch "$repo")" 2 "gc/epoch after two gc cycles"

    rm -f "$T/fifo" && mkfifo "$T/fifo"
    "$BLKVAULT" backup "$repo" "$T/fifo" --name=new >"$T/backup.out" 2>"$T/backup.err" &
    pid=$!
    exec 3>"$T/fifo"
    cat "$T/old" >&3 # what 'old' holds: deduplicated
    for _ in $(seq 100); do ls "$repo"/leases/*.lease >/dev/null 2>&1 && break; sleep 0.1; done
    ls "$repo"/leases/*.lease >/dev/null 2>&1 || die "$1: the backup took no lease"
    case $1 in
    rm) rm "$repo/gc/epoch" ;;
    older) echo 1 > "$repo/gc/epoch" ;;
    esac
    bv delete "$repo" old >/dev/null 2>&1
    bv gc "$repo" >"$T/gc.out" 2>"$T/gc.err" || { cat "$T/gc.out" "$T/gc.err" >&2; die "$1: gc beside the backup"; }
    [ "$1" = lease ] || grep_q -x "warning: 'gc/epoch' in '$repo' went back (restored or edited?): it read ${want_read[$1]}, behind a running backup, restore or export or a condemned list; gc went on from 2" "$T/gc.err" ||
        { cat "$T/gc.err" >&2; die "$1: gc did not say that gc/epoch went back"; }
    [ "$1" != lease ] || echo 2 > "$repo/gc/epoch"
    exec 3>&-
    wait $pid || rc=$?
    pid=
    if [ "$rc" = 0 ]; then
        bv verify "$repo" --read-data >/dev/null 2>"$T/verify.err" ||
            { cat "$T/backup.out" "$T/gc.out" "$T/verify.err" >&2; die "$1: the published snapshot does not verify"; }
        bv restore "$repo" new "$T/restored" 2>/dev/null || die "$1: the published snapshot does not restore"
        assert_same "$T/old" "$T/restored"
        rm "$T/restored"
    else
        assert_eq "$rc" 4 "$1: exit status of the backup that cannot commit"
        grep -q "Structure needs cleaning\|gc/epoch" "$T/backup.err" || { cat "$T/backup.err" >&2; die "$1: the backup did not name the damage"; }
        [ -z "$(bv list "$repo" --json | grep '"new"')" ] || die "$1: a failed backup published a snapshot"
    fi
    # once the backup ended, gc finishes what waited for it: still nothing lost, and the epoch
    # went on from the largest one seen
    bv gc "$repo" >/dev/null
    bv verify "$repo" --read-data >/dev/null 2>"$T/verify.err" || { cat "$T/verify.err" >&2; die "$1: verify after the last gc"; }
    if [ "$rc" = 0 ]; then
        bv restore "$repo" new "$T/restored" 2>/dev/null || die "$1: the published snapshot does not restore after the last gc"
        assert_same "$T/old" "$T/restored"
        rm "$T/restored"
    fi
    [ "$(epoch "$repo")" -gt 2 ] || die "$1: gc/epoch went back to $(epoch "$repo")"
    echo "$1: backup exit $rc"
}

declare -A want_read=([rm]=0 [older]=1)
pid=
on_exit 'kill -KILL $pid'
for mode in rm older lease; do
    race $mode
done
echo ok
