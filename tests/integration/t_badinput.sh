#!/bin/bash
# t_badinput — the command line: bad input gives one clear line on stderr that
# names the offending path or option and the reason, a non-zero exit, and
# nothing mounted or left running; good input in daemon mode returns only once
# the mount is up.
. "$(dirname "$0")/lib.sh"

# PIDs of processes whose command line mentions our temp dir (a daemon that
# forked into the background although it should have failed).
_our_daemons() {
	local p
	for p in /proc/[0-9]*; do
		[ "${p#/proc/}" != "${CK_PID:-}" ] || continue # the daemon ck_mount started
		tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -q -F -- "$CKPTFS_BIN" || continue
		tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -q -F -- "$CK_TMP" && echo "${p#/proc/}"
	done
	return 0
}

# _refused NEEDLE MOUNTPOINT ARGS... : runs the daemon (daemon mode unless
# ARGS has -f) and checks it is refused: non-zero exit within 20 s, exactly
# one line on stderr, containing NEEDLE, and MOUNTPOINT not mounted after.
_refused() {
	local needle=$1 mnt=$2 rc=0 lines p
	shift 2
	ck_register_mount "$mnt"
	timeout -k 5 20 "$CKPTFS_BIN" "$@" >"$CK_TMP/out" 2>"$CK_TMP/err" </dev/null || rc=$?
	for p in $(_our_daemons); do
		_ck_state "pid $p $CKPTFS_BIN"
	done
	if ck_is_mounted "$mnt"; then
		fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt"
		ck_fail "ckptfs $* mounted $mnt (exit $rc) instead of refusing"
	fi
	[ $rc != 124 ] && [ $rc != 137 ] || ck_fail "ckptfs $* did not exit within 20 s"
	[ $rc != 0 ] || ck_fail "ckptfs $* exited 0, expected a refusal"
	[ -z "$(_our_daemons)" ] || ck_fail "ckptfs $* left a process running: $(_our_daemons)"
	lines=$(grep -c '' "$CK_TMP/err") || true
	[ "$lines" -ge 1 ] || ck_fail "ckptfs $* exited $rc with nothing on stderr"
	local first
	first=$(head -n 1 "$CK_TMP/err")
	assert_contains "$first" "$needle" "first stderr line of ckptfs $*"
	[ ${#first} -gt $((${#needle} + 8)) ] || ck_fail "stderr line '$first' gives no reason"
	[ "$lines" = 1 ] || ck_fail "ckptfs $* printed $lines lines on stderr, expected one: $(tr '\n' '|' <"$CK_TMP/err")"
	ck_log "refused as expected (exit $rc): $first"
}

test_missing_backing_directory_is_refused() {
	_refused "$CK_TMP/nope" "$CK_MNT" -o "$(ck_opts "cache=$CK_CACHE")" "$CK_TMP/nope" "$CK_MNT"
	# In the foreground as well.
	_refused "$CK_TMP/nope" "$CK_MNT" -f -o "$(ck_opts "cache=$CK_CACHE")" "$CK_TMP/nope" "$CK_MNT"
}

# -o log=FILE is never opened through a symlink (fs/lib/log.c, review 40
# F7): root's log in a shared directory cannot be sent to a file another
# user points it at; the target is left as it was.
test_log_that_is_a_symlink_is_refused() {
	echo victim >"$CK_TMP/victim"
	ln -s "$CK_TMP/victim" "$CK_TMP/d.log"
	_refused "symbolic link" "$CK_MNT" -o "$(ck_opts "cache=$CK_CACHE,log=$CK_TMP/d.log")" "$CK_BACKING" "$CK_MNT"
	assert_eq victim "$(cat "$CK_TMP/victim")" "the symlink's target"
}

test_backing_that_is_a_file_is_refused() {
	echo x >"$CK_TMP/file"
	_refused "$CK_TMP/file" "$CK_MNT" -o "$(ck_opts "cache=$CK_CACHE")" "$CK_TMP/file" "$CK_MNT"
}

test_read_only_backing_is_refused() {
	mkdir "$CK_TMP/ro"
	mount --bind "$CK_TMP/ro" "$CK_TMP/ro"
	ck_register_mount "$CK_TMP/ro"
	mount -o remount,bind,ro "$CK_TMP/ro"
	_refused "$CK_TMP/ro" "$CK_MNT" -o "$(ck_opts "cache=$CK_CACHE")" "$CK_TMP/ro" "$CK_MNT"
	umount "$CK_TMP/ro"
}

test_backing_not_writable_by_a_non_root_user_is_refused() {
	local b=$CK_TMP/user_backing c=$CK_TMP/user_cache m=$CK_TMP/user_mnt
	mkdir "$b" "$c" "$m"
	chown 65534:65534 "$b" "$c" "$m"
	chmod 555 "$b"
	ck_register_mount "$m"
	local rc=0
	setpriv --reuid=65534 --regid=65534 --clear-groups \
		timeout -k 5 20 "$CKPTFS_BIN" -o "$(ck_opts "cache=$c")" "$b" "$m" >"$CK_TMP/out" 2>"$CK_TMP/err" </dev/null || rc=$?
	if ck_is_mounted "$m"; then
		fusermount3 -u "$m" 2>/dev/null || umount -l "$m"
		ck_fail "ckptfs run by uid 65534 mounted over a BACKING it cannot write"
	fi
	[ $rc != 0 ] || ck_fail "ckptfs by uid 65534 with a 0555 BACKING exited 0"
	assert_contains "$(head -n 1 "$CK_TMP/err")" "$b" "first stderr line"
	assert_eq 1 "$(grep -c '' "$CK_TMP/err")" "stderr lines"
}

test_backing_under_proc_is_refused() {
	_refused "/proc/sys/kernel" "$CK_MNT" -o "$(ck_opts "cache=$CK_CACHE")" /proc/sys/kernel "$CK_MNT"
}

test_read_only_cache_is_refused() {
	mkdir "$CK_TMP/rocache"
	mount --bind "$CK_TMP/rocache" "$CK_TMP/rocache"
	ck_register_mount "$CK_TMP/rocache"
	mount -o remount,bind,ro "$CK_TMP/rocache"
	_refused "$CK_TMP/rocache" "$CK_MNT" -o "$(ck_opts "cache=$CK_TMP/rocache")" "$CK_BACKING" "$CK_MNT"
	umount "$CK_TMP/rocache"
}

test_cache_that_is_a_file_is_refused() {
	echo x >"$CK_TMP/cachefile"
	_refused "$CK_TMP/cachefile" "$CK_MNT" -o "$(ck_opts "cache=$CK_TMP/cachefile")" "$CK_BACKING" "$CK_MNT"
}

test_missing_mountpoint_is_refused() {
	_refused "$CK_TMP/nomnt" "$CK_TMP/nomnt" -o "$(ck_opts "cache=$CK_CACHE")" "$CK_BACKING" "$CK_TMP/nomnt"
}

test_non_empty_mountpoint_is_refused_unless_nonempty() {
	echo underneath >"$CK_MNT/file"
	_refused "$CK_MNT" "$CK_MNT" -o "$(ck_opts "cache=$CK_CACHE")" "$CK_BACKING" "$CK_MNT"
	ck_mount nonempty
	assert_not_exists "$CK_MNT/file"
	echo on-top >"$CK_MNT/other"
	ck_umount
	assert_eq underneath "$(cat "$CK_MNT/file")" "the file under the mount"
	assert_not_exists "$CK_MNT/other"
}

test_unknown_option_is_refused() {
	_refused "bogus" "$CK_MNT" -o bogus "$CK_BACKING" "$CK_MNT"
	_refused "bogus" "$CK_MNT" -o "$(ck_opts "cache=$CK_CACHE,bogus=1")" "$CK_BACKING" "$CK_MNT"
	_refused "--bogus" "$CK_MNT" --bogus "$CK_BACKING" "$CK_MNT"
	_refused "cache" "$CK_MNT" -o cache "$CK_BACKING" "$CK_MNT"
}

# -o verify= takes crc32c or sha256 only: anything else is refused before
# BACKING or the cache is touched, with one line naming the option and what it
# expects.
test_bad_verify_value_is_refused() {
	local v
	for v in md5 "" CRC32C sha256x; do
		_refused "verify=$v" "$CK_MNT" -o "$(ck_opts "cache=$CK_CACHE,verify=$v")" "$CK_BACKING" "$CK_MNT"
		assert_contains "$(head -n 1 "$CK_TMP/err")" "expects verify=crc32c or verify=sha256" "the reason given for verify=$v"
	done
	# In the foreground as well.
	_refused "verify=md5" "$CK_MNT" -f -o "$(ck_opts "cache=$CK_CACHE,verify=md5")" "$CK_BACKING" "$CK_MNT"
	assert_eq "" "$(ls -A "$CK_BACKING")" "BACKING after refused verify= values (nothing may be written)"
	assert_eq "" "$(ls -A "$CK_CACHE")" "the cache after refused verify= values (nothing may be written)"
}

# Both verify= values mount, and what was written reads back byte-identical
# after a remount (reads from the local cache, checked the chosen way).
test_verify_crc32c_and_sha256_mount() {
	local v
	assert_contains "$(timeout 20 "$CKPTFS_BIN" --help 2>&1)" "verify=" "ckptfs --help"
	for v in crc32c sha256; do
		ck_rand "$CK_REF/$v" $((3 * MiB + 17))
		ck_mount verify=$v
		cp "$CK_REF/$v" "$CK_MNT/$v"
		assert_file_eq "$CK_REF/$v" "$CK_MNT/$v"
		ck_remount verify=$v
		assert_file_eq "$CK_REF/$v" "$CK_MNT/$v"
		[ "$v" = crc32c ] || assert_file_eq "$CK_REF/crc32c" "$CK_MNT/crc32c"
		ck_umount
	done
}

# BACKING/ckptfs.store names the store's format. A newer one than this ckptfs
# understands is refused with one line naming BACKING and saying so, and the
# marker is left as it was (an older daemon must not downgrade a store).
test_store_marker_of_a_newer_format_is_refused() {
	printf 'ckptfs store format 6\n' >"$CK_BACKING/ckptfs.store"
	cp -p "$CK_BACKING/ckptfs.store" "$CK_TMP/marker"
	_refused "BACKING $CK_BACKING" "$CK_MNT" -o "$(ck_opts "cache=$CK_CACHE")" "$CK_BACKING" "$CK_MNT"
	assert_contains "$(head -n 1 "$CK_TMP/err")" "store format 6 is newer than this ckptfs" "the reason given for a format-6 store"
	_refused "BACKING $CK_BACKING" "$CK_MNT" -f -o "$(ck_opts "cache=$CK_CACHE")" "$CK_BACKING" "$CK_MNT"
	assert_contains "$(head -n 1 "$CK_TMP/err")" "newer" "the reason given for a format-6 store (foreground)"
	cmp -s "$CK_TMP/marker" "$CK_BACKING/ckptfs.store" ||
		ck_fail "the marker of a refused newer store changed: '$(cat "$CK_BACKING/ckptfs.store")'"
	[ ! -e "$CK_BACKING/chunks" ] || ck_fail "a refused newer store got a chunks/ directory"
	# a version past 32 bits is newer too, never read as a wrapped-around 1
	printf 'ckptfs store format 4294967297\n' >"$CK_BACKING/ckptfs.store"
	cp -p "$CK_BACKING/ckptfs.store" "$CK_TMP/marker"
	_refused "BACKING $CK_BACKING" "$CK_MNT" -o "$(ck_opts "cache=$CK_CACHE")" "$CK_BACKING" "$CK_MNT"
	assert_contains "$(head -n 1 "$CK_TMP/err")" "store format 4294967297 is newer than this ckptfs" "the reason given for a format-4294967297 store"
	cmp -s "$CK_TMP/marker" "$CK_BACKING/ckptfs.store" ||
		ck_fail "the marker of a refused 4294967297 store changed: '$(cat "$CK_BACKING/ckptfs.store")'"
}

# A ckptfs.store that is not a marker (someone else's file, a damaged one) is
# refused naming the file, and left as it was.
test_store_marker_with_garbage_is_refused() {
	local m=$CK_BACKING/ckptfs.store what
	for what in empty text binary prefix zero negative junk overflow; do
		case $what in
		empty) : >"$m" ;;
		text) printf 'hello, this is not a ckptfs store\n' >"$m" ;;
		binary) head -c 200 /dev/urandom >"$m" ;;
		prefix) printf 'ckptfs store format two\n' >"$m" ;;
		zero) printf 'ckptfs store format 0\n' >"$m" ;;
		negative) printf 'ckptfs store format -7\n' >"$m" ;;
		junk) printf 'ckptfs store format 2 and junk\n' >"$m" ;;
		overflow) printf 'ckptfs store format 99999999999999999999999\n' >"$m" ;;
		esac
		cp -p "$m" "$CK_TMP/marker"
		_refused "ckptfs.store" "$CK_MNT" -o "$(ck_opts "cache=$CK_CACHE")" "$CK_BACKING" "$CK_MNT"
		assert_contains "$(head -n 1 "$CK_TMP/err")" "BACKING $CK_BACKING: ckptfs.store is not a ckptfs store marker" "the line for a $what marker"
		cmp -s "$CK_TMP/marker" "$m" || ck_fail "the $what marker of a refused store changed"
	done
}

