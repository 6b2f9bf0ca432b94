"""lost_create.py DIR FILLER... — t_failsave.sh (review 38 F3): creates
DIR/f0000, DIR/f0001, ... for writing while the cache's disk is full, each
kept open, until a create fails or 4000 are open; waits for the catalog's
deferred batch holding them to fail its commit; removes the FILLER files
(room back); then writes 4 KiB to each open file and closes it. Prints one
line: "opened N ok N enospc N eio N enoent N other N" (each file counted by
the first error of its write or close)."""
import errno
import os
import sys
import time

d, fillers = sys.argv[1], sys.argv[2:]
fds = []
for i in range(4000):
    try:
        fds.append(os.open(os.path.join(d, "f%04d" % i), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    except OSError:
        break
time.sleep(1.0)  # the flusher commits within 10 ms; its commit fails on the full disk
for f in fillers:
    os.unlink(f)
time.sleep(0.5)
count = {"ok": 0, "enospc": 0, "eio": 0, "enoent": 0, "other": 0}
names = {errno.ENOSPC: "enospc", errno.EIO: "eio", errno.ENOENT: "enoent"}
for fd in fds:
    err = None
    try:
        os.write(fd, b"x" * 4096)
    except OSError as e:
        err = e
    try:
        os.close(fd)
    except OSError as e:
        err = err or e
    count["ok" if err is None else names.get(err.errno, "other")] += 1
print("opened %d ok %d enospc %d eio %d enoent %d other %d" % (len(fds), count["ok"], count["enospc"],
      count["eio"], count["enoent"], count["other"]))
