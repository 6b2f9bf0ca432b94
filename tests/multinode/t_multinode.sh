#!/bin/bash
# t_multinode — several ckptfs nodes on this machine over one BACKING and one
# shared catalog (-o meta=, a private PostgreSQL 15 per case): close-to-open
# across nodes, replicas stored once, a 4-rank torch DCP save over two nodes
# loaded by a fresh third one, a node killed mid-save, PostgreSQL restarted
# mid-save, and an unreachable catalog at mount (docs/MULTINODE.md).
. "$(dirname "$0")/mn.sh"

# (a) names and bytes closed on A are seen on B within 1 s, directory changes too.
test_close_to_open_names_and_bytes_across_nodes() {
	mn_pg_start
	mn_mount A
	mn_mount B
	ck_rand "$CK_REF/f.bin" 5000000
	mkdir "$MN_MNT_A/d1"
	cp "$CK_REF/f.bin" "$MN_MNT_A/d1/f.bin"
	mn_see B d1/f.bin
	assert_size "$MN_MNT_B/d1/f.bin" 5000000
	assert_file_eq "$CK_REF/f.bin" "$MN_MNT_B/d1/f.bin"
	# B's changes, seen on A: a rename, a new directory, an overwrite, an unlink
	mv "$MN_MNT_B/d1/f.bin" "$MN_MNT_B/d1/g.bin"
	mkdir "$MN_MNT_B/d2"
	ck_rand "$CK_REF/h.bin" 300000
	cp "$CK_REF/h.bin" "$MN_MNT_B/d2/h.bin"
	mn_see A d1/g.bin
	mn_see A d2/h.bin
	local i=0
	while [ -e "$MN_MNT_A/d1/f.bin" ]; do
		i=$((i + 1))
		[ $i -le 50 ] || ck_fail "node A still sees d1/f.bin 1 s after B renamed it"
		sleep 0.02
	done
	assert_file_eq "$CK_REF/f.bin" "$MN_MNT_A/d1/g.bin"
	assert_file_eq "$CK_REF/h.bin" "$MN_MNT_A/d2/h.bin"
	ck_rand "$CK_REF/h2.bin" 123457
	cp "$CK_REF/h2.bin" "$MN_MNT_A/d2/h.bin"
	i=0
	until [ "$(stat -c %s "$MN_MNT_B/d2/h.bin")" = 123457 ]; do
		i=$((i + 1))
		[ $i -le 50 ] || ck_fail "node B does not see the new size of d2/h.bin within 1 s"
		sleep 0.02
	done
	assert_file_eq "$CK_REF/h2.bin" "$MN_MNT_B/d2/h.bin"
	rm "$MN_MNT_A/d2/h.bin"
	rmdir "$MN_MNT_A/d2"
	i=0
	while [ -e "$MN_MNT_B/d2" ]; do
		i=$((i + 1))
		[ $i -le 50 ] || ck_fail "node B still sees d2 1 s after A removed it"
		sleep 0.02
	done
	assert_eq "g.bin" "$(ls "$MN_MNT_B/d1")" "listing of d1 on B"
	mn_umount A
	mn_umount B
}

