#!/bin/bash
# t_stale — a save another node committed is never changed in place here
# (fs/gen.h invariant 8, meta/pggen.h X12; docs/MULTINODE.md "Generations
# span nodes"). Node A writes its shard of step-100 and closes it; node B
# writes its own and commits step-100. A's daemon still remembers step-100
# as OPEN (it wrote into it and nothing told it of B's commit). A change
# from A into step-100 afterwards (a late file, an overwrite of its shard)
# must reopen the save as version 2 with version 1 kept as its backup, as
# it does on B or on one node: never join committed version 1 in place.
. "$(dirname "$0")/mn.sh"

# "state:version:has a backup" of generation $1 in the shared catalog
st_gen() { mn_psql "SELECT state || ':' || version || ':' || (backup_root <> 0) FROM ns_generations WHERE name = '$1'"; }

# st_two_shards: A writes run/step-100/__1_0.distcp ($CK_REF/s1.bin) and
# closes it, B writes __0_0.distcp ($CK_REF/s0.bin) and commits step-100.
st_two_shards() {
	mn_pg_start
	mn_mount A
	mn_mount B
	mkdir -p "$MN_MNT_A/run/step-100"
	ck_rand "$CK_REF/s1.bin" 3000000
	cp "$CK_REF/s1.bin" "$MN_MNT_A/run/step-100/__1_0.distcp"
	mn_see B run/step-100/__1_0.distcp 2
	ck_rand "$CK_REF/s0.bin" 3000000
	cp "$CK_REF/s0.bin" "$MN_MNT_B/run/step-100/__0_0.distcp"
	setfattr -n user.ckptfs.commit -v 1 "$MN_MNT_B/run/step-100" || ck_fail "the commit on B failed"
	mn_poll "SELECT state FROM ns_generations WHERE name = 'step-100'" 1 10 "step-100 committed"
	assert_eq "1:1:false" "$(st_gen step-100)" "step-100 after B's commit"
}

# HF writes rng_state_{rank}.pth after trainer_state.json: a late file from
# A (which did not commit) reopens the save as B's would; committed again,
# version 2's durable manifest names it and both nodes read every file.
test_late_file_on_a_non_committing_node_reopens_the_save() {
	st_two_shards
	# control: a late file from B, the node that committed
	mkdir -p "$MN_MNT_B/run/step-200"
	cp "$CK_REF/s0.bin" "$MN_MNT_B/run/step-200/__0_0.distcp"
	setfattr -n user.ckptfs.commit -v 1 "$MN_MNT_B/run/step-200" || ck_fail "the commit on B failed"
	mn_poll "SELECT state FROM ns_generations WHERE name = 'step-200'" 1 10 "step-200 committed"
	ck_rand "$CK_REF/rng.bin" 100000
	cp "$CK_REF/rng.bin" "$MN_MNT_B/run/step-200/rng_state_0.pth"
	assert_eq "0:2:true" "$(st_gen step-200)" "step-200 after B's late file (control)"
	cp "$CK_REF/rng.bin" "$MN_MNT_A/run/step-100/rng_state_1.pth"
	assert_eq "0:2:true" "$(st_gen step-100)" "step-100 after A's late file"
	# version 1's durable manifest stays what version 1 was
	setfattr -n user.ckptfs.commit -v 1 "$MN_MNT_A/run/step-100" || ck_fail "the commit on A failed"
	mn_until "SELECT durable_version = 2 FROM ns_generations WHERE name = 'step-100'"
	local id
	id=$(mn_psql "SELECT id FROM ns_generations WHERE name = 'step-100'")
	assert_eq 1 "$(grep -c rng_state_1 "$CK_BACKING/manifests/gen/$id.2.ckm")" \
		"rng_state_1.pth in version 2's durable manifest"
	local x
	for x in A B; do
		local v=MN_MNT_$x
		assert_file_eq "$CK_REF/s0.bin" "${!v}/run/step-100/__0_0.distcp"
		assert_file_eq "$CK_REF/s1.bin" "${!v}/run/step-100/__1_0.distcp"
		assert_file_eq "$CK_REF/rng.bin" "${!v}/run/step-100/rng_state_1.pth"
	done
	mn_umount A
	mn_umount B
}
ck_timeout test_late_file_on_a_non_committing_node_reopens_the_save 120

