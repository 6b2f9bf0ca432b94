#!/bin/bash
# t_faultfs.sh [FAULTFS_BIN] — proves on a real mount that every fault of
# faultfs fires and that clearing it restores normal behaviour.
#
# One faultfs daemon (started here, in the foreground, PID recorded) serves
# all cases over its own temp dirs. Faults are set by rewriting the control
# file and waiting until CTLFILE.stats shows that faultfs loaded it, so no
# case depends on sleeping "long enough". Every case clears the faults it set.
# The EXIT trap releases a hang, kills only the PIDs this script started,
# unmounts, and removes the temp dir. The last line is "N passed, N failed".
# Needs root or user FUSE (fusermount3), python3, cmp, timeout.
# `a && b || fail` is if-then-else here: fail ends the case.
# shellcheck disable=SC2015,SC2012
set -u

here=$(cd "$(dirname "$0")" && pwd)
FAULTFS=${1:-$here/../../build/faultfs}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
MiB=$((1024 * 1024))

if [ ! -x "$FAULTFS" ]; then
	echo "t_faultfs: $FAULTFS not built (make build/faultfs)" >&2
	echo "0 passed, 1 failed"
	exit 1
fi

T=$(mktemp -d /tmp/faultfs-test.XXXXXX)
SRC=$T/src MNT=$T/mnt CTL=$T/ctl STATS=$T/ctl.stats REF=$T/ref
mkdir -p "$SRC" "$MNT" "$REF"
: >"$CTL"
FS_PID=
BG_PIDS=()   # of the running case
CASE_MNTS=() # extra mounts of the running case

is_mounted() { awk -v m="$MNT" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; }

cleanup() {
	local i
	: >"$CTL" # releases any op held by hang=1
	sleep 0.3
	if is_mounted; then
		fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -u -z "$MNT" 2>/dev/null
	fi
	if [ -n "$FS_PID" ]; then
		for i in $(seq 50); do kill -0 "$FS_PID" 2>/dev/null || break; sleep 0.1; done
		kill "$FS_PID" 2>/dev/null && wait "$FS_PID" 2>/dev/null
	fi
	is_mounted && echo "t_faultfs: WARNING: $MNT still mounted" >&2
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- helpers

stat_get() { sed -n "s/^$1=//p" "$STATS" 2>/dev/null; }

# ctl_set LINE... — installs a new control file (atomically) and waits until
# faultfs has loaded it (config_loads goes up).
ctl_set() {
	local before i
	local new
	new=$(printf '%s\n' "$@")
	[ "$new" = "$(cat "$CTL")" ] && return 0
	before=$(stat_get config_loads)
	printf '%s\n' "$@" >"$CTL.tmp" && mv "$CTL.tmp" "$CTL"
	for i in $(seq 100); do
		[ "$(stat_get config_loads)" -gt "${before:-0}" ] 2>/dev/null && return 0
		sleep 0.05
	done
	echo "faultfs did not load the control file within 5 s" >&2
	return 1
}
ctl_clear() { ctl_set "# no faults"; }

# Waits (up to 3 s) until stats key $1 is at least $2, so a counter written
# "within 100 ms of a change" can be asserted.
stat_wait_ge() {
	local i
	for i in $(seq 60); do
		[ "$(stat_get "$1")" -ge "$2" ] 2>/dev/null && return 0
		sleep 0.05
	done
	echo "stats: $1=$(stat_get "$1"), expected >= $2" >&2
	return 1
}

now_ms() { date +%s%3N; }
# Cases run in a subshell: fail ends the case; its EXIT trap kills the case's
# background PIDs and clears the faults it set.
fail() { echo "    $*" >&2; exit 1; }
case_cleanup() {
	local pid m
	for pid in "${BG_PIDS[@]}"; do kill -9 "$pid" 2>/dev/null; done
	for m in "${CASE_MNTS[@]}"; do fusermount3 -u -z "$m" 2>/dev/null; done
	ctl_clear >/dev/null 2>&1
}

# ---------------------------------------------------------------- cases

test_passthrough_mirrors_every_op() {
	head -c $((3 * MiB + 17)) /dev/urandom >"$REF/p"
	cp "$REF/p" "$MNT/p" || fail "cp into the mount"
	cmp "$REF/p" "$SRC/p" || fail "SRCDIR copy differs"
	cmp "$REF/p" "$MNT/p" || fail "read back differs"
	mkdir "$MNT/d" && mv "$MNT/p" "$MNT/d/q" || fail "mkdir/rename"
	[ -f "$SRC/d/q" ] && [ ! -e "$SRC/p" ] || fail "rename not mirrored"
	"$PY" -c 'import os,sys; os.rename(sys.argv[1], sys.argv[2])' "$MNT/d/q" "$MNT/r" || fail "rename (python)"
	truncate -s 1000 "$MNT/r" && [ "$(stat -c %s "$SRC/r")" = 1000 ] || fail "truncate"
	chmod 640 "$MNT/r" && [ "$(stat -c %a "$SRC/r")" = 640 ] || fail "chmod"
	touch -d '2001-02-03 04:05:06.123456789' "$MNT/r" || fail "utimens"
	[ "$(stat -c %y "$SRC/r")" = "$(stat -c %y "$MNT/r")" ] || fail "mtime not mirrored"
	"$PY" - "$MNT" <<-'EOF' || fail "fsync of a file and a directory"
		import os, sys
		fd = os.open(sys.argv[1] + "/f", os.O_CREAT | os.O_WRONLY, 0o644)
		os.write(fd, b"x" * 4096); os.fsync(fd); os.fdatasync(fd); os.close(fd)
		d = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY); os.fsync(d); os.close(d)
	EOF
	[ "$(ls "$MNT" | tr '\n' ' ')" = "d f r " ] || fail "readdir: $(ls "$MNT")"
	df "$MNT" >/dev/null || fail "statfs"
	rm "$MNT/f" "$MNT/r" && rmdir "$MNT/d" || fail "unlink/rmdir"
	[ -z "$(ls -A "$SRC")" ] || fail "SRCDIR not empty: $(ls -A "$SRC")"
	stat_wait_ge op.fsync 3 && stat_wait_ge op.rename 2 && stat_wait_ge op.mkdir 1 || fail "op counters"
	# fsyncdir: the directory's fsync among op.fsync, not the file's two
	stat_wait_ge fsyncdir 1 && [ "$(stat_get fsyncdir)" -le $(($(stat_get op.fsync) - 2)) ] ||
		fail "fsyncdir $(stat_get fsyncdir) of op.fsync $(stat_get op.fsync)"
}

