#!/usr/bin/python3
"""objcheck.py BACKING CATALOG [--allow-orphans] — checks the chunk objects in
BACKING against the catalog, offline (daemon stopped):

  - every chunk row has refcount > 0 and stored_len set (a clean stop leaves
    no garbage and nothing half-written);
  - its object BACKING/chunks/ab/cd/<sha256 hex> exists, is 64 + stored_len
    bytes, with a header (docs/FORMAT.md, fs/store.h) of magic CKPTCHNK,
    version 1, the codec, header length 64, the plain and payload lengths and
    the SHA-256 equal to the name;
  - a raw (codec 0) payload hashes to the name;
  - no object file is unknown to the catalog (unless --allow-orphans), and
    BACKING/tmp holds no leftovers.
Prints one line per problem and a summary; exits 1 if any problem."""
import hashlib
import os
import sqlite3
import struct
import sys

backing, catalog = sys.argv[1], sys.argv[2]
allow_orphans = "--allow-orphans" in sys.argv
problems = []
db = sqlite3.connect("file:%s?mode=ro" % catalog, uri=True)
rows = db.execute("SELECT lower(hex(hash)), plain_len, codec, stored_len, refcount FROM chunks").fetchall()
files = {}
for dirpath, _, names in os.walk(os.path.join(backing, "chunks")):
    for n in names:
        files[n] = os.path.join(dirpath, n)
raw_checked = 0
for hx, plain_len, codec, stored_len, refcount in rows:
    if refcount <= 0:
        problems.append("chunk %s: refcount %d left in the catalog" % (hx, refcount))
    if stored_len is None:
        problems.append("chunk %s: stored_len unset (object never recorded as written)" % hx)
        continue
    path = os.path.join(backing, "chunks", hx[:2], hx[2:4], hx)
    if not os.path.exists(path):
        problems.append("chunk %s: object missing at %s%s" % (hx, path, " (found at %s)" % files[hx] if hx in files else ""))
        continue
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        hdr = f.read(64)
        payload = f.read() if codec == 0 else None
    if size != 64 + stored_len:
        problems.append("chunk %s: object is %d bytes, expected 64 + stored_len %d" % (hx, size, stored_len))
    magic, ver, hcodec, zero, hlen, hplain, hpay = struct.unpack("<8sHBBIQQ", hdr[:32])
    if magic != b"CKPTCHNK" or ver != 1 or hlen != 64:
        problems.append("chunk %s: bad header magic %r version %d header length %d" % (hx, magic, ver, hlen))
    if hcodec != codec or hplain != plain_len or hpay != stored_len:
        problems.append("chunk %s: header says codec %d plain %d payload %d, catalog codec %d plain %d stored %d"
                        % (hx, hcodec, hplain, hpay, codec, plain_len, stored_len))
    if hdr[32:64].hex() != hx:
        problems.append("chunk %s: header hash %s differs from the name" % (hx, hdr[32:64].hex()))
    if codec == 0:
        raw_checked += 1
        if len(payload) != plain_len or hashlib.sha256(payload).hexdigest() != hx:
            problems.append("chunk %s: raw payload (%d bytes) does not hash to its name" % (hx, len(payload)))
known = {r[0] for r in rows}
orphans = sorted(set(files) - known)
if orphans and not allow_orphans:
    problems.append("%d object files in BACKING/chunks unknown to the catalog, e.g. %s" % (len(orphans), files[orphans[0]]))
tmp = os.path.join(backing, "tmp")
if os.path.isdir(tmp) and os.listdir(tmp) and not allow_orphans:
    problems.append("BACKING/tmp is not empty after a clean stop: %s" % sorted(os.listdir(tmp))[:3])
for p in problems[:20]:
    print(p)
print("objcheck: %d chunks, %d objects, %d raw payloads re-hashed, %d orphans, %d problems"
      % (len(rows), len(files), raw_checked, len(orphans), len(problems)))
sys.exit(1 if problems else 0)
