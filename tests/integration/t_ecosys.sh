#!/bin/bash
# t_ecosys — ckptfs meets the conventions of rclone mount, sshfs and JuiceFS
# (issue 19): a stop does not leave a user believing data is safe when it is
# not. BACKING is slowed by tests/faultfs (bw=…, hang=1) so uploads are still
# queued when the stop comes; every case checks the outcome in the catalog
# (upload queue empty, generation durable) and on BACKING, not only the
# messages.
. "$(dirname "$0")/lib.sh"

E_NO_DAEMON=4 E_BUSY=8 E_TIMEOUT=9

# Waits until the daemon, unmounted, drains (CACHE/lock says "PID draining").
_wait_draining() {
	local i=0
	until grep -q ' draining' "$CK_CACHE/lock" 2>/dev/null; do
		i=$((i + 1))
		[ $i -le 200 ] || ck_fail "the daemon did not start draining within 10 s: $(cat "$CK_CACHE/lock")"
		sleep 0.05
	done
}

# kill -9 the daemon but leave its dead mount in place (a stale mount).
ck_kill9_keep_mount() {
	kill -9 "$CK_PID"
	_ck_wait_daemon "$CK_PID" 20 || ck_fail "daemon survived kill -9"
	CK_PID=
	# its threads leave after the leader; the mount is stale once the last has
	local i=0
	while stat "$CK_MNT" >/dev/null 2>&1; do
		i=$((i + 1))
		[ $i -le 100 ] || ck_fail "$CK_MNT still answers 5 s after kill -9"
		sleep 0.05
	done
}

_queued() { ck_sql "SELECT count(*) FROM uploads"; }
_durable_count() { ck_sql "SELECT count(*) FROM generations WHERE state = 1 AND durable_version = version"; }

# adm ARGS... — ckptfs-admin; stdout/stderr in $CK_TMP/out, err; prints the status
adm() {
	local rc=0
	"$CKPTFS_ADMIN" "$@" >"$CK_TMP/out" 2>"$CK_TMP/err" </dev/null || rc=$?
	echo "$rc"
}

# A second daemon on the same cache must be refused; its stderr in $CK_TMP/second.err.
_second_mount_refused() {
	local rc=0
	timeout 30 "$CKPTFS_BIN" -f -o "$(ck_opts "cache=$CK_CACHE")" "$CK_BACKING" "$CK_MNT" \
		>"$CK_TMP/second.err" 2>&1 </dev/null || rc=$?
	[ "$rc" != 0 ] || ck_fail "a second ckptfs on the cache of a draining one started"
	ck_is_mounted "$CK_MNT" && { fusermount3 -u "$CK_MNT"; ck_fail "a second ckptfs mounted $CK_MNT"; }
	return 0
}

test_umount_waits_for_a_slow_backing_then_for_the_daemon() {
	ck_faultfs_up
	ck_mount "upload_threads=1"
	ck_fault "bw=3000000" # 3 MB/s: 12 MiB take about 4 s
	ck_save_step 1 6
	ck_save_step 2 6
	local queued_before
	queued_before=$(_queued)
	[ "$queued_before" -gt 0 ] || ck_skip "the uploads finished before the stop: BACKING not slow enough here"
	local rc
	rc=$(adm umount "$CK_MNT")
	[ "$rc" = 0 ] || ck_fail "umount: exit $rc; stderr: $(tr '\n' '|' <"$CK_TMP/err")"
	# when it returns: unmounted, the daemon gone, nothing queued, both steps durable
	ck_is_mounted "$CK_MNT" && ck_fail "still mounted after ckptfs-admin umount"
	_ck_pid_alive "$CK_PID" && ck_fail "the daemon (pid $CK_PID) still runs after ckptfs-admin umount"
	ck_daemon_exit "ckptfs-admin umount"
	assert_eq 0 "$(_queued)" "uploads still queued after ckptfs-admin umount"
	assert_eq 2 "$(_durable_count)" "durable generations after ckptfs-admin umount"
	# progress: plain lines (stderr is no terminal) with bytes, rate and ETA
	grep -q 'left to upload' "$CK_TMP/err" || ck_fail "no progress line: $(tr '\n' '|' <"$CK_TMP/err")"
	grep -qE '[0-9.]+ ?[KMG]?i?B/s, ETA' "$CK_TMP/err" || ck_fail "no rate and ETA: $(tr '\n' '|' <"$CK_TMP/err")"
	grep -q "unmounted; every upload is on BACKING" "$CK_TMP/out" || ck_fail "no final line: $(cat "$CK_TMP/out")"
	ck_fault
	# a fresh node over the same BACKING reads the bytes back
	CK_CACHE=$CK_TMP/cache.fresh
	ck_mount
	cmp "$CK_REF/run/step-1/model.pt" "$CK_MNT/run/step-1/model.pt" || ck_fail "step-1 differs on a fresh node"
	cmp "$CK_REF/run/step-2/model.pt" "$CK_MNT/run/step-2/model.pt" || ck_fail "step-2 differs on a fresh node"
	ck_umount
}