test_bw_throttles_writes_and_reads_data_identical() {
	head -c $((50 * MiB)) /dev/urandom >"$REF/big"
	ctl_set bw=25000000 || return 1
	local t0 t1 ms before
	before=$(stat_get throttle_ms)
	t0=$(now_ms)
	dd if="$REF/big" of="$MNT/big" bs=1M status=none || fail "dd write"
	t1=$(now_ms)
	ms=$((t1 - t0))
	echo "    50 MiB write at bw=25000000: ${ms} ms (ideal 2097)" >&2
	[ $ms -ge 1600 ] || fail "write took ${ms} ms, expected >= 1600"
	stat_wait_ge throttle_ms $((before + 1000)) || fail "throttle_ms did not grow"
	t0=$(now_ms)
	head -c $((25 * MiB)) "$MNT/big" >/dev/null || fail "read"
	ms=$(($(now_ms) - t0))
	echo "    25 MiB read at bw=25000000: ${ms} ms (ideal 1049)" >&2
	[ $ms -ge 750 ] || fail "read took ${ms} ms, expected >= 750"
	ctl_clear || return 1
	cmp "$REF/big" "$MNT/big" || fail "data through the mount differs"
	cmp "$REF/big" "$SRC/big" || fail "data in SRCDIR differs"
	rm -f "$MNT/big"
}

test_latency_delays_every_op() {
	echo x >"$MNT/lat"
	ctl_set latency_ms=300 || return 1
	local t0 ms
	t0=$(now_ms)
	stat "$MNT/lat" >/dev/null || fail "stat"
	ms=$(($(now_ms) - t0))
	[ $ms -ge 290 ] || fail "stat took ${ms} ms with latency_ms=300"
	ctl_clear || return 1
	t0=$(now_ms)
	for _ in 1 2 3 4 5; do stat "$MNT/lat" >/dev/null; done
	ms=$(($(now_ms) - t0))
	[ $ms -lt 1500 ] || fail "5 stats took ${ms} ms after latency was cleared"
	rm -f "$MNT/lat"
}

test_eio_on_write_reaches_the_caller() {
	local before err
	before=$(stat_get fault.write)
	ctl_set eio=write || return 1
	err=$(dd if=/dev/zero of="$MNT/w" bs=64k count=1 2>&1) && fail "write succeeded under eio=write"
	ctl_clear || return 1
	[[ $err == *"Input/output error"* ]] || fail "dd said: $err"
	stat_wait_ge fault.write $((before + 1)) || return 1
	[ "$(stat -c %s "$SRC/w")" = 0 ] || fail "a failed write reached SRCDIR"
	rm -f "$MNT/w"
}

