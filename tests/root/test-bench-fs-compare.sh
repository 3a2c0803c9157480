#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# bench/fs-compare --quick --yes runs end to end and writes well-formed results (never the
# timings): a CSV and a Markdown table with a row for each of ext4, XFS and btrfs, plain (on a loop
# device here) and inside LUKS2 (in the real-kernel guest when this kernel has no device-mapper),
# every row's restore bit-exact, and a PNG chart. Also the usage errors, and that a named device
# is left alone unless --yes.
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd losetup mkfs.ext4 mkfs.xfs mkfs.btrfs cryptsetup
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null || skip "python3-matplotlib is not installed"
fsc=$SOURCE_ROOT/bench/fs-compare
export BLKVAULT

expect_fail 2 "error: unknown filesystem 'zfs' (ext4, xfs or btrfs)" "$fsc" --fs ext4,zfs --work "$T/w"
expect_fail 2 "error: '$T/nosuch' does not exist" "$fsc" --device "$T/nosuch" --work "$T/w"
# a named device is destroyed only when confirmed: without a terminal, only with --yes
truncate -s 64M "$T/dev.img"
attach_loop loop "$T/dev.img"
randfile "$T/data" 1 fsc
dd if="$T/data" of="$loop" bs=1M conv=fsync status=none
expect_fail 2 "error: bench/fs-compare formats '$loop' several times, destroying what is on it: pass --yes" \
    "$fsc" --device "$loop" --work "$T/w" </dev/null
cmp -n 1048576 "$T/data" "$loop" || die "the device was written without --yes"

out=$T/out
"$fsc" --quick --yes --out "$out" --work "$T/work" >"$T/run.log" 2>&1 || { tail -30 "$T/run.log"; die "bench/fs-compare --quick failed"; }

csv=$out/fs-compare.csv
assert_eq "$(head -1 "$csv")" "fs,luks,where,format_s,backup_v1_s,backup_v2_s,backup_v3_s,restore_s,verify_s,prune_gc_s,fs_used_mib,repo_mib,repo_files,bitexact,status" "CSV header"
/usr/bin/python3 - "$csv" "$out/fs-compare.md" <<'PY' || die "results not well-formed"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
got = sorted((r["fs"], r["luks"]) for r in rows)
want = sorted((fs, luks) for fs in ("ext4", "xfs", "btrfs") for luks in ("no", "yes"))
assert got == want, got
for r in rows:
    assert r["status"] == "ok" and r["bitexact"] == "yes", r
    for k in ("format_s", "backup_v1_s", "backup_v2_s", "backup_v3_s", "restore_s", "verify_s", "repo_mib"):
        assert float(r[k]) > 0, (k, r)
    assert int(r["repo_files"]) > 0, r
    assert r["where"] == "host" or r["luks"] == "yes", r
# the Markdown table: a header, its rule and six rows, every one with the header's 14 cells
table = [l for l in open(sys.argv[2]).read().splitlines() if l.startswith("|")]
assert len(table) == 8, table
assert all(l.count("|") == 15 for l in table), table
assert table[0].startswith("| filesystem | LUKS2 | where | format (s) | backup v1 (s)"), table[0]
PY
head -c 8 "$out/fs-compare.png" | od -An -tx1 | grep_q "89 50 4e 47 0d 0a 1a 0a" || die "fs-compare.png is not a PNG"
echo "ok: bench/fs-compare --quick: $(wc -l <"$csv") lines in the CSV"
