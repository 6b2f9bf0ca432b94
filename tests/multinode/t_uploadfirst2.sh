#!/bin/bash
# t_uploadfirst2 — a small file outside generations (a tracker: `latest`,
# latest_checkpointed_iteration.txt) rewritten on a node of a shared catalog
# is on BACKING before the other nodes see its new content (fs/ns.h
# invariant 13; review 45 F5): a node killed -9 right after the tracker's
# close(2) leaves its new content readable on every other node, never EIO.
# BACKING not answering: the close does not wait out backing_timeout, it
# publishes with one line saying the content is in this node's cache alone
# (t_lostread: a read of it after that node died fails at once). One node
# (SQLite) waits for nothing.
. "$(dirname "$0")/mn.sh"

# The first tracker content, on BACKING, then a rewrite under faultfs's
# latency (each BACKING call 50 ms: the upload is far slower than a kill).
_uf_setup() {
	ck_faultfs_up
	mn_pg_start
	mn_mount A
	mn_mount B
	mkdir "$MN_MNT_A/run"
	printf 1 >"$MN_MNT_A/run/latest"
	local out
	out=$("$CKPTFS_ADMIN" wait "$MN_MNT_A" --timeout 60 2>&1) || ck_fail "latest not on BACKING: $out"
	ck_fault "latency_ms=50"
}

test_a_tracker_rewritten_then_its_node_killed_reads_on_another_node() {
	_uf_setup
	printf 2 >"$MN_MNT_A/run/latest"
	mn_kill9 A # at once: nothing of A's runs after the close returned
	mn_until "SELECT state <> 'live' FROM ckpt_nodes WHERE name = 'node-A'"
	ck_fault ""
	local rc=0 out
	out=$(timeout 100 cat "$MN_MNT_B/run/latest" 2>&1) || rc=$?
	[ "$rc" = 0 ] || ck_fail "B's read of latest failed (status $rc): $out"
	[ "$out" = 2 ] || ck_fail "B read '$out' from latest, not the content A's close returned for (2)"
	grep -q "unreadable\|no longer live" "$MN_DLOG_B" && ck_fail "B logged a lost chunk: $(grep -m1 "no longer live" "$MN_DLOG_B")"
	mn_umount B
}