test_eio_on_fsync_file_and_directory() {
	echo data >"$MNT/fs"
	ctl_set eio=fsync || return 1
	local out
	out=$("$PY" - "$MNT" 2>&1 <<-'EOF'
		import os, sys
		for path, flags in ((sys.argv[1] + "/fs", os.O_WRONLY), (sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)):
		    fd = os.open(path, flags)
		    try:
		        os.fsync(fd); print("fsync ok", path)
		    except OSError as e:
		        print("errno", e.errno)
		    os.close(fd)
	EOF
	)
	ctl_clear || return 1
	[ "$out" = "$(printf 'errno 5\nerrno 5')" ] || fail "expected two EIO, got: $out"
	"$PY" -c 'import os,sys; fd=os.open(sys.argv[1], os.O_WRONLY); os.fsync(fd)' "$MNT/fs" || fail "fsync after clear"
	rm -f "$MNT/fs"
}

test_eio_on_rename_leaves_names_unchanged() {
	echo a >"$MNT/ra"
	ctl_set eio=rename || return 1
	local err
	err=$(mv "$MNT/ra" "$MNT/rb" 2>&1) && fail "rename succeeded under eio=rename"
	ctl_clear || return 1
	[[ $err == *"Input/output error"* ]] || fail "mv said: $err"
	[ -f "$SRC/ra" ] && [ ! -e "$SRC/rb" ] || fail "names changed by a failed rename"
	mv "$MNT/ra" "$MNT/rb" || fail "rename after clear"
	rm -f "$MNT/rb"
}

test_enospc_on_write_create_mkdir() {
	echo old >"$MNT/e"
	ctl_set enospc=write,create,mkdir || return 1
	local e1 e2 e3
	e1=$(dd if=/dev/zero of="$MNT/e" bs=4k count=1 conv=notrunc 2>&1) && fail "write succeeded"
	e2=$( (: >"$MNT/new") 2>&1) && fail "create succeeded"
	e3=$(mkdir "$MNT/nd" 2>&1) && fail "mkdir succeeded"
	ctl_clear || return 1
	for e in "$e1" "$e2" "$e3"; do
		[[ $e == *"No space left on device"* ]] || fail "expected ENOSPC, got: $e"
	done
	[ ! -e "$SRC/new" ] && [ ! -e "$SRC/nd" ] && [ "$(cat "$SRC/e")" = old ] || fail "a failed op changed SRCDIR"
	[ "$(stat_get enospc)" -ge 3 ] || stat_wait_ge enospc 3 || return 1
	rm -f "$MNT/e"
}

test_fail_every_fails_only_every_nth() {
	: >"$MNT/n"
	ctl_set eio=write fail_every=3 || return 1
	local i res=
	for i in 1 2 3 4 5 6; do
		if printf '%s' "$i" >>"$MNT/n" 2>/dev/null; then res+=ok; else res+=EIO; fi
		res+=" "
	done
	ctl_clear || return 1
	[ "$res" = "ok ok EIO ok ok EIO " ] || fail "pattern: $res"
	[ "$(cat "$SRC/n")" = 1245 ] || fail "content: $(cat "$SRC/n")"
	rm -f "$MNT/n"
}

test_eio_all_then_clear_restores_everything() {
	echo keep >"$MNT/k"
	ctl_set eio=all || return 1
	ls "$MNT" >/dev/null 2>&1 && fail "ls succeeded under eio=all"
	cat "$MNT/k" >/dev/null 2>&1 && fail "cat succeeded under eio=all"
	ctl_set enospc=all || return 1
	echo z 2>/dev/null >"$MNT/z" && fail "create succeeded under enospc=all"
	ctl_clear || return 1
	[ "$(cat "$MNT/k")" = keep ] || fail "read after clear"
	echo z >"$MNT/z" && mv "$MNT/z" "$MNT/z2" && rm "$MNT/z2" "$MNT/k" || fail "ops after clear"
}

