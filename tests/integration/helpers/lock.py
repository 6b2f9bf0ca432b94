#!/usr/bin/python3
"""lock.py hold KIND FILE READY RELEASE — takes an exclusive lock of KIND
(flock, lockf, ofd) on FILE, creates READY, waits (at most 60 s) until RELEASE
exists, then unlocks and exits 0.
lock.py try KIND FILE — one non-blocking exclusive attempt: prints LOCKED (and
unlocks) or BUSY (EAGAIN/EACCES), or the errno name of another failure."""
import errno
import fcntl
import os
import struct
import sys
import time

F_OFD_SETLK = 37


def lock(kind, fd, blocking):
    if kind == "flock":
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    elif kind == "lockf":
        fcntl.lockf(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    elif kind == "ofd":
        # struct flock: short l_type, short l_whence, off_t l_start, off_t l_len, pid_t l_pid
        fl = struct.pack("hhqqi4x", fcntl.F_WRLCK, 0, 0, 0, 0)
        fcntl.fcntl(fd, F_OFD_SETLK if not blocking else 38, fl)
    else:
        raise SystemExit("unknown lock kind " + kind)


def main():
    mode, kind, path = sys.argv[1], sys.argv[2], sys.argv[3]
    fd = os.open(path, os.O_RDWR)
    if mode == "hold":
        ready, release = sys.argv[4], sys.argv[5]
        lock(kind, fd, True)
        open(ready, "w").close()
        t0 = time.time()
        while not os.path.exists(release) and time.time() - t0 < 60:
            time.sleep(0.02)
        os.close(fd)
        return
    try:
        lock(kind, fd, False)
        print("LOCKED")
    except OSError as e:
        print("BUSY" if e.errno in (errno.EAGAIN, errno.EACCES) else errno.errorcode.get(e.errno, str(e.errno)))
    os.close(fd)


main()
