#!/bin/bash
# t_persist — what survives: a clean unmount (whole trees, metadata included),
# a kill -9 of the daemon (every file closed or fsync'd before it, every
# namespace change), and what BACKING and the catalog hold afterwards (valid,
# self-describing chunk objects; chunks released when files go; corrupt or
# missing objects read as EIO, never as data); a store of format 1 (marker
# and objects without a CRC-32C) is upgraded at mount and still reads; a
# SIGTERM or a lazy unmount with files still open ends the daemon cleanly
# (status 0, no leak under ASan) and keeps every file closed or fsync'd.
. "$(dirname "$0")/lib.sh"

_catalog_checks() {
	local out
	assert_eq ok "$(ck_sql 'PRAGMA integrity_check')" "SQLite integrity_check of the catalog"
	out=$("$CKPTFS_ADMIN" check --cache "$CK_CACHE" 2>&1) || ck_fail "ckptfs-admin check --cache failed: $(echo "$out" | head -n 8 | tr '\n' '|')"
	out=$("$CKPTFS_ADMIN" verify --cache "$CK_CACHE" 2>&1) || ck_fail "ckptfs-admin verify --cache failed: $(echo "$out" | head -n 8 | tr '\n' '|')"
}

_make_tree() { # DIR: ~400 files over 30 dirs, symlinks, a hard link, modes, times
	"$PY" - "$1" <<'EOF'
import os, random, sys
rnd = random.Random(11)
root = sys.argv[1]
os.makedirs(root)
dirs = [root]
for i in range(30):
    d = os.path.join(rnd.choice(dirs), "dir%02d" % i)
    os.makedirs(d)
    dirs.append(d)
os.makedirs(os.path.join(root, "empty", "deeper"))
for i in range(400):
    d = rnd.choice(dirs)
    p = os.path.join(d, "file%03d.pt" % i)
    size = rnd.choice([0, 1, rnd.randint(1, 5000), rnd.randint(1, 300000), rnd.randint(1, 2 << 20)])
    with open(p, "wb") as f:
        f.write(rnd.randbytes(size))
    os.chmod(p, rnd.choice([0o644, 0o600, 0o755, 0o444]))
    if i % 50 == 0:
        os.symlink("file%03d.pt" % i, os.path.join(d, "link%03d" % i))
    os.utime(p, ns=(1600000000 * 10**9 + i, 1600000000 * 10**9 + i * 1000003))
os.link(p, os.path.join(root, "hardlink"))
for i, d in enumerate(sorted(dirs, reverse=True)):
    os.utime(d, ns=(1700000000 * 10**9, 1700000000 * 10**9 + i))
EOF
}

test_tree_of_many_files_survives_unmount_and_mount() {
	_make_tree "$CK_REF/tree"
	ck_mount
	cp -a "$CK_REF/tree" "$CK_MNT/tree"
	local want before after
	want=$("$PY" "$CK_HELPERS/treesum.py" "$CK_REF/tree")
	before=$("$PY" "$CK_HELPERS/treesum.py" "$CK_MNT/tree")
	[ "$want" = "$before" ] || ck_fail "tree copied with cp -a differs from its source: $(diff <(echo "$want") <(echo "$before") | head -n 6 | tr '\n' '|')"
	ck_remount
	after=$("$PY" "$CK_HELPERS/treesum.py" "$CK_MNT/tree")
	[ "$before" = "$after" ] || ck_fail "tree differs after remount: $(diff <(echo "$before") <(echo "$after") | head -n 6 | tr '\n' '|')"
	assert_eq 2 "$(stat -c %h "$CK_MNT/tree/hardlink")" "nlink of the hard link after remount"
	ck_umount
	_catalog_checks
	ck_objcheck
}

