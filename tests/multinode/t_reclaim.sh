#!/bin/bash
# t_reclaim — the cluster's chunk reclaim (docs/MULTINODE.md "Reclaim"):
# files overwritten, appended to and removed on two nodes leave no object
# on BACKING that no file names, once the node holding duty "reclaim" ran;
# every surviving file reads back bit for bit on a fresh node; a save
# removed and a file outside generations overwritten leave BACKING a
# description a rebuild can use (catalog_shared_reclaim.c R7, R8).
. "$(dirname "$0")/mn.sh"

# _mn_settled: every chunk of the shared catalog is named, uploaded, and
# BACKING holds exactly their objects. Prints the figures.
_mn_settled() {
	local live dead dirty objects
	live=$(mn_psql "SELECT count(*) FROM ns_chunks")
	dead=$(mn_psql "SELECT count(*) FROM ns_chunks WHERE refcount = 0")
	dirty=$(mn_psql "SELECT count(*) FROM ns_chunks WHERE NOT uploaded")
	objects=$(mn_objects)
	echo "$live chunks, $dead unreferenced, $dirty not uploaded, $objects objects on BACKING"
	[ "$dead" = 0 ] && [ "$dirty" = 0 ] && [ "$live" = "$objects" ]
}

# _mn_wait_settled S: polls up to S seconds for _mn_settled.
_mn_wait_settled() {
	local t=$1 i=0 what
	until what=$(_mn_settled); do
		i=$((i + 1))
		[ $i -le $((t * 5)) ] || ck_fail "BACKING not settled within ${t}s: $what; not uploaded:" \
			"$(mn_psql "SELECT encode(hash, 'hex'), refcount, holder, state FROM ns_chunks WHERE NOT uploaded")"
		sleep 0.2
	done
	ck_log "settled: $what"
}

# _mn_assert_reclaimed BEFORE: fewer objects on BACKING than BEFORE, and a
# node logged a reclaim.
_mn_assert_reclaimed() {
	local before=$1 after
	after=$(mn_objects)
	ck_log "objects on BACKING: $before before, $after after"
	[ "$after" -lt "$before" ] || ck_fail "nothing was reclaimed ($before objects before, $after after)"
	grep -q "reclaim: .* object(s) removed from BACKING" "$MN_DLOG_A" "$MN_DLOG_B" ||
		ck_fail "no node logged a reclaim"
}

# (a) overwrites and removals on both nodes; B appends to a file A wrote
# while A overwrites another; BACKING ends with exactly the live chunks.
test_overwritten_and_removed_files_leave_only_live_chunks_on_backing() {
	mn_pg_start
	mn_mount A
	mn_mount B
	local f
	mkdir "$MN_MNT_A/d"
	mn_see B d
	for f in a1 a2 a3 a4; do
		ck_rand "$CK_REF/$f.v1" 3000000
		cp "$CK_REF/$f.v1" "$MN_MNT_A/d/$f"
	done
	for f in b1 b2 b3; do
		ck_rand "$CK_REF/$f.v1" 3000000
		cp "$CK_REF/$f.v1" "$MN_MNT_B/d/$f"
	done
	mn_see A d/b3
	mn_see B d/a4
	_mn_wait_settled 30
	local before
	before=$(mn_objects)
	# overwrites across nodes, removals, an append that continues A's file on B
	ck_rand "$CK_REF/a1.v2" 2000000
	cp "$CK_REF/a1.v2" "$MN_MNT_B/d/a1"
	ck_rand "$CK_REF/b1.v2" 2500000
	cp "$CK_REF/b1.v2" "$MN_MNT_A/d/b1"
	rm "$MN_MNT_B/d/a2" "$MN_MNT_A/d/b2"
	ck_rand "$CK_REF/tail" 700000
	cat "$CK_REF/a3.v1" "$CK_REF/tail" >"$CK_REF/a3.v2"
	cat "$CK_REF/tail" >>"$MN_MNT_B/d/a3"
	ck_rand "$CK_REF/a4.v2" 1000000
	cp "$CK_REF/a4.v2" "$MN_MNT_A/d/a4"
	_mn_wait_settled 60
	_mn_assert_reclaimed "$before"
	mn_umount A
	mn_umount B
	assert_eq "$(mn_psql "SELECT count(*) FROM ns_pins")" 0 "pins left after both nodes left"
	mn_mount C
	assert_file_eq "$CK_REF/a1.v2" "$MN_MNT_C/d/a1"
	assert_file_eq "$CK_REF/a3.v2" "$MN_MNT_C/d/a3"
	assert_file_eq "$CK_REF/a4.v2" "$MN_MNT_C/d/a4"
	assert_file_eq "$CK_REF/b1.v2" "$MN_MNT_C/d/b1"
	assert_file_eq "$CK_REF/b3.v1" "$MN_MNT_C/d/b3"
	[ ! -e "$MN_MNT_C/d/a2" ] && [ ! -e "$MN_MNT_C/d/b2" ] || ck_fail "a removed file is back"
	mn_umount C
}

