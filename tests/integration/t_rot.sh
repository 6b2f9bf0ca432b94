#!/bin/bash
# t_rot — a chunk found rotten before or after its upload, with BACKING
# behind tests/faultfs (so the cache's copy and BACKING's are separate files).
# Before its upload (review 47 F3): the save naming it can never become
# durable; it is held (generation.h G12) with a reason naming the chunk and a
# file, keep-latest-k does not count it among its K (the older intact save
# stays), and `ckptfs-admin wait` names it at once (exit 11). After its
# upload (review 47 F2): BACKING's copy damaged while the cache holds a good
# one is put again (upload.h U10), so eviction never drops the only good copy.
. "$(dirname "$0")/lib.sh"

ck_timeout test_chunk_lost_before_upload_holds_its_save_and_keep_spares_the_older_one 240
ck_timeout test_backing_copy_damaged_is_put_again_from_the_cache 240
ck_timeout test_a_save_open_when_its_chunk_is_lost_is_held_at_its_commit 240

# _big_chunk NAME — the hash (hex) of the biggest chunk of $CK_MNT/NAME.
_big_chunk() {
	ck_sql "SELECT lower(hex(e.hash)) FROM extents e JOIN chunks c ON c.hash = e.hash
		WHERE e.ino = $(stat -c %i "$CK_MNT/$1") ORDER BY c.plain_len DESC LIMIT 1"
}

# _xor_byte FILE POS — flips bits of one byte of a read-only object in place.
_xor_byte() { chmod u+w "$1" && ck_xor_byte "$1" "$2"; }

_gen_state() { ck_sql "SELECT state FROM generations WHERE name = '$1' ORDER BY id DESC LIMIT 1"; }

test_chunk_lost_before_upload_holds_its_save_and_keep_spares_the_older_one() {
	ck_faultfs_up
	ck_mount "keep=2,backing_timeout=10"
	ck_save_step 1 2
	ck_wait_durable
	ck_fault eio=all
	ck_save_step 2 2
	local h obj
	h=$(_big_chunk run/step-2/model.pt)
	obj=$CK_CACHE/$(ck_obj_rel "$h")
	[ -f "$obj" ] || ck_fail "no cache object $obj for chunk $h"
	[ -e "$CK_TMP/store/$(ck_obj_rel "$h")" ] && ck_fail "chunk $h is on BACKING already"
	_xor_byte "$obj" 5000
	ck_fault ""
	# the uploader finds it corrupt before its upload: step-2 is held (G12)
	ck_until_eq 4 600 "state of step-2 (4 = held) once its chunk is found lost" _gen_state step-2
	local held
	held=$(ck_sql "SELECT held FROM generations WHERE name = 'step-2'")
	assert_contains "$held" "lost: chunk $h" "step-2's held reason"
	assert_contains "$held" "model.pt" "step-2's held reason"
	# wait names it at once as held (exit 11), not after its timeout
	local out rc=0 t0 t1
	t0=$(date +%s)
	out=$(timeout 60 "$CKPTFS_ADMIN" wait "$CK_MNT" --timeout 30 2>&1) || rc=$?
	t1=$(date +%s)
	assert_eq 11 "$rc" "exit of ckptfs-admin wait with step-2 held ($out)"
	assert_contains "$out" "step-2" "ckptfs-admin wait's output"
	assert_lt $((t1 - t0)) 15 "seconds ckptfs-admin wait took"
	# keep=2 does not count the held save: step-1, the older intact one, stays
	ck_save_step 3 2
	ck_until_eq 1 600 "step-3 durable" ck_sql \
		"SELECT COUNT(*) FROM generations WHERE name = 'step-3' AND state = 1 AND durable_version = version"
	sleep 1
	assert_eq 1 "$(_gen_state step-1)" "state of step-1 (1 = committed) after step-3 with keep=2"
	assert_eq 4 "$(_gen_state step-2)" "state of step-2 (4 = held) after step-3"
	cmp -s "$CK_REF/run/step-1/model.pt" "$CK_MNT/run/step-1/model.pt" ||
		ck_fail "run/step-1/model.pt differs from what was saved"
	cmp -s "$CK_REF/run/step-3/model.pt" "$CK_MNT/run/step-3/model.pt" ||
		ck_fail "run/step-3/model.pt differs from what was saved"
	grep -q "generation [0-9]* held: chunk ${h:0:16}" "$CK_DLOG" "$CK_DERR" ||
		ck_fail "no log line holding step-2 for chunk $h"
	ck_umount
}

