#!/bin/bash
# t_lostread — a chunk whose only copy is in the cache of a node that is no
# longer live is not waited for: a read of it fails at once with EIO and one
# line naming the chunk and the node (catalog_shared_data.c S6; review 45
# F4, F5). The case of F5: rank 0's node rewrites the tracker `latest` in
# place and dies before its new content reaches BACKING; a resume on
# another node reads `latest`.
. "$(dirname "$0")/mn.sh"

test_a_chunk_whose_holder_is_gone_fails_at_once() {
	ck_faultfs_up
	mn_pg_start
	mn_mount A
	mn_mount B
	mkdir "$MN_MNT_A/run"
	printf 1 >"$MN_MNT_A/run/latest"
	local out
	out=$("$CKPTFS_ADMIN" wait "$MN_MNT_A" --timeout 60 2>&1) || ck_fail "latest not on BACKING: $out"
	ck_fault "eio=create" # A's new content cannot reach BACKING before A dies
	printf 2 >"$MN_MNT_A/run/latest"
	mn_kill9 A
	mn_until "SELECT state <> 'live' FROM ckpt_nodes WHERE name = 'node-A'"
	ck_fault ""
	local rc=0
	out=$(timeout 100 cat "$MN_MNT_B/run/latest" 2>&1) || rc=$?
	[ "$rc" != 0 ] || ck_fail "B read latest ('$out') though its only copy died with node A"
	assert_contains "$out" "Input/output error" "B's read of latest"
	grep -q "its only copy is in the cache of node [0-9]*, which is no longer live (its lease ran out): not waited for" \
		"$MN_DLOG_B" || ck_fail "no line on B names the chunk and the node gone"
	grep -q "retrying for up to" "$MN_DLOG_B" && ck_fail "B waited for a chunk whose holder is gone"
	mn_umount B
}

ck_main "$@"
