#!/bin/bash
# t_writeback — BACKING behind the local write-back cache: saves land in the
# cache and reach BACKING behind (chunk objects, then one manifest per
# generation version: durable), unmount waits for uploads, a kill -9 loses
# nothing (the queue resumes), a fresh node with an empty cache sees every
# durable generation byte for byte, a lost catalog is refused with the rebuild
# command, -o cache_size evicts clean chunks and reads fetch them back,
# -o sync=backing fsyncs only once the data is on BACKING, keep-latest-k
# removes old generations' manifests from BACKING. Faults on BACKING (and
# keep never deleting the newest durable generation) are in t_faults.sh.
. "$(dirname "$0")/lib.sh"

ck_slow test_cache_size_bounds_the_cache_and_evicted_chunks_are_fetched_back

# Saves step-N of series run/ the way torch.save does (temp name, rename),
# with a tracker file `latest` outside generations; copies land in CK_REF.
_save_step() { # N SIZE_MIB
	local n=$1 mib=$2
	mkdir -p "$CK_MNT/run/step-$n" "$CK_REF/run/step-$n"
	head -c $((mib * MiB)) /dev/urandom >"$CK_REF/run/step-$n/model.pt"
	printf 'step %s\n' "$n" >"$CK_REF/run/step-$n/meta.json"
	cp "$CK_REF/run/step-$n/model.pt" "$CK_MNT/run/step-$n/model.pt.tmp"
	mv "$CK_MNT/run/step-$n/model.pt.tmp" "$CK_MNT/run/step-$n/model.pt"
	cp "$CK_REF/run/step-$n/meta.json" "$CK_MNT/run/step-$n/meta.json"
	setfattr -n user.ckptfs.commit -v 1 "$CK_MNT/run/step-$n"
	printf '%s\n' "$n" >"$CK_MNT/run/latest"
	printf '%s\n' "$n" >"$CK_REF/run/latest"
}

_assert_tree_eq() { # REF DIR
	local f
	(cd "$1" && find . -type f | sort) >"$CK_TMP/ref.list"
	(cd "$2" && find . -type f | sort) >"$CK_TMP/got.list"
	diff -q "$CK_TMP/ref.list" "$CK_TMP/got.list" >/dev/null ||
		ck_fail "file lists differ: $(diff "$CK_TMP/ref.list" "$CK_TMP/got.list" | head -n 5 | tr '\n' '|')"
	while read -r f; do
		cmp -s "$1/$f" "$2/$f" || ck_fail "$f differs from its reference"
	done <"$CK_TMP/ref.list"
}

test_save_reaches_backing_as_objects_and_a_manifest_and_becomes_durable() {
	ck_mount
	_save_step 1 6
	ck_wait_durable
	assert_eq 1 "$(ck_sql "SELECT durable_version FROM generations WHERE name = 'step-1'")" "durable_version of step-1"
	assert_exists "$CK_BACKING/manifests/gen/1.1.ckm"
	[ -n "$(find "$CK_BACKING/manifests/tree" -name '*.ckm')" ] || ck_fail "no tree manifest on BACKING (for run/latest)"
	assert_eq 0 "$(ck_sql 'SELECT COUNT(*) FROM chunks WHERE uploaded = 0')" "chunks not on BACKING"
	ck_umount
	ck_objcheck
}

test_unmount_waits_for_uploads_and_nothing_stays_queued() {
	ck_mount
	_save_step 1 24
	_save_step 2 24
	ck_umount
	assert_eq 0 "$(ck_sql 'SELECT COUNT(*) FROM uploads')" "rows left in the upload queue after unmount"
	assert_eq 2 "$(ck_sql 'SELECT COUNT(*) FROM generations WHERE state = 1 AND durable_version = version')" "durable generations"
	ck_objcheck
}

test_fresh_node_with_an_empty_cache_sees_every_durable_generation() {
	ck_mount
	_save_step 1 5
	_save_step 2 7
	ln -s step-2 "$CK_MNT/run/best"
	ln -s step-2 "$CK_REF/run/best"
	ck_umount
	# another node: the same BACKING, a new cache
	CK_CACHE=$CK_TMP/cache2
	ck_mount
	_assert_tree_eq "$CK_REF/run" "$CK_MNT/run"
	assert_eq step-2 "$(readlink "$CK_MNT/run/best")" "symlink outside generations"
	assert_eq 2 "$(ck_sql 'SELECT COUNT(*) FROM generations WHERE state = 1 AND durable_version = version')" "generations rebuilt as durable"
	assert_contains "$(cat "$CK_DLOG")" "rebuilt from its manifests"
	# and it goes on from there: a new step on the new node
	_save_step 3 3
	ck_umount
	ck_mount
	_assert_tree_eq "$CK_REF/run" "$CK_MNT/run"
	ck_umount
	ck_objcheck
}

test_pin_after_commit_reaches_backing_and_a_fresh_node() {
	ck_mount
	_save_step 1 2
	ck_wait_durable
	setfattr -n user.ckptfs.pin -v 1 "$CK_MNT/run/step-1"
	ck_wait_durable
	ck_umount
	CK_CACHE=$CK_TMP/cache2
	ck_mount
	assert_eq 1 "$(ck_sql "SELECT pinned FROM generations WHERE name = 'step-1'")" "pin of step-1 on a fresh node"
	ck_umount
}

