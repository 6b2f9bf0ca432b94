#!/bin/bash
# t_restore — a cold restore with prefetch (fs/reader.h invariant 4, issue 20
# part 4): a fresh node (new empty cache) reads a saved checkpoint from
# BACKING with several chunks fetched ahead of each sequential reader, in
# parallel. Over nfs:// (a private nfs-ganesha) and a BACKING directory: 4
# files read at once come back byte for byte, with chunks read ahead (the
# daemon's own count) and each chunk fetched from BACKING once (fetched bytes
# = the objects' bytes: a read of a chunk being prefetched waits for that
# fetch); -o prefetch=0 reads the same bytes with nothing read ahead. A chunk
# object damaged on BACKING is never served, read ahead or not: the reads of
# its bytes fail with EIO, every other block reads right, and once the object
# is repaired the same mount reads the whole file right (the bad fetch was not
# kept). A bad -o prefetch= is refused with one line naming it.
. "$(dirname "$0")/lib.sh"

ck_timeout test_nfs_restore_with_prefetch_reads_what_was_written 300
ck_timeout test_nfs_damaged_object_is_never_served_read_ahead_or_not 240
ck_timeout test_dir_restore_with_prefetch_and_a_damaged_object 240
ck_timeout test_nfs_planted_symlink_or_fifo_at_an_object_is_damage_at_once 240
ck_slow test_nfs_restore_with_prefetch_reads_what_was_written

NFILES=4

_ganesha_backing() { # CK_BACKING = a private ganesha's nfs:// URL (stopped on exit)
	command -v ganesha.nfsd >/dev/null || ck_skip "nfs-ganesha is not installed"
	CK_BACKING=$("$CK_REPO/tests/nfs/ganesha.sh" start "$CK_TMP/nfs" 2>"$CK_TMP/ganesha.err") ||
		ck_fail "ganesha did not start: $(tail -n 3 "$CK_TMP/ganesha.err" | tr '\n' '|')"
	ck_at_exit '"$CK_REPO/tests/nfs/ganesha.sh" stop "$CK_TMP/nfs" >/dev/null 2>&1'
	BACKING_DIR=$CK_TMP/nfs/export
}

_save() { # N_FILES SIZE_MIB: run/step-1/part*.bin, committed, durable, unmounted
	local n=$1 mib=$2 i
	ck_mount
	mkdir -p "$CK_MNT/run/step-1" "$CK_REF/run/step-1"
	for i in $(seq 0 $((n - 1))); do
		head -c $((mib * MiB)) /dev/urandom >"$CK_REF/run/step-1/part$i.bin"
		cp "$CK_REF/run/step-1/part$i.bin" "$CK_MNT/run/step-1/part$i.bin"
	done
	setfattr -n user.ckptfs.commit -v 1 "$CK_MNT/run/step-1"
	ck_wait_durable 120
	ck_umount
}

_fresh_node() { # [OPTS]: a new empty cache over the same BACKING
	CK_CACHE=$CK_TMP/cache.fresh.$RANDOM
	ck_mount "$@"
}

_read_all_at_once() { # N_FILES: concurrent sequential readers, 1 MiB reads, byte for byte
	local i pids=()
	for i in $(seq 0 $(($1 - 1))); do
		dd if="$CK_MNT/run/step-1/part$i.bin" of="$CK_TMP/out$i" bs=1M status=none &
		pids+=($!)
	done
	for i in "${!pids[@]}"; do
		wait "${pids[$i]}" || ck_fail "reader of part$i.bin failed"
	done
	for i in $(seq 0 $(($1 - 1))); do
		cmp -s "$CK_REF/run/step-1/part$i.bin" "$CK_TMP/out$i" ||
			ck_fail "part$i.bin read back differs from what was saved"
		rm -f "$CK_TMP/out$i"
	done
}

_reader_line() { # the daemon's account of its reads, logged at unmount
	grep -o 'reader: .*' "$CK_DLOG" | tail -n 1
}

_ahead_loaded() { # chunks the readahead loaded, from _reader_line
	_reader_line | sed -n 's/.* loaded \([0-9]*\), reads found.*/\1/p'
}

_object_bytes() { # bytes of every chunk object on BACKING, loose or in pack files
	ck_backing_object_bytes "$BACKING_DIR"
}

