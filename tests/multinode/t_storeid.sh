#!/bin/bash
# t_storeid — the store id on the shared engine (fs/main.c M3, meta/pgns.h
# N15; docs/MULTINODE.md "Store id"): the shared catalog records the id of
# BACKING's marker ckptfs.store, and a node is refused, with one line and
# nothing written to BACKING, over a BACKING that is not the store the
# catalog's saves are on: an empty directory where the NFS mount did not
# come up, or another store's marker. Nodes starting together over a fresh
# store end with one id; a store from before ids is given one.
. "$(dirname "$0")/mn.sh"

# st_pg_id: the store id the shared catalog records ("" none)
st_pg_id() { mn_psql "SELECT value FROM ns_meta WHERE key = 'store_id'"; }
# st_marker_id DIR: the id line of DIR/ckptfs.store ("" none)
st_marker_id() { sed -n 's/^id //p' "$1/ckptfs.store"; }

_st_said() { grep -qF "$1" "$MN_DLOG_A" && echo 1 || echo 0; } # NEEDLE: 1 once A logged it

# st_refused X BACKING: node X's daemon (as mn_mount would start it) over
# BACKING must exit non-zero without mounting; its output in ST_OUT.
st_refused() {
	local x=$1 bk=$2 i=0 pid rc=0 err
	mkdir -p "$CK_TMP/mnt_$x" "$CK_TMP/cache_$x"
	err=$CK_TMP/refused_$x.$_CK_NMOUNT.$RANDOM.err
	"$CKPTFS_BIN" -f -o "cache=$CK_TMP/cache_$x,meta=$MN_URL,node_name=node-$x,lease_ms=$MN_LEASE_MS,meta_timeout_ms=$MN_META_TIMEOUT_MS" \
		"$bk" "$CK_TMP/mnt_$x" >"$err" 2>&1 </dev/null &
	pid=$!
	_CK_DAEMONS+=("$pid:$CK_TMP/mnt_$x:$err:")
	_ck_state "pid $pid $CKPTFS_BIN"
	_ck_state "mnt $CK_TMP/mnt_$x"
	while _ck_pid_alive "$pid"; do
		ck_is_mounted "$CK_TMP/mnt_$x" && ck_fail "node $x mounted over $bk; stderr: $(tr '\n' '|' <"$err")"
		i=$((i + 1))
		[ $i -le 600 ] || ck_fail "node $x neither mounted nor exited within 30 s"
		sleep 0.05
	done
	wait "$pid" || rc=$?
	[ "$rc" != 0 ] || ck_fail "node $x exited with status 0 without mounting"
	ST_OUT=$(grep -v " info: " "$err")
}

# st_saved_on_a: node A mounted, step-1 saved from it and durable.
st_saved_on_a() {
	mn_pg_start
	mn_mount A
	mn_save A run/step-1 shard.bin 2000000 s1
	mn_until "SELECT durable_version > 0 FROM ns_generations WHERE name = 'step-1'"
}

# The NFS mount did not come up: BACKING's path is an empty local
# directory. Node B is refused (before: it mounted, put new saves there and
# the shared catalog called them durable, lost to every other node).
test_empty_backing_while_the_catalog_holds_saves_is_refused() {
	st_saved_on_a
	mkdir "$CK_TMP/unmounted"
	st_refused B "$CK_TMP/unmounted"
	assert_eq 1 "$(echo "$ST_OUT" | wc -l)" "lines of the refusal: $ST_OUT"
	assert_contains "$ST_OUT" "BACKING $CK_TMP/unmounted: no store marker (ckptfs.store)" "the refusal"
	assert_contains "$ST_OUT" "holds 1 generation durable" "the refusal"
	assert_contains "$ST_OUT" "is it mounted?" "the refusal"
	# (the health probe's tmp/ directory, empty, is all it may leave, as alone: t_bkid)
	assert_eq "" "$(find "$CK_TMP/unmounted" -type f)" "files B wrote to the empty directory"
	assert_eq 0 "$(mn_psql "SELECT count(*) FROM ckpt_nodes WHERE name = 'node-B' AND state = 'live'")" \
		"B's lease after the refusal"
	# the refused cache stays fresh: mounted over the right BACKING, B reads A's save
	mn_mount B
	assert_file_eq "$CK_TMP/s1.bin" "$MN_MNT_B/run/step-1/shard.bin"
	mn_umount B
	mn_umount A
}
ck_timeout test_empty_backing_while_the_catalog_holds_saves_is_refused 120

