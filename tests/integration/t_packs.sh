#!/bin/bash
# t_packs — -o packs=on (fs/uppack.h, uploader.h B6): the small chunk objects
# of an upload batch go to BACKING as one pack file (packs/ab/<hex>.ckp), not a
# file each; every byte reads back from the packs with the cache's copies gone;
# files deleted take their packs with them (catalog_pack.h K4); a damaged
# member fails only its own file, named by pack and place, and verify names
# it; a pack whose put a crash interrupted is removed at the next mount (K5);
# the store's marker says format 5; packs=on is refused with meta=.
. "$(dirname "$0")/lib.sh"

ck_timeout test_packs_over_nfs_read_back_cold_and_after_a_rebuild 240
ck_slow test_packs_over_nfs_read_back_cold_and_after_a_rebuild

# _same NAME — CK_MNT/NAME holds exactly the files of CK_REF/NAME.
_same() {
	local out
	out=$(diff -r "$CK_REF/$1" "$CK_MNT/$1" 2>&1) || ck_fail "$1 differs from what was written: $(echo "$out" | head -n 4 | tr '\n' '|')"
}

_pack_files() { find "$CK_BACKING/packs" -name '*.ckp' -type f 2>/dev/null | wc -l; }
_loose_files() { find "$CK_BACKING/chunks" -type f 2>/dev/null | wc -l; }

# _evict_all — offline (daemon stopped): the cache's copies of every
# uploaded chunk are gone, as an eviction leaves them (cached = 0, no object
# file, no small.db row), so every read goes to BACKING.
_evict_all() {
	ck_sql "UPDATE chunks SET cached = 0 WHERE uploaded = 1"
	[ -f "$CK_CACHE/small.db" ] && sqlite3 -batch "$CK_CACHE/small.db" "DELETE FROM objects"
	find "$CK_CACHE/chunks" -type f -delete
}

test_small_files_go_to_packs_and_read_back_from_them_cold() {
	ck_mount packs=on
	ck_write_small "$CK_MNT/run" 300 1
	ck_wait_durable 120
	ck_umount
	local packed packs loose
	packed=$(ck_sql "SELECT count(*) FROM chunks WHERE pack IS NOT NULL")
	packs=$(_pack_files)
	loose=$(_loose_files)
	ck_log "300 small files: $packed chunks in $packs packs, $loose loose objects"
	[ "$packed" -ge 250 ] || ck_fail "only $packed of ~300 small chunks are in packs"
	[ "$packs" -ge 1 ] && [ "$packs" -le 60 ] || ck_fail "$packs pack files for 300 small files"
	[ "$loose" -le 40 ] || ck_fail "$loose loose objects on BACKING beside $packs packs"
	assert_eq "ckptfs store format 5" "$(head -n 1 "$CK_BACKING/ckptfs.store")" "the marker of a store with packs"
	ck_objcheck
	_evict_all
	ck_mount packs=on
	_same run
	ck_umount
	assert_eq 0 "$(ck_sql "SELECT count(*) FROM chunks WHERE cached = 0")" "chunks not cached again after the cold read"
	ck_objcheck
}

# A member that goes loose after all (a pack of one) is a hard link to the
# cache's object when BACKING can link, as a loose object with packs off is
# (uploader.c up_put_loose; before: a copy, twice the disk).
test_a_pack_of_one_goes_loose_as_a_hard_link() {
	ck_mount packs=on
	mkdir "$CK_MNT/one"
	head -c 131072 /dev/urandom > "$CK_MNT/one/f.bin"
	ck_wait_durable 120
	ck_umount
	local obj links
	obj=$(find "$CK_BACKING/chunks" -type f | head -n 1)
	[ -n "$obj" ] || ck_fail "no loose object on BACKING for a pack of one"
	assert_eq 0 "$(_pack_files)" "pack files for one small object"
	links=$(stat -c %h "$obj")
	assert_eq 2 "$links" "links of BACKING's object $obj (1: a copy beside the cache's)"
	ck_objcheck
}

test_deleted_files_take_their_packs_with_them() {
	ck_mount packs=on
	ck_write_small "$CK_MNT/a" 100 2
	ck_wait_durable 120
	[ "$(_pack_files)" -ge 1 ] || ck_fail "no pack on BACKING after 100 small files"
	rm -r "$CK_MNT/a"
	local i
	for i in $(seq 300); do
		[ "$(_pack_files)" = 0 ] && [ "$(ck_sql "SELECT count(*) FROM packs")" = 0 ] && break
		sleep 0.1
	done
	assert_eq 0 "$(_pack_files)" "pack files left on BACKING after every file in them was deleted"
	assert_eq 0 "$(ck_sql "SELECT count(*) FROM packs")" "packs rows left"
	ck_umount
	ck_objcheck
}

