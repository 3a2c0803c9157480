#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Instant recovery (issue 24): `blkvault serve --libvirt-xml=FILE` writes a <disk> element for its
# NBD export (Unix socket, read-only) and prints the virsh example; the socket is given to libvirt's
# QEMU user. A throwaway transient domain (virsh create; real libvirtd, QEMU under TCG) starts
# with the element as its disk vdb, without a restore, and reads it through the guest's block
# layer (qemu-io over HMP on its qdev path, with pattern verification: a wrong pattern is
# reported, so the read is real); virsh domblkinfo gives the snapshot's size. (This domain type
# has no PCI hotplug, so virsh attach-device --live, the other printed example, is not tried.)
# --libvirt-xml with --listen is refused.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/nbd/nbd-lib.sh"
. "$SOURCE_ROOT/tests/libvirt/libvirt-lib.sh"
need_cmd python3

MIB=1048576
repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
# 8 MiB: four 2 MiB runs of one byte each, for qemu-io's pattern check
python3 -c 'import sys; sys.stdout.buffer.write(b"".join(bytes([b]) * 2097152 for b in (0x5a, 0xa5, 0x3c, 0xc3)))' >"$T/disk.raw"
snap=$(bv backup "$repo" "$T/disk.raw" --name=disk --json -q | python3 -c 'import json,sys; print(json.load(sys.stdin)["snapshot"])')

expect_fail 2 "error: --libvirt-xml describes a Unix socket: it does not go with --listen" \
    bv serve "$repo" "$snap" --libvirt-xml="$T/x.xml" --listen=127.0.0.1:10809 --insecure

"${NBD_ENV[@]}" "$BLKVAULT" serve "$repo" "$snap" --libvirt-xml="$T/disk.xml" >"$T/serve.out" 2>"$T/serve.err" &
spid=$!
on_exit "kill $spid 2>/dev/null || true"
for _ in $(seq 600); do [ -s "$T/disk.xml" ] && break; kill -0 "$spid" || break; sleep 0.1; done
[ -s "$T/disk.xml" ] || { cat "$T/serve.err" >&2; die "serve wrote no disk XML"; }
sock=$(sed -n 's/^nbd+unix:\/\/\/?socket=//p' "$T/serve.out")
[ -S "$sock" ] || die "serve printed no socket: $(cat "$T/serve.out")"
grep -q "<host transport='unix' socket='$sock'/>" "$T/disk.xml" || die "the XML names another socket: $(cat "$T/disk.xml")"
grep -q "<readonly/>" "$T/disk.xml" || die "a read-only export without <readonly/>"
grep -q "virsh attach-device DOMAIN $T/disk.xml --live" "$T/serve.err" || { cat "$T/serve.err" >&2; die "no virsh example"; }
assert_eq "$(stat -c %U "$sock")" libvirt-qemu "the socket's owner"

# a transient domain (virsh create) with the element as its disk vdb: the instant-recovery boot
LV_DOM=bvt-$$-serve
cat >"$T/dom.xml" <<XML
<domain type='qemu'><name>$LV_DOM</name><memory unit='MiB'>64</memory><vcpu>1</vcpu>
<os><type arch='x86_64' machine='pc'>hvm</type></os><on_reboot>destroy</on_reboot>
<devices><emulator>$(command -v qemu-system-x86_64)</emulator>
$(cat "$T/disk.xml")
</devices></domain>
XML
_lv_domains+=("$LV_DOM")
lv_virsh create "$T/dom.xml" >/dev/null || die "virsh create with the disk XML failed"
# the qdev path of the NBD disk, from info block (its entry names the socket)
qdev=$(lv_virsh qemu-monitor-command "$LV_DOM" --hmp 'info block' | tr -d '\r' |
    awk -v s="$sock" 'index($0, s) { found = 1; next } found && /Attached to:/ { print $3; exit } /^[^ ]/ { found = 0 }')
[ -n "$qdev" ] || die "no qdev path for the NBD disk: $(lv_virsh qemu-monitor-command "$LV_DOM" --hmp 'info block')"
# readp PATTERN OFFSET LENGTH: qemu-io's read with pattern check in the guest; QEMU prints its
# result on its own stdout, which is the domain's log
qlog=/var/log/libvirt/qemu/$LV_DOM.log
readp() {
    local before
    before=$(wc -l <"$qlog")
    lv_virsh qemu-monitor-command "$LV_DOM" --hmp "qemu-io -d $qdev \"read -P 0x$1 $2 $3\"" >/dev/null
    tail -n +$((before + 1)) "$qlog" | head -2 | tr '\n' ' '
}
for i in 0 1 2 3; do
    p=$(echo 5a a5 3c c3 | cut -d' ' -f$((i + 1)))
    out=$(readp "$p" $((i * 2 * MIB)) $((2 * MIB)))
    case $out in "read $((2 * MIB))/$((2 * MIB)) bytes at offset $((i * 2 * MIB))"*) ;;
        *) die "the guest's read of run $i: $out" ;; esac
done
# a wrong pattern is caught: the guest really read the bytes
out=$(readp 00 0 65536)
case $out in *"Pattern verification failed"*) ;; *) die "a wrong pattern passed: $out" ;; esac
lv_virsh domblkinfo "$LV_DOM" vdb >"$T/blkinfo"
grep -q "^Capacity: *$((8 * MIB))$" "$T/blkinfo" || die "domblkinfo: $(cat "$T/blkinfo")"
lv_virsh destroy "$LV_DOM" >/dev/null || die "cannot stop the transient domain"
echo "instant recovery: 8 MiB read by the guest's block layer over $sock"
kill "$spid"; wait "$spid" || true
[ ! -e "$sock" ] || die "serve left its socket behind"
echo "PASS"