# DeepSpeed's `latest` and Megatron's tracker rewritten every save, with a
# torch.save's own `latest` in a subdirectory: each close is followed by a
# kill of a different node; the survivor reads every tracker.
test_trackers_of_two_nodes_each_killed_after_its_close() {
	_uf_setup
	mn_mount C
	mkdir "$MN_MNT_B/run/sub"
	printf 'global_step7' >"$MN_MNT_A/run/latest"
	printf 7 >"$MN_MNT_B/run/latest_checkpointed_iteration.txt"
	printf 'step-7' >"$MN_MNT_B/run/sub/latest"
	mn_kill9 A
	mn_kill9 B
	mn_until "SELECT count(*) = 2 FROM ckpt_nodes WHERE name IN ('node-A', 'node-B') AND state <> 'live'"
	ck_fault ""
	local f want got
	for f in latest:global_step7 latest_checkpointed_iteration.txt:7 sub/latest:step-7; do
		want=${f#*:}
		got=$(timeout 100 cat "$MN_MNT_C/run/${f%%:*}" 2>&1) || ck_fail "C's read of ${f%%:*} failed: $got"
		[ "$got" = "$want" ] || ck_fail "C read '$got' from ${f%%:*}, not '$want'"
	done
	mn_umount C
}

# The tracker follows its save's shards, whose upload takes seconds: its
# close waits for its own chunk, put before that backlog (uploader.h B3).
test_a_tracker_after_a_save_waits_for_its_own_upload_only() {
	_uf_setup
	ck_fault "bw=8000000" # 48 MiB of shard: 6 s of uploads
	mkdir "$MN_MNT_A/run/step-2"
	head -c $((48 << 20)) /dev/urandom >"$MN_MNT_A/run/step-2/rank0.pt"
	local t0 t1
	t0=$(date +%s%N)
	printf 2 >"$MN_MNT_A/run/latest"
	t1=$(date +%s%N)
	mn_kill9 A
	local ms=$(((t1 - t0) / 1000000))
	ck_log "the tracker's close took $ms ms behind 48 MiB of queued uploads at 8 MB/s"
	[ "$ms" -lt 3000 ] || ck_fail "the tracker's close took $ms ms: it waited for the save's uploads"
	mn_until "SELECT state <> 'live' FROM ckpt_nodes WHERE name = 'node-A'"
	ck_fault ""
	local out
	out=$(timeout 100 cat "$MN_MNT_B/run/latest" 2>&1) || ck_fail "B's read of latest failed: $out"
	[ "$out" = 2 ] || ck_fail "B read '$out' from latest, not 2"
	mn_umount B
}

test_backing_down_publishes_at_once_with_a_line() {
	_uf_setup
	ck_fault "eio=create"
	local t0=$SECONDS
	printf 3 >"$MN_MNT_A/run/latest" || ck_fail "the close of latest failed with BACKING down"
	[ $((SECONDS - t0)) -lt 20 ] || ck_fail "the close of latest took $((SECONDS - t0)) s with BACKING down"
	ck_wait_log "$MN_DLOG_A" "its new content is not on BACKING (BACKING is not answering); published from this node's cache alone" 5 ||
		ck_fail "A's close of latest with BACKING down logged no line saying where its content is"
	ck_fault ""
	local out
	out=$("$CKPTFS_ADMIN" wait "$MN_MNT_A" --timeout 60 2>&1) || ck_fail "latest not uploaded once BACKING is back: $out"
	mn_kill9 A
	mn_until "SELECT state <> 'live' FROM ckpt_nodes WHERE name = 'node-A'"
	[ "$(timeout 100 cat "$MN_MNT_B/run/latest")" = 3 ] || ck_fail "B cannot read latest once uploaded and A gone"
	mn_umount B
}

# BACKING hung (fails nothing: an NFS hard mount whose server is gone):
# the first tracker close waits out backing_timeout, the next ones return
# at once with the same line (uploader.h B7, review 49 F5), until BACKING
# takes an upload again: then a close waits for its upload again (a kill
# right after it leaves the content readable on B).
test_a_hung_backing_costs_one_backing_timeout_not_one_per_close() {
	ck_faultfs_up
	mn_pg_start
	mn_mount A "backing_timeout=8"
	mn_mount B
	mkdir "$MN_MNT_A/run"
	printf 1 >"$MN_MNT_A/run/latest"
	local out
	out=$("$CKPTFS_ADMIN" wait "$MN_MNT_A" --timeout 60 2>&1) || ck_fail "latest not on BACKING: $out"
	ck_fault "hang=1"
	local i t0 t1 ms=()
	for i in 2 3 4; do
		t0=$(date +%s%N)
		printf $i >"$MN_MNT_A/run/latest" || ck_fail "the close of latest=$i failed with BACKING hung"
		t1=$(date +%s%N)
		ms+=($(((t1 - t0) / 1000000)))
	done
	ck_log "closes of latest with BACKING hung (backing_timeout=8): ${ms[*]} ms"
	[ "${ms[0]}" -ge 7000 ] || ck_fail "the first close took ${ms[0]} ms: it did not wait for its upload"
	[ "${ms[1]}" -lt 4000 ] && [ "${ms[2]}" -lt 4000 ] ||
		ck_fail "closes after the first took ${ms[1]} and ${ms[2]} ms with BACKING hung: each waits backing_timeout"
	t0=$(date +%s%N)
	[ "$(timeout 30 cat "$MN_MNT_A/run/latest")" = 4 ] || ck_fail "A does not read latest=4"
	t1=$(date +%s%N)
	[ $(((t1 - t0) / 1000000)) -lt 4000 ] || ck_fail "a read of latest on A took $(((t1 - t0) / 1000000)) ms"
	local n
	n=$(grep -c "its new content is not on BACKING" "$MN_DLOG_A")
	[ "$n" = 3 ] || ck_fail "$n warning lines for 3 closes not uploaded, not 3"
	grep -q "its new content is not on BACKING (BACKING is not answering)" "$MN_DLOG_A" ||
		ck_fail "the closes after the first did not say BACKING is not answering"
	ck_fault "latency_ms=50" # BACKING answers, slowly: an upload takes longer than a kill
	ck_wait_log "$MN_DLOG_A" "answers again" 60 || ck_fail "A never saw BACKING answer again"
	out=$("$CKPTFS_ADMIN" wait "$MN_MNT_A" --timeout 60 2>&1) || ck_fail "latest not uploaded once BACKING answers: $out"
	printf 5 >"$MN_MNT_A/run/latest"
	mn_kill9 A # at once: the close waited for its upload again
	n=$(grep -c "its new content is not on BACKING" "$MN_DLOG_A")
	[ "$n" = 3 ] || ck_fail "the close after BACKING answered again published without its upload: $(tail -n 3 "$MN_DLOG_A")"
	mn_until "SELECT state <> 'live' FROM ckpt_nodes WHERE name = 'node-A'"
	ck_fault ""
	out=$(timeout 100 cat "$MN_MNT_B/run/latest" 2>&1) || ck_fail "B's read of latest failed: $out"
	[ "$out" = 5 ] || ck_fail "B read '$out' from latest, not 5"
	mn_umount B
}

test_one_node_waits_for_no_upload() {
	ck_faultfs_up
	ck_mount
	mkdir "$CK_MNT/run"
	ck_fault "eio=create"
	printf 4 >"$CK_MNT/run/latest" || ck_fail "the close of latest failed with BACKING down"
	[ "$(cat "$CK_MNT/run/latest")" = 4 ] || ck_fail "latest does not read back"
	grep -q "its new content is not on BACKING" "$CK_DLOG" &&
		ck_fail "one node waited for the upload of latest: $(grep -m1 "not on BACKING" "$CK_DLOG")"
	ck_fault ""
	ck_umount
}

ck_main "$@"
