#!/bin/bash
# t_pgstall — a PostgreSQL that stalls (its processes paused, not gone) for
# longer than two lease terms fences no healthy node when it resumes: the
# renewals it answers late are a gap (lease.h L4, fs/leasekeep.c), so no
# node sweeps another whose renewal is still queued (review 45 F2). Two
# nodes, lease 3 s, three stalls of 10 s; the pause is lifted on every path.
. "$(dirname "$0")/mn.sh"

PS_PIDS=
ps_resume() { [ -n "$PS_PIDS" ] && kill -CONT $PS_PIDS 2>/dev/null; PS_PIDS=; true; }
ck_at_exit ps_resume

ps_pause() { # the postmaster and every child of it
	local pm
	pm=$(head -n 1 "$MN_PGDIR/data/postmaster.pid")
	PS_PIDS="$pm $(pgrep -P "$pm" | tr '\n' ' ')"
	kill -STOP $PS_PIDS
}

test_a_stalled_database_fences_no_healthy_node() {
	mn_pg_start
	mn_mount A
	mn_mount B
	mkdir -p "$MN_MNT_A/run"
	local r
	for r in 1 2 3; do
		echo "a$r" >"$MN_MNT_A/run/a$r"
		echo "b$r" >"$MN_MNT_B/run/b$r"
		sleep 4 # a whole term of steady renewals on both nodes
		ps_pause
		sleep 10
		ps_resume
		sleep 8 # renewals answered, sweeps due
		grep -h "another node swept this one" "$MN_DLOG_A" "$MN_DLOG_B" &&
			ck_fail "round $r: a healthy node was swept when the paused database resumed"
		echo "a$r after" >"$MN_MNT_A/run/a$r.after" || ck_fail "round $r: node A cannot write"
		echo "b$r after" >"$MN_MNT_B/run/b$r.after" || ck_fail "round $r: node B cannot write"
	done
	assert_eq "b3 after" "$(cat "$MN_MNT_A/run/b3.after")" "B's file read on A"
	mn_umount B
	mn_umount A
}

ck_main "$@"
