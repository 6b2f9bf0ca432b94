#!/bin/bash
# t_rot2 — a chunk found rotten before its upload on a node of the shared
# catalog (-o meta=; review 47 F3 there, generation.h G12, pggen.h X16),
# with BACKING behind tests/faultfs so the cache's copy and BACKING's are
# separate files. A save naming it can never become durable: it is held in
# the shared catalog (rule lost-chunk, a reason naming the chunk and a
# file), keep-latest-k does not count it among its K on any node (the older
# intact save stays), `ckptfs-admin wait` names it at once (exit 11), and
# another node hides it as held.
. "$(dirname "$0")/mn.sh"

R2_MIB=$((1024 * 1024))

# r2_state NAME: state and rule of the newest row named NAME.
r2_state() { mn_psql "SELECT state || ' ' || rule FROM ns_generations WHERE name = '$1' ORDER BY id DESC LIMIT 1"; }

_r2_said() { grep -qF "$1" "$MN_DLOG_A" && echo 1 || echo 0; } # NEEDLE: 1 once A logged it

# r2_durable NAME: polls up to 60 s until NAME is COMMITTED and durable.
r2_durable() {
	mn_poll "SELECT state = 1 AND durable_version = version FROM ns_generations WHERE name = '$1'" t 60 \
		"$1 committed and durable"
}

# r2_big_chunk NAME: the biggest chunk (hex) that generation NAME's files name.
r2_big_chunk() {
	mn_psql "SELECT encode(e.hash, 'hex') FROM ns_generations g JOIN ns_inodes i ON i.gen = g.id
		JOIN ns_extents e ON e.ino = i.ino JOIN ns_chunks c ON c.hash = e.hash
		WHERE g.name = '$1' ORDER BY c.plain_len DESC, e.hash LIMIT 1"
}

# r2_open_save_loses_a_chunk: A writes run/step-2/model.pt (2 MiB, bytes in
# $CK_TMP/s2.bin) while BACKING fails, so step-2 stays OPEN; its biggest
# chunk's cache copy is damaged and A's uploader finds it lost. R2_H: the
# chunk (hex).
r2_open_save_loses_a_chunk() {
	ck_fault eio=all
	mkdir "$MN_MNT_A/run/step-2"
	head -c $((2 * R2_MIB)) /dev/urandom >"$CK_TMP/s2.bin"
	cp "$CK_TMP/s2.bin" "$MN_MNT_A/run/step-2/model.pt"
	assert_eq "0" "$(mn_psql "SELECT state FROM ns_generations WHERE name = 'step-2'")" "step-2 open"
	local obj
	R2_H=$(r2_big_chunk step-2)
	[ -n "$R2_H" ] || ck_fail "no chunk named by step-2 in the shared catalog"
	obj=$CK_TMP/cache_A/$(ck_obj_rel "$R2_H")
	[ -f "$obj" ] || ck_fail "no cache object $obj for chunk $R2_H"
	chmod u+w "$obj"
	ck_xor_byte "$obj" 5000
	ck_fault ""
	CK_CACHE=$CK_TMP/cache_A ck_until_eq 1 600 "A's upload row of chunk $R2_H ended lost" ck_sql \
		"SELECT count(*) FROM uploads WHERE hash = x'$R2_H' AND error LIKE 'lost:%'"
	assert_eq "0" "$(mn_psql "SELECT state FROM ns_generations WHERE name = 'step-2'")" \
		"step-2 still open once its chunk is lost"
}

