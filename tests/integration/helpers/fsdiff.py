#!/usr/bin/python3
"""fsdiff.py TARGET_DIR REF_DIR [--ops N] [--seed S] [--maxsize B] [--maxlen B] [--no-OP ...]

A seeded, reproducible random-operation differential test of a directory on
the file system under test against one on a trusted file system (tmpfs or
the local disk). Unlike fsx.py (one file, one handle) it keeps several files
and several open handles at once, with every access mode, and mixes in the
namespace: pwrite (past EOF, holes), write through an O_APPEND handle,
ftruncate / truncate(path) to sizes inside a chunk, posix_fallocate,
copy_file_range, rename (over an existing, possibly open, file), unlink of
an open file, hard links, writes through a shared writable mmap (closed
before msync sometimes: the kernel writes the pages back after close),
fsync, close. After every operation the sizes agree (fstat of every open
handle, stat of every name), and reads of random ranges through random
handles and through fresh opens are compared byte for byte. The results of
the operations (errno) must agree too.

Exits 1 at the first difference, printing the operation, the first differing
offset and the last operations; 0 when all agree. Reproduce with the same
--seed (and options)."""
import argparse
import errno
import mmap
import os
import random
import sys

ap = argparse.ArgumentParser()
ap.add_argument("target")
ap.add_argument("ref")
ap.add_argument("--ops", type=int, default=400)
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--maxsize", type=int, default=6 << 20)
ap.add_argument("--maxlen", type=int, default=1 << 20)
ap.add_argument("--names", type=int, default=5)
ap.add_argument("--no", action="append", default=[], help="leave out an operation (by name)")
a = ap.parse_args()

rnd = random.Random(a.seed)
history = []
NAMES = ["f%d" % i for i in range(a.names)]


def die(msg):
    print("fsdiff: seed %d: %s" % (a.seed, msg))
    print("fsdiff: last operations:")
    for h in history[-25:]:
        print("   ", h)
    sys.exit(1)


def both(fn):
    """Runs fn(root, side) on the target and the reference; returns the two
    results as (value or None, errno or 0) and fails if the errnos differ."""
    out = []
    for side, root in ((0, a.target), (1, a.ref)):
        try:
            out.append((fn(root, side), 0))
        except OSError as e:
            out.append((None, e.errno))
    if out[0][1] != out[1][1]:
        die("op #%d: result differs: target %s, reference %s" %
            (len(history) - 1, errno.errorcode.get(out[0][1], out[0][1]) if out[0][1] else "ok",
             errno.errorcode.get(out[1][1], out[1][1]) if out[1][1] else "ok"))
    return out


