#!/bin/bash
# t_fastrestart — a node's daemon killed -9 and restarted at once on the
# same cache (systemd Restart=, a supervisor) is a new node; its cache lock
# proves the killed one gone, so the killed one is expired and settled at
# mount, before the new one serves (meta/lease.h L10): the job that
# restarts from the same step and rewrites the save never meets the dead
# incarnation's writing rows, and the redone save commits (review 45 F6).
# And a pending commit whose save a sweep held meanwhile says so at warn,
# naming the save and the reason, never "Invalid argument" (fs/gen.h
# invariant 19).
. "$(dirname "$0")/mn.sh"

# fr_state NAME: state:version:rule of the newest generation NAME.
fr_state() { mn_psql "SELECT state || ':' || version || ':' || rule FROM ns_generations WHERE name = '$1' ORDER BY id DESC LIMIT 1"; }

# fr_open_on X PATH: a writer on node X with PATH open for writing (100000
# bytes written), until killed; its pid in FR_W once its writing row exists.
# One descriptor, never closed: a close of a dup of it would flush, and a
# flush parks the row (fs/ns.h invariant 14).
fr_open_on() {
	local v=MN_MNT_$1
	"$PY" -c 'import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, os.urandom(100000))
time.sleep(120)' "${!v}/$2" &
	FR_W=$!
	mn_until "SELECT count(*) > 0 FROM ns_writing w JOIN ckpt_nodes n ON n.id = w.node WHERE n.name = 'node-$1' AND n.state = 'live'"
}

test_a_daemon_restarted_at_once_on_its_cache_lets_the_redone_save_commit() {
	mn_pg_start
	mn_mount A
	mn_mount B
	mkdir -p "$MN_MNT_A/run/step-1"
	mn_see B run/step-1 5
	# rank 1 has its shard open for writing on B when B's daemon dies
	fr_open_on B run/step-1/__1_0.distcp
	local old
	old=$(mn_psql "SELECT id FROM ckpt_nodes WHERE name = 'node-B' AND state = 'live'")
	mn_kill9 B "$FR_W"
	mn_mount B # at once, the same cache
	local was rows
	was=$(mn_psql "SELECT state || ' ' || settled FROM ckpt_nodes WHERE id = $old")
	rows=$(mn_psql "SELECT count(*) FROM ns_writing WHERE node = $old")
	# the job restarts from step 1 and writes it again, completely
	local f
	for f in s0 s1 md; do head -c 300000 /dev/urandom >"$CK_TMP/$f.bin"; done
	cp "$CK_TMP/s0.bin" "$MN_MNT_A/run/step-1/__0_0.distcp"
	cp "$CK_TMP/s1.bin" "$MN_MNT_B/run/step-1/__1_0.distcp"
	cp "$CK_TMP/md.bin" "$MN_MNT_A/run/step-1/.metadata.tmp"
	mv "$MN_MNT_A/run/step-1/.metadata.tmp" "$MN_MNT_A/run/step-1/.metadata"
	mn_poll "SELECT state FROM ns_generations WHERE name = 'step-1' ORDER BY id DESC LIMIT 1" 1 10 \
		"step-1 committed after its rewrite"
	# past the time the killed incarnation's lease would have been swept
	sleep $((MN_LEASE_MS * 3 / 1000 + 2))
	assert_eq "1" "$(mn_psql "SELECT state FROM ns_generations WHERE name = 'step-1' ORDER BY id DESC LIMIT 1")" \
		"step-1, three lease terms after its commit"
	assert_contains "$(fr_state step-1)" "dcp-metadata" "step-1's rule"
	assert_eq "step-1" "$(mn_entries "$MN_MNT_A/run")" "A's listing of run"
	grep -q "Invalid argument" "$MN_DLOG_A" "$MN_DLOG_B" && ck_fail "a node logged Invalid argument"
	grep -q "held meanwhile" "$MN_DLOG_A" && ck_fail "A held the redone save"
	# the killed incarnation was settled at mount, before B served
	assert_eq "expired true" "$was" "the killed incarnation, right after the remount"
	assert_eq "0" "$rows" "the killed incarnation's writing rows, right after the remount"
	grep -q "node $old was the previous daemon of this cache (.*): gone (its cache lock is this node's), expired and settled at mount" \
		"$MN_DLOG_B" || ck_fail "B's new daemon did not say it settled node $old at mount"
	local out
	out=$("$CKPTFS_ADMIN" wait "$MN_MNT_A" --timeout 60 2>&1) || ck_fail "wait on A: $out"
	out=$("$CKPTFS_ADMIN" wait "$MN_MNT_B" --timeout 60 2>&1) || ck_fail "wait on B: $out"
	# a fresh node reads the rewrite byte for byte
	mn_mount D
	cmp "$CK_TMP/s0.bin" "$MN_MNT_D/run/step-1/__0_0.distcp" || ck_fail "__0_0.distcp differs on D"
	cmp "$CK_TMP/s1.bin" "$MN_MNT_D/run/step-1/__1_0.distcp" || ck_fail "__1_0.distcp differs on D"
	cmp "$CK_TMP/md.bin" "$MN_MNT_D/run/step-1/.metadata" || ck_fail ".metadata differs on D"
	mn_umount D
	mn_umount B
	mn_umount A
}

test_a_tracker_commit_pending_on_a_save_held_meanwhile_warns() {
	mn_pg_start
	mn_mount A
	mn_mount B
	mkdir -p "$MN_MNT_A/run/global_step2"
	printf x >"$MN_MNT_A/run/global_step2/mp_rank_00_model_states.pt"
	mn_see B run/global_step2 5
	# B's rank has a file of the save open when B dies; B stays away
	fr_open_on B run/global_step2/zero_pp_rank_1_mp_rank_00_optim_states.pt
	mn_kill9 B "$FR_W"
	# rank 0 writes the tracker on A: its commit waits for B's file
	printf global_step2 >"$MN_MNT_A/run/latest"
	mn_poll "SELECT state FROM ns_generations WHERE name = 'global_step2'" 4 30 \
		"global_step2 held by the sweep of node B"
	local i=0
	until grep -q "generation global_step2 (series inode [0-9]*, step 2) held meanwhile: node [0-9]* lost its lease.*; its commit (tracker) does not end the hold" \
		"$MN_DLOG_A"; do
		i=$((i + 1))
		[ $i -le 100 ] || ck_fail "A did not say the tracker's pending commit met a save held meanwhile"
		sleep 0.1
	done
	grep -q "Invalid argument" "$MN_DLOG_A" && ck_fail "A logged Invalid argument"
	assert_eq "4" "$(mn_psql "SELECT state FROM ns_generations WHERE name = 'global_step2'")" \
		"global_step2 stays held"
	mn_umount A
}

ck_main "$@"