test_umount_draws_a_progress_line_on_a_terminal() {
	command -v script >/dev/null || ck_skip "script(1) not installed"
	ck_faultfs_up
	ck_mount "upload_threads=1"
	ck_fault "bw=2000000"
	ck_save_step 1 6
	[ "$(_queued)" -gt 0 ] || ck_skip "the uploads finished before the stop"
	script -q -e -c "'$CKPTFS_ADMIN' umount '$CK_MNT'" "$CK_TMP/ts" >/dev/null 2>&1 </dev/null ||
		ck_fail "umount under script(1) failed: $(tail -c 400 "$CK_TMP/ts" | tr '\r' '|')"
	grep -q $'\r.*left to upload' "$CK_TMP/ts" || ck_fail "no rewritten progress line on a terminal: $(tail -c 400 "$CK_TMP/ts" | tr '\r' '|')"
	grep -q "unmounted; every upload is on BACKING" "$CK_TMP/ts" || ck_fail "no final line: $(tail -c 300 "$CK_TMP/ts")"
	ck_daemon_exit "ckptfs-admin umount under a terminal"
	assert_eq 0 "$(_queued)" "uploads queued"
}

# wait's bar counts bytes (the stored bytes of the waited generations'
# chunks on BACKING), so one big save moves it while it uploads.
test_wait_progress_counts_bytes_on_a_terminal() {
	command -v script >/dev/null || ck_skip "script(1) not installed"
	ck_faultfs_up
	ck_mount "upload_threads=1"
	ck_fault "bw=2000000"
	ck_save_step 1 6
	[ "$(_queued)" -gt 0 ] || ck_skip "the uploads finished before the wait"
	script -q -e -c "'$CKPTFS_ADMIN' wait '$CK_MNT' --timeout 60" "$CK_TMP/ts" >/dev/null 2>&1 </dev/null ||
		ck_fail "wait under script(1) failed: $(tail -c 400 "$CK_TMP/ts" | tr '\r' '|')"
	grep -qE $'\r.*wait.*[0-9.]+ ?[KM]i?B / [0-9.]+ ?MiB' "$CK_TMP/ts" ||
		ck_fail "no byte counts in wait's progress: $(tail -c 400 "$CK_TMP/ts" | tr '\r' '|')"
	grep -q "1 generation durable on BACKING" "$CK_TMP/ts" || ck_fail "no final line: $(tail -c 300 "$CK_TMP/ts")"
	ck_umount
}

test_remount_while_draining_says_so_with_bytes_left() {
	ck_faultfs_up
	ck_mount "upload_threads=1"
	ck_fault "bw=1000000"
	ck_save_step 1 8
	[ "$(_queued)" -gt 0 ] || ck_skip "the uploads finished before the stop"
	fusermount3 -u "$CK_MNT" # returns at once; the daemon drains in the background
	_ck_pid_alive "$CK_PID" || ck_skip "the daemon drained before the remount"
	_second_mount_refused
	grep -q "still uploading to BACKING" "$CK_TMP/second.err" ||
		ck_fail "the refusal does not say the other daemon is draining: $(cat "$CK_TMP/second.err")"
	grep -qE '[0-9]+ bytes' "$CK_TMP/second.err" ||
		ck_fail "the refusal does not say how much is left: $(cat "$CK_TMP/second.err")"
	assert_eq 1 "$(wc -l <"$CK_TMP/second.err")" "lines of the refusal"
	# ckptfs-admin umount --cache waits for that daemon
	ck_fault "bw=20000000"
	local rc
	rc=$(adm umount --cache "$CK_CACHE")
	[ "$rc" = 0 ] || ck_fail "umount --cache of a draining daemon: exit $rc; $(tr '\n' '|' <"$CK_TMP/err")"
	_ck_pid_alive "$CK_PID" && ck_fail "the daemon still runs after umount --cache returned"
	ck_daemon_exit "fusermount3 -u and its drain"
	grep -q draining "$CK_CACHE/lock" && ck_fail "the lock file still says draining after the daemon exited: $(cat "$CK_CACHE/lock")"
	assert_eq 0 "$(_queued)" "uploads queued after the drain"
	assert_eq 1 "$(_durable_count)" "durable generations after the drain"
	# now the remount works
	ck_mount
	cmp "$CK_REF/run/step-1/model.pt" "$CK_MNT/run/step-1/model.pt" || ck_fail "step-1 differs after the remount"
	ck_umount
}

