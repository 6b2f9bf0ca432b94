#!/bin/bash
# t_closekill — a rank's node killed right after its file's close(2)
# returned, before the kernel's RELEASE came (fs/ns.h invariant 13; review
# 45 F1): the flush that close(2) waits for drops the node's ns_writing row
# of the file once its contents are published, so rank 0's completion signal
# on another node (DCP's .metadata rename, Megatron's tracker) commits the
# save at once and the sweep of the dead node holds nothing. A write through a descriptor kept open (dup) after that
# close puts the row back: the node killed then leaves the save held, never
# committed with the contents of the first close.
. "$(dirname "$0")/mn.sh"

ckk_row() { # NAME: "state version rule" of its newest row
	mn_psql "SELECT state || ' ' || version || ' ' || coalesce(nullif(rule, ''), '-') FROM ns_generations WHERE name = '$1' ORDER BY id DESC LIMIT 1"
}
ckk_writing() { # NAME: how many ns_writing rows name a file called NAME
	mn_psql "SELECT count(*) FROM ns_writing w JOIN ns_dirents d ON d.ino = w.ino WHERE d.name = '$1'"
}
ckk_settled() { # X: node X's last lease ran out and a sweep settled it
	mn_until "SELECT state = 'expired' AND settled FROM ckpt_nodes WHERE name = 'node-$1' ORDER BY id DESC LIMIT 1"
}
# ckk_write FILE SRC: SRC's bytes into FILE, fsynced, closed
ckk_write() {
	"$PY" -c "
import os
fd = os.open('$1', os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, open('$2', 'rb').read()); os.fsync(fd); os.close(fd)"
}
# ckk_metadata DIR SRC: DCP's last step, .metadata.tmp written and renamed
ckk_metadata() {
	"$PY" -c "
import os
with open('$1/.metadata.tmp', 'wb') as f:
    f.write(open('$2', 'rb').read()); f.flush(); os.fsync(f.fileno())
os.rename('$1/.metadata.tmp', '$1/.metadata')"
}

test_a_rank_killed_right_after_its_close_leaves_the_save_committed() {
	mn_pg_start
	mn_mount A
	mn_mount B
	mkdir -p "$MN_MNT_A/run/step-1"
	mn_see B run/step-1 2
	ck_rand "$CK_TMP/s0" 300000
	ck_rand "$CK_TMP/s1" 300000
	ck_rand "$CK_TMP/md" 3000
	ckk_write "$MN_MNT_A/run/step-1/__0_0.distcp" "$CK_TMP/s0"
	# rank 1 on B: write, fsync, close, and B's daemon stopped within the
	# same process, before the RELEASE of its handle can reach it; then
	# killed (-9 works on a stopped process)
	"$PY" -c "
import os, signal
fd = os.open('$MN_MNT_B/run/step-1/__1_0.distcp', os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, open('$CK_TMP/s1', 'rb').read()); os.fsync(fd); os.close(fd)
os.kill($MN_PID_B, signal.SIGSTOP)"
	mn_kill9 B
	ckk_metadata "$MN_MNT_A/run/step-1" "$CK_TMP/md"
	# committed by the rename, long before B's lease runs out (3 s)
	mn_poll "SELECT state || ' ' || version || ' ' || rule FROM ns_generations WHERE name = 'step-1'" \
		"1 1 dcp-metadata" 2 "step-1 after rank 0's rename"
	assert_eq 0 "$(ckk_writing __1_0.distcp)" "B's writing rows of its closed shard"
	ckk_settled B
	assert_eq "1 1 dcp-metadata" "$(ckk_row step-1)" "step-1 once dead B was swept"
	grep -q "lost its lease during the save" "$MN_DLOG_A" && ck_fail "A held step-1 for dead B"
	grep -q "commit waits for files of it another node has open" "$MN_DLOG_A" &&
		ck_fail "A's commit waited for B's closed shard"
	# B's cache back (its shard's only copy may be there), then a fresh
	# node reads the save byte for byte
	mn_mount B
	mn_poll "SELECT state || ' ' || lost FROM ns_generations WHERE name = 'step-1'" "1 false" 30 \
		"step-1 once B's cache is back (pggen.h X10)"
	ck_admin_rc 0 wait "$MN_MNT_B" --timeout 60
	mn_mount C
	[ "$(mn_gen_state "$MN_MNT_C" run/step-1)" = committed ] ||
		ck_fail "C: step-1 is $(getfattr --only-values -n user.ckptfs.generation "$MN_MNT_C/run/step-1" 2>&1)"
	assert_file_eq "$CK_TMP/s0" "$MN_MNT_C/run/step-1/__0_0.distcp"
	assert_file_eq "$CK_TMP/s1" "$MN_MNT_C/run/step-1/__1_0.distcp"
	assert_file_eq "$CK_TMP/md" "$MN_MNT_C/run/step-1/.metadata"
	mn_umount C
	mn_umount B
	mn_umount A
}

