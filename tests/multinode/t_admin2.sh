#!/bin/bash
# t_admin2 — generations across nodes, as an admin and a node's unmount
# see them (issue 18, docs/MULTINODE.md): nodes A, B (and a fresh C) of
# one shared catalog over one BACKING.
#
# `ckptfs-admin rm`, `commit`, `pin` and `list` on one node act on the
# shared generations whichever node wrote them (the daemon names GEN and runs
# the catalog calls, fenced: a swept node refuses with EROFS); a node that
# unmounts leaves open a save another live node still writes; rm -rf of a
# generation's root ends it on every node.
. "$(dirname "$0")/mn.sh"

# a2_state NAME: the shared row's state (0 open, 1 committed, 3 deleted, 4 held).
a2_state() { mn_psql "SELECT state FROM ns_generations WHERE name = '$1' ORDER BY id DESC LIMIT 1"; }

# a2_list X [--all]: ckptfs-admin list on node X, as "series name step
# state pin" lines (durable shown as committed: the upload may finish
# between two nodes' listings).
a2_list() {
	local v=MN_MNT_$1 out
	out=$("$CKPTFS_ADMIN" list "${!v}" ${2:-}) || ck_fail "ckptfs-admin list on node $1: $out"
	echo "$out" | awk 'NR > 1 { s = $4; if (s == "durable") s = "committed"; print $1, $2, $3, s, $5 }' | sort
}

test_admin_rm_commit_pin_list_act_on_every_node() {
	local out rc
	mn_pg_start
	mn_mount A keep=2
	mn_mount B keep=2
	mkdir "$MN_MNT_A/run"
	mn_see B run
	mn_save A run/step-10 model.bin 200000 s10
	mn_save A run/step-20 model.bin 200000 s20
	assert_eq "run step-10 10 committed -
run step-20 20 committed -" "$(a2_list B)" "list on B: A's saves"
	assert_eq "$(a2_list A)" "$(a2_list B)" "list on A and on B"
	# pin on B keeps A's step-10 through keep-latest-k (keep=2)
	out=$("$CKPTFS_ADMIN" pin "$MN_MNT_B" run/step-10 2>&1) || ck_fail "pin on B: $out"
	assert_eq "t" "$(mn_psql "SELECT pinned FROM ns_generations WHERE name = 'step-10'")" "step-10 pinned"
	mn_save A run/step-30 model.bin 100000 s30
	mn_save A run/step-40 model.bin 100000 s40
	mn_until "SELECT state = 3 FROM ns_generations WHERE name = 'step-20'"
	assert_eq "1" "$(a2_state step-10)" "pinned step-10 kept by keep-latest-k"
	assert_file_eq "$CK_TMP/s10.bin" "$MN_MNT_B/run/step-10/model.bin"
	# rm on B of what A committed: gone on every node
	out=$("$CKPTFS_ADMIN" rm "$MN_MNT_B" "$MN_MNT_B/run/step-10" 2>&1) || ck_fail "rm on B: $out"
	assert_eq "3" "$(a2_state step-10)" "step-10 deleted"
	assert_not_exists "$MN_MNT_A/run/step-10"
	assert_not_exists "$MN_MNT_B/run/step-10"
	rc=0 && out=$("$CKPTFS_ADMIN" rm "$MN_MNT_B" run/step-10 2>&1) || rc=$?
	assert_eq "6" "$rc" "rm of a deleted generation: no such generation ($out)"
	rc=0 && out=$("$CKPTFS_ADMIN" pin "$MN_MNT_B" run/step-99 2>&1) || rc=$?
	assert_eq "6" "$rc" "pin of no generation ($out)"
	# a save A held at its unmount (a DCP shard, no .metadata: A alone wrote it)
	mkdir "$MN_MNT_A/run/step-50"
	head -c 300000 /dev/urandom >"$CK_TMP/s50.bin"
	cp "$CK_TMP/s50.bin" "$MN_MNT_A/run/step-50/__0_0.distcp"
	mn_umount A
	assert_eq "4" "$(a2_state step-50)" "step-50 held at A's unmount"
	assert_eq "run step-30 30 committed -
run step-40 40 committed -" "$(a2_list B)" "list on B: the held step-50 not shown"
	# commit on B of the held one: listed everywhere
	out=$("$CKPTFS_ADMIN" commit "$MN_MNT_B" run/step-50 2>&1) || ck_fail "commit on B: $out"
	assert_eq "1" "$(a2_state step-50)" "step-50 committed by B's admin"
	mn_until "SELECT state = 3 FROM ns_generations WHERE name = 'step-30'" # keep=2
	mn_mount A keep=2
	mn_mount C
	local want="run step-40 40 committed -
run step-50 50 committed -"
	assert_eq "$want" "$(a2_list B)" "list on B"
	assert_eq "$want" "$(a2_list A)" "list on A (mounted again)"
	assert_eq "$want" "$(a2_list C)" "list on fresh node C"
	assert_eq "$(a2_list B --all)" "$(a2_list C --all)" "list --all on B and C"
	assert_file_eq "$CK_TMP/s50.bin" "$MN_MNT_C/run/step-50/__0_0.distcp"
	mn_umount C
	mn_umount B
	mn_umount A
}
ck_timeout test_admin_rm_commit_pin_list_act_on_every_node 180

