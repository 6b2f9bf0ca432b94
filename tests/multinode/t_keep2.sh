#!/bin/bash
# t_keep2 — keep-latest-k across nodes (-o keep=2 on every node, the
# cluster duty "keep", docs/GENERATIONS.md "Several nodes"): two nodes
# saving steps of one series alternately (scripted DCP saves,
# tests/integration/helpers/gen_trainers.py, each committed by its
# .metadata) end with exactly the newest two listed on both and on a fresh
# third node, bit for bit; the older ones are deleted with rule keep in the
# shared catalog, whichever node saved them.
. "$(dirname "$0")/mn.sh"

K2_OPTS=quiet=0.5,keep=2

# k2_save X STEP: node X saves k/step-STEP and sees it committed.
k2_save() {
	local v=MN_MNT_$1
	"$PY" "$CK_HELPERS/gen_trainers.py" --root "${!v}" --ref "$CK_REF" --salt "s$2" dcp "k/step-$2" ||
		ck_fail "the save of step $2 on node $1 failed"
	local out
	out=$("$PY" "$CK_HELPERS/gen_trainers.py" expect "${!v}/k/step-$2" state=committed \
		rule=dcp-metadata --wait 3 2>&1) || ck_fail "step $2 on node $1: $out"
}

# k2_expect X EXPECTED [READ]: node X lists EXPECTED in k within 20 s (keep
# keeps the newest durable generation while newer ones are only in a
# cache), and each entry of READ (default: all) reads back as the trainer
# wrote it.
k2_expect() {
	local v=MN_MNT_$1 i=0 s out
	while [ "$(mn_entries "${!v}/k")" != "$2" ] && [ $i -lt 200 ]; do
		i=$((i + 1))
		sleep 0.1
	done
	assert_eq "$2" "$(mn_entries "${!v}/k")" "series k on node $1"
	for s in ${3-$2}; do
		out=$(diff -rq "$CK_REF/k/$s" "${!v}/k/$s" 2>&1) ||
			ck_fail "k/$s on node $1 differs from what the trainer wrote: $(echo "$out" | head -n 4 | tr '\n' '|')"
	done
}

test_two_nodes_saving_alternately_keep_the_newest_two() {
	mn_pg_start
	mn_mount A "$K2_OPTS"
	mn_mount B "$K2_OPTS"
	mkdir "$MN_MNT_A/k"
	mn_see B k
	local s
	for s in 1 2 3 4 5 6; do
		if [ $((s % 2)) = 1 ]; then k2_save A $s; else k2_save B $s; fi
	done
	k2_expect A "step-5 step-6"
	k2_expect B "step-5 step-6"
	mn_mount C "$K2_OPTS"
	k2_expect C "step-5 step-6"
	assert_eq "step-5 step-6" \
		"$(mn_psql "SELECT string_agg(name, ' ' ORDER BY step) FROM ns_generations WHERE state = 1")" \
		"committed generations in the shared catalog"
	assert_eq "4" "$(mn_psql "SELECT count(*) FROM ns_generations WHERE state = 3 AND rule = 'keep'")" \
		"steps 1-4 deleted by keep"
	mn_umount C
	mn_umount A
	mn_umount B
}
# pggen.h X12, fs/gen.h invariant 18 (review 42 F5): keep=1; node B holds a
# file of committed step-100 open O_RDWR (nothing written) when A commits
# step-200: A's keep pass keeps step-100 (the shared catalog counts B's
# writer). B's close asks for a keep pass itself, which deletes step-100
# then, not only at the next commit; step-200 stays version 1.
test_a_writer_on_another_node_keeps_the_save_until_it_closes() {
	mn_pg_start
	mn_mount A quiet=0.5,keep=1
	mn_mount B quiet=0.5,keep=1
	mkdir "$MN_MNT_A/k"
	mn_see B k
	k2_save A 100
	mn_see B k/step-100
	rm -f "$CK_TMP"/oh.*
	ck_bg "$PY" "$CK_HELPERS/openhold.py" "$MN_MNT_B/k/step-100/__0_0.distcp" "$CK_TMP/oh.ready" \
		"$CK_TMP/oh.go" "$CK_TMP/oh.done"
	local holder=$CK_BG_PID
	ck_wait_file "$CK_TMP/oh.ready"
	k2_save A 200
	ck_wait_log "$MN_DLOG_A" "step-100 .*kept: reopened, pinned" 10 ||
		ck_fail "A's keep pass did not keep step-100 for B's writer: $(grep -h step-100 "$MN_DLOG_A" | tail -n 2 | cut -c1-160 | tr '\n' '|')"
	k2_expect A "step-100 step-200"
	touch "$CK_TMP/oh.go"
	ck_bg_wait "$holder" 20 || ck_fail "openhold.py failed"
	assert_eq "closed" "$(cat "$CK_TMP/oh.done")" "B's writer closed"
	k2_expect A "step-200"
	k2_expect B "step-200"
	assert_eq "3 keep" "$(mn_psql "SELECT state || ' ' || rule FROM ns_generations WHERE name = 'step-100'")" \
		"step-100 in the shared catalog"
	assert_eq "1 1" "$(mn_psql "SELECT state || ' ' || version FROM ns_generations WHERE name = 'step-200'")" \
		"step-200 in the shared catalog"
	mn_umount A
	mn_umount B
}

