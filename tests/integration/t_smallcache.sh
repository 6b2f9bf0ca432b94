#!/bin/bash
# t_smallcache — a cache on a small disk (a 64 MiB tmpfs) takes saves many
# times its size: writers wait for uploads and evicted clean chunks make room,
# the catalog and staging keep their reserve, and nothing is lost. With
# BACKING failing (tests/faultfs) and the cache full, writers wait, then get
# ENOSPC (never EIO, never a silent loss): the catalog stays intact and what
# was closed before is kept, also a file whose rewrite failed.
. "$(dirname "$0")/lib.sh"

ck_timeout test_a_64m_cache_takes_300m_of_saves 300
ck_timeout test_full_cache_with_backing_failing_fails_writes_with_enospc_and_keeps_the_rest 300

# The cache on its own 64 MiB tmpfs (owner only, as the daemon requires);
# unmounted at the end of the case whatever happens (ck_register_mount).
_small_cache() {
	ck_register_mount "$CK_CACHE"
	mount -t tmpfs -o size=64m,mode=0700 ckptfs-smallcache "$CK_CACHE" ||
		ck_skip "cannot mount a tmpfs on $CK_CACHE"
}

_catalog_ok() {
	assert_eq ok "$(ck_sql 'PRAGMA integrity_check')" "catalog integrity after a full cache"
}

_assert_same() { # NAME... — CK_MNT/NAME is byte-identical to CK_REF/NAME
	local f
	for f in "$@"; do
		cmp -s "$CK_REF/$f" "$CK_MNT/$f" || ck_fail "$f differs from what was written"
	done
}

test_a_64m_cache_takes_300m_of_saves() {
	_small_cache
	ck_mount
	local i pids=() names=(p1 p2 p3 big)
	for i in 1 2 3; do
		ck_rand "$CK_REF/p$i" $((50 * MiB))
	done
	ck_rand "$CK_REF/big" $((150 * MiB))
	# three writers at once, then one file of twice the cache's disk
	for i in 1 2 3; do
		cp "$CK_REF/p$i" "$CK_MNT/p$i" 2>"$CK_TMP/cp$i.err" &
		pids+=($!)
	done
	for i in 1 2 3; do
		wait "${pids[$((i - 1))]}" || ck_fail "writing p$i (50 MiB, beside two more) into a 64 MiB cache failed: $(cat "$CK_TMP/cp$i.err")"
	done
	cp "$CK_REF/big" "$CK_MNT/big" 2>"$CK_TMP/cp.err" || ck_fail "writing a 150 MiB file into a 64 MiB cache failed: $(cat "$CK_TMP/cp.err")"
	_assert_same "${names[@]}"
	ck_wait_durable 120
	ck_umount
	_catalog_ok
	! grep -E "database or disk is full|No space left" "$CK_DLOG" ||
		ck_fail "the daemon ran out of space on a cache it manages"
	ck_mount
	_assert_same "${names[@]}"
	ck_umount
	# BACKING alone has every byte
	CK_CACHE=$CK_TMP/cache.fresh
	mkdir -m 700 "$CK_CACHE"
	ck_mount
	_assert_same "${names[@]}"
	ck_umount
}

# Out-of-order writes (a header rewritten at the end, as torch.save and
# safetensors writers do) move a file into a staging file on the cache's
# disk; with the file's chunks there too, that is more than the disk holds
# unless uploads and evictions make room.
test_out_of_order_writes_of_files_near_the_cache_size_are_staged_and_kept() {
	_small_cache
	ck_mount
	local i
	for i in 1 2 3; do
		ck_rand "$CK_REF/s$i" $((24 * MiB))
		"$PY" - "$CK_REF/s$i" "$CK_MNT/s$i" <<'PYEOF' || ck_fail "writing s$i out of order into a 64 MiB cache failed"
import os, sys
src = open(sys.argv[1], "rb").read()
fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.pwrite(fd, b"\0" * 4096, 0)           # a placeholder header
for off in range(4096, len(src), 1 << 20):
    os.pwrite(fd, src[off:off + (1 << 20)], off)
os.pwrite(fd, src[:4096], 0)              # the header, at the end
os.fsync(fd)
os.close(fd)
PYEOF
	done
	_assert_same s1 s2 s3
	ck_wait_durable 120
	ck_umount
	_catalog_ok
	ck_mount
	_assert_same s1 s2 s3
	ck_umount
}

# Something else fills the cache's disk after the mount: the reserve is
# gone, and writers get room by evicting clean chunks (here those of a file
# still open for reading) instead of failing.
test_a_disk_filled_behind_the_daemon_makes_room_by_evicting() {
	_small_cache
	ck_mount
	ck_rand "$CK_REF/a" $((24 * MiB))
	cp "$CK_REF/a" "$CK_MNT/a"
	ck_wait_durable 60
	exec {afd}<"$CK_MNT/a" # open: its chunks are evicted only when short of room
	head -c $((24 * MiB)) /dev/zero >"$CK_CACHE/filler" || true
	ck_rand "$CK_REF/b" $((24 * MiB))
	cp "$CK_REF/b" "$CK_MNT/b" 2>"$CK_TMP/cp.err" || ck_fail "writing 24 MiB after the cache's disk was filled behind the daemon failed: $(cat "$CK_TMP/cp.err")"
	_assert_same a b
	exec {afd}<&-
	rm -f "$CK_CACHE/filler"
	ck_wait_durable 60
	ck_umount
	_catalog_ok
	! grep -E "database or disk is full" "$CK_DLOG" || ck_fail "the catalog ran out of space"
}