test_a_fenced_node_refuses_admin_changes() {
	local out rc
	mn_pg_start
	mn_mount A
	mn_mount B
	mkdir "$MN_MNT_A/run"
	mn_save A run/step-1 model.bin 100000 s1
	mn_see B run/step-1/model.bin
	# B stops past its lease: A sweeps it; B, running again, is fenced
	kill -STOP "$MN_PID_B"
	mn_until "SELECT state = 'expired' FROM ckpt_nodes WHERE name LIKE '%node-B%'"
	kill -CONT "$MN_PID_B"
	rc=0 && out=$("$CKPTFS_ADMIN" rm "$MN_MNT_B" run/step-1 2>&1) || rc=$?
	assert_ne "0" "$rc" "rm on the fenced node B ($out)"
	case $out in *fenced*) ;; *) ck_fail "rm on fenced B does not say fenced: $out" ;; esac
	out=$("$CKPTFS_ADMIN" pin "$MN_MNT_B" run/step-1 2>&1) || true
	case $out in *fenced*) ;; *) ck_fail "pin on fenced B does not say fenced: $out" ;; esac
	assert_eq "1 false" "$(mn_psql "SELECT state || ' ' || pinned FROM ns_generations WHERE name = 'step-1'")" \
		"step-1 untouched"
	out=$("$CKPTFS_ADMIN" pin "$MN_MNT_A" run/step-1 2>&1) || ck_fail "pin on live A: $out"
	mn_umount B
	mn_umount A
}
ck_timeout test_a_fenced_node_refuses_admin_changes 120

test_a_node_unmounting_leaves_open_a_save_another_node_completes() {
	mn_pg_start
	mn_mount A
	mn_mount B
	mkdir -p "$MN_MNT_A/run/step-5" # A opens the save (a DCP layout: .metadata ends it)
	mn_see B run/step-5
	head -c 300000 /dev/urandom >"$CK_TMP/r1.bin"
	cp "$CK_TMP/r1.bin" "$MN_MNT_B/run/step-5/__1_0.distcp"
	mn_umount B # its marker never came on B: it is A's to decide
	assert_eq "0" "$(a2_state step-5)" "step-5 left open by B's unmount"
	head -c 300000 /dev/urandom >"$CK_TMP/r0.bin"
	cp "$CK_TMP/r0.bin" "$MN_MNT_A/run/step-5/__0_0.distcp"
	echo metadata >"$MN_MNT_A/run/step-5/.metadata.tmp"
	mv "$MN_MNT_A/run/step-5/.metadata.tmp" "$MN_MNT_A/run/step-5/.metadata"
	mn_until "SELECT state = 1 AND rule = 'dcp-metadata' FROM ns_generations WHERE name = 'step-5'"
	mn_mount C
	assert_eq "run step-5 5 committed -" "$(a2_list A)" "list on A"
	assert_eq "run step-5 5 committed -" "$(a2_list C)" "list on fresh node C"
	assert_file_eq "$CK_TMP/r1.bin" "$MN_MNT_C/run/step-5/__1_0.distcp"
	assert_file_eq "$CK_TMP/r0.bin" "$MN_MNT_C/run/step-5/__0_0.distcp"
	mn_umount C
	mn_umount A
}
ck_timeout test_a_node_unmounting_leaves_open_a_save_another_node_completes 120

test_a_node_alone_in_a_save_still_holds_it_at_unmount() {
	mn_pg_start
	mn_mount A
	mn_mount B
	mkdir -p "$MN_MNT_B/run/step-6" # B opens it and writes alone
	head -c 100000 /dev/urandom >"$MN_MNT_B/run/step-6/__0_0.distcp"
	mn_see A run
	mn_umount B
	assert_eq "4" "$(a2_state step-6)" "step-6 held by B's unmount: nobody else took part"
	mn_umount A
}
ck_timeout test_a_node_alone_in_a_save_still_holds_it_at_unmount 120

test_rm_rf_of_a_save_ends_it_on_every_node() {
	local out
	mn_pg_start
	mn_mount A keep=2
	mn_mount B keep=2
	mkdir "$MN_MNT_A/run"
	mn_save A run/step-1 model.bin 100000 s1
	mn_save A run/step-2 model.bin 100000 s2
	mn_see B run/step-2/model.bin
	rm -rf "$MN_MNT_B/run/step-2"
	assert_eq "3 trainer" "$(mn_psql "SELECT state || ' ' || rule FROM ns_generations WHERE name = 'step-2'")" \
		"step-2 ended by rm -rf on B"
	assert_eq "run step-1 1 committed -" "$(a2_list A)" "list on A"
	assert_eq "run step-1 1 committed -
run step-2 2 deleted -" "$(a2_list A --all)" "list --all on A"
	assert_eq "$(a2_list A --all)" "$(a2_list B --all)" "list --all on B"
	# the name is free again, and keep-latest-k counts step-1 and the new one
	mn_save B run/step-2 model.bin 100000 s2b
	mn_save B run/step-3 model.bin 100000 s3
	mn_until "SELECT state = 3 FROM ns_generations WHERE name = 'step-1'"
	assert_file_eq "$CK_TMP/s2b.bin" "$MN_MNT_A/run/step-2/model.bin"
	out=$("$CKPTFS_ADMIN" check "$MN_MNT_A" 2>&1) || ck_fail "ckptfs-admin check: $(echo "$out" | head -n 8 | tr '\n' '|')"
	mn_umount B
	mn_umount A
}
ck_timeout test_rm_rf_of_a_save_ends_it_on_every_node 120

ck_main "$@"
