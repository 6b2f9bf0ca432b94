#!/bin/bash
# t_layouts — real torch state (model, Adam, scheduler, RNG) saved five times
# (steps 10..50) with the exact write sequence of each trainer layout
# (helpers/layouts.py, after /work/shared/TRAINERS.md) into a ckptfs mount with
# keep=2 and BACKING behind the write-back cache; then:
#   - which generations keep-latest-k left (listing and catalog, once durable);
#   - the trainer's own resume rule picks the newest complete save, and what it
#     loads equals what was saved (every tensor torch.equal), before and after
#     a remount, and on a new node with an empty cache (DeepSpeed).
# TorchTitan: step-N/ DCP dirs, highest step-N with .metadata. Lightning:
# torch.save into $TMPDIR + shutil.move, last.ckpt a full copy; last.ckpt or
# the highest epoch=E-step=S.ckpt. HF: checkpoint-N/ in place, trainer_state.json
# then rank 1's rng file; highest checkpoint-N directory. DeepSpeed:
# global_stepN/ + zero_to_fp32.py + `latest`. Megatron (legacy): iter_N/ +
# latest_checkpointed_iteration.txt.
. "$(dirname "$0")/../integration/lib.sh"
. "$(dirname "$0")/common.sh"

lay() { "$PY" "$TR_HELPERS/layouts.py" "$@"; }

_save() { # LAYOUT SERIES [STEPS]
	lay "$1" save "$CK_MNT/$2" "$CK_REF/$2" --steps "${3:-10,20,30,40,50}" >"$CK_TMP/save.out" 2>&1 ||
		ck_fail "$1 saves failed: $(tail -n 8 "$CK_TMP/save.out" | tr '\n' '|')"
}

_resume() { # LAYOUT SERIES EXPECTED_STEP [args]
	local l=$1 s=$2 n=$3 out
	shift 3
	out=$(lay "$l" resume "$CK_MNT/$s" "$CK_REF/$s" --expect "$n" "$@" 2>&1) || ck_fail "$l resume: $out"
	assert_eq "resumed $n" "$out" "$l resume"
}

# The generations of SERIES keep=2 must leave: in the listing (with the
# trainer's own mutable files) and as the committed rows of the catalog.
_kept() { # SERIES "LISTING" "COMMITTED"
	tr_wait_uploads 90
	tr_wait_listing "$CK_MNT/$1" "$2" 30
	assert_eq "$3" "$(tr_committed "$CK_MNT/$1")" "committed generations of $1 (keep=$TR_KEEP)"
}

test_torchtitan_dcp_steps_kept_and_resumed() {
	ck_mount "keep=$TR_KEEP"
	_save titan run
	_kept run "step-40 step-50" "step-40 step-50"
	assert_eq committed "$(tr_gen_field "$CK_MNT/run/step-50" state)"
	assert_eq dcp-metadata "$(tr_gen_field "$CK_MNT/run/step-50" rule)"
	_resume titan run 50
	ck_remount "keep=$TR_KEEP"
	_resume titan run 50
	ck_umount
	tr_objcheck --allow-orphans
}
ck_timeout test_torchtitan_dcp_steps_kept_and_resumed 180

test_lightning_moved_in_files_kept_and_resumed() {
	ck_mount "keep=$TR_KEEP"
	_save lightning run
	# Single-file saves commit when the next one starts (rule next-gen): the
	# newest, step=50, is still OPEN (hidden) while the job runs; last.ckpt is
	# an ordinary file, never rotated.
	_kept run "epoch=1-step=30.ckpt epoch=2-step=40.ckpt last.ckpt" "epoch=1-step=30.ckpt epoch=2-step=40.ckpt"
	assert_eq open "$(tr_gen_field "$CK_MNT/run/epoch=2-step=50.ckpt" state)" "state of the newest single-file save"
	assert_eq next-gen "$(tr_gen_field "$CK_MNT/run/epoch=2-step=40.ckpt" rule)" "commit rule of step=40"
	_resume lightning run 50 --rule last
	_resume lightning run 40 --rule highest
	# The job ends: a clean unmount commits step=50, keep then drops step=30.
	ck_remount "keep=$TR_KEEP"
	_kept run "epoch=2-step=40.ckpt epoch=2-step=50.ckpt last.ckpt" "epoch=2-step=40.ckpt epoch=2-step=50.ckpt"
	assert_eq unmount "$(tr_gen_field "$CK_MNT/run/epoch=2-step=50.ckpt" rule)" "commit rule of step=50"
	_resume lightning run 50 --rule last
	_resume lightning run 50 --rule highest
	# Nothing left in $TMPDIR by the moves.
	assert_eq "" "$(find "$CK_TMP" -maxdepth 1 -name 'tmp*' -type f)" "temp files left by the moves"
	ck_umount
	tr_objcheck --allow-orphans
}
ck_timeout test_lightning_moved_in_files_kept_and_resumed 180

