#!/usr/bin/python3
"""fsx.py TARGET REF [--ops N] [--seed S] [--maxsize BYTES] [--maxlen BYTES]

A small fsx: applies the same random sequence of pwrite (random, zero-filled
and repeated-pattern data, at random offsets, sometimes past the end), append,
ftruncate (shrink and grow), fsync, close+reopen, to TARGET (on the file system
under test) and REF (on a trusted one), and compares reads of random ranges,
and the whole files at the end. Exits 1 at the first difference, printing the
operation, the first differing offset and the last operations."""
import argparse
import os
import random
import sys

ap = argparse.ArgumentParser()
ap.add_argument("target")
ap.add_argument("ref")
ap.add_argument("--ops", type=int, default=300)
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--maxsize", type=int, default=16 << 20)
ap.add_argument("--maxlen", type=int, default=2 << 20)
a = ap.parse_args()

rnd = random.Random(a.seed)
history = []


def opn():
    return (os.open(a.target, os.O_RDWR | os.O_CREAT, 0o644),
            os.open(a.ref, os.O_RDWR | os.O_CREAT, 0o644))


def die(msg):
    print("fsx: seed %d: %s" % (a.seed, msg))
    print("fsx: last operations:")
    for h in history[-15:]:
        print("   ", h)
    sys.exit(1)


def read_all(fd, off, n):
    out = bytearray()
    while len(out) < n:
        b = os.pread(fd, n - len(out), off + len(out))
        if not b:
            break
        out += b
    return bytes(out)


def compare(tfd, rfd, off, n, what):
    tb = read_all(tfd, off, n)
    rb = read_all(rfd, off, n)
    if tb != rb:
        i = next((k for k in range(min(len(tb), len(rb))) if tb[k] != rb[k]), min(len(tb), len(rb)))
        die("%s: read [%d, +%d) differs: got %d bytes, expected %d; first difference at file offset %d "
            "(got %r, expected %r)" % (what, off, n, len(tb), len(rb), off + i, tb[i:i + 8], rb[i:i + 8]))


def data(n):
    kind = rnd.random()
    if kind < 0.15:
        return b"\0" * n, "zeros"
    if kind < 0.25:
        pat = rnd.randbytes(rnd.randint(1, 64))
        return (pat * (n // len(pat) + 1))[:n], "pattern"
    return rnd.randbytes(n), "random"


tfd, rfd = opn()
os.ftruncate(tfd, 0)
os.ftruncate(rfd, 0)
for i in range(a.ops):
    size = os.fstat(rfd).st_size
    r = rnd.random()
    if r < 0.45:
        sz = rnd.choice([rnd.randint(1, 4096), rnd.randint(1, 256 << 10), rnd.randint(1, a.maxlen)])
        off = rnd.randint(0, a.maxsize - sz)
        b, kind = data(sz)
        history.append("#%d pwrite off=%d len=%d (%s) size_before=%d" % (i, off, sz, kind, size))
        for fd in (tfd, rfd):
            done = 0
            while done < sz:
                done += os.pwrite(fd, b[done:], off + done)
    elif r < 0.55:
        sz = rnd.randint(1, a.maxlen)
        b, kind = data(sz)
        history.append("#%d append len=%d at %d (%s)" % (i, sz, size, kind))
        for fd in (tfd, rfd):
            done = 0
            while done < sz:
                done += os.pwrite(fd, b[done:], size + done)
    elif r < 0.63:
        ns = rnd.choice([0, rnd.randint(0, size + 1), rnd.randint(0, a.maxsize)])
        history.append("#%d ftruncate %d -> %d" % (i, size, ns))
        os.ftruncate(tfd, ns)
        os.ftruncate(rfd, ns)
    elif r < 0.85:
        off = rnd.randint(0, size + 10)
        n = rnd.randint(0, a.maxlen)
        history.append("#%d read off=%d len=%d size=%d" % (i, off, n, size))
        compare(tfd, rfd, off, n, "op #%d" % i)
    elif r < 0.90:
        history.append("#%d fsync" % i)
        os.fsync(tfd)
    else:
        history.append("#%d close+reopen" % i)
        os.close(tfd)
        os.close(rfd)
        tfd, rfd = opn()
    ts, rs = os.fstat(tfd).st_size, os.fstat(rfd).st_size
    if ts != rs:
        die("after op #%d: size %d, expected %d" % (i, ts, rs))

size = os.fstat(rfd).st_size
compare(tfd, rfd, 0, size + 1, "final read through the open handle")
os.close(tfd)
os.close(rfd)
tfd, rfd = opn()
compare(tfd, rfd, 0, size + 1, "final read after close+reopen")
os.close(tfd)
os.close(rfd)
print("fsx: seed %d: %d operations, final size %d: ok" % (a.seed, a.ops, size))
