#!/bin/bash
# t_smallfiles — small chunk objects as rows of CACHE/small.db (fs/lib/store.c
# S7, fs/lib/storesmall.c): small files make no object file in the cache;
# a kill -9 right after 200 small files were closed (outside generations, or
# in a generation just committed) loses no byte; a cache whose small objects
# are files (as the previous version wrote them) still mounts and reads,
# with nothing on BACKING to fall back on; a damaged row is never returned
# (read again from BACKING, the log naming the chunk); eviction removes rows
# and gives their space back, and evicted small files read back from BACKING;
# ckptfs-admin gc collects a row no chunk names and keeps the others; a
# small file fsync'd after another process read small.db survives a kill -9;
# a kill -9 amid a stream of small files (small.db's puts batched behind the
# catalog's commit hook, storesmall.h T8) loses no object a committed row
# names.
. "$(dirname "$0")/lib.sh"

ck_timeout test_eviction_removes_rows_and_evicted_small_files_read_back 240

# _same NAME — CK_MNT/NAME holds exactly the files of CK_REF/NAME, byte for byte.
_same() {
	local out
	out=$(diff -r "$CK_REF/$1" "$CK_MNT/$1" 2>&1) || ck_fail "$1 differs from what was written: $(echo "$out" | head -n 4 | tr '\n' '|')"
}

_cache_object_files() { find "$CK_CACHE/chunks" -type f | wc -l; }
_rows() { sqlite3 -batch "$CK_CACHE/small.db" 'SELECT count(*) FROM objects'; }

test_kill9_right_after_closing_200_small_files_keeps_every_byte() {
	ck_mount
	ck_write_small "$CK_MNT/flat" 200 1
	ck_kill9
	assert_eq 0 "$(_cache_object_files)" "object files in the cache for small files"
	local rows
	rows=$(_rows)
	[ "$rows" -ge 190 ] || ck_fail "only $rows rows in small.db for 200 small files"
	ck_mount
	_same flat
	ck_wait_durable
	ck_umount
	ck_objcheck
}

test_kill9_right_after_committing_a_generation_of_200_small_files_keeps_every_byte() {
	ck_mount
	mkdir -p "$CK_MNT/run"
	ck_write_small "$CK_MNT/run/step-1" 200 2
	setfattr -n user.ckptfs.commit -v 1 "$CK_MNT/run/step-1"
	ck_kill9
	ck_mount
	mkdir -p "$CK_REF/run" && mv "$CK_REF/step-1" "$CK_REF/run/step-1"
	_same run/step-1
	ck_wait_durable
	ck_umount
	ck_objcheck
}

# _stream_check — after the kill of the case below: every file the writer
# closed in CK_MNT/flat reads back whole, every file shown reads a prefix of
# its bytes, no read fails.
_stream_check() {
	"$PY" - "$CK_MNT" "$CK_TMP/closed" <<'PYEOF'
import os, random, sys
mnt = sys.argv[1]
closed = [l.strip() for l in open(sys.argv[2]) if l.endswith("\n")]
bad, shown = [], 0
def read(name):
    try:
        with open(os.path.join(mnt, name), "rb") as f:
            return f.read()
    except OSError as e:
        bad.append("%s: %s" % (name, e))
for name in closed:
    if name.startswith("flat/"):
        got = read(name)
        if got is not None and got != random.Random(name).randbytes(4096):
            bad.append("%s: closed, reads %d other bytes" % (name, len(got)))
for d in ("flat", "run/step-1"):
    for n in sorted(os.listdir(os.path.join(mnt, d))):
        name = d + "/" + n
        got = read(name)
        if got is not None and got != random.Random(name).randbytes(4096)[:len(got)]:
            bad.append("%s: reads %d bytes that were not written" % (name, len(got)))
        shown += 1
print("%d closed, %d shown after the kill" % (len(closed), shown))
if bad:
    print("\n".join(bad[:8]))
    sys.exit(1)
PYEOF
}

