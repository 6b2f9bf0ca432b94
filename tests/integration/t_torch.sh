#!/bin/bash
# t_torch — real PyTorch (Debian's python3-torch 1.13, /usr/bin/python3)
# checkpoints through the mount: torch.save/torch.load, mmap loading, DCP from
# one and from two processes, Lightning's save-in-TMPDIR-then-move, and dedup of
# the same tensors saved under names of different lengths.
. "$(dirname "$0")/lib.sh"

torch_ckpt() { "$PY" "$CK_HELPERS/torch_ckpt.py" "$@"; }

test_torch_save_and_load_model_and_optimizer_state() {
	ck_mount
	torch_ckpt save "$CK_MNT"
	torch_ckpt load "$CK_MNT"
	ck_remount
	torch_ckpt load "$CK_MNT"
	ck_umount
}

test_torch_load_with_mmap() {
	ck_mount
	torch_ckpt save "$CK_MNT"
	local rc=0
	torch_ckpt load-mmap "$CK_MNT" 2>"$CK_TMP/err" || rc=$?
	ck_umount
	if [ $rc = 77 ]; then
		ck_skip "$(sed 's/^torch_ckpt: //' "$CK_TMP/err"); mmap reads are covered by test_torch_from_file_maps_the_bytes and t_ops/test_mmap_read_matches_file_bytes"
	fi
	[ $rc = 0 ] || ck_fail "torch.load(mmap=True) failed: $(cat "$CK_TMP/err")"
}

test_torch_from_file_maps_the_bytes() {
	ck_mount
	torch_ckpt storage-mmap "$CK_MNT"
	ck_remount
	torch_ckpt storage-mmap "$CK_MNT"
	ck_umount
}

# A state dict of 1000 small tensors (and two big ones) loads back equal
# through direct_io reads (the file is over 8 MiB) and through the page
# cache, by path and through Python files that read each record with reads
# of their own.
test_torch_load_of_many_small_tensors() {
	ck_mount
	torch_ckpt many-save "$CK_MNT"
	ck_remount
	torch_ckpt many-load "$CK_MNT"
	ck_remount read_cache
	torch_ckpt many-load "$CK_MNT"
	ck_umount
}

test_dcp_save_and_load_from_one_process() {
	ck_mount
	mkdir "$CK_MNT/step-5"
	torch_ckpt dcp-save "$CK_MNT/step-5"
	local names
	names=$(ls -A "$CK_MNT/step-5" | tr '\n' ' ')
	assert_contains "$names" ".metadata " "DCP directory listing"
	assert_contains "$names" ".distcp" "DCP directory listing"
	assert_not_contains "$names" ".metadata.tmp" "DCP directory listing"
	torch_ckpt dcp-load "$CK_MNT/step-5"
	ck_remount
	torch_ckpt dcp-load "$CK_MNT/step-5"
	ck_umount
}

test_dcp_save_from_two_gloo_ranks() {
	ck_mount
	torch_ckpt dcp-spawn "$CK_MNT/ckpt/step-10"
	ck_remount
	[ -f "$CK_MNT/ckpt/step-10/.metadata" ] || ck_fail ".metadata missing after remount"
	ck_umount
}
ck_timeout test_dcp_save_from_two_gloo_ranks 180

test_same_tensors_saved_under_different_names_dedup() {
	# torch.save's zip puts records under the file's basename: the same
	# tensors sit at shifted offsets in the two files.
	local one unique
	ck_mount
	torch_ckpt two-names "$CK_MNT"
	one=$(ck_size "$CK_MNT/a.pt")
	ck_umount
	unique=$(ck_unique_bytes)
	ck_log "two torch.save files of $one bytes each: unique chunk bytes $unique"
	assert_lt "$unique" $((one * 12 / 10)) "unique bytes of the same state_dict saved under two names"
}

test_lightning_save_in_tmpdir_then_move_into_the_mount() {
	ck_mount
	torch_ckpt lightning "$CK_MNT"
	ck_remount
	[ -s "$CK_MNT/epoch=0-step=10.ckpt" ] || ck_fail "moved checkpoint missing after remount"
	"$PY" -c 'import sys, torch; torch.load(sys.argv[1])' "$CK_MNT/epoch=0-step=10.ckpt" ||
		ck_fail "torch.load of the moved checkpoint after remount failed"
	ck_umount
}

ck_main "$@"
