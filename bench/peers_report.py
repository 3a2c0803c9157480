# SPDX-License-Identifier: LGPL-2.1-or-later
"""bench/peers output: peers.csv (one row per tool and case), peers.md (machine, versions,
summary and full tables) and PNG charts. Repetitions are reduced to their median."""
import csv
import os
import statistics

# the disk's own write speed for the bytes of a restore (dd conv=fsync), on blkvault's rows only
DISK_WRITE = "disk write of the restored bytes (dd, fsync)"
CASES = ["backup v1 cold", "backup v2 cold", "backup v3 cold", "restore v3 plain", "restore v3 sparse", DISK_WRITE,
         "backup v1 warm", "backup v2 warm", "backup v3 warm", "backup v3 again warm", "sparse image backup",
         "sparse image restore", "dedup (a) 16 x 8 MiB, then concat", "dedup (b) concat, then 101 x 1 MiB"]
CSV_COLUMNS = ["tool", "version", "case", "status", "reps", "wall_s", "sync_s", "cpu_s", "user_s", "sys_s",
               "max_rss_mib", "written_mib", "read_mib", "repo_mib", "growth_mib",
               "restored_alloc_mib", "bitexact", "dedup_pct"]
MIB = 1048576.0


def aggregate(rows, tool, case):
    """Median over repetitions of the ok rows; else the first row's status."""
    rs = [r for r in rows if r["tool"] == tool and r["case"] == case]
    ok = [r for r in rs if r["status"] == "ok"]
    if not ok:
        return {"status": rs[0]["status"] if rs else "not run"}
    def med(k, scale=1.0):
        vals = [r[k] / scale for r in ok if k in r]
        return statistics.median(vals) if vals else None
    return {"status": "ok", "reps": len(ok), "wall_s": med("wall_s"), "sync_s": med("sync_s"), "cpu_s": med("cpu_s"),
            "user_s": med("user_s"), "sys_s": med("sys_s"), "max_rss_mib": med("rss_kib", 1024.0),
            "written_mib": med("written", MIB), "read_mib": med("read", MIB),
            "repo_mib": med("repo", MIB), "growth_mib": med("growth", MIB),
            "restored_alloc_mib": med("alloc", MIB),
            "bitexact": ",".join(sorted({r["bitexact"] for r in ok if "bitexact" in r})) or None,
            "dedup_pct": med("dedup_pct")}


def fmt(v, digits=1):
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    return f"{v:.{digits}f}"


def table(lines, header, rows):
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    for r in rows:
        lines.append("| " + " | ".join(c.replace("|", "/") for c in r) + " |")
    lines.append("")


def write(out, names, missing, rows, meta):
    agg = {(n, c): aggregate(rows, n, c) for n in names if n not in missing for c in CASES}
    write_csv(out, names, missing, agg, meta)
    write_md(out, names, missing, agg, meta)
    try:
        import peers_charts
    except ImportError as e:       # matplotlib missing: say so in the report, keep the tables
        with open(os.path.join(out, "peers.md"), "a") as f:
            f.write(f"\nNo charts: {e} (apt-get install python3-matplotlib)\n")
        return
    peers_charts.draw(out, [n for n in names if n not in missing], missing, agg, meta)


