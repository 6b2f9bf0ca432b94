#!/usr/bin/python3
"""sha256.py FILE... — prints the SHA-256 hex of each file, one per line
(hashlib/OpenSSL: several times faster than coreutils sha256sum)."""
import hashlib
import sys

for path in sys.argv[1:]:
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as f:
        while True:
            b = f.read(4 << 20)
            if not b:
                break
            h.update(b)
    print(h.hexdigest())