test_a_damaged_member_fails_only_its_file_and_verify_names_its_pack() {
	ck_mount packs=on
	ck_write_small "$CK_MNT/d" 60 3
	ck_wait_durable 120
	ck_umount
	# a packed file of more than 200 bytes whose chunk no other file names
	# (one chunk each: files are under the chunker's minimum)
	local row victim name off len
	row=$(ck_sql "SELECT d.name, lower(hex(c.pack)), c.pack_off, c.pack_len FROM dirents d JOIN extents e ON e.ino = d.ino JOIN chunks c ON c.hash = e.hash WHERE c.pack IS NOT NULL AND c.refcount = 1 AND c.plain_len > 200 ORDER BY d.name LIMIT 1")
	[ -n "$row" ] || ck_fail "no file of d/ has its chunk in a pack"
	IFS='|' read -r victim name off len <<<"$row"
	local path=$CK_BACKING/packs/${name:0:2}/$name.ckp
	# one byte of its payload flipped, in place
	"$PY" - "$path" $((off + len - 1)) <<'EOF'
import sys
p, at = sys.argv[1], int(sys.argv[2])
with open(p, "r+b") as f:
    f.seek(at)
    b = f.read(1)
    f.seek(at)
    f.write(bytes([b[0] ^ 0xFF]))
EOF
	_evict_all
	ck_mount packs=on
	local rc=0
	cat "$CK_MNT/d/$victim" >/dev/null 2>"$CK_TMP/cat.err" || rc=$?
	[ $rc != 0 ] || ck_fail "a read of $victim, whose member is damaged, succeeded"
	assert_contains "$(cat "$CK_TMP/cat.err")" "Input/output error" "the read's error"
	assert_contains "$(cat "$CK_DERR" "$CK_DLOG" 2>/dev/null)" "packs/${name:0:2}/$name.ckp at $off" "the daemon's line naming the pack and place"
	local f
	for f in $(ls "$CK_REF/d"); do
		[ "$f" = "$victim" ] && continue
		cmp -s "$CK_REF/d/$f" "$CK_MNT/d/$f" || ck_fail "$f, beside the damaged member, does not read back"
	done
	local out
	rc=0
	out=$(timeout 120 "$CKPTFS_ADMIN" verify "$CK_MNT" 2>&1) || rc=$?
	assert_eq 1 "$rc" "exit status of ckptfs-admin verify (output: $(echo "$out" | tr '\n' '|'))"
	assert_contains "$out" "packs/${name:0:2}/$name.ckp at $off" "verify naming the pack and place"
	ck_umount
}

# K5: a packs row still putting (a crash between the put and the
# transaction that names its members) and its file are removed at mount;
# nothing else is touched.
test_a_pack_whose_put_was_interrupted_is_removed_at_the_next_mount() {
	ck_mount packs=on
	ck_write_small "$CK_MNT/k" 40 4
	ck_wait_durable 120
	ck_umount
	local before
	before=$(_pack_files)
	local name
	name=$(head -c 64 /dev/urandom | sha256sum | cut -c1-64)
	mkdir -p "$CK_BACKING/packs/${name:0:2}"
	head -c 5000 /dev/urandom >"$CK_BACKING/packs/${name:0:2}/$name.ckp"
	ck_sql "INSERT INTO packs(name, size, members, state, created_ns) VALUES(x'$name', 5000, 3, 0, 1)"
	ck_mount packs=on
	[ ! -e "$CK_BACKING/packs/${name:0:2}/$name.ckp" ] || ck_fail "the interrupted pack's file is still on BACKING"
	assert_eq 0 "$(ck_sql "SELECT count(*) FROM packs WHERE state = 0")" "putting rows after the mount"
	assert_eq "$before" "$(_pack_files)" "pack files beside it"
	_same k
	ck_umount
	ck_objcheck
}

