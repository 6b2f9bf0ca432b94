#!/usr/bin/python3
"""replicas.py DIR [--writers N] [--size B] [--seed S] [--rounds R]

Data-parallel ranks saving almost the same bytes at the same time: N
processes each write DIR/rK.rROUND from one common random base (seeded),
every one with its own few mutations (a changed byte or run, at a random
place; rank 0 has none), in writes of its own random sizes, some with a
short pause, some with an overwrite behind the stream end or a truncate in
the middle. This drives the writer's following of another writer
(recent.h R4/R5: predictions, mismatches, takeovers) and the shared image
buffers (R6). Then every file is read back (a fresh open) and compared with
what its rank wrote. Exits 1 naming the first file and offset that differ."""
import argparse
import multiprocessing as mp
import os
import random
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("dir")
ap.add_argument("--writers", type=int, default=4)
ap.add_argument("--size", type=int, default=24 << 20)
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--rounds", type=int, default=3)
a = ap.parse_args()


def expected(rank, rnd_round, base):
    r = random.Random(rnd_round * 1000 + rank)
    b = bytearray(base)
    if rank == 0:
        return b, []
    muts = []
    for _ in range(r.randint(1, 4)):
        off = r.randrange(len(b))
        n = r.choice([1, 1, 8, r.randint(1, 100000)])
        n = min(n, len(b) - off)
        b[off:off + n] = bytes((x ^ 0x5A) for x in b[off:off + n])
        muts.append((off, n))
    return b, muts


def writer(rank, rnd_round, path, go):
    base = random.Random(a.seed * 7919 + rnd_round).randbytes(a.size)
    data, _ = expected(rank, rnd_round, base)
    r = random.Random(a.seed * 31 + rnd_round * 1000 + rank)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    go.wait()
    off = 0
    mode = r.random()
    while off < len(data):
        n = r.choice([1 << 20, 1 << 20, r.randint(1, 1 << 20), 4096 * r.randint(1, 64)])
        n = min(n, len(data) - off)
        k = os.pwrite(fd, data[off:off + n], off)
        off += k
        if r.random() < 0.03:
            time.sleep(r.random() * 0.06)
        if mode < 0.15 and r.random() < 0.05 and off > 1000:
            # rewrite a piece behind the stream end with the same bytes
            o = r.randrange(off - 1)
            m = min(r.randint(1, 300000), off - o)
            os.pwrite(fd, data[o:o + m], o)
        elif mode < 0.25 and r.random() < 0.03:
            # a truncate into the written part, then the rest again
            t = r.randrange(off + 1)
            os.ftruncate(fd, t)
            off = t
    os.close(fd)


def main():
    bad = 0
    for rnd_round in range(a.rounds):
        go = mp.Event()
        ps = []
        for rank in range(a.writers):
            p = mp.Process(target=writer, args=(rank, rnd_round, os.path.join(a.dir, "r%d.%d" % (rank, rnd_round)), go))
            p.start()
            ps.append(p)
        time.sleep(0.2)
        go.set()
        for p in ps:
            p.join()
            if p.exitcode != 0:
                print("replicas: a writer failed with %d" % p.exitcode)
                return 1
        base = random.Random(a.seed * 7919 + rnd_round).randbytes(a.size)
        for rank in range(a.writers):
            data, muts = expected(rank, rnd_round, base)
            path = os.path.join(a.dir, "r%d.%d" % (rank, rnd_round))
            got = open(path, "rb").read()
            if got != bytes(data):
                i = next((k for k in range(min(len(got), len(data))) if got[k] != data[k]), min(len(got), len(data)))
                print("replicas: seed %d round %d: %s differs: size %d expected %d, first difference at %d "
                      "(got %r expected %r); mutations %r" % (a.seed, rnd_round, path, len(got), len(data), i,
                                                             got[i:i + 8], bytes(data[i:i + 8]), muts))
                bad += 1
    if bad:
        return 1
    print("replicas: seed %d: %d rounds of %d writers: ok" % (a.seed, a.rounds, a.writers))
    return 0


sys.exit(main())
