#!/bin/bash
# t_dcp — a real two-rank PyTorch Distributed Checkpoint trainer
# (helpers/dcp_train.py: Debian's torch 1.13, mp.spawn, gloo on 127.0.0.1)
# saving step-N generations through the mount: each save commits through DCP's
# .metadata rename (state=committed rule=dcp-metadata), a new trainer resumes
# from the newest complete step with the same weights; a trainer killed in the
# middle of a save leaves a partial step that is never listed, is rolled back
# by a daemon crash + remount or aborted as abandoned once its writers are
# dead, and resume picks the newest complete step.
. "$(dirname "$0")/lib.sh"

dcp_train() { "$PY" "$CK_HELPERS/dcp_train.py" "$@"; }

# _gen_field PATH FIELD — one field of user.ckptfs.generation.
_gen_field() {
	local v
	v=$(getfattr --only-values -n user.ckptfs.generation "$1" 2>/dev/null) || ck_fail "getfattr user.ckptfs.generation $1 failed"
	echo "$v" | tr ' ' '\n' | sed -n "s/^$2=//p"
}

# _gen_row NAME — "state|rule" of the newest catalog row of NAME.
_gen_row() {
	ck_sql "SELECT state || '|' || coalesce(rule, '') FROM generations WHERE name = '$1' ORDER BY id DESC LIMIT 1"
}

# Starts the trainer in its own session (so the whole spawn tree can be
# SIGKILLed at once): _TRAINER is its PID and process group.
_start_trainer() {
	ck_bg setsid "$PY" "$CK_HELPERS/dcp_train.py" "$@"
	_TRAINER=$CK_BG_PID
	local i=0
	until [ "$(ps -o pgid= -p "$_TRAINER" 2>/dev/null | tr -d ' ')" = "$_TRAINER" ]; do
		i=$((i + 1))
		[ $i -le 100 ] || ck_fail "the trainer $_TRAINER did not become a process group leader (setsid)"
		sleep 0.02
	done
	# Whatever ends the case, no rank process outlives it (they hold the mount).
	ck_at_exit 'kill -9 -- -"$_TRAINER" 2>/dev/null'
}

_kill_trainer() {
	kill -9 -- -"$_TRAINER" 2>/dev/null || true
	wait "$_TRAINER" 2>/dev/null || true
	local i=0
	while [ "$(ps -o stat= -s "$_TRAINER" | grep -cv '^Z' || true)" != 0 ]; do
		i=$((i + 1))
		[ $i -le 200 ] || ck_fail "trainer processes of group $_TRAINER survive SIGKILL"
		sleep 0.05
	done
}

_check_committed_steps() { # RUN STEP... : each listed, state=committed rule=dcp-metadata
	local run=$1 s listing
	shift
	listing=$(ls "$run" | tr '\n' ' ')
	for s in "$@"; do
		assert_contains " $listing" " step-$s " "listing of $run"
		assert_eq committed "$(_gen_field "$run/step-$s" state)" "state of step-$s"
		assert_eq dcp-metadata "$(_gen_field "$run/step-$s" rule)" "commit rule of step-$s"
		assert_eq "$(find "$run/step-$s" -type f | wc -l)" "$(_gen_field "$run/step-$s" files)" "files= of step-$s"
		[ -f "$run/step-$s/.metadata" ] || ck_fail "step-$s has no .metadata"
		assert_not_exists "$run/step-$s/.metadata.tmp"
	done
}

test_dcp_saves_commit_by_metadata_rename_and_resume_loads_newest() {
	ck_mount
	mkdir -p "$CK_REF/ref"
	dcp_train train "$CK_MNT/run" "$CK_REF/ref" --steps 6 --every 2 >"$CK_TMP/train.out" || ck_fail "the 2-rank DCP trainer failed: $(tail -n 5 "$CK_TMP/train.out" | tr '\n' '|')"
	ck_log "$(cat "$CK_TMP/train.out" | tr '\n' '|')"
	assert_eq "step-2 step-4 step-6" "$(ls "$CK_MNT/run" | sort -V | tr '\n' ' ' | sed 's/ $//')" "series listing after three saves"
	_check_committed_steps "$CK_MNT/run" 2 4 6
	# Two ranks wrote: rank 1's shard is in every step.
	[ -s "$CK_MNT/run/step-6/__1_0.distcp" ] || ck_fail "rank 1's shard file __1_0.distcp is missing from step-6"
	assert_eq 3 "$(ck_sql "SELECT count(*) FROM generations WHERE state = 1 AND rule = 'dcp-metadata'")" "generations committed by dcp-metadata in the catalog"
	local out
	out=$(dcp_train resume "$CK_MNT/run" "$CK_REF/ref" --expect 6) || ck_fail "resume from step-6 failed: $out"
	assert_contains "$out" "resumed step-6" "resume output"
	ck_remount
	_check_committed_steps "$CK_MNT/run" 2 4 6
	out=$(dcp_train resume "$CK_MNT/run" "$CK_REF/ref" --expect 6) || ck_fail "resume after a remount failed: $out"
	out=$("$CKPTFS_ADMIN" check "$CK_MNT" 2>&1) || ck_fail "ckptfs-admin check: $out"
	ck_umount
}
ck_timeout test_dcp_saves_commit_by_metadata_rename_and_resume_loads_newest 240