# pggen.h X13 (review 34 B1): a save lost only because its node is away is
# not ended by keep-held while the newer saves are only in a cache. keep=2,
# BACKING refusing every object: B commits step-10 and unmounts with its
# uploads queued (lease.h L9: expired, settled by A's sweep: step-10 lost,
# shown held); A commits step-5, step-20 and step-30. The pass after
# step-30's commit ends step-5 (rule keep, after keep-held looked at
# step-10 in the same pass): step-10 is still there, held, its row
# COMMITTED and lost, and A's log says why, at info once: step-40's pass
# (it ends step-20) keeps step-10 too, and says so at debug. A unmounts with its uploads queued too; BACKING
# accepts again; B mounted again with its cache uploads step-10's chunks:
# step-10 is whole again (X10), listed on B, durable, and a fresh node C
# reads it from BACKING bit for bit.
test_keep_held_keeps_a_save_lost_while_its_node_is_away() {
	local out
	ck_faultfs_up
	mn_pg_start
	mn_mount A keep=2,leave_queued
	mn_mount B keep=2,leave_queued
	mkdir "$MN_MNT_A/run"
	mn_see B run
	ck_fault "eio=create" # no object reaches BACKING, from any node
	mn_save B run/step-10 model.bin 1000000 s10
	mn_umount B
	mn_until "SELECT state = 1 AND lost FROM ns_generations WHERE name = 'step-10'"
	assert_eq "held" "$(mn_gen_state "$MN_MNT_A" run/step-10)" "step-10 on A once B is settled"
	mn_save A run/step-5 model.bin 100000 s5
	mn_save A run/step-20 model.bin 100000 s20
	mn_save A run/step-30 model.bin 100000 s30
	mn_until "SELECT state = 3 AND rule = 'keep' FROM ns_generations WHERE name = 'step-5'"
	assert_eq "1 true" "$(mn_psql "SELECT state || ' ' || lost FROM ns_generations WHERE name = 'step-10'")" \
		"step-10's row after the keep pass that ended step-5 (none of 20, 30 durable)"
	assert_exists "$MN_MNT_A/run/step-10/model.bin"
	assert_eq "held" "$(mn_gen_state "$MN_MNT_A" run/step-10)" "step-10 on A after that pass"
	assert_eq "step-20 step-30" "$(mn_entries "$MN_MNT_A/run")" "run/ on A"
	# one more pass while B stays away (step-40's commit ends step-20): it
	# keeps step-10 again, and says so only at debug (review 36 F5b)
	mn_save A run/step-40 model.bin 100000 s40
	mn_until "SELECT state = 3 AND rule = 'keep' FROM ns_generations WHERE name = 'step-20'"
	assert_eq "1 true" "$(mn_psql "SELECT state || ' ' || lost FROM ns_generations WHERE name = 'step-10'")" \
		"step-10's row after the pass that ended step-20"
	mn_umount A
	grep -q "generation step-10 .*kept by keep-held: lost only while" "$MN_DLOG_A" ||
		ck_fail "A's policy did not say why it kept step-10 (fs/gen.c gen_keep_held)"
	assert_eq 1 "$(grep -c "info: generation step-10 .*kept by keep-held" "$MN_DLOG_A")" \
		"info lines of A's keep-held keeping step-10 over two passes"
	ck_fault ""
	mn_mount B keep=2
	mn_until "SELECT NOT lost AND state = 1 AND durable_version = version FROM ns_generations WHERE name = 'step-10'"
	assert_eq "step-10" "$(mn_entries "$MN_MNT_B/run")" "run/ on B (A's saves are lost while A is away)"
	mn_mount C
	assert_eq "committed" "$(mn_gen_state "$MN_MNT_C" run/step-10)" "step-10 on fresh node C"
	assert_file_eq "$CK_TMP/s10.bin" "$MN_MNT_C/run/step-10/model.bin"
	out=$("$CKPTFS_ADMIN" check "$MN_MNT_C" 2>&1) || ck_fail "ckptfs-admin check: $(echo "$out" | head -n 8 | tr '\n' '|')"
	mn_umount C
	mn_umount B
}
ck_timeout test_keep_held_keeps_a_save_lost_while_its_node_is_away 180