test_kill9_keeps_every_closed_or_fsynced_file() {
	local f
	ck_rand "$CK_REF/closed_big" $((5 * MiB + 3))
	ck_rand "$CK_REF/closed_small" 777
	ck_rand "$CK_REF/rewritten_old" $((2 * MiB))
	ck_rand "$CK_REF/rewritten" $((MiB + 1))
	ck_rand "$CK_REF/fsynced_open" $((7 * MiB + 11))
	ck_rand "$CK_REF/partly_fsynced" $((4 * MiB))
	ck_rand "$CK_REF/never_synced" $((3 * MiB))
	ck_mount
	cp "$CK_REF/closed_big" "$CK_MNT/closed_big"
	cp "$CK_REF/closed_small" "$CK_MNT/closed_small"
	: >"$CK_MNT/closed_empty"
	cp "$CK_REF/rewritten_old" "$CK_MNT/rewritten"
	cp "$CK_REF/rewritten" "$CK_MNT/rewritten" # O_TRUNC rewrite, closed
	"$PY" "$CK_HELPERS/pwrite.py" "$CK_REF/closed_big" "$CK_MNT/presized_random" random 65536 --presize
	cp "$CK_REF/closed_big" "$CK_MNT/truncated"
	truncate -s 1000000 "$CK_MNT/truncated"
	head -c 1000000 "$CK_REF/closed_big" >"$CK_REF/truncated"
	# Namespace changes, all completed before the kill.
	mkdir -p "$CK_MNT/step-2/sub"
	cp "$CK_REF/closed_small" "$CK_MNT/step-2/.metadata.tmp"
	mv "$CK_MNT/step-2/.metadata.tmp" "$CK_MNT/step-2/.metadata"
	ln -s step-2 "$CK_MNT/latest"
	echo gone >"$CK_MNT/deleted"
	rm "$CK_MNT/deleted"
	chmod 600 "$CK_MNT/closed_small"
	# Files still open at the kill: fsync'd whole; fsync'd then more written;
	# never synced.
	ck_bg "$PY" "$CK_HELPERS/holdopen.py" "$CK_REF/fsynced_open" "$CK_MNT/fsynced_open" "$CK_TMP/r1" --fsync
	local h1=$CK_BG_PID
	ck_bg "$PY" "$CK_HELPERS/holdopen.py" "$CK_REF/partly_fsynced" "$CK_MNT/partly_fsynced" "$CK_TMP/r2" --fsync-at $((3 * MiB)) --then-write $MiB
	local h2=$CK_BG_PID
	ck_bg "$PY" "$CK_HELPERS/holdopen.py" "$CK_REF/never_synced" "$CK_MNT/never_synced" "$CK_TMP/r3"
	local h3=$CK_BG_PID
	ck_wait_file "$CK_TMP/r1"
	ck_wait_file "$CK_TMP/r2"
	ck_wait_file "$CK_TMP/r3"
	ck_kill9 $h1 $h2 $h3
	ck_mount
	for f in closed_big closed_small rewritten fsynced_open truncated; do
		assert_file_eq "$CK_REF/$f" "$CK_MNT/$f"
	done
	assert_file_eq "$CK_REF/closed_big" "$CK_MNT/presized_random"
	assert_size "$CK_MNT/closed_empty" 0
	assert_eq 600 "$(fsop mode "$CK_MNT/closed_small")" "mode set before the kill"
	assert_file_eq "$CK_REF/closed_small" "$CK_MNT/step-2/.metadata"
	assert_not_exists "$CK_MNT/step-2/.metadata.tmp"
	[ -d "$CK_MNT/step-2/sub" ] || ck_fail "directory made before the kill is gone"
	assert_eq step-2 "$(readlink "$CK_MNT/latest")" "symlink made before the kill"
	assert_not_exists "$CK_MNT/deleted"
	# fsync'd 3 MiB then 1 MiB more: the 3 MiB, or all 4 MiB; never a mix.
	local n
	n=$(ck_size "$CK_MNT/partly_fsynced")
	[ "$n" = $((3 * MiB)) ] || [ "$n" = $((4 * MiB)) ] ||
		ck_fail "partly_fsynced has $n bytes after the kill: expected the fsync'd 3 MiB (or all 4 MiB)"
	cmp -n "$n" "$CK_REF/partly_fsynced" "$CK_MNT/partly_fsynced" || ck_fail "partly_fsynced: the fsync'd bytes differ after the kill"
	# Never synced nor closed: some committed state, readable, not garbage.
	n=$(ck_size "$CK_MNT/never_synced")
	cmp -n "$n" "$CK_REF/never_synced" "$CK_MNT/never_synced" || ck_fail "never_synced: $n bytes after the kill that are not a prefix of what was written"
	# The recovered file system works, and stops cleanly.
	echo after >"$CK_MNT/after"
	ck_umount
	_catalog_checks
	ck_objcheck --allow-orphans
}

# fs/ns.h invariant 11: a large file of an OPEN save, closed without fsync,
# survives a kill -9 that comes right after its close (no group-commit
# window: catalog_defer.c D3), kept in the held save byte for byte; three
# rounds, the kill within a millisecond of close(2) returning.
test_kill9_right_after_close_keeps_a_large_file_of_an_open_save() {
	local r
	for r in 1 2 3; do
		ck_rand "$CK_REF/big$r" $((4 * MiB + r))
		ck_mount quiet=30
		mkdir -p "$CK_MNT/run$r/step-1"
		"$PY" -c "
import os, signal, sys
src, dst, pid = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(dst, 'wb') as f:
    f.write(open(src, 'rb').read())
os.kill(pid, signal.SIGKILL)" "$CK_REF/big$r" "$CK_MNT/run$r/step-1/rank0.bin" "$CK_PID"
		ck_killed9
		ck_mount quiet=30
		assert_file_eq "$CK_REF/big$r" "$CK_MNT/run$r/step-1/rank0.bin"
		ck_umount
	done
}

test_kill9_during_parallel_writes_recovers_a_consistent_catalog() {
	local i writers=()
	# Each writer records a file in done.N once close() returned.
	cat >"$CK_TMP/writer.py" <<'EOF'
import os, sys
mnt, ref, w = sys.argv[1], sys.argv[2], sys.argv[3]
for k in range(1000):
    data = os.urandom(((k * 7919) % 3000 + 1) * 1000)
    name = "w%s_%d" % (w, k)
    try:
        with open(os.path.join(mnt, name), "wb") as f:
            f.write(data)
        with open(os.path.join(ref, name), "wb") as f:
            f.write(data)
        with open(os.path.join(ref, "done.%s" % w), "a") as f:
            f.write(name + "\n")
    except OSError:
        break
EOF
	ck_mount
	for i in 1 2 3 4; do
		ck_bg "$PY" "$CK_TMP/writer.py" "$CK_MNT" "$CK_REF" $i
		writers+=("$CK_BG_PID")
	done
	sleep 3
	ck_kill9 "${writers[@]}"
	ck_mount
	local names bad=0 total=0 n
	names=$(cat "$CK_REF"/done.* 2>/dev/null) || true
	for n in $names; do
		total=$((total + 1))
		cmp -s "$CK_REF/$n" "$CK_MNT/$n" || {
			bad=$((bad + 1))
			ck_log "closed before the kill but differs after: $n"
		}
	done
	[ $total -gt 0 ] || ck_fail "no writer finished a file in 3 s"
	[ $bad = 0 ] || ck_fail "$bad of $total files closed before the kill differ after recovery"
	# Every file present reads without error (committed state, not garbage).
	find "$CK_MNT" -type f -exec cat {} + >/dev/null || ck_fail "reading the files present after recovery failed"
	ck_umount
	_catalog_checks
	# Nothing leaked: deleting everything leaves no chunk behind.
	ck_mount
	find "$CK_MNT" -mindepth 1 -delete
	ck_umount
	assert_eq 0 "$(ck_chunk_count)" "chunks left in the catalog after deleting every file"
	ck_log "$total files were closed before the kill"
}
ck_timeout test_kill9_during_parallel_writes_recovers_a_consistent_catalog 240

