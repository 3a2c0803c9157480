#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""bench/compress-policy.py CSV...: what a choice of compression per group would cost and store,
from the rows of bench/compress-groups (one CSV per image; its settings must include "3", the
reference, and those --compression=auto uses: "3/h16/c15", "2/h15/c15", "1").

For each CSV: zstd's CPU time and the compressed size of
  - every group at each measured setting;
  - --compression=auto's entropy bands (src/lib/codec/compress.h), on the sample's entropy;
  - the oracle: each group at the setting (or raw) that minimises cpu + LAMBDA * bytes, for a
    range of LAMBDA: what any estimator could reach at best with these settings, i.e. the
    frontier of CPU time against repository size that no choice per group can cross.
Sizes are relative to level 3 on every group, times to its CPU time. The per-group times are
thread CPU times measured one after the other, so a busy machine moves them all alike."""
import csv
import sys

AUTO = [(7.9, None), (7.0, "2/h15/c15"), (5.5, "3/h16/c15"), (0.0, "1")]  # None: raw


def stored(r, s):
    raw = int(r["raw"])
    return raw if s is None else min(int(r["z" + s]), raw)


def took(r, s):
    return 0 if s is None else int(r["t" + s])


def auto_setting(r):
    e = float(r["entropy"])
    return next(s for lo, s in AUTO if e >= lo)


def line(name, size, t, ref):
    print(f"  {name:28s} size {size / 2**20:9.2f} MiB ({(size / ref[0] - 1) * 100:+6.2f}%)  "
          f"zstd cpu {t / 1e9:7.3f} s ({t / ref[1] * 100:5.1f}% of level 3)")


def main():
    for path in sys.argv[1:]:
        rows = [r for r in csv.DictReader(open(path)) if r.get("t_sample")]
        settings = [k[1:] for k in rows[0] if k.startswith("t") and k[1:2] in "-0123456789"]
        ref = (sum(stored(r, "3") for r in rows), sum(took(r, "3") for r in rows))
        print(f"{path}: {len(rows)} groups, {sum(int(r['raw']) for r in rows) / 2**20:.1f} MiB")
        for s in settings:
            line(f"all at {s}", sum(stored(r, s) for r in rows), sum(took(r, s) for r in rows), ref)
        if all(s in settings for _, s in AUTO if s):
            line("auto (entropy bands)", sum(stored(r, auto_setting(r)) for r in rows),
                 sum(took(r, auto_setting(r)) for r in rows), ref)
        for lam in (30, 50, 100, 200, 300):  # ns of CPU worth one byte less stored
            size = t = 0
            for r in rows:
                best = min([None] + settings, key=lambda s: took(r, s) + lam * stored(r, s))
                size += stored(r, best)
                t += took(r, best)
            line(f"oracle, a byte = {lam} ns", size, t, ref)


if __name__ == "__main__":
    sys.exit(main())