_restore_checks() { # the restore of $NFILES files read at once, then with prefetch=0
	_fresh_node
	_read_all_at_once "$NFILES"
	local fetched objects
	fetched=$(ck_admin_stat fetched_bytes)
	objects=$(_object_bytes)
	# C7 and invariant 4: a read of a chunk being fetched ahead waits for it
	assert_le "$fetched" "$objects" "bytes fetched from BACKING (objects: $objects)"
	assert_eq 0 "$(ck_admin_stat fetch_errors)" "fetch errors"
	ck_umount
	ck_log "$(_reader_line)"
	[ "$(_ahead_loaded)" -gt 0 ] || ck_fail "nothing was read ahead: $(_reader_line)"

	_fresh_node prefetch=0
	_read_all_at_once "$NFILES"
	ck_umount
	assert_eq 0 "$(_ahead_loaded)" "chunks read ahead with prefetch=0 ($(_reader_line))"
}

test_nfs_restore_with_prefetch_reads_what_was_written() {
	_ganesha_backing
	_save "$NFILES" 24
	_restore_checks
}

# Flips one byte in the middle of object $1 (its payload: objects of random
# data are raw, 0.5-4 MiB).
_flip() {
	local obj=$1 at
	at=$(($(stat -c %s "$obj") / 2))
	"$PY" - "$obj" "$at" <<'EOF'
import sys
path, at = sys.argv[1], int(sys.argv[2])
with open(path, "r+b") as f:
    f.seek(at)
    b = f.read(1)
    f.seek(at)
    f.write(bytes([b[0] ^ 0x40]))
EOF
}

# Reads FILE in 1 MiB blocks, on past errors; fails the case if any byte read
# differs from REF; prints the number of blocks that failed with EIO. A short
# read is POSIX (a direct read the kernel split at its user buffer's page
# boundary returns what its first request got when the second fails): the
# rest of the block is read again, and must then fail or follow.
_read_blocks() { # FILE REF
	"$PY" - "$1" "$2" <<'EOF'
import errno, os, sys
path, ref = sys.argv[1], sys.argv[2]
want = open(ref, "rb").read()
fd = os.open(path, os.O_RDONLY)
bad = 0
for block in range(0, len(want), 1 << 20):
    off, end = block, min(block + (1 << 20), len(want))
    while off < end:
        try:
            got = os.pread(fd, end - off, off)
        except OSError as e:
            if e.errno != errno.EIO:
                sys.exit(f"block at {block}: at {off}: {e}")
            bad += 1
            break
        if not got:
            sys.exit(f"block at {block}: end of file at {off}, expected {end}")
        if got != want[off:off + len(got)]:
            sys.exit(f"block at {block}: {len(got)} bytes at {off}, not the saved ones")
        off += len(got)
os.close(fd)
print(bad)
EOF
}

_damaged_object_checks() { # one saved file, an object damaged on BACKING
	local obj bad hex
	# part0.bin's third chunk: in the first readahead window of its reader
	hex=$(ck_sql "SELECT lower(hex(hash)) FROM extents WHERE ino = (SELECT ino FROM dirents
		WHERE name = 'part0.bin') ORDER BY off LIMIT 1 OFFSET 2")
	[ -n "$hex" ] || ck_fail "part0.bin has fewer than 3 chunks"
	obj=$(find "$BACKING_DIR/chunks" -type f -name "*$hex*")
	[ -n "$obj" ] && [ "$(echo "$obj" | wc -l)" = 1 ] || ck_fail "no one object of chunk $hex on BACKING: $obj"
	# in place: ganesha may keep serving a replaced file's old inode by name
	# (a BACKING directory's object may share its inode with the first
	# node's cache, by hard link: no longer used)
	_flip "$obj"
	_fresh_node
	# sequential, 1 MiB at a time: the chunks ahead, the damaged one among
	# them, are fetched by the readahead before the reads reach them
	bad=$(_read_blocks "$CK_MNT/run/step-1/part0.bin" "$CK_REF/run/step-1/part0.bin") ||
		ck_fail "a block of part0.bin read other bytes than were saved"
	[ "$bad" -ge 1 ] || ck_fail "the damaged object's bytes were read without an error"
	[ "$(ck_admin_stat fetch_errors)" -ge 1 ] || ck_fail "no fetch error counted"
	grep -q "is corrupt" "$CK_DLOG" || ck_fail "the damaged object was not logged"
	_flip "$obj" # repaired: the same mount reads it all now
	cmp -s "$CK_REF/run/step-1/part0.bin" "$CK_MNT/run/step-1/part0.bin" ||
		ck_fail "after the repair part0.bin still differs"
	ck_umount
	[ "$(_ahead_loaded)" -gt 0 ] || ck_fail "nothing was read ahead: $(_reader_line)"
}

test_nfs_damaged_object_is_never_served_read_ahead_or_not() {
	_ganesha_backing
	_save 1 16
	_damaged_object_checks
}