test_sigterm_while_draining_lets_the_drain_finish() {
	ck_faultfs_up
	ck_mount "upload_threads=1"
	ck_fault "bw=1000000"
	ck_save_step 1 6
	[ "$(_queued)" -gt 0 ] || ck_skip "the uploads finished before the stop"
	fusermount3 -u "$CK_MNT"
	_ck_pid_alive "$CK_PID" || ck_skip "the daemon drained before the signal"
	_wait_draining
	kill -TERM "$CK_PID"
	sleep 0.5
	_ck_pid_alive "$CK_PID" || ck_fail "one SIGTERM during the drain ended the daemon with $(_queued) uploads queued"
	ck_fault "bw=20000000"
	ck_daemon_exit "a SIGTERM during the drain"
	assert_eq 0 "$(_queued)" "uploads queued after the drain"
	assert_eq 1 "$(_durable_count)" "durable generations after the drain"
	grep -q "stop signal while uploads to BACKING drain" "$CK_DERR" "$CK_DLOG" ||
		ck_fail "the daemon did not say why it went on after SIGTERM"
}

test_second_sigterm_while_draining_exits_and_keeps_the_queue() {
	ck_faultfs_up
	ck_mount "upload_threads=1"
	ck_fault "hang=1"
	ck_save_step 1 2
	fusermount3 -u "$CK_MNT"
	_wait_draining
	kill -TERM "$CK_PID"
	sleep 0.3
	_ck_pid_alive "$CK_PID" || ck_fail "the first SIGTERM ended the draining daemon"
	kill -TERM "$CK_PID"
	sleep 0.3
	# its threads in a request to the hung faultfs leave only when it answers
	ck_fault
	_ck_wait_daemon "$CK_PID" 20 || ck_fail "a second SIGTERM did not end the draining daemon"
	CK_PID=
	[ "$(_queued)" -gt 0 ] || ck_fail "the queue is empty although BACKING hung"
	# nothing lost: the next mount resumes and uploads it
	ck_mount
	"$CKPTFS_ADMIN" wait "$CK_MNT" --timeout 60 || ck_fail "the resumed uploads did not make step-1 durable"
	cmp "$CK_REF/run/step-1/model.pt" "$CK_MNT/run/step-1/model.pt" || ck_fail "step-1 differs"
	ck_umount
}

test_umount_timeout_before_the_drain_changes_nothing() {
	ck_faultfs_up
	ck_mount "upload_threads=1"
	ck_fault "hang=1"
	ck_save_step 1 2
	local rc
	rc=$(adm umount "$CK_MNT" --timeout 1)
	assert_eq "$E_TIMEOUT" "$rc" "exit of umount --timeout 1 with BACKING hung"
	grep -q "still mounted, nothing changed" "$CK_TMP/err" || ck_fail "timeout message: $(tr '\n' '|' <"$CK_TMP/err")"
	ck_is_mounted "$CK_MNT" || ck_fail "umount --timeout unmounted although it timed out"
	cmp "$CK_REF/run/step-1/model.pt" "$CK_MNT/run/step-1/model.pt" || ck_fail "step-1 differs"
	ck_fault
	rc=$(adm umount "$CK_MNT" --timeout 60)
	[ "$rc" = 0 ] || ck_fail "umount after BACKING came back: exit $rc; $(tr '\n' '|' <"$CK_TMP/err")"
	ck_daemon_exit "ckptfs-admin umount"
	assert_eq 1 "$(_durable_count)" "durable generations"
}

