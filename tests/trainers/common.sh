# common.sh — sourced by tests/trainers/t_*.sh after tests/integration/lib.sh
# (which provides the case runner, ck_mount/ck_umount/ck_kill9, assertions and
# the cleanup traps). What is here is specific to the real-trainer tests.

TR_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TR_HELPERS=$TR_DIR/helpers

# Every `-o keep=K` mount of these tests uses quiet=1 so HF commits are quick.
TR_KEEP=${TR_KEEP:-2}

# tr_listing DIR — the entries of DIR, version-sorted, on one line.
tr_listing() { ls "$1" 2>/dev/null | sort -V | tr '\n' ' ' | sed 's/ $//'; }

# tr_gen_field PATH FIELD — one field of user.ckptfs.generation.
tr_gen_field() {
	local v
	v=$(getfattr --only-values -n user.ckptfs.generation "$1" 2>/dev/null) || ck_fail "getfattr user.ckptfs.generation $1 failed"
	echo "$v" | tr ' ' '\n' | sed -n "s/^$2=//p"
}

# tr_wait_uploads [T] — until the upload queue on CK_CACHE/catalog.db is empty
# and every committed generation is durable on BACKING (T s, default 90).
tr_wait_uploads() {
	local t=${1:-90} i=0 left
	while :; do
		left=$(ck_sql "SELECT (SELECT COUNT(*) FROM uploads) + (SELECT COUNT(*) FROM generations WHERE state = 1 AND durable_version != version)")
		[ "$left" = 0 ] && return 0
		i=$((i + 1))
		[ $i -le $((t * 10)) ] || ck_fail "after ${t}s, $left uploads or non-durable generations remain"
		sleep 0.1
	done
}

# tr_wait_listing DIR "EXPECTED" [T] — until `tr_listing DIR` is EXPECTED
# (keep-latest-k runs after commits and again once generations are durable).
tr_wait_listing() {
	local d=$1 want=$2 t=${3:-30} i=0 got
	while :; do
		got=$(tr_listing "$d")
		[ "$got" = "$want" ] && return 0
		i=$((i + 1))
		[ $i -le $((t * 10)) ] || ck_fail "listing of $d: expected '$want', still '$got' after ${t}s"
		sleep 0.1
	done
}

# tr_committed SERIES_DIR — names of the committed generations whose root is
# directly in SERIES_DIR, by step (from the catalog, not the listing).
tr_committed() {
	local ino
	ino=$(stat -c %i "$1")
	ck_sql "SELECT group_concat(name, ' ') FROM (SELECT name FROM generations WHERE state = 1 AND series = $ino ORDER BY step)"
}

# tr_start_job CMD... — a trainer in its own session (so the whole spawn tree
# can be SIGKILLed at once); _JOB is its PID and process group; its output goes
# to $CK_TMP/job.out. Whatever ends the case, no rank process outlives it.
tr_start_job() {
	ck_bg setsid "$@" >"$CK_TMP/job.out" 2>&1
	_JOB=$CK_BG_PID
	local i=0
	until [ "$(ps -o pgid= -p "$_JOB" 2>/dev/null | tr -d ' ')" = "$_JOB" ]; do
		i=$((i + 1))
		[ $i -le 100 ] || ck_fail "the job $_JOB did not become a process group leader (setsid)"
		sleep 0.02
	done
	trap '_tr_rc=$?; [ -n "${_JOB:-}" ] && kill -9 -- -"$_JOB" 2>/dev/null; (exit $_tr_rc); _ck_exit_trap' EXIT
}

# tr_job_group_gone — true once no process of the job's group is left (zombies aside).
tr_job_group_gone() { [ "$(ps -o stat= -s "$_JOB" 2>/dev/null | grep -cv '^Z' || true)" = 0 ]; }

# tr_kill_job — SIGKILL the whole process group of the job, wait until it is gone.
tr_kill_job() {
	kill -9 -- -"$_JOB" 2>/dev/null || true
	wait "$_JOB" 2>/dev/null || true
	local i=0
	until tr_job_group_gone; do
		i=$((i + 1))
		[ $i -le 200 ] || ck_fail "processes of the job's group $_JOB survive SIGKILL"
		sleep 0.05
	done
}

# tr_objcheck — BACKING's chunk objects and manifests vs the catalog.
tr_objcheck() {
	local out rc=0
	out=$("$PY" "$CK_HELPERS/objcheck.py" "$CK_BACKING" "$CK_CACHE" "$@" 2>&1) || rc=$?
	[ $rc = 0 ] || ck_fail "objects vs catalog: $(echo "$out" | head -n 8 | tr '\n' '|')"
	ck_log "$(echo "$out" | tail -n 1)"
}

# tr_daemon_killed — for a daemon this case already SIGKILLed itself (kill -9
# "$CK_PID", possibly together with other processes): lib.sh's ck_killed9.
tr_daemon_killed() {
	ck_killed9
}