test_missing_arguments_are_refused_with_usage() {
	local rc out
	for args in "" "$CK_BACKING" "-o cache=$CK_CACHE $CK_BACKING" "$CK_BACKING $CK_MNT $CK_TMP/extra" "-o"; do
		rc=0
		# shellcheck disable=SC2086
		out=$(timeout 20 "$CKPTFS_BIN" $args 2>&1 >/dev/null </dev/null) || rc=$?
		[ $rc != 0 ] && [ $rc != 124 ] || ck_fail "ckptfs $args: exit $rc, expected a quick refusal"
		[ -n "$out" ] || ck_fail "ckptfs $args: nothing on stderr"
		ck_is_mounted "$CK_MNT" && ck_fail "ckptfs $args mounted something"
		ck_log "ckptfs $args -> exit $rc: $(echo "$out" | head -n 1)"
	done
	[ -z "$(_our_daemons)" ] || ck_fail "a daemon is left running: $(_our_daemons)"
}

test_help_and_version_exit_zero() {
	local out
	out=$(timeout 20 "$CKPTFS_BIN" --help 2>&1) || ck_fail "ckptfs --help failed"
	assert_contains "$out" "usage" "ckptfs --help"
	assert_contains "$out" "cache=" "ckptfs --help"
	out=$(timeout 20 "$CKPTFS_BIN" --version 2>&1) || ck_fail "ckptfs --version failed"
	[ -n "$out" ] || ck_fail "ckptfs --version printed nothing"
}

