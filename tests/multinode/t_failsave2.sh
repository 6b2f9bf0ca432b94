#!/bin/bash
# t_failsave2 — a save with a file whose write or last close failed, on a
# shared catalog (-o meta=, meta/pggen.h X14; one node: t_failsave.sh,
# generation.h G9; review 38 F1): node A's cache is a 64 MiB tmpfs and
# BACKING fails behind tests/faultfs, so A's rank1.bin of step-100 fails
# with ENOSPC; node B then writes rank0.bin and the marker. B's commit is
# refused and B holds the save, its reason naming rank1.bin, for
# `ckptfs-admin list` on either node; with keep=1 the previous complete save
# stays byte for byte once BACKING is back, after a remount too; a node's
# unmount does not commit it either; `ckptfs-admin commit` still does, as
# it is. On main the marker committed step-100 from what rank1.bin's last
# successful fsync left, and keep=1 could delete step-50.
. "$(dirname "$0")/mn.sh"

FS2_OPTS=backing_timeout=5,keep=1,quiet=0.5

# "state held-reason" of generation $1 in the shared catalog
fs2_gen() { mn_psql "SELECT state || ' ' || held FROM ns_generations WHERE name = '$1' ORDER BY id DESC LIMIT 1"; }

# step-50 reads back byte for byte on node X ($2: when)
fs2_step50_intact() {
	local v=MN_MNT_$1
	cmp -s "$CK_REF/r0" "${!v}/run/step-50/rank0.bin" || ck_fail "step-50/rank0.bin on node $1 differs or is gone ($2)"
	cmp -s "$CK_REF/r1" "${!v}/run/step-50/rank1.bin" || ck_fail "step-50/rank1.bin on node $1 differs or is gone ($2)"
}

# step-100 is HELD, its reason naming rank1.bin's failed close ($1: when)
fs2_held_for_rank1() {
	local st
	st=$(fs2_gen step-100)
	assert_eq 4 "${st%% *}" "step-100's state $1 (4 = held; got: $st)"
	assert_contains "$st" "last close of a file of it failed" "step-100's held reason $1"
	assert_contains "$st" '"rank1.bin"' "step-100's held reason names the file $1"
}

# Both nodes up; A (a 64 MiB tmpfs cache) commits run/step-50 by its
# marker, durable; then A's rank1.bin of run/step-100 fails with ENOSPC
# after a mid-save fsync, BACKING failing.
fs2_save_then_fail() {
	ck_faultfs_up
	mn_pg_start
	mkdir -p "$CK_TMP/cache_A"
	ck_register_mount "$CK_TMP/cache_A"
	mount -t tmpfs -o size=64m,mode=0700 ckptfs-failsave2 "$CK_TMP/cache_A" ||
		ck_skip "cannot mount a tmpfs on $CK_TMP/cache_A"
	mn_mount A "$FS2_OPTS"
	mn_mount B "$FS2_OPTS"
	mkdir -p "$MN_MNT_A/run/step-50"
	ck_rand "$CK_REF/r0" $((1 * MiB))
	ck_rand "$CK_REF/r1" $((3 * MiB))
	cp "$CK_REF/r0" "$MN_MNT_A/run/step-50/rank0.bin"
	cp "$CK_REF/r1" "$MN_MNT_A/run/step-50/rank1.bin"
	printf 'done\n' >"$MN_MNT_A/run/step-50/.ckptfs-commit"
	mn_poll "SELECT state || ':' || (durable_version = version) FROM ns_generations WHERE name = 'step-50'" \
		1:true 60 "step-50 committed by its marker and durable"
	mkdir -p "$MN_MNT_A/run/step-100"
	mn_see B run/step-100 2
	ck_fault eio=write,fsync,rename,create,link
	ck_rand "$CK_REF/big" $((120 * MiB))
	local rc=0
	"$PY" "$CK_HELPERS/enospc_write.py" "$CK_REF/big" "$MN_MNT_A/run/step-100/rank1.bin" || rc=$?
	[ "$rc" = 3 ] || ck_fail "rank1.bin: expected ENOSPC on write or close, exit $rc"
	# the release runs after close(2) returned
	mn_poll "SELECT count(*) FROM ns_writing" 0 20 "no file open for writing after the failed close"
}