# (b) a writer on B holds a file open, continued from A's content, while A
# replaces the file and the reclaim runs: B's close publishes its version,
# which reads back whole on a fresh node (its old chunks were pinned).
test_a_continued_writer_keeps_its_chunks_through_a_reclaim() {
	mn_pg_start
	mn_mount A
	mn_mount B
	ck_rand "$CK_REF/f.v1" 4000000
	cp "$CK_REF/f.v1" "$MN_MNT_A/f"
	mn_see B f
	_mn_wait_settled 30
	ck_rand "$CK_REF/tail" 100000
	cat "$CK_REF/f.v1" "$CK_REF/tail" >"$CK_REF/f.b"
	# B's writer starts from A's chunks (a byte rewritten in place) and
	# stays open; it appends the tail once A replaced f and reclaims ran
	local go=$CK_TMP/go
	"$PY" -c '
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY)
os.pwrite(fd, open(sys.argv[2], "rb").read(1), 0)
open(sys.argv[4] + ".started", "w").close()
while not os.path.exists(sys.argv[4]):
    time.sleep(0.05)
os.pwrite(fd, open(sys.argv[3], "rb").read(), 4000000)
os.close(fd)
' "$MN_MNT_B/f" "$CK_REF/f.v1" "$CK_REF/tail" "$go" &
	local writer=$!
	local i=0
	until [ -e "$go.started" ]; do
		i=$((i + 1))
		[ $i -le 100 ] || ck_fail "B's writer did not start"
		sleep 0.1
	done
	ck_rand "$CK_REF/f.a" 3000000
	cp "$CK_REF/f.a" "$MN_MNT_A/f"
	sleep $((MN_LEASE_MS * 2 / 1000 + 1)) # reclaim turns run meanwhile
	touch "$go"
	wait $writer || ck_fail "B's writer failed"
	_mn_wait_settled 60
	mn_umount A
	mn_umount B
	mn_mount C
	assert_file_eq "$CK_REF/f.b" "$MN_MNT_C/f"
	mn_umount C
}