test_chunk_lost_before_upload_holds_its_save_and_keep_spares_the_older_one() {
	ck_faultfs_up
	mn_pg_start
	mn_mount A keep=2,backing_timeout=10
	mn_mount B keep=2
	mkdir "$MN_MNT_A/run"
	mn_see B run
	mn_save A run/step-1 model.pt $((2 * R2_MIB)) s1
	r2_durable step-1
	ck_fault eio=all
	mn_save A run/step-2 model.pt $((2 * R2_MIB)) s2
	local h obj
	h=$(r2_big_chunk step-2)
	[ -n "$h" ] || ck_fail "no chunk named by step-2 in the shared catalog"
	obj=$CK_TMP/cache_A/$(ck_obj_rel "$h")
	[ -f "$obj" ] || ck_fail "no cache object $obj for chunk $h"
	[ -e "$CK_TMP/store/$(ck_obj_rel "$h")" ] && ck_fail "chunk $h is on BACKING already"
	chmod u+w "$obj"
	ck_xor_byte "$obj" 5000
	ck_fault ""
	# A's uploader finds it corrupt before its upload (its local row says so)
	CK_CACHE=$CK_TMP/cache_A ck_until_eq 1 600 "A's upload row of chunk $h ended lost" ck_sql \
		"SELECT count(*) FROM uploads WHERE hash = x'$h' AND error LIKE 'lost:%'"
	# keep=2 does not count step-2, which can never become durable: step-1,
	# the older intact save, stays, whichever node commits the newer one
	mn_save B run/step-3 model.pt $((2 * R2_MIB)) s3
	r2_durable step-3
	sleep 1
	assert_eq "1 explicit" "$(r2_state step-1)" "step-1 in the shared catalog after step-3 with keep=2"
	# step-2 is held (G12), with a reason naming the chunk and its file
	assert_eq "4 lost-chunk" "$(r2_state step-2)" "step-2 in the shared catalog"
	local held
	held=$(mn_psql "SELECT held FROM ns_generations WHERE name = 'step-2'")
	assert_contains "$held" "lost: chunk $h" "step-2's held reason"
	assert_contains "$held" "model.pt" "step-2's held reason"
	assert_eq "step-1 step-3" "$(mn_entries "$MN_MNT_A/run")" "run/ on A"
	assert_eq "held" "$(mn_gen_state "$MN_MNT_B" run/step-2)" "step-2 on B"
	assert_file_eq "$CK_TMP/s1.bin" "$MN_MNT_B/run/step-1/model.pt"
	assert_file_eq "$CK_TMP/s3.bin" "$MN_MNT_A/run/step-3/model.pt"
	# wait names it at once as held (exit 11), on either node
	local out rc=0 t0 t1
	t0=$(date +%s)
	out=$(timeout 60 "$CKPTFS_ADMIN" wait "$MN_MNT_B" --timeout 30 2>&1) || rc=$?
	t1=$(date +%s)
	assert_eq 11 "$rc" "exit of ckptfs-admin wait on B with step-2 held ($out)"
	assert_contains "$out" "step-2" "ckptfs-admin wait's output"
	assert_lt $((t1 - t0)) 15 "seconds ckptfs-admin wait took"
	grep -q "generation [0-9]* held: chunk ${h:0:16}" "$MN_DLOG_A" "$MN_DERR_A" ||
		ck_fail "no log line on A holding step-2 for chunk $h"
	mn_umount B
	mn_umount A
}
ck_timeout test_chunk_lost_before_upload_holds_its_save_and_keep_spares_the_older_one 240

# generation.h G13 on the shared engine (catalog_shared_gen.c S9, pggen.h
# X17): a save still OPEN when A's uploader finds a chunk of it lost is never
# committed naming it: its commit xattr is refused and it is held in the
# shared catalog (rule lost-chunk); B hides it; `wait` on B names it.
test_a_save_open_when_its_chunk_is_lost_is_held_at_its_commit() {
	ck_faultfs_up
	mn_pg_start
	mn_mount A backing_timeout=10
	mn_mount B
	mkdir "$MN_MNT_A/run"
	mn_see B run
	r2_open_save_loses_a_chunk
	local h=$R2_H
	setfattr -n user.ckptfs.commit -v 1 "$MN_MNT_A/run/step-2" || ck_fail "commit xattr of step-2 on A"
	mn_poll "SELECT state || ' ' || rule FROM ns_generations WHERE name = 'step-2'" "4 lost-chunk" 10 \
		"step-2 held (4) by rule lost-chunk at its commit"
	local held
	held=$(mn_psql "SELECT held FROM ns_generations WHERE name = 'step-2'")
	assert_contains "$held" "lost: chunk $h" "step-2's held reason"
	assert_contains "$held" "model.pt" "step-2's held reason"
	assert_eq "held" "$(mn_gen_state "$MN_MNT_B" run/step-2)" "step-2 on B"
	local out rc=0
	out=$(timeout 60 "$CKPTFS_ADMIN" wait "$MN_MNT_B" --timeout 30 2>&1) || rc=$?
	assert_eq 11 "$rc" "exit of ckptfs-admin wait on B with step-2 held ($out)"
	assert_contains "$out" "step-2" "ckptfs-admin wait's output"
	mn_umount B
	mn_umount A
}
ck_timeout test_a_save_open_when_its_chunk_is_lost_is_held_at_its_commit 240

