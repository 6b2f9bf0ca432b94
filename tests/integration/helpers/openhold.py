#!/usr/bin/python3
"""openhold.py FILE READY GO DONE [--rdwr | --rdonly] [--write N]

Opens FILE (O_RDWR by default, O_RDONLY with --rdonly), creates READY, waits
until GO exists, then: with --write N, pwrites N bytes b"X" at offset 0 and
fsyncs; with --rdonly, reads the whole file. Closes it and writes DONE:
"open failed: ERR" if the open failed (READY is then created too), else
"wrote N" or "read SHA256" (the hex digest of what it read), "closed".
For keep-latest-k with a file of the save open (t_keep)."""
import argparse
import hashlib
import os
import time

ap = argparse.ArgumentParser()
ap.add_argument("file")
ap.add_argument("ready")
ap.add_argument("go")
ap.add_argument("done")
ap.add_argument("--rdonly", action="store_true")
ap.add_argument("--write", type=int, default=0)
a = ap.parse_args()
try:
    fd = os.open(a.file, os.O_RDONLY if a.rdonly else os.O_RDWR)
except OSError as e:
    open(a.done, "w").write("open failed: %s\n" % e.strerror)
    open(a.ready, "w").close()
    raise SystemExit(0)
open(a.ready, "w").close()
while not os.path.exists(a.go):
    time.sleep(0.05)
out = []
if a.write:
    n = os.pwrite(fd, b"X" * a.write, 0)
    os.fsync(fd)
    out.append("wrote %d" % n)
if a.rdonly:
    h = hashlib.sha256()
    while True:
        b = os.read(fd, 1 << 20)
        if not b:
            break
        h.update(b)
    out.append("read " + h.hexdigest())
os.close(fd)
out.append("closed")
open(a.done, "w").write(" ".join(out) + "\n")
