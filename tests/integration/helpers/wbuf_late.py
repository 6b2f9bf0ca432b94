#!/usr/bin/env python3
"""wbuf_late.py DIR SUMS — a file staged late by -o writebuf (review 44 F2),
driven line by line from stdin, each "CMD ARG..." answered "ok": `a MIB`
appends MIB MiB of random bytes to DIR/big.bin (1 MiB writes), `P MIB` of a
repeated 64-byte pattern (no chunk boundary: its buffer grows); `h N` opens
N hog files, each written 1 MiB of a pattern (each keeps a buffer) and held
open; `r OFF LEN` compares a read of big.bin with what was written; `w OFF
LEN` rewrites there (random); `t SIZE` truncates; `c` closes everything. At
the end of stdin the expected content's SHA-256 goes to SUMS (sha256sum -c).
"""
import hashlib, os, random, sys
d, sums = sys.argv[1], sys.argv[2]
rnd = random.Random(44)
path = os.path.join(d, "big.bin")
fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
want = bytearray()
hogs = []
for line in sys.stdin:
    cmd, *a = line.split()
    a = [int(x) for x in a]
    if cmd in ("a", "P"):
        pat = rnd.randbytes(64) * (1 << 14)
        for _ in range(a[0]):
            b = rnd.randbytes(1 << 20) if cmd == "a" else pat
            assert os.pwrite(fd, b, len(want)) == len(b)
            want += b
    elif cmd == "h":
        for i in range(a[0]):
            h = os.open(os.path.join(d, "hog%02d.bin" % len(hogs)), os.O_CREAT | os.O_WRONLY, 0o644)
            pat = rnd.randbytes(64) * (1 << 14)
            assert os.write(h, pat) == len(pat)
            hogs.append(h)
    elif cmd == "r":
        got = os.pread(fd, a[1], a[0])
        assert got == bytes(want[a[0]:a[0] + a[1]]), "read at %d+%d differs" % (a[0], a[1])
    elif cmd == "w":
        b = rnd.randbytes(a[1])
        assert os.pwrite(fd, b, a[0]) == len(b)
        end = a[0] + len(b)
        if end > len(want):
            want += bytes(end - len(want))
        want[a[0]:end] = b
    elif cmd == "t":
        os.ftruncate(fd, a[0])
        want = want[:a[0]] + bytes(max(0, a[0] - len(want)))
    elif cmd == "c":
        os.close(fd)
        for h in hogs:
            os.close(h)
    print("ok", flush=True)
with open(sums, "w") as f:
    f.write("%s  %s\n" % (hashlib.sha256(want).hexdigest(), path))