# The same with the commit made by ANOTHER node (session 40's leftover): A
# found the chunk lost, B writes the commit xattr. A's finding is in the
# shared catalog (ns_chunks.lost_by, pggen.h X16), so B's commit, which
# checks it in its own transaction (X17), holds step-2 instead of committing
# it, and keep=2 on B spares the older intact save.
test_a_save_whose_chunk_another_node_found_lost_is_held_at_a_commit_by_any_node() {
	ck_faultfs_up
	mn_pg_start
	mn_mount A keep=2,backing_timeout=10
	mn_mount B keep=2
	mkdir "$MN_MNT_A/run"
	mn_see B run
	mn_save A run/step-1 model.pt $((2 * R2_MIB)) s1
	r2_durable step-1
	r2_open_save_loses_a_chunk
	local h=$R2_H
	mn_see B run/step-2
	setfattr -n user.ckptfs.commit -v 1 "$MN_MNT_B/run/step-2" || ck_fail "commit xattr of step-2 on B"
	mn_poll "SELECT state || ' ' || rule FROM ns_generations WHERE name = 'step-2'" "4 lost-chunk" 10 \
		"step-2 held (4) by rule lost-chunk at B's commit"
	local held
	held=$(mn_psql "SELECT held FROM ns_generations WHERE name = 'step-2'")
	assert_contains "$held" "lost: chunk $h" "step-2's held reason"
	assert_contains "$held" "model.pt" "step-2's held reason"
	mn_save B run/step-3 model.pt $((2 * R2_MIB)) s3
	r2_durable step-3
	sleep 1
	assert_eq "1 explicit" "$(r2_state step-1)" "step-1 in the shared catalog after step-3 with keep=2"
	assert_file_eq "$CK_TMP/s1.bin" "$MN_MNT_B/run/step-1/model.pt"
	assert_eq "step-1 step-3" "$(mn_entries "$MN_MNT_B/run")" "run/ on B"
	mn_umount B
	mn_umount A
}
ck_timeout test_a_save_whose_chunk_another_node_found_lost_is_held_at_a_commit_by_any_node 240