# (b) the same file written on two nodes (HSDP replicas) is one chunk set.
test_replicas_from_two_nodes_are_stored_once() {
	mn_pg_start
	mn_mount A
	mn_mount B
	ck_rand "$CK_REF/shard.bin" 24000000
	mkdir "$MN_MNT_A/r0" "$MN_MNT_B/r1"
	cp "$CK_REF/shard.bin" "$MN_MNT_A/r0/shard.bin" &
	cp "$CK_REF/shard.bin" "$MN_MNT_B/r1/shard.bin"
	wait $! || ck_fail "the copy on node A failed"
	cp "$CK_REF/shard.bin" "$MN_MNT_B/r1/again.bin"
	mn_umount A # the uploads drain at unmount
	mn_umount B
	local chunks objects refs
	chunks=$(mn_psql "SELECT count(*) FROM ns_chunks")
	objects=$(mn_objects)
	refs=$(mn_psql "SELECT count(DISTINCT refcount) || ':' || min(refcount) FROM ns_chunks")
	ck_log "$chunks chunks in the shared catalog, $objects objects on BACKING, refcounts $refs"
	[ "$chunks" -gt 0 ] || ck_fail "no chunk in the shared catalog"
	assert_eq "$chunks" "$objects" "chunk objects on BACKING (one per chunk of the shared catalog)"
	assert_eq "1:3" "$refs" "every chunk referenced by the three copies"
	mn_mount C
	assert_file_eq "$CK_REF/shard.bin" "$MN_MNT_C/r0/shard.bin"
	assert_file_eq "$CK_REF/shard.bin" "$MN_MNT_C/r1/shard.bin"
	mn_umount C
}

# (c) a 4-rank DCP save, ranks 0-1 through A, 2-3 through B, commits once
# with every shard; a fresh node C loads it bit for bit with 2 ranks.
test_dcp_save_over_two_nodes_loads_on_a_fresh_third() {
	mn_pg_start
	mn_mount A
	mn_mount B
	mkdir -p "$MN_MNT_A/run" "$CK_REF/ref"
	local out
	out=$(mn_dcp save "$CK_REF/ref" 100 "$MN_MNT_A/run,$MN_MNT_A/run,$MN_MNT_B/run,$MN_MNT_B/run" 2>&1) ||
		ck_fail "the 4-rank DCP save over two nodes failed: $(echo "$out" | tail -n 5 | tr '\n' '|')"
	ck_log "$out"
	assert_contains "$out" "state=committed" "rank 0's view of step-100"
	local r
	for r in 0 1 2 3; do
		mn_see A "run/step-100/__${r}_0.distcp"
		mn_see B "run/step-100/__${r}_0.distcp"
	done
	assert_eq committed "$(mn_gen_state "$MN_MNT_B" run/step-100)" "step-100 as node B sees it"
	assert_eq 1 "$(mn_psql "SELECT count(*) FROM ns_generations WHERE name = 'step-100'")" "generations named step-100"
	mn_mount C
	out=$(mn_dcp load "$CK_REF/ref" 100 "$MN_MNT_C/run" 2 2>&1) ||
		ck_fail "the 2-rank load on fresh node C failed: $(echo "$out" | tail -n 5 | tr '\n' '|')"
	assert_contains "$out" "loaded step-100" "load on node C"
	mn_umount C
	mn_umount B
	mn_umount A
}
ck_timeout test_dcp_save_over_two_nodes_loads_on_a_fresh_third 240

