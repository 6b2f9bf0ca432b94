#!/usr/bin/python3
"""objcheck.py BACKING CACHE [--allow-orphans] — checks the chunk objects in the
cache and on BACKING against the catalog CACHE/catalog.db, offline (daemon
stopped). CACHE may also be given as the catalog's path.

  - every chunk row has refcount > 0 and stored_len set (a clean stop leaves
    no garbage and nothing half-written), and its bytes are somewhere: cached,
    uploaded, or both (meta/upload.h U1);
  - where the catalog says the object is (CACHE/chunks/ab/cd/<hex> or a row
    of CACHE/small.db when cached (fs/lib/store.c S7), BACKING/chunks/ab/cd/<hex>
    when uploaded), it exists, is header +
    stored_len bytes, with a header (docs/FORMAT.md, fs/lib/store.h) of magic
    CKPTCHNK, version 2 and header length 72 (or version 1 and 64), the
    codec, the plain and payload lengths, the SHA-256 equal to the name and
    (version 2, payloads up to 256 KiB) the CRC-32C of the payload; a raw (codec 0) payload hashes to
    the name;
  - a row naming a pack (catalog schema 7, fs/uppack.h) has its object as the
    member image [pack_off, pack_off + pack_len) of BACKING/packs/ab/<hex>.ckp,
    checked as a loose object; every pack file on BACKING has a packs row
    (putting ones are only left by a crash: none after a clean stop), every
    live pack's file exists, is named by the SHA-256 of its bytes and has
    the live count its rows give;
  - no object file is unknown to the catalog — in the cache, none that the
    catalog does not call cached; on BACKING, none without a row unless its
    removal is queued — (unless --allow-orphans), and neither tmp/ holds
    leftovers.
Prints one line per problem and a summary; exits 1 if any problem."""
import hashlib
import os
import sqlite3
import struct
import sys

backing, cache = sys.argv[1], sys.argv[2]
if cache.endswith(".db"):
    cache = os.path.dirname(cache)
catalog = os.path.join(cache, "catalog.db")
allow_orphans = "--allow-orphans" in sys.argv
problems = []
db = sqlite3.connect("file:%s?mode=ro" % catalog, uri=True)
cols = {r[1] for r in db.execute("PRAGMA table_info(chunks)")}
packed = "pack" in cols
rows = db.execute("SELECT lower(hex(hash)), plain_len, codec, stored_len, refcount, cached, uploaded,"
                  + (" lower(hex(pack)), pack_off, pack_len" if packed else " NULL, NULL, NULL")
                  + " FROM chunks").fetchall()
packs = {}
if packed:
    packs = {r[0]: r[1:] for r in db.execute(
        "SELECT lower(hex(name)), state, live, members, size FROM packs")}
removing = {r[0] for r in db.execute("SELECT lower(hex(hash)) FROM uploads WHERE kind = 3")}


def walk(root):
    files = {}
    for dirpath, _, names in os.walk(os.path.join(root, "chunks")):
        for n in names:
            files[n] = os.path.join(dirpath, n)
    return files


in_cache, on_backing = walk(cache), walk(backing)
# store.c S7: small objects of the cache are rows of CACHE/small.db, images
# byte for byte as their files would be
small_rows = {}
small_db = os.path.join(cache, "small.db")
if os.path.exists(small_db):
    sdb = sqlite3.connect("file:%s?mode=ro" % small_db, uri=True)
    small_rows = {bytes(h).hex(): bytes(img) for h, img in sdb.execute("SELECT hash, image FROM objects")}
    sdb.close()
raw_checked = 0


def crc32c(data):
    """CRC-32C (Castagnoli), bit by bit over a table: independent of fs/lib/crc32c.c."""
    crc = 0xFFFFFFFF
    for b in data:
        crc = CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def crc_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


CRC_TABLE = crc_table()
CRC_CHECK_MAX = 256 * 1024
assert crc32c(b"123456789") == 0xE3069283


def pack_path(name):
    return os.path.join(backing, "packs", name[:2], name + ".ckp")