# pggen.h X18 (review 50 F2): A finds its copy of a chunk lost while B,
# which wrote the same bytes in its own save, has a good copy not uploaded
# yet. Both saves are held (ns_chunks.holder names only the first writer);
# once B's copy is on BACKING every chunk of both is there, and the sweep
# commits both again (rule whole-again): listed, read byte for byte on a
# fresh node. B's lease is long so that it stays live while paused.
test_saves_held_for_a_lost_chunk_are_committed_again_once_another_copy_reaches_backing() {
	ck_faultfs_up
	mn_pg_start
	mn_mount A backing_timeout=10
	mn_mount B lease_ms=60000
	mkdir "$MN_MNT_A/run"
	mn_see B run
	ck_fault eio=all
	mn_save A run/step-2 model.pt $((2 * R2_MIB)) s2
	local h
	h=$(r2_big_chunk step-2)
	[ -n "$h" ] || ck_fail "no chunk named by step-2 in the shared catalog"
	mn_see B run/step-2
	mkdir "$MN_MNT_B/run/step-3"
	cp "$CK_TMP/s2.bin" "$MN_MNT_B/run/step-3/model.pt"
	setfattr -n user.ckptfs.commit -v 1 "$MN_MNT_B/run/step-3" || ck_fail "commit of step-3 on B"
	local obj_a=$CK_TMP/cache_A/$(ck_obj_rel "$h") obj_b=$CK_TMP/cache_B/$(ck_obj_rel "$h")
	[ -f "$obj_a" ] || ck_fail "A has no cache copy $obj_a"
	[ -f "$obj_b" ] || ck_fail "B has no cache copy $obj_b"
	kill -STOP "$MN_PID_B"
	ck_at_exit "kill -CONT $MN_PID_B 2>/dev/null"
	chmod u+w "$obj_a"
	ck_xor_byte "$obj_a" 5000
	ck_fault ""
	CK_CACHE=$CK_TMP/cache_A ck_until_eq 1 600 "A's upload row of chunk $h ended lost" ck_sql \
		"SELECT count(*) FROM uploads WHERE hash = x'$h' AND error LIKE 'lost:%'"
	assert_eq "4 lost-chunk" "$(r2_state step-3)" "B's step-3 while B's good copy is not on BACKING"
	kill -CONT "$MN_PID_B"
	mn_poll "SELECT uploaded FROM ns_chunks WHERE hash = decode('$h', 'hex')" t 90 "chunk $h uploaded by B"
	mn_poll "SELECT state || ' ' || rule FROM ns_generations WHERE name = 'step-3'" "1 whole-again" 30 \
		"step-3 committed again once every chunk of it is on BACKING"
	mn_poll "SELECT state || ' ' || rule FROM ns_generations WHERE name = 'step-2'" "1 whole-again" 30 \
		"step-2 committed again once every chunk of it is on BACKING"
	grep -q "is committed again: every chunk of it is on BACKING now" "$MN_DLOG_A" "$MN_DLOG_B" ||
		ck_fail "no log line saying a held save was committed again"
	local out
	out=$(timeout 120 "$CKPTFS_ADMIN" wait "$MN_MNT_B" --timeout 90 2>&1) || ck_fail "wait on B: $out"
	mn_mount D
	assert_eq "step-2 step-3" "$(mn_entries "$MN_MNT_D/run")" "run/ on a fresh node"
	assert_file_eq "$CK_TMP/s2.bin" "$MN_MNT_D/run/step-2/model.pt"
	assert_file_eq "$CK_TMP/s2.bin" "$MN_MNT_D/run/step-3/model.pt"
	mn_umount D
	mn_umount B
	mn_umount A
}
ck_timeout test_saves_held_for_a_lost_chunk_are_committed_again_once_another_copy_reaches_backing 300

# pggen.h X2 (review 50 F1): B writes the chunk first (its holder), A writes
# the same bytes; A's copy is found lost while B is live (X16 holds nothing:
# B's copy may still go up); B then dies without uploading. A must not adopt
# the chunk whose copy it found damaged: the saves naming it are lost (shown
# held on every node), not COMMITTED and listed with a chunk nobody has.
test_a_node_never_adopts_a_chunk_whose_copy_it_found_lost() {
	ck_faultfs_up
	mn_pg_start
	mn_mount A backing_timeout=10
	mn_mount B lease_ms=15000
	mkdir "$MN_MNT_A/run"
	mn_see B run
	ck_fault eio=all
	mn_save B run/step-2 model.pt $((2 * R2_MIB)) s2
	local h
	h=$(r2_big_chunk step-2)
	[ -n "$h" ] || ck_fail "no chunk named by step-2 in the shared catalog"
	mn_see A run/step-2
	mkdir "$MN_MNT_A/run/step-3"
	cp "$CK_TMP/s2.bin" "$MN_MNT_A/run/step-3/model.pt"
	setfattr -n user.ckptfs.commit -v 1 "$MN_MNT_A/run/step-3" || ck_fail "commit of step-3 on A"
	local obj_a=$CK_TMP/cache_A/$(ck_obj_rel "$h")
	[ -f "$obj_a" ] || ck_fail "A has no cache copy $obj_a"
	kill -STOP "$MN_PID_B"
	ck_at_exit "kill -CONT $MN_PID_B 2>/dev/null"
	chmod u+w "$obj_a"
	ck_xor_byte "$obj_a" 5000
	ck_fault ""
	CK_CACHE=$CK_TMP/cache_A ck_until_eq 1 600 "A's upload row of chunk $h ended lost" ck_sql \
		"SELECT count(*) FROM uploads WHERE hash = x'$h' AND error LIKE 'lost:%'"
	assert_eq "1 explicit" "$(r2_state step-3)" "step-3 while B, the holder, is live"
	mn_kill9 B
	kill -CONT "$MN_PID_B" 2>/dev/null || true
	mn_poll "SELECT settled FROM ckpt_nodes WHERE name = 'node-B' ORDER BY id DESC LIMIT 1" t 60 \
		"node B settled"
	grep -q "adopted 1 chunks of node" "$MN_DLOG_A" && ck_fail "A adopted the chunk it found lost"
	assert_eq "t" "$(mn_psql "SELECT lost FROM ns_generations WHERE name = 'step-3'")" \
		"step-3 names a chunk no node has a good copy of: lost"
	assert_eq "held" "$(mn_gen_state "$MN_MNT_A" run/step-3)" "step-3 on A"
	assert_eq "held" "$(mn_gen_state "$MN_MNT_A" run/step-2)" "step-2 on A"
	assert_eq "" "$(mn_entries "$MN_MNT_A/run")" "run/ on A"
	mn_umount A
}
ck_timeout test_a_node_never_adopts_a_chunk_whose_copy_it_found_lost 300

