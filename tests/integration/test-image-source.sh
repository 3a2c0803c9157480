#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Disk images as sources (issue 24): a qcow2, vmdk or vdi file is backed up as the virtual disk it
# holds (qemu-nbd --read-only, real qemu-img and qemu-io), restores bit-exact against
# `qemu-img convert -O raw`, reads about its allocated data (not its virtual size), follows a
# backing chain; the snapshot records the format and both sizes; an unchanged image is not read
# again, and never paired with an --as-file snapshot (which stores the file's own bytes). Refused
# with their message: an image a running QEMU writes (write lock), a truncated image, a missing
# backing file, no qemu-nbd, --compare-with. Killed (-9 or TERM) mid-backup, no qemu-nbd and no
# socket is left behind.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd qemu-img qemu-nbd qemu-io mkfs.ext4 sfdisk python3 openssl

export TMPDIR=$T/tmp # qemu-nbd's private socket directory would be made here: it must stay empty
mkdir -p "$TMPDIR"
repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
jget() { python3 -c "import json,sys; d=json.load(open(sys.argv[1]))
for k in sys.argv[2].split('.'): d=d.get(k, '') if isinstance(d, dict) else ''
print(d)" "$1" "$2"; }
no_leftovers() {
    [ -z "$(ls -A "$TMPDIR")" ] || die "$1: left in TMPDIR: $(ls -A "$TMPDIR")"
    ! pgrep -f "qemu-nbd.*$T/" >/dev/null || die "$1: a qemu-nbd of this test still runs: $(pgrep -af "qemu-nbd.*$T/")"
}
# backup_restore NAME IMAGE [OPTION...]: backs IMAGE up (JSON in $T/NAME.json), restores it to
# $T/NAME.out and compares it with qemu-img's own raw conversion.
backup_restore() {
    bv backup "$repo" "$2" --name="$1" --json "${@:3}" >"$T/$1.json"
    bv restore "$repo" "$(jget "$T/$1.json" snapshot)" "$T/$1.out" >/dev/null
    qemu-img convert -O raw "$2" "$T/$1.ref"
    assert_same "$T/$1.ref" "$T/$1.out"
    rm -f "$T/$1.ref" "$T/$1.out"
    no_leftovers "backup of $2"
}

# A GPT disk with an ext4 filesystem holding 24 MiB of files, as qcow2
raw=$T/disk.raw
truncate -s 256M "$raw"
printf 'label: gpt\nstart=2048, size=500000, type=L\n' | sfdisk -q "$raw"
mkdir -p "$T/files"
randfile "$T/files/a" 16 image-a
randfile "$T/files/b" 8 image-b
mkfs.ext4 -q -F -E offset=$((2048 * 512)) -d "$T/files" "$raw" 200M
qemu-img convert -O qcow2 "$raw" "$T/disk.qcow2"
backup_restore disk "$T/disk.qcow2"
read_bytes=$(jget "$T/disk.json" bytes_read)
[ "$read_bytes" -ge $((24 << 20)) ] && [ "$read_bytes" -lt $((48 << 20)) ] ||
    die "the qcow2 of 256 MiB with 24 MiB of files read $read_bytes bytes"
assert_eq "$(jget "$T/disk.json" size)" $((256 << 20)) "the snapshot's size is not the virtual disk's"
bv list "$repo" --json >"$T/list.json"
python3 - "$T/list.json" "$(stat -c %s "$T/disk.qcow2")" <<'PY'
import json, sys
src = json.load(open(sys.argv[1]))[-1]["source"]
assert src["kind"] == "image" and src["image_format"] == "qcow2", src
assert src["file_size"] == int(sys.argv[2]) and src["size"] == 256 << 20, src
PY
bv info "$repo" "$(jget "$T/disk.json" snapshot)" >"$T/info"
grep -q '^image  *qcow2 image, 256.0 MiB virtual' "$T/info" || { cat "$T/info"; die "info does not show the image"; }

# Unchanged: not read again. --as-file stores the file's bytes and is never paired with the
# virtual disk's snapshots (nor they with it).
bv backup "$repo" "$T/disk.qcow2" --name=disk --json >"$T/again.json"
assert_eq "$(jget "$T/again.json" bytes_read)" 0 "an unchanged qcow2 was read again"
assert_eq "$(jget "$T/again.json" reused_from)" "$(jget "$T/disk.json" snapshot)" "reused_from"
bv backup "$repo" "$T/disk.qcow2" --name=disk --as-file --json >"$T/file.json"
assert_eq "$(jget "$T/file.json" reused_from)" "" "--as-file took the virtual disk's map"
assert_eq "$(jget "$T/file.json" size)" "$(stat -c %s "$T/disk.qcow2")" "--as-file size"
bv restore "$repo" "$(jget "$T/file.json" snapshot)" "$T/file.out" >/dev/null
assert_same "$T/disk.qcow2" "$T/file.out"
bv backup "$repo" "$T/disk.qcow2" --name=disk --json >"$T/third.json"
assert_eq "$(jget "$T/third.json" reused_from)" "$(jget "$T/again.json" snapshot)" "image after --as-file"
bv backup "$repo" "$T/disk.qcow2" --name=disk --as-file --json >"$T/file2.json"
assert_eq "$(jget "$T/file2.json" reused_from)" "$(jget "$T/file.json" snapshot)" "--as-file after image"
# a changed image is read again
qemu-io -f qcow2 -c 'write -P 0x33 200M 1M' "$T/disk.qcow2" >/dev/null
backup_restore disk "$T/disk.qcow2"
assert_eq "$(jget "$T/disk.json" reused_from)" "" "a changed qcow2 was not read"

# A sparse 2 GiB qcow2 holding 50 MiB: about 50 MiB read
qemu-img create -q -f qcow2 "$T/sparse.qcow2" 2G
qemu-io -f qcow2 -c 'write -P 0x5a 100M 30M' -c 'write -P 0xa5 1500M 20M' -c 'write -z 1600M 64M' \
    "$T/sparse.qcow2" >/dev/null
backup_restore sparse "$T/sparse.qcow2"
read_bytes=$(jget "$T/sparse.json" bytes_read)
[ "$read_bytes" -ge $((50 << 20)) ] && [ "$read_bytes" -le $((52 << 20)) ] ||
    die "the sparse qcow2 with 50 MiB of data read $read_bytes bytes"

# A backing chain, its format stated (--image-format): the overlay is read as the whole virtual disk
qemu-img create -q -f qcow2 -b "$T/disk.qcow2" -F qcow2 "$T/overlay.qcow2"
qemu-io -f qcow2 -c 'write -P 0x77 10M 2M' "$T/overlay.qcow2" >/dev/null
backup_restore overlay "$T/overlay.qcow2" --image-format=qcow2
[ "$(jget "$T/overlay.json" bytes_read)" -ge $((24 << 20)) ] || die "the backing file was not read"

# vmdk and vdi
qemu-img convert -O vmdk "$raw" "$T/disk.vmdk"
backup_restore vmdk "$T/disk.vmdk"
qemu-img convert -O vdi "$raw" "$T/disk.vdi"
backup_restore vdi "$T/disk.vdi"
bv list "$repo" --json | grep_q '"image_format":"vdi"' || die "vdi not recorded"
# a raw image stays raw, whatever its name says
cp "$raw" "$T/raw.qcow2"
bv backup "$repo" "$T/raw.qcow2" --json >"$T/raw.json"
bv list "$repo" --json | python3 -c 'import json,sys; s=json.load(sys.stdin)[-1]["source"]; assert s["kind"] == "file" and "image_format" not in s, s'

# A guest writes a qcow2 header naming a host file as backing file at sector 0 of its raw disk
# (or a vmdk descriptor naming one as FLAT extent): a probed format is read as a virtual disk
# only when the image references no other file, so the host file never reaches the repository.
secret=$T/secret
for i in $(seq 1 40000); do echo "HOST-SECRET-LINE-$i"; done >"$secret"
qemu-img create -q -f qcow2 -b "$secret" -F raw "$T/evil.qcow2" 1M
truncate -s 8M "$T/guest.raw"
dd if="$T/evil.qcow2" of="$T/guest.raw" conv=notrunc status=none
printf '# Disk DescriptorFile\nversion=1\nCID=12345678\nparentCID=ffffffff\ncreateType="monolithicFlat"\n\n# Extent description\nRW 2048 FLAT "%s" 0\n\nddb.virtualHWVersion = "4"\n' \
    "$secret" >"$T/desc"
truncate -s 8M "$T/guest-vmdk.raw"
dd if="$T/desc" of="$T/guest-vmdk.raw" conv=notrunc status=none
for img in "$T/guest.raw:qcow2" "$T/evil.qcow2:qcow2" "$T/guest-vmdk.raw:vmdk"; do
    f=${img%:*} fmt=${img##*:}
    expect_fail 1 "refused to read '$f' as a $fmt image: it references another file, '$secret'" \
        bv backup "$repo" "$f" --name=evil
    grep -q -- "--image-format=$fmt" "$T/.err" && grep -q -- "--as-file" "$T/.err" ||
        die "the refusal does not say the two ways out: $(cat "$T/.err")"
done
bv list "$repo" --json | python3 -c 'import json,sys; assert not [s for s in json.load(sys.stdin) if s["name"] == "evil"]' ||
    die "a refused image left a snapshot"
# --as-file stores the raw disk's own bytes: none of the host file
bv backup "$repo" "$T/guest.raw" --name=evil --as-file --json >"$T/evil.json"
bv restore "$repo" "$(jget "$T/evil.json" snapshot)" "$T/evil.out" >/dev/null
assert_same "$T/guest.raw" "$T/evil.out"
! grep -q HOST-SECRET "$T/evil.out" || die "the host file reached the repository"
no_leftovers "refused images with references"
# --image-format that is not the header's format: refused
expect_fail 1 "'$T/disk.vdi' is not a qcow2 image: its header says vdi" \
    bv backup "$repo" "$T/disk.vdi" --image-format=qcow2
expect_fail 1 "'$T/guest.raw' is not a vmdk image: its header says qcow2" \
    bv backup "$repo" "$T/guest.raw" --image-format=vmdk
expect_fail 1 "'$raw' is not a qcow2 image: its header says raw" bv backup "$repo" "$raw" --image-format=qcow2

# A running QEMU holds the write lock: refused, with what to do
qemu-io -f qcow2 -c 'sleep 60000' "$T/sparse.qcow2" >/dev/null 2>&1 &
holder=$!
on_exit "kill $holder 2>/dev/null"
sleep 1
expect_fail 1 "cannot read the qcow2 image '$T/sparse.qcow2': a running VM writes it (qemu-nbd: Failed to get shared \"write\" lock)" \
    bv backup "$repo" "$T/sparse.qcow2"
grep -q "libvirt" "$T/.err" || die "the message does not say how to back a running VM up"
kill $holder; wait $holder 2>/dev/null || true
no_leftovers "refused locked image"
qemu-nbd -f qcow2 -k "$T/holder.sock" "$T/sparse.qcow2" &
holder=$!
on_exit "kill $holder 2>/dev/null"
sleep 1
expect_fail 1 "a running VM writes it" bv backup "$repo" "$T/sparse.qcow2"
kill $holder; wait $holder 2>/dev/null || true

# A truncated qcow2, a missing backing file, no qemu-nbd: refused naming the file
head -c 100 "$T/sparse.qcow2" >"$T/cut.qcow2"
expect_fail 1 "cannot read the qcow2 image '$T/cut.qcow2': qemu cannot open it: qcow2 header too short" \
    bv backup "$repo" "$T/cut.qcow2"
qemu-img create -q -f qcow2 -b "$T/gone.qcow2" -F qcow2 "$T/orphan.qcow2" 64M 2>/dev/null ||
    qemu-img create -q -f qcow2 -u -b "$T/gone.qcow2" -F qcow2 "$T/orphan.qcow2" 64M
expect_fail 1 "cannot read the qcow2 image '$T/orphan.qcow2': qemu cannot open it: .*missing backing file" \
    bv backup "$repo" "$T/orphan.qcow2" --image-format=qcow2
mkdir -p "$T/nopath"
expect_fail 1 "cannot read the qcow2 image '$T/disk.qcow2': qemu-nbd does not run (install qemu-utils)" \
    env PATH="$T/nopath" "$BLKVAULT" backup "$repo" "$T/disk.qcow2" --force-read
expect_fail 2 "'$T/disk.qcow2' is a qcow2 image: --compare-with maps the file's bytes" \
    bv backup "$repo" "$T/disk.qcow2" --compare-with="$T/disk.vdi"
no_leftovers "refused images"

# Killed mid-backup (-9, then TERM): qemu-nbd goes with it, nothing is left in TMPDIR
qemu-img create -q -f qcow2 "$T/big.qcow2" 1G
randfile "$T/big.data" 400 image-big
qemu-io -f qcow2 -c "write -s $T/big.data 0 400M" "$T/big.qcow2" >/dev/null 2>&1 ||
    qemu-img dd -f raw -O qcow2 if="$T/big.data" of="$T/big.qcow2" 2>/dev/null || die "cannot fill big.qcow2"
rm -f "$T/big.data"
for sig in KILL TERM; do
    "$BLKVAULT" backup "$repo" "$T/big.qcow2" --name=big --force-read >"$T/kill.out" 2>"$T/kill.err" &
    b=$!
    for i in $(seq 1 100); do pgrep -P $b qemu-nbd >/dev/null && break; sleep 0.1; done
    qnbd=$(pgrep -P $b qemu-nbd) || { cat "$T/kill.err"; die "no qemu-nbd under the backup"; }
    sleep 0.5
    kill -0 $b 2>/dev/null || { cat "$T/kill.err"; die "the backup of big.qcow2 ended before it was killed"; }
    [ -z "$(ls -A "$TMPDIR")" ] || die "the socket is in the filesystem while the backup runs"
    kill -$sig $b
    wait $b 2>/dev/null || true
    for i in $(seq 1 50); do kill -0 "$qnbd" 2>/dev/null || break; sleep 0.1; done
    ! kill -0 "$qnbd" 2>/dev/null || die "qemu-nbd outlived the backup killed with SIG$sig"
    no_leftovers "backup killed with SIG$sig"
done
echo "image sources: ok"