# storesmall.h T8: small.db's puts are batched, committed by the catalog's
# commit hook before each commit of the catalog. A kill -9 while small files
# stream (a close outside generations commits the catalog, a generation's
# changes every 10 ms) lands between batched puts and a commit of the
# catalog: every file whose close returned outside generations reads back
# byte for byte, every file the remounted catalog shows (the generation's
# committed prefix too) reads without an error, its bytes a prefix of what
# was written, and no catalog row names a missing object (objcheck).
# BACKING (faultfs) fails every write meanwhile, so the cache's copy is the
# only one. Batches without the hook lose up to 255 objects that committed
# rows name (EIO at the read).
test_kill9_while_small_files_stream_loses_no_object_a_committed_row_names() {
	ck_faultfs_up
	ck_mount
	mkdir -p "$CK_MNT/flat" "$CK_MNT/run/step-1"
	ck_fault eio=write,fsync,rename,create,link,mkdir
	"$PY" - "$CK_MNT" "$CK_TMP/closed" <<'PYEOF' &
import os, random, sys
mnt, log = sys.argv[1], open(sys.argv[2], "w", buffering=1)
i = 0
while True:
    for d in ("flat", "run/step-1"):
        name = "%s/f%05d" % (d, i)
        fd = os.open(os.path.join(mnt, name), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        os.write(fd, random.Random(name).randbytes(4096))
        os.close(fd)
        log.write(name + "\n")
    i += 1
PYEOF
	local writer=$! n=0 i out
	for i in $(seq 600); do
		n=$(cat "$CK_TMP/closed" 2>/dev/null | wc -l)
		[ "$n" -ge 400 ] && break
		_ck_pid_alive "$writer" || ck_fail "the writer stopped after $n files"
		sleep 0.05
	done
	[ "$n" -ge 400 ] || ck_fail "only $n small files closed in 30 s"
	kill -STOP "$writer"
	ck_kill9
	kill -9 "$writer"
	wait "$writer" 2>/dev/null || true
	ck_fault # BACKING back (the mount probes it): it never got the objects
	ck_mount
	out=$(_stream_check 2>&1) || ck_fail "after a kill -9 amid small files: $(echo "$out" | head -n 6 | tr '\n' '|')"
	ck_log "$out"
	ck_wait_durable
	ck_umount
	ck_objcheck
}

# The previous version's cache: every object a file at chunks/ab/cd/<hex>, no
# small.db. Made from this version's rows (their images are those files byte
# for byte, T1 of storesmall.h); BACKING's objects are then removed, so that
# every byte read must come from those files.
test_a_cache_whose_small_objects_are_files_still_mounts_and_reads() {
	ck_mount
	ck_write_small "$CK_MNT/old" 100 3
	ck_wait_durable
	ck_umount
	"$PY" - "$CK_CACHE" <<'EOF'
import os, sqlite3, sys
cache = sys.argv[1]
db = sqlite3.connect(os.path.join(cache, "small.db"))
for h, img in db.execute("SELECT hash, image FROM objects"):
    hx = bytes(h).hex()
    d = os.path.join(cache, "chunks", hx[:2], hx[2:4])
    os.makedirs(d, mode=0o700, exist_ok=True)
    fd = os.open(os.path.join(d, hx), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o400)
    os.write(fd, img)
    os.close(fd)
db.close()
for suffix in ("", "-wal", "-shm"):
    if os.path.exists(os.path.join(cache, "small.db" + suffix)):
        os.remove(os.path.join(cache, "small.db" + suffix))
EOF
	[ "$(_cache_object_files)" -ge 90 ] || ck_fail "the old-style cache has only $(_cache_object_files) object files"
	rm -rf "$CK_BACKING/chunks"
	ck_mount
	_same old
	ck_write_small "$CK_MNT/new" 20 4 # new small files go to rows beside the old files
	_same new
	ck_umount
	ck_mount
	_same old
	_same new
	ck_umount
}

test_a_damaged_row_is_never_returned_and_is_read_again_from_backing() {
	ck_mount
	ck_write_small "$CK_MNT/victims" 20 5
	ck_wait_durable
	ck_umount
	local hx
	hx=$("$PY" - "$CK_CACHE/small.db" <<'EOF'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute("SELECT hash, image FROM objects").fetchall()
for h, img in rows:
    img = bytearray(img)
    img[len(img) - 1] ^= 0x40 # the payload's last byte: the CRC-32C catches it
    db.execute("UPDATE objects SET image = ? WHERE hash = ?", (bytes(img), h))
db.commit()
print(bytes(rows[0][0]).hex())
EOF
)
	ck_mount
	_same victims
	assert_contains "$(cat "$CK_DLOG")" "$hx" "a log line naming a damaged row"
	assert_contains "$(cat "$CK_DLOG")" "small.db" "the log line says the object was a row"
	ck_umount
}

# 64 MiB is the smallest cache_size: 100 MiB of small files overflow it, the
# evictor removes rows of uploaded chunks until they and small.db's WAL fit
# (fs/cache.h C8), small.db gives the space back, and every file still reads
# (the evicted ones from BACKING, cached again as rows).
test_eviction_removes_rows_and_evicted_small_files_read_back() {
	ck_mount cache_size=64m
	"$PY" - "$CK_MNT/many" "$CK_REF/many" <<'EOF'
import os, random, sys
d, ref = sys.argv[1], sys.argv[2]
rnd = random.Random(6)
os.makedirs(d)
os.makedirs(ref)
for i in range(1700):
    data = rnd.randbytes(60 * 1024)
    for root in (d, ref):
        with open(os.path.join(root, "f%04d" % i), "wb") as f:
            f.write(data)
EOF
	ck_wait_durable 120
	local i rows cached wal
	for i in $(seq 100); do # the evictor wakes every second
		cached=$(ck_sql 'SELECT coalesce(sum(stored_len), 0) FROM chunks WHERE cached = 1')
		wal=$(stat -c '%b * %B' "$CK_CACHE/small.db-wal" 2>/dev/null || echo 0)
		wal=$((wal))
		# fs/cache.h C8: the WAL counts, under the high watermark (90 %) of the bound
		[ $((cached + wal)) -le $((64 * MiB * 90 / 100)) ] && break
		sleep 0.2
	done
	[ $((cached + wal)) -le $((64 * MiB * 90 / 100)) ] ||
		ck_fail "the catalog counts $cached bytes cached and small.db's WAL holds $wal: over 90 % of the 64 MiB bound"
	[ "$wal" -gt 0 ] || ck_fail "no WAL beside small.db after 100 MiB of rows"
	rows=$(_rows)
	[ "$rows" -lt 1700 ] || ck_fail "no row was evicted ($rows rows)"
	assert_eq "$(ck_sql 'SELECT count(*) FROM chunks WHERE cached = 1')" "$rows" "rows against chunks the catalog calls cached"
	ck_umount
	local size
	size=$(stat -c %s "$CK_CACHE/small.db")
	[ "$size" -le $((80 * MiB)) ] || ck_fail "small.db holds $size bytes for a 64 MiB cache"
	ck_mount
	_same many
	ck_umount
	ck_objcheck
}

# _orphan_row SIZE — a row of small.db no chunk names (random hash and
# bytes: gc never reads an image); prints its hash.
_orphan_row() {
	"$PY" - "$CK_CACHE/small.db" "$1" <<'EOF'
import os, sqlite3, sys
db = sqlite3.connect(sys.argv[1], timeout=10)
h = os.urandom(32)
db.execute("INSERT INTO objects(hash, image) VALUES (?, ?)", (h, os.urandom(int(sys.argv[2]))))
db.commit()
print(h.hex())
EOF
}

_has_row() { sqlite3 -batch "$CK_CACHE/small.db" "SELECT count(*) FROM objects WHERE hash = x'$1'"; }

# _gc_cache ARGS... — ckptfs-admin --json gc ARGS; prints the cache side's
# "objects orphans orphan_bytes removed freed_bytes".
_gc_cache() {
	local out
	out=$("$CKPTFS_ADMIN" --json gc "$@" 2>&1) || ck_fail "ckptfs-admin gc $*: $out"
	echo "$out" | "$PY" -c 'import json, sys
c = json.load(sys.stdin)["cache"]
print(c["objects"], c["orphans"], c["orphan_bytes"], c["removed"], c["freed_bytes"])'
}

# gc sees small.db's rows as it sees the cache's object files: an orphan row
# (named by no chunk) is counted by a dry run and removed by --delete, with
# its bytes; every row a chunk names is kept and reads back. The same
# offline (--cache, no daemon).
test_gc_collects_an_orphan_row_of_small_db_and_keeps_the_named_ones() {
	ck_mount
	ck_write_small "$CK_MNT/kept" 30 7
	ck_wait_durable
	local rows orphan
	rows=$(_rows)
	[ "$rows" -ge 20 ] || ck_fail "only $rows rows for 30 small files"
	assert_eq 0 "$(_cache_object_files)" "object files in the cache"
	orphan=$(_orphan_row 3000)
	assert_eq "$((rows + 1)) 1 3000 0 0" "$(_gc_cache "$CK_MNT")" "gc dry run: the orphan row seen"
	assert_eq 1 "$(_has_row "$orphan")" "a dry run removes nothing"
	assert_eq "$((rows + 1)) 1 3000 1 3000" "$(_gc_cache --delete "$CK_MNT")" "gc --delete"
	assert_eq 0 "$(_has_row "$orphan")" "the orphan row after gc --delete"
	assert_eq "$rows" "$(_rows)" "rows a chunk names, after gc --delete"
	assert_eq "$rows" "$(ck_sql 'SELECT count(*) FROM chunks WHERE cached = 1')" "rows against cached chunks"
	assert_eq "$rows 0 0 0 0" "$(_gc_cache --delete "$CK_MNT")" "a second gc finds nothing"
	_same kept
	ck_umount
	orphan=$(_orphan_row 5000)
	assert_eq "$((rows + 1)) 1 5000 1 5000" "$(_gc_cache --delete --cache "$CK_CACHE")" "offline gc --delete"
	assert_eq 0 "$(_has_row "$orphan")" "the orphan row after offline gc"
	assert_eq "$rows" "$(_rows)" "rows after offline gc"
	ck_mount
	_same kept
	ck_umount
	ck_objcheck
}

# _small_locks: the fcntl lock lines the daemon holds on CACHE/small.db.
_small_locks() {
	local ino
	ino=$(stat -c %i "$CK_CACHE/small.db")
	awk -v p="$CK_PID" -v i=":$ino" '$5 == p && substr($6, length($6) - length(i) + 1) == i' /proc/locks | wc -l
}
# _small_fsync NAME: 1000 random bytes written to CK_MNT/NAME and fsync'd (one
# small.db row), a copy in CK_REF/NAME.
_small_fsync() {
	head -c 1000 /dev/urandom >"$CK_REF/$1"
	"$PY" -c 'import os, sys
d = open(sys.argv[1], "rb").read()
fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, d); os.fsync(fd); os.close(fd)' "$CK_REF/$1" "$CK_MNT/$1" || ck_fail "writing $1 and its fsync failed"
}

