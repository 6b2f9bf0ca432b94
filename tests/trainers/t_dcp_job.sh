#!/bin/bash
# t_dcp_job — a real two-rank PyTorch DCP training job (helpers/dcp_job.py:
# torch 1.13 prototype DCP, gloo, Adam, a ShardedTensor) checkpointing
# run/step-N every 2 steps through a ckptfs mount with keep=2 and BACKING
# behind the write-back cache, interrupted and resumed: its final state must
# equal, bit for bit (torch.equal), that of the same job run uninterrupted on
# a plain local directory.
#   - the trainer SIGKILLed in the middle of the step-6 save (shards written,
#     no .metadata), restarted on the same mount: resumes from step-4;
#   - the daemon kill -9'd in the middle of that save: the trainer fails on its
#     own (ENOTCONN), remount on the same cache rolls step-6 back, resume;
#   - a "reboot": trainer and daemon SIGKILLed together at a random point of a
#     job saving every step, remount on the kept cache, resume;
#   - a "new node": the job stops at step 6, its generations become durable
#     (upload queue empty), the node dies (kill -9), BACKING is mounted with an
#     EMPTY cache (catalog rebuilt from BACKING's manifests), resume there.
. "$(dirname "$0")/../integration/lib.sh"
. "$(dirname "$0")/common.sh"

STEPS=10
EVERY=2

job() { "$PY" "$TR_HELPERS/dcp_job.py" "$@"; }

# The uninterrupted run, on a plain local directory, once per test run (every
# case compares with it; the job is deterministic, so its result does not
# depend on where or how often it checkpoints). Sets REF_OUT.
_reference() {
	local d=$CK_ARTIFACTS/dcp-job-reference
	mkdir -p "$d"
	(
		flock 9
		if [ ! -f "$d/out/final.rank1.pt" ]; then
			rm -rf "$d/run" "$d/out"
			job train "$d/run" "$d/out" --steps $STEPS --every $EVERY >"$d/log" 2>&1 ||
				{ echo "the uninterrupted reference run failed: $(tail -n 5 "$d/log" | tr '\n' '|')" >&2; exit 1; }
			rm -rf "$d/run"
		fi
	) 9>"$d/lock" || ck_fail "no reference run"
	REF_OUT=$d/out
}

# Compares the final state in OUT with the uninterrupted run's.
_assert_same_as_uninterrupted() {
	local out
	out=$(job compare "$REF_OUT" "$1" 2>&1) || ck_fail "final state differs from the uninterrupted run: $out"
	ck_log "final state vs uninterrupted run: $out"
}

# Runs the job to the end on the mount (in the foreground); its output in $CK_TMP/resume.out.
_resume_to_end() { # OUT EXPECTED_START [extra args]
	local out=$1 start=$2
	shift 2
	job train "$CK_MNT/run" "$out" --steps $STEPS --every $EVERY --check "$@" >"$CK_TMP/resume.out" 2>&1 ||
		ck_fail "the restarted job failed: $(tail -n 8 "$CK_TMP/resume.out" | tr '\n' '|')"
	assert_contains "$(cat "$CK_TMP/resume.out")" "resumed-from step-$start" "restarted job's output"
	assert_contains "$(cat "$CK_TMP/resume.out")" "done step-$STEPS" "restarted job's output"
}

# The job hangs in rank 1 at the step-6 save, after writing its shard file.
_job_hanging_at_6() { # [extra args]
	tr_start_job "$PY" "$TR_HELPERS/dcp_job.py" train "$CK_MNT/run" "$CK_TMP/out1" --steps $STEPS --every $EVERY \
		--check --hang-at 6 --ready "$CK_TMP/hang" "$@"
	ck_wait_file "$CK_TMP/hang" 120
	[ -s "$CK_MNT/run/step-6/__1_0.distcp" ] || ck_fail "rank 1 reported its shard written, but step-6/__1_0.distcp is missing"
	assert_not_exists "$CK_MNT/run/step-6/.metadata"
	assert_eq open "$(tr_gen_field "$CK_MNT/run/step-6" state)" "state of step-6 in the middle of its save"
	assert_eq "step-2 step-4" "$(tr_listing "$CK_MNT/run")" "listing in the middle of the step-6 save"
}

# After the job ended: keep=2 leaves step-8 and step-10, in the listing, in the
# catalog, and once durable.
_assert_kept() { # EXPECTED
	tr_wait_uploads 90
	tr_wait_listing "$CK_MNT/run" "$1" 30
	assert_eq "$1" "$(tr_committed "$CK_MNT/run")" "committed generations in the catalog (keep=$TR_KEEP)"
	local g
	for g in $1; do
		[ -f "$CK_MNT/run/$g/.metadata" ] || ck_fail "$g is kept but has no .metadata"
	done
}

