#!/bin/bash
# t_evict — evictions under a local writer in shared mode (docs/MULTINODE.md
# "Reclaim", catalog_shared_data.c S11, fs/cache.h C10): node A writes a file
# twice the size of its cache's disk, so its writer's uploaded chunks are
# evicted while the file is open, each pinned in PostgreSQL first (a fresh
# chunk's row inserted pinned); the file reads back bit for bit on B and on a
# fresh node from BACKING alone, and once A's writer is gone no pin is left,
# every chunk is named and uploaded, and BACKING holds exactly their objects.
. "$(dirname "$0")/mn.sh"


ck_timeout test_a_file_twice_the_cache_is_written_and_leaves_no_pin 300

test_a_file_twice_the_cache_is_written_and_leaves_no_pin() {
	mn_pg_start
	mkdir -p "$CK_TMP/cache_A"
	ck_register_mount "$CK_TMP/cache_A"
	mount -t tmpfs -o size=64m,mode=0700 ckptfs-mn-smallcache "$CK_TMP/cache_A" ||
		ck_skip "cannot mount a tmpfs on $CK_TMP/cache_A"
	mn_mount A
	mn_mount B
	ck_rand "$CK_REF/big" $((128 * MiB))
	# the pins in PostgreSQL while the file is written (S11: the evictor's)
	(until [ -e "$CK_TMP/cp.done" ]; do
		mn_psql "SELECT count(*) FROM ns_pins"
		sleep 0.1
	done) >"$CK_TMP/pins" 2>/dev/null &
	local sampler=$!
	cp "$CK_REF/big" "$MN_MNT_A/big" 2>"$CK_TMP/cp.err"
	local cprc=$?
	touch "$CK_TMP/cp.done"
	wait $sampler
	[ $cprc = 0 ] ||
		ck_fail "writing a 128 MiB file through a 64 MiB cache in shared mode failed: $(cat "$CK_TMP/cp.err")"
	local most
	most=$(sort -n "$CK_TMP/pins" | tail -n 1)
	ck_log "at most ${most:-0} pins while the file was written"
	[ "${most:-0}" -gt 0 ] || ck_fail "no pin was taken: the open file's chunks were not evicted"
	mn_see B big
	assert_file_eq "$CK_REF/big" "$MN_MNT_B/big"
	local i=0 what
	until what=$(mn_psql "SELECT count(*) FILTER (WHERE refcount = 0) || ' ' || count(*)"\
" FILTER (WHERE NOT uploaded) || ' ' || (SELECT count(*) FROM ns_pins) FROM ns_chunks") &&
		[ "$what" = "0 0 0" ]; do
		i=$((i + 1))
		[ $i -le 300 ] || ck_fail "not settled within 60s (unreferenced, not uploaded, pins): $what"
		sleep 0.2
	done
	local live objects
	live=$(mn_psql "SELECT count(*) FROM ns_chunks")
	objects=$(mn_objects)
	ck_log "$live chunks, $objects objects on BACKING"
	assert_eq "$live" "$objects" "objects on BACKING, one per live chunk"
	mn_umount A
	mn_umount B
	mn_mount C
	assert_file_eq "$CK_REF/big" "$MN_MNT_C/big"
	mn_umount C
}
ck_main "$@"