# Before any save: once a node found or wrote the marker with the
# catalog's id, an empty directory at BACKING's path is refused too (else
# every save this node makes would go there).
test_empty_backing_before_any_save_is_refused_once_a_node_marked_the_store() {
	mn_pg_start
	mn_mount A
	local id
	id=$(st_pg_id)
	assert_eq 1 "$(mn_psql "SELECT count(*) FROM ns_meta WHERE key = 'store_marked'")" "the catalog marked"
	assert_eq 0 "$(mn_psql "SELECT count(*) FROM ns_chunks WHERE uploaded")" "chunks uploaded"
	mkdir "$CK_TMP/unmounted"
	st_refused B "$CK_TMP/unmounted"
	assert_eq 1 "$(echo "$ST_OUT" | wc -l)" "lines of the refusal: $ST_OUT"
	assert_contains "$ST_OUT" "BACKING $CK_TMP/unmounted: no store marker (ckptfs.store)" "the refusal"
	assert_contains "$ST_OUT" "belongs to store id $id, whose marker a node found on its BACKING" "the refusal"
	assert_eq "" "$(find "$CK_TMP/unmounted" -type f)" "files B wrote to the empty directory"
	mn_mount B
	mn_umount B
	mn_umount A
}
ck_timeout test_empty_backing_before_any_save_is_refused_once_a_node_marked_the_store 120

# Another store's marker (its id not the one the catalog records) is
# refused even with nothing saved, naming both ids.
test_a_marker_of_another_id_is_refused() {
	mn_pg_start
	mn_mount A
	local id
	id=$(st_pg_id)
	assert_eq 32 "${#id}" "the store id the catalog records"
	assert_eq "$id" "$(st_marker_id "$CK_BACKING")" "the marker's id"
	mkdir "$CK_TMP/other"
	sed 's/^id .*/id 0123456789abcdef0123456789abcdef/' "$CK_BACKING/ckptfs.store" >"$CK_TMP/other/ckptfs.store"
	cp "$CK_TMP/other/ckptfs.store" "$CK_TMP/other.marker"
	st_refused B "$CK_TMP/other"
	assert_eq 1 "$(echo "$ST_OUT" | wc -l)" "lines of the refusal: $ST_OUT"
	assert_contains "$ST_OUT" "BACKING $CK_TMP/other: store id 0123456789abcdef0123456789abcdef" "the refusal"
	assert_contains "$ST_OUT" "belongs to store id $id" "the refusal"
	assert_eq "$CK_TMP/other/ckptfs.store" "$(find "$CK_TMP/other" -type f)" "files on the other store"
	cmp -s "$CK_TMP/other.marker" "$CK_TMP/other/ckptfs.store" || ck_fail "the other store's marker changed"
	assert_eq "$id" "$(st_pg_id)" "the catalog's store id after the refusal"
	mn_umount A
}
ck_timeout test_a_marker_of_another_id_is_refused 120

# Two nodes started at the same moment over a fresh store and a fresh
# catalog: one id, in the catalog and the marker (before: each wrote its
# own id into the marker, the last writer's kept, and the catalog had none).
test_two_nodes_starting_together_end_with_one_id() {
	mn_pg_start
	mkdir -p "$CK_TMP/mnt_A" "$CK_TMP/cache_A" "$CK_TMP/mnt_B" "$CK_TMP/cache_B"
	chmod 755 "$CK_TMP/mnt_A" "$CK_TMP/mnt_B"
	local x pids=() i
	for x in A B; do
		local err=$CK_TMP/together_$x.err
		"$CKPTFS_BIN" -f -o "cache=$CK_TMP/cache_$x,meta=$MN_URL,node_name=node-$x,lease_ms=$MN_LEASE_MS,meta_timeout_ms=$MN_META_TIMEOUT_MS" \
			"$CK_BACKING" "$CK_TMP/mnt_$x" >"$err" 2>&1 </dev/null &
		pids+=($!)
		_CK_DAEMONS+=("$!:$CK_TMP/mnt_$x:$err:")
		_ck_state "pid $! $CKPTFS_BIN"
		_ck_state "mnt $CK_TMP/mnt_$x"
		printf -v "MN_MNT_$x" '%s' "$CK_TMP/mnt_$x"
		printf -v "MN_PID_$x" '%s' "$!"
		printf -v "MN_DERR_$x" '%s' "$err"
		printf -v "MN_DLOG_$x" '%s' ""
	done
	for x in A B; do
		i=0
		until ck_is_mounted "$CK_TMP/mnt_$x"; do
			local v=MN_PID_$x
			_ck_pid_alive "${!v}" || ck_fail "node $x exited before mounting: $(tr '\n' '|' <"$CK_TMP/together_$x.err")"
			i=$((i + 1))
			[ $i -le 600 ] || ck_fail "node $x did not mount within 30 s"
			sleep 0.05
		done
	done
	local id
	id=$(st_pg_id)
	assert_eq 32 "${#id}" "the store id the catalog records"
	assert_eq "$id" "$(st_marker_id "$CK_BACKING")" "the marker's id"
	assert_eq "$id" "$(cat "$CK_TMP/cache_A/backing-id")" "A's CACHE/backing-id"
	assert_eq "$id" "$(cat "$CK_TMP/cache_B/backing-id")" "B's CACHE/backing-id"
	mn_umount A
	mn_umount B
	# both mount again: the id is the store's
	mn_mount A
	mn_mount B
	assert_eq "$id" "$(st_marker_id "$CK_BACKING")" "the marker's id after remounting"
	mn_umount A
	mn_umount B
}
ck_timeout test_two_nodes_starting_together_end_with_one_id 120