# The torture loop with two nodes (keep=3): node A saves a step while node B
# saves another and is killed with -9 at a random point of it. After each
# cycle, once the sweep has handled B (no generation left OPEN, B settled):
# every save of A is committed or deleted by keep, never lost; B's saves are committed,
# held, or lost (a chunk only B had and had not uploaded died with it:
# docs/MULTINODE.md), never half there; at most the newest 3 committed ones
# that are not lost remain (keep does not count a lost one); A and a fresh
# node C list exactly the committed ones that are not lost (a lost one is
# shown as held: hidden, pggen.h X5) and read them back bit for bit; and
# `ckptfs-admin check` passes on C.
test_torture_node_b_killed_mid_save_while_a_saves() {
	local cycles=${CKPTFS_TORTURE_CYCLES:-10} seed=${CKPTFS_TORTURE_SEED:-$((RANDOM * 32768 + RANDOM))}
	local c delay wa wb sa sb rc saved_a="" name state listed committed n i out
	ck_log "$cycles cycles, keep=3, seed $seed (CKPTFS_TORTURE_SEED=$seed to replay)"
	mn_pg_start
	mn_mount A "quiet=0.5,keep=3"
	mkdir "$MN_MNT_A/k"
	for ((c = 1; c <= cycles; c++)); do
		delay=$(awk -v s=$((seed + c)) 'BEGIN { srand(s); printf "%.3f", 0.02 + rand() * 0.5 }')
		sa=$((c * 10 + 1)) sb=$((c * 10 + 2))
		mn_mount B "quiet=0.5,keep=3"
		ck_bg "$PY" "$CK_HELPERS/gen_trainers.py" --root "$MN_MNT_A" --ref "$CK_REF" --salt "a$c" \
			--size 8000000 dcp "k/step-$sa"
		wa=$CK_BG_PID
		ck_bg "$PY" "$CK_HELPERS/gen_trainers.py" --root "$MN_MNT_B" --ref "$CK_REF" --salt "b$c" \
			--size 8000000 dcp "k/step-$sb"
		wb=$CK_BG_PID
		sleep "$delay"
		rc=1
		if ! _ck_pid_alive "$wb"; then
			rc=0
			wait "$wb" || rc=$?
		fi
		mn_kill9 B "$wb"
		ck_bg_wait "$wa" 60 || ck_fail "cycle $c: A's save of step $sa failed while B was killed"
		saved_a+=" step-$sa"
		# the sweep (lease $MN_LEASE_MS ms) holds or rolls back what B left open
		i=0
		until [ "$(mn_psql "SELECT count(*) FROM ns_generations WHERE state = 0")" = 0 ]; do
			i=$((i + 1))
			[ $i -le 300 ] || ck_fail "cycle $c (seed $seed): a generation is still OPEN 30 s after B was killed: $(mn_psql "SELECT name || ' opened by ' || coalesce(opened_by, 0) FROM ns_generations WHERE state = 0") (writing: $(mn_psql "SELECT count(*) FROM ns_writing"))"
			sleep 0.1
		done
		# ... and has settled B (pggen.h X2): a save B committed whose chunks
		# only B's cache held is marked lost then, not before; until then it
		# is listed, and a read of such a chunk waits for B (docs/MULTINODE.md)
		i=0
		until [ "$(mn_psql "SELECT count(*) FROM ckpt_nodes WHERE name = 'node-B' AND (state = 'live' OR (state = 'expired' AND NOT settled))")" = 0 ]; do
			i=$((i + 1))
			[ $i -le 300 ] || ck_fail "cycle $c (seed $seed): node B not settled 30 s after it was killed: $(mn_psql "SELECT id || ' ' || state || ' settled=' || settled FROM ckpt_nodes WHERE name = 'node-B'" | tr '\n' ' ')"
			sleep 0.1
		done
		# B's trainer keeps its reference as it goes: it renames .metadata.tmp
		# onto .metadata in REF after the mount's rename answered. A kill
		# between the commit (the rename reached B) and that answer, or
		# before the REF rename, leaves REF one rename behind a save the
		# catalog committed: a rename whose answer is lost may have
		# happened, and the catalog says it did.
		if [ $rc != 0 ] && [ -e "$CK_REF/k/step-$sb/.metadata.tmp" ] &&
			[ ! -e "$CK_REF/k/step-$sb/.metadata" ] &&
			[ "$(mn_psql "SELECT state FROM ns_generations WHERE name = 'step-$sb'")" = 1 ]; then
			ck_log "cycle $c: step-$sb committed by a rename whose answer died with B: REF follows the catalog"
			mv "$CK_REF/k/step-$sb/.metadata.tmp" "$CK_REF/k/step-$sb/.metadata"
		fi
		for name in $saved_a; do
			state=$(mn_psql "SELECT state || ' ' || rule || ' ' || lost FROM ns_generations WHERE name = '$name'")
			case $state in
			"1 dcp-metadata false" | "3 keep false") ;;
			*) ck_fail "cycle $c (seed $seed): A's $name is lost: state, rule, lost: $state" ;;
			esac
		done
		i=0
		while n=$(mn_psql "SELECT count(*) FROM ns_generations WHERE state = 1 AND NOT lost") &&
			[ "$n" -gt 3 ] && [ $i -lt 200 ]; do
			i=$((i + 1))
			sleep 0.1
		done
		[ "$n" -le 3 ] || ck_fail "cycle $c (seed $seed): $n committed generations with keep=3: $(mn_psql "SELECT string_agg(name, ' ' ORDER BY step) FROM ns_generations WHERE state = 1 AND NOT lost")"
		# a lost one (not counted by keep) is hidden as a held one is
		listed=$(mn_psql "SELECT coalesce(string_agg(name, ' ' ORDER BY step), '') FROM ns_generations WHERE state = 1 AND NOT lost")
		k2_expect A "$listed"
		mn_mount C "quiet=0.5,keep=3"
		k2_expect C "$listed"
		out=$("$CKPTFS_ADMIN" check "$MN_MNT_C" 2>&1) || ck_fail "cycle $c (seed $seed): ckptfs-admin check: $(echo "$out" | head -n 8 | tr '\n' '|')"
		mn_umount C
		ck_log "cycle $c: kill at ${delay}s, B's save $([ $rc = 0 ] && echo finished || echo cut): $(mn_psql "SELECT state || ' ' || rule || ' lost=' || lost FROM ns_generations WHERE name = 'step-$sb'"); listed: $listed"
	done
	mn_umount A
}
ck_timeout test_torture_node_b_killed_mid_save_while_a_saves 400

ck_main "$@"