test_failed_file_on_one_node_then_marker_on_another_holds_the_save() {
	fs2_save_then_fail
	# B's file and the marker: B's policy decides step-100
	ck_rand "$CK_REF/r0b" $((1 * MiB))
	cp "$CK_REF/r0b" "$MN_MNT_B/run/step-100/rank0.bin"
	printf 'done\n' >"$MN_MNT_B/run/step-100/.ckptfs-commit"
	mn_poll "SELECT state <> 0 FROM ns_generations WHERE name = 'step-100'" t 60 \
		"step-100 decided after B's marker"
	fs2_held_for_rank1 "after B's marker"
	local x
	for x in A B; do
		local v=MN_MNT_$x
		ck_list_gen "${!v}" step-100 >"$CK_TMP/list"
		assert_contains "$(head -n 1 "$CK_TMP/list")" held "ckptfs-admin list --all on node $x shows step-100"
		assert_contains "$(tail -n 1 "$CK_TMP/list")" rank1.bin "ckptfs-admin list --all on node $x names the file"
	done
	# BACKING back: A uploads what it holds; on main the committed step-100
	# became durable and keep=1 deleted step-50
	ck_fault
	mn_poll "SELECT count(*) FROM ns_chunks WHERE NOT uploaded AND refcount > 0" 0 120 \
		"every referenced chunk on BACKING"
	mn_poll "SELECT count(*) FROM ns_generations WHERE state = 1 AND durable_version <> version" 0 60 \
		"every committed save durable"
	assert_eq 1 "$(mn_psql "SELECT state FROM ns_generations WHERE name = 'step-50'")" "step-50 kept by keep=1"
	fs2_step50_intact A "after BACKING came back with keep=1"
	fs2_step50_intact B "after BACKING came back with keep=1"
	# both unmounted (their unmount rules commit nothing) and A remounted
	mn_umount B
	mn_umount A
	fs2_held_for_rank1 "after both unmounted"
	mn_mount A "$FS2_OPTS"
	fs2_step50_intact A "after a remount"
	fs2_held_for_rank1 "after a remount"
	# an explicit decision still commits it, as it is, and clears the flag
	ck_admin_rc 0 commit "$MN_MNT_A" run/step-100
	assert_eq "1 " "$(fs2_gen step-100)" "step-100 committed by ckptfs-admin commit"
	assert_eq 0 "$(mn_psql "SELECT count(*) FROM ns_inodes WHERE failed")" \
		"the explicit commit took the save as it is (no failed flag left)"
	assert_file_eq "$CK_REF/r0b" "$MN_MNT_A/run/step-100/rank0.bin"
	cmp -s -n $((8 * MiB)) "$CK_REF/big" "$MN_MNT_A/run/step-100/rank1.bin" ||
		ck_fail "step-100/rank1.bin does not start with what its fsync made durable"
	mn_umount A
}
ck_timeout test_failed_file_on_one_node_then_marker_on_another_holds_the_save 400

# nothing more is written (a crashed job torn down): on main A's unmount
# rule committed step-100, whose rank1.bin is only its last fsync
test_failed_file_then_unmount_holds_the_save() {
	fs2_save_then_fail
	ck_fault
	mn_poll "SELECT count(*) FROM ns_chunks WHERE NOT uploaded AND refcount > 0" 0 120 \
		"every referenced chunk on BACKING"
	mn_umount B
	mn_umount A
	fs2_held_for_rank1 "after both unmounted"
	mn_mount B "$FS2_OPTS"
	fs2_step50_intact B "after a remount with keep=1"
	fs2_held_for_rank1 "after a remount"
	mn_umount B
}
ck_timeout test_failed_file_then_unmount_holds_the_save 300

ck_main "$@"