# A store from before ids: a marker without one, a catalog without one,
# saves in both. The first node gives it one, recorded in both; every
# node then mounts and reads the saves.
test_a_store_from_before_ids_is_given_one() {
	st_saved_on_a
	mn_umount A
	sed -i '/^id /d' "$CK_BACKING/ckptfs.store"
	mn_psql "DELETE FROM ns_meta WHERE key IN ('store_id', 'store_marked')" >/dev/null
	assert_eq "" "$(st_marker_id "$CK_BACKING")" "the marker made old"
	mn_mount A
	local id
	id=$(st_pg_id)
	assert_eq 32 "${#id}" "the store id the catalog records"
	assert_eq "$id" "$(st_marker_id "$CK_BACKING")" "the marker's id"
	mn_mount B
	assert_eq "$id" "$(st_pg_id)" "the store id once B mounted"
	assert_file_eq "$CK_TMP/s1.bin" "$MN_MNT_B/run/step-1/shard.bin"
	mn_umount B
	mn_umount A
}
ck_timeout test_a_store_from_before_ids_is_given_one 120

# Unchanged: a save written on A is read on B, and both agree on the id;
# a BACKING whose newest durable manifest went missing (restored from an
# older copy) is refused, and `ckptfs-admin wait` on a node says so.
test_a_save_on_a_reads_on_b_and_a_restored_backing_is_refused() {
	st_saved_on_a
	mn_mount B
	assert_file_eq "$CK_TMP/s1.bin" "$MN_MNT_B/run/step-1/shard.bin"
	local id
	id=$(st_pg_id)
	assert_eq 32 "${#id}" "the store id the catalog records"
	assert_eq "$id" "$(st_marker_id "$CK_BACKING")" "the marker's id"
	mn_umount B
	local gid
	gid=$(mn_psql "SELECT id || '.' || durable_version FROM ns_generations WHERE name = 'step-1'")
	local out rc=0
	out=$("$CKPTFS_ADMIN" wait "$MN_MNT_A" --timeout 30 2>&1) || ck_fail "ckptfs-admin wait on A: $out"
	assert_contains "$out" "1 generation durable on BACKING" "wait with the manifest there"
	mv "$CK_BACKING/manifests/gen/$gid.ckm" "$CK_TMP/kept.ckm"
	# wait on a node does not call it durable either (as alone: t_bkid)
	out=$("$CKPTFS_ADMIN" wait "$MN_MNT_A" --timeout 30 2>&1) || rc=$?
	[ "$rc" != 0 ] || ck_fail "ckptfs-admin wait called step-1 durable without its manifest: $out"
	assert_contains "$out" "has no manifests/gen/$gid.ckm, the manifest of generation" "wait's refusal"
	st_refused B "$CK_BACKING"
	assert_eq 1 "$(echo "$ST_OUT" | wc -l)" "lines of the refusal: $ST_OUT"
	assert_contains "$ST_OUT" "the newest durable save's manifest manifests/gen/$gid.ckm is missing" "the refusal"
	mv "$CK_TMP/kept.ckm" "$CK_BACKING/manifests/gen/$gid.ckm"
	mn_mount B
	assert_file_eq "$CK_TMP/s1.bin" "$MN_MNT_B/run/step-1/shard.bin"
	mn_umount B
	mn_umount A
}
ck_timeout test_a_save_on_a_reads_on_b_and_a_restored_backing_is_refused 120

# Review 44 F1: a rewrite's upload puts v+1's manifest and removes v's
# before it records v+1 durable. A node starting in that window (here made
# by hand: version 2 committed, durable_version 1, only 2's manifest on
# BACKING) mounts: the newest durable save is one whose version is durable
# (before: refused, "the newest durable save's manifest ... is missing").
test_a_rewrites_manifest_swap_does_not_refuse_a_node() {
	st_saved_on_a
	mn_umount A
	local id
	id=$(mn_psql "SELECT id FROM ns_generations WHERE name = 'step-1'")
	[ -f "$CK_BACKING/manifests/gen/$id.1.ckm" ] || ck_fail "no manifest $id.1.ckm on BACKING"
	mn_psql "UPDATE ns_generations SET version = 2 WHERE id = $id" >/dev/null
	mv "$CK_BACKING/manifests/gen/$id.1.ckm" "$CK_BACKING/manifests/gen/$id.2.ckm"
	mn_mount B
	assert_eq 1 "$(mn_psql "SELECT durable_version FROM ns_generations WHERE id = $id")" \
		"the catalog still calls version 1 durable"
	mn_umount B
}
ck_timeout test_a_rewrites_manifest_swap_does_not_refuse_a_node 120