# (d) kill -9 of node B mid-save: the save is never listed as committed
# anywhere; node A goes on saving the next step.
test_node_killed_mid_save_never_commits_and_the_other_goes_on() {
	MN_LEASE_MS=2000
	mn_pg_start
	mn_mount A
	mn_mount B
	mkdir -p "$MN_MNT_A/run" "$CK_REF/ref"
	ck_bg setsid "$PY" "$CK_LIB_DIR/../multinode/helpers/mn_dcp.py" save "$CK_REF/ref" 100 \
		"$MN_MNT_A/run,$MN_MNT_A/run,$MN_MNT_B/run,$MN_MNT_B/run" --hang-rank 2 --ready "$CK_TMP/hang"
	local trainer=$CK_BG_PID
	ck_wait_file "$CK_TMP/hang" 120
	mn_kill9 B
	kill -9 -- -"$trainer" 2>/dev/null || true
	wait "$trainer" 2>/dev/null || true
	# B's lease runs out; A sweeps it and holds the save it had a file open in
	local i=0
	until [ "$(mn_psql "SELECT state FROM ckpt_nodes WHERE name = 'node-B' ORDER BY id DESC LIMIT 1")" != live ]; do
		i=$((i + 1))
		[ $i -le 150 ] || ck_fail "node B is still live 15 s after kill -9 (lease $MN_LEASE_MS ms)"
		sleep 0.1
	done
	[ "$(mn_gen_state "$MN_MNT_A" run/step-100)" != committed ] || ck_fail "step-100 is committed without B's shard"
	assert_not_contains " $(ls "$MN_MNT_A/run" | tr '\n' ' ') " " step-100 " "listing of run on A"
	assert_eq 0 "$(mn_psql "SELECT count(*) FROM ns_generations WHERE name = 'step-100' AND state = 1")" "committed step-100 rows"
	local out
	out=$(mn_dcp save "$CK_REF/ref" 200 "$MN_MNT_A/run,$MN_MNT_A/run" 2>&1) ||
		ck_fail "node A's next save after B died failed: $(echo "$out" | tail -n 5 | tr '\n' '|')"
	assert_contains "$out" "state=committed" "step-200 on A"
	mn_mount C
	out=$(mn_dcp load "$CK_REF/ref" 200 "$MN_MNT_C/run" 2 2>&1) || ck_fail "loading step-200 on C failed: $out"
	assert_not_contains " $(ls "$MN_MNT_C/run" | tr '\n' ' ') " " step-100 " "listing of run on C"
	mn_umount C
	mn_umount A
}
ck_timeout test_node_killed_mid_save_never_commits_and_the_other_goes_on 240

# (e) PostgreSQL stopped and restarted in the middle of a save: the writers
# wait and go on, nothing is lost.
test_postgresql_restarted_mid_save_loses_nothing() {
	# away for longer than two lease terms: a lease that ran out is renewed
	# until a sweep expired it (meta/lease.h L1), and no node sweeps before it
	# has renewed steadily for a whole term again (L4): every node goes on
	MN_LEASE_MS=3000
	mn_pg_start
	mn_mount A
	mn_mount B
	mkdir -p "$MN_MNT_A/run" "$CK_REF/ref"
	ck_bg "$PY" "$CK_LIB_DIR/../multinode/helpers/mn_dcp.py" save "$CK_REF/ref" 100 \
		"$MN_MNT_A/run,$MN_MNT_A/run,$MN_MNT_B/run,$MN_MNT_B/run" --rows 65536 --pause-file "$CK_TMP/pause"
	local saver=$CK_BG_PID r
	: >"$CK_TMP/pause"
	for r in 0 1 2 3; do ck_wait_file "$CK_TMP/pause.$r" 120; done
	mn_pg kill # away while the shards are written and closed
	rm "$CK_TMP/pause"
	sleep 7
	mn_pg resume
	ck_bg_wait "$saver" 180 || ck_fail "the save across a PostgreSQL restart failed"
	assert_eq committed "$(mn_gen_state "$MN_MNT_B" run/step-100)" "step-100 on B after the restart"
	assert_eq 2 "$(mn_psql "SELECT count(*) FROM ckpt_nodes WHERE state = 'live'")" "live nodes after the outage"
	mn_mount C
	local out
	out=$(mn_dcp load "$CK_REF/ref" 100 "$MN_MNT_C/run" 2 2>&1) || ck_fail "loading step-100 on C failed: $out"
	mn_umount C
	mn_umount B
	mn_umount A
}
ck_timeout test_postgresql_restarted_mid_save_loses_nothing 300

