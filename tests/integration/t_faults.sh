#!/bin/bash
# t_faults — BACKING misbehaving, through tests/faultfs (a fault-injecting
# passthrough mount used as BACKING): slow, failing with EIO or ENOSPC, or
# hanging. Saves go on into the cache (backpressure, never an error), uploads
# retry and resume by themselves, nothing is lost, keep-latest-k keeps the
# newest durable generation, reads that need a hung BACKING fail with EIO after
# backing_timeout (never wrong data), a kill -9 mid-upload loses nothing, and
# the mount-time health check refuses a BACKING that cannot rename, naming the
# step; a passing read error of BACKING is waited for, a damaged object is
# not (EIO at once), and verify tells the two apart. Also: ckptfs over
# nfs:// against a private nfs-ganesha.
. "$(dirname "$0")/lib.sh"

ck_timeout test_backing_hung_for_a_while_saves_go_on_and_uploads_resume 240
ck_timeout test_nfs_url_backing_round_trip_and_fresh_node 240
ck_slow test_nfs_url_backing_round_trip_and_fresh_node

_durable_count() { ck_sql "SELECT COUNT(*) FROM generations WHERE state = 1 AND durable_version = version"; }

_assert_steps_eq() { # N... — these steps read back byte-identical
	local n
	for n in "$@"; do
		cmp -s "$CK_REF/run/step-$n/model.pt" "$CK_MNT/run/step-$n/model.pt" ||
			ck_fail "run/step-$n/model.pt differs from what was saved"
	done
}

_fresh_node_reads() { # N... — a new cache over the same BACKING sees them
	local saved=$CK_CACHE
	CK_CACHE=$CK_TMP/cache.fresh.$RANDOM
	ck_mount
	_assert_steps_eq "$@"
	ck_umount
	CK_CACHE=$saved
}

test_backing_hung_for_a_while_saves_go_on_and_uploads_resume() {
	ck_faultfs_up
	ck_mount "upload_threads=2"
	ck_save_step 1 4
	ck_wait_durable
	ck_fault hang=1
	local t0 t1
	t0=$(date +%s)
	ck_save_step 2 16
	ck_save_step 3 16
	t1=$(date +%s)
	assert_lt $((t1 - t0)) 30 "seconds for two saves while BACKING hangs (they go to the cache)"
	_assert_steps_eq 1 2 3
	sleep 2
	assert_eq 1 "$(_durable_count)" "durable generations while BACKING hangs"
	[ "$(ck_sql 'SELECT COUNT(*) FROM uploads')" -gt 0 ] || ck_fail "nothing queued while BACKING hangs"
	ck_fault hang=0
	ck_wait_durable 120
	assert_eq 3 "$(_durable_count)" "durable generations once BACKING answers"
	ck_umount
	_fresh_node_reads 1 2 3
}

# A writer past dirty_max waits for uploads that a failing BACKING never
# finishes; with leave_queued, SIGTERM must still stop the daemon at once
# (the wait gives up: libfuse joins its threads before anything else stops),
# and what was committed before is there after a remount.
test_sigterm_while_a_writer_waits_for_a_failing_backing_exits_at_once() {
	ck_faultfs_up
	ck_mount "upload_threads=2,dirty_max=16M,leave_queued"
	ck_save_step 1 4
	ck_fault eio=write,fsync,rename
	head -c $((48 << 20)) /dev/urandom >"$CK_TMP/big"
	dd if="$CK_TMP/big" of="$CK_MNT/big" bs=1M 2>/dev/null &
	local wpid=$! t0 t1
	sleep 4
	kill -0 "$wpid" 2>/dev/null || ck_fail "48 MiB were written past dirty_max=16M while BACKING fails"
	t0=$(date +%s)
	ck_term
	t1=$(date +%s)
	wait "$wpid" 2>/dev/null || true # its write fails: the daemon is gone
	assert_lt $((t1 - t0)) 15 "seconds from SIGTERM to exit while a writer waited for BACKING"
	ck_fault
	ck_mount
	_assert_steps_eq 1
	ck_umount
}