test_second_daemon_on_the_same_cache_is_refused() {
	# Two daemons on one catalog would each believe they own its pending
	# writers and inode state: the second must be refused, naming the cache.
	ck_mount
	echo first >"$CK_MNT/f"
	mkdir "$CK_TMP/mnt2"
	_refused "$CK_CACHE" "$CK_TMP/mnt2" -o "$(ck_opts "cache=$CK_CACHE")" "$CK_BACKING" "$CK_TMP/mnt2"
	assert_eq first "$(cat "$CK_MNT/f")" "the first mount after the refused second one"
	ck_umount
}

test_daemon_mode_returns_once_the_mount_is_up() {
	local rc=0 pids
	ck_register_mount "$CK_MNT"
	timeout -k 5 30 "$CKPTFS_BIN" -o "$(ck_opts "cache=$CK_CACHE")" "$CK_BACKING" "$CK_MNT" >"$CK_TMP/out" 2>"$CK_TMP/err" </dev/null || rc=$?
	pids=$(_our_daemons)
	for p in $pids; do _ck_state "pid $p $CKPTFS_BIN"; done
	[ $rc = 0 ] || ck_fail "ckptfs in daemon mode exited $rc: $(head -n 3 "$CK_TMP/err" | tr '\n' '|')"
	ck_is_mounted "$CK_MNT" || ck_fail "ckptfs returned 0 before $CK_MNT was mounted"
	[ -n "$pids" ] || ck_fail "no daemon process found after ckptfs returned"
	echo hello >"$CK_MNT/f"
	assert_eq hello "$(cat "$CK_MNT/f")" "file written through the daemonized mount"
	fusermount3 -u "$CK_MNT" || ck_fail "fusermount3 -u failed"
	local i=0
	while [ -n "$(_our_daemons)" ]; do
		i=$((i + 1))
		[ $i -le $((CK_EXIT_TIMEOUT * 10)) ] || ck_fail "the daemon ($pids) did not exit after fusermount3 -u"
		sleep 0.1
	done
	[ ! -s "$CK_TMP/err" ] || ck_log "stderr of the daemon-mode start: $(head -n 3 "$CK_TMP/err" | tr '\n' '|')"
	_ck_check_sanitizer "$CK_TMP/err" "$CK_CACHE/ckptfs.log"
}

ck_main "$@"