test_trainer_sigkilled_mid_save_resumes_bitwise() {
	_reference
	ck_mount "keep=$TR_KEEP"
	_job_hanging_at_6
	tr_kill_job
	assert_eq "step-2 step-4" "$(tr_listing "$CK_MNT/run")" "listing after the trainer was killed mid-save"
	# Restarted on the same mount: the partial step-6 is still OPEN (its
	# writers are dead, abandon is 600 s); the job picks step-4, and its new
	# step-6 save writes into the same path and commits it.
	_resume_to_end "$CK_TMP/out2" 4
	_assert_same_as_uninterrupted "$CK_TMP/out2"
	_assert_kept "step-8 step-10"
	assert_eq 0 "$(ck_sql 'SELECT COUNT(*) FROM generations WHERE state = 0')" "OPEN generations at the end"
	ck_umount
	tr_objcheck
}
ck_timeout test_trainer_sigkilled_mid_save_resumes_bitwise 240

test_daemon_kill9_mid_save_then_remount_resumes_bitwise() {
	_reference
	ck_mount "keep=$TR_KEEP"
	# rank 1 sleeps 3 s mid-save, then the save goes on into a dead mount.
	_job_hanging_at_6 --hang-secs 3
	kill -9 "$CK_PID"
	local i=0 rc=0
	until tr_job_group_gone; do
		i=$((i + 1))
		[ $i -le 1200 ] || ck_fail "the job did not fail by itself within 60 s of the daemon's death"
		sleep 0.05
	done
	wait "$_JOB" || rc=$?
	assert_ne 0 "$rc" "exit status of the job whose mount died under it"
	# the kernel answers ENOTCONN once the FUSE connection is gone, and
	# ECONNABORTED to a request that was in flight when it died
	grep -q -E "Transport endpoint is not connected|Software caused connection abort" "$CK_TMP/job.out" ||
		ck_fail "the job did not fail because its mount died: $(tail -n 3 "$CK_TMP/job.out" | tr '\n' '|')"
	tr_daemon_killed
	ck_mount "keep=$TR_KEEP"
	# the partial step-6 is held: not listed (the resume never picks it), kept
	assert_eq "4|crash" "$(ck_sql "SELECT state || '|' || rule FROM generations WHERE name = 'step-6' ORDER BY id DESC LIMIT 1")" "catalog state|rule of the partial step-6 after the remount"
	assert_eq "step-2 step-4" "$(tr_listing "$CK_MNT/run")" "listing after the remount"
	[ -d "$CK_MNT/run/step-6" ] || ck_fail "the held step-6 is gone"
	_resume_to_end "$CK_TMP/out2" 4
	_assert_same_as_uninterrupted "$CK_TMP/out2"
	_assert_kept "step-8 step-10"
	ck_umount
	tr_objcheck --allow-orphans
}
ck_timeout test_daemon_kill9_mid_save_then_remount_resumes_bitwise 240