test_lost_catalog_is_refused_with_the_rebuild_command() {
	ck_mount
	_save_step 1 2
	ck_umount
	rm -f "$CK_CACHE"/catalog.db*
	local out rc=0
	out=$("$CKPTFS_BIN" -f -o "$(ck_opts "cache=$CK_CACHE")" "$CK_BACKING" "$CK_MNT" 2>&1) || rc=$?
	assert_ne 0 "$rc" "exit status of a mount over a lost catalog"
	assert_eq 1 "$(echo "$out" | wc -l)" "lines of error output"
	assert_contains "$out" "catalog.db is missing"
	assert_contains "$out" "ckptfs-admin rebuild"
	ck_is_mounted "$CK_MNT" && ck_fail "mounted an empty tree over a lost catalog"
	assert_exists "$CK_BACKING/manifests/gen/1.1.ckm"
}

test_kill9_with_uploads_queued_loses_nothing_and_the_queue_resumes() {
	ck_mount "upload_threads=1"
	_save_step 1 40
	_save_step 2 40
	local queued
	queued=$(ck_sql 'SELECT COUNT(*) FROM uploads')
	ck_log "uploads queued at kill -9: $queued"
	ck_kill9
	ck_mount
	ck_wait_durable 120
	_assert_tree_eq "$CK_REF/run" "$CK_MNT/run"
	ck_umount
	ck_objcheck --allow-orphans
	# BACKING alone is enough
	CK_CACHE=$CK_TMP/cache2
	ck_mount
	_assert_tree_eq "$CK_REF/run" "$CK_MNT/run"
	ck_umount
}

test_cache_size_bounds_the_cache_and_evicted_chunks_are_fetched_back() {
	ck_mount "cache_size=64M"
	local n
	for n in 1 2 3 4 5 6; do
		_save_step "$n" 24
	done
	ck_wait_durable 120
	sleep 3 # the evictor runs every second
	local cached
	cached=$(ck_sql 'SELECT COALESCE(SUM(stored_len), 0) FROM chunks WHERE cached = 1')
	ck_log "cached bytes after 144 MiB of saves with cache_size=64M: $cached"
	assert_le "$cached" $((64 * MiB)) "cached bytes vs cache_size"
	[ "$(ck_sql 'SELECT COUNT(*) FROM chunks WHERE cached = 0')" -gt 0 ] || ck_fail "nothing was evicted"
	# every byte reads back: evicted chunks come from BACKING, checked by hash
	_assert_tree_eq "$CK_REF/run" "$CK_MNT/run"
	# reading it all back again from the daemon (a remount empties the page
	# cache) keeps no more than the bound: fetches stop at the watermark (C5)
	ck_remount "cache_size=64M"
	_assert_tree_eq "$CK_REF/run" "$CK_MNT/run"
	cached=$(ck_sql 'SELECT COALESCE(SUM(stored_len), 0) FROM chunks WHERE cached = 1')
	ck_log "cached bytes right after reading 144 MiB back with cache_size=64M: $cached"
	assert_le "$cached" $((64 * MiB)) "cached bytes vs cache_size after a read-back"
	ck_umount
	ck_objcheck
}

test_sync_backing_fsync_returns_once_the_file_is_on_backing() {
	ck_mount "sync=backing"
	mkdir -p "$CK_MNT/run/step-1"
	head -c $((9 * MiB)) /dev/urandom >"$CK_REF/a"
	"$PY" - "$CK_REF/a" "$CK_MNT/run/step-1/a" <<'EOF'
import os, sys
data = open(sys.argv[1], "rb").read()
fd = os.open(sys.argv[2], os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
os.write(fd, data)
os.fsync(fd)
os.close(fd)
EOF
	# right after fsync returned: every chunk of the file is on BACKING
	local ino
	ino=$(stat -c %i "$CK_MNT/run/step-1/a")
	assert_eq 0 "$(ck_sql "SELECT COUNT(*) FROM extents e JOIN chunks c ON c.hash = e.hash WHERE e.ino = $ino AND c.uploaded = 0")" "chunks of the fsync'd file not on BACKING"
	[ "$(ck_sql "SELECT COUNT(*) FROM extents WHERE ino = $ino")" -gt 0 ] || ck_fail "the file has no extents"
	ck_umount
	ck_objcheck
}

test_keep_deletes_older_generations_and_their_manifests_on_backing() {
	ck_mount "keep=1"
	_save_step 1 2
	ck_wait_durable
	_save_step 2 2
	_save_step 3 2
	ck_wait_durable
	# once newer ones are durable, only the newest is kept
	local i=0
	while [ "$(ck_sql "SELECT COUNT(*) FROM generations WHERE state = 1")" != 1 ]; do
		i=$((i + 1))
		[ $i -le 100 ] || ck_fail "keep=1 left $(ck_sql "SELECT group_concat(name) FROM generations WHERE state = 1")"
		sleep 0.1
	done
	assert_eq step-3 "$(ck_sql "SELECT name FROM generations WHERE state = 1")" "the generation kept"
	ck_umount
	# the deleted generations' manifests are gone from BACKING too
	assert_not_exists "$CK_BACKING/manifests/gen/1.1.ckm"
	assert_exists "$CK_BACKING/manifests/gen/3.1.ckm"
	ck_objcheck
}

test_catalog_of_schema_2_upgrades_and_its_generations_become_durable() {
	# a version-2 layout: objects straight in BACKING, no cache copies
	ck_mount
	_save_step 1 3
	ck_umount
	# make the catalog look like version 2's: no manifests, objects only on BACKING
	rm -rf "$CK_BACKING/manifests" "$CK_CACHE/chunks"
	ck_sql "UPDATE chunks SET cached = 0, uploaded = 1; UPDATE generations SET durable_version = 0; INSERT INTO uploads(kind, gen, version, enqueued_ns) SELECT 2, id, version, 0 FROM generations WHERE state = 1" >/dev/null
	ck_mount
	ck_wait_durable
	assert_exists "$CK_BACKING/manifests/gen/1.1.ckm"
	_assert_tree_eq "$CK_REF/run" "$CK_MNT/run"
	ck_umount
}

ck_main "$@"
