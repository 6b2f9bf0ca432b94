#!/bin/bash
# t_gaps — the semantic gaps of generations across nodes that issue 18
# listed (docs/MULTINODE.md), on real mounts: nodes A, B (and a fresh C)
# over one BACKING behind faultfs, which keeps B's chunks off BACKING
# (object creation fails) until B is killed.
#
# A committed save whose chunks died with their node (lost) is hidden from
# its series directory on every node, as a held save is on one node (a
# resume that lists run/ finds the save before it), still reachable by name
# and shown as held; keep-latest-k ends it as a held one once a newer save is
# durable (pggen.h X13). A rewrite of a committed
# save that its node began and then died between files (no file open) is
# rolled back to the previous version by the sweep, on every node. A lost
# save whose objects B put on BACKING but never marked uploaded is found
# whole by A's sweep, which reads and verifies them (pggen.h X11); one
# with a damaged object stays lost.
. "$(dirname "$0")/mn.sh"

# gp_state MNT GEN: the state and rule of a generation, as its xattr shows them.
gp_state() {
	getfattr --only-values -n user.ckptfs.generation "$1/$2" 2>/dev/null | tr ' ' '\n' |
		sed -n 's/^\(state\|rule\)=//p' | tr '\n' ' ' | sed 's/ $//'
}

test_a_lost_save_is_hidden_from_its_series_on_every_node() {
	ck_faultfs_up
	mn_pg_start
	mn_mount A keep=2
	mn_mount B keep=2
	mkdir "$MN_MNT_A/run"
	mn_see B run
	mn_save A run/step-90 model.bin 2000000 s90
	local out
	out=$("$CKPTFS_ADMIN" wait "$MN_MNT_A" --timeout 60 2>&1) || ck_fail "step-90 not durable: $out"
	# B's save cannot reach BACKING before B dies (no object can be
	# created; a throttle would keep B's kill waiting for its write)
	ck_fault "eio=create"
	mn_save B run/step-100 model.bin 2000000 s100
	assert_eq "step-90 step-100" "$(mn_entries "$MN_MNT_A/run")" "run/ on A before B dies"
	mn_kill9 B
	mn_until "SELECT lost FROM ns_generations WHERE name = 'step-100'"
	ck_fault "" # B is gone: nothing of it can reach BACKING any more
	# what a resume that lists run/ finds, on A and on a fresh node
	assert_eq "step-90" "$(mn_entries "$MN_MNT_A/run")" "run/ on A once step-100 is lost"
	mn_mount C
	assert_eq "step-90" "$(mn_entries "$MN_MNT_C/run")" "run/ on fresh node C"
	# kept, reachable by name, shown as held
	assert_exists "$MN_MNT_C/run/step-100/model.bin"
	assert_eq "held node-lost" "$(gp_state "$MN_MNT_C/run" step-100)" "step-100 on C"
	assert_eq "1 true" "$(mn_psql "SELECT state || ' ' || lost FROM ns_generations WHERE name = 'step-100'")" \
		"step-100's row (committed, lost: kept as it was)"
	assert_file_eq "$CK_TMP/s90.bin" "$MN_MNT_C/run/step-90/model.bin"
	# keep-latest-k (keep=2) ends it as a held one once two newer saves are
	# committed and one of them is durable (pggen.h X13: BACKING takes A's
	# objects again; an explicit decision, ckptfs-admin rm or rm -rf of its
	# root, would end it at once: tests/multinode/t_admin2.sh)
	mn_save A run/step-110 model.bin 100000 s110
	mn_save A run/step-120 model.bin 100000 s120
	mn_until "SELECT state = 3 AND rule = 'keep-held' FROM ns_generations WHERE name = 'step-100'"
	assert_not_exists "$MN_MNT_C/run/step-100"
	assert_eq "3" "$(mn_psql "SELECT state FROM ns_generations WHERE name = 'step-100'")" "step-100 deleted"
	mn_umount C
	mn_umount A
}
ck_timeout test_a_lost_save_is_hidden_from_its_series_on_every_node 180