test_megatron_rank_killed_right_after_its_close_leaves_the_save_committed() {
	mn_pg_start
	mn_mount A
	mn_mount B
	mkdir -p "$MN_MNT_A/run/iter_0000001/mp_rank_00"
	mn_see B run/iter_0000001 2
	mkdir "$MN_MNT_B/run/iter_0000001/mp_rank_01"
	ck_rand "$CK_TMP/r0" 300000
	ck_rand "$CK_TMP/r1" 300000
	cp "$CK_TMP/r0" "$MN_MNT_A/run/iter_0000001/mp_rank_00/model_optim_rng.pt"
	# rank 1 on B: torch.save's write and close (no fsync), B stopped at once
	"$PY" -c "
import os, signal
with open('$MN_MNT_B/run/iter_0000001/mp_rank_01/model_optim_rng.pt', 'wb') as f:
    f.write(open('$CK_TMP/r1', 'rb').read())
os.kill($MN_PID_B, signal.SIGSTOP)"
	mn_kill9 B
	printf 1 >"$MN_MNT_A/run/latest_checkpointed_iteration.txt"
	mn_poll "SELECT state || ' ' || rule FROM ns_generations WHERE name = 'iter_0000001'" \
		"1 tracker" 2 "iter_0000001 after rank 0's tracker"
	ckk_settled B
	assert_eq "1 1 tracker" "$(ckk_row iter_0000001)" "iter_0000001 once dead B was swept"
	grep -q "lost its lease during the save" "$MN_DLOG_A" && ck_fail "A held iter_0000001 for dead B"
	mn_mount B
	mn_poll "SELECT state || ' ' || lost FROM ns_generations WHERE name = 'iter_0000001'" "1 false" 30 \
		"iter_0000001 once B's cache is back (pggen.h X10)"
	ck_admin_rc 0 wait "$MN_MNT_B" --timeout 60
	mn_mount C
	assert_file_eq "$CK_TMP/r0" "$MN_MNT_C/run/iter_0000001/mp_rank_00/model_optim_rng.pt"
	assert_file_eq "$CK_TMP/r1" "$MN_MNT_C/run/iter_0000001/mp_rank_01/model_optim_rng.pt"
	mn_umount C
	mn_umount B
	mn_umount A
}

test_a_write_after_the_close_through_a_dup_holds_the_save() {
	mn_pg_start
	mn_mount A
	mn_mount B
	mkdir -p "$MN_MNT_A/run/step-1"
	mn_see B run/step-1 2
	ck_rand "$CK_TMP/s0" 300000
	ck_rand "$CK_TMP/v1" 300000
	ck_rand "$CK_TMP/v2" 300000
	ck_rand "$CK_TMP/md" 3000
	ckk_write "$MN_MNT_A/run/step-1/__0_0.distcp" "$CK_TMP/s0"
	# rank 1 on B keeps a dup of its shard's descriptor: after the first
	# close no row names the shard, after a write through the dup one does
	# again; B is killed with the dup still open
	mkfifo "$CK_TMP/go" "$CK_TMP/ack"
	"$PY" -c "
import os, time
fd = os.open('$MN_MNT_B/run/step-1/__1_0.distcp', os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
fd2 = os.dup(fd)
os.write(fd, open('$CK_TMP/v1', 'rb').read()); os.fsync(fd); os.close(fd)
open('$CK_TMP/ack', 'w').write('closed\n')
open('$CK_TMP/go').read()
os.pwrite(fd2, open('$CK_TMP/v2', 'rb').read(), 0)
open('$CK_TMP/ack', 'w').write('wrote\n')
time.sleep(600)" &
	local writer=$!
	assert_eq closed "$(cat "$CK_TMP/ack")" "rank 1's first close"
	assert_eq 0 "$(ckk_writing __1_0.distcp)" "B's writing rows after the first close"
	echo go >"$CK_TMP/go"
	assert_eq wrote "$(cat "$CK_TMP/ack")" "rank 1's write through the dup"
	assert_eq 1 "$(ckk_writing __1_0.distcp)" "B's writing rows after the write through the dup"
	mn_kill9 B "$writer"
	ckk_metadata "$MN_MNT_A/run/step-1" "$CK_TMP/md"
	sleep 1
	assert_eq "0 1 -" "$(ckk_row step-1)" "step-1 while B's write is unfinished"
	ckk_settled B
	mn_poll "SELECT state || ' ' || rule FROM ns_generations WHERE name = 'step-1'" \
		"4 node-lost" 10 "step-1 after dead B was swept"
	assert_contains "$(mn_psql "SELECT held FROM ns_generations WHERE name = 'step-1'")" \
		"lost its lease during the save" "its held reason"
	mn_umount A
}

ck_main "$@"