test_backing_copy_damaged_is_put_again_from_the_cache() {
	ck_faultfs_up
	ck_mount "cache_size=64M"
	ck_save_step 1 4
	ck_wait_durable
	local h bobj out rc=0
	# the chunk of step-1 with the lowest hash: chunks never read have the
	# same last use, and the evictor takes those in hash order
	h=$(ck_sql "SELECT lower(hex(hash)) FROM extents WHERE ino = $(stat -c %i "$CK_MNT/run/step-1/model.pt")
		ORDER BY hash LIMIT 1")
	bobj=$CK_TMP/store/$(ck_obj_rel "$h")
	[ -f "$bobj" ] || ck_fail "no object $bobj on BACKING for chunk $h"
	_xor_byte "$bobj" 3000
	out=$("$CKPTFS_ADMIN" verify "$CK_MNT" 2>&1) || rc=$?
	assert_eq 1 "$rc" "exit of verify with BACKING's copy damaged ($out)"
	assert_contains "$out" "backing_copies_put_again 1" "verify's summary"
	assert_contains "$out" "chunk $h: BACKING's copy is bad and the cache's is good: queued" \
		"verify's line for the chunk"
	ck_wait_durable
	assert_eq "1|1" "$(ck_sql "SELECT cached, uploaded FROM chunks WHERE hash = x'$h'")" \
		"cached|uploaded of chunk $h once put again"
	grep -q "chunk $h: BACKING's copy is damaged and the cache's is good" "$CK_DLOG" ||
		ck_fail "no daemon log line for putting chunk $h again"
	out=$("$CKPTFS_ADMIN" verify "$CK_MNT" 2>&1) || ck_fail "verify after the put again: $out"
	# force its eviction: saves of 8 MiB through a 64 MiB cache until it goes
	local n=1
	while [ "$(ck_sql "SELECT cached FROM chunks WHERE hash = x'$h'")" != 0 ]; do
		n=$((n + 1))
		[ $n -le 60 ] || ck_fail "chunk $h still in the cache after $((n - 2)) saves of 8 MiB"
		ck_save_step "$n" 8
		ck_wait_durable 120
	done
	ck_log "chunk $h evicted after $((n - 1)) saves of 8 MiB"
	cmp -s "$CK_REF/run/step-1/model.pt" "$CK_MNT/run/step-1/model.pt" ||
		ck_fail "run/step-1/model.pt differs from what was saved after its chunk was evicted"
	ck_umount
}

# generation.h G13: a save still OPEN when the uploader finds a chunk of it
# lost is never committed naming it: its commit (the commit xattr, rule
# explicit) is refused and the save held (rule lost-chunk, the chunk and the
# file named); `wait` names it (exit 11); only the admin's commit decides.
test_a_save_open_when_its_chunk_is_lost_is_held_at_its_commit() {
	ck_faultfs_up
	ck_mount "backing_timeout=10"
	ck_save_step 1 1
	ck_wait_durable
	ck_fault eio=all
	mkdir -p "$CK_MNT/run/step-2" "$CK_REF/run/step-2"
	head -c $((2 * MiB)) /dev/urandom >"$CK_REF/run/step-2/model.pt"
	cp "$CK_REF/run/step-2/model.pt" "$CK_MNT/run/step-2/model.pt"
	assert_eq 0 "$(_gen_state step-2)" "state of step-2 (0 = open) before its commit"
	local h obj
	h=$(_big_chunk run/step-2/model.pt)
	obj=$CK_CACHE/$(ck_obj_rel "$h")
	[ -f "$obj" ] || ck_fail "no cache object $obj for chunk $h"
	chmod u+w "$obj"
	ck_xor_byte "$obj" 5000
	ck_fault ""
	ck_until_eq 1 600 "upload row of chunk $h ended lost" ck_sql \
		"SELECT count(*) FROM uploads WHERE hash = x'$h' AND error LIKE 'lost:%'"
	assert_eq 0 "$(_gen_state step-2)" "state of step-2 (0 = open) once its chunk is lost"
	setfattr -n user.ckptfs.commit -v 1 "$CK_MNT/run/step-2" || ck_fail "commit xattr of step-2"
	ck_until_eq 4 100 "state of step-2 (4 = held) after its commit xattr" _gen_state step-2
	assert_eq "lost-chunk" "$(ck_sql "SELECT rule FROM generations WHERE name = 'step-2'")" \
		"step-2's rule"
	local held
	held=$(ck_sql "SELECT held FROM generations WHERE name = 'step-2'")
	assert_contains "$held" "lost: chunk $h" "step-2's held reason"
	assert_contains "$held" "model.pt" "step-2's held reason"
	local out rc=0
	out=$(timeout 60 "$CKPTFS_ADMIN" wait "$CK_MNT" --timeout 30 2>&1) || rc=$?
	assert_eq 11 "$rc" "exit of ckptfs-admin wait with step-2 held ($out)"
	assert_contains "$out" "step-2" "ckptfs-admin wait's output"
	# the admin's decision takes it as it is
	out=$("$CKPTFS_ADMIN" commit "$CK_MNT" run/step-2 2>&1) || ck_fail "ckptfs-admin commit: $out"
	assert_eq 1 "$(_gen_state step-2)" "state of step-2 (1 = committed) after the admin's commit"
	ck_umount
}

ck_main "$@"