test_hf_trainer_checkpoints_kept_and_resumed() {
	ck_mount "keep=$TR_KEEP,quiet=1"
	_save hf out
	_kept out "checkpoint-40 checkpoint-50" "checkpoint-40 checkpoint-50"
	assert_eq hf-trainer-state "$(tr_gen_field "$CK_MNT/out/checkpoint-50" rule)"
	_resume hf out 50
	# A save killed before trainer_state.json: HF's get_last_checkpoint has no
	# completeness check, but the open checkpoint-60 is not listed.
	lay hf partial "$CK_MNT/out" --n 60 >/dev/null 2>&1 || ck_fail "partial HF save failed"
	assert_eq open "$(tr_gen_field "$CK_MNT/out/checkpoint-60" state)" "state of the partial checkpoint-60"
	sleep 2 # past quiet: no rule commits it
	_resume hf out 50
	ck_umount
}
ck_timeout test_hf_trainer_checkpoints_kept_and_resumed 180

# Regression (found by this suite): a clean unmount must abort an HF
# checkpoint-N without trainer_state.json (its rng_state files mark the HF
# layout), else HF's get_last_checkpoint picks it after the remount (resume
# crashes) and keep=2 deletes a complete checkpoint to make room for it.
test_hf_checkpoint_without_trainer_state_is_aborted_by_clean_unmount() {
	ck_mount "keep=$TR_KEEP,quiet=1"
	_save hf out 40,50
	_kept out "checkpoint-40 checkpoint-50" "checkpoint-40 checkpoint-50"
	lay hf partial "$CK_MNT/out" --n 60 >/dev/null 2>&1 || ck_fail "partial HF save failed"
	assert_eq open "$(tr_gen_field "$CK_MNT/out/checkpoint-60" state)" "state of the partial checkpoint-60"
	ck_remount "keep=$TR_KEEP,quiet=1"
	ck_log "checkpoint-60 after a clean unmount and mount: $(getfattr --absolute-names --only-values -n user.ckptfs.generation "$CK_MNT/out/checkpoint-60" 2>&1)"
	assert_eq "checkpoint-40 checkpoint-50" "$(tr_listing "$CK_MNT/out")" "HF checkpoints listed after a clean unmount"
	_resume hf out 50
	ck_umount
}
ck_timeout test_hf_checkpoint_without_trainer_state_is_aborted_by_clean_unmount 180

test_deepspeed_latest_tag_kept_and_resumed_on_a_new_node() {
	ck_mount "keep=$TR_KEEP"
	_save deepspeed ds
	_kept ds "global_step40 global_step50 latest zero_to_fp32.py" "global_step40 global_step50"
	assert_eq tracker "$(tr_gen_field "$CK_MNT/ds/global_step50" rule)"
	_resume deepspeed ds 50
	ck_umount
	CK_CACHE=$CK_TMP/cache-node2
	mkdir -p "$CK_CACHE"
	ck_mount "keep=$TR_KEEP"
	assert_eq "global_step40 global_step50 latest zero_to_fp32.py" "$(tr_listing "$CK_MNT/ds")" "listing on a new node"
	_resume deepspeed ds 50
	ck_umount
}
ck_timeout test_deepspeed_latest_tag_kept_and_resumed_on_a_new_node 180

test_megatron_tracker_kept_and_resumed() {
	ck_mount "keep=$TR_KEEP"
	_save megatron mg
	_kept mg "iter_0000040 iter_0000050 latest_checkpointed_iteration.txt" "iter_0000040 iter_0000050"
	assert_eq tracker "$(tr_gen_field "$CK_MNT/mg/iter_0000050" rule)"
	_resume megatron mg 50
	ck_remount "keep=$TR_KEEP"
	_resume megatron mg 50
	ck_umount
	tr_objcheck --allow-orphans
}
ck_timeout test_megatron_tracker_kept_and_resumed 180

ck_main "$@"
