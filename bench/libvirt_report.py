#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The report of bench/libvirt-backup.sh: libvirt_report.py ROWS.tsv OUT.md KEY=VALUE...

ROWS has one line per measured step (round, tool, step, cache, wall_s, cpu_s, qemu_cpu_s,
qemu_read_b, qemu_disk_read_b, tool_read_b, size_b, load1). Appends to OUT.md: the settings
(KEY=VALUE lines), a table of medians over the rounds per tool, step and cache, the ratios of one
round (blkvault against virtnbdbackup, incremental against whole read) and the goals."""
import csv
import statistics
import sys

MIB = 1048576


def med(rows, key):
    return statistics.median(float(r[key]) for r in rows)


def main():
    rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
    out = open(sys.argv[2], "a")
    notes = dict(a.split("=", 1) for a in sys.argv[3:])
    w = out.write
    for k in ("image", "rewrite", "blkvault", "virtnbdbackup"):
        w(f"- {k}: {notes.get(k, '')}\n")
    w("- settings: blkvault encrypted (AES-256-GCM), zstd 3, one thread per CPU; virtnbdbackup "
      "1 worker per disk, its stream format, no compression (-z is lz4), nothing encrypted\n")
    w("- columns: medians over the rounds; *qemu read* is what QEMU read from the image for the "
      "backup (/proc/PID/io rchar), *disk read* the part of it that came from the disk "
      "(read_bytes), *tool read* what the tool says it read (blkvault bytes_read; virtnbdbackup "
      "the size of its new data files), *dirty* what the checkpoint's bitmap counted after the "
      "rewrite (`virsh checkpoint-dumpxml --size`), *size* the repository or output directory after the "
      "step; *load* the 1-min load average when the step ended\n\n")
    groups = {}
    for r in rows:
        groups.setdefault((r["tool"], r["step"], r["cache"]), []).append(r)
    w("| tool | step | cache | rounds | wall s | CPU s | QEMU CPU s | qemu read MiB | disk read MiB "
      "| tool read MiB | dirty MiB | size MiB | load |\n")
    w("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    for (tool, step, cache), g in groups.items():
        w(f"| {tool} | {step} | {cache} | {len(g)} | {med(g, 'wall_s'):.2f} | {med(g, 'cpu_s'):.2f} "
          f"| {med(g, 'qemu_cpu_s'):.2f} | {med(g, 'qemu_read_b') / MIB:.1f} "
          f"| {med(g, 'qemu_disk_read_b') / MIB:.1f} | {med(g, 'tool_read_b') / MIB:.1f} "
          f"| {med(g, 'dirty_b') / MIB:.1f} "
          f"| {med(g, 'size_b') / MIB:.1f} | {med(g, 'load1'):.2f} |\n")

    def one(tool, step, cache, rnd):
        for r in rows:
            if (r["tool"], r["step"], r["cache"], r["round"]) == (tool, step, cache, rnd):
                return r
        return None

    w("\nRatios within each round (the same domain, the same rewrite offsets):\n\n")
    w("| round | bv inc / bv whole read: tool read | qemu read | wall | vnb inc / bv inc: wall "
      "| CPU (tool + QEMU) | qemu read | vnb full / bv whole read (cold): wall |\n")
    w("|---|---|---|---|---|---|---|---|\n")
    inc_read, inc_speed = [], []
    for rnd in sorted({r["round"] for r in rows}, key=int):
        bi, bw = one("blkvault", "incremental", "cold", rnd), one("blkvault", "whole read", "cold", rnd)
        vi, vf = one("virtnbdbackup", "incremental", "cold", rnd), one("virtnbdbackup", "full", "cold", rnd)
        cells = [rnd]
        if bi and bw:
            rr = float(bi["tool_read_b"]) / max(float(bw["tool_read_b"]), 1)
            inc_read.append(rr)
            cells += [f"{rr:.3f}", f"{float(bi['qemu_read_b']) / max(float(bw['qemu_read_b']), 1):.3f}",
                      f"{float(bi['wall_s']) / float(bw['wall_s']):.3f}"]
        else:
            cells += ["-"] * 3
        if bi and vi:
            sp = float(vi["wall_s"]) / float(bi["wall_s"])
            inc_speed.append(sp)
            cpu = lambda r: float(r["cpu_s"]) + float(r["qemu_cpu_s"])  # noqa: E731
            cells += [f"{sp:.2f}", f"{cpu(vi) / max(cpu(bi), 0.01):.2f}",
                      f"{float(vi['qemu_read_b']) / max(float(bi['qemu_read_b']), 1):.2f}"]
        else:
            cells += ["-"] * 3
        cells.append(f"{float(vf['wall_s']) / float(bw['wall_s']):.2f}" if vf and bw else "-")
        w("| " + " | ".join(cells) + " |\n")
    w("\n")
    if inc_read:
        m = statistics.median(inc_read)
        w(f"- goal the incremental reads under a tenth of a whole read (bytes read, median {m:.3f}): "
          f"**{'met' if m < 0.1 else 'MISSED'}**\n")
    if inc_speed:
        m = statistics.median(inc_speed)
        w(f"- goal the incremental at least 2x faster than virtnbdbackup's (wall, median {m:.2f}x): "
          f"**{'met' if m >= 2 else 'MISSED'}**\n")
    w("- the guest freeze: this domain has no guest agent (no OS); the hold time is measured by "
      "tests/libvirt's qemu-guest-agent guest (issue 24)\n")
    w(f"- {notes.get('load_end', '')} at end\n")


if __name__ == "__main__":
    main()