# storesmall.h T7 (found by the s28 data-path review): an fsync synced
# small.db by opening and closing it, and close() dropped the SHARED lock of
# SQLite's connection (POSIX: any close drops every fcntl lock of the process
# on the file). The next reader of small.db (here the sqlite3 shell, as
# ckptfs-admin verify does) was then alone at its close: it checkpointed and
# unlinked the -wal and -shm the daemon still wrote, and a small file fsync'd
# from then on lived in an unlinked WAL, lost at a kill -9.
test_a_small_file_fsynced_after_another_reader_of_small_db_survives_kill9() {
	ck_faultfs_up
	ck_mount
	ck_fault eio=write,fsync,rename # no upload: the cache's row is the only copy
	_small_fsync a
	local locks
	locks=$(_small_locks)
	[ "$locks" -ge 1 ] || ck_fail "after an fsync the daemon holds no fcntl lock on small.db ($locks)"
	sqlite3 "$CK_CACHE/small.db" 'SELECT count(*) FROM objects' >/dev/null
	! ls -l /proc/"$CK_PID"/fd | grep -q 'small.db-wal (deleted)' ||
		ck_fail "another reader's close unlinked the WAL the daemon writes"
	_small_fsync b
	ck_kill9
	ck_fault ""
	ck_mount
	cmp "$CK_REF/a" "$CK_MNT/a" || ck_fail "a, fsync'd, differs after a kill -9"
	cmp "$CK_REF/b" "$CK_MNT/b" || ck_fail "b, fsync'd after the reader, differs after a kill -9"
	ck_umount
}

ck_main "$@"