# fs/uploader.h B4 on a node of the shared catalog (review 50 F5): another
# save's manifest at the path the next save's manifest takes (planted at the
# next few ids of the catalog's sequence) is never replaced, and the one
# line names what keeps the refused save: copy it out first (which works
# while it is refused), then move debris away, or refill the database
# (rebuild --meta) and take the copy back.
test_a_planted_manifest_is_not_replaced_and_the_line_says_how_to_keep_the_save() {
	st_saved_on_a
	local id last n id2 line
	id=$(mn_psql "SELECT id FROM ns_generations WHERE name = 'step-1'")
	mn_poll "SELECT durable_version FROM ns_generations WHERE id = $id" 1 60 "step-1 durable"
	last=$(mn_psql "SELECT last_value FROM ns_generations_id_seq")
	for n in 1 2 3; do
		cp "$CK_BACKING/manifests/gen/$id.1.ckm" "$CK_BACKING/manifests/gen/$((last + n)).1.ckm"
	done
	mn_save A run/step-2 model.pt 300000 s2
	id2=$(mn_psql "SELECT id FROM ns_generations WHERE name = 'step-2'")
	[ "$id2" -gt "$last" ] && [ "$id2" -le $((last + 3)) ] ||
		ck_fail "step-2 has id $id2, not one of the planted paths' $((last + 1))..$((last + 3))"
	ck_until_eq 1 300 "the refusal logged on A" \
		_st_said "manifests/gen/$id2.1.ckm holds another save's manifest"
	line=$(grep "manifests/gen/$id2.1.ckm holds another save's manifest" "$MN_DLOG_A")
	assert_contains "$line" "(generation $id version 1" "the refusal"
	assert_contains "$line" "Keep it first: ckptfs-admin export MOUNTPOINT id:$id2 DIR copies it out" "the refusal"
	assert_contains "$line" "move it out of manifests/gen" "the refusal"
	assert_contains "$line" "the shared catalog (-o meta=) is behind BACKING" "the refusal"
	assert_contains "$line" "ckptfs-admin rebuild --meta URL" "the refusal"
	[[ "$line" != *"--cache"* ]] || ck_fail "the refusal on a node names a rebuild --cache: $line"
	assert_eq 0 "$(mn_psql "SELECT durable_version FROM ns_generations WHERE id = $id2")" \
		"step-2's durable version while refused"
	"$CKPTFS_ADMIN" export "$MN_MNT_A" "id:$id2" "$CK_TMP/kept" >"$CK_TMP/out" 2>&1 ||
		ck_fail "export id:$id2, as the refusal says: $(cat "$CK_TMP/out")"
	assert_file_eq "$CK_TMP/s2.bin" "$CK_TMP/kept/step-2/model.pt"
	for n in 1 2 3; do
		mv "$CK_BACKING/manifests/gen/$((last + n)).1.ckm" "$CK_TMP/planted.$n.ckm"
	done
	mn_poll "SELECT durable_version FROM ns_generations WHERE id = $id2" 1 90 \
		"step-2 durable once the planted manifests are moved away"
	cmp -s "$CK_TMP/planted.1.ckm" "$CK_BACKING/manifests/gen/$id.1.ckm" || ck_fail "step-1's manifest changed"
	mn_umount A
}
ck_timeout test_a_planted_manifest_is_not_replaced_and_the_line_says_how_to_keep_the_save 180

# A store that may hold packs (format 5: a node alone mounted it with -o
# packs=on): a node of a shared catalog cannot read them yet and is refused
# with one line, the marker as it was.
test_a_store_of_format_5_is_refused_on_a_shared_catalog() {
	mn_pg_start
	mkdir -p "$CK_TMP/packed"
	printf 'ckptfs store format 5\nid 0123456789abcdef0123456789abcdef\n' >"$CK_TMP/packed/ckptfs.store"
	cp "$CK_TMP/packed/ckptfs.store" "$CK_TMP/marker.before"
	st_refused A "$CK_TMP/packed"
	assert_eq 1 "$(echo "$ST_OUT" | wc -l)" "lines of the refusal: $ST_OUT"
	assert_contains "$ST_OUT" "store format 5 may hold packs" "the refusal"
	cmp -s "$CK_TMP/marker.before" "$CK_TMP/packed/ckptfs.store" || ck_fail "the marker changed"
}

ck_main "$@"
