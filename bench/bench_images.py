# SPDX-License-Identifier: LGPL-2.1-or-later
"""The real-content image series the benchmarks share (bench/peers, bench/fs-compare): v1 made by
images/make-image.sh, v2 and v3 by images/mutate.sh on a sparse copy of the version before."""
import os
import subprocess
import sys
import time

IMAGES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "images")


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _build(d, what, make, mutate):
    """Builds d/v1.img with the image script make (its arguments after the output path; what says
    what it holds) and v2.img, v3.img with mutate on a sparse copy of the version before, unless
    they exist (each made under a .tmp name first). Returns the three paths."""
    os.makedirs(d, exist_ok=True)
    v = [os.path.join(d, f"v{i}.img") for i in (1, 2, 3)]
    if not os.path.exists(v[0]):
        log(f"building {v[0]} ({what}) with images/{make[0]}")
        subprocess.run([f"{IMAGES}/{make[0]}", v[0] + ".tmp"] + make[1:], stdout=sys.stderr, check=True)
        os.rename(v[0] + ".tmp", v[0])
    for i in (1, 2):
        if not os.path.exists(v[i]):
            log(f"building {v[i]} with images/{mutate}")
            subprocess.run(["cp", "--sparse=always", v[i - 1], v[i] + ".tmp"], check=True)
            subprocess.run([f"{IMAGES}/{mutate}", v[i] + ".tmp", f"v{i + 1}"], stdout=sys.stderr, check=True)
            os.rename(v[i] + ".tmp", v[i])
    return v


def build_series(d, size, content_mib):
    """Builds d/v1.img, v2.img and v3.img unless they exist (each made under a .tmp name first)."""
    return _build(d, f"{size}, {content_mib} MiB of files",
                  ["make-image.sh", size, "--content-mib", str(content_mib)], "mutate.sh")


def build_installed(d, size="4G", packages="build-essential"):
    """Builds d/v1.img (images/make-installed.sh: Debian 12 + packages on GPT + ext4), v2.img and
    v3.img (images/mutate-installed.sh) unless they exist. The .debs are kept in
    /var/cache/blkvault-bench/debs, so that a rebuild downloads nothing twice."""
    return _build(d, f"{size}: Debian 12 + {packages}", ["make-installed.sh", size, "--packages", packages],
                  "mutate-installed.sh")