def write_csv(out, names, missing, agg, meta):
    with open(os.path.join(out, "peers.csv"), "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(CSV_COLUMNS)
        for n in names:
            for c in CASES:
                if c == DISK_WRITE and n != "blkvault":
                    continue
                if n in missing:
                    w.writerow([n, "", c, missing[n]] + [""] * (len(CSV_COLUMNS) - 4))
                    continue
                a = agg[n, c]
                row = {"tool": n, "version": meta["versions"].get(n, ""), "case": c}
                row.update(a)
                w.writerow([fmt(row.get(k), 3) if isinstance(row.get(k), float) else
                            ("" if row.get(k) is None else str(row.get(k))) for k in CSV_COLUMNS])


def cell(a, key, digits=1):
    if a["status"] != "ok":
        return a["status"]
    return fmt(a.get(key), digits)


def write_md(out, names, missing, agg, meta):
    m = meta["machine"]
    L = [f"# blkvault and its peers ({meta['date']})", "",
         f"- machine: {m['cpu']}, {m['cores']} cores, {m['ram']} RAM, kernel {m['kernel']}, disk {m['disk']}",
         f"- load average at start {m['load']}, at end {meta['load_end']} (other jobs share this machine: "
         "compare tools within one run)",
         f"- images: {meta['images']}",
         f"- repetitions: {meta['reps']} (median reported){'; --quick run' if meta['quick'] else ''}", "",
         "## Tools", ""]
    trows = []
    for n in names:
        st = missing.get(n, "ok")
        trows.append([n, meta["versions"].get(n, "-"), meta["settings"].get(n, ""), st])
    table(L, ["tool", "version", "settings", "status"], trows)

    L += ["## Summary", "",
          "Seconds of wall time (including a final sync), MiB, and dedup %. Cold: page cache dropped "
          "before the step; warm: the image read into the page cache first. Restores are of v3, "
          "from the cold repository, with the page cache dropped.", ""]
    head = ["tool", "backup v1 cold s", "v1 warm s", "v2 cold s", "v2 warm s", "v3 cold s",
            "v3 warm s", "v3 again (unchanged) warm s", "restore plain s", "restore sparse s", "repo v1 / v2 / v3 MiB",
            "backup v1 peak RSS MiB", "restore peak RSS MiB", "sparse image backup s", "dedup (a) %",
            "dedup (b) %"]
    srows = []
    for n in names:
        if n in missing:
            srows.append([n, missing[n]] + [""] * (len(head) - 2))
            continue
        g = lambda c: agg[n, c]
        rest = g("restore v3 sparse") if g("restore v3 sparse")["status"] == "ok" else g("restore v3 plain")
        repo = " / ".join(cell(g(f"backup v{v} cold"), "repo_mib", 0) for v in (1, 2, 3))
        srows.append([n] + [cell(g(c), "wall_s", 2) for c in
                            ["backup v1 cold", "backup v1 warm", "backup v2 cold", "backup v2 warm",
                             "backup v3 cold", "backup v3 warm", "backup v3 again warm",
                             "restore v3 plain", "restore v3 sparse"]]
                     + [repo, cell(g("backup v1 cold"), "max_rss_mib", 0), cell(rest, "max_rss_mib", 0),
                        cell(g("sparse image backup"), "wall_s", 2),
                        cell(g("dedup (a) 16 x 8 MiB, then concat"), "dedup_pct", 1),
                        cell(g("dedup (b) concat, then 101 x 1 MiB"), "dedup_pct", 1)])
    table(L, head, srows)

    L += ["## Every step", ""]
    head = ["case", "tool", "wall s", "of which sync s", "CPU s (user + sys)", "peak RSS MiB", "written MiB", "read MiB",
            "repository MiB", "repository growth MiB", "restored: allocated MiB, bit-exact", "dedup %"]
    frows = []
    for c in CASES:
        for n in names:
            if c == DISK_WRITE and n != "blkvault":
                continue
            if n in missing:
                frows.append([c, n, missing[n]] + [""] * (len(head) - 3))
                continue
            a = agg[n, c]
            if a["status"] != "ok":
                frows.append([c, n, a["status"]] + [""] * (len(head) - 3))
                continue
            restored = "" if a.get("restored_alloc_mib") is None else \
                f"{fmt(a['restored_alloc_mib'], 0)}, {a['bitexact']}"
            frows.append([c, n, fmt(a["wall_s"], 2), fmt(a.get("sync_s"), 2), f"{fmt(a['cpu_s'], 2)} ({fmt(a['user_s'], 2)} + {fmt(a['sys_s'], 2)})"
                          if a.get("cpu_s") is not None else "", fmt(a.get("max_rss_mib"), 0),
                          fmt(a.get("written_mib"), 0), fmt(a.get("read_mib"), 0), fmt(a.get("repo_mib"), 0),
                          fmt(a.get("growth_mib"), 1), restored, fmt(a.get("dedup_pct"), 1)])
    table(L, head, frows)
    L += goals(agg, names, missing)
    L += ["## Columns", "",
          "- *wall s*: elapsed time of the command plus a final `sync`, so data still dirty in the page "
          "cache counts for every tool alike. *of which sync*: the time of that `sync`, which also "
          "writes back whatever other jobs on the machine left dirty: under load it is noise, not the tool.",
          "- *CPU s*: user + system time of the command's whole process tree (`wait4` rusage).",
          "- *peak RSS MiB*: the largest resident set of any one process of the tree (GNU `time` %M).",
          "- *written MiB* / *read MiB*: the kernel's `write_bytes` / `read_bytes` of the process tree "
          "(`/proc/self/io` of the harness, which includes reaped children): what went to, or came from, "
          "storage, including caches and index files; reads served by the page cache are not counted.",
          "- *repository MiB*: `du -sb` of the repository after the step (for casync and desync the chunk "
          "store plus the index files); *growth*: the change made by this step.",
          "- *dedup %*: HashBackup's tests, `1 - repository growth / input size` of the second backup: "
          "(a) 16 x 8 MiB random files, then their concatenation; (b) the concatenation of 101 x 1 MiB, "
          "then the files. Growth includes per-snapshot metadata, so 100 % is out of reach.",
          "- *restored*: allocated size of the restored image and whether `cmp` found it identical.",
          "- *n/a*: the tool has no such mode; *not installed* / *failed*: with the reason.", ""]
    with open(os.path.join(out, "peers.md"), "w") as f:
        f.write("\n".join(L))


# (text, blkvault case, peer, peer case, key, factor): blkvault's value * factor <= the peer's
GOALS = [("backup v1 cold >= 3x borg's speed", "backup v1 cold", "borg", "backup v1 cold", "wall_s", 3),
         ("restore >= 3x borg's speed", "restore v3 sparse", "borg", "restore v3 sparse", "wall_s", 3),
         ("backup v1 cold >= 3x restic's speed", "backup v1 cold", "restic", "backup v1 cold", "wall_s", 3),
         ("backup v1 warm >= 3x restic's speed", "backup v1 warm", "restic", "backup v1 warm", "wall_s", 3),
         ("backup v2 cold >= 3x restic's speed", "backup v2 cold", "restic", "backup v2 cold", "wall_s", 3),
         ("backup v2 warm >= 3x restic's speed", "backup v2 warm", "restic", "backup v2 warm", "wall_s", 3),
         ("unchanged image (v3 again, warm) at least as fast as restic", "backup v3 again warm", "restic",
          "backup v3 again warm", "wall_s", 1),
         ("restore >= 2x restic's speed (both sparse)", "restore v3 sparse", "restic", "restore v3 sparse", "wall_s", 2),
         ("repository after v3 <= borg's", "backup v3 cold", "borg", "backup v3 cold", "repo_mib", 1),
         ("restore >= 1.4x restic's speed (both sparse)", "restore v3 sparse", "restic", "restore v3 sparse", "wall_s", 1.4),
         # the disk itself as the peer: dd's time / the restore's at least 1/1.1
         ("restore within 10% of the disk's write speed (dd of the same bytes, conv=fsync)", "restore v3 sparse",
          "blkvault", DISK_WRITE, "wall_s", 1 / 1.1)]


def goals(agg, names, missing):
    """The goals of the issues, as "- goal TEXT (measured): met/MISSED" lines (bench/run-all.sh
    collects them)."""
    if "blkvault" not in names:
        return []
    L = ["## Goals", ""]
    for text, bc, peer, pc, key, factor in GOALS:
        if peer not in names or peer in missing:
            continue
        b, p = agg["blkvault", bc], agg[peer, pc]
        if b["status"] != "ok" or p["status"] != "ok" or not b.get(key):
            continue
        ratio = p[key] / b[key]
        ok = ratio >= factor
        L.append(f"- goal {text} (measured {ratio:.2f}x): **{'met' if ok else 'MISSED'}**")
    if len(L) == 2:
        L.append("None measured: every goal compares blkvault with borg or restic (the Go build, "
                 "`restic`), and neither has results here.")
    return L + [""]