# A truncates its committed shard (O_TRUNC), writes 1 MB of new bytes and
# its daemon dies with the file open: B's sweep rolls the rewrite back
# (X2), and step-100 reads back as committed version 1, A's shard bit for bit.
test_overwrite_on_a_non_committing_node_dying_mid_write_keeps_the_committed_bytes() {
	st_two_shards
	/usr/bin/python3 -c '
import os, sys, time
f = open(sys.argv[1], "wb"); f.write(os.urandom(1000000)); f.flush()
open(sys.argv[2], "w").write("x")
time.sleep(120)' "$MN_MNT_A/run/step-100/__1_0.distcp" "$CK_TMP/written" &
	local w=$!
	while [ ! -e "$CK_TMP/written" ] && kill -0 $w 2>/dev/null; do sleep 0.05; done
	[ -e "$CK_TMP/written" ] || ck_fail "the overwrite on A failed"
	assert_eq "0:2:true" "$(st_gen step-100)" "step-100 while A overwrites its shard"
	mn_kill9 A
	kill $w 2>/dev/null
	wait $w 2>/dev/null || true
	# B's sweep settles A (lease 3 s): the rewrite is rolled back to version 1
	mn_poll "SELECT state FROM ckpt_nodes WHERE name = 'node-A' ORDER BY id DESC LIMIT 1" expired 30 "node A expired"
	mn_poll "SELECT state || ':' || version FROM ns_generations WHERE name = 'step-100'" 1:1 30 \
		"step-100 rolled back to version 1"
	assert_file_eq "$CK_REF/s1.bin" "$MN_MNT_B/run/step-100/__1_0.distcp"
	assert_file_eq "$CK_REF/s0.bin" "$MN_MNT_B/run/step-100/__0_0.distcp"
	mn_umount B
}
ck_timeout test_overwrite_on_a_non_committing_node_dying_mid_write_keeps_the_committed_bytes 120

# A overwrites its shard of step-100 (committed by B, durable as version 1)
# in place and closes: version 1's objects stay on BACKING through the
# reclaim (its backup still names them), as its durable manifest names them.
test_in_place_overwrite_on_a_non_committing_node_and_reclaim() {
	st_two_shards
	mn_until "SELECT durable_version = 1 FROM ns_generations WHERE name = 'step-100'"
	ls "$CK_BACKING/chunks" -R | grep -v : | sort >"$CK_TMP/objs1"
	ck_rand "$CK_REF/n1.bin" 3000000
	cp "$CK_REF/n1.bin" "$MN_MNT_A/run/step-100/__1_0.distcp"
	assert_eq "0:2:true" "$(st_gen step-100)" "step-100 after A's overwrite"
	# a reclaim turn has run after the overwrite: A's new bytes are uploaded
	# (objects the turn must not touch) and the chunks no file names are gone
	mn_poll "SELECT count(*) FROM ns_chunks WHERE refcount = 0" 0 40 "chunks no file names reclaimed"
	ls "$CK_BACKING/chunks" -R | grep -v : | sort >"$CK_TMP/objs2"
	assert_eq "" "$(comm -23 "$CK_TMP/objs1" "$CK_TMP/objs2")" \
		"objects removed that step-100's durable manifest (version 1) names"
	assert_file_eq "$CK_REF/n1.bin" "$MN_MNT_B/run/step-100/__1_0.distcp"
	mn_umount A
	mn_umount B
}
ck_timeout test_in_place_overwrite_on_a_non_committing_node_and_reclaim 120

# keep-latest-k (keep=1) on either node never expires a committed save
# while node A has a file of it open for writing and has not written yet
# (pggen.h X12): A's write then reopens it, and reads back what A wrote.
test_keep_latest_k_keeps_a_save_another_node_has_open_for_writing() {
	mn_pg_start
	mn_mount A keep=1
	mn_mount B keep=1
	ck_rand "$CK_REF/s1.bin" 2000000
	ck_rand "$CK_REF/n1.bin" 2000000
	mkdir -p "$MN_MNT_A/run/step-100"
	cp "$CK_REF/s1.bin" "$MN_MNT_A/run/step-100/__0_0.distcp"
	setfattr -n user.ckptfs.commit -v 1 "$MN_MNT_A/run/step-100" || ck_fail "the commit on A failed"
	mn_until "SELECT durable_version = 1 FROM ns_generations WHERE name = 'step-100'"
	# A: the shard opened for writing (no O_TRUNC), written once told to
	/usr/bin/python3 -c '
import os, sys, time
f = open(sys.argv[1], "r+b"); open(sys.argv[2], "w").write("x")
while not os.path.exists(sys.argv[3]): time.sleep(0.05)
f.write(open(sys.argv[4], "rb").read()); f.flush(); open(sys.argv[5], "w").write("x")
while os.path.exists(sys.argv[3]): time.sleep(0.05)
f.close()' "$MN_MNT_A/run/step-100/__0_0.distcp" "$CK_TMP/opened" "$CK_TMP/go" \
		"$CK_REF/n1.bin" "$CK_TMP/written" &
	local w=$!
	while [ ! -e "$CK_TMP/opened" ] && kill -0 $w 2>/dev/null; do sleep 0.05; done
	[ -e "$CK_TMP/opened" ] || ck_fail "the open for writing on A failed"
	# B saves step-200 and step-300; once step-200 is expired, a pass that
	# had step-100 (older, not the newest durable) to decide has run
	mn_save B run/step-200 __0_0.distcp 2000000 b200
	mn_until "SELECT durable_version = 1 FROM ns_generations WHERE name = 'step-200'"
	mn_save B run/step-300 __0_0.distcp 2000000 b300
	mn_poll "SELECT state FROM ns_generations WHERE name = 'step-200'" 3 30 "step-200 expired"
	assert_eq "1:1:false" "$(st_gen step-100)" "step-100 while A has its shard open for writing"
	touch "$CK_TMP/go"
	while [ ! -e "$CK_TMP/written" ] && kill -0 $w 2>/dev/null; do sleep 0.05; done
	[ -e "$CK_TMP/written" ] || ck_fail "the write on A failed"
	assert_eq "0:2:true" "$(st_gen step-100)" "step-100 after A's write"
	rm "$CK_TMP/go"
	wait $w || ck_fail "the writer on A failed"
	assert_eq "0:2:true" "$(st_gen step-100)" "step-100 after A's close"
	assert_file_eq "$CK_REF/n1.bin" "$MN_MNT_B/run/step-100/__0_0.distcp"
	mn_umount A
	mn_umount B
}
ck_timeout test_keep_latest_k_keeps_a_save_another_node_has_open_for_writing 120