# rbpack.h: a fresh cache over the same BACKING (the catalog rebuilt from
# its manifests) finds the chunks the manifests name inside the packs, by
# the packs' own indexes, and reads every byte back; and `ckptfs-admin
# rebuild` (which checks every chunk) counts none of them missing.
test_a_new_cache_rebuilds_from_packs_and_reads_every_byte() {
	ck_mount packs=on
	mkdir -p "$CK_MNT/run/step-1"
	ck_write_small "$CK_MNT/run/step-1" 120 5
	setfattr -n user.ckptfs.commit -v 1 "$CK_MNT/run/step-1"
	mkdir -p "$CK_REF/run"
	mv "$CK_REF/step-1" "$CK_REF/run/step-1"
	ck_wait_durable 120
	ck_umount
	local packed
	packed=$(ck_sql "SELECT count(*) FROM chunks WHERE pack IS NOT NULL")
	[ "$packed" -ge 60 ] || ck_fail "only $packed chunks in packs"
	CK_CACHE=$CK_TMP/cache2
	ck_mount packs=on
	_same run
	ck_umount
	assert_eq "$packed" "$(ck_sql "SELECT count(*) FROM chunks WHERE pack IS NOT NULL")" "chunks the rebuilt catalog places in packs"
	ck_objcheck
	# the admin tool's rebuild, with its chunk check
	rm -f "$CK_CACHE"/catalog.db*
	local out rc=0
	out=$(timeout 120 "$CKPTFS_ADMIN" rebuild --cache "$CK_CACHE" "$CK_BACKING" 2>&1) || rc=$?
	assert_eq 0 "$rc" "exit status of ckptfs-admin rebuild (output: $(echo "$out" | tail -n 5 | tr '\n' '|'))"
	assert_eq "$packed" "$(ck_sql "SELECT count(*) FROM chunks WHERE pack IS NOT NULL")" "chunks placed in packs by ckptfs-admin rebuild"
	ck_mount packs=on
	_same run
	ck_umount
}

# uppack.h Q2: puts (of packs and loose objects alike) failing on BACKING
# now and then, then BACKING healthy: every file reaches BACKING, no pack is
# left putting or unknown, and a fresh cache reads every byte back.
test_failing_puts_are_put_again_and_leave_no_pack_behind() {
	ck_faultfs_up
	ck_mount packs=on
	ck_fault eio=rename fail_every=3
	ck_write_small "$CK_MNT/f" 150 6
	sleep 2
	ck_fault
	ck_wait_durable 120
	ck_umount
	local faults
	faults=$(sed -n 's/^fault.rename=//p' "$CK_TMP/ctl.stats")
	ck_log "renames failed on BACKING: ${faults:-?}; $(_pack_files) packs"
	[ "${faults:-0}" -gt 0 ] || ck_fail "no put failed: the case tested nothing"
	[ "$(_pack_files)" -ge 1 ] || ck_fail "no pack on BACKING"
	ck_objcheck
	CK_CACHE=$CK_TMP/cache2
	ck_mount packs=on
	_same f
	ck_umount
}

# uploader.h B6: the transaction that names a put pack's members (T2)
# failing — here a trigger planted in the catalog refuses it — ends no
# member row as a loose upload (which would call uploaded an object nobody
# put): they stay queued and dirty, and once T2 can commit the same pack is
# put again and named. Before: a failed batch ended its rows one by one.
test_a_failing_t2_marks_no_member_uploaded_and_the_pack_is_named_later() {
	ck_mount packs=on
	ck_sql "CREATE TRIGGER t2_refused BEFORE UPDATE OF state ON packs WHEN new.state = 1 BEGIN SELECT RAISE(ABORT, 'planted by t_packs'); END"
	ck_write_small "$CK_MNT/t" 40 7
	local i
	for i in $(seq 100); do
		[ "$(ck_sql "SELECT count(*) FROM uploads WHERE kind = 1 AND attempts > 0")" -gt 0 ] && break
		sleep 0.1
	done
	[ "$(ck_sql "SELECT count(*) FROM uploads WHERE kind = 1 AND attempts > 0")" -gt 0 ] ||
		ck_fail "no member row recorded a failed attempt in 10 s"
	local h missing=0
	for h in $(ck_sql "SELECT lower(hex(hash)) FROM chunks WHERE uploaded = 1 AND pack IS NULL"); do
		[ -f "$CK_BACKING/chunks/${h:0:2}/${h:2:2}/$h" ] || missing=$((missing + 1))
	done
	assert_eq 0 "$missing" "chunks called uploaded loose with no loose object on BACKING"
	assert_eq 0 "$(ck_sql "SELECT count(*) FROM chunks WHERE pack IS NOT NULL")" "chunks naming a pack whose T2 failed"
	ck_sql "DROP TRIGGER t2_refused"
	ck_wait_durable 120
	ck_umount
	[ "$(ck_sql "SELECT count(*) FROM chunks WHERE pack IS NOT NULL")" -ge 20 ] || ck_fail "the members were not named once T2 could commit"
	ck_objcheck
	_evict_all
	ck_mount packs=on
	_same t
	ck_umount
}