def data(n):
    kind = rnd.random()
    if kind < 0.12:
        return b"\0" * n, "zeros"
    if kind < 0.22:
        pat = rnd.randbytes(rnd.randint(1, 64))
        return (pat * (n // len(pat) + 1))[:n], "pattern"
    return rnd.randbytes(n), "random"


def read_all(fd, off, n):
    out = bytearray()
    while len(out) < n:
        b = os.pread(fd, n - len(out), off + len(out))
        if not b:
            break
        out += b
    return bytes(out)


def first_diff(tb, rb):
    return next((k for k in range(min(len(tb), len(rb))) if tb[k] != rb[k]), min(len(tb), len(rb)))


def cmp_bytes(tb, rb, off, what):
    if tb != rb:
        i = first_diff(tb, rb)
        die("%s: read at %d differs: got %d bytes, expected %d; first difference at offset %d "
            "(got %r, expected %r)" % (what, off, len(tb), len(rb), off + i, tb[i:i + 8], rb[i:i + 8]))


class Handle:
    def __init__(self, name, mode, append, fds):
        self.name, self.mode, self.append, self.fds = name, mode, append, fds

    def __repr__(self):
        return "h(%s,%s%s,t%d)" % (self.name, self.mode, "+A" if self.append else "", self.fds[0])


handles = []
MODES = {"r": os.O_RDONLY, "w": os.O_WRONLY, "rw": os.O_RDWR}


def pick_handle(want):
    hs = [h for h in handles if want(h)]
    return rnd.choice(hs) if hs else None


def op_open(i):
    name = rnd.choice(NAMES)
    mode = rnd.choice(["r", "w", "rw", "rw"])
    append = mode != "r" and rnd.random() < 0.2
    flags = MODES[mode] | (os.O_APPEND if append else 0)
    if mode != "r" and rnd.random() < 0.7:
        flags |= os.O_CREAT
    trunc = mode != "r" and rnd.random() < 0.1
    if trunc:
        flags |= os.O_TRUNC
    history.append("#%d open %s %s%s%s" % (i, name, mode, " append" if append else "", " trunc" if trunc else ""))
    r = both(lambda root, s: os.open(os.path.join(root, name), flags, 0o644))
    if r[0][1] == 0:
        handles.append(Handle(name, mode, append, (r[0][0], r[1][0])))
        history[-1] += " -> %r" % handles[-1]


def op_close(i):
    h = pick_handle(lambda h: True)
    if not h:
        return
    history.append("#%d close %r" % (i, h))
    handles.remove(h)
    both(lambda root, s: os.close(h.fds[s]))


def op_pwrite(i):
    h = pick_handle(lambda h: h.mode != "r")
    if not h:
        return
    size = os.fstat(h.fds[1]).st_size
    n = rnd.choice([rnd.randint(1, 4096), rnd.randint(1, 200 << 10), rnd.randint(1, a.maxlen)])
    off = rnd.choice([size, rnd.randint(0, size + 1), rnd.randint(0, a.maxsize - n), size + rnd.randint(1, 300000)])
    b, kind = data(n)
    history.append("#%d pwrite %r off=%d len=%d (%s) size=%d" % (i, h, off, n, kind, size))

    def wr(root, s):
        if h.append:  # pwrite on O_APPEND appends on Linux; use write
            return os.write(h.fds[s], b)
        done = 0
        while done < n:
            done += os.pwrite(h.fds[s], b[done:], off + done)
        return done
    r = both(wr)
    if r[0][0] != r[1][0]:
        die("op #%d: write returned %r, expected %r" % (i, r[0][0], r[1][0]))


def op_write_seq(i):
    """write() at the handle's offset (after an lseek), as a streaming writer."""
    h = pick_handle(lambda h: h.mode != "r")
    if not h:
        return
    n = rnd.randint(1, a.maxlen)
    b, kind = data(n)
    whence = rnd.choice([os.SEEK_END, os.SEEK_CUR])
    history.append("#%d seek(%s)+write %r len=%d (%s)" % (i, "END" if whence == os.SEEK_END else "CUR", h, n, kind))

    def wr(root, s):
        os.lseek(h.fds[s], 0, whence)
        done = 0
        while done < n:
            done += os.write(h.fds[s], b[done:])
        return os.lseek(h.fds[s], 0, os.SEEK_CUR)
    r = both(wr)
    if r[0][0] != r[1][0]:
        die("op #%d: position after write %r, expected %r" % (i, r[0][0], r[1][0]))


def op_ftruncate(i):
    h = pick_handle(lambda h: h.mode != "r")
    if not h:
        return
    size = os.fstat(h.fds[1]).st_size
    ns = rnd.choice([0, rnd.randint(0, size + 1), rnd.randint(0, a.maxsize), size + rnd.randint(1, 100000)])
    history.append("#%d ftruncate %r %d -> %d" % (i, h, size, ns))
    both(lambda root, s: os.ftruncate(h.fds[s], ns))


def op_truncate_path(i):
    name = rnd.choice(NAMES)
    ns = rnd.randint(0, a.maxsize)
    history.append("#%d truncate(path) %s -> %d" % (i, name, ns))
    both(lambda root, s: os.truncate(os.path.join(root, name), ns))


def op_fallocate(i):
    h = pick_handle(lambda h: h.mode != "r")
    if not h:
        return
    size = os.fstat(h.fds[1]).st_size
    off = rnd.randint(0, size + 100000)
    n = rnd.randint(1, 500000)
    history.append("#%d posix_fallocate %r off=%d len=%d size=%d" % (i, h, off, n, size))
    both(lambda root, s: os.posix_fallocate(h.fds[s], off, n))


def op_copy_range(i):
    src = pick_handle(lambda h: h.mode != "w")
    dst = pick_handle(lambda h: h.mode != "r" and not h.append)
    if not src or not dst:
        return
    ssize = os.fstat(src.fds[1]).st_size
    off_in = rnd.randint(0, ssize + 10)
    n = rnd.randint(0, a.maxlen)
    off_out = rnd.randint(0, os.fstat(dst.fds[1]).st_size + 10000)
    history.append("#%d copy_file_range %r@%d -> %r@%d len=%d" % (i, src, off_in, dst, off_out, n))

    def cp(root, s):
        total = 0
        while total < n:
            k = os.copy_file_range(src.fds[s], dst.fds[s], n - total, off_in + total, off_out + total)
            if k == 0:
                break
            total += k
        return total
    r = both(cp)
    if r[0][0] != r[1][0]:
        die("op #%d: copy_file_range copied %r, expected %r" % (i, r[0][0], r[1][0]))


def op_rename(i):
    x, y = rnd.choice(NAMES), rnd.choice(NAMES)
    history.append("#%d rename %s -> %s" % (i, x, y))
    r = both(lambda root, s: os.rename(os.path.join(root, x), os.path.join(root, y)))
    if r[0][1] == 0 and x != y:
        for h in handles:
            if h.name == x:
                h.name = y
            elif h.name == y:
                h.name = "(gone)" + y


def op_unlink(i):
    x = rnd.choice(NAMES)
    history.append("#%d unlink %s" % (i, x))
    r = both(lambda root, s: os.unlink(os.path.join(root, x)))
    if r[0][1] == 0:
        for h in handles:
            if h.name == x:
                h.name = "(gone)" + x


def op_link(i):
    x, y = rnd.choice(NAMES), rnd.choice(NAMES)
    history.append("#%d link %s -> %s" % (i, x, y))
    both(lambda root, s: os.link(os.path.join(root, x), os.path.join(root, y)))


def op_mmap_write(i):
    h = pick_handle(lambda h: h.mode == "rw")
    if not h:
        return
    size = os.fstat(h.fds[1]).st_size
    if size == 0:
        return
    off = rnd.randint(0, size - 1)
    n = rnd.randint(1, min(size - off, 300000))
    b, kind = data(n)
    sync = rnd.random() < 0.5
    close_after = rnd.random() < 0.4
    history.append("#%d mmap write %r off=%d len=%d (%s) size=%d msync=%s close=%s" %
                   (i, h, off, n, kind, size, sync, close_after))

    def mw(root, s):
        m = mmap.mmap(h.fds[s], size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        m[off:off + n] = b
        if sync:
            m.flush()
        m.close()
        return 0
    both(mw)
    if close_after:
        handles.remove(h)
        both(lambda root, s: os.close(h.fds[s]))


def op_fsync(i):
    h = pick_handle(lambda h: True)
    if not h:
        return
    history.append("#%d fsync %r" % (i, h))
    both(lambda root, s: os.fsync(h.fds[s]))


def op_read_handle(i):
    h = pick_handle(lambda h: h.mode != "w")
    if not h:
        return
    size = os.fstat(h.fds[1]).st_size
    off = rnd.randint(0, size + 10)
    n = rnd.choice([rnd.randint(0, 8192), rnd.randint(0, a.maxlen)])
    history.append("#%d read %r off=%d len=%d size=%d" % (i, h, off, n, size))
    cmp_bytes(read_all(h.fds[0], off, n), read_all(h.fds[1], off, n), off, "op #%d read through %r" % (i, h))


def op_read_fresh(i):
    name = rnd.choice(NAMES)
    history.append("#%d read whole %s by a fresh open" % (i, name))
    r = both(lambda root, s: open(os.path.join(root, name), "rb").read())
    if r[0][1] == 0:
        cmp_bytes(r[0][0], r[1][0], 0, "op #%d fresh read of %s" % (i, name))


def check_sizes(i):
    for h in handles:
        ts, rs = os.fstat(h.fds[0]).st_size, os.fstat(h.fds[1]).st_size
        if ts != rs:
            die("after op #%d: fstat(%r) size %d, expected %d" % (i, h, ts, rs))
    for name in NAMES:
        r = both(lambda root, s: os.stat(os.path.join(root, name)))
        if r[0][1] == 0:
            if r[0][0].st_size != r[1][0].st_size:
                die("after op #%d: stat(%s) size %d, expected %d" % (i, name, r[0][0].st_size, r[1][0].st_size))
            if r[0][0].st_nlink != r[1][0].st_nlink:
                die("after op #%d: stat(%s) nlink %d, expected %d" % (i, name, r[0][0].st_nlink, r[1][0].st_nlink))


OPS = [
    (op_open, 10), (op_close, 7), (op_pwrite, 20), (op_write_seq, 8), (op_ftruncate, 6),
    (op_truncate_path, 2), (op_fallocate, 3), (op_copy_range, 4), (op_rename, 4),
    (op_unlink, 3), (op_link, 2), (op_mmap_write, 4), (op_fsync, 3), (op_read_handle, 14),
    (op_read_fresh, 6),
]
OPS = [(f, w) for f, w in OPS if f.__name__[3:] not in a.no]
funcs = [f for f, _ in OPS]
weights = [w for _, w in OPS]

for i in range(a.ops):
    f = rnd.choices(funcs, weights)[0]
    f(i)
    check_sizes(i)

for h in list(handles):
    for s in (0, 1):
        cmp_bytes(read_all(h.fds[0], 0, 1 << 30) if h.mode != "w" else b"",
                  read_all(h.fds[1], 0, 1 << 30) if h.mode != "w" else b"", 0, "final read through %r" % h)
    os.close(h.fds[0])
    os.close(h.fds[1])
handles.clear()
for name in NAMES:
    history.append("final read of %s" % name)
    r = both(lambda root, s: open(os.path.join(root, name), "rb").read())
    if r[0][1] == 0:
        cmp_bytes(r[0][0], r[1][0], 0, "final read of %s" % name)
print("fsdiff: seed %d: %d operations: ok" % (a.seed, a.ops))
