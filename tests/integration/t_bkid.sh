#!/bin/bash
# t_bkid — a used cache belongs to the store it uploaded to (fs/main.c M1,
# review 40 F3, F5): BACKING's ckptfs.store carries a random id, the cache
# records it in CACHE/backing-id. A cache whose catalog calls saves durable is
# refused, with one line and nothing written to BACKING or the cache, over an
# empty BACKING (an NFS mount that did not come up), another store, or a store
# that lost the newest durable save's manifest (restored from an older copy);
# its saves read back whole once mounted on the real BACKING. A fresh cache
# over an empty BACKING, and a store with the old id-less marker, still mount.
# A mount the claim refuses leaves the marker as it was (claim.h 9).
. "$(dirname "$0")/lib.sh"

# (SQLite's side files of the catalog's read-only look, -wal empty, are left out)
# _bk_snap DIR — DIR's files with their SHA-256; of BACKING's claim (claims/)
# the record only: a mount refused after its take gives the claim back as it
# found it, as the next epoch with the judged bytes (fs/lib/claim.h 8, 10).
_bk_snap() {
	(cd "$1" && find . -path ./claims -prune -o -type f ! -name lock ! -name 'catalog.db-shm' ! -name 'catalog.db-wal' -print0 | sort -z | xargs -0 -r sha256sum)
	[ -z "$(ck_claim_epochs "$1")" ] || ck_claim "$1"
}
# _bk_mount_refused WHAT — the mount of CK_BACKING with CK_CACHE is refused in
# the foreground within 30 s, with one line on stderr ($CK_TMP/err); WHAT
# names the case if it mounts instead.
_bk_mount_refused() {
	local rc=0
	ck_register_mount "$CK_MNT"
	timeout -k 5 30 "$CKPTFS_BIN" -f -o "$(ck_opts "cache=$CK_CACHE")" "$CK_BACKING" "$CK_MNT" >"$CK_TMP/out" 2>"$CK_TMP/err" </dev/null || rc=$?
	if ck_is_mounted "$CK_MNT"; then
		fusermount3 -u "$CK_MNT" 2>/dev/null || umount -l "$CK_MNT"
		ck_fail "$1 mounted (exit $rc) instead of being refused"
	fi
	[ $rc != 124 ] && [ $rc != 137 ] || ck_fail "ckptfs did not exit within 30 s"
	[ $rc != 0 ] || ck_fail "ckptfs exited 0, expected a refusal"
	assert_eq 1 "$(wc -l <"$CK_TMP/err")" "lines of the refusal: $(cat "$CK_TMP/err")"
}
# _bk_refused WHAT NEEDLE — M1: the used cache's mount over WHAT is refused
# with one line holding NEEDLE; CK_CACHE and CK_BACKING unchanged.
_bk_refused() {
	local before_c before_b
	before_c=$(_bk_snap "$CK_CACHE")
	before_b=$(_bk_snap "$CK_BACKING")
	_bk_mount_refused "a used cache over $1"
	assert_contains "$(cat "$CK_TMP/err")" "$2" "the refusal"
	assert_contains "$(cat "$CK_TMP/err")" "is it mounted? wiped? restored from an older copy?" "the refusal"
	assert_contains "$(cat "$CK_TMP/err")" "cache $CK_CACHE holds 1 generation durable" "the refusal"
	assert_eq "$before_c" "$(_bk_snap "$CK_CACHE")" "the cache after the refusal"
	assert_eq "$before_b" "$(_bk_snap "$CK_BACKING")" "BACKING after the refusal"
}

# One durable save, its reference copy in CK_REF.
_bk_save() {
	ck_mount
	mkdir -p "$CK_MNT/run/checkpoint-100"
	head -c 3M /dev/urandom >"$CK_REF/model.bin"
	cp "$CK_REF/model.bin" "$CK_MNT/run/checkpoint-100/model.bin"
	echo '{"global_step":100}' >"$CK_MNT/run/checkpoint-100/trainer_state.json"
	ck_wait_durable
	ck_umount
}
_bk_read_back() {
	ck_mount
	cmp "$CK_REF/model.bin" "$CK_MNT/run/checkpoint-100/model.bin" || ck_fail "the save's bytes differ after remounting on the real BACKING"
	ck_umount
}

