#!/bin/bash
# t_cachecopy — a COPY of a node's cache directory (cp -a after an unmount,
# as a baked image, rsync or a restored snapshot gives) mounted as another
# node must never be taken for the original's restart (meta/lease.h L10,
# review 49 F1): the cache identity L10 matches on is the local catalog's
# id, the host's name and the (st_dev, st_ino) of CACHE/lock, which a copy
# does not have. The live original stays live, its save is not held, and
# its writer's next write and close succeed.
. "$(dirname "$0")/mn.sh"

test_a_copied_cache_mounted_beside_the_live_original_settles_nothing() {
	mn_pg_start
	mn_mount A
	mkdir -p "$MN_MNT_A/run"
	mn_umount A
	cp -a "$CK_TMP/cache_A" "$CK_TMP/cache_C"
	mn_mount A
	mkdir "$MN_MNT_A/run/step-1"
	head -c 200000 /dev/urandom >"$CK_TMP/part.bin"
	# A's trainer has its shard open for writing (one descriptor, never
	# dup'd): half written now, the rest after C has mounted
	mkfifo "$CK_TMP/go"
	"$PY" -c 'import os, sys
data = open(sys.argv[2], "rb").read()
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, data[:100000])
open(sys.argv[3]).read()
try:
    os.write(fd, data[100000:])
    os.close(fd)
except OSError as e:
    print("write or close failed:", e)
    sys.exit(1)' "$MN_MNT_A/run/step-1/model.pt" "$CK_TMP/part.bin" "$CK_TMP/go" >"$CK_TMP/writer.out" 2>&1 &
	local w=$! a_id
	mn_until "SELECT count(*) > 0 FROM ns_writing w JOIN ckpt_nodes n ON n.id = w.node WHERE n.name = 'node-A' AND n.state = 'live'"
	a_id=$(mn_psql "SELECT id FROM ckpt_nodes WHERE name = 'node-A' AND state = 'live'")
	mn_mount C
	# C settled nothing: A is live, its writing row and its save as they were
	assert_eq "live false" "$(mn_psql "SELECT state || ' ' || settled FROM ckpt_nodes WHERE id = $a_id")" \
		"node A after the copy of its cache was mounted as C"
	assert_eq "0" "$(mn_psql "SELECT state FROM ns_generations WHERE name = 'step-1'")" "step-1 after C's mount"
	grep -q "was the previous daemon of this cache" "$MN_DLOG_C" &&
		ck_fail "C took A for a previous daemon of its cache: $(grep "previous daemon" "$MN_DLOG_C")"
	echo go >"$CK_TMP/go"
	local rc=0
	wait "$w" || rc=$?
	assert_eq 0 "$rc" "A's writer after C's mount ($(cat "$CK_TMP/writer.out"))"
	setfattr -n user.ckptfs.commit -v 1 "$MN_MNT_A/run/step-1" || ck_fail "commit xattr of step-1 on A"
	mn_poll "SELECT state || ' ' || rule FROM ns_generations WHERE name = 'step-1'" "1 explicit" 10 \
		"step-1 committed on A"
	assert_file_eq "$CK_TMP/part.bin" "$MN_MNT_C/run/step-1/model.pt"
	mn_umount C
	mn_umount A
}
ck_timeout test_a_copied_cache_mounted_beside_the_live_original_settles_nothing 180

# The same cache directory mounted again (no copy) is still the original's
# restart: its earlier node is settled at mount (t_fastrestart has the
# full case); here only that the identity is stable across a remount.
test_the_same_cache_remounted_has_the_same_identity() {
	mn_pg_start
	mn_mount A
	local id1 id2
	id1=$(mn_psql "SELECT cache_id FROM ckpt_nodes WHERE name = 'node-A' AND state = 'live'")
	mn_umount A
	mn_mount A
	id2=$(mn_psql "SELECT cache_id FROM ckpt_nodes WHERE name = 'node-A' AND state = 'live'")
	[ -n "$id1" ] || ck_fail "node A registered no cache identity"
	assert_eq "$id1" "$id2" "A's cache identity across a remount"
	assert_contains "$id1" "@$(hostname)" "A's cache identity"
	mn_umount A
}
ck_timeout test_the_same_cache_remounted_has_the_same_identity 120

ck_main "$@"