test_backing_eio_and_enospc_uploads_retry_and_nothing_is_lost() {
	ck_faultfs_up
	ck_mount
	ck_fault eio=write,fsync,rename
	ck_save_step 1 6
	sleep 2
	assert_eq 0 "$(_durable_count)" "durable generations while every write to BACKING fails"
	grep -q "retrying with backoff" "$CK_DLOG" || ck_fail "no log line about retrying the failed upload"
	ck_fault enospc=write,create,mkdir
	ck_save_step 2 6
	sleep 2
	assert_eq 0 "$(_durable_count)" "durable generations while BACKING is full"
	[ "$(ck_sql 'SELECT MAX(attempts) FROM uploads')" -gt 0 ] || ck_fail "no failed attempt recorded"
	ck_fault
	ck_wait_durable 90
	assert_eq 2 "$(_durable_count)" "durable generations after the faults clear"
	grep -q "answers again" "$CK_DLOG" || ck_fail "no log line about BACKING answering again"
	_assert_steps_eq 1 2
	ck_umount
	_fresh_node_reads 1 2
}

test_keep_never_deletes_the_newest_durable_generation() {
	ck_faultfs_up
	ck_mount "keep=1"
	ck_save_step 1 2
	ck_wait_durable
	ck_fault eio=all
	ck_save_step 2 2
	ck_save_step 3 2
	sleep 1
	# step-1 is the only durable one: kept, though keep=1 and two are newer
	assert_eq "step-1 step-3" "$(ck_sql "SELECT group_concat(name, ' ') FROM (SELECT name FROM generations WHERE state = 1 ORDER BY step)")" "generations kept while BACKING fails"
	ck_fault
	ck_wait_durable 90
	local i=0
	while [ "$(ck_sql "SELECT group_concat(name, ' ') FROM generations WHERE state = 1")" != step-3 ]; do
		i=$((i + 1))
		[ $i -le 100 ] || ck_fail "keep=1 left $(ck_sql "SELECT group_concat(name, ' ') FROM generations WHERE state = 1") once step-3 was durable"
		sleep 0.1
	done
	ck_umount
	_fresh_node_reads 3
}

test_reads_that_need_a_hung_backing_fail_with_eio_after_the_timeout() {
	ck_faultfs_up
	ck_mount
	ck_save_step 1 6
	ck_umount
	# an empty cache: every read needs BACKING
	CK_CACHE=$CK_TMP/cache2
	ck_mount "backing_timeout=3"
	ck_fault hang=1
	local rc=0 t0 t1
	t0=$(date +%s)
	timeout 60 cat "$CK_MNT/run/step-1/model.pt" >"$CK_TMP/out" 2>"$CK_TMP/err" || rc=$?
	t1=$(date +%s)
	[ $rc != 124 ] || ck_fail "the read hung past 60 s"
	[ $rc != 0 ] || ck_fail "the read succeeded while BACKING hangs"
	assert_contains "$(cat "$CK_TMP/err")" "Input/output error" "error of the read"
	assert_le $((t1 - t0)) 20 "seconds before EIO with backing_timeout=3"
	[ "$(ck_size "$CK_TMP/out")" = 0 ] || cmp -s -n "$(ck_size "$CK_TMP/out")" "$CK_TMP/out" "$CK_REF/run/step-1/model.pt" ||
		ck_fail "bytes served before the error are not the file's"
	ck_fault hang=0
	_assert_steps_eq 1
	ck_umount
}