test_clean_unmount_leaves_valid_objects_for_every_chunk_in_backing() {
	ck_mount
	ck_rand "$CK_REF/a" $((9 * MiB + 1))
	cp "$CK_REF/a" "$CK_MNT/a"
	yes "compressible line of a json or log file" | head -c $((3 * MiB)) >"$CK_MNT/text"
	"$PY" -c 'import os, sys; open(sys.argv[1], "wb").write(os.urandom(5000) + bytes(2 << 20) + os.urandom(5000))' "$CK_MNT/zeros"
	ck_umount
	ck_objcheck
	_catalog_checks
	local stored unique
	stored=$(ck_admin_stat stored_bytes)
	unique=$(ck_admin_stat unique_bytes)
	ck_log "unique_bytes $unique stored_bytes $stored"
	# The 3 MiB of repeated text compresses (LZ4): stored < unique.
	assert_lt "$stored" "$unique" "stored_bytes (LZ4 on repetitive text) vs unique_bytes"
}

test_deleting_files_releases_their_chunks() {
	ck_mount
	ck_rand "$CK_REF/a" $((3 * MiB))
	ck_rand "$CK_REF/b" $((3 * MiB))
	cp "$CK_REF/a" "$CK_MNT/a"
	cp "$CK_REF/a" "$CK_MNT/a_copy"
	cp "$CK_REF/b" "$CK_MNT/b"
	ck_umount
	local full
	full=$(ck_unique_bytes)
	assert_lt "$full" $((7 * MiB)) "unique bytes of a, a_copy, b"
	ck_mount
	rm "$CK_MNT/b"
	rm "$CK_MNT/a"
	ck_umount
	local u
	u=$(ck_unique_bytes)
	assert_eq $((3 * MiB)) "$u" "unique bytes once b and a are deleted (a_copy still holds a's chunks)"
	ck_objcheck
	ck_mount
	assert_file_eq "$CK_REF/a" "$CK_MNT/a_copy"
	rm "$CK_MNT/a_copy"
	ck_umount
	assert_eq 0 "$(ck_chunk_count)" "chunk rows after deleting every file"
	assert_eq 0 "$(find "$CK_BACKING/chunks" -type f | wc -l)" "chunk objects left in BACKING after deleting every file"
}

test_corrupt_or_missing_chunk_object_reads_as_eio() {
	ck_mount
	ck_rand "$CK_REF/victim" $((3 * MiB))
	ck_rand "$CK_REF/other" $((2 * MiB))
	cp "$CK_REF/victim" "$CK_MNT/victim"
	cp "$CK_REF/other" "$CK_MNT/other"
	ck_umount
	# The chunks of victim only.
	local hashes obj h
	hashes=$(ck_sql "SELECT DISTINCT lower(hex(e.hash)) FROM extents e JOIN dirents d ON d.ino = e.ino WHERE d.name = 'victim'")
	[ -n "$hashes" ] || ck_fail "no extents for victim in the catalog"
	h=$(echo "$hashes" | head -n 1)
	obj=$CK_BACKING/chunks/${h:0:2}/${h:2:2}/$h
	[ -f "$obj" ] || ck_fail "object $obj not found"
	# Its cache copy evicted (as cache_size would): reads need BACKING's copy.
	rm -f "$CK_CACHE/chunks/${h:0:2}/${h:2:2}/$h"
	ck_sql "UPDATE chunks SET cached = 0 WHERE lower(hex(hash)) = '$h'" >/dev/null
	# Flip one payload byte.
	"$PY" -c 'import sys; f = open(sys.argv[1], "r+b"); f.seek(1064); b = f.read(1); f.seek(1064); f.write(bytes([b[0] ^ 0x5a]))' "$obj"
	ck_mount
	local out rc=0
	out=$(cat "$CK_MNT/victim" 2>&1 >/dev/null) || rc=$?
	[ $rc != 0 ] || ck_fail "reading a file whose chunk object is corrupt succeeded (the data must not be served)"
	assert_contains "$out" "Input/output error" "error reading a corrupt chunk"
	assert_file_eq "$CK_REF/other" "$CK_MNT/other"
	ck_umount
	grep -q -i "${h:0:12}" "$CK_DLOG" "$CK_DERR" 2>/dev/null ||
		ck_fail "no log line names the corrupt chunk ${h:0:12}... (log $CK_DLOG)"
	# A missing object: EIO as well.
	rm -f "$obj"
	ck_mount
	rc=0
	out=$(cat "$CK_MNT/victim" 2>&1 >/dev/null) || rc=$?
	[ $rc != 0 ] || ck_fail "reading a file whose chunk object is missing succeeded"
	assert_contains "$out" "Input/output error" "error reading a missing chunk"
	ck_umount
}

