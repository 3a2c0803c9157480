#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A block device's stable name is recorded with its snapshot (issue 12): the backup of a loop
# device whose ext4 has a known UUID records /dev/disk/by-uuid/UUID (the link udev makes; made
# here when no udev runs, as udev would; a stale by-uuid link to the device is passed over), and
# list --json and info show it with the host and the absolute path; the image restores bit-exact.
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd losetup mkfs.ext4 python3 sha256sum
[ -e /dev/loop-control ] || skip "no loop devices"

uuid=$(python3 -c 'import uuid; print(uuid.uuid4())')
truncate -s 32M "$T/img"
mkfs.ext4 -q -U "$uuid" -F "$T/img"
attach_loop dev "$T/img"
link=/dev/disk/by-uuid/$uuid
for _ in $(seq 1 20); do [ -e "$link" ] && break; sleep 0.1; done
if [ ! -e "$link" ]; then
    mkdir -p /dev/disk/by-uuid
    ln -s "../../$(basename "$dev")" "$link"
    on_exit "rm -f '$link'"
fi

# a stale link, as a filesystem the device held before leaves it: not the device's name
stale=/dev/disk/by-uuid/$(python3 -c 'import uuid; print(uuid.uuid4())')
ln -s "../../$(basename "$dev")" "$stale"
on_exit "rm -f '$stale'"

repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
bv backup "$repo" "$dev" --name=dev -q >/dev/null
bv list "$repo" --json | python3 -c "
import json, socket, sys
s = json.load(sys.stdin)[0]['source']
assert s['stable_name'] == sys.argv[1], s
assert s['abs_path'] == sys.argv[2] and s['kind'] == 'blockdev', s
assert s['host'] == socket.gethostname(), s
" "$link" "$dev"
bv info "$repo" dev@latest >"$T/info"
grep -qx "device       $link" "$T/info" || { cat "$T/info"; die "info does not show the stable name"; }
grep -qx "source       $dev (blockdev)" "$T/info" || { cat "$T/info"; die "info does not show the source"; }
bv restore "$repo" dev@latest "$T/out" -q
assert_eq "$(sha256sum <"$T/out")" "$(sha256sum <"$T/img")" "the restored image"
echo ok