test_kill9_mid_upload_to_a_slow_backing_loses_nothing() {
	ck_faultfs_up
	ck_fault bw=4000000
	ck_mount "upload_threads=1"
	ck_save_step 1 12
	ck_save_step 2 12
	sleep 1
	[ "$(ck_sql 'SELECT COUNT(*) FROM uploads')" -gt 0 ] || ck_fail "the uploads finished before the kill; the test proves nothing"
	ck_kill9
	ck_fault
	ck_mount
	ck_wait_durable 90
	_assert_steps_eq 1 2
	ck_umount
	"$PY" "$CK_HELPERS/objcheck.py" "$CK_TMP/store" "$CK_CACHE" --allow-orphans >"$CK_TMP/obj" 2>&1 ||
		ck_fail "objcheck: $(head -n 5 "$CK_TMP/obj" | tr '\n' '|')"
	_fresh_node_reads 1 2
}

test_unmount_waits_for_uploads_to_a_slow_backing_with_progress() {
	ck_faultfs_up
	ck_fault bw=8000000
	ck_mount
	ck_save_step 1 24
	ck_umount
	assert_eq 0 "$(ck_sql 'SELECT COUNT(*) FROM uploads')" "uploads left after unmount"
	grep -q "waiting for .* uploads" "$CK_DERR" || ck_fail "no progress line on stderr during the unmount wait: $(tail -n 3 "$CK_DERR" | tr '\n' '|')"
}

test_leave_queued_unmounts_at_once_and_the_next_mount_resumes() {
	ck_faultfs_up
	ck_fault bw=2000000
	ck_mount "leave_queued"
	ck_save_step 1 12
	ck_umount
	[ "$(ck_sql 'SELECT COUNT(*) FROM uploads')" -gt 0 ] || ck_fail "leave_queued: nothing was left queued"
	ck_fault
	ck_mount
	grep -q "resuming" "$CK_DLOG" || ck_fail "the next mount did not say it resumes the queue"
	ck_wait_durable 60
	ck_umount
	_fresh_node_reads 1
}

test_health_check_refuses_a_backing_that_cannot_rename() {
	ck_faultfs_up
	ck_fault eio=rename
	local out rc=0
	out=$("$CKPTFS_BIN" -f -o "$(ck_opts "cache=$CK_CACHE")" "$CK_BACKING" "$CK_MNT" 2>&1) || rc=$?
	assert_ne 0 "$rc" "exit status"
	assert_eq 1 "$(echo "$out" | wc -l)" "lines of error output: $out"
	assert_contains "$out" "rename"
	assert_contains "$out" "$CK_BACKING"
	ck_is_mounted "$CK_MNT" && ck_fail "mounted over a BACKING that cannot rename"
	ck_fault eio=fsync
	rc=0
	out=$("$CKPTFS_BIN" -f -o "$(ck_opts "cache=$CK_CACHE")" "$CK_BACKING" "$CK_MNT" 2>&1) || rc=$?
	assert_ne 0 "$rc" "exit status"
	assert_contains "$out" "fsync"
	return 0
}

