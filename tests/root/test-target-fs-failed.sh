#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A drive whose writes start failing during a run (a USB glitch, a dying stick: nbdkit's error
# filter behind nbdfuse and a loop device): ext4 aborts its journal and the filesystem goes
# read-only. The run unmounted it and printed "safe to unplug" (exit 0 when the backup itself
# had already been written); now the final sync and a look at the mount come first, and the
# ending says what happened: no "safe to unplug", a non-zero exit, the error named.
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd losetup nbdkit nbdfuse fusermount3
[ -e /dev/loop-control ] || skip "no loop devices"
[ -e /dev/fuse ] || skip "no /dev/fuse"

conf=$T/etc/blkvault.conf
mkdir -p "$T/etc" "$T/fuse"
opts=(--config="$conf" --run-dir="$T/run")
randfile "$T/src.img" 1 fs-failed
truncate -s 64M "$T/stick.img"
attach_loop dev "$T/stick.img"
bv target format "$dev" --name=usb-1 --no-luks --key-dir="$T/keys" "${opts[@]}" >/dev/null
detach_loop "$dev"
cp --sparse=always "$T/stick.img" "$T/stick.orig"

# run_case HOOK: the run of a stick whose every write fails once the job's HOOK command ran
run_case() {
    cp --sparse=always "$T/stick.orig" "$T/stick.img"
    rm -f "$T/trigger"
    printf '[job src]\nsource = %s\ntargets = usb-1\n%s = touch %s\n' "$T/src.img" "$1" "$T/trigger" >"$conf"
    nbdfuse "$T/fuse/stick" --command nbdkit -s --filter=error file "$T/stick.img" \
        error-pwrite-rate=100% error-pwrite-file="$T/trigger" error=EIO 2>"$T/fuse.log" &
    fuse=$!
    for _ in $(seq 100); do [ -f "$T/fuse/stick" ] && break; sleep 0.1; done
    [ -f "$T/fuse/stick" ] || { cat "$T/fuse.log" >&2; die "nbdfuse did not show the stick"; }
    attach_loop stick "$T/fuse/stick"
    rc=0
    bv target run usb-1 "${opts[@]}" >"$T/run.out" 2>"$T/run.err" || rc=$?
    detach_loop "$stick"
    fusermount3 -u "$T/fuse"
    wait $fuse || :
    [ -e "$T/trigger" ] || die "$1: the $1 command did not run"
    if grep -q "safe to unplug" "$T/run.out" "$T/run.err"; then
        cat "$T/run.out" "$T/run.err" >&2
        die "$1: 'safe to unplug' after the drive's filesystem failed"
    fi
    [ "$rc" != 0 ] || die "$1: the run exited 0"
}
on_exit "fusermount3 -u -q '$T/fuse' 2>/dev/null"

# writes fail once the backup is written and verified (the post command): the final sync fails
run_case post
assert_eq "$rc" 1 "exit status when the final sync fails"
grep -qx "job src: snapshot [0-9a-f]*, 1.0 MiB new, verified" "$T/run.out" || { cat "$T/run.out" >&2; die "post: the job's line"; }
grep -qx "error: target usb-1: 1 jobs, 0 failed, 1.0 MiB new, but the drive's filesystem failed at the end (Input/output error): it was unmounted, but not all the run wrote may be on the drive: check it (fsck) before trusting it" "$T/run.err" ||
    { cat "$T/run.err" >&2; die "post: the ending does not say that the filesystem failed"; }

# writes fail from the start of the job (the pre command): the backup fails, the journal aborts
# and the filesystem is read-only at the end
run_case pre
grep -Eq "^error: target usb-1: job src: (open|backup) failed: " "$T/run.err" || { cat "$T/run.err" >&2; die "pre: the job's failure"; }
grep -Eqx "error: target usb-1: 1 jobs, 1 failed, 0 B new, but the drive's filesystem failed at the end \((Input/output error|Read-only file system)\): it was unmounted, but not all the run wrote may be on the drive: check it \(fsck\) before trusting it" "$T/run.err" ||
    { cat "$T/run.err" >&2; die "pre: the ending does not say that the filesystem failed"; }
echo ok