# Starts a trainer that hangs in rank 1 during the step-6 save, checks the
# partial step is open and hidden, then kills the whole trainer.
_trainer_killed_mid_save() {
	mkdir -p "$CK_REF/ref"
	_start_trainer train "$CK_MNT/run" "$CK_REF/ref" --steps 8 --every 2 --hang-at 6 --ready "$CK_TMP/hang"
	ck_wait_file "$CK_TMP/hang" 120
	# Every data file of step-6 is there; only .metadata is missing.
	[ -s "$CK_MNT/run/step-6/__1_0.distcp" ] || ck_fail "rank 1 reported its shard written, but step-6/__1_0.distcp is missing"
	assert_not_exists "$CK_MNT/run/step-6/.metadata"
	assert_eq open "$(_gen_field "$CK_MNT/run/step-6" state)" "state of step-6 while the save hangs"
	assert_eq "step-2 step-4" "$(ls "$CK_MNT/run" | sort -V | tr '\n' ' ' | sed 's/ $//')" "series listing while step-6 is being saved (open generations are hidden)"
	_check_committed_steps "$CK_MNT/run" 2 4
	_HANG_FILES=$(ls -A "$CK_MNT/run/step-6" | wc -l)
	_HANG_NAMES=$(ls -A "$CK_MNT/run/step-6" | tr '\n' ' ')
}

test_dcp_trainer_killed_mid_save_then_daemon_crash_holds_it() {
	ck_mount
	_trainer_killed_mid_save
	_kill_trainer
	# The partial step stays hidden, even with its writers dead.
	assert_eq "step-2 step-4" "$(ls "$CK_MNT/run" | sort -V | tr '\n' ' ' | sed 's/ $//')" "series listing after the trainer died"
	ck_kill9
	ck_mount
	# Held: hidden from the listing, its files kept (never deleted by a guess).
	assert_eq "4|crash" "$(_gen_row step-6)" "catalog state|rule of the partial step-6 after kill -9 and remount"
	assert_eq "step-2 step-4" "$(ls "$CK_MNT/run" | sort -V | tr '\n' ' ' | sed 's/ $//')" "series listing with step-6 held"
	local e
	for e in $_HANG_NAMES; do # every entry seen during the hang is kept
		[ -e "$CK_MNT/run/step-6/$e" ] || ck_fail "the held step-6 lost $e"
	done
	_check_committed_steps "$CK_MNT/run" 2 4
	local out
	out=$(dcp_train resume "$CK_MNT/run" "$CK_REF/ref" --expect 4) || ck_fail "resume after the crash failed: $out"
	out=$("$CKPTFS_ADMIN" check "$CK_MNT" 2>&1) || ck_fail "ckptfs-admin check: $out"
	# The trainer saves step-6 again in the same series: a new version of the
	# held one, committed by its .metadata rename.
	dcp_train train "$CK_MNT/run" "$CK_REF/ref" --steps 6 --every 6 --version 2 >/dev/null || ck_fail "saving step-6 again over the held one failed"
	_check_committed_steps "$CK_MNT/run" 6
	ck_umount
	ck_objcheck
}
ck_timeout test_dcp_trainer_killed_mid_save_then_daemon_crash_holds_it 300