# (c) a save removed on B and run/latest overwritten on B, while A saved
# too: the removed save's manifest leaves BACKING (shared mode never removed
# it before) before its chunks do; once settled, a rebuild from BACKING
# alone into a fresh database gives the live save and the new run/latest,
# byte for byte, and not the removed save.
test_a_removed_save_and_an_overwrite_leave_backing_a_description_a_rebuild_can_use() {
	mn_pg_start
	mn_mount A
	mn_mount B
	mn_save A run/step-1 w.bin 3000000 s1
	mn_save B run/step-2 w.bin 3000000 s2
	head -c 450000 /dev/urandom | base64 -w0 >"$CK_REF/latest.v1" # text, as a trainer's
	cp "$CK_REF/latest.v1" "$MN_MNT_A/run/latest"
	local out
	out=$("$CKPTFS_ADMIN" wait "$MN_MNT_A" --timeout 60 2>&1) || ck_fail "ckptfs-admin wait on node A failed: $out"
	local g1
	g1=$(mn_psql "SELECT id FROM ns_generations WHERE name = 'step-1'")
	[ -s "$CK_BACKING/manifests/gen/$g1.1.ckm" ] || ck_fail "no manifest of step-1 on BACKING"
	mn_see B run/step-1/w.bin
	rm -rf "$MN_MNT_B/run/step-1"
	head -c 450000 /dev/urandom | base64 -w0 >"$CK_REF/latest.v2"
	cp "$CK_REF/latest.v2" "$MN_MNT_B/run/latest"
	_mn_wait_settled 60
	_mn_wait_manifest_gone "manifests/gen/$g1.1.ckm"
	grep -q "reclaim: the manifests of .* ended generation(s) removed from BACKING" \
		"$MN_DLOG_A" "$MN_DLOG_B" || ck_fail "no node logged the manifests' removal"
	mn_umount A
	mn_umount B
	mn_pg_start
	out=$("$CKPTFS_ADMIN" rebuild --meta --force "$MN_URL" "$CK_BACKING" 2>&1) || ck_fail "rebuild --meta failed: $out"
	ck_log "$out"
	assert_contains "$out" "1 generations" "rebuild --meta"
	case "$out" in *missing*) ck_fail "rebuild --meta found chunks missing: $out" ;; esac
	mn_mount C
	assert_file_eq "$CK_TMP/s2.bin" "$MN_MNT_C/run/step-2/w.bin"
	assert_file_eq "$CK_REF/latest.v2" "$MN_MNT_C/run/latest"
	[ ! -e "$MN_MNT_C/run/step-1" ] || ck_fail "the removed save is back after the rebuild"
	mn_umount C
}
ck_timeout test_a_removed_save_and_an_overwrite_leave_backing_a_description_a_rebuild_can_use 300

# _mn_gen_objects GEN: the object paths (relative to BACKING) of the chunks
# the files of generation GEN name.
_mn_gen_objects() {
	mn_psql "SELECT DISTINCT encode(e.hash, 'hex') FROM ns_extents e JOIN ns_inodes i
		ON i.ino = e.ino WHERE i.gen = $1" | while read -r h; do echo "chunks/${h:0:2}/${h:2:2}/$h"; done
}

# _mn_wait_manifest_gone PATH: polls up to 30 s until the reclaim duty
# removed PATH (a removed save's manifest on BACKING, R8).
_mn_wait_manifest_gone() {
	local i=0
	until [ ! -e "$CK_BACKING/$1" ]; do
		i=$((i + 1))
		[ $i -le 150 ] || ck_fail "the removed save's manifest $1 is still on BACKING after 30 s"
		sleep 0.2
	done
}

