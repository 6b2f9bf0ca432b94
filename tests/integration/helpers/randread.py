#!/usr/bin/python3
"""randread.py REF FILE SEED COUNT [--direct] [--unaligned] [BOUNDARY...]

Reads FILE at COUNT seeded random (offset, size) pairs and checks each read
returns exactly the bytes of REF there (short only at the end of the file).
Offsets are odd, sizes from 1 byte to 3 MiB; half of the reads straddle one
of the BOUNDARY offsets (chunk edges). --direct opens FILE with O_DIRECT, so
that a FUSE daemon gets the reader's own offsets and sizes. --unaligned
reads into buffers that do not start on a page (a read of 1 MiB then spans
257 pages: the kernel splits it into two requests on a direct_io file).
Exit 1 names the first read that differs."""
import argparse
import mmap
import os
import random
import sys

ap = argparse.ArgumentParser()
ap.add_argument("ref")
ap.add_argument("file")
ap.add_argument("seed", type=int)
ap.add_argument("count", type=int)
ap.add_argument("--direct", action="store_true")
ap.add_argument("--unaligned", action="store_true")
ap.add_argument("bounds", nargs="*", type=int)
a = ap.parse_intermixed_args()

ref = open(a.ref, "rb").read()
size = len(ref)
rnd = random.Random(a.seed)
fd = os.open(a.file, os.O_RDONLY | (os.O_DIRECT if a.direct else 0))
buf = mmap.mmap(-1, (3 << 20) + 4096)  # page aligned, in case O_DIRECT wants it
for i in range(a.count):
    n = rnd.choice([1, 2, 4095, 4097, 65535, 131073, 1000001, (1 << 20) + 3,
                    rnd.randrange(1, 3 << 20)])
    if a.bounds and i % 2:
        b = rnd.choice(a.bounds)
        off = max(0, b - rnd.randrange(1, n + 1))
    else:
        off = rnd.randrange(0, size + 100)
    off |= 1
    want = ref[off:off + n]
    at = 1 + (i * 797) % 4095 if a.unaligned else 0
    got = os.preadv(fd, [memoryview(buf)[at:at + n]], off)
    if buf[at:at + got] != want:
        bad = next((j for j in range(min(got, len(want))) if buf[at + j] != want[j]), min(got, len(want)))
        print(f"read {i}: offset {off} size {n}: got {got} bytes, want {len(want)}; "
              f"first difference at file offset {off + bad}", file=sys.stderr)
        sys.exit(1)
os.close(fd)
