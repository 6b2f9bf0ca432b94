#!/bin/bash
# t_keepweak2 — t_keepweak on the shared catalog (-o meta=, pggen.h X12,
# generation.h G6): a save committed by a weak rule (unmount) without proof
# never makes an older save go; the owner's most recently committed save is
# never expired (review 42 F1, F3). Raw tensor bytes (COMPLETE_FMT_NONE).
. "$(dirname "$0")/mn.sh"

KW2_OPTS=quiet=0.3,keep=1

kw2_row() { # NAME: "state rule" of its newest row in the shared catalog
	mn_psql "SELECT state || ' ' || coalesce(nullif(rule, ''), '-') FROM ns_generations WHERE name = '$1' ORDER BY id DESC LIMIT 1"
}
kw2_wait() { # NAME "STATE RULE" [S]
	mn_poll "SELECT state || ' ' || coalesce(nullif(rule, ''), '-') FROM ns_generations WHERE name = '$1' ORDER BY id DESC LIMIT 1" \
		"$2" "${3:-20}" "catalog state and rule of $1"
}
# kw2_save X DIR: model.bin 4 MiB + optim.bin 2 MiB on node X, its marker
kw2_save() {
	local v=MN_MNT_$1
	mkdir -p "${!v}/$2" "$CK_TMP/ref/$2"
	head -c 4M /dev/urandom >"$CK_TMP/ref/$2/model.bin"
	head -c 2M /dev/urandom >"$CK_TMP/ref/$2/optim.bin"
	cp "$CK_TMP/ref/$2/model.bin" "$CK_TMP/ref/$2/optim.bin" "${!v}/$2/"
	touch "${!v}/$2/.ckptfs-commit"
	kw2_wait "$(basename "$2")" "1 marker"
}
kw2_same() { # X DIR
	local v=MN_MNT_$1
	assert_file_eq "$CK_TMP/ref/$2/model.bin" "${!v}/$2/model.bin"
	assert_file_eq "$CK_TMP/ref/$2/optim.bin" "${!v}/$2/optim.bin"
}
kw2_killed_writer() { # FILE BYTES
	"$PY" -c "
import os, signal
fd = os.open('$1', os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
os.write(fd, os.urandom($2))
os.kill(os.getpid(), signal.SIGKILL)" || true
}

test_weak_commits_never_delete_a_complete_save() {
	mn_pg_start
	mn_mount A "$KW2_OPTS"
	kw2_save A run/step-100
	# F1: killed 1 MiB into model.bin, no optim.bin: held at the unmount
	mkdir "$MN_MNT_A/run/step-200"
	kw2_killed_writer "$MN_MNT_A/run/step-200/model.bin" 1048576
	sleep 1
	mn_umount A
	assert_eq "4 unmount" "$(kw2_row step-200)" "step-200 (no optim.bin) after the unmount"
	assert_eq "1 marker" "$(kw2_row step-100)" "step-100 after the unmount"
	# optim.bin there, model.bin cut: committed by unmount, step-100 stays
	mn_mount A "$KW2_OPTS"
	mkdir "$MN_MNT_A/run/step-300"
	head -c 2M /dev/urandom >"$MN_MNT_A/run/step-300/optim.bin"
	kw2_killed_writer "$MN_MNT_A/run/step-300/model.bin" 1048576
	sleep 1
	mn_umount A
	assert_eq "1 unmount" "$(kw2_row step-300)" "step-300 committed by the weak rule"
	mn_mount A "$KW2_OPTS"
	sleep 2
	assert_eq "1 marker" "$(kw2_row step-100)" "step-100 after a weak commit of step-300"
	kw2_same A run/step-100
	mn_umount A
}

test_rollback_keeps_the_newest_commit() {
	mn_pg_start
	mn_mount A "$KW2_OPTS"
	mn_mount B "$KW2_OPTS"
	kw2_save A run/step-100
	kw2_save A run/step-200
	kw2_wait step-100 "3 keep"
	mn_see B run/step-200 5
	kw2_save B run/step-150
	sleep 2
	assert_eq "1 marker" "$(kw2_row step-150)" "step-150 (the last commit)"
	assert_eq "1 marker" "$(kw2_row step-200)" "step-200"
	kw2_same A run/step-150
	kw2_save B run/step-160
	kw2_wait step-150 "3 keep"
	kw2_same A run/step-160
	kw2_same B run/step-200
	mn_umount B
	mn_umount A
}

ck_main "$@"