test_a_rewrite_whose_node_died_between_files_is_rolled_back() {
	local out
	mn_pg_start
	mn_mount A
	mn_mount B
	mkdir "$MN_MNT_A/run"
	mn_save A run/step-7 model.bin 300000 s7
	mn_see B run/step-7/model.bin
	# B writes into the committed step-7 (a trainer saving the step again):
	# one file closed, then B dies before the next
	head -c 100000 /dev/urandom >"$MN_MNT_B/run/step-7/extra.bin"
	assert_eq "2 0" "$(mn_psql "SELECT version || ' ' || state FROM ns_generations WHERE name = 'step-7'")" \
		"step-7 reopened as version 2 by B's write"
	mn_kill9 B
	mn_until "SELECT state = 1 AND version = 1 FROM ns_generations WHERE name = 'step-7'"
	assert_eq "committed node-lost-restored" "$(gp_state "$MN_MNT_A/run" step-7)" "step-7 on A"
	assert_eq "model.bin" "$(mn_entries "$MN_MNT_A/run/step-7")" "step-7 on A: version 1, whole"
	assert_file_eq "$CK_TMP/s7.bin" "$MN_MNT_A/run/step-7/model.bin"
	mn_mount C
	assert_eq "model.bin" "$(mn_entries "$MN_MNT_C/run/step-7")" "step-7 on fresh node C"
	out=$("$CKPTFS_ADMIN" check "$MN_MNT_C" 2>&1) || ck_fail "ckptfs-admin check: $(echo "$out" | head -n 8 | tr '\n' '|')"
	mn_umount C
	mn_umount A
}
ck_timeout test_a_rewrite_whose_node_died_between_files_is_rolled_back 120

# ---- a lost save's objects that reached BACKING unmarked (pggen.h X11) ----

# gp_chunks GEN: its distinct chunks' hashes, from the shared catalog.
gp_chunks() {
	mn_psql "SELECT DISTINCT encode(e.hash, 'hex') FROM ns_generations g JOIN ns_inodes i
		ON i.gen = g.id JOIN ns_extents e ON e.ino = i.ino WHERE g.name = '$1' ORDER BY 1"
}

# gp_object HASH: its object in BACKING's directory (faultfs's source).
gp_object() { echo "$CK_TMP/store/chunks/${1:0:2}/${1:2:2}/$1"; }

# gp_unmarked_on_backing GEN: "N M": its chunks, and how many of them have
# an object on BACKING while the catalog says not uploaded.
gp_unmarked_on_backing() {
	local n=0 m=0 h
	for h in $(gp_chunks "$1"); do
		n=$((n + 1))
		[ -f "$(gp_object "$h")" ] &&
			[ "$(mn_psql "SELECT uploaded FROM ns_chunks WHERE hash = decode('$h', 'hex')")" = f ] &&
			m=$((m + 1))
	done
	echo "$n $m"
}

# B saves step-100; its objects reach BACKING (renamed into place) but no
# sync of them succeeds (faultfs: eio=fsync), so B never marks them
# uploaded; then B is killed. damage=1 flips one byte of one object first.
_gp_unmarked_then_killed() {
	local damage=$1 i=0 got
	ck_faultfs_up
	mn_pg_start
	mn_mount A
	mn_mount B
	mkdir "$MN_MNT_A/run"
	mn_see B run
	mn_save A run/step-90 model.bin 300000 s90
	got=$("$CKPTFS_ADMIN" wait "$MN_MNT_A" --timeout 60 2>&1) || ck_fail "step-90 not durable: $got"
	ck_fault "eio=fsync"
	mn_save B run/step-100 model.bin 3000000 s100
	until got=$(gp_unmarked_on_backing step-100) && [ "${got% *}" -gt 0 ] && [ "${got% *}" = "${got#* }" ]; do
		i=$((i + 1))
		[ $i -le 300 ] || ck_fail "B's objects never all reached BACKING unmarked: $got (chunks, unmarked on BACKING)"
		sleep 0.1
	done
	mn_kill9 B
	if [ "$damage" = 1 ]; then
		local obj
		obj=$(gp_object "$(gp_chunks step-100 | head -n 1)")
		printf '\x%02x' $(( $(od -An -tu1 -j 100 -N 1 "$obj") ^ 0x5a )) |
			dd of="$obj" bs=1 seek=100 conv=notrunc status=none
	fi
	if [ "$damage" = 2 ]; then
		ck_fault "eio=read" # BACKING's reads fail while A looks at B's objects
	else
		ck_fault "" # BACKING answers again; B is gone for good
	fi
	mn_until "SELECT settled FROM ckpt_nodes WHERE name = 'node-B'"
}