# _fill_to BYTES — grows CK_CACHE/filler until its disk has about BYTES free.
_fill_to() {
	local avail
	avail=$(df --output=avail -B1 "$CK_CACHE" | tail -n 1)
	[ "$avail" -le "$1" ] || head -c $((avail - $1)) /dev/zero >>"$CK_CACHE/filler" || true
}

# A file read back while something else holds the cache's disk: its fetched
# chunks are served, and no copy of them goes into the disk's reserve (C5,
# C6): that reserve is the catalog's. (Fetches kept copies while the cache was
# under its bound, whatever the disk said: the disk filled up and the catalog
# failed with "database or disk is full", seen in the case above under load.)
test_chunks_read_back_on_a_filled_disk_keep_no_copy_in_the_reserve() {
	_small_cache
	ck_mount
	ck_rand "$CK_REF/a" $((24 * MiB))
	cp "$CK_REF/a" "$CK_MNT/a"
	ck_wait_durable 60
	# the evictor answers a disk short of its reserve: all of a goes
	local i=0 cached
	while cached=$(ck_sql "SELECT count(*) FROM chunks WHERE cached = 1") && [ "$cached" != 0 ]; do
		_fill_to $((2 * MiB))
		i=$((i + 1))
		[ $i -le 300 ] || ck_fail "$cached chunks still cached 30 s after the disk was filled"
		sleep 0.1
	done
	_fill_to $((4 * MiB)) # less than half the 16 MiB reserve: no room for a copy
	_assert_same a
	assert_eq 0 "$(ck_sql "SELECT count(*) FROM chunks WHERE cached = 1")" "chunks copied into a disk short of its reserve"
	rm -f "$CK_CACHE/filler"
	ck_umount
	_catalog_ok
	! grep -E "No space left on device|database or disk is full" "$CK_DLOG" ||
		ck_fail "fetched chunks filled the disk's reserve"
}

# An ENOSPC from the disk itself when a chunk object is written (here: a
# tmpfs out of inodes, which statvfs's free bytes do not show) evicts clean
# chunks and the object is written again: no EIO, no failed save. (Shard
# directories are never removed, so the inodes are counted for three files:
# the third runs out, and the first two's chunks make room.)
test_enospc_writing_a_chunk_object_evicts_and_retries() {
	ck_register_mount "$CK_CACHE"
	mount -t tmpfs -o size=256m,nr_inodes=${CK_SMALLCACHE_INODES:-100},mode=0700 ckptfs-smallcache "$CK_CACHE" ||
		ck_skip "cannot mount a tmpfs on $CK_CACHE"
	ck_mount
	local i names=()
	# 96 MiB, ~100 chunk objects: more shard directories than the disk has
	# inodes unless each goes with its last object (store.c S8)
	for i in 1 2 3 4 5 6; do
		ck_rand "$CK_REF/n$i" $((16 * MiB))
		cp "$CK_REF/n$i" "$CK_MNT/n$i" 2>"$CK_TMP/cp.err" ||
			ck_fail "writing n$i (16 MiB) failed on a cache disk out of inodes: $(cat "$CK_TMP/cp.err")"
		names+=("n$i")
		ck_wait_durable 60
	done
	grep -q "its disk was full writing .* the write is retried" "$CK_DLOG" ||
		ck_fail "the disk never ran out of inodes: no eviction and retry in the log (raise the file count)"
	_assert_same "${names[@]}"
	ck_umount
	_catalog_ok
}

test_full_cache_with_backing_failing_fails_writes_with_enospc_and_keeps_the_rest() {
	_small_cache
	ck_faultfs_up
	ck_mount "backing_timeout=5"
	ck_rand "$CK_REF/kept" $((8 * MiB))
	cp "$CK_REF/kept" "$CK_MNT/kept"
	ck_wait_durable 60
	ck_fault eio=write,fsync,rename,create,link
	ck_rand "$CK_REF/closed" $((8 * MiB))
	cp "$CK_REF/closed" "$CK_MNT/closed" # not on BACKING, closed: must be kept
	ck_rand "$CK_REF/big" $((120 * MiB))
	local t0 t1 rc=0 err
	t0=$(date +%s)
	err=$(dd if="$CK_REF/big" of="$CK_MNT/big" bs=1M conv=fsync 2>&1) || rc=$?
	t1=$(date +%s)
	[ $rc != 0 ] || ck_fail "120 MiB went into a 64 MiB cache while BACKING takes nothing"
	assert_contains "$err" "No space left on device" "dd's error writing past a full cache"
	assert_lt $((t1 - t0)) 60 "seconds before the writer got ENOSPC"
	assert_ge $((t1 - t0)) 4 "seconds the writer waited for room (backing_timeout=5) before ENOSPC"
	# a rewrite in place of a closed file fails, and leaves it as it was
	rc=0
	err=$(dd if="$CK_REF/big" of="$CK_MNT/kept" bs=1M count=60 conv=notrunc,fsync 2>&1) || rc=$?
	[ $rc != 0 ] || ck_fail "a 60 MiB rewrite went into a full cache while BACKING takes nothing"
	assert_contains "$err" "No space left on device" "dd's error rewriting a file in a full cache"
	_assert_same kept closed
	! grep -E "database or disk is full" "$CK_DLOG" || ck_fail "the catalog ran out of space"
	ck_fault
	ck_wait_durable 120
	_assert_same kept closed
	ck_umount
	_catalog_ok
	ck_mount
	_assert_same kept closed
	ck_umount
}

ck_main "$@"
