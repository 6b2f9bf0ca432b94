#!/bin/bash
# t_openrm — POSIX across nodes (docs/MULTINODE.md "What POSIX semantics
# hold across nodes"): a file open on one node stays readable after another
# node removes it, and is released once the last node closes it, or the
# last node that had it open is lost (pgns.h N14); two nodes opening one new
# name with O_CREAT and no O_EXCL both succeed on the one file (ns.c,
# ns_create_existing).
. "$(dirname "$0")/mn.sh"

# _openrm_ino PATH_IN_ROOT: the inode number of a name in directory d.
_openrm_ino() {
	mn_psql "SELECT d.ino FROM ns_dirents d JOIN ns_dirents p ON p.ino = d.parent
		WHERE p.parent = 1 AND p.name = '$1' AND d.name = '$2'"
}

# _openrm_flush X: node X releases what it has queued (ckptfs-admin stats
# flushes the release queue, node.h invariant 4).
_openrm_flush() { "$CKPTFS_ADMIN" stats --cache "$CK_TMP/cache_$1" >/dev/null || ck_fail "stats on $1"; }

# _openrm_setup SIZE: nodes A and B, d/f.bin of SIZE random bytes written
# on A (its reference $CK_REF/f.bin) and seen on B; its inode in OPENRM_INO.
_openrm_setup() {
	mn_pg_start
	mn_mount A
	mn_mount B
	mkdir -p "$MN_MNT_A/d"
	ck_rand "$CK_REF/f.bin" "$1"
	cp "$CK_REF/f.bin" "$MN_MNT_A/d/f.bin"
	mn_see B d/f.bin 2
	OPENRM_INO=$(_openrm_ino d f.bin)
}

# _openrm_rm_on_b WHAT: once A's process made $CK_TMP/go, B removes d/f.bin
# and releases what it would (its kernel's FORGET of the inode comes before
# a later request of B's; the stats call flushes the release queue); the
# inode, which A has open (WHAT), must still be there.
_openrm_rm_on_b() {
	while [ ! -e "$CK_TMP/go" ]; do sleep 0.05; done
	rm "$MN_MNT_B/d/f.bin"
	ls "$MN_MNT_B/d" >/dev/null
	_openrm_flush B
	assert_eq 1 "$(mn_psql "SELECT count(*) FROM ns_inodes WHERE ino = $OPENRM_INO")" "the removed inode while A $1 it"
}

# A reads 1 MB of d/f.bin, B removes it (and has released whatever it
# would), A reads the rest: every byte as written. Then A closes: the data
# goes (the last node to close releases it).
test_a_file_open_on_a_stays_readable_after_b_removes_it() {
	_openrm_setup 6000000
	local ino=$OPENRM_INO
	/usr/bin/python3 -c '
import sys, time, os
f = open(sys.argv[1], "rb"); a = f.read(1000000)
open(sys.argv[2], "w").write("x")
while os.path.exists(sys.argv[2]): time.sleep(0.05)
rest = f.read(); open(sys.argv[3], "wb").write(a + rest)' \
		"$MN_MNT_A/d/f.bin" "$CK_TMP/go" "$CK_TMP/got.bin" &
	local r=$!
	_openrm_rm_on_b reads
	ck_log "after B's rm and release: inode $ino rows $(mn_psql "SELECT count(*) || ' nlink ' || COALESCE(max(nlink), -1) FROM ns_inodes WHERE ino = $ino"), extents $(mn_psql "SELECT count(*) FROM ns_extents WHERE ino = $ino"), open rows $(mn_psql "SELECT count(*) FROM ns_open WHERE ino = $ino")"
	rm "$CK_TMP/go"
	wait $r || ck_fail "A's read of the removed file failed"
	assert_file_eq "$CK_REF/f.bin" "$CK_TMP/got.bin"
	# A closed its last handle: the data goes, no ns_open row stays
	mn_poll "SELECT count(*) FROM ns_extents WHERE ino = $ino" 0 20 "the removed file's extents released after A's close"
	assert_eq 0 "$(mn_psql "SELECT count(*) FROM ns_open")" "ns_open rows after every handle closed"
	mn_umount A
	mn_umount B
}
ck_timeout test_a_file_open_on_a_stays_readable_after_b_removes_it 120

# The same with the reader's node lost (kill -9): its ns_open row holds
# nothing once its lease is gone, and the reclaim duty (on B) releases the
# inode and its row.
test_a_removed_file_open_on_a_lost_node_is_released() {
	_openrm_setup 3000000
	local ino=$OPENRM_INO
	/usr/bin/python3 -c '
import sys, time
f = open(sys.argv[1], "rb"); f.read(1000)
open(sys.argv[2], "w").write("x"); time.sleep(120)' "$MN_MNT_A/d/f.bin" "$CK_TMP/go" &
	local r=$!
	_openrm_rm_on_b "has open"
	assert_eq 1 "$(mn_psql "SELECT count(*) FROM ns_open WHERE ino = $ino")" "A's ns_open row while it reads"
	mn_kill9 A
	kill $r 2>/dev/null; wait $r 2>/dev/null || true
	mn_poll "SELECT count(*) FROM ns_inodes WHERE ino = $ino" 0 60 "the inode released after A was lost"
	assert_eq "0 0" "$(mn_psql "SELECT (SELECT count(*) FROM ns_extents WHERE ino = $ino) || ' ' || (SELECT count(*) FROM ns_open)")" "extents and ns_open rows left"
	mn_umount B
}
ck_timeout test_a_removed_file_open_on_a_lost_node_is_released 150

