#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The words of a libvirt source's backup (issue 24, a reviewer's rough edges), with the real
# libvirtd:
#   - a job with freeze = no names that setting as the reason for its crash-consistent backup
#     (it said "--no-freeze", an option the job never had); backup --no-freeze names the option;
#   - a libvirt URI that does not connect is said one way, whatever libvirt's reason (no driver,
#     a bad URI, a path the driver does not serve, no daemon on the socket): "cannot connect to
#     libvirt at 'URI': libvirt's words", from backup and from a job; an empty --libvirt-uri is
#     refused (libvirt would take it for its default);
#   - serve --libvirt-xml of a libvirt disk's snapshot writes that disk's target (vda), not vdb,
#     and a transient domain starts with the element in place of that disk.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/nbd/nbd-lib.sh"
. "$SOURCE_ROOT/tests/libvirt/libvirt-lib.sh"
need_cmd losetup python3
[ -e /dev/loop-control ] || skip "no loop devices"
repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
lv_domain msg 16M
dom=$LV_DOM

# 1. the reason for no freeze: the option, or the job's setting
bv backup "$repo" "libvirt:$dom" --no-freeze >"$T/b1.out" 2>&1 || { cat "$T/b1.out" >&2; die "backup --no-freeze failed"; }
grep -qx "note: no freeze (--no-freeze): the backup of '$dom' is crash-consistent" "$T/b1.out" ||
    { cat "$T/b1.out" >&2; die "backup --no-freeze did not name the option"; }
conf=$T/etc/blkvault.conf
mkdir -p "$T/etc"
opts=(--config="$conf" --run-dir="$T/run")
loop_target dev usb-1 200M "${opts[@]}"
printf '[job web]\nsource = libvirt:%s\ntargets = usb-1\nfreeze = no\n' "$dom" >"$conf"
bv job run web "${opts[@]}" >"$T/j1.out" 2>&1 || { cat "$T/j1.out" >&2; die "the job with freeze = no failed"; }
grep -qx "note: no freeze (freeze = no in \[job web\]): the backup of '$dom' is crash-consistent" "$T/j1.out" ||
    { cat "$T/j1.out" >&2; die "the job did not name its freeze = no"; }
grep -q -- "--no-freeze" "$T/j1.out" && { cat "$T/j1.out" >&2; die "the job named an option it does not have"; }

# 2. a URI that does not connect, said one way
expect_fail 2 "^error: --libvirt-uri needs a URI" bv backup "$repo" "libvirt:$dom" --libvirt-uri=
for uri in nosuchdriver:///system bogus qemu:///nonsense "qemu+unix:///system?socket=$T/none.sock"; do
    expect_fail 1 "" bv backup "$repo" "libvirt:$dom" --libvirt-uri="$uri"
    grep -q "^error: cannot connect to libvirt at '$uri': ." "$T/.err" || { cat "$T/.err" >&2; die "the failed connection to '$uri' was said otherwise"; }
    [ "$(wc -l <"$T/.err")" = 1 ] || { cat "$T/.err" >&2; die "more than one line for '$uri'"; }
    cat "$T/.err"
done
LIBVIRT_DEFAULT_URI=nosuchdriver:///system expect_fail 1 "^error: cannot connect to libvirt at 'nosuchdriver:///system': ." \
    bv backup "$repo" "libvirt:$dom"
printf '[job web]\nsource = libvirt:%s\ntargets = usb-1\nlibvirt-uri = qemu:///nonsense\n' "$dom" >"$conf"
rc=0
bv job run web "${opts[@]}" >"$T/j2.out" 2>&1 || rc=$?
[ "$rc" != 0 ] || die "the job with a bad libvirt-uri succeeded"
grep -q "cannot connect to libvirt at 'qemu:///nonsense': ." "$T/j2.out" || { cat "$T/j2.out" >&2; die "the job did not name its URI"; }
echo "bad URIs: one form, the URI named"

# 4. serve --libvirt-xml of the snapshot of vda: target vda, and a domain starts with it there
"${NBD_ENV[@]}" "$BLKVAULT" serve "$repo" "$dom-vda" --libvirt-xml="$T/disk.xml" >"$T/serve.out" 2>"$T/serve.err" &
spid=$!
on_exit "kill $spid 2>/dev/null || true"
for _ in $(seq 600); do [ -s "$T/disk.xml" ] && break; kill -0 "$spid" || break; sleep 0.1; done
[ -s "$T/disk.xml" ] || { cat "$T/serve.err" >&2; die "serve wrote no disk XML"; }
grep -q "<target dev='vda' bus='virtio'/>" "$T/disk.xml" || die "the XML's target is not the snapshot's disk: $(cat "$T/disk.xml")"
grep -q "its target is vda, the disk the snapshot was taken of" "$T/serve.err" || { cat "$T/serve.err" >&2; die "serve did not say the target"; }
grep -q "in place of that disk" "$T/serve.err" || { cat "$T/serve.err" >&2; die "serve did not say where the element goes"; }
boot=bvt-$$-boot
cat >"$T/boot.xml" <<XML
<domain type='qemu'><name>$boot</name><memory unit='MiB'>64</memory><vcpu>1</vcpu>
<os><type arch='x86_64' machine='pc'>hvm</type></os><on_reboot>destroy</on_reboot>
<devices><emulator>$(command -v qemu-system-x86_64)</emulator>
$(cat "$T/disk.xml")
</devices></domain>
XML
_lv_domains+=("$boot")
lv_virsh create "$T/boot.xml" >/dev/null || die "virsh create with the element as vda failed"
grep -q "^ *vda " <<<"$(lv_virsh domblklist "$boot")" || die "the started domain has no vda: $(lv_virsh domblklist "$boot")"
lv_virsh destroy "$boot" >/dev/null
kill "$spid"; wait "$spid" || true
echo "PASS"