# Another store at BACKING's path (the real one kept in CK_TMP/backing.real),
# made by cache2 with one durable save, checkpoint-200 (other.bin in CK_REF).
_bk_other_store() {
	mv "$CK_BACKING" "$CK_TMP/backing.real"
	mkdir "$CK_BACKING"
	local cache=$CK_CACHE
	CK_CACHE=$CK_TMP/cache2
	mkdir -m 700 "$CK_CACHE"
	ck_mount
	head -c 1M /dev/urandom >"$CK_REF/other.bin"
	mkdir -p "$CK_MNT/run/checkpoint-200"
	cp "$CK_REF/other.bin" "$CK_MNT/run/checkpoint-200/model.bin"
	echo '{"global_step":200}' >"$CK_MNT/run/checkpoint-200/trainer_state.json"
	ck_wait_durable
	ck_umount
	CK_CACHE=$cache
}

test_used_cache_over_an_empty_backing_is_refused() {
	_bk_save
	mv "$CK_BACKING" "$CK_TMP/backing.real"
	mkdir "$CK_BACKING"
	_bk_refused "an empty BACKING" "no store marker"
	# (the health probe's tmp/ directory, empty, is all it may leave)
	assert_eq "" "$(find "$CK_BACKING" -type f)" "files on the empty BACKING after the refusal"
	rm -r "$CK_BACKING"
	mv "$CK_TMP/backing.real" "$CK_BACKING"
	_bk_read_back
}

test_used_cache_over_another_store_is_refused() {
	_bk_save
	_bk_other_store
	_bk_refused "another store" "not $(cat "$CK_CACHE/backing-id") as recorded"
	rm -rf "$CK_BACKING"
	mv "$CK_TMP/backing.real" "$CK_BACKING"
	_bk_read_back
}