# fs/uploader.h B5 (review 50 F3): X16's transaction fails at the finding
# (PostgreSQL goes down while it waits for a row lock another session
# holds on step-2; past the node's outage deadline the call fails). The
# lost row is not picked again this run, but its holds are asked for again
# until PostgreSQL answers: the COMMITTED save naming the chunk ends held
# (rule lost-chunk) and the chunk's row records the finding (lost_by).
test_a_lost_chunks_holds_that_failed_in_an_outage_are_made_once_postgresql_answers() {
	local MN_META_TIMEOUT_MS=4000
	ck_faultfs_up
	mn_pg_start
	mn_mount A backing_timeout=10
	mkdir "$MN_MNT_A/run"
	ck_fault eio=all
	mn_save A run/step-2 model.pt $((2 * R2_MIB)) s2
	local h obj
	h=$(r2_big_chunk step-2)
	[ -n "$h" ] || ck_fail "no chunk named by step-2 in the shared catalog"
	obj=$CK_TMP/cache_A/$(ck_obj_rel "$h")
	[ -f "$obj" ] || ck_fail "no cache object $obj for chunk $h"
	# another session holds step-2's row: X16's FOR UPDATE waits for it
	mn_psql "BEGIN; SELECT id FROM ns_generations WHERE name = 'step-2' FOR UPDATE;
		SELECT pg_sleep(600); COMMIT" >/dev/null 2>&1 &
	ck_at_exit "kill $! 2>/dev/null"
	mn_poll "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(600)%'
		AND state = 'active' AND pid <> pg_backend_pid()" 1 10 "step-2's row locked by another session"
	chmod u+w "$obj"
	ck_xor_byte "$obj" 5000
	ck_fault ""
	CK_CACHE=$CK_TMP/cache_A ck_until_eq 1 600 "A's upload row of chunk $h ended lost" ck_sql \
		"SELECT count(*) FROM uploads WHERE hash = x'$h' AND error LIKE 'lost:%'"
	mn_poll "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'" 1 30 \
		"A's hold of step-2 waiting for the row lock"
	mn_pg kill
	ck_until_eq 1 300 "A's log: holding the saves failed" \
		_r2_said "lost: holding the saves that name it failed"
	mn_pg resume
	mn_poll "SELECT state || ' ' || rule FROM ns_generations WHERE name = 'step-2'" "4 lost-chunk" 60 \
		"step-2 held (4) by rule lost-chunk once PostgreSQL answers again"
	assert_contains "$(mn_psql "SELECT held FROM ns_generations WHERE name = 'step-2'")" \
		"lost: chunk $h" "step-2's held reason"
	assert_eq "$(mn_psql "SELECT id FROM ckpt_nodes WHERE name = 'node-A' ORDER BY id DESC LIMIT 1")" \
		"$(mn_psql "SELECT lost_by FROM ns_chunks WHERE hash = decode('$h', 'hex')")" \
		"the node that found chunk $h lost, on its row (lost_by)"
	assert_eq "held" "$(mn_gen_state "$MN_MNT_A" run/step-2)" "step-2 on A"
	grep -q "the saves that name it are held now" "$MN_DLOG_A" ||
		ck_fail "no log line on A saying the holds were made after all"
	mn_umount A
}
ck_timeout test_a_lost_chunks_holds_that_failed_in_an_outage_are_made_once_postgresql_answers 240

ck_main "$@"
