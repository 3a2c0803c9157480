#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# bench/peers --quick runs end to end and writes well-formed results (never the timings): a CSV
# with one row per tool and case, a Markdown report whose tables are rectangular, and PNG charts.
# Peers from the Go module proxy and PyPI are looked up in an empty cache, so they must be
# reported as "not installed" (never dropped); the Debian peers install-deps.sh installs run.
# Also the usage errors.
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd sfdisk losetup partx mkfs.ext4 mkfs.xfs mkfs.btrfs openssl borg restic
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null || skip "python3-matplotlib is not installed"

peers=$SOURCE_ROOT/bench/peers
export PEERS_CACHE=$T/cache BLKVAULT

expect_fail 2 "error: unknown tool 'nosuch' (known: blkvault, borg, borg2, restic, restic-debian, kopia, desync, casync)" "$peers" --work "$T/work" --tools blkvault,nosuch
expect_fail 2 'error: --reps must be at least 1' "$peers" --work "$T/work" --reps 0
mkdir -p "$T/empty"
expect_fail 1 "error: $T/empty lacks v1.img, v2.img, v3.img, sparse.img" "$peers" --work "$T/work" --images "$T/empty"

out=$T/out
"$peers" --quick --work "$T/work" --out "$out" \
    --tools blkvault,borg,restic-debian,restic,kopia >"$T/run.log" 2>&1 || { tail -30 "$T/run.log"; die "bench/peers --quick failed"; }

# CSV: the header, 13 cases for each of the 5 tools and blkvault's row of the disk's write speed;
# installed tools ok on every backup
csv=$out/peers.csv
assert_eq "$(head -1 "$csv")" "tool,version,case,status,reps,wall_s,sync_s,cpu_s,user_s,sys_s,max_rss_mib,written_mib,read_mib,repo_mib,growth_mib,restored_alloc_mib,bitexact,dedup_pct" "CSV header"
assert_eq "$(( $(wc -l <"$csv") - 1 ))" 66 "CSV rows"
/usr/bin/python3 - "$csv" <<'PY' || die "CSV content"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
for r in rows:
    assert len(r) == 18 and None not in r.values(), r
    if r["tool"] in ("restic", "kopia"):
        assert r["status"].startswith("not installed: not in "), r
        continue
    if r["case"].startswith("backup") or r["case"].startswith("dedup"):
        assert r["status"] == "ok", r
    if r["status"] == "ok" and r["case"].startswith(("backup", "restore", "sparse")):
        assert float(r["wall_s"]) > 0 and float(r["cpu_s"]) >= 0 and float(r["max_rss_mib"]) > 0, r
    if r["status"] == "ok" and r["case"].startswith("restore"):
        assert r["bitexact"] == "yes", r
    if r["case"].startswith("disk write"):
        assert r["tool"] == "blkvault" and r["status"] == "ok" and float(r["wall_s"]) > 0, r
    if r["status"] == "ok" and r["case"].startswith("dedup"):
        assert -50 < float(r["dedup_pct"]) <= 100, r
for t in ("blkvault", "borg", "restic-debian"):
    assert [r for r in rows if r["tool"] == t and r["case"] == "backup v2 cold"][0]["repo_mib"], t
n_a = {(r["tool"], r["case"]): r["status"] for r in rows if r["status"].startswith("n/a")}
assert n_a == {("blkvault", "restore v3 plain"): "n/a: always sparse",
               ("restic-debian", "restore v3 sparse"): "n/a: no sparse mode"}, n_a
PY

# Markdown: every table rectangular; the machine line, every tool named, missing ones with why
md=$out/peers.md
grep -q '^- machine: .*cores, .* RAM, kernel ' "$md" || die "no machine line"
awk '/^\|/ { n = gsub(/\|/, "|"); if (!inside) { want = n; inside = 1 } else if (n != want) { print NR": "$0; bad = 1 } }
     !/^\|/ { inside = 0 } END { exit bad }' "$md" || die "a Markdown table is not rectangular"
assert_eq "$(grep -c '^| ---|' "$md" || true)" 0 "separator rows start with |---|"
for t in blkvault borg restic-debian; do
    grep -q "^| $t | " "$md" || die "$t missing from the tables"
done
assert_eq "$(grep -c '^| kopia | .*not installed: not in ' "$md")" 2 "kopia reported in the tool and summary tables"
grep -q "^- goal restore within 10% of the disk's write speed (dd of the same bytes, conv=fsync) (measured [0-9.]*x): \*\*\(met\|MISSED\)\*\*$" "$md" ||
    die "no goal line for the restore against the disk's write speed"

# charts: PNG files with their signature
for p in backup-time restore-time repo-size peak-memory cpu-time dedup; do
    [ "$(head -c 8 "$out/$p.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || die "$p.png is not a PNG"
done
echo "ok"
