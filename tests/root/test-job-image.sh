#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A job whose source = is a qcow2 image (issue 24): `blkvault job run` backs up the virtual disk
# it holds (qemu-nbd), records the format, and the snapshot restores bit-exact against
# `qemu-img convert -O raw`; no qemu-nbd outlives the run. as-file = yes stores the file's bytes.
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd losetup mkfs.ext4 qemu-img qemu-nbd qemu-io
[ -e /dev/loop-control ] || skip "no loop devices"

conf=$T/etc/blkvault.conf
mkdir -p "$T/etc" "$T/mnt"
opts=(--config="$conf" --run-dir="$T/run")
loop_target dev usb-1 300M "${opts[@]}"
qemu-img create -q -f qcow2 "$T/vm.qcow2" 1G
qemu-io -f qcow2 -c 'write -P 0x5a 0 3M' -c 'write -P 0xa5 700M 2M' "$T/vm.qcow2" >/dev/null
cat > "$conf" <<CONF
[job vm]
source = $T/vm.qcow2
targets = usb-1
[job vmfile]
source = $T/vm.qcow2
as-file = yes
targets = usb-1
CONF

bv job run vm "${opts[@]}" >"$T/out"
grep -q '^job vm: snapshot [0-9a-f]\{8\}, .* new, verified$' "$T/out" || { cat "$T/out"; die "job vm"; }
! pgrep -f "qemu-nbd.*$T/vm.qcow2" >/dev/null || die "qemu-nbd outlived the job run"
mount "$dev" "$T/mnt"
on_exit "umount -l '$T/mnt'"
bv list "$T/mnt/blkvault" --key-file="$T/keys/usb-1.key" --json >"$T/list.json"
python3 - "$T/list.json" <<'PY'
import json, sys
src = json.load(open(sys.argv[1]))[-1]["source"]
assert src["kind"] == "image" and src["image_format"] == "qcow2" and src["size"] == 1 << 30, src
PY
bv restore "$T/mnt/blkvault" vm "$T/vm.out" --key-file="$T/keys/usb-1.key" >/dev/null
qemu-img convert -O raw "$T/vm.qcow2" "$T/vm.ref"
assert_same "$T/vm.ref" "$T/vm.out"
# as-file = yes: the image file's own bytes
umount "$T/mnt"
bv job run vmfile "${opts[@]}" >"$T/out"
mount "$dev" "$T/mnt"
bv restore "$T/mnt/blkvault" vmfile "$T/vmfile.out" --key-file="$T/keys/usb-1.key" >/dev/null
assert_same "$T/vm.qcow2" "$T/vmfile.out"
echo "job with an image source: ok"
