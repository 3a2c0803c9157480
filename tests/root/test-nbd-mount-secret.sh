#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# blkvault mount of an encrypted repository with the passphrase in $BLKVAULT_PASSPHRASE: while the
# filesystem is mounted, the passphrase is in the environment (/proc/PID/environ) and on the
# command line of neither nbdkit nor nbdfuse; nbdkit reads it once from a pipe. A bad --cache is
# refused before anything is set up. Clients of the mount's server that vanish with 64 reads in
# flight do not end the mount (nbdkit 1.32 aborted on that unless run with --threads=1).
. "$SOURCE_ROOT/tests/lib.sh"
need_root
: "${NBD_PLUGIN:?run through meson test (needs the nbdkit plugin)}"
. "$SOURCE_ROOT/tests/nbd/nbd-lib.sh"
need_cmd losetup mkfs.ext4 nbdfuse fusermount3 openssl
[ -e /dev/fuse ] || skip "no /dev/fuse"
[ -e /dev/loop-control ] || skip "no loop devices"

img=$T/disk.img
truncate -s 64M "$img"
mkfs.ext4 -q -F "$img"
attach_loop loop "$img"
mkdir -p "$T/mnt"
mount "$loop" "$T/mnt"
randfile "$T/mnt/data.bin" 3 mountsecret
cp "$T/mnt/data.bin" "$T/data.bin"
umount "$T/mnt"
detach_loop "$loop"

pass='mount passphrase words'
repo=$T/repo
BLKVAULT_PASSPHRASE=$pass bv init "$repo" >/dev/null
BLKVAULT_PASSPHRASE=$pass bv backup "$repo" "$img" --name=fs >/dev/null

mp=$T/view
mkdir -p "$mp"
expect_fail 2 "invalid --cache 'banana' (a size such as 256M)" "$BLKVAULT" mount "$repo" fs "$mp" --cache=banana
! mountpoint -q "$mp" || die "a refused mount mounted"

on_exit "\"$BLKVAULT\" umount \"$mp\""
BLKVAULT_PASSPHRASE=$pass "${NBD_ENV[@]}" "$BLKVAULT" mount "$repo" fs "$mp" 2>"$T/mount.log" ||
    { cat "$T/mount.log" >&2; die "blkvault mount failed"; }
assert_same "$T/data.bin" "$mp/data.bin"
state=/run/blkvault/mounts/$(realpath "$mp" | sed 's|^/||; s|/|-|g')/state.json
read -r kit fuse < <(python3 -c 'import json, sys; s = json.load(open(sys.argv[1])); print(s["nbdkit_pid"], s.get("nbdfuse_pid", 0))' "$state")
[ "$kit" -gt 0 ] && [ -d "/proc/$kit" ] || die "no running nbdkit recorded in $state"
checked=0
for pid in $kit $fuse; do
    [ "$pid" -gt 0 ] && [ -d "/proc/$pid" ] || continue
    what=$(cat "/proc/$pid/comm")
    ! grep -qaF "$pass" "/proc/$pid/environ" || die "the passphrase is in the environment of $what (pid $pid)"
    ! grep -qaF "$pass" "/proc/$pid/cmdline" || die "the passphrase is on the command line of $what (pid $pid)"
    checked=$((checked + 1))
done
# nbdfuse is used where the kernel has no nbd driver (this machine): then both were checked
[ "$fuse" = 0 ] || assert_eq "$checked" 2 "processes checked"
tr '\0' '\n' < "/proc/$kit/cmdline" | grep_q -x 'passphrase-fd=[0-9]*' || die "nbdkit did not get the passphrase through a pipe"
tr "\\0" "\\n" < "/proc/$kit/cmdline" | grep_q -x -- --threads=1 || die "nbdkit of the mount does not run with --threads=1"

PY=$(nbd_python) || skip "python3-libnbd is not installed"
sock=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["socket"])' "$state")
for i in $(seq 1 10); do
    "$PY" - "nbd+unix:///?socket=$sock" <<'PY' 2>"$T/vanish.err" || { cat "$T/vanish.err" >&2; die "client $i did not get its 64 reads in flight"; }
import nbd, os, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
buf = nbd.Buffer(1 << 20)
for i in range(64):
    h.aio_pread(buf, (i << 20) % (h.get_size() - (1 << 20)))
os._exit(0)
PY
done
nbdinfo --size "nbd+unix:///?socket=$sock" >/dev/null || { cat "$T/vanish.err" >&2; die "the mount's server died when clients vanished"; }
echo 3 > /proc/sys/vm/drop_caches
assert_same "$T/data.bin" "$mp/data.bin"
"$BLKVAULT" umount "$mp" 2>"$T/umount.log" || { cat "$T/umount.log" >&2; die "umount failed"; }
! mountpoint -q "$mp" || die "$mp still mounted"
echo ok