test_small_cache_disk_saves_succeed_through_backpressure_and_eviction() {
	# The cache on a 48 MiB tmpfs; 5 x 12 MiB of incompressible data cannot all
	# stay in it. Writers wait while the data not yet on BACKING is at its
	# bound, uploaded chunks are evicted to make room: every write, fsync and
	# close succeeds, and every file reads back intact (evicted chunks come
	# from BACKING), also after a remount.
	local small=$CK_TMP/small i
	mkdir "$small"
	mount -t tmpfs -o size=48m tmpfs "$small"
	ck_register_mount "$small"
	CK_CACHE=$small/cache
	ck_mount
	for i in 1 2 3 4 5; do
		ck_rand "$CK_REF/f$i" $((12 * MiB))
		dd if="$CK_REF/f$i" of="$CK_MNT/f$i" bs=1M conv=fsync status=none 2>"$CK_TMP/dd$i.err" ||
			ck_fail "writing f$i into a mount with a small cache failed: $(head -n 1 "$CK_TMP/dd$i.err")"
	done
	for i in 1 2 3 4 5; do assert_file_eq "$CK_REF/f$i" "$CK_MNT/f$i"; done
	[ "$(ck_sql 'SELECT COUNT(*) FROM chunks WHERE cached = 0')" -gt 0 ] || ck_fail "nothing was evicted from a 48 MiB cache after 60 MiB of saves"
	ck_remount
	for i in 1 2 3 4 5; do assert_file_eq "$CK_REF/f$i" "$CK_MNT/f$i"; done
	ck_umount
	ck_objcheck
}

# ---- store format 1 (before chunk objects carried a CRC-32C)

# _obj HASH — the chunk object of HASH on BACKING; _cached HASH — its cache copy.
_obj() { echo "$CK_BACKING/chunks/${1:0:2}/${1:2:2}/$1"; }
_cached() { echo "$CK_CACHE/chunks/${1:0:2}/${1:2:2}/$1"; }
# _hdr OBJ — "version header_length" from an object's header.
_hdr() { "$PY" -c 'import struct, sys; h = open(sys.argv[1], "rb").read(16); print(*struct.unpack_from("<H", h, 8), *struct.unpack_from("<I", h, 12))' "$1"; }
# _evict HASH — drops the cache copy of a chunk (as cache_size would), while
# unmounted: reads then have only BACKING's object.
_evict() {
	rm -f "$(_cached "$1")"
	ck_sql "UPDATE chunks SET cached = 0 WHERE lower(hex(hash)) = '$1'" >/dev/null
}
# _to_format1 OBJ — rewrites a format-2 object as the format-1 object of the
# same chunk: version 1, a 64-byte header (no CRC-32C), the payload at 64. A
# new file renamed over the old one (never a hard link the cache shares).
_to_format1() {
	"$PY" - "$1" <<'PYEOF'
import os, shutil, struct, sys
path = sys.argv[1]
data = open(path, "rb").read()
assert data[:8] == b"CKPTCHNK", "bad magic"
assert struct.unpack_from("<H", data, 8)[0] == 2 and struct.unpack_from("<I", data, 12)[0] == 72, "not a format-2 object"
assert struct.unpack_from("<Q", data, 24)[0] == len(data) - 72, "payload length"
hdr = bytearray(data[:64])
struct.pack_into("<H", hdr, 8, 1)
struct.pack_into("<I", hdr, 12, 64)
tmp = path + ".v1"
with open(tmp, "wb") as f:
    f.write(bytes(hdr) + data[72:])
shutil.copymode(path, tmp)
os.replace(tmp, path)
PYEOF
}
# _xor_byte FILE POS — flips bits of one byte in place (twice restores it).
_xor_byte() {
	"$PY" -c 'import sys
f = open(sys.argv[1], "r+b"); f.seek(int(sys.argv[2])); b = f.read(1)
assert len(b) == 1, "offset past the end"
f.seek(int(sys.argv[2])); f.write(bytes([b[0] ^ 0x5a])); f.close()' "$1" "$2"
}

