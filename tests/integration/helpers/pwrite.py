#!/usr/bin/python3
"""pwrite.py SRC DST ORDER BLOCK [--presize] [--fsync] [--seed N]

Writes the bytes of SRC into DST (created/truncated) in blocks of BLOCK bytes,
each with os.pwrite at its own offset, in ORDER: seq, reverse, random
(a seeded shuffle) or interleave (even blocks first, then odd ones).
--presize ftruncates DST to the final size first (as safetensors does)."""
import argparse
import os
import random

ap = argparse.ArgumentParser()
ap.add_argument("src")
ap.add_argument("dst")
ap.add_argument("order", choices=["seq", "reverse", "random", "interleave"])
ap.add_argument("block", type=int)
ap.add_argument("--presize", action="store_true")
ap.add_argument("--fsync", action="store_true")
ap.add_argument("--seed", type=int, default=1)
a = ap.parse_args()

size = os.path.getsize(a.src)
offs = list(range(0, size, a.block))
if a.order == "reverse":
    offs.reverse()
elif a.order == "random":
    random.Random(a.seed).shuffle(offs)
elif a.order == "interleave":
    offs = offs[0::2] + offs[1::2]

sfd = os.open(a.src, os.O_RDONLY)
dfd = os.open(a.dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
if a.presize:
    os.ftruncate(dfd, size)
for off in offs:
    n = min(a.block, size - off)
    data = os.pread(sfd, n, off)
    assert len(data) == n
    done = 0
    while done < n:
        done += os.pwrite(dfd, data[done:], off + done)
if a.fsync:
    os.fsync(dfd)
os.close(dfd)
os.close(sfd)
