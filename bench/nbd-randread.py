#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Random 4 KiB reads with per-read latency: nbd-randread.py TARGET OFFSETS_FILE [--verify IMAGE]

TARGET is an NBD URI (read with libnbd) or a file (a FUSE view such as borg/restic mount).
OFFSETS_FILE holds one byte offset per line (make it with --make-offsets IMAGE N SEED, which
picks 4 KiB-aligned offsets inside the image's data extents, so no tool is timed on holes).
Prints one JSON object: reads, p50/p99/mean latency in microseconds, MiB/s."""
import json, os, random, sys, time

from data_extents import data_extents

BS = 4096

def make_offsets(image, n, seed):
    extents = data_extents(image)
    total = sum(e - s for s, e in extents)
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k = rng.randrange(total // BS) * BS
        for s, e in extents:
            if k < e - s:
                out.append((s + k) // BS * BS)
                break
            k -= e - s
    return out

def main():
    if sys.argv[1] == "--make-offsets":
        for o in make_offsets(sys.argv[2], int(sys.argv[3]), sys.argv[4]):
            print(o)
        return
    target, offsets = sys.argv[1], [int(l) for l in open(sys.argv[2])]
    verify = open(sys.argv[4], "rb") if len(sys.argv) > 4 and sys.argv[3] == "--verify" else None
    if target.startswith("nbd"):
        import nbd
        h = nbd.NBD()
        h.connect_uri(target)
        read = lambda off: h.pread(BS, off)
    else:
        fd = os.open(target, os.O_RDONLY)
        read = lambda off: os.pread(fd, BS, off)
    lat = []
    t0 = time.perf_counter()
    for off in offsets:
        t = time.perf_counter()
        buf = read(off)
        lat.append(time.perf_counter() - t)
        if verify:
            verify.seek(off)
            assert verify.read(BS) == buf, "wrong data at %d" % off
    wall = time.perf_counter() - t0
    lat.sort()
    pct = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1e6
    print(json.dumps({"reads": len(lat), "p50_us": round(pct(0.50), 1), "p99_us": round(pct(0.99), 1),
                      "mean_us": round(sum(lat) / len(lat) * 1e6, 1),
                      "mib_s": round(len(lat) * BS / wall / 1048576, 2)}))

main()