# Over nfs:// (the private ganesha): puts commit by themselves, batching is
# on for packs (uploader.h B6); members are read back by range (one LOOKUP
# and READs at the offset), cold, and by a fresh cache's rebuild.
test_packs_over_nfs_read_back_cold_and_after_a_rebuild() {
	command -v ganesha.nfsd >/dev/null || ck_skip "nfs-ganesha is not installed"
	local url
	url=$("$CK_REPO/tests/nfs/ganesha.sh" start "$CK_TMP/nfs" 2>"$CK_TMP/ganesha.err") ||
		ck_fail "ganesha did not start: $(tail -n 3 "$CK_TMP/ganesha.err" | tr '\n' '|')"
	ck_at_exit '"$CK_REPO/tests/nfs/ganesha.sh" stop "$CK_TMP/nfs" >/dev/null 2>&1'
	CK_BACKING=$url
	ck_mount packs=on
	ck_write_small "$CK_MNT/n" 80 8
	ck_wait_durable 120
	ck_umount
	local packs
	packs=$(find "$CK_TMP/nfs/export/packs" -name '*.ckp' -type f | wc -l)
	[ "$packs" -ge 1 ] || ck_fail "no pack in the NFS export"
	[ "$(ck_sql "SELECT count(*) FROM chunks WHERE pack IS NOT NULL")" -ge 40 ] || ck_fail "few chunks in packs over nfs://"
	_evict_all
	ck_mount packs=on
	_same n
	ck_umount
	CK_CACHE=$CK_TMP/cache2
	ck_mount packs=on
	_same n
	ck_umount
	"$CK_REPO/tests/nfs/ganesha.sh" stop "$CK_TMP/nfs" >/dev/null
}

# _gc_backing ARGS... — ckptfs-admin --json gc ARGS; prints BACKING's
# "objects orphans removed manifest_kept".
_gc_backing() {
	local out
	out=$("$CKPTFS_ADMIN" --json gc "$@" 2>&1) || ck_fail "ckptfs-admin gc $*: $out"
	echo "$out" >>"$CK_TMP/gc.json"
	echo "$out" | "$PY" -c 'import json, sys
b = json.load(sys.stdin)["backing"]
print(b["objects"], b["orphans"], b["removed"], b["manifest_kept"])'
}

# admin_query.h invariant 6: gc removes a pack no catalog row knows and none
# of whose members a manifest names (here: packs the uploader removed once
# their files were deleted, put back), and keeps one a manifest needs even
# when the catalog forgot it.
test_gc_removes_a_pack_no_one_knows_and_keeps_one_a_manifest_needs() {
	ck_mount packs=on
	ck_write_small "$CK_MNT/gone" 30 9
	ck_wait_durable 120
	mkdir -p "$CK_TMP/saved"
	cp -a "$CK_BACKING/packs" "$CK_TMP/saved/packs"
	local before
	before=$(_pack_files)
	[ "$before" -ge 1 ] || ck_fail "no pack for gone/"
	rm -r "$CK_MNT/gone"
	local i
	for i in $(seq 300); do
		[ "$(_pack_files)" = 0 ] && break
		sleep 0.1
	done
	assert_eq 0 "$(_pack_files)" "packs left after their files were deleted"
	ck_write_small "$CK_MNT/kept" 30 10
	ck_wait_durable 120
	"$CKPTFS_ADMIN" wait "$CK_MNT" >/dev/null 2>&1 || ck_fail "ckptfs-admin wait failed"
	local kept
	kept=$(_pack_files)
	cp -a "$CK_TMP/saved/packs/." "$CK_BACKING/packs/"
	local o
	o=$(_gc_backing "$CK_MNT")
	ck_log "gc dry run, BACKING objects orphans removed manifest_kept: $o"
	assert_eq "$before" "$(echo "$o" | cut -d' ' -f2)" "packs gc's dry run calls orphans ($(tr '\n' ' ' <"$CK_TMP/gc.json"))"
	assert_eq 0 "$(echo "$o" | cut -d' ' -f3)" "packs a dry run removed"
	o=$(_gc_backing --delete "$CK_MNT")
	assert_eq "$before" "$(echo "$o" | cut -d' ' -f3)" "packs gc --delete removed"
	assert_eq "$kept" "$(_pack_files)" "pack files left by gc --delete"
	ck_umount
	# the catalog forgets kept/'s packs (offline): the manifests still name
	# their members, so gc keeps them (a dry run: it takes no claim, so the
	# real catalog goes back afterwards)
	cp "$CK_CACHE/catalog.db" "$CK_TMP/catalog.db.real"
	ck_sql "DELETE FROM packs"
	o=$(_gc_backing --cache "$CK_CACHE")
	assert_eq 0 "$(echo "$o" | cut -d' ' -f2)" "packs a manifest needs that gc would remove: $o"
	[ "$(echo "$o" | cut -d' ' -f4)" -ge "$kept" ] || ck_fail "gc did not say it kept packs for the manifests: $o"
	cp "$CK_TMP/catalog.db.real" "$CK_CACHE/catalog.db"
	_evict_all
	ck_mount packs=on
	_same kept
	ck_umount
}