def check_object(where, root, files, hx, plain_len, codec, stored_len, place=None):
    global raw_checked
    path = os.path.join(root, "chunks", hx[:2], hx[2:4], hx)
    if place:
        name, off, ln = place
        try:
            with open(pack_path(name), "rb") as f:
                f.seek(off)
                data = f.read(ln)
        except OSError as e:
            problems.append("chunk %s: its pack %s cannot be read: %s" % (hx, name, e))
            return
        if len(data) != ln:
            problems.append("chunk %s: pack %s ends before its member at %d, %d bytes" % (hx, name, off, ln))
            return
    elif root == cache and not os.path.exists(path) and hx in small_rows:
        data = small_rows[hx]
    elif not os.path.exists(path):
        problems.append("chunk %s: object missing from %s at %s%s" % (hx, where, path, " (found at %s)" % files[hx] if hx in files else ""))
        return
    else:
        with open(path, "rb") as f:
            data = f.read()
    size = len(data)
    magic, ver, hcodec, zero, hlen, hplain, hpay = struct.unpack("<8sHBBIQQ", data[:32])
    if magic != b"CKPTCHNK" or (ver, hlen) not in ((2, 72), (1, 64)):
        problems.append("chunk %s in %s: bad header magic %r version %d header length %d" % (hx, where, magic, ver, hlen))
        return
    hdr, payload = data[:hlen], data[hlen:]
    if size != hlen + stored_len:
        problems.append("chunk %s in %s: object is %d bytes, expected %d + stored_len %d" % (hx, where, size, hlen, stored_len))
    # pure Python runs at a few MB/s: the CRC of large payloads is left to
    # the unit tests and the daemon's own reads
    if ver == 2 and len(payload) <= CRC_CHECK_MAX and struct.unpack("<I", hdr[64:68])[0] != crc32c(payload):
        problems.append("chunk %s in %s: payload does not match the CRC-32C in its header" % (hx, where))
    if hcodec != codec or hplain != plain_len or hpay != stored_len:
        problems.append("chunk %s in %s: header says codec %d plain %d payload %d, catalog codec %d plain %d stored %d"
                        % (hx, where, hcodec, hplain, hpay, codec, plain_len, stored_len))
    if hdr[32:64].hex() != hx:
        problems.append("chunk %s in %s: header hash %s differs from the name" % (hx, where, hdr[32:64].hex()))
    if codec == 0:
        raw_checked += 1
        if len(payload) != plain_len or hashlib.sha256(payload).hexdigest() != hx:
            problems.append("chunk %s in %s: raw payload (%d bytes) does not hash to its name" % (hx, where, len(payload)))


for hx, plain_len, codec, stored_len, refcount, cached, uploaded, pname, poff, plen in rows:
    if refcount <= 0:
        problems.append("chunk %s: refcount %d left in the catalog" % (hx, refcount))
    if stored_len is None:
        problems.append("chunk %s: stored_len unset (object never recorded as written)" % hx)
        continue
    if not cached and not uploaded:
        problems.append("chunk %s: neither cached nor uploaded: its bytes are nowhere" % hx)
    if cached:
        check_object("the cache", cache, in_cache, hx, plain_len, codec, stored_len)
    if uploaded:
        place = (pname, poff, plen) if pname else None
        check_object("BACKING" + (" (pack %s)" % pname if pname else ""), backing, on_backing, hx,
                     plain_len, codec, stored_len, place)
# packs: files against rows (fs/uppack.h, meta/catalog_pack.h K1, K5)
pack_files = {}
for dirpath, _, names in os.walk(os.path.join(backing, "packs")):
    for n in names:
        if n.endswith(".ckp"):
            pack_files[n[:-4]] = os.path.join(dirpath, n)
live_of = {}
for r in rows:
    if r[7]:
        live_of[r[7]] = live_of.get(r[7], 0) + 1
for name, (state, live, members, size) in packs.items():
    if state == 0:
        problems.append("pack %s is still being put (state putting) after a clean stop" % name)
    if live != live_of.get(name, 0):
        problems.append("pack %s counts %d live members, %d rows name it" % (name, live, live_of.get(name, 0)))
    if state == 1:
        if name not in pack_files:
            problems.append("pack %s is live but missing from BACKING" % name)
            continue
        with open(pack_files[name], "rb") as f:
            data = f.read()
        if hashlib.sha256(data).hexdigest() != name or len(data) != size:
            problems.append("pack %s: its file (%d bytes) is not named by its SHA-256 or not %d bytes" % (name, len(data), size))
        if data[:8] != b"CKPTPACK" or data[-8:] != b"CKPTPEND":
            problems.append("pack %s: no pack magic at its start and end" % name)
removing_packs = {r[0] for r in db.execute("SELECT lower(hex(hash)) FROM uploads WHERE kind = 5")} if packed else set()
pack_orphans = sorted(set(pack_files) - set(packs) - removing_packs)
cached_rows = {r[0] for r in rows if r[5]}
known = {r[0] for r in rows}
cache_orphans = sorted((set(in_cache) | set(small_rows)) - cached_rows)
backing_orphans = sorted(set(on_backing) - known - removing)
if not allow_orphans:
    if cache_orphans:
        problems.append("%d objects in CACHE/chunks or small.db the catalog does not call cached, e.g. %s" % (len(cache_orphans), in_cache.get(cache_orphans[0], "small.db row " + cache_orphans[0])))
    if backing_orphans:
        problems.append("%d object files in BACKING/chunks unknown to the catalog, e.g. %s" % (len(backing_orphans), on_backing[backing_orphans[0]]))
    if pack_orphans:
        problems.append("%d pack files in BACKING/packs unknown to the catalog, e.g. %s" % (len(pack_orphans), pack_files[pack_orphans[0]]))
    for root, what in ((backing, "BACKING"), (cache, "CACHE")):
        tmp = os.path.join(root, "tmp")
        if os.path.isdir(tmp) and os.listdir(tmp):
            problems.append("%s/tmp is not empty after a clean stop: %s" % (what, sorted(os.listdir(tmp))[:3]))
for p in problems[:20]:
    print(p)
print("objcheck: %d chunks, %d cached objects (%d in small.db), %d on BACKING, %d packs (%d members), %d raw payloads re-hashed, %d orphans, %d problems"
      % (len(rows), len(in_cache) + len(small_rows), len(small_rows), len(on_backing), len(pack_files), sum(live_of.values()), raw_checked, len(cache_orphans) + len(backing_orphans) + len(pack_orphans), len(problems)))
sys.exit(1 if problems else 0)
