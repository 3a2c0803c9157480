#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# bench/libvirt-backup.sh --quick runs end to end on a running domain and writes well-formed
# results (never the timings): every step of both tools in the TSV, the rewrite counted by the
# checkpoint's bitmap as exactly its pieces, each incremental backup reading less than a whole
# read and at least the rewritten bytes, the Markdown report with its goal lines. Also the usage
# errors. The bench takes the libvirt tests' lock itself (tests/libvirt/libvirt-lib.sh's).
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd virsh libvirtd virtlogd qemu-system-x86_64 qemu-img sfdisk losetup mkfs.xfs mkfs.btrfs
command -v virtnbdbackup >/dev/null || skip "virtnbdbackup is not installed (scripts/install-deps.sh installs it)"

lvb=$SOURCE_ROOT/bench/libvirt-backup.sh
export BLKVAULT BENCH_BUILD=0 BENCH_NODROP=1 BENCH_WORK=$T/work BENCH_OUT=$T/out VIRTNBDBACKUP=$(command -v virtnbdbackup)

expect_fail 2 "error: --reps takes a positive number, not '0'" "$lvb" --reps 0
expect_fail 2 "error: $T/nosuch: no such image" "$lvb" --image "$T/nosuch"
expect_fail 2 "usage: bench/libvirt-backup.sh" "$lvb" --bogus

"$lvb" --quick >"$T/run.log" 2>&1 || { tail -30 "$T/run.log"; die "bench/libvirt-backup.sh --quick failed"; }

tsv=$T/out/libvirt-backup.tsv
assert_eq "$(head -1 "$tsv")" "$(printf 'round\ttool\tstep\tcache\twall_s\tcpu_s\tqemu_cpu_s\tqemu_read_b\tqemu_disk_read_b\ttool_read_b\tsize_b\tload1\tdirty_b')" "TSV header"
# a 512 MiB disk: 1% is 81 pieces of 64 KiB
/usr/bin/python3 - "$tsv" $((81 * 65536)) <<'PY' || die "TSV content"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
dirty = int(sys.argv[2])
steps = sorted((r["tool"], r["step"], r["cache"]) for r in rows)
want = [("virtnbdbackup", "full", "cold"), ("virtnbdbackup", "full", "warm"), ("virtnbdbackup", "incremental", "cold")]
want += [("blkvault", "first backup", "cold"), ("blkvault", "whole read", "cold"),
         ("blkvault", "whole read", "warm"), ("blkvault", "incremental", "cold")]
assert steps == sorted(want), steps
get = {(r["tool"], r["step"], r["cache"]): r for r in rows}
for r in rows:
    assert len(r) == 13 and None not in r.values(), r
    assert float(r["wall_s"]) > 0 and float(r["cpu_s"]) > 0 and int(r["size_b"]) > 0, r
    assert int(r["qemu_read_b"]) > 0 and int(r["tool_read_b"]) > 0, r
for tool, whole in (("virtnbdbackup", "full"), ("blkvault", "whole read")):
    inc, full = get[(tool, "incremental", "cold")], get[(tool, whole, "cold")]
    assert int(inc["dirty_b"]) == dirty, inc
    # the incremental reads the rewritten blocks (at the bitmap's 64 KiB granularity), not more
    assert dirty <= int(inc["tool_read_b"]) < int(full["tool_read_b"]) / 10, (inc, full)
    assert int(inc["qemu_read_b"]) < int(full["qemu_read_b"]) / 10, (inc, full)
PY

md=$T/out/libvirt-backup.md
grep -q '^- virtnbdbackup: 1\.' "$md" || die "no virtnbdbackup version in the report"
grep -q '^| virtnbdbackup | incremental | cold | 1 | ' "$md" || die "no virtnbdbackup incremental row"
grep -q '^| blkvault | incremental | cold | 1 | ' "$md" || die "no blkvault incremental row"
grep -q '^- blkvault: its ' "$md" || die "the report does not say how blkvault read the domain"
grep -q '^- goal the incremental reads under a tenth of a whole read' "$md" || die "no read goal"
grep -q "^- goal the incremental at least 2x faster than virtnbdbackup's" "$md" || die "no speed goal"
# the domain, its image and its checkpoints are gone (read from libvirt's files: the lock is released)
dom=$(sed -n 's/.*domain \(bvb-[0-9]*\) running.*/\1/p' "$T/run.log")
[ -n "$dom" ] || die "the run log names no domain"
for f in /etc/libvirt/qemu/$dom.xml /run/libvirt/qemu/$dom.xml /var/lib/libvirt/images/$dom /var/lib/libvirt/qemu/checkpoint/$dom; do
    [ ! -e "$f" ] || die "$f was left behind"
done
echo "ok"
