#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""bench/cpu-per-gib.py [--init-args ARGS] BLKVAULT SERIES_DIR...: CPU time (user + sys, which a busy
machine barely disturbs, unlike wall time) per GiB of new data of blkvault backups of an image
series (SERIES_DIR/v1.img, v2.img, v3.img backed up in turn into one fresh repository, each from
the page cache), the repository's size after each, and a restore of v3 (CPU and wall, with a
final fsync). One line per step; run it for two binaries to compare them."""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time


def cpu_of(argv, **kw):
    """Runs argv; returns (seconds of user+sys CPU of the child, wall seconds, stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    out = subprocess.run(argv, check=True, stdout=subprocess.PIPE, **kw).stdout
    wall = time.monotonic() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall, out


def du(path):
    return int(subprocess.run(["du", "-sb", path], check=True, stdout=subprocess.PIPE).stdout.split()[0])


def warm(path):
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--init-args", default="")
    ap.add_argument("--work", default=os.environ.get("BENCH_WORK", "/var/tmp"))
    ap.add_argument("blkvault")
    ap.add_argument("series", nargs="+")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="cpu-per-gib.", dir=a.work)
    key = os.path.join(work, "key")
    with open(key, "wb") as f:
        f.write(os.urandom(32))
    bv = [a.blkvault]
    try:
        for s in a.series:
            repo = os.path.join(work, "repo")
            shutil.rmtree(repo, ignore_errors=True)
            subprocess.run(bv + ["init", repo, f"--key-file={key}"] + a.init_args.split(), check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for v in (1, 2, 3):
                img = os.path.join(s, f"v{v}.img")
                warm(img)
                cpu, wall, out = cpu_of(bv + ["backup", repo, img, f"--name=v{v}", f"--key-file={key}", "--json"])
                st = json.loads(out)
                new = st["bytes_new"]
                print(f"{s} v{v} backup: cpu {cpu:.2f} s, wall {wall:.2f} s, new {new / 2**20:.1f} MiB, "
                      f"cpu/GiB new {cpu / (new / 2**30) if new else 0:.2f} s, repo {du(repo) / 2**20:.2f} MiB",
                      flush=True)
            out_img = os.path.join(work, "restored.img")
            cpu, wall, _ = cpu_of(bv + ["restore", repo, "v3", out_img, f"--key-file={key}"])
            print(f"{s} restore v3: cpu {cpu:.2f} s, wall {wall:.2f} s", flush=True)
            os.unlink(out_img)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
