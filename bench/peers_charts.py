# SPDX-License-Identifier: LGPL-2.1-or-later
"""PNG charts of bench/peers results (matplotlib, Debian python3-matplotlib): horizontal grouped
bars, one group per tool, labelled axes with units, a legend outside the bars."""
import os

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = ["#1f77b4", "#6baed6", "#c6dbef", "#d62728", "#fc9272", "#fcbba1", "#fee5d9"]


def bars(path, title, xlabel, tools, series, missing, meta):
    """series: list of (label, {tool: value or None}); tools in top-to-bottom order."""
    n, k = len(tools), len(series)
    h = 0.8 / k
    fig, ax = plt.subplots(figsize=(9, 1.0 + 0.32 * n * k + 0.6))
    for i, (label, vals) in enumerate(series):
        ys = [j + (i - (k - 1) / 2) * h for j in range(n)]
        xs = [vals.get(t) or 0 for t in tools]
        ax.barh(ys, xs, height=h * 0.95, label=label, color=COLORS[i % len(COLORS)], edgecolor="#444",
                linewidth=0.4)
        top = max([v for v in xs if v] or [1])
        for y, x, t in zip(ys, xs, tools):
            txt = "n/a" if vals.get(t) is None else (f"{x:.1f}" if x < 100 else f"{x:.0f}")
            ax.text(x + top * 0.01, y, txt, va="center", fontsize=7)
    ax.set_yticks(range(n))
    ax.set_yticklabels(tools)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=11)
    ax.margins(x=0.12)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    note = f"{meta['date']}; {meta['machine']['cores']} cores, {meta['machine']['cpu']}"
    if missing:
        note += "; not installed: " + ", ".join(missing)
    fig.text(0.01, 0.005, note, fontsize=6.5, color="#555")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=100)
    plt.close(fig)


def val(agg, tool, case, key):
    a = agg.get((tool, case))
    if not a or a["status"] != "ok":
        return None
    return a.get(key)


def draw(out, tools, missing, agg, meta):
    def s(label, case, key):
        return (label, {t: val(agg, t, case, key) for t in tools})
    bars(os.path.join(out, "backup-time.png"), "Backup of the image series: wall time (lower is better)",
         "seconds (wall, including sync)", tools,
         [s(f"v{v} {k}", f"backup v{v} {k}", "wall_s") for k in ("cold", "warm") for v in (1, 2, 3)]
         + [s("v3 again (unchanged) warm", "backup v3 again warm", "wall_s")],
         missing, meta)
    bars(os.path.join(out, "restore-time.png"), "Restore of v3 and of the sparse image: wall time (lower is better)",
         "seconds (wall, including sync)", tools,
         [s("v3 plain", "restore v3 plain", "wall_s"), s("v3 sparse", "restore v3 sparse", "wall_s"),
          s("sparse image", "sparse image restore", "wall_s")], missing, meta)
    bars(os.path.join(out, "repo-size.png"), "Repository size after each version (lower is better)",
         "MiB (du -sb)", tools,
         [s(f"after v{v}", f"backup v{v} cold", "repo_mib") for v in (1, 2, 3)], missing, meta)
    bars(os.path.join(out, "peak-memory.png"), "Peak memory (largest process) per step (lower is better)",
         "MiB (max RSS)", tools,
         [s("backup v1 cold", "backup v1 cold", "max_rss_mib"), s("backup v2 cold", "backup v2 cold", "max_rss_mib"),
          s("restore v3 sparse", "restore v3 sparse", "max_rss_mib"),
          s("restore v3 plain", "restore v3 plain", "max_rss_mib")], missing, meta)
    bars(os.path.join(out, "cpu-time.png"), "CPU time (user + sys) per step (lower is better)",
         "CPU seconds", tools,
         [s("backup v1 cold", "backup v1 cold", "cpu_s"), s("backup v2 cold", "backup v2 cold", "cpu_s"),
          s("backup v3 cold", "backup v3 cold", "cpu_s"), s("restore v3 sparse", "restore v3 sparse", "cpu_s")],
         missing, meta)
    bars(os.path.join(out, "dedup.png"), "HashBackup dedup tests (higher is better)", "dedup % of the second backup",
         tools, [s("(a) 16 x 8 MiB, then concat", "dedup (a) 16 x 8 MiB, then concat", "dedup_pct"),
                 s("(b) concat, then 101 x 1 MiB", "dedup (b) concat, then 101 x 1 MiB", "dedup_pct")],
         missing, meta)