# Review 35 F2 (fs/uploader.c T6, meta/upload.h U10): a file outside
# generations whose chunks are all on BACKING (dedup) is described there only
# by the tree manifest, which the drain puts last. BACKING refuses renames,
# so that put fails: umount said "every upload is on BACKING" (exit 0) and a
# new node with an empty cache had no last.ckpt. Now it exits 1 naming the
# tree manifest, the daemon logs it, and the next mount of the cache, with
# BACKING well again, writes it: a fresh cache then reads last.ckpt back.
test_umount_says_so_when_the_tree_manifest_could_not_be_put() {
	ck_faultfs_up
	ck_mount
	ck_save_step 1 2
	ck_wait_durable
	local i=0 # the idle round writes the tree manifest of run/ (no chunk)
	until [ -n "$(ls "$CK_TMP/store/manifests/tree" 2>/dev/null)" ]; do
		i=$((i + 1))
		[ $i -le 200 ] || ck_fail "no tree manifest on BACKING after 20 s"
		sleep 0.1
	done
	ck_fault "eio=rename"
	cp "$CK_REF/run/step-1/model.pt" "$CK_MNT/run/last.ckpt" # same bytes: its chunks are on BACKING
	assert_eq 0 "$(_queued)" "uploads queued for last.ckpt (its chunks are on BACKING already)"
	local rc
	rc=$(adm umount "$CK_MNT")
	assert_eq 1 "$rc" "exit of umount when the tree manifest cannot be put; stdout: $(cat "$CK_TMP/out")"
	grep -q "every upload is on BACKING" "$CK_TMP/out" && ck_fail "umount said every upload is on BACKING: $(cat "$CK_TMP/out")"
	grep -q "without the tree manifest on BACKING" "$CK_TMP/err" || ck_fail "umount's message does not name the tree manifest: $(tr '\n' '|' <"$CK_TMP/err")"
	ck_daemon_exit "ckptfs-admin umount"
	ck_is_mounted "$CK_MNT" && ck_fail "still mounted after ckptfs-admin umount"
	grep -q "the tree manifest .* is not on BACKING" "$CK_DERR" "$CK_DLOG" 2>/dev/null ||
		ck_fail "the daemon's log does not name the tree manifest: $(tail -n 5 "$CK_DERR" | tr '\n' '|')"
	ck_fault
	# a rebuild now would drop last.ckpt (admin_rebuild.c R1): refused, nothing changed
	local before
	# (catalog.db-shm left out: SQLite's shared-memory index, which any
	# reader of a WAL catalog writes — the refusal's read-only look too;
	# ASan run at 141e53b: its mtime crossed a minute)
	before=$(ls -l "$CK_CACHE" | grep -v ' catalog\.db-shm$')
	rc=$(adm rebuild --cache "$CK_CACHE")
	assert_eq "$E_BUSY" "$rc" "exit of rebuild over a catalog whose tree manifest was not put"
	grep -q "files outside generations not described on BACKING" "$CK_TMP/err" ||
		ck_fail "rebuild's refusal does not name the files outside generations: $(tr '\n' '|' <"$CK_TMP/err")"
	assert_eq "$before" "$(ls -l "$CK_CACHE" | grep -v ' catalog\.db-shm$')" "the cache after the refused rebuild"
	# the same cache again: its first idle round writes the tree, umount is clean
	ck_mount
	rc=$(adm umount "$CK_MNT")
	[ "$rc" = 0 ] || ck_fail "umount with BACKING well again: exit $rc; $(tr '\n' '|' <"$CK_TMP/err")"
	grep -q "unmounted; every upload is on BACKING" "$CK_TMP/out" || ck_fail "no final line: $(cat "$CK_TMP/out")"
	ck_daemon_exit "ckptfs-admin umount"
	# a new node: same BACKING, an empty cache
	CK_CACHE=$CK_TMP/cache.fresh
	ck_mount
	cmp "$CK_REF/run/step-1/model.pt" "$CK_MNT/run/last.ckpt" || ck_fail "last.ckpt differs or is missing on a fresh node"
	cmp "$CK_REF/run/step-1/model.pt" "$CK_MNT/run/step-1/model.pt" || ck_fail "step-1 differs on a fresh node"
	ck_umount
}

# Review 36 F3a (tools/admin_umount.c 5, meta/upload.h U11): umount said
# "every upload is on BACKING" (exit 0) from an empty queue and no U10 mark.
# A daemon that exits without its drain (-o leave_queued here; or one killed
# during it) writes no mark, and a tree changed without new chunks (a copy of
# bytes already on BACKING, a renamed `latest`) queues no row, so the tree
# manifest on BACKING went stale unseen. BACKING refuses the tree manifest
# (manifests/tree/ immutable) so that no idle round writes it before the
# stop. On main umount exits 0 here. Now it exits 1 naming the tree
# manifest; the next mount (drained) writes it and a fresh cache reads both.
test_umount_without_the_drain_says_the_tree_manifest_is_stale() {
	ck_mount "leave_queued"
	ck_save_step 1 2
	echo 1 >"$CK_MNT/run/latest"
	local rc tdir=$CK_BACKING/manifests/tree
	rc=$(adm wait "$CK_MNT" --timeout 60) # the tree manifest names latest
	[ "$rc" = 0 ] || ck_fail "wait: exit $rc; $(tr '\n' '|' <"$CK_TMP/err")"
	ck_at_exit "chattr -i '$tdir' 2>/dev/null"
	chattr +i "$tdir" 2>/dev/null || ck_skip "chattr +i is not supported on $CK_TMP's filesystem"
	cp "$CK_REF/run/step-1/model.pt" "$CK_MNT/run/last.ckpt" # same bytes: its chunks are on BACKING
	mv "$CK_MNT/run/latest" "$CK_MNT/run/latest.1"
	assert_eq 0 "$(_queued)" "uploads queued for last.ckpt and the rename"
	rc=$(adm umount "$CK_MNT")
	assert_eq 1 "$rc" "exit of umount after a stop without the drain, the tree manifest stale; stdout: $(cat "$CK_TMP/out")"
	grep -q "every upload is on BACKING" "$CK_TMP/out" && ck_fail "umount said every upload is on BACKING: $(cat "$CK_TMP/out")"
	grep -q "without a tree manifest on BACKING .* describing the files outside generations" "$CK_TMP/err" ||
		ck_fail "umount's message does not name the tree manifest: $(tr '\n' '|' <"$CK_TMP/err")"
	ck_daemon_exit "ckptfs-admin umount"
	ck_is_mounted "$CK_MNT" && ck_fail "still mounted after ckptfs-admin umount"
	chattr -i "$tdir"
	# the same cache, drained this time: its tree manifest is written, umount is clean
	ck_mount
	rc=$(adm umount "$CK_MNT")
	[ "$rc" = 0 ] || ck_fail "umount with the drain: exit $rc; $(tr '\n' '|' <"$CK_TMP/err")"
	ck_daemon_exit "ckptfs-admin umount"
	CK_CACHE=$CK_TMP/cache.fresh # a new node: same BACKING, an empty cache
	ck_mount
	cmp "$CK_REF/run/step-1/model.pt" "$CK_MNT/run/last.ckpt" || ck_fail "last.ckpt differs or is missing on a fresh node"
	assert_eq 1 "$(cat "$CK_MNT/run/latest.1")" "latest.1 on a fresh node"
	[ -e "$CK_MNT/run/latest" ] && ck_fail "run/latest (renamed before the stop) is back on a fresh node"
	ck_umount
}

