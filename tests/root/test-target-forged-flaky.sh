#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A forged --no-luks stick (the registered filesystem UUID, an unencrypted repository at the
# registered path) whose 'blkvault/config' does not read the first times (a flaky stick, or a USB
# gadget that fails one block on purpose): served by nbdkit eval, through nbdfuse and a loop
# device. The run refused the unencrypted repository only when a separate peek at its config
# read it; when that read failed, the job's own open read the config again, ignored the key file
# and wrote a plaintext backup ("safe to unplug", exit 0). Now the open that holds the key file
# refuses a repository without a cipher, from the very config it uses, and the run proves the
# drive before it writes anything anywhere: no hook, no lock, no lease, no snapshot.
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd losetup mkfs.ext4 blkid debugfs dumpe2fs nbdkit nbdfuse fusermount3
[ -e /dev/loop-control ] || skip "no loop devices"
[ -e /dev/fuse ] || skip "no /dev/fuse"

conf=$T/etc/blkvault.conf
mkdir -p "$T/etc" "$T/mnt" "$T/fuse"
opts=(--config="$conf" --run-dir="$T/run")
randfile "$T/secret.img" 1 forged-secret
loop_target real usb-1 64M "${opts[@]}"
truncate -s 64M "$T/forged.img"
uuid=$(blkid -s UUID -o value "$real")
detach_loop "$real"
cat > "$conf" <<EOF
[job secret]
source = $T/secret.img
targets = usb-1
pre = touch $T/pre-ran
EOF

# the forged drive: where its config's block lies
mkfs.ext4 -q -b 4096 -U "$uuid" "$T/forged.img"
mount -o loop "$T/forged.img" "$T/mnt"
bv init "$T/mnt/blkvault" --encryption=none >/dev/null
umount "$T/mnt"
bs=$(dumpe2fs -h "$T/forged.img" 2>/dev/null | sed -n 's/^Block size: *//p')
blk=$(debugfs -R "bmap /blkvault/config 0" "$T/forged.img" 2>/dev/null)
[ -n "$bs" ] && [ "${blk:-0}" -gt 0 ] || die "cannot find the block of blkvault/config (block size '$bs', block '$blk')"
start=$((blk * bs)) end=$((blk * bs + bs))

# the stick: every request that touches that block fails while $T/fails counts down
echo 3 > "$T/fails"
cat > "$T/pread.sh" <<EOF
if [ "\$2" -lt $end ] && [ \$((\$2 + \$1)) -gt $start ]; then
    n=\$(cat "$T/fails")
    echo "pread \$1 at \$2 (\$n failures left)" >> "$T/reads.log"
    if [ "\$n" -gt 0 ]; then echo \$((n - 1)) > "$T/fails"; echo "EIO flaky" >&2; exit 1; fi
fi
exec dd if="$T/forged.img" skip="\$2" count="\$1" iflag=skip_bytes,count_bytes status=none
EOF
cat > "$T/pwrite.sh" <<EOF
exec dd of="$T/forged.img" seek="\$2" count="\$1" iflag=count_bytes oflag=seek_bytes conv=notrunc status=none
EOF
nbdfuse "$T/fuse/stick" --command nbdkit -s eval get_size="echo $(stat -c %s "$T/forged.img")" \
    pread="exec sh '$T/pread.sh' \"\$3\" \"\$4\"" pwrite="exec sh '$T/pwrite.sh' \"\$3\" \"\$4\"" \
    2>"$T/fuse.log" &
fuse=$!
on_exit "fusermount3 -u -q '$T/fuse' 2>/dev/null; kill $fuse 2>/dev/null; wait $fuse 2>/dev/null || :"
for _ in $(seq 100); do [ -f "$T/fuse/stick" ] && break; sleep 0.1; done
[ -f "$T/fuse/stick" ] || { cat "$T/fuse.log" >&2; die "nbdfuse did not show the stick"; }
attach_loop forged "$T/fuse/stick"

rc=0
bv target run usb-1 "${opts[@]}" >"$T/run.out" 2>"$T/run.err" || rc=$?
[ -s "$T/reads.log" ] || { cat "$T/run.out" "$T/run.err" >&2; die "the run never read blkvault/config"; }
[ "$(cat "$T/fails")" -lt 3 ] || die "the config block never failed: $(cat "$T/reads.log")"
grep -q "safe to unplug" "$T/run.out" "$T/run.err" && { cat "$T/run.out" "$T/run.err" >&2; die "the forged drive was run"; }
[ "$rc" != 0 ] || die "the run on the flaky forged drive exited 0"
# the proof read the config while it failed (the read error), or once it read (no cipher)
grep -Eq "^error: target usb-1: (cannot prove that the drive is the registered one: its repository 'blkvault' does not open \(Input/output error\)|the repository 'blkvault' on the drive is not encrypted, .*); nothing was written$" "$T/run.err" ||
    { cat "$T/run.out" "$T/run.err" >&2; die "the run did not say why the drive was refused"; }
[ ! -e "$T/pre-ran" ] || die "the job's pre command ran before the drive was proven"

# read again now that the block reads: the same refusal as for a drive that reads well
echo 0 > "$T/fails"
expect_fail 3 "^error: target usb-1: the repository 'blkvault' on the drive is not encrypted, so it is not the one registered with key file '$T/keys/usb-1.key' (a drive that only pretends to be usb-1?); nothing was written$" \
    bv target run usb-1 "${opts[@]}"
[ ! -e "$T/pre-ran" ] || die "the job's pre command ran on the forged drive"
if bv status --config="$conf" --check-age >/dev/null 2>&1; then die "the age check is satisfied by the forged drive"; fi

detach_loop "$forged"
fusermount3 -u "$T/fuse"
mount -o ro,loop "$T/forged.img" "$T/mnt"
assert_eq "$(ls -A "$T/mnt/blkvault/snapshots")" "" "snapshots on the forged drive"
assert_eq "$(ls -A "$T/mnt/blkvault/leases" 2>/dev/null)" "" "leases on the forged drive"
umount "$T/mnt"
echo "ok: the flaky forged drive got nothing ($(wc -l < "$T/reads.log") reads of its config block)"