test_a_lost_save_whose_objects_reached_backing_unmarked_is_found_whole() {
	_gp_unmarked_then_killed 0
	mn_until "SELECT NOT lost AND state = 1 FROM ns_generations WHERE name = 'step-100'"
	mn_until "SELECT bool_and(c.uploaded) FROM ns_generations g JOIN ns_inodes i ON i.gen = g.id
		JOIN ns_extents e ON e.ino = i.ino JOIN ns_chunks c ON c.hash = e.hash WHERE g.name = 'step-100'"
	grep -q "chunks of lost generations whole on BACKING" "$MN_DLOG_A" ||
		ck_fail "A's log does not say it found B's objects on BACKING"
	# a resume on a fresh node finds it, whole, bit for bit
	mn_mount C
	assert_eq "step-90 step-100" "$(mn_entries "$MN_MNT_C/run")" "run/ on fresh node C"
	assert_eq "committed" "$(mn_gen_state "$MN_MNT_C/run" step-100)" "step-100 on C"
	assert_file_eq "$CK_TMP/s100.bin" "$MN_MNT_C/run/step-100/model.bin"
	local out
	out=$("$CKPTFS_ADMIN" wait "$MN_MNT_C" --timeout 60 2>&1) || ck_fail "not durable: $out"
	mn_umount C
	mn_umount A
}
ck_timeout test_a_lost_save_whose_objects_reached_backing_unmarked_is_found_whole 180

# A read of BACKING that fails (an nfs:// transport error is EIO) is no
# verdict on the object: the sweep looks again, and once BACKING reads, the
# save is found whole. Before, the object was remembered as damaged for as
# long as A ran, and the save stayed lost.
test_a_read_error_while_looking_on_backing_is_looked_at_again() {
	_gp_unmarked_then_killed 2
	ck_wait_log "$MN_DLOG_A" "cannot read chunk .* of a lost generation on BACKING" 30 ||
		ck_fail "A's sweep never tried to read B's objects: $(grep -c 'damaged' "$MN_DLOG_A") taken as damaged"
	ck_fault ""
	mn_until "SELECT NOT lost AND state = 1 FROM ns_generations WHERE name = 'step-100'"
	mn_mount C
	assert_eq "step-90 step-100" "$(mn_entries "$MN_MNT_C/run")" "run/ on fresh node C"
	assert_file_eq "$CK_TMP/s100.bin" "$MN_MNT_C/run/step-100/model.bin"
	mn_umount C
	mn_umount A
}
ck_timeout test_a_read_error_while_looking_on_backing_is_looked_at_again 180

test_a_lost_save_with_a_damaged_object_on_backing_stays_lost() {
	_gp_unmarked_then_killed 1
	mn_until "SELECT lost FROM ns_generations WHERE name = 'step-100'"
	ck_wait_log "$MN_DLOG_A" "on BACKING but damaged" 30 ||
		ck_fail "A's sweep never looked at the damaged object"
	assert_eq "t" "$(mn_psql "SELECT lost FROM ns_generations WHERE name = 'step-100'")" \
		"step-100 after the damaged object was looked at"
	mn_mount C
	assert_eq "step-90" "$(mn_entries "$MN_MNT_C/run")" "run/ on fresh node C"
	assert_file_eq "$CK_TMP/s90.bin" "$MN_MNT_C/run/step-90/model.bin"
	mn_umount C
	mn_umount A
}
ck_timeout test_a_lost_save_with_a_damaged_object_on_backing_stays_lost 180

ck_main "$@"
