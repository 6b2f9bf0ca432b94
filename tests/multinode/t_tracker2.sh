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

ck_main "$@"