# Review 51 F1: every member of a pack damaged on BACKING, the cache's
# copies good: verify puts them again (upload.h U13), the uploader builds
# the same pack (the same name) and puts it over the damaged copy, which a
# live row of that name used to skip; after an eviction every file reads
# back. (One upload thread: the members land in one batch again.)
test_a_pack_whose_members_are_all_put_again_is_replaced() {
	ck_mount packs=on,upload_threads=1
	mkdir -p "$CK_MNT/r" "$CK_REF/r"
	"$PY" - "$CK_REF/r" <<'EOF'
import os, random, sys
rnd = random.Random(77)
for i in range(12):
    with open(os.path.join(sys.argv[1], "f%d" % i), "wb") as f:
        f.write(rnd.randbytes(5000 + i))
EOF
	cp "$CK_REF"/r/f* "$CK_MNT/r/"
	ck_wait_durable 120
	local name
	name=$(ck_sql "SELECT lower(hex(pack)) FROM chunks WHERE pack IS NOT NULL GROUP BY pack HAVING count(*) >= 2 ORDER BY count(*) LIMIT 1")
	[ -n "$name" ] || ck_fail "no pack of two members or more"
	local path=$CK_BACKING/packs/${name:0:2}/$name.ckp off len
	while IFS='|' read -r off len; do
		ck_xor_byte "$path" $((off + len - 1))
	done < <(ck_sql "SELECT pack_off, pack_len FROM chunks WHERE pack = x'$name'")
	local rc=0
	timeout 120 "$CKPTFS_ADMIN" verify "$CK_MNT" >"$CK_TMP/verify1" 2>&1 || rc=$?
	assert_eq 1 "$rc" "the first verify (damage found): $(tail -n 3 "$CK_TMP/verify1" | tr '\n' '|')"
	sleep 1
	ck_wait_durable 120
	rc=0
	timeout 120 "$CKPTFS_ADMIN" verify "$CK_MNT" >"$CK_TMP/verify2" 2>&1 || rc=$?
	assert_eq 0 "$rc" "verify after the put again: $(tail -n 3 "$CK_TMP/verify2" | tr '\n' '|')"
	ck_umount
	_evict_all
	ck_mount packs=on
	_same r
	ck_umount
	ck_objcheck
}

test_packs_on_a_shared_catalog_is_refused() {
	local rc=0
	"$CKPTFS_BIN" -f -o "$(ck_opts "cache=$CK_CACHE,packs=on,meta=postgresql://nobody@127.0.0.1:1/none")" "$CK_BACKING" "$CK_MNT" >"$CK_TMP/out" 2>"$CK_TMP/err" </dev/null || rc=$?
	[ $rc != 0 ] || ck_fail "packs=on with meta= was accepted"
	assert_eq 1 "$(wc -l <"$CK_TMP/err")" "lines of the refusal: $(cat "$CK_TMP/err")"
	assert_contains "$(cat "$CK_TMP/err")" "packs=on: not with -o meta=URL" "the refusal"
	ck_is_mounted "$CK_MNT" && ck_fail "mounted"
	ck_is_mounted "$CK_MNT" && ck_fail "mounted"
	return 0
}

ck_main "$@"