# _stat_wait KEY N — faultfs's CTLFILE.stats shows KEY at N or more (it is
# rewritten within ~100 ms of a change; bounded at 20 s).
_stat_wait() {
	local i=0
	until [ "$(sed -n "s/^$1=//p" "$CK_TMP/ctl.stats" 2>/dev/null)" -ge "$2" ] 2>/dev/null; do
		i=$((i + 1))
		[ $i -le 200 ] || ck_fail "faultfs's $1 stayed below $2: $(sed -n "s/^$1=//p" "$CK_TMP/ctl.stats")"
		sleep 0.1
	done
}

# A read error of BACKING that passes (EIO, as from a lost nfs:// connection,
# or a directory BACKING's read) is BACKING away, not damage (bkobj.h B1):
# a cold read waits for it within backing_timeout (cache.h C4) and returns
# the file's bytes. A damaged object is a verdict: its bytes fail with EIO
# at once (never retried), the rest of its file and the other files read
# right. ckptfs-admin verify calls the damaged copy corrupt, and copies that
# cannot be read unreadable (not damaged), exiting 1 for both; export --cache
# refuses the damaged copy, saying so.
test_passing_backing_read_errors_are_retried_damage_is_not() {
	ck_faultfs_up
	local d=run/step-1 ext n line end pre out rc=0
	mkdir -p "$CK_REF/$d"
	ck_rand "$CK_REF/$d/a" $((3 * MiB))
	ck_rand "$CK_REF/$d/b" $((5 * MiB))
	ck_mount
	mkdir -p "$CK_MNT/$d"
	cp "$CK_REF/$d/a" "$CK_REF/$d/b" "$CK_MNT/$d/"
	setfattr -n user.ckptfs.commit -v 1 "$CK_MNT/$d"
	ck_umount
	# the victim: b's middle chunk, damaged on BACKING (under faultfs)
	ext=$(ck_sql "SELECT lower(hex(e.hash)), e.off, e.len FROM extents e JOIN dirents d ON d.ino = e.ino WHERE d.name = 'b' ORDER BY e.off")
	n=$(echo "$ext" | grep -c .) || true
	[ "$n" -ge 2 ] || ck_fail "b has $n extents; the case needs a chunk with others after it"
	line=$(echo "$ext" | sed -n "$(((n + 1) / 2))p")
	IFS='|' read -r V_HASH V_OFF V_LEN <<<"$line"
	local obj=$CK_TMP/store/chunks/${V_HASH:0:2}/${V_HASH:2:2}/$V_HASH
	[ -f "$obj" ] || ck_fail "no object of chunk $V_HASH on BACKING ($obj)"
	"$PY" -c 'import sys
f = open(sys.argv[1], "r+b"); f.seek(72 + 1000); b = f.read(1)
f.seek(72 + 1000); f.write(bytes([b[0] ^ 0x5a])); f.close()' "$obj"
	# a new cache: every read needs BACKING
	CK_CACHE=$CK_TMP/cache2
	ck_mount "backing_timeout=60"
	# BACKING's reads fail until three have failed, then it answers again
	ck_fault eio=read
	ck_bg timeout 120 cat "$CK_MNT/$d/a" >"$CK_TMP/a.out" 2>"$CK_TMP/a.err"
	local cat_pid=$CK_BG_PID
	_stat_wait fault.read 3
	ck_fault
	ck_bg_wait "$cat_pid" 120 || rc=$?
	[ $rc = 0 ] || ck_fail "a cold read failed on a passing BACKING read error (status $rc): $(cat "$CK_TMP/a.err")"
	cmp -s "$CK_REF/$d/a" "$CK_TMP/a.out" || ck_fail "a read back differs from what was saved"
	grep -q "retrying for up to 60 s" "$CK_DLOG" || ck_fail "no log line about retrying the failed reads"
	assert_not_contains "$(cat "$CK_DLOG")" "is corrupt" "log after passing read errors"
	# the damaged chunk: EIO, no retry; the bytes before and after it are b's
	rc=0
	timeout 120 cat "$CK_MNT/$d/b" >"$CK_TMP/b.out" 2>"$CK_TMP/b.err" || rc=$?
	[ $rc != 0 ] || ck_fail "b read whole, its chunk $V_HASH damaged on BACKING"
	assert_contains "$(cat "$CK_TMP/b.err")" "Input/output error" "error reading b"
	pre=$(ck_size "$CK_TMP/b.out")
	assert_le "$pre" "$V_OFF" "bytes of b read before the error (the damaged chunk starts at $V_OFF)"
	cmp -s -n "$pre" "$CK_TMP/b.out" "$CK_REF/$d/b" || ck_fail "the bytes of b before the error differ"
	assert_contains "$(grep -F "$V_HASH" "$CK_DLOG")" "is corrupt" "log line of the damaged chunk"
	assert_not_contains "$(grep -F "$V_HASH" "$CK_DLOG")" "retrying" "log of the damaged chunk (a verdict is not retried)"
	end=$(((V_OFF + V_LEN + 4095) / 4096 * 4096)) # the first page wholly after it
	if [ "$end" -lt $((3 * MiB)) ]; then
		dd if="$CK_MNT/$d/b" of="$CK_TMP/b.tail" iflag=skip_bytes skip="$end" bs=1M status=none ||
			ck_fail "reading b after its damaged chunk (from $end) failed"
		tail -c +$((end + 1)) "$CK_REF/$d/b" | cmp -s - "$CK_TMP/b.tail" ||
			ck_fail "the bytes of b after its damaged chunk differ"
	fi
	cmp -s "$CK_REF/$d/a" "$CK_MNT/$d/a" || ck_fail "a differs after reading b"
	# verify: the damaged copy is corrupt; with BACKING's reads failing, unreadable
	out=$(timeout 120 "$CKPTFS_ADMIN" verify "$CK_MNT" 2>&1) && rc=0 || rc=$?
	assert_eq 1 "$rc" "exit status of verify with a damaged object (output: $(echo "$out" | tr '\n' '|'))"
	assert_contains "$out" "corrupt chunk $V_HASH in BACKING" "verify with a damaged object"
	assert_not_contains "$out" "unreadable chunk" "verify with a damaged object"
	assert_eq 0 "$(echo "$out" | awk '$1 == "chunks_unreadable" { print $2 }')" "chunks_unreadable with a damaged object"
	ck_fault eio=read
	out=$(timeout 120 "$CKPTFS_ADMIN" verify "$CK_MNT" 2>&1) && rc=0 || rc=$?
	ck_fault
	assert_eq 1 "$rc" "exit status of verify while BACKING's reads fail (output: $(echo "$out" | tr '\n' '|'))"
	assert_contains "$out" "unreadable chunk $V_HASH in BACKING (could not be read: Input/output error)" "verify while BACKING's reads fail"
	assert_not_contains "$out" "corrupt chunk" "verify while BACKING's reads fail"
	assert_eq 0 "$(echo "$out" | awk '$1 == "chunks_bad" { print $2 }')" "chunks_bad while BACKING's reads fail"
	[ "$(echo "$out" | awk '$1 == "chunks_unreadable" { print $2 }')" -ge 1 ] || ck_fail "no chunks_unreadable: $(echo "$out" | tr '\n' '|')"
	assert_contains "$out" "could not be read" "verify's closing line"
	ck_umount
	# export --cache (offline) reads BACKING's copy itself: damaged, it fails
	# naming the chunk and why, and leaves nothing behind
	mkdir "$CK_TMP/exp"
	out=$(timeout 120 "$CKPTFS_ADMIN" export --cache "$CK_CACHE" "$d" "$CK_TMP/exp" 2>&1) && rc=0 || rc=$?
	assert_eq 1 "$rc" "exit status of export --cache with a damaged object (output: $out)"
	assert_contains "$out" "chunk $V_HASH: BACKING's copy damaged: payload does not match its CRC-32C" "export --cache with a damaged object"
	assert_eq "" "$(ls -A "$CK_TMP/exp")" "what a failed export left"
}

test_nfs_url_backing_round_trip_and_fresh_node() {
	command -v ganesha.nfsd >/dev/null || ck_skip "nfs-ganesha is not installed"
	local url
	url=$("$CK_REPO/tests/nfs/ganesha.sh" start "$CK_TMP/nfs" 2>"$CK_TMP/ganesha.err") ||
		ck_fail "ganesha did not start: $(tail -n 3 "$CK_TMP/ganesha.err" | tr '\n' '|')"
	ck_at_exit '"$CK_REPO/tests/nfs/ganesha.sh" stop "$CK_TMP/nfs" >/dev/null 2>&1'
	CK_BACKING=$url
	ck_mount
	ck_save_step 1 20
	ck_save_step 2 3
	ck_wait_durable 120
	_assert_steps_eq 1 2
	ck_umount
	find "$CK_TMP/nfs/export/chunks" -type f | grep -q . || ck_fail "no chunk objects in the NFS export"
	_fresh_node_reads 1 2
	"$CK_REPO/tests/nfs/ganesha.sh" stop "$CK_TMP/nfs" >/dev/null
}

ck_main "$@"
