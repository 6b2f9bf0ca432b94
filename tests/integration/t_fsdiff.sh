#!/bin/bash
# t_fsdiff — the mount against a plain directory, operation by operation
# (written by the s28 data-path review): a seeded random mix of operations
# on several files with handles of every mode (O_APPEND, truncates inside
# chunks, writes past EOF with holes, fallocate, copy_file_range, rename
# and unlink of open files, hard links, mmap writes) gives the same bytes,
# sizes and link counts as the same operations on the local disk, also
# after a remount; near-identical replicas written at once (recent.h R4-R6:
# writers following each other) read back exactly.
. "$(dirname "$0")/lib.sh"

test_random_operations_match_a_plain_directory_and_survive_a_remount() {
	local seed
	ck_mount
	for seed in ${FSDIFF_SEEDS:-1 2 3 4 5 6}; do
		mkdir "$CK_MNT/d$seed" "$CK_REF/d$seed"
		"$PY" "$CK_HELPERS/fsdiff.py" "$CK_MNT/d$seed" "$CK_REF/d$seed" --seed "$seed" ||
			ck_fail "fsdiff seed $seed differs from a plain directory"
	done
	ck_remount
	for seed in ${FSDIFF_SEEDS:-1 2 3 4 5 6}; do
		diff -r "$CK_MNT/d$seed" "$CK_REF/d$seed" >/dev/null ||
			ck_fail "seed $seed: after a remount the files differ from the plain directory"
	done
	ck_umount
}

test_random_operations_inside_a_generation_match_a_plain_directory() {
	local seed
	ck_mount
	for seed in 7 8; do
		mkdir -p "$CK_MNT/run/step-$seed" "$CK_REF/step-$seed"
		"$PY" "$CK_HELPERS/fsdiff.py" "$CK_MNT/run/step-$seed" "$CK_REF/step-$seed" --seed "$seed" ||
			ck_fail "fsdiff seed $seed in a generation differs from a plain directory"
	done
	ck_umount
}

test_replicas_written_at_once_read_back_exactly() {
	ck_mount
	"$PY" "$CK_HELPERS/replicas.py" "$CK_MNT" --writers 4 --size $((16 * MiB)) --seed 3 --rounds 2 ||
		ck_fail "a replica written beside others does not read back as written"
	ck_umount
}

ck_main "$@"