# A node that wrote a save another node then committed, and never writes
# into it again, decides nothing about it: its tick (abandon, after which
# its content would prove step-100.pt complete) and its unmount (the weak
# rule would commit step-200) read the row first (fs/gen.h invariant 8)
# and forget it with an info line. Before, each tried to commit it again
# and the catalog's refusal was logged as an error. The committed saves
# stay B's, byte for byte.
test_a_save_another_node_committed_is_forgotten_quietly_at_the_tick_and_unmount() {
	mn_pg_start
	mn_mount A quiet=600,abandon=6 # no content proof before abandon
	mn_mount B
	mkdir -p "$MN_MNT_A/run"
	"$PY" -c 'import sys, torch; torch.save({"w": torch.arange(200000)}, sys.argv[1])' \
		"$CK_REF/s100.pt" || ck_fail "torch.save of the reference failed"
	cp "$CK_REF/s100.pt" "$MN_MNT_A/run/step-100.pt" # the writer exits: abandon may judge it
	mn_see B run/step-100.pt 2
	setfattr -n user.ckptfs.commit -v 1 "$MN_MNT_B/run/step-100.pt" || ck_fail "the commit on B failed"
	assert_eq "1:1:false" "$(st_gen step-100.pt)" "step-100.pt after B's commit"
	local id i=0
	id=$(mn_psql "SELECT id FROM ns_generations WHERE name = 'step-100.pt'")
	# A's abandon tick: its answer (fixed) or its commit's refusal (before)
	until grep -qE "step-100\.pt .*by another node|generation $id: commit" "$MN_DLOG_A"; do
		i=$((i + 1))
		[ $i -le 300 ] || ck_fail "node A's tick did not decide step-100.pt within 30 s"
		sleep 0.1
	done
	# a save A leaves to its unmount: unproven, the weak rule would commit it
	mkdir -p "$MN_MNT_A/run/step-200"
	ck_rand "$CK_REF/m200.bin" 1000000
	cp "$CK_REF/m200.bin" "$MN_MNT_A/run/step-200/model.bin"
	mn_see B run/step-200/model.bin 2
	setfattr -n user.ckptfs.commit -v 1 "$MN_MNT_B/run/step-200" || ck_fail "the commit on B failed"
	mn_umount A
	assert_eq 0 "$(grep -c ' error: ' "$MN_DLOG_A")" \
		"error lines of node A: $(grep -m 2 ' error: ' "$MN_DLOG_A" | tr '\n' '|')"
	assert_eq 2 "$(grep -cE 'step-(100\.pt|200) .*committed by another node' "$MN_DLOG_A")" \
		"node A's info lines on the saves B committed"
	assert_eq "1:1:false:explicit" "$(st_gen step-100.pt):$(mn_psql "SELECT rule FROM ns_generations WHERE name = 'step-100.pt'")" \
		"step-100.pt after A's tick"
	assert_eq "1:1:false:explicit" "$(st_gen step-200):$(mn_psql "SELECT rule FROM ns_generations WHERE name = 'step-200'")" \
		"step-200 after A's unmount"
	assert_file_eq "$CK_REF/s100.pt" "$MN_MNT_B/run/step-100.pt"
	assert_file_eq "$CK_REF/m200.bin" "$MN_MNT_B/run/step-200/model.bin"
	mn_umount B
}
ck_timeout test_a_save_another_node_committed_is_forgotten_quietly_at_the_tick_and_unmount 120

ck_main "$@"
