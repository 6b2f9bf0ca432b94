#!/bin/bash
# bench_commitlat.sh BUILD big|small — the commit latency of one DCP-style
# save (docs/BENCH.md "Durable generation commits"): mounts BUILD/ckptfs on
# fresh dirs under /tmp, writes ckpt/step-100 without fsync (one 1 GiB file,
# or 1000 files of 4 KiB, from /dev/shm/durable-1g), renames .metadata onto
# place and prints the time until the catalog says COMMITTED.
set -e
B=$1; KIND=$2
[ -f /dev/shm/durable-1g ] || head -c 1G /dev/urandom >/dev/shm/durable-1g
W=$(mktemp -d /tmp/ckptfs-commitlat.XXXX)
mkdir -p $W/backing $W/cache $W/mnt
$B/ckptfs -f -o cache=$W/cache $W/backing $W/mnt >$W/err 2>&1 </dev/null &
PID=$!
for i in $(seq 100); do mountpoint -q $W/mnt && break; sleep 0.05; done
/usr/bin/python3 - "$W/mnt/ckpt/step-100" "$KIND" "$W/cache/catalog.db" <<'PY'
import os, sys, time
g, kind = sys.argv[1], sys.argv[2]
os.makedirs(g)
t0 = time.time()
if kind == "big":
    src = open("/dev/shm/durable-1g", "rb")
    with open(g + "/__0_0.distcp", "wb") as f:  # no fsync
        while True:
            b = src.read(8 << 20)
            if not b: break
            f.write(b)
else:
    blob = open("/dev/shm/durable-1g", "rb").read(1000 * 4096)
    for i in range(1000):
        with open("%s/f%04d.bin" % (g, i), "wb") as f:
            f.write(blob[i * 4096:(i + 1) * 4096])
t1 = time.time()
with open(g + "/.metadata.tmp", "wb") as f:
    f.write(b"meta" * 100)
t2 = time.time()
os.rename(g + "/.metadata.tmp", g + "/.metadata")  # commits at once (dcp-metadata)
t3 = time.time()
import sqlite3
cat = sys.argv[3]
while True:
    try:
        db = sqlite3.connect("file:%s?mode=ro" % cat, uri=True, timeout=5)
        r = db.execute("SELECT state FROM generations WHERE name='step-100'").fetchone()
        db.close()
        if r and r[0] == 1: break
    except sqlite3.OperationalError:
        pass
    time.sleep(0.002)
t4 = time.time()
print("%s rename %.3f s  committed after %.3f s  write %.2f s" % (kind, t3 - t2, t4 - t2, t1 - t0))
PY
sqlite3 $W/cache/catalog.db "SELECT state FROM generations WHERE name='step-100'" | grep -qx 1 || echo "NOT COMMITTED"
fusermount3 -u $W/mnt; wait $PID || true
rm -rf $W