test_reboot_kills_trainer_and_daemon_then_resume_from_kept_cache_bitwise() {
	_reference
	ck_mount "keep=$TR_KEEP,upload_threads=1"
	tr_start_job "$PY" "$TR_HELPERS/dcp_job.py" train "$CK_MNT/run" "$CK_TMP/out1" --steps $STEPS --every 1
	# A random point once saves are under way (or none yet: then a fresh start).
	local i=0 delay
	until [ -n "$(ls "$CK_MNT/run" 2>/dev/null)" ] || [ $i -ge 600 ]; do
		i=$((i + 1))
		sleep 0.05
	done
	delay=$(awk -v s=$RANDOM 'BEGIN { srand(s); printf "%.2f", rand() * 2.5 }')
	sleep "$delay"
	# The machine goes down: every process at once.
	kill -9 -- -"$_JOB" "$CK_PID"
	tr_kill_job
	tr_daemon_killed
	ck_log "reboot ${delay}s after the first save: committed $(ck_sql "SELECT coalesce(group_concat(name, ' '), 'none') FROM generations WHERE state = 1"), open $(ck_sql "SELECT coalesce(group_concat(name, ' '), 'none') FROM generations WHERE state = 0"), uploads queued $(ck_sql 'SELECT COUNT(*) FROM uploads')"
	ck_mount "keep=$TR_KEEP"
	assert_eq 0 "$(ck_sql 'SELECT COUNT(*) FROM generations WHERE state = 0')" "OPEN generations after the reboot"
	local listed newest g
	listed=$(tr_listing "$CK_MNT/run")
	assert_eq "$listed" "$(tr_committed "$CK_MNT/run")" "listing vs committed generations after the reboot"
	# keep-latest-k may delete the oldest listed save meanwhile, once a
	# newer one is durable (its uploads run from the mount on): gone whole
	# (state 3, DELETED) is keep's work, not a save without its .metadata
	for g in $listed; do
		[ -f "$CK_MNT/run/$g/.metadata" ] && continue
		[ "$(ck_sql "SELECT state FROM generations WHERE name = '$g' ORDER BY id DESC LIMIT 1")" = 3 ] &&
			continue
		ck_fail "$g is listed after the reboot but has no .metadata"
	done
	newest=$(echo "$listed" | tr ' ' '\n' | sed -n 's/^step-//p' | sort -n | tail -n 1)
	_resume_to_end "$CK_TMP/out2" "${newest:-0}" --every 1
	_assert_same_as_uninterrupted "$CK_TMP/out2"
	_assert_kept "step-9 step-10"
	ck_umount
	tr_objcheck --allow-orphans
}
ck_timeout test_reboot_kills_trainer_and_daemon_then_resume_from_kept_cache_bitwise 240

test_new_node_with_empty_cache_resumes_from_backing_bitwise() {
	_reference
	ck_mount "keep=$TR_KEEP"
	job train "$CK_MNT/run" "$CK_TMP/out1" --steps $STEPS --every $EVERY --stop-at 6 --check >"$CK_TMP/job.out" 2>&1 ||
		ck_fail "the first part of the job failed: $(tail -n 8 "$CK_TMP/job.out" | tr '\n' '|')"
	_assert_kept "step-4 step-6"
	# Durable: the node may now die without an unmount.
	ck_kill9
	CK_CACHE=$CK_TMP/cache-node2
	mkdir -p "$CK_CACHE"
	ck_mount "keep=$TR_KEEP"
	assert_contains "$(cat "$CK_DLOG")" "rebuilt from its manifests" "the new node's log"
	assert_eq "step-4 step-6" "$(tr_listing "$CK_MNT/run")" "listing on the new node"
	assert_eq "step-4 step-6" "$(tr_committed "$CK_MNT/run")" "committed generations on the new node"
	_resume_to_end "$CK_TMP/out2" 6
	_assert_same_as_uninterrupted "$CK_TMP/out2"
	_assert_kept "step-8 step-10"
	ck_umount
	tr_objcheck
}
ck_timeout test_new_node_with_empty_cache_resumes_from_backing_bitwise 240

# Regression (found by this suite): keep-latest-k deletes step-2; its files
# become nlink=0 inodes the kernel may hold for long. Their chunks must be
# released at once (no handle is open), their removal from BACKING queued and
# done, so that after the job BACKING holds exactly the kept generations' chunks
# — a new node (catalog rebuilt from BACKING's manifests) would never learn of
# leftovers.
test_keep_deleted_generations_leave_no_chunks_on_backing_for_a_new_node() {
	ck_mount "keep=$TR_KEEP"
	job train "$CK_MNT/run" "$CK_TMP/out1" --steps $STEPS --every $EVERY --stop-at 6 --check >"$CK_TMP/job.out" 2>&1 ||
		ck_fail "the job failed: $(tail -n 8 "$CK_TMP/job.out" | tr '\n' '|')"
	_assert_kept "step-4 step-6"
	ck_umount
	ck_log "node 1 after a clean unmount: $(ck_sql 'SELECT COUNT(*) FROM inodes WHERE nlink = 0') unlinked inodes with $(ck_sql 'SELECT COUNT(*) FROM extents WHERE ino IN (SELECT ino FROM inodes WHERE nlink = 0)') extents, $(ck_sql 'SELECT COUNT(*) FROM chunks') chunks, $(find "$CK_BACKING/chunks" -type f | wc -l) chunk objects on BACKING"
	CK_CACHE=$CK_TMP/cache-node2
	mkdir -p "$CK_CACHE"
	ck_mount "keep=$TR_KEEP"
	assert_eq "step-4 step-6" "$(tr_listing "$CK_MNT/run")" "listing on the new node"
	ck_umount
	# Every chunk object on BACKING must belong to a kept generation.
	tr_objcheck
}

ck_main "$@"
