#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# backup --used-only on the filesystems partclone maps (partclone.<fs> -D, a ddrescue domain
# map): a GPT image with XFS, btrfs, FAT and NTFS partitions, each with ~100 MiB of deleted random
# files in its free space. Only what each uses is read; the restore passes xfs_repair -n, btrfs
# check, fsck.vfat -n and ntfsfix -n, and its files equal the originals. An XFS whose log needs
# recovery (a copy taken while it was mounted) is read whole: its free space btrees do not show
# what the log allocated, and partclone alone would call those blocks free.
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd losetup sfdisk partclone.xfs partclone.btrfs partclone.fat partclone.ntfs mkfs.xfs mkfs.btrfs \
    mkfs.vfat mkntfs mcopy mdel xfs_repair xfs_logprint btrfs fsck.vfat ntfsfix python3 openssl
grep -qw ntfs3 /proc/filesystems || command -v ntfs-3g >/dev/null || skip "no NTFS driver to mount with"
MIB=1048576
json_get() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

truncate -s 1200M "$T/disk.img"
printf 'label: gpt\n,400M,L\n,300M,L\n,200M,L\n,200M,L\n' | sfdisk -q "$T/disk.img"
part() { # part VAR N [LOSETUP-ARGS]: a loop device over partition N of IMAGE
    local start size
    read -r start size < <(sfdisk -J "$3" | python3 -c "
import json, sys
p = json.load(sys.stdin)['partitiontable']['partitions'][$2 - 1]
print(p['start'] * 512, p['size'] * 512)")
    attach_loop "$1" "${@:4}" -o "$start" --sizelimit "$size" "$3"
}
fss=(xfs btrfs vfat ntfs)
mkdir -p "$T/mnt"
for n in 1 2 3 4; do
    fs=${fss[n - 1]}
    part dev "$n" "$T/disk.img"
    case $fs in
    xfs) mkfs.xfs -q "$dev" ;;
    btrfs) mkfs.btrfs -q "$dev" >/dev/null ;;
    vfat) mkfs.vfat "$dev" >/dev/null ;;
    ntfs) mkntfs -q -F -f "$dev" >/dev/null 2>&1 ;;
    esac
    mkdir -p "$T/orig/$fs/dir"
    randfile "$T/orig/$fs/big" 8 "keep-$fs"
    seq 1 50000 >"$T/orig/$fs/dir/numbers"
    randfile "$T/junk" 100 "junk-$fs"
    if [ "$fs" = vfat ]; then # no vfat module here: mtools writes it
        mcopy -i "$dev" "$T/junk" ::/junk
        sync
        mdel -i "$dev" ::/junk
        mcopy -s -i "$dev" "$T/orig/$fs/big" "$T/orig/$fs/dir" ::/
    else
        mount "$dev" "$T/mnt"
        cp "$T/junk" "$T/mnt/junk"
        sync
        rm "$T/mnt/junk"
        sync
        cp -a "$T/orig/$fs/." "$T/mnt/"
        umount "$T/mnt"
    fi
    rm -f "$T/junk"
    detach_loop "$dev"
done
sync

bv init "$T/repo" --encryption=none >/dev/null
bv backup "$T/repo" "$T/disk.img" --name=whole --json -q >"$T/whole.json"
bv init "$T/repo2" --encryption=none >/dev/null # nothing to dedup against: what it stores is its own
bv backup "$T/repo2" "$T/disk.img" --name=used --used-only --json >"$T/used.json" 2>"$T/used.err"
[ ! -s "$T/used.err" ] || { cat "$T/used.err" >&2; die "--used-only complained"; }
assert_eq "$(json_get "$T/used.json" '[(p["number"], p.get("fstype"), p.get("reader"), p.get("read_whole_because")) for p in d["used_only"]["partitions"]]')" \
    "[(1, 'xfs', 'partclone.xfs', None), (2, 'btrfs', 'partclone.btrfs', None), (3, 'vfat', 'partclone.fat', None), (4, 'ntfs', 'partclone.ntfs', None)]"
