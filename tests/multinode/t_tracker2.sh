#!/bin/bash
# t_tracker2 — trackers on a shared catalog (fs/gen.h invariants 12, 13;
# review 39 F3, F4): node A writes a DeepSpeed save, node B (the same
# trainer's rank 0 elsewhere) replaces run/latest atomically (a temporary,
# fsynced, os.replace'd onto the name): the save commits by rule tracker.
# A DCP save whose shards sit one level down without their .metadata is
# not committed by a tracker; its .metadata commits it.
. "$(dirname "$0")/mn.sh"

# "state:rule" of generation $1 in the shared catalog
tr_gen() { mn_psql "SELECT state || ':' || coalesce(rule, '') FROM ns_generations WHERE name = '$1'"; }

# tr_replace PATH TEXT: the atomic writer
tr_replace() {
	"$PY" - "$1" "$2" <<'PY'
import os, sys
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(sys.argv[2])
    f.flush()
    os.fsync(f.fileno())
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
PY
}

test_a_tracker_replaced_on_another_node_commits_the_save() {
	mn_pg_start
	mn_mount A quiet=0.5
	mn_mount B quiet=0.5
	mkdir -p "$MN_MNT_A/run/global_step100"
	ck_rand "$CK_REF/model.pt" 300000
	cp "$CK_REF/model.pt" "$MN_MNT_A/run/global_step100/mp_rank_00_model_states.pt"
	mn_see B run/global_step100/mp_rank_00_model_states.pt 5
	tr_replace "$MN_MNT_B/run/latest" global_step100 || ck_fail "B's atomic write of run/latest"
	mn_poll "SELECT state || ':' || rule FROM ns_generations WHERE name = 'global_step100'" \
		1:tracker 20 "global_step100 after B replaced run/latest"
	assert_file_eq "$CK_REF/model.pt" "$MN_MNT_B/run/global_step100/mp_rank_00_model_states.pt"
	assert_file_eq "$CK_REF/model.pt" "$MN_MNT_A/run/global_step100/mp_rank_00_model_states.pt"
	assert_eq "global_step100" "$(cat "$MN_MNT_A/run/latest")" "run/latest on A"
	mn_umount A
	mn_umount B
}
ck_timeout test_a_tracker_replaced_on_another_node_commits_the_save 120

test_a_tracker_waits_for_a_dcp_save_in_a_subdirectory() {
	mn_pg_start
	mn_mount A quiet=0.5
	local s=$MN_MNT_A/run/step-100/pytorch_model_fsdp_0
	mkdir -p "$s"
	ck_rand "$CK_REF/shard" 200000
	cp "$CK_REF/shard" "$s/__0_0.distcp"
	echo 100 >"$MN_MNT_A/run/latest_checkpointed_iteration.txt" # in place (Megatron)
	ck_wait_log "$CK_DLOG" "names generation step-100 (step 100, open): not committed, it has DCP shards and no .metadata yet (in directory pytorch_model_fsdp_0 " 10 ||
		ck_fail "no line keeping step-100 open at its tracker (step-100: '$(tr_gen step-100)')"
	assert_eq "0:" "$(tr_gen step-100)" "step-100 (a shard one level down, no .metadata) after its tracker"
	echo meta >"$s/.metadata.tmp"
	mv "$s/.metadata.tmp" "$s/.metadata"
	mn_poll "SELECT state || ':' || rule FROM ns_generations WHERE name = 'step-100'" \
		1:dcp-metadata 20 "step-100 after its .metadata"
	assert_file_eq "$CK_REF/shard" "$s/__0_0.distcp"
	mn_umount A
}
ck_timeout test_a_tracker_waits_for_a_dcp_save_in_a_subdirectory 120

# Review 43 F1 + F2 on a shared catalog: after a remount the trainer lists
# run/ and rewrites `latest` in place (the dentry READDIRPLUS made, no
# LOOKUP), then the daemon is killed (-9) as soon as that close returns:
# the save it names is committed by rule tracker (fs/ns.h invariants 9, 10).
test_a_tracker_rewritten_after_a_listing_commits_before_a_kill9() {
	mn_pg_start
	mn_mount A quiet=0.5
	mkdir -p "$MN_MNT_A/run/global_step1"
	ck_rand "$CK_REF/model.pt" 300000
	cp "$CK_REF/model.pt" "$MN_MNT_A/run/global_step1/mp_rank_00_model_states.pt"
	echo -n global_step1 >"$MN_MNT_A/run/latest"
	mn_poll "SELECT state || ':' || rule FROM ns_generations WHERE name = 'global_step1'" \
		1:tracker 20 "global_step1 after run/latest"
	mn_umount A
	mn_mount A quiet=0.5
	mkdir -p "$MN_MNT_A/run/global_step2"
	cp "$CK_REF/model.pt" "$MN_MNT_A/run/global_step2/mp_rank_00_model_states.pt"
	"$PY" - "$MN_MNT_A/run" "$MN_PID_A" <<'PY' || ck_fail "the tracker's rewrite failed"
import os, sys
run, pid = sys.argv[1], int(sys.argv[2])
os.listdir(run)
with open(os.path.join(run, "latest"), "w") as f:
    f.write("global_step2")
os.kill(pid, 9)
PY
	_mn_select A
	ck_killed9
	mn_mount A quiet=0.5
	mn_poll "SELECT state || ':' || rule FROM ns_generations WHERE name = 'global_step2'" \
		1:tracker 20 "global_step2, named by latest rewritten after a listing, before the kill -9"
	assert_file_eq "$CK_REF/model.pt" "$MN_MNT_A/run/global_step2/mp_rank_00_model_states.pt"
	assert_eq "global_step2" "$(cat "$MN_MNT_A/run/latest")" "run/latest"
	mn_umount A
}
ck_timeout test_a_tracker_rewritten_after_a_listing_commits_before_a_kill9 120

ck_main "$@"