test_dcp_trainer_killed_mid_save_is_held_as_abandoned_without_restart() {
	ck_mount abandon=2
	_trainer_killed_mid_save
	# Alive but stuck (both ranks' processes live, no handle open): not abandoned.
	sleep 3.5
	assert_eq open "$(_gen_field "$CK_MNT/run/step-6" state)" "state of step-6 3.5 s into the hang with abandon=2 (its writer processes are alive)"
	_kill_trainer
	local i=0 row
	while :; do
		row=$(_gen_row step-6)
		[ "${row%%|*}" = 0 ] || break
		i=$((i + 1))
		[ $i -le 100 ] || ck_fail "step-6 still OPEN 10 s after its trainer was killed, with abandon=2"
		sleep 0.1
	done
	ck_log "step-6 ended $(awk -v n=$i 'BEGIN { printf "%.1f", n / 10 }') s after the trainer's death: $row"
	assert_eq "4|abandoned" "$row" "catalog state|rule of step-6 once its writers are dead"
	assert_eq "step-2 step-4" "$(ls "$CK_MNT/run" | sort -V | tr '\n' ' ' | sed 's/ $//')" "series listing after the abandoned step is held"
	# every entry seen during the hang is kept (ranks may have added more before the kill)
	local e
	for e in $_HANG_NAMES; do
		[ -e "$CK_MNT/run/step-6/$e" ] || ck_fail "the held step-6 lost $e"
	done
	"$CKPTFS_ADMIN" list --all "$CK_MNT" | grep "step-6" | grep -q "held.*marker that never came" ||
		ck_fail "list --all: $("$CKPTFS_ADMIN" list --all "$CK_MNT")"
	_check_committed_steps "$CK_MNT/run" 2 4
	local out
	out=$(dcp_train resume "$CK_MNT/run" "$CK_REF/ref" --expect 4) || ck_fail "resume after the abandonment failed: $out"
	ck_umount
	"$CKPTFS_ADMIN" check --cache "$CK_CACHE" >"$CK_TMP/chk" 2>&1 || ck_fail "ckptfs-admin check: $(head -n 5 "$CK_TMP/chk" | tr '\n' '|')"
	ck_objcheck
}
ck_timeout test_dcp_trainer_killed_mid_save_is_held_as_abandoned_without_restart 300

test_dcp_trainer_and_daemon_killed_at_a_random_point() {
	ck_mount
	mkdir -p "$CK_REF/ref"
	_start_trainer train "$CK_MNT/run" "$CK_REF/ref" --steps 1000 --every 1
	# The random point is counted from the first committed save, not from the
	# start: torch's start-up alone takes over 6 s on a busy machine (another
	# lane of run.sh), and then no save was there to resume.
	local i=0 delay
	until [ "$(ck_sql 'SELECT count(*) FROM generations WHERE state = 1')" != 0 ]; do
		i=$((i + 1))
		[ $i -le 1200 ] || ck_fail "the trainer committed no save within 120 s"
		_ck_pid_alive "$_TRAINER" || ck_fail "the trainer exited before its first save was committed"
		sleep 0.1
	done
	delay=$(awk -v s=$RANDOM 'BEGIN { srand(s); printf "%.2f", rand() * 6 }')
	sleep "$delay"
	_kill_trainer
	ck_kill9
	ck_mount
	local newest names n
	newest=$(ck_sql "SELECT coalesce(max(step), 0) FROM generations WHERE state = 1")
	names=$(ls "$CK_MNT/run" 2>/dev/null | sort -V | tr '\n' ' ')
	ck_log "trainer and daemon killed ${delay}s after the first commit: $(echo $names | wc -w) committed steps listed (newest step-$newest), $(ck_sql "SELECT coalesce(group_concat(name || ' (' || rule || ')', ', '), 'none') FROM generations WHERE state = 2") aborted"
	assert_eq 0 "$(ck_sql 'SELECT count(*) FROM generations WHERE state = 0')" "OPEN generations after kill -9 and remount"
	for n in $names; do
		_check_committed_steps "$CK_MNT/run" "${n#step-}"
	done
	assert_eq "$(ck_sql "SELECT count(*) FROM generations WHERE state = 1")" "$(echo $names | wc -w)" "listed steps vs committed generations"
	[ "$newest" -gt 0 ] || ck_fail "a save was committed before the kill, but no committed step is left after the remount"
	local out
	out=$(dcp_train resume "$CK_MNT/run" "$CK_REF/ref" --expect "$newest") || ck_fail "resume of the newest committed step-$newest failed: $out"
	out=$("$CKPTFS_ADMIN" check "$CK_MNT" 2>&1) || ck_fail "ckptfs-admin check: $out"
	ck_umount
	ck_objcheck
}
ck_timeout test_dcp_trainer_and_daemon_killed_at_a_random_point 240

ck_main "$@"
