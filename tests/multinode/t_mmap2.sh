#!/bin/bash
# t_mmap2 — a shard written through a shared mapping after its descriptor's
# close (numpy.memmap's w+: open O_RDWR, size, mmap, close, fill the map) is
# never committed without its bytes (fs/ns.h invariant 14, review 49 F3).
# close(2)'s flush does not park the writing row of an O_RDWR handle, so
# rank 0's completion signal waits for the mapping's write-back and RELEASE;
# a death of the rank's node before it holds the save (never commits zeros).
. "$(dirname "$0")/mn.sh"

# Rank 0's shard on A; on B a rank maps its shard O_RDWR, closes the fd and
# fills the map, then waits for a line on CK_TMP/go before it unmaps; writes
# "mapped" and then its unmap's outcome to CK_TMP/ack. Sets _MM_PID.
_mm_ranks() {
	mn_pg_start
	mn_mount A
	mn_mount B
	mkdir -p "$MN_MNT_A/run/step-1"
	mn_see B run/step-1 2
	ck_rand "$CK_TMP/s0" 300000
	ck_rand "$CK_TMP/s1" 300000
	cp "$CK_TMP/s0" "$MN_MNT_A/run/step-1/__0_0.distcp"
	mkfifo "$CK_TMP/go" "$CK_TMP/ack"
	"$PY" - "$CK_TMP" "$MN_MNT_B/run/step-1/__1_0.distcp" <<'PYEOF' &
import mmap, os, sys
tmp, path = sys.argv[1], sys.argv[2]
data = open(f"{tmp}/s1", "rb").read()
fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.ftruncate(fd, len(data))
mm = mmap.mmap(fd, len(data))
os.close(fd)
mm[:] = data
open(f"{tmp}/ack", "w").write("mapped\n")
open(f"{tmp}/go").read()
try:
    mm.close()
    r = "closed"
except OSError as e:
    r = f"error {e}"
open(f"{tmp}/ack", "w").write(r + "\n")
PYEOF
	_MM_PID=$!
	assert_eq mapped "$(cat "$CK_TMP/ack")" "rank 1's mapped write"
	assert_eq 1 "$(mn_psql "SELECT count(*) FROM ns_writing w JOIN ns_dirents d ON d.ino = w.ino WHERE d.name = '__1_0.distcp'")" \
		"B's writing rows of its mapped shard after its descriptor's close"
}

_mm_metadata() { # rank 0's last step on A
	echo meta >"$MN_MNT_A/run/step-1/.metadata.tmp"
	mv "$MN_MNT_A/run/step-1/.metadata.tmp" "$MN_MNT_A/run/step-1/.metadata"
}

_mm_state() { mn_psql "SELECT state || ' ' || version || ' ' || coalesce(nullif(rule, ''), '-') FROM ns_generations WHERE name = 'step-1' ORDER BY id DESC LIMIT 1"; }

test_a_mapped_shard_is_committed_with_its_bytes_after_its_unmap() {
	_mm_ranks
	_mm_metadata
	sleep 1
	assert_eq "0 1 -" "$(_mm_state)" "step-1 while rank 1's mapping is alive"
	echo go >"$CK_TMP/go"
	assert_eq closed "$(cat "$CK_TMP/ack")" "rank 1's unmap"
	wait "$_MM_PID"
	mn_poll "SELECT state || ' ' || version FROM ns_generations WHERE name = 'step-1'" "1 1" 20 "step-1 committed after the unmap"
	mn_mount C
	assert_file_eq "$CK_TMP/s1" "$MN_MNT_C/run/step-1/__1_0.distcp"
	assert_file_eq "$CK_TMP/s0" "$MN_MNT_C/run/step-1/__0_0.distcp"
	mn_umount C
	mn_umount B
	mn_umount A
}

test_a_mapped_shard_lost_with_its_node_holds_the_save() {
	_mm_ranks
	mn_kill9 B
	echo go >"$CK_TMP/go"
	cat "$CK_TMP/ack" >/dev/null
	wait "$_MM_PID" || true
	_mm_metadata
	mn_until "SELECT state = 'expired' AND settled FROM ckpt_nodes WHERE name = 'node-B' ORDER BY id DESC LIMIT 1"
	mn_poll "SELECT state || ' ' || rule FROM ns_generations WHERE name = 'step-1'" "4 node-lost" 20 "step-1 after B was swept"
	mn_umount A
}

ck_main "$@"