test_hang_blocks_cat_until_cleared() {
	echo "held data" >"$MNT/h"
	ctl_set hang=1 || return 1
	cat "$MNT/h" >"$T/hang.out" 2>&1 &
	local pid=$! i
	BG_PIDS+=("$pid")
	stat_wait_ge hanging 1 || return 1
	sleep 1
	kill -0 "$pid" 2>/dev/null || fail "cat finished while hang=1"
	[ ! -s "$T/hang.out" ] || fail "cat printed while hang=1: $(cat "$T/hang.out")"
	ctl_clear || return 1
	for i in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
	kill -0 "$pid" 2>/dev/null && fail "cat still blocked 5 s after hang was cleared"
	wait "$pid" || fail "cat failed after hang was cleared: $(cat "$T/hang.out")"
	[ "$(cat "$T/hang.out")" = "held data" ] || fail "cat printed: $(cat "$T/hang.out")"
	stat_wait_ge hung 1 || return 1
	[ "$(stat_get hanging)" = 0 ] || stat_wait_ge hanging 0 || return 1
	rm -f "$MNT/h"
}

test_sigterm_ends_faultfs_even_with_an_op_held_by_hang() {
	# A second faultfs of its own, so the shared one stays up.
	local d=$T/term pid cat_pid i
	mkdir -p "$d/src" "$d/mnt"
	echo data >"$d/src/f"
	echo hang=1 >"$d/ctl"
	"$FAULTFS" -f -o "ctl=$d/ctl" "$d/src" "$d/mnt" 2>"$d/log" &
	pid=$!
	BG_PIDS+=("$pid")
	CASE_MNTS+=("$d/mnt")
	for i in $(seq 100); do awk -v m="$d/mnt" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo && break; sleep 0.05; done
	cat "$d/mnt/f" >/dev/null 2>&1 &
	cat_pid=$!
	BG_PIDS+=("$cat_pid")
	for i in $(seq 100); do [ "$(sed -n 's/^hanging=//p' "$d/ctl.stats" 2>/dev/null)" = 1 ] && break; sleep 0.05; done
	[ "$(sed -n 's/^hanging=//p' "$d/ctl.stats")" = 1 ] || fail "the cat is not held (stats: $(head -n 6 "$d/ctl.stats" | tr '\n' ' '))"
	kill -TERM "$pid"
	for i in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
	kill -0 "$pid" 2>/dev/null && fail "faultfs still runs 5 s after SIGTERM with an op held by hang"
	wait "$cat_pid" && fail "the held cat succeeded; expected an error once faultfs exits"
	return 0
}

test_missing_control_file_means_no_faults() {
	ctl_set eio=all || return 1
	local before i
	before=$(stat_get config_loads)
	rm -f "$CTL"
	for i in $(seq 100); do [ "$(stat_get config_loads)" -gt "$before" ] && break; sleep 0.05; done
	echo ok >"$MNT/m" && [ "$(cat "$MNT/m")" = ok ] || fail "ops fail with no control file"
	rm -f "$MNT/m"
	: >"$CTL"
}

# ---------------------------------------------------------------- run

"$FAULTFS" -f -o "ctl=$CTL" "$SRC" "$MNT" 2>"$T/faultfs.log" &
FS_PID=$!
for _ in $(seq 100); do is_mounted && break; sleep 0.05; done
if ! is_mounted; then
	echo "t_faultfs: faultfs did not mount: $(cat "$T/faultfs.log")" >&2
	echo "0 passed, 1 failed"
	exit 1
fi
for _ in $(seq 40); do [ -s "$STATS" ] && break; sleep 0.05; done

passed=0 failed=0
for t in $(declare -F | awk '$3 ~ /^test_/ { print $3 }'); do
	if (trap case_cleanup EXIT; "$t"); then
		echo "PASS $t"
		passed=$((passed + 1))
	else
		echo "FAIL $t"
		failed=$((failed + 1))
	fi
done

# Last: the shared faultfs unmounts and exits 0, with no sanitizer report
# in its stderr (leaks are reported at exit, so this comes after unmount).
exit_rc=0
if ! fusermount3 -u "$MNT"; then
	exit_rc=unmount-failed
else
	for _ in $(seq 100); do kill -0 "$FS_PID" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$FS_PID" 2>/dev/null; then exit_rc=still-running; else wait "$FS_PID" || exit_rc=$?; fi
	FS_PID=
fi
if [ "$exit_rc" = 0 ] && ! grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$T/faultfs.log"; then
	echo "PASS faultfs unmounts and exits 0, stderr clean"
	passed=$((passed + 1))
else
	echo "FAIL faultfs unmounts and exits 0, stderr clean (exit: $exit_rc)"
	head -n 20 "$T/faultfs.log"
	failed=$((failed + 1))
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
