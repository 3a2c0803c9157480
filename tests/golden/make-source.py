#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""make-source.py OUT: the image tests/golden/repo-zstd3 holds (as snapshot 'golden'): 512 KiB of
text (stored in compression groups), 192 KiB of pseudo-random bytes (stored as raw chunks), 256
KiB of zeros (stored as nothing) and 40 KiB of text again, the same bytes on every run."""
import random
import sys

words = b"the quick brown fox jumps over the lazy dog; a block device backup of an installed system "
text = bytes(words[(i * 7 + i // 61) % len(words)] for i in range(512 * 1024))
noise = random.Random(26).randbytes(192 * 1024)
with open(sys.argv[1], "wb") as f:
    f.write(text + noise + bytes(256 * 1024) + text[:40 * 1024])