# _plant_and_read KIND — part0.bin's third chunk's object on the nfs://
# BACKING replaced, through the export directory, by KIND (a symlink to a
# good copy of it, or a FIFO); ganesha restarted so that it serves what is
# on its disk, not the file it cached under that name; a fresh node
# (backing_timeout=10) reads part0.bin: EIO in under 5 s, the log names the
# object's path and what is there, and the planted thing is still there.
_plant_and_read() {
	local kind=$1 hex obj t0 ms rc=0 want
	hex=$(ck_sql "SELECT lower(hex(hash)) FROM extents WHERE ino = (SELECT ino FROM dirents
		WHERE name = 'part0.bin') ORDER BY off LIMIT 1 OFFSET 2")
	[ -n "$hex" ] || ck_fail "part0.bin has fewer than 3 chunks"
	obj=$BACKING_DIR/chunks/${hex:0:2}/${hex:2:2}/$hex
	[ -e "$obj" ] || [ -L "$obj" ] || ck_fail "no object of chunk $hex at $obj"
	[ -f "$CK_TMP/good.$hex" ] || cp "$obj" "$CK_TMP/good.$hex"
	rm -f "$obj"
	if [ "$kind" = symlink ]; then
		ln -s "$CK_TMP/good.$hex" "$obj"
		want="a symlink at its path or on its way, not followed"
	else
		mkfifo -m 600 "$obj"
		want="not a regular file but a directory, FIFO, socket or device"
	fi
	"$CK_REPO/tests/nfs/ganesha.sh" stop "$CK_TMP/nfs" >/dev/null 2>&1
	"$CK_REPO/tests/nfs/ganesha.sh" start "$CK_TMP/nfs" >/dev/null 2>"$CK_TMP/ganesha.err" ||
		ck_fail "ganesha did not start again: $(tail -n 3 "$CK_TMP/ganesha.err" | tr '\n' '|')"
	_fresh_node backing_timeout=10
	t0=$(date +%s%N)
	timeout 60 cat "$CK_MNT/run/step-1/part0.bin" >/dev/null 2>"$CK_TMP/read.err" || rc=$?
	ms=$((($(date +%s%N) - t0) / 1000000))
	assert_ne 0 "$rc" "$kind: reading part0.bin"
	assert_contains "$(cat "$CK_TMP/read.err")" "Input/output error" "$kind: the read's error"
	[ "$ms" -lt 5000 ] || ck_fail "$kind: reading part0.bin took $ms ms to fail (retried for backing_timeout)"
	assert_contains "$(cat "$CK_DLOG")" "chunk $hex is corrupt: $want (chunks/${hex:0:2}/${hex:2:2}/$hex)" "$kind: the log line"
	ck_umount
	if [ "$kind" = symlink ]; then
		[ -L "$obj" ] || ck_fail "the planted symlink was removed or replaced"
	else
		[ -p "$obj" ] || ck_fail "the planted FIFO was removed or replaced"
	fi
	rm -f "$obj"
	cp "$CK_TMP/good.$hex" "$obj"
}

# bkobj.h B4 over nfs:// (review 47 F5): a symlink or a FIFO where a chunk's
# object should be is damage, found at once, as on a directory BACKING
# (t_integrity); nfs:// answers backing_get by kind like the directory
# backend (tests/nfs/t_nfs.sh).
test_nfs_planted_symlink_or_fifo_at_an_object_is_damage_at_once() {
	_ganesha_backing
	_save 1 8
	_plant_and_read symlink
	_plant_and_read fifo
	"$CK_REPO/tests/nfs/ganesha.sh" stop "$CK_TMP/nfs" >/dev/null 2>&1
	"$CK_REPO/tests/nfs/ganesha.sh" start "$CK_TMP/nfs" >/dev/null 2>"$CK_TMP/ganesha.err" ||
		ck_fail "ganesha did not start again"
	_fresh_node
	assert_file_eq "$CK_REF/run/step-1/part0.bin" "$CK_MNT/run/step-1/part0.bin"
	ck_umount
}

test_dir_restore_with_prefetch_and_a_damaged_object() {
	BACKING_DIR=$CK_BACKING
	_save "$NFILES" 12
	_restore_checks
	_damaged_object_checks
}

test_bad_prefetch_option_is_refused_naming_it() {
	local v out rc
	for v in -1 65 x 4k ''; do
		rc=0
		out=$("$CKPTFS_BIN" -f -o "$(ck_opts "cache=$CK_CACHE,prefetch=$v")" "$CK_BACKING" "$CK_MNT" 2>&1) || rc=$?
		assert_ne 0 "$rc" "exit status of prefetch=$v"
		assert_eq 1 "$(echo "$out" | wc -l)" "lines of error output for prefetch=$v: $out"
		assert_contains "$out" "prefetch=$v"
		ck_is_mounted "$CK_MNT" && ck_fail "mounted with prefetch=$v"
	done
	return 0
}

ck_main "$@"
