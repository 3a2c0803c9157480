#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""onpty.py OUT [--stop-when FILE] -- CMD...: runs CMD with its standard error on a new
pseudo-terminal (standard input from /dev/null, standard output inherited), writes all that
CMD wrote to the terminal to OUT byte for byte, and exits with CMD's exit status. With
--stop-when FILE, CMD gets SIGTERM once FILE is not empty (for a server that runs until told)."""
import os
import pty
import select
import signal
import subprocess
import sys

args = sys.argv[1:]
out_path = args.pop(0)
stop_when = None
if args[0] == "--stop-when":
    stop_when = args[1]
    args = args[2:]
if args[0] == "--":
    args = args[1:]
master, slave = pty.openpty()
proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stderr=slave)
os.close(slave)
data = b""
stopped = False
while True:
    ready, _, _ = select.select([master], [], [], 0.1)
    if ready:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every writer closed the terminal
            break
        if not chunk:
            break
        data += chunk
    if stop_when and not stopped and os.path.exists(stop_when) and os.path.getsize(stop_when) > 0:
        proc.send_signal(signal.SIGTERM)
        stopped = True
rc = proc.wait()
with open(out_path, "wb") as f:
    f.write(data)
sys.exit(rc)