test_used_cache_over_a_store_without_the_newest_manifest_is_refused() {
	_bk_save
	local m
	m=$(cd "$CK_BACKING" && ls manifests/gen/*.ckm | tail -n 1)
	[ -n "$m" ] || ck_fail "no generation manifest on BACKING"
	mv "$CK_BACKING/$m" "$CK_TMP/manifest.aside"
	_bk_refused "a rolled-back store" "manifest $m is missing"
	mv "$CK_TMP/manifest.aside" "$CK_BACKING/$m"
	_bk_read_back
}

test_fresh_cache_over_an_empty_backing_mounts_and_marks_it() {
	ck_mount
	echo x >"$CK_MNT/f"
	ck_umount
	local id
	id=$(sed -n 's/^id //p' "$CK_BACKING/ckptfs.store")
	assert_eq 32 "${#id}" "the store id's length in $(cat "$CK_BACKING/ckptfs.store")"
	assert_eq "$id" "$(cat "$CK_CACHE/backing-id")" "the id the cache recorded"
	# a second store gets another id
	local b2=$CK_TMP/b2
	mkdir "$b2"
	CK_BACKING=$b2 CK_CACHE=$CK_TMP/c2
	mkdir -m 700 "$CK_CACHE"
	ck_mount
	ck_umount
	[ "$(sed -n 's/^id //p' "$b2/ckptfs.store")" != "$id" ] || ck_fail "two stores got the same id"
}

# A store and a cache from before ids: the cache adopts the id its holder
# writes at the next mount; a pre-id cache over an empty BACKING is refused.
test_store_with_the_old_marker_still_mounts_and_gets_an_id() {
	_bk_save
	printf 'ckptfs store format 3\n' >"$CK_BACKING/ckptfs.store"
	rm "$CK_CACHE/backing-id"
	mv "$CK_BACKING" "$CK_TMP/backing.real"
	mkdir "$CK_BACKING"
	_bk_refused "an empty BACKING (a cache from before ids)" "no store marker"
	rm -r "$CK_BACKING"
	mv "$CK_TMP/backing.real" "$CK_BACKING"
	_bk_read_back
	local id
	id=$(sed -n 's/^id //p' "$CK_BACKING/ckptfs.store")
	assert_eq 32 "${#id}" "the id given to an old store"
	assert_eq "ckptfs store format $(ck_store_format 3)" "$(head -n 1 "$CK_BACKING/ckptfs.store")" "the old store's format line"
	assert_eq "$id" "$(cat "$CK_CACHE/backing-id")" "the id the old cache adopted"
	_bk_read_back
}

# `ckptfs-admin wait` checks the newest durable save's manifest on BACKING
# before saying "durable".
test_wait_does_not_call_a_save_durable_without_its_manifest() {
	_bk_save
	ck_mount
	"$CKPTFS_ADMIN" wait "$CK_MNT" --timeout 10 >"$CK_TMP/wout" 2>&1 || ck_fail "wait over the whole store: $(cat "$CK_TMP/wout")"
	local m rc=0
	m=$(cd "$CK_BACKING" && ls manifests/gen/*.ckm | tail -n 1)
	mv "$CK_BACKING/$m" "$CK_TMP/manifest.aside"
	"$CKPTFS_ADMIN" wait "$CK_MNT" --timeout 10 >"$CK_TMP/wout" 2>&1 || rc=$?
	mv "$CK_TMP/manifest.aside" "$CK_BACKING/$m"
	ck_umount
	[ $rc != 0 ] || ck_fail "wait returned 0 with $m gone from BACKING: $(cat "$CK_TMP/wout")"
	assert_contains "$(cat "$CK_TMP/wout")" "has no $m" "wait's error"
}

# upload.h U12 (review 40 F6): keep=1 expires checkpoint-100, every chunk of
# which checkpoint-200 shares (no sweep garbage, so no sweep sync): its
# manifest is unlinked from BACKING only after a catalog sync that follows
# checkpoint-200's manifest put (the expire comes after it).
test_an_expired_saves_manifest_leaves_backing_after_the_expire_is_synced() {
	ck_mount_synclog quiet=0.5,keep=1
	local d n0 m200 line i=0 first
	head -c 300K /dev/urandom >"$CK_REF/model.bin"
	for d in 100 200; do
		mkdir -p "$CK_MNT/run/checkpoint-$d"
		cp "$CK_REF/model.bin" "$CK_MNT/run/checkpoint-$d/model.bin"
		echo '{"global_step":1}' >"$CK_MNT/run/checkpoint-$d/trainer_state.json"
		if [ $d = 100 ]; then
			until [ -n "$(ls "$CK_BACKING/manifests/gen/" 2>/dev/null)" ]; do
				i=$((i + 1))
				[ $i -le 400 ] || ck_fail "checkpoint-100 never reached BACKING"
				sleep 0.05
			done
			ck_wait_durable
			n0=$(ck_synclog_lines)
			first=$(ls "$CK_BACKING/manifests/gen/")
		fi
	done
	i=0
	until ck_synclog_since "$n0" | grep -q "^unlink .*manifests/gen/$first\$"; do
		i=$((i + 1))
		[ $i -le 400 ] || ck_fail "checkpoint-100's manifest $first never left BACKING (events: $(ck_synclog_since "$n0" | tr '\n' '|'))"
		sleep 0.05
	done
	line=$(ck_synclog_since "$n0" | grep -n "^unlink .*manifests/gen/$first\$" | head -n 1 | cut -d: -f1)
	# checkpoint-200's manifest put: the last BACKING temporary synced before
	m200=$(ck_synclog_since "$n0" | head -n "$line" | grep -n "^sync $CK_BACKING/tmp/" | tail -n 1 | cut -d: -f1)
	[ -n "$m200" ] || ck_fail "no put on BACKING before the unlink (events: $(ck_synclog_since "$n0" | head -n "$line" | tr '\n' '|'))"
	ck_synclog_since "$n0" | head -n "$line" | tail -n +"$((m200 + 1))" | grep -q '^sync .*catalog\.db' ||
		ck_fail "checkpoint-100's manifest left BACKING with no catalog sync after checkpoint-200's manifest put (events: $(ck_synclog_since "$n0" | head -n "$line" | tr '\n' '|'))"
	ck_umount
}

# F5: a mount refused by the claim (another catalog holds BACKING) does not
# write the marker first (no upgrade to format 4 for codec=zstd).
test_mount_refused_by_the_claim_leaves_the_marker() {
	ck_mount
	local before rc=0
	before=$(sha256sum <"$CK_BACKING/ckptfs.store")
	mkdir -m 700 "$CK_TMP/c2" "$CK_TMP/m2"
	ck_register_mount "$CK_TMP/m2"
	timeout -k 5 30 "$CKPTFS_BIN" -f -o "$(ck_opts "cache=$CK_TMP/c2,codec=zstd")" "$CK_BACKING" "$CK_TMP/m2" >"$CK_TMP/out" 2>"$CK_TMP/err" </dev/null || rc=$?
	if ck_is_mounted "$CK_TMP/m2"; then
		fusermount3 -u "$CK_TMP/m2"
		ck_fail "a second catalog mounted a held BACKING"
	fi
	[ $rc != 0 ] && [ $rc != 124 ] || ck_fail "the second mount exited $rc, expected a refusal"
	assert_contains "$(cat "$CK_TMP/err")" "claimed by another catalog" "the refusal"
	assert_eq "$before" "$(sha256sum <"$CK_BACKING/ckptfs.store")" "the marker after a refused mount: $(cat "$CK_BACKING/ckptfs.store")"
	ck_umount
}

# M4 (review 47 F1): a catalog that lost its WAL after a kill -9 is an older
# catalog: mounted, it handed out generation ids again, and the next save's
# manifest replaced a durable save's on BACKING (the first lost for good). It is
# refused now, in one line naming the manifest and the rebuild, with nothing
# written to BACKING; the rebuild brings every save back, and the next save
# leaves the earlier manifests as they were.
test_catalog_behind_backing_is_refused_then_rebuilt() {
	ck_mount
	local s
	for s in 1 2 3; do
		mkdir -p "$CK_MNT/run/checkpoint-$s"
		head -c 1M /dev/urandom >"$CK_REF/m$s.bin"
		cp "$CK_REF/m$s.bin" "$CK_MNT/run/checkpoint-$s/model.bin"
		echo "{\"step\": $s}" >"$CK_MNT/run/checkpoint-$s/trainer_state.json"
		ck_until_eq 1 100 "checkpoint-$s committed" ck_sql "SELECT state FROM generations WHERE name = 'checkpoint-$s'"
		ck_wait_durable
	done
	ck_kill9
	[ -s "$CK_CACHE/catalog.db-wal" ] || ck_fail "no catalog WAL to lose"
	rm -f "$CK_CACHE/catalog.db-wal" "$CK_CACHE/catalog.db-shm"
	local before_b
	before_b=$(_bk_snap "$CK_BACKING")
	_bk_mount_refused "a catalog that lost its WAL"
	assert_contains "$(cat "$CK_TMP/err")" "is behind BACKING" "the refusal"
	assert_contains "$(cat "$CK_TMP/err")" "ckptfs-admin rebuild --cache $CK_CACHE" "the refusal"
	assert_eq "$before_b" "$(_bk_snap "$CK_BACKING")" "BACKING after the refusal"
	"$CKPTFS_ADMIN" rebuild --cache "$CK_CACHE" "$CK_BACKING" >"$CK_TMP/out" 2>&1 ||
		ck_fail "the rebuild failed: $(cat "$CK_TMP/out")"
	ck_mount
	for s in 1 2 3; do
		cmp "$CK_REF/m$s.bin" "$CK_MNT/run/checkpoint-$s/model.bin" || ck_fail "checkpoint-$s differs after the rebuild"
	done
	mkdir -p "$CK_MNT/run/checkpoint-4"
	cp "$CK_REF/m1.bin" "$CK_MNT/run/checkpoint-4/model.bin"
	echo '{"step": 4}' >"$CK_MNT/run/checkpoint-4/trainer_state.json"
	ck_wait_durable
	ck_umount
	local m
	for m in $(cd "$CK_BACKING" && ls manifests/gen); do
		grep -q "\./manifests/gen/$m" <<<"$before_b" || continue
		assert_contains "$before_b" "$(cd "$CK_BACKING" && sha256sum "./manifests/gen/$m")" "manifest $m after the next save"
	done
}

_bk_said() { grep -qF "$1" "$CK_DLOG" && echo 1 || echo 0; } # NEEDLE: 1 once the daemon logged it
# uploader.h B4: a manifest put never replaces another save's manifest. One
# is planted at the path the next save's manifest will take (as a catalog
# that reused a generation id would find it); the put leaves it, the save
# stays not durable with one line naming both, and once the admin moves the
# planted one away the save becomes durable.
test_a_manifest_put_never_replaces_another_saves_manifest() {
	ck_mount
	mkdir -p "$CK_MNT/run/checkpoint-1"
	head -c 1M /dev/urandom >"$CK_REF/m1.bin"
	cp "$CK_REF/m1.bin" "$CK_MNT/run/checkpoint-1/model.bin"
	echo '{"step": 1}' >"$CK_MNT/run/checkpoint-1/trainer_state.json"
	ck_until_eq 1 100 "checkpoint-1 committed" ck_sql "SELECT state FROM generations WHERE name = 'checkpoint-1'"
	ck_wait_durable
	local id next planted
	id=$(ck_sql "SELECT id FROM generations WHERE name = 'checkpoint-1'")
	next=$((id + 1))
	planted=$CK_BACKING/manifests/gen/$next.1.ckm
	cp "$CK_BACKING/manifests/gen/$id.1.ckm" "$planted"
	local before
	before=$(sha256sum <"$planted")
	mkdir -p "$CK_MNT/run/checkpoint-2"
	head -c 1M /dev/urandom >"$CK_REF/m2.bin"
	cp "$CK_REF/m2.bin" "$CK_MNT/run/checkpoint-2/model.bin"
	echo '{"step": 2}' >"$CK_MNT/run/checkpoint-2/trainer_state.json"
	ck_until_eq "$next" 100 "checkpoint-2 committed as generation $next" \
		ck_sql "SELECT id FROM generations WHERE name = 'checkpoint-2' AND state = 1"
	ck_until_eq 1 300 "the refusal logged" _bk_said "manifests/gen/$next.1.ckm holds another save's manifest"
	sleep 1 # tried again meanwhile (the backoff starts at 100 ms), said once
	assert_eq 1 "$(grep -c "holds another save's manifest" "$CK_DLOG")" "lines of the refusal"
	assert_contains "$("$CKPTFS_ADMIN" stats "$CK_MNT")" "upload_last_error another save's manifest is at its path on BACKING" "stats"
	local line
	line=$(grep "holds another save" "$CK_DLOG")
	assert_contains "$line" "generation $id version 1" "the refusal"
	# review 50 F5: the line names what keeps the refused save, in order:
	# copy it out first (a rebuild drops a save no manifest names), then
	# the object moved away, or the rebuild and the copy taken back
	assert_contains "$line" "Keep it first: ckptfs-admin export MOUNTPOINT id:$next DIR copies it out" "the refusal"
	assert_contains "$line" "move it out of manifests/gen" "the refusal"
	assert_contains "$line" "ckptfs-admin rebuild --force --cache $CK_CACHE" "the refusal"
	assert_contains "$line" "ckptfs-admin import MOUNTPOINT DIR/NAME SERIES takes the copy back" "the refusal"
	assert_eq "$before" "$(sha256sum <"$planted")" "the planted manifest after the put"
	assert_eq 0 "$(ck_sql "SELECT durable_version FROM generations WHERE id = $next")" "checkpoint-2's durable version"
	local rc=0
	"$CKPTFS_ADMIN" wait "$CK_MNT" --timeout 2 >"$CK_TMP/out" 2>&1 || rc=$?
	assert_ne 0 "$rc" "wait's exit status with checkpoint-2's manifest refused"
	# the line's first step works while the put is refused
	"$CKPTFS_ADMIN" export "$CK_MNT" "id:$next" "$CK_TMP/kept" >"$CK_TMP/out" 2>&1 ||
		ck_fail "export id:$next, as the refusal says: $(cat "$CK_TMP/out")"
	cmp "$CK_REF/m2.bin" "$CK_TMP/kept/checkpoint-2/model.bin" || ck_fail "the exported checkpoint-2 differs"
	mv "$planted" "$CK_TMP/planted.ckm"
	ck_wait_durable 90
	cmp -s "$CK_TMP/planted.ckm" "$CK_BACKING/manifests/gen/$id.1.ckm" || ck_fail "checkpoint-1's manifest changed"
	cmp "$CK_REF/m2.bin" "$CK_MNT/run/checkpoint-2/model.bin" || ck_fail "checkpoint-2 differs"
	# an object with no readable gen line (cut short): the line says to move
	# it aside, and names no rebuild
	local third=$((next + 1))
	planted=$CK_BACKING/manifests/gen/$third.1.ckm
	head -c 9 "$CK_BACKING/manifests/gen/$id.1.ckm" >"$planted"
	mkdir -p "$CK_MNT/run/checkpoint-3"
	cp "$CK_REF/m1.bin" "$CK_MNT/run/checkpoint-3/model.bin"
	echo '{"step": 3}' >"$CK_MNT/run/checkpoint-3/trainer_state.json"
	ck_until_eq "$third" 100 "checkpoint-3 committed as generation $third" \
		ck_sql "SELECT id FROM generations WHERE name = 'checkpoint-3' AND state = 1"
	ck_until_eq 1 300 "the refusal of an unreadable object logged" \
		_bk_said "manifests/gen/$third.1.ckm holds an object with no readable gen line"
	line=$(grep "no readable gen line" "$CK_DLOG")
	assert_contains "$line" "move it out of manifests/gen (kept, not deleted), and the next try writes this save's manifest" "the refusal"
	[[ "$line" != *rebuild* ]] || ck_fail "the refusal of an unreadable object names a rebuild: $line"
	mv "$planted" "$CK_TMP/cut.ckm"
	ck_wait_durable 90
	cmp "$CK_REF/m1.bin" "$CK_MNT/run/checkpoint-3/model.bin" || ck_fail "checkpoint-3 differs"
	ck_umount
}

# A catalog rebuilt from BACKING describes that store only: the rebuild drops
# CACHE/backing-id (tools/admin_rebuild.c), and the next mount adopts the
# store's id. Before, a cache rebuilt from another store (BACKING's path
# reused by a new one) kept the old id and its mount was refused.
test_cache_rebuilt_from_another_store_mounts_it() {
	_bk_save
	_bk_other_store
	"$CKPTFS_ADMIN" rebuild --cache "$CK_CACHE" >"$CK_TMP/out" 2>&1 || ck_fail "rebuild from the other store failed: $(cat "$CK_TMP/out")"
	[ ! -e "$CK_CACHE/backing-id" ] || ck_fail "the rebuild kept the old store's id $(cat "$CK_CACHE/backing-id")"
	ck_mount
	cmp "$CK_REF/other.bin" "$CK_MNT/run/checkpoint-200/model.bin" || ck_fail "the rebuilt store's save differs"
	ck_umount
	assert_eq "$(sed -n 's/^id //p' "$CK_BACKING/ckptfs.store")" "$(cat "$CK_CACHE/backing-id")" "the id the cache adopted"
}

# Review 41 F1: a cache of an older ckptfs (catalog schema 5, no
# CACHE/backing-id) over its own BACKING mounts after an upgrade: the
# read-only look cannot read an older schema, so the marker and the id alone
# judge it (the manifest at the next mount); over an empty BACKING it is
# still refused. Before, every such cache was refused ("cannot read its
# catalog: Protocol error").
_bk_to_schema5() {
	ck_sql "DROP TRIGGER packs_dead; DROP TRIGGER chunks_pack_moved; DROP TRIGGER chunks_pack_gone;
		DROP INDEX chunks_by_pack; ALTER TABLE chunks DROP COLUMN pack_len;
		ALTER TABLE chunks DROP COLUMN pack_off; ALTER TABLE chunks DROP COLUMN pack; DROP TABLE packs;
		DROP INDEX inodes_writing; ALTER TABLE inodes DROP COLUMN writing;
		PRAGMA user_version = 5; UPDATE meta SET value = '5' WHERE key = 'schema_version'"
	rm -f "$CK_CACHE/backing-id"
}
test_cache_of_an_older_schema_mounts_over_its_backing_and_not_over_an_empty_one() {
	_bk_save
	_bk_to_schema5
	mv "$CK_BACKING" "$CK_TMP/backing.real"
	mkdir "$CK_BACKING"
	local rc=0
	ck_register_mount "$CK_MNT"
	timeout -k 5 30 "$CKPTFS_BIN" -f -o "$(ck_opts "cache=$CK_CACHE")" "$CK_BACKING" "$CK_MNT" >"$CK_TMP/out" 2>"$CK_TMP/err" </dev/null || rc=$?
	if ck_is_mounted "$CK_MNT"; then
		fusermount3 -u "$CK_MNT" 2>/dev/null || umount -l "$CK_MNT"
		ck_fail "an older cache mounted over an empty BACKING (exit $rc)"
	fi
	[ $rc != 0 ] || ck_fail "ckptfs exited 0, expected a refusal"
	assert_eq 1 "$(wc -l <"$CK_TMP/err")" "lines of the refusal: $(cat "$CK_TMP/err")"
	assert_contains "$(cat "$CK_TMP/err")" "holds a catalog of an older ckptfs (schema 5) that may hold generations durable" "the refusal"
	assert_eq 5 "$(ck_sql "PRAGMA user_version")" "the catalog's schema after the refusal"
	rm -r "$CK_BACKING"
	mv "$CK_TMP/backing.real" "$CK_BACKING"
	_bk_read_back
	assert_eq "$(sed -n 's/^id //p' "$CK_BACKING/ckptfs.store")" "$(cat "$CK_CACHE/backing-id")" "the id the upgraded cache adopted"
	assert_eq 7 "$(ck_sql "PRAGMA user_version")" "the catalog's schema after the mount"
}

ck_main "$@"
