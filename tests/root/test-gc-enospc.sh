#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# ENOSPC during gc: the repository lives on a small loop-device filesystem; gc has to copy the
# live half of a pack and write a new index. With the free space cut to 0.25 .. 12 MiB gc fails
# at one step or another (exit 6, the target is full, nothing lost) or completes; after every
# attempt the snapshot verifies (reading every chunk) and restores bit-exact, and once space is
# freed gc completes.
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd mkfs.ext4 openssl fallocate

mount_small_fs "$T/mnt" 64M

repo=$T/mnt/repo
bv init "$repo" --encryption=none --compression=none >/dev/null
randfile "$T/x" 8 enospc-x
randfile "$T/y" 8 enospc-y
randfile "$T/z" 1 enospc-z
cat "$T/x" "$T/y" >"$T/d"
cat "$T/x" "$T/z" >"$T/e"
bv backup "$repo" "$T/d" --name=d -q
bv backup "$repo" "$T/e" --name=e -q
bv delete "$repo" d 2>/dev/null   # the first pack is now half unused: gc must copy X out of it

check() {
    bv verify "$repo" --read-data >/dev/null 2>"$T/verify.err" || { cat "$T/verify.err"; die "verify ($1)"; }
    bv restore "$repo" e "$T/e.out" 2>/dev/null || die "restore ($1)"
    assert_same "$T/e" "$T/e.out"
    rm -f "$T/e.out"
}
failed=0
for kib in 256 512 1024 2048 4096 6144 8192 12288; do
    rm -f "$T/mnt/filler"
    sync
    avail=$(df --output=avail -B1 "$T/mnt" | tail -n1)
    [ "$avail" -le $((kib << 10)) ] || fallocate -l $((avail - (kib << 10))) "$T/mnt/filler"
    rc=0
    bv gc "$repo" >"$T/gc.out" 2>"$T/gc.err" || rc=$?
    if [ $rc != 0 ]; then
        assert_eq "$rc" 6 "gc's exit status with $kib KiB free"
        grep -qx "error: cannot collect garbage in '$repo' (nothing was lost): No space left on device" "$T/gc.err" ||
            { cat "$T/gc.err"; die "gc's message with $kib KiB free"; }
        failed=$((failed + 1))
    fi
    check "$kib KiB free"
done
[ $failed -gt 0 ] || die "gc never met a full filesystem"
rm -f "$T/mnt/filler"
bv gc "$repo" >/dev/null
bv gc "$repo" >"$T/gc.out"
grep -qx "deleted 0 packs, 0 B" "$T/gc.out" || { cat "$T/gc.out"; die "garbage left after space was freed"; }
[ "$(find "$repo/packs" -name '*.pack' | wc -l)" = 2 ] || die "packs: $(find "$repo/packs" -name '*.pack')"
check "after space was freed"
