#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A job whose source = is a qcow2 image (issue 24): `blkvault job run` backs up the virtual disk
# it holds (qemu-nbd), records the format, and the snapshot restores bit-exact against
# `qemu-img convert -O raw`; no qemu-nbd outlives the run. as-file = yes stores the file's bytes.
# A raw disk whose guest wrote a qcow2 header naming a host file as backing file is refused (the
# host file never read), an overlay with image-format = qcow2 is read with its backing chain, and
# an image a running VM writes is refused in the words backup uses.
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
[job guest]
source = $T/guest.raw
targets = usb-1
[job overlay]
source = $T/overlay.qcow2
image-format = qcow2
targets = usb-1
CONF
for i in $(seq 1 20000); do echo "HOST-SECRET-LINE-$i"; done >"$T/secret"
qemu-img create -q -f qcow2 -b "$T/secret" -F raw "$T/evil.qcow2" 1M
truncate -s 8M "$T/guest.raw"
dd if="$T/evil.qcow2" of="$T/guest.raw" conv=notrunc status=none
qemu-img create -q -f qcow2 -b "$T/vm.qcow2" -F qcow2 "$T/overlay.qcow2"
qemu-io -f qcow2 -c 'write -P 0x77 1M 1M' "$T/overlay.qcow2" >/dev/null

! bv job run guest "${opts[@]}" >"$T/out" 2>"$T/err" || die "the job of a raw disk naming a host file ran"
grep -q "refused to read '$T/guest.raw' as a qcow2 image: it references another file, '$T/secret'" "$T/err" &&
    grep -q "image-format = qcow2" "$T/err" && grep -q "as-file = yes" "$T/err" ||
    { cat "$T/err"; die "job guest: not refused naming the file and the ways out"; }
# A running VM writes the image: the words of backup, not "Device or resource busy"
qemu-io -f qcow2 -c 'sleep 60000' "$T/vm.qcow2" >/dev/null 2>&1 &
holder=$!
on_exit "kill $holder 2>/dev/null"
sleep 1
! bv job run vm "${opts[@]}" >"$T/out" 2>"$T/err" || die "the job of a locked image ran"
grep -q "cannot read the qcow2 image '$T/vm.qcow2': a running VM writes it" "$T/err" ||
    { cat "$T/err"; die "job vm: the locked image's message is not backup's"; }
kill $holder; wait $holder 2>/dev/null || true
bv job run overlay "${opts[@]}" >"$T/out" || die "job overlay (image-format = qcow2)"

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
bv restore "$T/mnt/blkvault" overlay "$T/overlay.out" --key-file="$T/keys/usb-1.key" >/dev/null
qemu-img convert -O raw "$T/overlay.qcow2" "$T/overlay.ref"
assert_same "$T/overlay.ref" "$T/overlay.out"
bv list "$T/mnt/blkvault" --key-file="$T/keys/usb-1.key" --json | grep_q '"name":"guest"' &&
    die "the refused job left a snapshot" || true
echo "job with an image source: ok"
