#!/usr/bin/python3
"""fsop.py OP ARGS... — one file-system call, for assertions in shell tests.

Prints "OK" (or the value asked for) on success, or the errno name
(ENOENT, EACCES, ...) on failure, and exits 0 either way; exit 2 only on a
usage error. Operations:

  lstat P                    OK or errno
  rename A B                 os.rename
  renameat2 A B noreplace|exchange
  mkdir P [MODE]             rmdir P        unlink P
  link A B                   symlink TARGET P         readlink P
  create P                   open(O_WRONLY|O_CREAT) as the calling user
  open P MODE                MODE: r, w (O_WRONLY), rw, trunc (O_WRONLY|O_TRUNC), append
  write P TEXT               open(O_WRONLY) and write TEXT (no truncation)
  chmod P OCTAL              chown P UID GID          truncate P SIZE
  utime P ATIME_NS MTIME_NS  mtime_ns P     ctime_ns P     mode P (octal)
  fsync P | fdatasync P | fsyncdir P
  fallocate P MODE OFF LEN   raw fallocate(2) (MODE an integer)
  statvfs P                  prints "bsize frsize blocks bfree bavail files ffree namemax"
"""
import ctypes
import errno
import os
import sys

libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
RENAME_FLAGS = {"noreplace": 1, "exchange": 2}


def check(rc):
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def op(args):
    o, a = args[0], args[1:]
    if o == "lstat":
        os.lstat(a[0])
    elif o == "rename":
        os.rename(a[0], a[1])
    elif o == "renameat2":
        libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
        check(libc.renameat2(AT_FDCWD, a[0].encode(), AT_FDCWD, a[1].encode(), RENAME_FLAGS[a[2]]))
    elif o == "mkdir":
        os.mkdir(a[0], int(a[1], 8) if len(a) > 1 else 0o777)
    elif o == "rmdir":
        os.rmdir(a[0])
    elif o == "unlink":
        os.unlink(a[0])
    elif o == "link":
        os.link(a[0], a[1])
    elif o == "symlink":
        os.symlink(a[0], a[1])
    elif o == "readlink":
        return os.readlink(a[0])
    elif o == "create":
        os.close(os.open(a[0], os.O_WRONLY | os.O_CREAT, 0o644))
    elif o == "open":
        flags = {"r": os.O_RDONLY, "w": os.O_WRONLY, "rw": os.O_RDWR,
                 "trunc": os.O_WRONLY | os.O_TRUNC, "append": os.O_WRONLY | os.O_APPEND}[a[1]]
        os.close(os.open(a[0], flags))
    elif o == "write":
        fd = os.open(a[0], os.O_WRONLY)
        try:
            os.write(fd, a[1].encode())
        finally:
            os.close(fd)
    elif o == "chmod":
        os.chmod(a[0], int(a[1], 8))
    elif o == "chown":
        os.chown(a[0], int(a[1]), int(a[2]))
    elif o == "truncate":
        os.truncate(a[0], int(a[1]))
    elif o == "utime":
        os.utime(a[0], ns=(int(a[1]), int(a[2])))
    elif o == "mtime_ns":
        return str(os.stat(a[0]).st_mtime_ns)
    elif o == "ctime_ns":
        return str(os.stat(a[0]).st_ctime_ns)
    elif o == "mode":
        return "%o" % (os.lstat(a[0]).st_mode & 0o7777)
    elif o in ("fsync", "fdatasync", "fsyncdir"):
        fd = os.open(a[0], os.O_RDONLY if o == "fsyncdir" else os.O_RDWR)
        try:
            (os.fdatasync if o == "fdatasync" else os.fsync)(fd)
        finally:
            os.close(fd)
    elif o == "fallocate":
        libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong]
        fd = os.open(a[0], os.O_RDWR)
        try:
            check(libc.fallocate(fd, int(a[1]), int(a[2]), int(a[3])))
        finally:
            os.close(fd)
    elif o == "statvfs":
        s = os.statvfs(a[0])
        return "%d %d %d %d %d %d %d %d" % (s.f_bsize, s.f_frsize, s.f_blocks, s.f_bfree,
                                            s.f_bavail, s.f_files, s.f_ffree, s.f_namemax)
    else:
        print("fsop: unknown op " + o, file=sys.stderr)
        sys.exit(2)
    return "OK"


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    try:
        print(op(sys.argv[1:]))
    except OSError as e:
        print(errno.errorcode.get(e.errno, str(e.errno)))


main()