test_umount_of_a_busy_mount_says_busy_and_stays_mounted() {
	ck_mount
	echo hi >"$CK_MNT/f"
	exec 7<"$CK_MNT/f"
	local rc
	rc=$(adm umount "$CK_MNT")
	exec 7<&-
	assert_eq "$E_BUSY" "$rc" "exit of umount with a file open"
	grep -q "busy" "$CK_TMP/err" || ck_fail "busy message: $(tr '\n' '|' <"$CK_TMP/err")"
	ck_is_mounted "$CK_MNT" || ck_fail "unmounted although busy"
	ck_umount
}

test_umount_without_a_daemon_is_exit_4() {
	mkdir -p "$CK_CACHE"
	ck_mount
	ck_umount
	local rc
	rc=$(adm umount --cache "$CK_CACHE")
	assert_eq "$E_NO_DAEMON" "$rc" "exit of umount --cache with no daemon"
	assert_eq 1 "$(wc -l <"$CK_TMP/err")" "lines on stderr"
}

# ---------------------------------------------------------------- conventions

# Review 32B F9: rebuild never deletes an old catalog (it kept the newest 3,
# by a local-time name a clock set back would misorder, while help and
# ADMIN.md said "never deleted"); it says how many files they take and how
# to remove them.
test_rebuild_keeps_every_old_catalog_and_says_how_to_remove_them() {
	ck_mount
	ck_save_step 1 1
	"$CKPTFS_ADMIN" wait "$CK_MNT" --timeout 60 >/dev/null
	ck_umount
	local i rc
	for i in 1 2 3 4 5; do
		rc=$(adm rebuild --cache "$CK_CACHE")
		[ "$rc" = 0 ] || ck_fail "rebuild $i: exit $rc; $(tr '\n' '|' <"$CK_TMP/err")"
	done
	assert_eq 5 "$(find "$CK_CACHE" -maxdepth 1 -name 'catalog.db.before-rebuild-*' ! -name '*-wal' ! -name '*-shm' | wc -l)" "old catalogs kept"
	grep -qE "old catalogs moved aside by rebuilds are never deleted: [0-9]+ files, .* in $CK_CACHE; remove them with rm $CK_CACHE/catalog\\.db\\.before-rebuild-\\*" "$CK_TMP/out" ||
		ck_fail "the last rebuild did not say how to remove old catalogs: $(cat "$CK_TMP/out")"
	# the catalog the 5th rebuild made opens and names step-1
	ck_mount
	cmp "$CK_REF/run/step-1/model.pt" "$CK_MNT/run/step-1/model.pt" || ck_fail "step-1 differs after the rebuilds"
	ck_umount
}

test_mount_over_a_mounted_ckptfs_says_already_mounted() {
	ck_mount
	local rc=0
	timeout 20 "$CKPTFS_BIN" -f -o "$(ck_opts "cache=$CK_TMP/other-cache")" "$CK_BACKING" "$CK_MNT" >"$CK_TMP/o" 2>&1 </dev/null || rc=$?
	[ "$rc" != 0 ] || ck_fail "a second ckptfs mounted over the first"
	grep -q "already mounted" "$CK_TMP/o" || ck_fail "message: $(cat "$CK_TMP/o")"
	grep -q "nonempty" "$CK_TMP/o" && ck_fail "message suggests -o nonempty: $(cat "$CK_TMP/o")"
	ck_kill9_keep_mount
	rc=0
	timeout 20 "$CKPTFS_BIN" -f -o "$(ck_opts "cache=$CK_TMP/other-cache")" "$CK_BACKING" "$CK_MNT" >"$CK_TMP/o" 2>&1 </dev/null || rc=$?
	[ "$rc" != 0 ] || ck_fail "a ckptfs mounted over a stale one"
	grep -q "stale mount" "$CK_TMP/o" || ck_fail "message for a stale mount: $(cat "$CK_TMP/o")"
	fusermount3 -u "$CK_MNT" 2>/dev/null || umount -l "$CK_MNT"
}

