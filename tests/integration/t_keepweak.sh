#!/bin/bash
# t_keepweak — keep-latest-k never deletes a save because of a newer one a
# weak rule (unmount, next-gen) committed without proof, and never deletes
# the owner's most recently committed save (fs/gen.h 3, generation.h G6;
# review 42 F1, F3). Raw tensor bytes (model.bin, optim.bin): a format
# ckptfs cannot judge (proof.h COMPLETE_FMT_NONE).
. "$(dirname "$0")/lib.sh"

KW_OPTS=quiet=0.3,keep=1

kw_row() { # NAME: "state rule" of its newest catalog row
	ck_sql "SELECT state || ' ' || coalesce(nullif(rule, ''), '-') FROM generations WHERE name = '$1' ORDER BY id DESC LIMIT 1"
}
kw_wait_row() { # NAME "STATE RULE": waits up to 10 s
	ck_until_eq "$2" 100 "catalog state and rule of $1" kw_row "$1"
}
# kw_marker_save DIR: model.bin 4 MiB + optim.bin 2 MiB, then its marker;
# a copy of the files goes to $CK_TMP/ref/DIR.
kw_marker_save() {
	mkdir -p "$CK_MNT/$1" "$CK_TMP/ref/$1"
	head -c 4M /dev/urandom >"$CK_TMP/ref/$1/model.bin"
	head -c 2M /dev/urandom >"$CK_TMP/ref/$1/optim.bin"
	cp "$CK_TMP/ref/$1/model.bin" "$CK_TMP/ref/$1/optim.bin" "$CK_MNT/$1/"
	touch "$CK_MNT/$1/.ckptfs-commit"
	kw_wait_row "$(basename "$1")" "1 marker"
}
kw_same() { # DIR: byte for byte as written
	assert_file_eq "$CK_TMP/ref/$1/model.bin" "$CK_MNT/$1/model.bin"
	assert_file_eq "$CK_TMP/ref/$1/optim.bin" "$CK_MNT/$1/optim.bin"
}
# kw_killed_writer FILE BYTES: a writer SIGKILLed after BYTES of FILE
kw_killed_writer() {
	"$PY" -c "
import os, signal
fd = os.open('$1', os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
os.write(fd, os.urandom($2))
os.kill(os.getpid(), signal.SIGKILL)" || true
}

# F1: the job is killed 1 MiB into step-200/model.bin, optim.bin never
# written; a clean unmount must not let step-200 delete step-100.
test_killed_raw_save_then_unmount_keeps_the_complete_one() {
	ck_mount "$KW_OPTS"
	kw_marker_save run/step-100
	mkdir "$CK_MNT/run/step-200"
	kw_killed_writer "$CK_MNT/run/step-200/model.bin" 1048576
	sleep 1
	ck_remount "$KW_OPTS"
	assert_exists "$CK_MNT/run/step-100"
	kw_same run/step-100
	assert_eq "1 marker" "$(kw_row step-100)" "step-100 after the unmount"
	assert_eq "4 unmount" "$(kw_row step-200)" "step-200 (no optim.bin, model.bin cut): held"
	assert_contains "$(ck_sql "SELECT held FROM generations WHERE name = 'step-200'")" \
		"optim.bin is missing" "the hold's reason"
	ck_umount
}

# F1 variant: optim.bin present, model.bin cut: the unmount may commit it
# (nothing proves it incomplete) but its commit never makes step-100 go.
test_unmount_commit_of_a_cut_raw_save_keeps_the_older() {
	ck_mount "$KW_OPTS"
	kw_marker_save run/step-100
	mkdir "$CK_MNT/run/step-200"
	head -c 2M /dev/urandom >"$CK_MNT/run/step-200/optim.bin"
	kw_killed_writer "$CK_MNT/run/step-200/model.bin" 1048576
	sleep 1
	ck_remount "$KW_OPTS"
	assert_eq "1 unmount" "$(kw_row step-200)" "step-200 committed by the weak rule"
	sleep 2 # a keep pass ran after that commit
	assert_eq "1 marker" "$(kw_row step-100)" "step-100 after a weak commit of step-200"
	kw_same run/step-100
	grep -q "step-100.*kept by keep-latest-k.*weak rule" "$CK_DLOG" "$CK_TMP"/daemon.*.log ||
		ck_fail "no line says why step-100 was kept"
	# a strong save later: both older ones go
	kw_marker_save run/step-300
	kw_wait_row step-100 "3 keep"
	kw_wait_row step-200 "3 keep"
	kw_same run/step-300
	ck_umount
}

# F3: keep=1, saves 100, 200, then 150 (a resume from step-100): 150, the
# trainer's newest save, stays; 200 stays as the highest step.
test_rollback_keeps_the_newest_commit() {
	ck_mount "$KW_OPTS"
	kw_marker_save run/step-100
	kw_marker_save run/step-200
	kw_wait_row step-100 "3 keep"
	kw_marker_save run/step-150
	sleep 2
	assert_eq "1 marker" "$(kw_row step-150)" "step-150 (the last commit) after its keep pass"
	assert_eq "1 marker" "$(kw_row step-200)" "step-200"
	kw_same run/step-150
	grep -q "step-150.*most recently committed" "$CK_TMP"/daemon.*.log ||
		ck_fail "no line says step-150 is kept as the last commit"
	# the next save of the new branch: 150 goes, 160 is the last commit
	kw_marker_save run/step-160
	kw_wait_row step-150 "3 keep"
	assert_eq "1 marker" "$(kw_row step-160)" "step-160"
	ck_remount "$KW_OPTS"
	kw_same run/step-160
	kw_same run/step-200
	ck_umount
}

ck_main "$@"