# ckptfs-admin nodes URL: live nodes, a gone one after its unmount, an
# expired one after kill -9 once its lease ran out and another swept it.
test_admin_nodes_lists_live_gone_and_expired_nodes() {
	MN_LEASE_MS=1500
	mn_pg_start
	mn_mount A
	mn_mount B
	mn_mount C
	local out i=0
	out=$("$CKPTFS_ADMIN" nodes "$MN_URL")
	ck_log "$out"
	assert_eq 3 "$(echo "$out" | grep -c ' live ')" "live nodes: $out"
	mn_umount C
	mn_kill9 B
	until out=$("$CKPTFS_ADMIN" nodes "$MN_URL" --json) && [[ "$out" == *'"name":"node-B","state":"expired"'* ]]; do
		i=$((i + 1))
		[ $i -le 100 ] || ck_fail "node B not expired 10 s after kill -9 (lease 1.5 s): $out"
		sleep 0.1
	done
	assert_contains "$out" '"name":"node-A","state":"live"' "nodes --json"
	assert_contains "$out" '"name":"node-C","state":"gone"' "nodes --json"
	mn_umount A
	out=$("$CKPTFS_ADMIN" nodes postgresql://ckptfs@127.0.0.1:1/none 2>&1) && ck_fail "nodes of an unreachable URL succeeded"
	assert_contains "$out" "cannot connect" "nodes of an unreachable URL"
}

# A node cut off for longer than its lease (here: stopped) is swept by the
# others; once it runs again it refuses every change with EROFS, reads go on,
# and what it was writing is never committed.
test_node_past_its_lease_is_fenced_read_only() {
	MN_LEASE_MS=1500
	mn_pg_start
	mn_mount A
	mn_mount B
	ck_rand "$CK_REF/f.bin" 2000000
	mkdir "$MN_MNT_A/d"
	cp "$CK_REF/f.bin" "$MN_MNT_A/d/f.bin"
	mn_see B d/f.bin
	kill -STOP "$MN_PID_B"
	local i=0
	until [ "$(mn_psql "SELECT state FROM ckpt_nodes WHERE name = 'node-B'")" = expired ]; do
		i=$((i + 1))
		[ $i -le 100 ] || { kill -CONT "$MN_PID_B"; ck_fail "node B not swept 10 s into its stop (lease 1.5 s)"; }
		sleep 0.1
	done
	kill -CONT "$MN_PID_B"
	ck_wait_log "$MN_DLOG_B" "lease ran out" 10 ||
		ck_fail "node B did not notice its lease ran out 10 s after it ran again"
	local err
	err=$(touch "$MN_MNT_B/d/new" 2>&1) && ck_fail "a create on the fenced node B succeeded"
	assert_contains "$err" "Read-only file system" "create on the fenced node"
	err=$(mkdir "$MN_MNT_B/d2" 2>&1) && ck_fail "a mkdir on the fenced node B succeeded"
	assert_contains "$err" "Read-only file system" "mkdir on the fenced node"
	err=$(sh -c "echo x >>'$MN_MNT_B/d/f.bin'" 2>&1) && ck_fail "an append on the fenced node B succeeded"
	assert_file_eq "$CK_REF/f.bin" "$MN_MNT_B/d/f.bin"
	# the others go on
	cp "$CK_REF/f.bin" "$MN_MNT_A/d/g.bin"
	assert_file_eq "$CK_REF/f.bin" "$MN_MNT_A/d/g.bin"
	assert_eq 1 "$(grep -c "the mount is read-only from now on" "$MN_DLOG_B")" "lines B logged about being fenced"
	mn_umount B
	mn_umount A
}

# (f) an unreachable meta= at mount: one line naming it, a non-zero exit
# before daemonizing, nothing written to BACKING or the cache's catalog.
test_unreachable_meta_at_mount_is_one_clear_error() {
	local url="postgresql://ckptfs@127.0.0.1:1/ckptfs" out rc=0
	out=$(timeout 60 "$CKPTFS_BIN" -o "meta=$url,cache=$CK_CACHE" "$CK_BACKING" "$CK_MNT" 2>&1) || rc=$?
	[ "$rc" -ne 0 ] || ck_fail "ckptfs mounted with an unreachable meta="
	[ "$rc" -ne 124 ] || ck_fail "ckptfs hung on an unreachable meta="
	assert_eq 1 "$(echo "$out" | wc -l)" "lines of the error: $out"
	assert_contains "$out" "$url" "the error names the URL"
	assert_contains "$out" "cannot connect" "the error says why"
	ck_is_mounted "$CK_MNT" && ck_fail "something is mounted on $CK_MNT"
	assert_not_exists "$CK_CACHE/catalog.db"
	assert_not_exists "$CK_BACKING/ckptfs.store"
	assert_not_exists "$CK_BACKING/ckptfs.claim"
	assert_not_exists "$CK_BACKING/claims"
	out=$("$CKPTFS_BIN" -o "meta=mysql://x/y,cache=$CK_CACHE" "$CK_BACKING" "$CK_MNT" 2>&1) && ck_fail "a non-PostgreSQL meta= was taken"
	assert_contains "$out" "not a PostgreSQL URL" "the error for mysql://"
}

# A lone (SQLite) mount and a shared one never share a BACKING, either way.
ck_timeout test_lone_and_shared_catalogs_refuse_each_others_backing 240
test_lone_and_shared_catalogs_refuse_each_others_backing() {
	mn_pg_start
	mn_mount A
	mkdir -p "$CK_TMP/mnt_lone" "$CK_TMP/mnt_B2"
	local out
	out=$("$CKPTFS_BIN" -f -o "cache=$CK_TMP/cache_lone" "$CK_BACKING" "$CK_TMP/mnt_lone" 2>&1) && ck_fail "a lone mount shared a BACKING with a shared catalog"
	assert_contains "$out" "belongs to the shared catalog" "the lone mount's refusal"
	mn_umount A
	# the last node leaves the shared claim in place; older than claim_timeout,
	# a lone mount is still refused (claim.h invariant 7): breaking the claim
	# by hand is the decision that gives BACKING to a lone catalog
	assert_contains "$(ck_claim)" "mode shared" "the claim after the last node left"
	sleep 5
	out=$("$CKPTFS_BIN" -f -o "cache=$CK_TMP/cache_lone,claim_timeout=4" "$CK_BACKING" "$CK_TMP/mnt_lone" 2>&1) && ck_fail "a lone mount took a shared catalog's claim over by age"
	assert_eq 1 "$(echo "$out" | grep -vc " info: ")" "error lines of the refusal: $out"
	assert_contains "$out" "never takes it over by age" "the lone mount's refusal of an old claim"
	assert_contains "$out" "break the claim: ckptfs-admin claim --break $CK_BACKING" "the refusal says how to decide"
	local broke
	broke=$(date +%s)
	"$CKPTFS_ADMIN" claim --break "$CK_BACKING" >/dev/null || ck_fail "ckptfs-admin claim --break failed"
	# A's cache is a node's: without meta= it is refused, whatever the claim
	out=$("$CKPTFS_BIN" -f -o "cache=$CK_TMP/cache_A" "$CK_BACKING" "$CK_TMP/mnt_lone" 2>&1) && ck_fail "a node's cache was mounted without meta="
	assert_contains "$out" "is the local catalog of a node of a shared catalog" "the node cache's refusal"
	assert_eq broken-by-hand "$(ck_claim_field vacant)" "the claim after the node cache's refusal: $(ck_claim | tr '\n' '|')"
	# free to the lone catalog once the break's lease (the shared claim's,
	# the holder's claim_timeout) has passed from the break
	local lease
	lease=$(ck_claim_field lease)
	[ -n "$lease" ] || ck_fail "no lease line in the broken claim: $(ck_claim | tr '\n' '|')"
	while [ "$(date +%s)" -le $((broke + lease + 1)) ]; do sleep 0.2; done
	CK_MNT=$CK_TMP/mnt_lone CK_CACHE=$CK_TMP/cache_lone
	ck_mount claim_timeout=4
	out=$("$CKPTFS_BIN" -f -o "meta=$MN_URL,cache=$CK_TMP/cache_B" "$CK_BACKING" "$CK_TMP/mnt_B2" 2>&1) && ck_fail "a shared mount shared a BACKING with a lone catalog"
	assert_contains "$out" "belongs to a catalog of one node, not shared" "the shared mount's refusal"
	ck_umount
}

# The database is lost: a fresh PostgreSQL server (a new MN_URL), refilled
# from BACKING alone by `rebuild --meta`, whose output goes to MN_REBUILT.
mn_rebuild_meta_fresh() {
	local old_url=$MN_URL
	mn_pg_start
	[ "$MN_URL" != "$old_url" ] || ck_fail "the fresh database has the old URL"
	MN_REBUILT=$("$CKPTFS_ADMIN" rebuild --meta --force "$MN_URL" "$CK_BACKING" 2>&1) ||
		ck_fail "rebuild --meta failed: $MN_REBUILT"
	ck_log "$MN_REBUILT"
}

# (durability, s23-durable) A 4-rank save over nodes A and B, BACKING slowed
# down: the generation is not durable when the save returns; `ckptfs-admin
# wait` on node B (A committed it) exits 0 only once PostgreSQL marks it
# durable and its manifest is on BACKING. The database is then lost: a
# fresh one refilled with `rebuild --meta` (a non-empty one is refused) is
# mounted by a fresh node C, which loads the checkpoint bit for bit.
test_wait_on_any_node_then_rebuild_meta_from_backing() {
	ck_faultfs_up
	mn_pg_start
	mn_mount A
	mn_mount B
	mkdir -p "$MN_MNT_A/run" "$CK_REF/ref"
	ck_fault "bw=2000000" # 2 MB/s: the shards take seconds to reach BACKING
	local out
	out=$(mn_dcp save "$CK_REF/ref" 100 "$MN_MNT_A/run,$MN_MNT_A/run,$MN_MNT_B/run,$MN_MNT_B/run" --rows 65536 2>&1) ||
		ck_fail "the 4-rank DCP save over two nodes failed: $(echo "$out" | tail -n 5 | tr '\n' '|')"
	assert_contains "$out" "state=committed" "rank 0's view of step-100"
	local gen
	gen=$(mn_psql "SELECT id FROM ns_generations WHERE name = 'step-100' AND state = 1")
	[ -n "$gen" ] || ck_fail "no committed step-100 in PostgreSQL"
	assert_eq 0 "$(mn_psql "SELECT count(*) FROM ns_generations WHERE id = $gen AND durable_version = version")" \
		"step-100 durable right after the save, before its chunks could reach BACKING at 2 MB/s"
	out=$("$CKPTFS_ADMIN" wait "$MN_MNT_B" --timeout 120 2>&1) || ck_fail "ckptfs-admin wait on node B failed: $out"
	assert_contains "$out" "1 generation durable on BACKING" "wait on node B"
	assert_eq 1 "$(mn_psql "SELECT count(*) FROM ns_generations WHERE id = $gen AND durable_version = version")" \
		"step-100 durable in PostgreSQL once wait returned"
	assert_eq 0 "$(mn_psql "SELECT count(*) FROM ns_chunks WHERE NOT uploaded")" "chunks not uploaded once wait returned"
	local version
	version=$(mn_psql "SELECT version FROM ns_generations WHERE id = $gen")
	[ -s "$CK_BACKING/manifests/gen/$gen.$version.ckm" ] || ck_fail "no manifest of generation $gen on BACKING"
	out=$("$CKPTFS_ADMIN" wait "$MN_MNT_A/run/step-100" --timeout 10 2>&1) || ck_fail "wait for step-100 on node A failed: $out"
	ck_fault ""
	mn_umount B
	mn_umount A
	# the database is lost: a fresh server, refilled from BACKING alone
	mn_rebuild_meta_fresh
	out=$MN_REBUILT
	assert_contains "$out" "1 generations" "rebuild --meta"
	local rc=0
	out=$("$CKPTFS_ADMIN" rebuild --meta --force "$MN_URL" "$CK_BACKING" 2>&1) || rc=$?
	assert_eq 1 "$rc" "exit of rebuild --meta into a catalog that is not empty"
	assert_eq 1 "$(echo "$out" | wc -l)" "lines of its refusal: $out"
	assert_contains "$out" "is not empty" "the refusal"
	assert_eq 1 "$(mn_psql "SELECT count(*) FROM ns_generations WHERE id = $gen AND state = 1 AND durable_version = version")" \
		"step-100 in the rebuilt database, committed and durable, under its id"
	mn_mount C
	out=$(mn_dcp load "$CK_REF/ref" 100 "$MN_MNT_C/run" 2 2>&1) ||
		ck_fail "the 2-rank load on fresh node C over the rebuilt database failed: $(echo "$out" | tail -n 5 | tr '\n' '|')"
	assert_contains "$out" "loaded step-100" "load on node C"
	mn_umount C
}
ck_timeout test_wait_on_any_node_then_rebuild_meta_from_backing 300

# (j) the names outside generations come back too (issue 18's tree manifest):
# A writes run/latest (DeepSpeed's, a small file) and a symlink next to the
# step directories, B a file and a directory of its own outside generations,
# both with saves; the tree manifest the duty's holder writes from PostgreSQL
# names them all, one is left on BACKING, and after the database is lost,
# rebuild --meta refills it and a fresh node sees them byte for byte.
test_rebuild_meta_brings_back_the_names_outside_generations() {
	mn_pg_start
	mn_mount A
	mn_mount B
	mkdir -p "$MN_MNT_A/run" "$CK_REF/ref"
	local out
	out=$(mn_dcp save "$CK_REF/ref" 100 "$MN_MNT_A/run,$MN_MNT_B/run" --rows 4096 2>&1) ||
		ck_fail "the 2-rank DCP save over two nodes failed: $(echo "$out" | tail -n 5 | tr '\n' '|')"
	printf 'global_step100' >"$MN_MNT_A/run/latest"
	ln -s step-100 "$MN_MNT_A/run/last"
	mn_save B run/step-200 notes.bin 30000 notes-save
	ck_rand "$CK_REF/log.bin" 700000
	mkdir "$MN_MNT_B/logs"
	chmod 0710 "$MN_MNT_B/logs"
	cp "$CK_REF/log.bin" "$MN_MNT_B/logs/train.log"
	out=$("$CKPTFS_ADMIN" wait "$MN_MNT_A" --timeout 60 2>&1) || ck_fail "ckptfs-admin wait on node A failed: $out"
	# the holder of duty 'tree' writes it while mounted, once its chunks are up
	local i=0
	until grep -qs train.log "$CK_BACKING"/manifests/tree/*.ckm; do
		i=$((i + 1))
		[ $i -le 100 ] || ck_fail "no tree manifest naming logs/train.log on BACKING within 10 s"
		sleep 0.1
	done
	grep -qs latest "$CK_BACKING"/manifests/tree/*.ckm || ck_fail "the tree manifest does not name run/latest"
	assert_eq 1 "$(mn_psql "SELECT count(*) FROM ckpt_duties WHERE name = 'tree'")" "holders of duty 'tree'"
	printf 'global_step101' >"$MN_MNT_B/run/latest" # a change just before the unmounts
	mn_umount A
	mn_umount B
	assert_eq 1 "$(find "$CK_BACKING/manifests/tree" -name '*.ckm' | wc -l)" "tree manifests left on BACKING"
	mn_rebuild_meta_fresh
	out=$MN_REBUILT
	assert_contains "$out" "2 generations and the tree outside them" "rebuild --meta"
	mn_mount C
	assert_eq "global_step101" "$(cat "$MN_MNT_C/run/latest")" "run/latest on fresh node C"
	assert_eq "step-100" "$(readlink "$MN_MNT_C/run/last")" "the symlink run/last on C"
	assert_file_eq "$CK_REF/log.bin" "$MN_MNT_C/logs/train.log"
	assert_eq 710 "$(stat -c %a "$MN_MNT_C/logs")" "mode of logs on C"
	assert_file_eq "$CK_TMP/notes-save.bin" "$MN_MNT_C/run/step-200/notes.bin"
	assert_eq "$(printf '%s\n' last latest step-100 step-200 | sort -V | tr '\n' ' ' | sed 's/ $//')" \
		"$(mn_entries "$MN_MNT_C/run")" "run on C"
	out=$(mn_dcp load "$CK_REF/ref" 100 "$MN_MNT_C/run" 2 2>&1) ||
		ck_fail "the 2-rank load on fresh node C over the rebuilt database failed: $(echo "$out" | tail -n 5 | tr '\n' '|')"
	assert_contains "$out" "loaded step-100" "load on node C"
	mn_umount C
}
ck_timeout test_rebuild_meta_brings_back_the_names_outside_generations 300

# (pgns.h N13, catalog_shared_gen.c S8) A series renamed with a durable save
# in it, on the other node than the one that saved it, and a new run started
# under the old name with a save of the same name: `ckptfs-admin wait` waits
# for the renamed save's manifest to be written again naming run-old, and
# after the database is lost, rebuild --meta brings both saves back where
# they are now, byte for byte. Before, the rename queued nothing: BACKING's
# manifest still named run/, the rebuild put the old save back there and
# rejected the new one in conflict.
test_rebuild_meta_after_a_series_rename_finds_each_save_where_it_is_now() {
	mn_pg_start
	mn_mount A
	mn_mount B
	mkdir -p "$MN_MNT_A/run"
	mn_save A run/step-200 notes.bin 300000 old-save
	local out
	out=$("$CKPTFS_ADMIN" wait "$MN_MNT_A" --timeout 60 2>&1) || ck_fail "ckptfs-admin wait on node A failed: $out"
	local gen
	gen=$(mn_psql "SELECT id FROM ns_generations WHERE name = 'step-200' AND state = 1")
	[ -n "$gen" ] || ck_fail "no committed step-200 in PostgreSQL"
	mv "$MN_MNT_B/run" "$MN_MNT_B/run-old" || ck_fail "rename of run on node B"
	mkdir "$MN_MNT_A/run"
	mn_save A run/step-200 notes.bin 200000 new-save
	out=$("$CKPTFS_ADMIN" wait "$MN_MNT_B" --timeout 60 2>&1) || ck_fail "ckptfs-admin wait on node B failed: $out"
	out=$("$CKPTFS_ADMIN" wait "$MN_MNT_A" --timeout 60 2>&1) || ck_fail "ckptfs-admin wait on node A failed: $out"
	assert_eq 0 "$(mn_psql "SELECT count(*) FROM ns_generations WHERE state = 1 AND durable_version <> version")" \
		"committed saves not durable once wait returned on both nodes"
	grep -qs 'run-old' "$CK_BACKING"/manifests/gen/"$gen".*.ckm ||
		ck_fail "the manifest of the renamed save on BACKING does not name run-old"
	mn_umount B
	mn_umount A
	mn_rebuild_meta_fresh
	out=$MN_REBUILT
	assert_contains "$out" "2 generations and the tree outside them" "rebuild --meta"
	case $out in *conflicting*) ck_fail "rebuild --meta left a save out in conflict: $out" ;; esac
	mn_mount C
	assert_file_eq "$CK_TMP/old-save.bin" "$MN_MNT_C/run-old/step-200/notes.bin"
	assert_file_eq "$CK_TMP/new-save.bin" "$MN_MNT_C/run/step-200/notes.bin"
	mn_umount C
}
ck_timeout test_rebuild_meta_after_a_series_rename_finds_each_save_where_it_is_now 300

ck_main "$@"