# (s31) rebuild --meta holds a save in conflict by its name, as a local
# rebuild does (fs/rebuild.c invariant 7, meta/manifest.h M4): run1/step-200
# (id A) is removed on B and saved again there (id B, step-100's bytes, its
# chunks shared); A's manifest and objects are put back on BACKING, as a
# rebuild finds them when A's removal had not reached BACKING. The database
# is lost; rebuild --meta puts A at run1/step-200 and B held as
# step-200.rebuild-B: hidden, read byte for byte by name, in list --all with
# its reason; its chunks counted, so an rm of step-100 and the reclaim leave
# its objects on BACKING; commit shows it, rm removes it with its objects.
# Before, rebuild --meta left B out: the reclaim removed step-100's objects,
# the only copy of B's bytes.
test_rebuild_meta_holds_a_save_in_conflict_and_keeps_its_chunks() {
	mn_pg_start
	mn_mount A
	mn_mount B
	ck_rand "$CK_REF/a.pt" $((3 * MiB + 11))
	ck_rand "$CK_REF/b.pt" $((MiB + 5))
	mkdir -p "$MN_MNT_A/run1/step-100" "$MN_MNT_A/run1/step-200"
	cp "$CK_REF/a.pt" "$MN_MNT_A/run1/step-100/a.pt"
	setfattr -n user.ckptfs.commit -v 1 "$MN_MNT_A/run1/step-100"
	cp "$CK_REF/b.pt" "$MN_MNT_A/run1/step-200/b.pt"
	setfattr -n user.ckptfs.commit -v 1 "$MN_MNT_A/run1/step-200"
	ck_admin_rc 0 wait "$MN_MNT_A" --timeout 60
	local a b m o
	a=$(mn_psql "SELECT id FROM ns_generations WHERE name = 'step-200' AND state = 1")
	m=$a.$(mn_psql "SELECT version FROM ns_generations WHERE id = $a").ckm
	[ -s "$CK_BACKING/manifests/gen/$m" ] || ck_fail "no manifest of generation $a on BACKING"
	mkdir -p "$CK_TMP/saved"
	cp "$CK_BACKING/manifests/gen/$m" "$CK_TMP/saved/manifest"
	_mn_gen_objects "$a" >"$CK_TMP/saved/objects"
	[ -s "$CK_TMP/saved/objects" ] || ck_fail "no chunk of step-200"
	while read -r o; do
		mkdir -p "$CK_TMP/saved/$(dirname "$o")"
		cp "$CK_BACKING/$o" "$CK_TMP/saved/$o"
	done <"$CK_TMP/saved/objects"
	mn_see B run1/step-200/b.pt
	rm -rf "$MN_MNT_B/run1/step-200"
	_mn_wait_settled 60
	_mn_wait_manifest_gone "manifests/gen/$m"
	mkdir -p "$MN_MNT_B/run1/step-200" # B: step-100's bytes, its chunks shared
	cp "$CK_REF/a.pt" "$MN_MNT_B/run1/step-200/a.pt"
	setfattr -n user.ckptfs.commit -v 1 "$MN_MNT_B/run1/step-200"
	ck_admin_rc 0 wait "$MN_MNT_B" --timeout 60
	b=$(mn_psql "SELECT id FROM ns_generations WHERE name = 'step-200' AND state = 1")
	[ "$b" -gt "$a" ] || ck_fail "the new step-200 has id $b, not above $a"
	mn_umount B
	mn_umount A

	cp "$CK_TMP/saved/manifest" "$CK_BACKING/manifests/gen/$m"
	while read -r o; do
		mkdir -p "$CK_BACKING/$(dirname "$o")"
		cp "$CK_TMP/saved/$o" "$CK_BACKING/$o"
	done <"$CK_TMP/saved/objects"
	mn_pg_start # the database is lost
	ck_admin_rc 1 rebuild --meta --force "$MN_URL" "$CK_BACKING"
	ck_log "$(cat "$CK_TMP/out")"
	assert_contains "$(cat "$CK_TMP/out")" "1 conflicting manifests" "rebuild --meta's report"
	assert_contains "$(cat "$CK_TMP/err")" "applied HELD as run1/step-200.rebuild-$b" "rebuild --meta's log"
	local held=step-200.rebuild-$b
	assert_eq "4 rebuild" "$(mn_psql "SELECT state, rule FROM ns_generations WHERE id = $b" | tr '|' ' ')" \
		"the held save's row"

	mn_mount C
	assert_eq "step-100 step-200" "$(mn_entries "$MN_MNT_C/run1")" "run1 lists no held save"
	assert_file_eq "$CK_REF/b.pt" "$MN_MNT_C/run1/step-200/b.pt"
	assert_file_eq "$CK_REF/a.pt" "$MN_MNT_C/run1/$held/a.pt"
	local listed
	listed=$(ck_list_gen "$MN_MNT_C" "$held")
	assert_eq "held rebuild 200" "$(echo "$listed" | head -n 1)" "the held save in list --all"
	assert_contains "$(echo "$listed" | tail -n 1)" \
		"rebuild: manifests/gen/$b.1.ckm conflicts with the catalog at run1/step-200 (" "its reason"

	# the save sharing its chunks goes: the reclaim leaves its objects
	_mn_gen_objects "$b" >"$CK_TMP/shared"
	[ -s "$CK_TMP/shared" ] || ck_fail "no chunk of $held in the rebuilt database"
	ck_admin_rc 0 rm "$MN_MNT_C" run1/step-100
	_mn_wait_settled 60
	while read -r o; do assert_exists "$CK_BACKING/$o"; done <"$CK_TMP/shared"
	mn_umount C

	# a decision on a fresh node (its bytes from BACKING): commit shows it,
	# rm removes it with its objects
	mn_mount D
	ck_admin_rc 0 commit "$MN_MNT_D" "run1/$held"
	assert_eq "step-200 $held" "$(mn_entries "$MN_MNT_D/run1")" "run1 after commit"
	assert_file_eq "$CK_REF/a.pt" "$MN_MNT_D/run1/$held/a.pt"
	ck_admin_rc 0 rm "$MN_MNT_D" "run1/$held"
	_mn_wait_settled 60
	while read -r o; do assert_not_exists "$CK_BACKING/$o"; done <"$CK_TMP/shared"
	assert_file_eq "$CK_REF/b.pt" "$MN_MNT_D/run1/step-200/b.pt"
	mn_umount D
}
ck_timeout test_rebuild_meta_holds_a_save_in_conflict_and_keeps_its_chunks 300