# A writes a file that B removes meanwhile: A's writes and close succeed
# (its ns_writing row keeps the inode), no ns_writing or ns_open row stays
# behind, and the reclaim duty releases the inode once A closed.
test_a_file_written_on_a_removed_on_b_leaves_no_row() {
	_openrm_setup 2000000
	local ino=$OPENRM_INO
	/usr/bin/python3 -c '
import sys, time, os
f = open(sys.argv[1], "r+b"); f.write(b"x" * 1000); f.flush()
open(sys.argv[2], "w").write("x")
while os.path.exists(sys.argv[2]): time.sleep(0.05)
f.seek(0, 2); f.write(b"y" * 1000); f.close()' "$MN_MNT_A/d/f.bin" "$CK_TMP/go" &
	local w=$!
	while [ ! -e "$CK_TMP/go" ]; do sleep 0.05; done
	assert_eq 1 "$(mn_psql "SELECT count(*) FROM ns_writing WHERE ino = $ino")" "A's ns_writing row"
	_openrm_rm_on_b writes
	rm "$CK_TMP/go"
	wait $w || ck_fail "A's writes or close of the removed file failed"
	mn_poll "SELECT count(*) FROM ns_inodes WHERE ino = $ino" 0 60 "the inode released after A's close"
	assert_eq "0 0 0" "$(mn_psql "SELECT (SELECT count(*) FROM ns_writing) || ' ' || (SELECT count(*) FROM ns_open) || ' ' || (SELECT count(*) FROM ns_extents WHERE ino = $ino)")" "ns_writing, ns_open rows and extents left"
	mn_umount A
	mn_umount B
}
ck_timeout test_a_file_written_on_a_removed_on_b_leaves_no_row 150

# _openrm_gate_begin DIR_INO: a psql session holds directory DIR_INO's row
# FOR UPDATE (a create there waits for it, pgns.h N9) until _openrm_gate_end.
_openrm_gate_begin() {
	local bin
	bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
	mkfifo "$CK_TMP/gate"
	runuser -u postgres -- "$bin/psql" -h "$MN_PGDIR" -p 5432 -U ckptfs -d ckptfs -qAt \
		<"$CK_TMP/gate" >"$CK_TMP/gate.out" 2>&1 &
	_OPENRM_GATE=$!
	exec 9>"$CK_TMP/gate"
	echo "BEGIN; SELECT ino FROM ns_inodes WHERE ino = $1 FOR UPDATE; SELECT 'locked';" >&9
	local i=0
	until grep -q locked "$CK_TMP/gate.out"; do
		i=$((i + 1))
		[ $i -le 300 ] || ck_fail "the gate's lock: $(cat "$CK_TMP/gate.out")"
		sleep 0.1
	done
}
_openrm_gate_end() {
	echo "COMMIT;" >&9
	exec 9>&-
	wait "$_OPENRM_GATE"
	rm -f "$CK_TMP/gate" "$CK_TMP/gate.out"
}

# A and B both look c/f up (a miss) and create it, the creates held at the
# directory's row until both wait there: one makes the file, the other's
# create finds the name taken. Without O_EXCL both must open the one file
# (POSIX), the second with O_TRUNC emptying it; with O_EXCL one fails EEXIST.
test_create_vs_create_without_excl() {
	mn_pg_start
	mn_mount A
	mn_mount B
	mkdir -p "$MN_MNT_A/c"
	mn_see B c 2
	local dir code
	dir=$(mn_psql "SELECT ino FROM ns_dirents WHERE parent = 1 AND name = 'c'")
	code='
import os, sys
path, flags, data, out = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
fl = os.O_CREAT | os.O_WRONLY | (os.O_EXCL if "x" in flags else 0) | (os.O_TRUNC if "t" in flags else 0)
try:
    fd = os.open(path, fl, 0o644)
    os.write(fd, data.encode()); os.close(fd); r = "ok"
except OSError as e:
    r = "errno %d" % e.errno
open(out, "w").write(r)'
	local round flags want
	for round in 1 2; do
		[ $round = 1 ] && flags=- || flags=x
		_openrm_gate_begin "$dir"
		/usr/bin/python3 -c "$code" "$MN_MNT_A/c/f$round" "$flags" "from-A-$round" "$CK_TMP/ra" &
		local pa=$!
		/usr/bin/python3 -c "$code" "$MN_MNT_B/c/f$round" "$flags" "from-B-$round" "$CK_TMP/rb" &
		local pb=$!
		# both creates wait at the directory's row lock
		mn_poll "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'
			AND query LIKE '%ckpt_txns WHERE client%'" 2 30 "two creates waiting at the gate"
		_openrm_gate_end
		wait $pa
		wait $pb
		ck_log "round $round ($flags): A $(cat "$CK_TMP/ra"), B $(cat "$CK_TMP/rb"); c/f$round on A:" \
			"$(cat "$MN_MNT_A/c/f$round")"
		if [ $round = 1 ]; then
			assert_eq "ok ok" "$(cat "$CK_TMP/ra") $(cat "$CK_TMP/rb")" "creates without O_EXCL"
			# each wrote its bytes at offset 0 of the one file
			want=$(cat "$MN_MNT_B/c/f1")
			case $want in from-A-1 | from-B-1) ;; *) ck_fail "c/f1 holds '$want'" ;; esac
			assert_eq "$want" "$(cat "$MN_MNT_A/c/f1")" "c/f1 on A and B"
		else
			want=$(printf '%s\n' "$(cat "$CK_TMP/ra")" "$(cat "$CK_TMP/rb")" | sort | tr '\n' ' ')
			assert_eq "errno 17 ok " "$want" "creates with O_EXCL"
		fi
	done
	assert_eq 2 "$(mn_psql "SELECT count(*) FROM ns_dirents WHERE parent = $dir")" "entries in c"
	mn_umount A
	mn_umount B
}
ck_timeout test_create_vs_create_without_excl 120

ck_main "$@"
