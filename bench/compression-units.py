#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""How the unit of compression decides repository size, on a real image.

Usage: bench/compression-units.py IMAGE CHUNK_CUTS [WORKDIR]
  IMAGE       a raw disk image (images/make-image.sh)
  CHUNK_CUTS  the chunk-cuts program (build-*/bench/chunk-cuts; ninja bench/chunk-cuts)

The image's data blocks (all-zero 4 KiB blocks and holes dropped, as a backup drops them) are
written to WORKDIR/compact.img. Every unique chunk is compressed alone with zstd level 3 through
borg's own compressor (so both tools are measured with one compressor), and the totals are
printed for: fixed units, blkvault's hybrid chunks, borg's buzhash 14,18,16 chunks, and hybrid
chunks compressed in groups of consecutive new chunks up to a size cap.
"""
import hashlib
import io
import os
import subprocess
import sys

from data_extents import data_extents

sys.path.insert(0, "/usr/lib/python3/dist-packages")
try:
    from borg.compress import ZSTD
    from borg.chunker import Chunker
except ImportError:
    sys.exit("needs borgbackup (apt-get install borgbackup): its zstd and buzhash chunker are the reference")

BLOCK = 4096
ZERO = bytes(BLOCK)
zstd = ZSTD(level=3)


def compressed(data):
    return len(zstd.compress(data)) - 2  # borg's 2-byte compression header


def compact(image, out):
    parts = []
    fd = os.open(image, os.O_RDONLY)
    for start, end in data_extents(image):
        pos = start
        while pos < end:
            buf = os.pread(fd, min(1 << 20, end - pos), pos)
            parts.extend(buf[i:i + BLOCK] for i in range(0, len(buf), BLOCK) if buf[i:i + BLOCK] != ZERO)
            pos += len(buf)
    os.close(fd)
    data = b"".join(parts)
    with open(out, "wb") as f:
        f.write(data)
    return data


def unique(data, cuts):
    seen, out = set(), []
    for off, n in cuts:
        h = hashlib.sha256(data[off:off + n]).digest()
        if h not in seen:
            seen.add(h)
            out.append((off, n))
    return out


def percentiles(sizes):
    s = sorted(sizes)
    return "/".join("%.0fK" % (s[len(s) * q // 10] / 1024) for q in (1, 5, 9))


def grouped(data, chunks, cap):
    total, group, length = 0, [], 0
    for off, n in chunks + [(None, None)]:
        if group and (off is None or length + n > cap):
            total += compressed(b"".join(data[o:o + m] for o, m in group))
            group, length = [], 0
        if off is not None:
            group.append((off, n))
            length += n
    return total


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    image, cutter = sys.argv[1], sys.argv[2]
    work = sys.argv[3] if len(sys.argv) == 4 else "."
    path = os.path.join(work, "compact.img")
    data = compact(image, path)
    mb = lambda b: "%.2f MB" % (b / 1e6)
    print("%s: %.1f MiB of data blocks\n" % (image, len(data) / 2**20))
    print("| units | objects | unique plaintext | zstd 3, each alone | sizes p10/p50/p90 |")
    print("|---|---|---|---|---|")
    for unit in (64 << 10, 128 << 10, 256 << 10, 1 << 20):
        cuts = [(o, min(unit, len(data) - o)) for o in range(0, len(data), unit)]
        print("| fixed %dK (no dedup) | %d | %s | %s | - |" % (unit >> 10, len(cuts), mb(len(data)),
                                                            mb(sum(compressed(data[o:o + n]) for o, n in cuts))))
    out = subprocess.run([cutter, path], check=True, capture_output=True, text=True).stdout
    hybrid = unique(data, [tuple(map(int, l.split())) for l in out.splitlines()])
    borg, off = [], 0
    for c in Chunker(0, 14, 18, 16, 4095).chunkify(io.BytesIO(data)):
        borg.append((off, len(c.data)))
        off += len(c.data)
    borg = unique(data, borg)
    for name, chunks in (("blkvault hybrid 16K:64K:256K", hybrid), ("borg buzhash 14,18,16", borg)):
        print("| %s | %d | %s | %s | %s |" % (name, len(chunks), mb(sum(n for _, n in chunks)),
                                             mb(sum(compressed(data[o:o + n]) for o, n in chunks)),
                                             percentiles([n for _, n in chunks])))
    for cap in (128 << 10, 256 << 10, 512 << 10):
        print("| hybrid chunks in groups up to %dK | - | %s | %s | - |" % (cap >> 10, mb(sum(n for _, n in hybrid)),
                                                                         mb(grouped(data, hybrid, cap))))


if __name__ == "__main__":
    main()