test_version_of_both_tools() {
	"$CKPTFS_BIN" --version | grep -qE '^ckptfs [0-9]+\.[0-9]+\.[0-9]+' || ck_fail "ckptfs --version: $("$CKPTFS_BIN" --version 2>&1)"
	"$CKPTFS_ADMIN" --version | grep -qE '^ckptfs-admin [0-9]+\.[0-9]+\.[0-9]+' || ck_fail "ckptfs-admin --version: $("$CKPTFS_ADMIN" --version 2>&1)"
	assert_eq "$("$CKPTFS_BIN" --version | awk '{ print $2 }')" "$("$CKPTFS_ADMIN" --version | awk '{ print $2 }')" "the same version"
}

test_sighup_reopens_the_log_file_and_does_not_unmount() {
	ck_mount
	echo a >"$CK_MNT/before"
	mv "$CK_DLOG" "$CK_DLOG.1" # what logrotate does, then its postrotate: kill -HUP
	kill -HUP "$CK_PID"
	local i=0
	until [ -s "$CK_DLOG" ]; do
		i=$((i + 1))
		[ $i -le 100 ] || ck_fail "no new log file $CK_DLOG 5 s after SIGHUP"
		sleep 0.05
	done
	grep -q "SIGHUP: log .* reopened" "$CK_DLOG" || ck_fail "the new log does not say it was reopened: $(cat "$CK_DLOG")"
	_ck_pid_alive "$CK_PID" || ck_fail "SIGHUP ended the daemon"
	ck_is_mounted "$CK_MNT" || ck_fail "SIGHUP unmounted $CK_MNT"
	echo b >"$CK_MNT/after"
	assert_eq "a b" "$(cat "$CK_MNT/before") $(cat "$CK_MNT/after")" "files around the SIGHUP"
	local old_lines
	old_lines=$(wc -l <"$CK_DLOG.1")
	ck_umount
	assert_eq "$old_lines" "$(wc -l <"$CK_DLOG.1")" "lines written to the rotated log after SIGHUP"
	grep -q "unmounting" "$CK_DLOG" || ck_fail "the unmount was not logged to the new file"
}

test_syslog_option_logs_to_syslog_not_a_file() {
	command -v unshare >/dev/null || ck_skip "unshare (util-linux) not found"
	# /dev/log of a private /dev, in a private mount namespace: a listener
	# there receives what the daemon sends to syslog
	cat >"$CK_TMP/ns.sh" <<-'NS'
		set -eu
		T=$1 BIN=$2 B=$3 M=$4 C=$5 PY=$6
		mount -t tmpfs tmpfs "$T/dev"
		mknod -m 666 "$T/dev/fuse" c 10 229
		mknod -m 666 "$T/dev/null" c 1 3
		mount --bind "$T/dev" /dev
		"$PY" -c '
		import socket, sys
		s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
		s.bind("/dev/log")
		s.settimeout(20)
		out = open(sys.argv[1], "a")
		while True:
		    try:
		        d = s.recv(65536)
		    except socket.timeout:
		        break
		    out.write(d.decode(errors="replace") + "\n")
		    out.flush()
		' "$T/syslog.txt" &
		listener=$!
		for _ in $(seq 50); do [ -S /dev/log ] && break; sleep 0.1; done
		"$BIN" -o "cache=$C${CKPTFS_TEST_MOUNT_OPTS:+,$CKPTFS_TEST_MOUNT_OPTS},syslog" "$B" "$M"
		echo hi >"$M/f"
		fusermount3 -u "$M"
		for _ in $(seq 100); do [ -e "$C/control.sock" ] || break; sleep 0.1; done
		sleep 0.5
		kill "$listener" 2>/dev/null || true
	NS
	mkdir -p "$CK_TMP/dev"
	unshare --mount --propagation private bash "$CK_TMP/ns.sh" "$CK_TMP" "$CKPTFS_BIN" "$CK_BACKING" "$CK_MNT" "$CK_CACHE" "$PY" \
		>"$CK_TMP/ns.out" 2>&1 || ck_skip "cannot set up a private /dev/log: $(tail -n 3 "$CK_TMP/ns.out" | tr '\n' '|')"
	grep -q "ckptfs\[[0-9]*\]: serving $CK_MNT" "$CK_TMP/syslog.txt" ||
		ck_fail "syslog did not get 'serving': $(head -n 5 "$CK_TMP/syslog.txt" 2>/dev/null | tr '\n' '|')"
	grep -q "<30>" "$CK_TMP/syslog.txt" || ck_fail "no facility daemon, level info (<30>) in syslog"
	[ ! -e "$CK_CACHE/ckptfs.log" ] || ck_fail "-o syslog still wrote $CK_CACHE/ckptfs.log"
}