# (e) over an nfs:// BACKING (the private ganesha): each node's reclaimer
# removes through a connection of its own whose calls time out within a
# quarter of the lease (fs/main.c main_reclaim_backing, review 33 F2: a
# removal checked before the duty's deadline must not reach the server
# after another node's takeover); the overwritten files' objects go from
# the export, what is left reads back bit for bit on a fresh node.
test_reclaim_over_nfs_removes_through_its_own_connection() {
	mn_ganesha_start
	mn_pg_start
	mn_mount A
	mn_mount B
	local x f
	for x in A B; do
		local log
		log=$([ $x = A ] && echo "$MN_DLOG_A" || echo "$MN_DLOG_B")
		grep -q "reclaim: removals from BACKING on a connection of their own, 1000 ms per call at most" "$log" ||
			ck_fail "node $x opened no connection of its own for the reclaim (lease $MN_LEASE_MS ms)"
	done
	mkdir "$MN_MNT_A/d"
	mn_see B d
	for f in a1 a2; do
		ck_rand "$CK_REF/$f.v1" 3000000
		cp "$CK_REF/$f.v1" "$MN_MNT_A/d/$f"
	done
	ck_rand "$CK_REF/b1.v1" 3000000
	cp "$CK_REF/b1.v1" "$MN_MNT_B/d/b1"
	mn_see A d/b1
	_mn_wait_settled 60
	local before
	before=$(mn_objects)
	ck_rand "$CK_REF/a1.v2" 2000000
	cp "$CK_REF/a1.v2" "$MN_MNT_B/d/a1"
	rm "$MN_MNT_A/d/b1"
	_mn_wait_settled 90
	_mn_assert_reclaimed "$before"
	mn_umount A
	mn_umount B
	mn_mount C
	assert_file_eq "$CK_REF/a1.v2" "$MN_MNT_C/d/a1"
	assert_file_eq "$CK_REF/a2.v1" "$MN_MNT_C/d/a2"
	[ ! -e "$MN_MNT_C/d/b1" ] || ck_fail "a removed file is back"
	mn_umount C
	mn_ganesha_stop
}
ck_timeout test_reclaim_over_nfs_removes_through_its_own_connection 300

ck_main "$@"
