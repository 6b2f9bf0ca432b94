#!/usr/bin/python3
"""holdopen.py SRC DST READY [--fsync-at N] [--then-write M]

Opens DST (O_CREAT|O_TRUNC), writes the first N bytes of SRC (all of it by
default), fsyncs them when --fsync-at is given (or --fsync), then writes M
more bytes of SRC without any fsync, creates READY and sleeps with the file
still open until killed. For crash tests: what was fsync'd must survive a
kill -9 of the daemon; the rest may or may not."""
import argparse
import os
import time

ap = argparse.ArgumentParser()
ap.add_argument("src")
ap.add_argument("dst")
ap.add_argument("ready")
ap.add_argument("--fsync-at", type=int, default=-1)
ap.add_argument("--fsync", action="store_true")
ap.add_argument("--then-write", type=int, default=0)
a = ap.parse_args()
src = open(a.src, "rb").read()
n = len(src) if a.fsync_at < 0 else a.fsync_at
fd = os.open(a.dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
pos = 0
while pos < n:
    pos += os.write(fd, src[pos:n])
if a.fsync or a.fsync_at >= 0:
    os.fsync(fd)
m = min(len(src), n + a.then_write)
while pos < m:
    pos += os.write(fd, src[pos:m])
open(a.ready, "w").close()
while True:
    time.sleep(1)