test_export_and_import_progress_shows_sizes_rate_and_eta_on_a_terminal() {
	command -v script >/dev/null || ck_skip "script(1) not installed"
	ck_mount
	ck_save_step 1 24
	script -q -e -c "'$CKPTFS_ADMIN' export '$CK_MNT' run/step-1 '$CK_TMP/out-dir' >/dev/null" "$CK_TMP/ts.export" >/dev/null 2>&1 </dev/null ||
		ck_fail "export under script(1) failed: $(tail -c 300 "$CK_TMP/ts.export")"
	grep -qE 'MiB / 24\.0 MiB, [0-9.]+ [KMG]?i?B/s, ETA' "$CK_TMP/ts.export" ||
		ck_fail "export: no human sizes, rate and ETA on a terminal: $(tail -c 300 "$CK_TMP/ts.export" | tr '\r' '|')"
	cmp "$CK_REF/run/step-1/model.pt" "$CK_TMP/out-dir/step-1/model.pt" || ck_fail "exported bytes differ"
	script -q -e -c "'$CKPTFS_ADMIN' import '$CK_MNT' --name step-2 '$CK_TMP/out-dir/step-1' run >/dev/null" "$CK_TMP/ts.import" >/dev/null 2>&1 </dev/null ||
		ck_fail "import under script(1) failed: $(tail -c 300 "$CK_TMP/ts.import")"
	grep -qE 'MiB / 24\.0 MiB, [0-9.]+ [KMG]?i?B/s, ETA' "$CK_TMP/ts.import" ||
		ck_fail "import: no human sizes, rate and ETA on a terminal: $(tail -c 300 "$CK_TMP/ts.import" | tr '\r' '|')"
	cmp "$CK_REF/run/step-1/model.pt" "$CK_MNT/run/step-2/model.pt" || ck_fail "imported bytes differ"
	# not a terminal: nothing extra on stderr
	local rc
	rc=$(adm export "$CK_MNT" run/step-2 "$CK_TMP/out2")
	assert_eq 0 "$rc" "export without a terminal"
	[ ! -s "$CK_TMP/err" ] || ck_fail "export printed on a non-terminal stderr: $(head -c 200 "$CK_TMP/err")"
	ck_umount
}

# ---------------------------------------------------------------- metrics

# promtool (Debian's prometheus package ships it); PROMTOOL=path to use one
# extracted from the .deb without installing the server.
_promtool() {
	if [ -n "${PROMTOOL:-}" ] && [ -x "$PROMTOOL" ]; then echo "$PROMTOOL"; return; fi
	command -v promtool || true
}

# _check_exposition FILE WHAT — promcheck.py always; promtool check metrics
# when it is there (its lint and ours: counters _total, base units, HELP/TYPE).
_check_exposition() {
	local f=$1 what=$2 pt out
	out=$("$PY" "$CK_HELPERS/promcheck.py" "$f" 2>&1) || ck_fail "$what: not valid exposition format: $(echo "$out" | head -n 5 | tr '\n' '|')"
	pt=$(_promtool)
	if [ -n "$pt" ]; then
		out=$("$pt" check metrics <"$f" 2>&1) || ck_fail "$what: promtool check metrics: $(echo "$out" | head -n 5 | tr '\n' '|')"
	else
		ck_log "promtool not found (set PROMTOOL=): checked with promcheck.py only"
	fi
}

_free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