# A store written before chunk objects carried a CRC-32C: its marker says
# format 1, its objects have 64-byte headers. Mounting it rewrites the marker
# to format 3 (logged once), its files read back byte-identical, a format-1
# object among them included; that object stays as it is and is checked by
# SHA-256: a flipped payload byte on BACKING reads as EIO, and a damaged
# format-1 cache copy is caught by the default verify=crc32c (it has no CRC,
# so it is re-hashed) and replaced from BACKING.
test_store_format_1_is_upgraded_and_its_objects_still_read() {
	local f h mid n marker=$CK_BACKING/ckptfs.store
	ck_rand "$CK_REF/a" $((6 * MiB)) # chunks are at most 4 MiB: two at least
	ck_rand "$CK_REF/b" $((2 * MiB + 5))
	ck_rand "$CK_REF/small" 777
	yes "a compressible line of a json file" | head -c $((MiB + 3)) >"$CK_REF/text"
	ck_mount
	mkdir "$CK_MNT/d"
	for f in a b small text; do cp "$CK_REF/$f" "$CK_MNT/d/$f"; done
	ck_umount
	local fmt
	fmt=$(ck_store_format 3) # 5 with packs=on in CKPTFS_TEST_MOUNT_OPTS
	assert_eq "ckptfs store format $fmt" "$(head -n 1 "$marker")" "the marker of a new store"
	local idline
	idline=$(sed -n '/^id /p' "$marker")
	# Back to a format-1 store: its marker, and one chunk of a (not its
	# first, so that a mixes format-2 and format-1 objects) as a format-1
	# object.
	printf 'ckptfs store format 1\n%s\n' "$idline" >"$marker" # its id kept (fs/main.c M1)
	h=$(ck_sql "SELECT lower(hex(e.hash)) FROM extents e JOIN dirents d ON d.ino = e.ino WHERE d.name = 'a' ORDER BY e.off")
	n=$(echo "$h" | grep -c .) || true
	[ "$n" -ge 2 ] || ck_fail "a (6 MiB) has $n extents, expected at least 2"
	mid=$(echo "$h" | sed -n "$((n / 2 + 1))p")
	assert_eq 1 "$(echo "$h" | grep -c -x "$mid")" "uses of chunk $mid by a"
	[ -f "$(_obj "$mid")" ] || ck_fail "no object for chunk $mid on BACKING"
	_evict "$mid"
	_to_format1 "$(_obj "$mid")"
	assert_eq "1 64" "$(_hdr "$(_obj "$mid")")" "version and header length of the converted object"
	cp -p "$(_obj "$mid")" "$CK_TMP/v1"
	ck_log "chunk $mid (extent $((n / 2 + 1)) of $n of a) is now a format-1 object"

	ck_mount
	assert_contains "$(cat "$CK_DLOG")" "BACKING $CK_BACKING: store format 1 upgraded to $fmt" "the daemon log of the first mount of a format-1 store"
	assert_eq "ckptfs store format $fmt" "$(head -n 1 "$marker")" "the marker after the upgrade"
	assert_eq "$(printf 'ckptfs store format %s\n%s\nX' "$fmt" "$idline")" "$(cat "$marker"; echo X)" "the marker's bytes after the upgrade"
	for f in a b small text; do assert_file_eq "$CK_REF/$f" "$CK_MNT/d/$f"; done
	local out
	out=$(timeout 120 "$CKPTFS_ADMIN" verify "$CK_MNT" 2>&1) || ck_fail "ckptfs-admin verify of a store with a format-1 object failed: $(echo "$out" | tr '\n' '|')"
	ck_umount
	cmp -s "$CK_TMP/v1" "$(_obj "$mid")" || ck_fail "the format-1 object of $mid was changed by reading it"
	ck_objcheck

	# Upgraded once: the next mount has nothing to upgrade.
	ck_mount
	assert_not_contains "$(cat "$CK_DLOG")" "upgraded" "the daemon log of a mount of an upgraded store"
	assert_file_eq "$CK_REF/a" "$CK_MNT/d/a"
	ck_umount

	# A payload byte flipped in the format-1 object on BACKING, no cache
	# copy: SHA-256 catches it, the read fails with EIO.
	_evict "$mid"
	_xor_byte "$(_obj "$mid")" $((64 + $(ck_size "$(_obj "$mid")") / 2))
	ck_mount
	local rc=0
	out=$(timeout 60 cat "$CK_MNT/d/a" 2>&1 >/dev/null) || rc=$?
	[ $rc != 124 ] || ck_fail "reading a with a damaged format-1 object hung"
	[ $rc != 0 ] || ck_fail "reading a succeeded although its format-1 object has a flipped payload byte"
	assert_contains "$out" "Input/output error" "error reading a with a damaged format-1 object"
	assert_contains "$(grep -F "$mid" "$CK_DLOG")" "BACKING $CK_BACKING: chunk $mid is corrupt" "the log line of the damaged format-1 object"
	assert_file_eq "$CK_REF/b" "$CK_MNT/d/b"
	ck_umount

	# BACKING's format-1 object whole again; a damaged format-1 copy of it
	# in the cache (its own file): read with the default verify=crc32c, it
	# is re-hashed, found wrong, and replaced from BACKING.
	cp -p "$CK_TMP/v1" "$(_obj "$mid")"
	mkdir -p "$(dirname "$(_cached "$mid")")"
	cp "$CK_TMP/v1" "$(_cached "$mid")"
	ck_sql "UPDATE chunks SET cached = 1 WHERE lower(hex(hash)) = '$mid'" >/dev/null
	_xor_byte "$(_cached "$mid")" $((64 + 1000))
	ck_mount
	assert_file_eq "$CK_REF/a" "$CK_MNT/d/a"
	assert_contains "$(grep -F "$mid" "$CK_DLOG")" "store $CK_CACHE: chunk $mid is corrupt: bytes do not match their hash" \
		"the log line of the damaged format-1 cache copy (re-hashed under verify=crc32c)"
	ck_umount
	ck_objcheck
}

test_admin_tools_work_on_a_live_mount() {
	ck_mount
	ck_rand "$CK_REF/a" $((2 * MiB))
	cp "$CK_REF/a" "$CK_MNT/a"
	local out
	out=$("$CKPTFS_ADMIN" stats "$CK_MNT" 2>&1) || ck_fail "ckptfs-admin stats MOUNTPOINT failed: $out"
	assert_contains "$out" "logical_bytes $((2 * MiB))" "ckptfs-admin stats on the mount"
	out=$("$CKPTFS_ADMIN" check "$CK_MNT" 2>&1) || ck_fail "ckptfs-admin check MOUNTPOINT failed: $out"
	out=$("$CKPTFS_ADMIN" verify "$CK_MNT" 2>&1) || ck_fail "ckptfs-admin verify MOUNTPOINT failed: $out"
	local rc=0
	"$CKPTFS_ADMIN" stats "$CK_TMP" >/dev/null 2>&1 || rc=$?
	assert_eq 3 "$rc" "exit status of ckptfs-admin stats on a directory that is not a ckptfs mount"
	ck_umount
}

