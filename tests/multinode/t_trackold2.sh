#!/bin/bash
# t_trackold2 — a tracker rewritten with O_TRUNC on a node of a shared
# catalog (`latest`, latest_checkpointed_iteration.txt: opened "w", written,
# closed) keeps its OLD content on every other node until its close
# publishes the new content whole (fs/ns.h invariant 13, review 49 F6): the
# truncation is the writer's, not the catalog's, so another node never
# reads it empty during the upload-before-publish wait, and a death of the
# writing node before its close leaves the old content, not an empty file.
# On the writing node itself the open's truncation is seen at once.
. "$(dirname "$0")/mn.sh"

# latest = 1 on BACKING, then every BACKING call slowed to 0.6 s, so the
# rewrite's close waits seconds for its upload (invariant 13).
_to_setup() {
	ck_faultfs_up
	mn_pg_start
	mn_mount A backing_timeout=60
	mn_mount B
	mkdir "$MN_MNT_A/run"
	printf 1 >"$MN_MNT_A/run/latest"
	local out
	out=$("$CKPTFS_ADMIN" wait "$MN_MNT_A" --timeout 60 2>&1) || ck_fail "latest not on BACKING: $out"
	mn_see B run/latest
	[ "$(cat "$MN_MNT_B/run/latest")" = 1 ] || ck_fail "B does not read latest = 1 before the rewrite"
	ck_fault "latency_ms=600"
}

# _to_reads_on_b PID: B's reads of run/latest every 0.1 s while PID runs,
# one per line into $CK_TMP/b_reads ("<empty>" for an empty read).
_to_reads_on_b() {
	: >"$CK_TMP/b_reads"
	while kill -0 "$1" 2>/dev/null; do
		local v
		v=$(cat "$MN_MNT_B/run/latest" 2>&1) || v="<error: $v>"
		echo "${v:-<empty>}" >>"$CK_TMP/b_reads"
		sleep 0.1
	done
}

test_another_node_reads_the_old_tracker_until_the_new_one_is_published() {
	_to_setup
	(printf 2 >"$MN_MNT_A/run/latest") &
	local w=$!
	_to_reads_on_b "$w"
	wait "$w" || ck_fail "A's rewrite of latest failed"
	ck_fault ""
	local n bad
	n=$(wc -l <"$CK_TMP/b_reads")
	[ "$n" -ge 5 ] || ck_fail "only $n reads on B during A's close: the close did not wait for its upload"
	bad=$(grep -v -x "1" "$CK_TMP/b_reads" | sort | uniq -c | tr '\n' ' ')
	[ -z "$bad" ] || ck_fail "B read other than the old content during A's rewrite ($n reads): $bad"
	local i=0
	until [ "$(cat "$MN_MNT_B/run/latest")" = 2 ]; do
		i=$((i + 1))
		[ $i -le 100 ] || ck_fail "B does not read latest = 2 within 10 s of A's close"
		sleep 0.1
	done
	mn_umount B
	mn_umount A
}
ck_timeout test_another_node_reads_the_old_tracker_until_the_new_one_is_published 180

test_a_node_killed_during_its_tracker_rewrite_leaves_the_old_content() {
	_to_setup
	(printf 2 >"$MN_MNT_A/run/latest") 2>/dev/null &
	sleep 2 # A's close is waiting for its upload (each BACKING call 0.6 s)
	mn_kill9 A
	mn_until "SELECT state <> 'live' FROM ckpt_nodes WHERE name = 'node-A'"
	ck_fault ""
	local got rc=0
	got=$(timeout 60 cat "$MN_MNT_B/run/latest" 2>&1) || rc=$?
	assert_eq 0 "$rc" "B's read of latest after A died mid-rewrite ($got)"
	assert_eq "1" "$got" "latest on B after A died before its rewrite's close returned"
	mn_umount B
}
ck_timeout test_a_node_killed_during_its_tracker_rewrite_leaves_the_old_content 180

# On the writing node the open's truncation is seen at once (size 0 while
# the file is open, before any write), and an O_TRUNC open closed with no
# write publishes the empty file to every node.
test_the_writing_node_sees_its_truncation_and_an_empty_rewrite_is_published() {
	_to_setup
	ck_fault ""
	"$PY" -c 'import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_TRUNC)
size = os.stat(sys.argv[1]).st_size
with open(sys.argv[1], "rb") as r:
    data = r.read()
os.close(fd)
if size != 0 or data != b"":
    print("after O_TRUNC on the writing node: size %d, read %r" % (size, data))
    sys.exit(1)' "$MN_MNT_A/run/latest" || ck_fail "A did not see its own truncation"
	local i=0
	until [ "$(stat -c %s "$MN_MNT_B/run/latest")" = 0 ]; do
		i=$((i + 1))
		[ $i -le 100 ] || ck_fail "B does not see latest empty within 10 s of A's empty rewrite"
		sleep 0.1
	done
	assert_eq "" "$(cat "$MN_MNT_B/run/latest")" "latest on B after A's empty rewrite"
	mn_umount B
	mn_umount A
}
ck_timeout test_the_writing_node_sees_its_truncation_and_an_empty_rewrite_is_published 180

ck_main "$@"