test_stats_prometheus_passes_promtool_and_shows_the_bounds_in_force() {
	ck_mount
	ck_save_step 1 2
	cat "$CK_MNT/run/step-1/model.pt" >/dev/null
	local rc
	rc=$(adm stats --prometheus "$CK_MNT")
	assert_eq 0 "$rc" "stats --prometheus"
	cp "$CK_TMP/out" "$CK_TMP/stats.prom"
	_check_exposition "$CK_TMP/stats.prom" "stats --prometheus"
	grep -q '^ckptfs_chunk_follow_wait_seconds_total{' "$CK_TMP/stats.prom" || ck_fail "no chunk_follow_wait_seconds_total"
	grep -q '^ckptfs_uploaded_bytes_total{' "$CK_TMP/stats.prom" || ck_fail "no uploaded_bytes_total"
	# the bounds in force, not the options' 0: the figures the daemon logged
	rc=$(adm stats "$CK_MNT")
	local bound dirty logged_bound logged_dirty
	bound=$(awk '$1 == "cache_bound" { print $2 }' "$CK_TMP/out")
	dirty=$(awk '$1 == "dirty_bound" { print $2 }' "$CK_TMP/out")
	[ "${bound:-0}" -gt 0 ] && [ "${dirty:-0}" -gt 0 ] || ck_fail "stats shows cache_bound ${bound:-none} dirty_bound ${dirty:-none}"
	logged_bound=$(sed -n 's/.* bound \([0-9]*\) MiB, dirty bound \([0-9]*\) MiB.*/\1/p' "$CK_DLOG" | tail -n 1)
	logged_dirty=$(sed -n 's/.* bound \([0-9]*\) MiB, dirty bound \([0-9]*\) MiB.*/\2/p' "$CK_DLOG" | tail -n 1)
	assert_eq "$logged_bound" "$((bound >> 20))" "cache_bound (MiB) against the log"
	assert_eq "$logged_dirty" "$((dirty >> 20))" "dirty_bound (MiB) against the log"
	ck_umount
	# with the bounds given
	ck_mount "cache_size=512M,dirty_max=128M"
	rc=$(adm stats "$CK_MNT")
	assert_eq "$((512 * MiB))" "$(awk '$1 == "cache_bound" { print $2 }' "$CK_TMP/out")" "cache_bound with -o cache_size"
	assert_eq "$((128 * MiB))" "$(awk '$1 == "dirty_bound" { print $2 }' "$CK_TMP/out")" "dirty_bound with -o dirty_max"
	ck_umount
}

test_stale_mount_prometheus_says_daemon_up_0() {
	ck_mount
	ck_kill9_keep_mount
	local rc
	rc=$(adm stats --prometheus "$CK_MNT")
	assert_eq 4 "$rc" "stats --prometheus on a stale mount"
	grep -qxF "ckptfs_daemon_up{mountpoint=\"$CK_MNT\"} 0" "$CK_TMP/out" ||
		ck_fail "no ckptfs_daemon_up 0 on a stale mount: $(tr '\n' '|' <"$CK_TMP/out")"
	_check_exposition "$CK_TMP/out" "stats --prometheus on a stale mount"
	fusermount3 -u "$CK_MNT" 2>/dev/null || umount -l "$CK_MNT"
}

test_metrics_endpoint_serves_prometheus_over_http() {
	command -v curl >/dev/null || ck_skip "curl is not installed"
	local port
	port=$(_free_port)
	ck_mount "metrics=127.0.0.1:$port"
	ck_save_step 1 2
	cat "$CK_MNT/run/step-1/model.pt" >/dev/null
	curl -sS -f -D "$CK_TMP/headers" -o "$CK_TMP/scrape.prom" "http://127.0.0.1:$port/metrics" ||
		ck_fail "curl http://127.0.0.1:$port/metrics failed; log: $(grep metrics "$CK_DLOG" | tr '\n' '|')"
	grep -qi '^content-type: text/plain; version=0.0.4' "$CK_TMP/headers" || ck_fail "content type: $(tr '\r\n' '||' <"$CK_TMP/headers")"
	_check_exposition "$CK_TMP/scrape.prom" "GET /metrics"
	grep -q "^ckptfs_daemon_up{.*} 1\$" "$CK_TMP/scrape.prom" || ck_fail "no daemon_up 1 in the scrape"
	assert_eq "$((2 * MiB))" "$(awk -F'} ' '/^ckptfs_logical_bytes\{/ { print $2 }' "$CK_TMP/scrape.prom")" "logical_bytes in the scrape"
	# the same families as stats --prometheus
	adm stats --prometheus "$CK_MNT" >/dev/null
	assert_eq "$(grep '^# TYPE' "$CK_TMP/out" | sort)" "$(grep '^# TYPE' "$CK_TMP/scrape.prom" | sort)" "families of stats --prometheus and /metrics"
	assert_eq 404 "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/other")" "another path"
	assert_eq 405 "$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$port/metrics")" "POST"
	ck_umount
	! curl -s -o /dev/null "http://127.0.0.1:$port/metrics" || ck_fail "the endpoint still answers after the daemon exited"
}

test_metrics_option_refuses_a_bad_address() {
	local rc=0
	"$CKPTFS_BIN" -f -o "$(ck_opts "cache=$CK_CACHE,metrics=localhost")" "$CK_BACKING" "$CK_MNT" >"$CK_TMP/o" 2>&1 </dev/null || rc=$?
	[ "$rc" != 0 ] || ck_fail "metrics=localhost (no port) was accepted"
	grep -q "metrics=localhost.*ADDR:PORT" "$CK_TMP/o" || ck_fail "message: $(cat "$CK_TMP/o")"
	ck_is_mounted "$CK_MNT" && ck_fail "mounted despite a bad option"
	return 0
}

ck_main "$@"
