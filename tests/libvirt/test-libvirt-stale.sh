#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# What runs left in /var/lib/libvirt/qemu of a domain libvirt no longer has (issue 24): a run
# killed with -9 mid-backup of a domain that is then destroyed and undefined leaves its scratch
# directory blkvault-UUID.d (and socket), which no run of that domain will ever tidy again. The
# next backup of any domain removes them and says so. Only blkvault's own files of domains that
# are gone go: those of a domain libvirt still has (shut off), those of a gone domain whose lock
# a run holds (until it lets go), and names that only look like ours (another prefix, a UUID in
# capitals, a suffix more) stay. A backup through another libvirt URI (the test driver, which
# knows none of the system's domains) removes nothing.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/libvirt/libvirt-lib.sh"
need_cmd python3
run=/var/lib/libvirt/qemu
repo=$T/repo
bv init "$repo" --encryption=none >/dev/null

# 1. a real leftover: killed with -9 while it reads, then its domain destroyed and undefined
lv_domain --no-start gone 16M
gone=$LV_DOM
randfile "$T/rand" 16 stale
qemu-img convert -f raw -O qcow2 "$T/rand" "$(lv_image "$gone" vda)"
lv_virsh start "$gone" >/dev/null
gone_uuid=$(lv_virsh domuuid "$gone")
on_exit "rm -rf '$run/blkvault-$gone_uuid.d' '$run/blkvault-$gone_uuid.sock'"
BV_STALL_WRITE=1 stall_start $((2 * 1024 * 1024)) "$T/k.err" "$BLKVAULT" backup "$repo" "libvirt:$gone"
kill -KILL "$pid"
wait "$pid" 2>/dev/null || true
lv_virsh destroy "$gone" >/dev/null
lv_virsh undefine "$gone" --checkpoints-metadata >/dev/null || die "cannot undefine $gone"
[ -d "$run/blkvault-$gone_uuid.d" ] || die "the killed run left no scratch directory (the test no longer shows the leftover)"
left=$(find "$run" -maxdepth 1 -name "blkvault-$gone_uuid.*" | wc -l)

# 2. made by hand: a gone domain's directory (with a scratch file) and freeze mark; a gone
# domain's directory whose lock a run holds; a shut-off domain's; look-alikes
u1=$(python3 -c 'import uuid; print(uuid.uuid4())')
u2=$(python3 -c 'import uuid; print(uuid.uuid4())')
lv_domain --no-start kept 16M
u3=$(lv_virsh domuuid "$LV_DOM")
on_exit "rm -rf '$run/blkvault-$u1.d' '$run/blkvault-$u1.frozen' '$run/blkvault-$u2.d' '$run/blkvault-$u3.d' \
    '$run/blkvault-$u1-x.d' '$run/blkvault-${u1^^}.sock' '$run/blkvault-$u1.d.old' '$run/other-$u1.sock'"
mkdir "$run/blkvault-$u1.d" "$run/blkvault-$u2.d" "$run/blkvault-$u3.d" "$run/blkvault-$u1-x.d"
: >"$run/blkvault-$u1.d/vda.scratch"
: >"$run/blkvault-$u1.frozen"
: >"$run/blkvault-${u1^^}.sock"
: >"$run/blkvault-$u1.d.old"
: >"$run/other-$u1.sock"
exec {held}>"/run/lock/blkvault-libvirt-$u2.lock"
flock -n "$held" || die "cannot take the lock of $u2"
on_exit "rm -f '/run/lock/blkvault-libvirt-$u2.lock' '/run/lock/blkvault-libvirt-$u1.lock' '/run/lock/blkvault-libvirt-$gone_uuid.lock'"

# another URI knows none of the system's domains: nothing is removed (the backup of the test
# driver's domain gets past the sweep, then fails: that driver has no backup jobs)
expect_fail 1 "" bv backup "$repo" libvirt:test --libvirt-uri=test:///default
[ -d "$run/blkvault-$u1.d" ] && [ -d "$run/blkvault-$gone_uuid.d" ] || die "a run through test:///default removed the system's files"

# the next backup of another domain removes the gone domains' files, and only those
lv_domain main 16M
bv backup "$repo" "libvirt:$LV_DOM" --no-freeze >"$T/b1.out" 2>&1 || { cat "$T/b1.out" >&2; die "the backup failed"; }
n=$((left + 2))
grep -q "^removed $n leftover(s) of domains libvirt no longer has from $run (scratch directories" "$T/b1.out" ||
    { cat "$T/b1.out" >&2; die "the backup did not say it removed the $n leftovers"; }
for f in "blkvault-$gone_uuid.d" "blkvault-$gone_uuid.sock" "blkvault-$u1.d" "blkvault-$u1.frozen"; do
    [ ! -e "$run/$f" ] || die "$f of a domain libvirt no longer has was left"
done
for f in "blkvault-$u2.d" "blkvault-$u3.d" "blkvault-$u1-x.d" "blkvault-${u1^^}.sock" "blkvault-$u1.d.old" "other-$u1.sock"; do
    [ -e "$run/$f" ] || die "$f was removed (a run's, a domain libvirt has, or not ours)"
done
echo "removed $n leftovers of gone domains, kept the held, the defined and the look-alikes"

# once the run holding it lets go, the held domain's directory goes too
exec {held}>&-
bv backup "$repo" "libvirt:$LV_DOM" --no-freeze >"$T/b2.out" 2>&1 || { cat "$T/b2.out" >&2; die "the second backup failed"; }
grep -q "^removed 1 leftover(s) of domains libvirt no longer has from $run " "$T/b2.out" ||
    { cat "$T/b2.out" >&2; die "the second backup did not remove the released leftover"; }
[ ! -e "$run/blkvault-$u2.d" ] || die "the released leftover was left"
[ -e "$run/blkvault-$u3.d" ] || die "the shut-off domain's directory was removed"
lv_nothing_left "$LV_DOM" "after the backups"
echo "PASS"