whole_read=$(json_get "$T/whole.json" 'd["stats"]["bytes_read"]')
read=$(json_get "$T/used.json" 'd["stats"]["bytes_read"]')
used=$(json_get "$T/used.json" 'sum(p["bytes_used"] for p in d["used_only"]["partitions"])')
unknown=$(json_get "$T/used.json" 'sum(p["bytes_unknown"] for p in d["used_only"]["partitions"])')
stored=$(json_get "$T/used.json" 'd["stats"]["bytes_stored"]')
echo "whole: read $whole_read, stored $(json_get "$T/whole.json" 'd["stats"]["bytes_stored"]');" \
     "--used-only: read $read, stored $stored; in use $used, unknown $unknown"
echo "$(json_get "$T/used.json" '"; ".join("p%d %s: used %d, free skipped %d" % (p["number"], p["fstype"], p["bytes_used"], p["bytes_free_skipped"]) for p in d["used_only"]["partitions"])')"
[ "$read" -le $(( used * 12 / 10 + unknown + 2 * MIB )) ] || die "--used-only read $read bytes for $used in use"
[ "$whole_read" -ge $((read + 350 * MIB)) ] || die "a whole read ($whole_read) is not much more than --used-only ($read)"
[ "$stored" -le $((4 * 9 * MIB + 4 * MIB)) ] || die "--used-only stored $stored bytes for ~36 MiB of files"

# restored: each filesystem's check passes, the files are the same
bv restore "$T/repo2" used "$T/restored.img" >/dev/null
for n in 1 2 3 4; do
    fs=${fss[n - 1]}
    part dev "$n" "$T/restored.img"
    case $fs in
    xfs) xfs_repair -n "$dev" >"$T/fsck.out" 2>&1 ;;
    btrfs) btrfs check --readonly "$dev" >"$T/fsck.out" 2>&1 ;;
    vfat) fsck.vfat -n "$dev" >"$T/fsck.out" 2>&1 ;;
    ntfs) ntfsfix -n "$dev" >"$T/fsck.out" 2>&1 ;;
    esac || { cat "$T/fsck.out" >&2; die "the restored $fs does not pass its check"; }
    if [ "$fs" = vfat ]; then
        rm -rf "$T/got" && mkdir "$T/got"
        mcopy -s -n -i "$dev" ::/big ::/dir "$T/got/"
        diff -r "$T/orig/$fs" "$T/got" || die "restored $fs files differ"
    else
        mount -o ro "$dev" "$T/mnt"
        diff -r "$T/orig/$fs" "$T/mnt" -x lost+found || { umount "$T/mnt"; die "restored $fs files differ"; }
        umount "$T/mnt"
    fi
    detach_loop "$dev"
done

# an XFS copied while mounted: its log needs recovery, so it is read whole
truncate -s 400M "$T/xfs.img"
attach_loop dev "$T/xfs.img"
mkfs.xfs -q "$dev"
mount "$dev" "$T/mnt"
on_exit "umount -l '$T/mnt'"
randfile "$T/mnt/f" 16 xfs-live
sync
randfile "$T/mnt/g" 4 xfs-live-2
xfs_io -c fsync "$T/mnt/g"
cp --sparse=always "$T/xfs.img" "$T/xfs-live.img"
umount "$T/mnt"
bv backup "$T/repo" "$T/xfs-live.img" --used-only --json >"$T/live.json" 2>/dev/null
assert_eq "$(json_get "$T/live.json" 'd["used_only"]["partitions"][0]["read_whole_because"]')" \
    "its log needs recovery (not cleanly unmounted, or mounted)"
[ "$(json_get "$T/live.json" 'd["stats"]["bytes_read"]')" -ge $((20 * MIB)) ] || die "the live XFS copy was not read whole"