# Files for the open-handle cases: three written and closed, one written,
# fsync'd and left open, two written and left open (never closed or synced).
_open_files_setup() {
	local f
	for f in closed_a closed_b closed_c fsynced open_a open_b; do
		ck_rand "$CK_REF/$f" $((RANDOM * 40 + 1))
	done
	for f in closed_a closed_b closed_c; do
		cp "$CK_REF/$f" "$CK_MNT/$f"
	done
}

# Starts a helper that holds handles open on the mount until killed: the
# closed files read-only, fsynced and open_* for writing. $HOLDER is its PID.
_hold_files_open() {
	ck_bg "$PY" -c 'import os, sys, time
mnt, ref, ready = sys.argv[1:4]
fds = [os.open(os.path.join(mnt, f), os.O_RDONLY) for f in ("closed_a", "closed_b", "closed_c")]
for f in ("fsynced", "open_a", "open_b"):
    fd = os.open(os.path.join(mnt, f), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    data = open(os.path.join(ref, f), "rb").read()
    while data:
        data = data[os.write(fd, data):]
    if f == "fsynced":
        os.fsync(fd)
    fds.append(fd)
open(ready, "w").close()
time.sleep(600)' "$CK_MNT" "$CK_REF" "$CK_TMP/ready"
	HOLDER=$CK_BG_PID
	ck_wait_file "$CK_TMP/ready"
}

# After a remount: the closed and fsync'd files byte for byte; the files
# never closed are either gone or hold a prefix of what was written (the
# design allows losing them, never reading wrong bytes).
_open_files_check() {
	local f size
	for f in closed_a closed_b closed_c fsynced; do
		assert_file_eq "$CK_REF/$f" "$CK_MNT/$f"
	done
	for f in open_a open_b; do
		[ -e "$CK_MNT/$f" ] || continue
		size=$(ck_size "$CK_MNT/$f")
		assert_le "$size" "$(ck_size "$CK_REF/$f")" "size of $f (open at the stop) after remount"
		cmp -s -n "$size" "$CK_REF/$f" "$CK_MNT/$f" ||
			ck_fail "$f (open at the stop) is not a prefix of what was written"
		ck_log "$f, open at the stop: $size of $(ck_size "$CK_REF/$f") bytes kept"
	done
}

test_sigterm_with_files_open_exits_0_without_leaks_and_keeps_closed_files() {
	ck_mount
	_open_files_setup
	_hold_files_open
	ck_term # exit status 0 and no LeakSanitizer report: the handles are freed
	kill -9 "$HOLDER" 2>/dev/null || true
	wait "$HOLDER" 2>/dev/null || true
	assert_contains "$(cat "$CK_DLOG")" "6 file handles (3 for writing" "the daemon's log of the handles open at SIGTERM"
	ck_mount
	_open_files_check
	ck_umount
	_catalog_checks
	ck_objcheck
}

test_lazy_unmount_with_files_open_exits_0_without_leaks_and_keeps_closed_files() {
	ck_mount
	_open_files_setup
	_hold_files_open
	assert_fails fusermount3 -u "$CK_MNT" # EBUSY while files are open
	ck_is_mounted "$CK_MNT" || ck_fail "a refused fusermount3 -u unmounted $CK_MNT"
	fusermount3 -u -z "$CK_MNT" || ck_fail "fusermount3 -u -z $CK_MNT failed"
	ck_is_mounted "$CK_MNT" && ck_fail "$CK_MNT still mounted after fusermount3 -u -z"
	_ck_pid_alive "$CK_PID" || ck_fail "the daemon exited while files on its lazily unmounted mount were open"
	# the last close ends the mount; the kernel drops the RELEASEs it had not
	# sent yet, so the daemon must free those handles itself
	kill -9 "$HOLDER"
	wait "$HOLDER" 2>/dev/null || true
	ck_daemon_exit "a lazy unmount (fusermount3 -u -z) with files open"
	ck_mount
	_open_files_check
	ck_umount
	_catalog_checks
	ck_objcheck
}

# fsync and fsyncdir promise durability (catalog.c invariant 10): an fsync
# of the catalog's WAL after the change, before the call returns. The old
# cat_sync committed `UPDATE meta SET value = value`, which SQLite skips (no
# byte changes: no WAL frame, no fsync). Seen through ck_mount_synclog.
test_fsync_of_a_directory_after_a_rename_syncs_the_catalog() {
	ck_mount_synclog
	ck_rand "$CK_REF/a" $((300 * 1024))
	"$PY" - "$CK_REF/a" "$CK_MNT" "$CK_SYNCLOG" <<'PYEOF'
import os, sys
d = open(sys.argv[1], "rb").read()
mnt, log = sys.argv[2], sys.argv[3]
with open(mnt + "/model.tmp", "wb") as f:
    f.write(d); f.flush(); os.fsync(f.fileno())
os.rename(mnt + "/model.tmp", mnt + "/model.pt")
n0 = sum(1 for _ in open(log))
fd = os.open(mnt, os.O_RDONLY | os.O_DIRECTORY)
os.fsync(fd)  # the classic atomic save: the rename is durable once this returns
os.close(fd)
new = open(log).read().splitlines()[n0:]
if not any(l.startswith("sync ") and "catalog.db" in l for l in new):
    sys.exit("fsync(dir) returned without any fsync of the catalog: events %r" % new)
PYEOF
	assert_file_eq "$CK_REF/a" "$CK_MNT/model.pt"
	ck_umount
}

test_fsync_of_a_file_reopened_after_close_syncs_the_catalog() {
	ck_mount_synclog
	ck_rand "$CK_REF/a" $((300 * 1024))
	cp "$CK_REF/a" "$CK_MNT/latest" # written and closed, no fsync
	"$PY" - "$CK_MNT/latest" "$CK_SYNCLOG" <<'PYEOF'
import os, sys
path, log = sys.argv[1], sys.argv[2]
n0 = sum(1 for _ in open(log))
fd = os.open(path, os.O_RDONLY)
os.fsync(fd)  # e.g. `sync FILE` (coreutils), or a saver that fsyncs after close
os.close(fd)
new = open(log).read().splitlines()[n0:]
if not any(l.startswith("sync ") and "catalog.db" in l for l in new):
    sys.exit("fsync returned without any fsync of the catalog: events %r" % new)
PYEOF
	assert_file_eq "$CK_REF/a" "$CK_MNT/latest"
	ck_umount
}

# The first fsync of a written file after a mount makes its commit durable
# too (invariant 10). The durable commit once switched SQLite to
# synchronous=FULL through a statement prepared at open, but SQLite applies
# that pragma when it is prepared, not when it runs: the open's later
# NORMAL won, and the first fsync of each mount returned before its commit
# reached the WAL's disk (review 32A F2). Each of three files is fsync'd
# while open; every fsync must be followed by a sync of the catalog's WAL
# before it returns.
test_first_fsync_after_a_mount_syncs_the_catalog() {
	ck_mount_synclog
	ck_rand "$CK_REF/y" $((300 * 1024))
	"$PY" - "$CK_REF/y" "$CK_MNT/y" "$CK_SYNCLOG" <<'PYEOF'
import os, sys
d = open(sys.argv[1], "rb").read()
path, log = sys.argv[2], sys.argv[3]
for i in range(3):
    with open("%s.%d.json" % (path, i), "wb") as f:
        f.write(d[i:] + d[:i]); f.flush()
        n0 = sum(1 for _ in open(log))
        os.fsync(f.fileno())
        new = open(log).read().splitlines()[n0:]
        if not any(l.startswith("sync ") and "catalog.db-wal" in l for l in new):
            sys.exit("fsync %d of a written file returned without an fsync of the catalog's WAL: events %r" % (i, new))
PYEOF
	for i in 0 1 2; do
		"$PY" -c 'import sys; d=open(sys.argv[1],"rb").read(); i=int(sys.argv[3]); sys.exit(open(sys.argv[2],"rb").read() != d[i:]+d[:i])' \
			"$CK_REF/y" "$CK_MNT/y.$i.json" "$i" || ck_fail "y.$i.json does not read back as written"
	done
	ck_umount
}

# catalog.c invariant 11: a chunk object whose last reference a commit
# dropped is unlinked only after that commit is durable (a WAL fsync in
# between). A power loss keeps only what was fsync'd: an unlink made first
# can survive while the commit is lost, and the catalog names a gone object.
test_a_replaced_chunk_is_unlinked_only_after_the_commit_dropping_it_is_synced() {
	local n0 hex line i=0
	ck_mount_synclog
	ck_rand "$CK_REF/a" $((300 * 1024)) # one chunk, an object file (> 64 KiB)
	ck_rand "$CK_REF/b" $((300 * 1024))
	_persist_fsynced "$CK_REF/a" "$CK_MNT/latest"
	n0=$(ck_synclog_lines)
	cp "$CK_REF/b" "$CK_MNT/latest" # rewritten in place (DeepSpeed's latest), no fsync
	assert_file_eq "$CK_REF/b" "$CK_MNT/latest"
	hex=$(sha256sum "$CK_REF/a" | cut -c1-64)
	until ck_synclog_since "$n0" | grep -q "^unlink .*$hex\$"; do
		i=$((i + 1))
		[ $i -le 400 ] || ck_fail "a's object $hex was never removed (events: $(ck_synclog_since "$n0" | tr '\n' '|'))"
		sleep 0.05
	done
	line=$(ck_synclog_since "$n0" | grep -n "^unlink .*$hex\$" | head -n 1 | cut -d: -f1)
	ck_synclog_since "$n0" | head -n "$line" | grep -q '^sync .*catalog\.db' ||
		ck_fail "a's object was unlinked before any fsync of the catalog after the rewrite: a power loss can keep the unlink and lose the commit (events: $(ck_synclog_since "$n0" | head -n "$line" | tr '\n' '|'))"
	ck_umount
	ck_mount
	assert_file_eq "$CK_REF/b" "$CK_MNT/latest"
	ck_umount
}


# catalog.c invariant 13 (review 32A F3): torch.save to a temporary, then
# os.replace over a file fsync'd before, no fsync (TRAINERS.md). The
# rename drops the old object's last reference; the sweep's WAL sync (11)
# makes the commit naming the new object durable too, so the new object is
# synced (or the cache syncfs'd) before that WAL sync and the old object's
# unlink, else a power loss leaves model.pt naming an empty or missing
# object with the old one gone. BACKING refuses writes (faultfs), so no
# upload of the new object hides the order.
_persist_fsynced() { # SRC DST — DST written with SRC's bytes and fsync'd before its close
	"$PY" - "$1" "$2" <<'PYEOF'
import os, sys
d = open(sys.argv[1], "rb").read()
with open(sys.argv[2], "wb") as f:
    f.write(d); f.flush(); os.fsync(f.fileno())
PYEOF
}
_persist_replace_events() { # N0 HEX_OLD — prints the events up to the old object's unlink
	local i=0 line
	until ck_synclog_since "$1" | grep -q "^unlink .*$2\$"; do
		i=$((i + 1))
		[ $i -le 400 ] || ck_fail "the old object $2 was never removed (events: $(ck_synclog_since "$1" | tr '\n' '|'))"
		sleep 0.05
	done
	line=$(ck_synclog_since "$1" | grep -n "^unlink .*$2\$" | head -n 1 | cut -d: -f1)
	ck_synclog_since "$1" | head -n "$line" | sed "s|$CK_TMP/||"
}
test_a_file_replaced_by_rename_without_fsync_has_its_new_object_synced_before_the_old_goes() {
	local n0 ev hb ha new_line wal_line
	ck_faultfs_up
	ck_mount_synclog
	ck_rand "$CK_REF/a" $((300 * 1024)) # one chunk, an object file
	ck_rand "$CK_REF/b" $((300 * 1024))
	_persist_fsynced "$CK_REF/a" "$CK_MNT/model.pt"
	ck_fault eio=write,fsync,rename
	n0=$(ck_synclog_lines)
	cp "$CK_REF/b" "$CK_MNT/model.pt.tmp"
	mv "$CK_MNT/model.pt.tmp" "$CK_MNT/model.pt"
	hb=$(sha256sum "$CK_REF/b" | cut -c1-64)
	ha=$(sha256sum "$CK_REF/a" | cut -c1-64)
	ev=$(_persist_replace_events "$n0" "$ha")
	new_line=$(echo "$ev" | grep -nE "^sync .*$hb\$|^syncfs cache\$" | head -n 1 | cut -d: -f1)
	[ -n "$new_line" ] ||
		ck_fail "the old object was unlinked, and the catalog synced, with the new object never synced: a power loss leaves model.pt naming an empty or missing object (events: $(echo "$ev" | tr '\n' '|'))"
	wal_line=$(echo "$ev" | grep -n '^sync cache/catalog\.db-wal' | tail -n 1 | cut -d: -f1)
	[ -n "$wal_line" ] && [ "$wal_line" -gt "$new_line" ] ||
		ck_fail "the WAL sync before the old object's unlink came before the new object was synced (events: $(echo "$ev" | tr '\n' '|'))"
	ck_fault
	assert_file_eq "$CK_REF/b" "$CK_MNT/model.pt"
	ck_umount
	ck_mount
	assert_file_eq "$CK_REF/b" "$CK_MNT/model.pt"
	ck_umount
}

# Invariant 13's sync runs with the catalog's lock released: a syncfs while
# a trainer streams takes seconds, and FUSE calls would wait on the lock.
# The synclog shim holds the sweep's syncfs at a gate; a file is created,
# written, listed and read meanwhile (outside the rename's directory); the
# old object goes only after the gate.
test_the_sweeps_cache_sync_does_not_hold_the_catalog() {
	local gate=$CK_TMP/gate n0 ev gate_line unlink_line pid ha
	SYNCLOG_GATE=$gate ck_mount_synclog
	mkdir "$CK_MNT/d" # the rename holds its directory's lock in the kernel: the rest is beside it
	ck_rand "$CK_REF/a" $((300 * 1024))
	ck_rand "$CK_REF/b" $((300 * 1024))
	ck_rand "$CK_REF/c" $((100 * 1024))
	_persist_fsynced "$CK_REF/a" "$CK_MNT/d/model.pt"
	cp "$CK_REF/b" "$CK_MNT/d/model.pt.tmp"
	n0=$(ck_synclog_lines)
	: >"$gate.arm"
	ck_bg mv "$CK_MNT/d/model.pt.tmp" "$CK_MNT/d/model.pt"
	pid=$CK_BG_PID
	ck_wait_file "$gate.entered" 30
	# the rename waits in its sweep's syncfs: the catalog answers meanwhile
	timeout 30 cp "$CK_REF/c" "$CK_MNT/other" || { : >"$gate.go"; ck_fail "a create and write waited on the sweep's cache sync"; }
	timeout 30 ls "$CK_MNT" >/dev/null || { : >"$gate.go"; ck_fail "a readdir waited on the sweep's cache sync"; }
	assert_file_eq "$CK_REF/c" "$CK_MNT/other"
	: >"$gate.go"
	ck_bg_wait "$pid" 60 || ck_fail "the rename over model.pt failed"
	ha=$(sha256sum "$CK_REF/a" | cut -c1-64)
	ev=$(_persist_replace_events "$n0" "$ha")
	gate_line=$(echo "$ev" | grep -n "^gate " | head -n 1 | cut -d: -f1)
	unlink_line=$(echo "$ev" | wc -l)
	[ -n "$gate_line" ] && [ "$gate_line" -lt "$unlink_line" ] ||
		ck_fail "the old object went before the gated sync passed (events: $(echo "$ev" | tr '\n' '|'))"
	assert_file_eq "$CK_REF/b" "$CK_MNT/d/model.pt"
	ck_umount
}

ck_main "$@"
