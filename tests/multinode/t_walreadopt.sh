#!/bin/bash
# t_walreadopt — a node whose local catalog lost its WAL (killed -9, then
# catalog.db-wal gone: a crash of the host's disk cache, a careless clean-up)
# takes back at its next mount the objects of its cache that PostgreSQL
# says only this cache's earlier nodes held and BACKING lacks, once each
# passes SHA-256, and uploads them (meta/catalog_shared.c S18; review 47 F4).
# Before, its committed save, whole in its cache, was declared lost and
# never uploaded, and every other node read EIO.
. "$(dirname "$0")/mn.sh"

# _wr_setup: step-1 durable on node A; then, BACKING failing every call,
# step-2 (a large file and a small one, small.db's) committed: its chunks
# are in A's cache alone. A is killed -9 and its local catalog's WAL goes.
# _wr_setup B: node B mounted too, before BACKING fails (a mount reads it).
_wr_setup() {
	ck_faultfs_up
	mn_pg_start
	mn_mount A
	[ "${1:-}" != B ] || mn_mount B
	mn_save A run/step-1 f 700000 s1
	local out
	out=$("$CKPTFS_ADMIN" wait "$MN_MNT_A" --timeout 60 2>&1) || ck_fail "step-1 not durable: $out"
	ck_fault "eio=all"
	mkdir -p "$MN_MNT_A/run/step-2"
	head -c 3000 /dev/urandom >"$CK_TMP/s2small.bin"
	cp "$CK_TMP/s2small.bin" "$MN_MNT_A/run/step-2/small"
	mn_save A run/step-2 f 700000 s2
	assert_eq "1" "$(mn_psql "SELECT state FROM ns_generations WHERE name = 'step-2'")" \
		"step-2, committed while BACKING fails"
	WR_OLD=$(mn_psql "SELECT id FROM ckpt_nodes WHERE name = 'node-A' AND state = 'live'")
	mn_kill9 A
	rm -f "$CK_TMP/cache_A/catalog.db-wal" "$CK_TMP/cache_A/catalog.db-shm"
	# the premise: A's local catalog no longer knows its dirty chunks
	assert_eq "0" "$(sqlite3 "file:$CK_TMP/cache_A/catalog.db?immutable=1" \
		"SELECT count(*) FROM chunks WHERE cached = 1 AND uploaded = 0")" \
		"dirty chunk rows in A's local catalog without its WAL"
	assert_eq "t" "$(mn_psql "SELECT count(*) > 0 FROM ns_chunks WHERE holder = $WR_OLD AND NOT uploaded")" \
		"chunks PostgreSQL says only A holds"
}

# _wr_durable: A (remounted) uploads step-2; B reads every byte of it.
_wr_durable() {
	local out
	out=$("$CKPTFS_ADMIN" wait "$MN_MNT_A" --timeout 60 2>&1) || ck_fail "wait on A after its remount: $out"
	assert_eq "1:false" "$(mn_psql "SELECT state || ':' || lost FROM ns_generations WHERE name = 'step-2'")" \
		"step-2 (state:lost) once A uploaded it"
	assert_eq "0" "$(mn_psql "SELECT count(*) FROM ns_chunks WHERE NOT uploaded")" \
		"chunks not on BACKING"
	grep -q "took back [0-9]* chunks from its cache that only .* held and BACKING lacks" "$MN_DLOG_A" ||
		ck_fail "A did not say it took back the chunks of its cache"
	[ "$(mn_gen_state "$MN_MNT_B" run/step-2)" = committed ] ||
		ck_fail "B sees step-2 as '$(mn_gen_state "$MN_MNT_B" run/step-2)', not committed"
	cmp "$CK_TMP/s2.bin" "$MN_MNT_B/run/step-2/f" || ck_fail "step-2/f differs on B"
	cmp "$CK_TMP/s2small.bin" "$MN_MNT_B/run/step-2/small" || ck_fail "step-2/small differs on B"
	cmp "$CK_TMP/s1.bin" "$MN_MNT_B/run/step-1/f" || ck_fail "step-1/f differs on B"
}

# Remounted on its cache: the killed node is settled at mount (lease.h
# L10) and its chunks taken back before it is judged: step-2 is never lost.
test_a_node_remounted_without_its_catalogs_wal_uploads_its_save() {
	_wr_setup
	ck_fault ""
	mn_mount A
	mn_mount B
	_wr_durable
	grep -q "generation [0-9]* lost" "$MN_DLOG_A" && ck_fail "A declared a generation lost: $(grep -m1 "lost:" "$MN_DLOG_A")"
	mn_umount B
	mn_umount A
}

# Another node's sweep settled the killed node first (step-2 lost); the
# remount takes the chunks back all the same, as a plain remount (WAL kept)
# does through pggen.h X10: lost no more.
test_a_save_lost_by_another_nodes_sweep_comes_back_with_the_cache() {
	_wr_setup B
	mn_until "SELECT settled FROM ckpt_nodes WHERE id = $WR_OLD"
	assert_eq "t" "$(mn_psql "SELECT lost FROM ns_generations WHERE name = 'step-2'")" \
		"step-2 after B's sweep settled A"
	ck_fault ""
	mn_mount A
	_wr_durable
	mn_umount B
	mn_umount A
}

# A damaged object is never taken back: the save stays lost (held), the
# object stays where it is, and the mount says which chunk and why.
test_a_damaged_object_is_not_taken_back() {
	_wr_setup
	ck_fault ""
	local h obj
	h=$(mn_psql "SELECT encode(hash, 'hex') FROM ns_chunks WHERE holder = $WR_OLD AND NOT uploaded ORDER BY stored_len DESC LIMIT 1")
	obj=$CK_TMP/cache_A/chunks/${h:0:2}/${h:2:2}/$h
	[ -f "$obj" ] || ck_fail "no object file $obj for step-2's largest chunk"
	chmod u+w "$obj"
	printf '\xff\xfe\xfd\xfc' | dd of="$obj" bs=1 seek=200 conv=notrunc status=none
	mn_mount A
	sleep $((MN_LEASE_MS * 2 / 1000 + 1))
	assert_eq "t" "$(mn_psql "SELECT lost FROM ns_generations WHERE name = 'step-2'")" \
		"step-2 with a damaged object in A's cache"
	[ -f "$obj" ] || ck_fail "the damaged object $obj was removed"
	grep -q "chunk $h.*not taken back" "$MN_DLOG_A" ||
		ck_fail "A did not name the damaged chunk it did not take back"
	mn_umount A
}

ck_main "$@"
