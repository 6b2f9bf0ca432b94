# lib.sh — helpers sourced by every tests/integration/t_*.sh group.
#
# A group file defines its cases as shell functions named test_*, then ends
# with `ck_main "$@"`. Each case runs in its own process (`bash t_x.sh --one
# test_name`) under a timeout, with its own temp dir, so a failing or hanging
# case cannot take the others down:
#
#   bash tests/integration/t_ops.sh                 run every case of the group
#   bash tests/integration/t_ops.sh test_a test_b   run only these cases
#   CKPTFS_BUILD=build-asan bash t_ops.sh           choose the build (default: build)
#
# Inside a case:
#   - `set -eE`: any command that fails unexpectedly fails the case, and the
#     ERR trap prints which command, with its status and line.
#   - ck_fail / assert_* print "FAIL: why" and end the case.
#   - ck_skip "why" ends the case as skipped (exit 77): for behaviour the
#     environment cannot provide, never to hide a failure.
#   - ck_mount / ck_umount / ck_kill9 start and stop the daemon on $CK_MNT over
#     $CK_BACKING with cache $CK_CACHE. The EXIT trap unmounts and kills only
#     what this case started (PIDs it recorded), then removes its temp dir.
#   - Every daemon PID and mountpoint is also written to a state file that the
#     case runner reads after the case ends, to clean up even after a kill -9
#     by the timeout.
#
# Group-level declarations (call at top level of the group file):
#   ck_slow test_name       skipped when CKPTFS_TEST_QUICK=1
#   ck_timeout test_name S  per-case timeout in seconds (default 120; x2 with ASan/quick)

set -u

CK_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CK_HELPERS=$CK_LIB_DIR/helpers
CK_REPO=$(cd "$CK_LIB_DIR/../.." && pwd)
PY=/usr/bin/python3
CK_GROUP=$(basename "${0%.sh}")

# The build under test. run.sh exports CKPTFS_BIN / CKPTFS_ADMIN.
if [ -z "${CKPTFS_BIN:-}" ]; then
	_b=${CKPTFS_BUILD:-build}
	case $_b in /*) ;; *) _b=$CK_REPO/$_b ;; esac
	CKPTFS_BIN=$_b/ckptfs
	CKPTFS_ADMIN=$_b/ckptfs-admin
	unset _b
fi
CKPTFS_ADMIN=${CKPTFS_ADMIN:-$(dirname "$CKPTFS_BIN")/ckptfs-admin}
export CKPTFS_BIN CKPTFS_ADMIN

CK_QUICK=${CKPTFS_TEST_QUICK:-0}
# Extra -o options for every daemon a case starts, e.g. packs=on (`make
# test-packs`): ck_mount adds them, and a case that starts the daemon itself
# builds its -o with ck_opts. They come before the case's own options, so an
# option the case names wins (the last of the same name wins).
CK_TEST_OPTS=${CKPTFS_TEST_MOUNT_OPTS:-}
export CKPTFS_TEST_MOUNT_OPTS=$CK_TEST_OPTS
# ck_opts "cache=DIR,..." — prints cache=DIR, then CK_TEST_OPTS, then the rest.
ck_opts() {
	local first=${1%%,*} rest=
	[ "$first" = "$1" ] || rest=${1#*,}
	printf '%s%s%s\n' "$first" "${CK_TEST_OPTS:+,$CK_TEST_OPTS}" "${rest:+,$rest}"
}
# True when the store is written with packs (-o packs=on in CK_TEST_OPTS).
ck_packs_on() {
	local o on=1 a
	IFS=, read -ra a <<<"$CK_TEST_OPTS"
	for o in "${a[@]}"; do
		case $o in packs | packs=on) on=0 ;; packs=off) on=1 ;; esac
	done
	return $on
}
# Seconds to wait for a mount to appear / a daemon to exit after unmount.
CK_MOUNT_TIMEOUT=${CK_MOUNT_TIMEOUT:-30}
CK_EXIT_TIMEOUT=${CK_EXIT_TIMEOUT:-90}
# Pass log=FILE to the daemon (its log is printed when a case fails).
CK_LOG_OPT=${CK_LOG_OPT:-1}
# Where per-case logs and state files go (run.sh sets one for the whole run).
_CK_OWN_ARTIFACTS=0
if [ -z "${CK_ARTIFACTS:-}" ]; then
	CK_ARTIFACTS=$(mktemp -d /tmp/ckptfs-it-logs.XXXXXX)
	export CK_ARTIFACTS
	_CK_OWN_ARTIFACTS=1
fi

declare -A _CK_SLOW=()
declare -A _CK_TIMEOUT=()
ck_slow() { _CK_SLOW[$1]=1; }
ck_timeout() { _CK_TIMEOUT[$1]=$2; }

MiB=$((1024 * 1024))
KiB=1024
GiB=$((1024 * MiB))

# ---------------------------------------------------------------- messages

ck_log() { printf '  %s\n' "$*" >&2; }

ck_fail() {
	printf 'FAIL: %s\n' "$*" >&2
	exit 1
}

ck_skip() {
	printf 'SKIP: %s\n' "$*" >&2
	exit 77
}

_ck_err_trap() {
	local rc=$1 cmd=$2 line=$3
	printf 'FAIL: command exited with status %s at %s.sh:%s: %s\n' "$rc" "$CK_GROUP" "$line" "$cmd" >&2
}

# ---------------------------------------------------------------- processes

# True if PID is running (a zombie counts as gone).
_ck_pid_alive() {
	local pid=$1 st
	[ -r "/proc/$pid/stat" ] || return 1
	st=$(sed -E 's/^[0-9]+ \(.*\) (.).*/\1/' "/proc/$pid/stat" 2>/dev/null) || return 1
	[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# True if PATH is a fuse mount point right now (reads the mount table, never
# touches the path itself, so a hung daemon cannot hang the check).
ck_is_mounted() {
	awk -v m="$1" '$5 == m { split($0, a, " - "); split(a[2], b, " "); if (b[1] ~ /^fuse/) f = 1 } END { exit !f }' /proc/self/mountinfo
}
# True if anything at all is mounted on PATH.
_ck_any_mount() {
	awk -v m="$1" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo
}

_ck_state() { [ -n "${CK_STATE:-}" ] && echo "$*" >>"$CK_STATE" || true; }

# Starts a helper command in the background; its PID is in $CK_BG_PID and is
# killed (only it) when the case ends.
_CK_BG=()
ck_bg() {
	"$@" &
	CK_BG_PID=$!
	_CK_BG+=("$CK_BG_PID")
	_ck_state "bg $CK_BG_PID"
}

# Waits up to $2 seconds (default 30) for the background PID $1, returns its
# status; fails the case on timeout.
ck_bg_wait() {
	local pid=$1 t=${2:-30} i=0 rc=0
	while _ck_pid_alive "$pid"; do
		i=$((i + 1))
		[ $i -le $((t * 20)) ] || ck_fail "background process $pid still running after ${t}s: $(tr '\0' ' ' </proc/"$pid"/cmdline 2>/dev/null)"
		sleep 0.05
	done
	wait "$pid" || rc=$?
	return $rc
}

# Waits until file $1 exists (a helper's "ready" signal), up to $2 s.
ck_wait_file() {
	local f=$1 t=${2:-30} i=0
	while [ ! -e "$f" ]; do
		i=$((i + 1))
		[ $i -le $((t * 20)) ] || ck_fail "timed out after ${t}s waiting for $f"
		sleep 0.05
	done
}

# ck_wait_log FILE PATTERN S — polls every 0.1 s, up to S seconds, until a
# line of FILE (a daemon's log) matches PATTERN (grep); non-zero if none
# did: the caller fails with what it waited for.
ck_wait_log() {
	local i=0
	until grep -q "$2" "$1"; do
		i=$((i + 1))
		[ $i -le $(($3 * 10)) ] || return 1
		sleep 0.1
	done
}

# ck_until_eq EXPECTED TRIES DESC CMD... — runs CMD every 0.1 s, at most
# TRIES times, until it prints EXPECTED, then asserts it does (DESC names
# what is compared): a state the daemon reaches in the background.
ck_until_eq() {
	local want=$1 tries=$2 desc=$3 i=0
	shift 3
	while [ "$("$@")" != "$want" ] && [ $i -lt "$tries" ]; do
		i=$((i + 1))
		sleep 0.1
	done
	assert_eq "$want" "$("$@")" "$desc"
}

# ---------------------------------------------------------------- the daemon

# Per-case directories (set in _ck_case_setup): CK_TMP (0755), CK_BACKING,
# CK_CACHE, CK_MNT, CK_REF (reference files on the local disk).
_CK_NMOUNT=0
CK_PID=
CK_DERR=
CK_DLOG=
_CK_DAEMONS=() # "pid:mnt:stderr:log" of every daemon this case started

# ck_mount [extra,-o,opts] — mounts CK_BACKING on CK_MNT (cache CK_CACHE) with
# the daemon in the foreground (-f) in the background; returns once the mount
# is in the mount table and the root answers stat.
ck_mount() {
	local extra=${1:-} opts i
	_CK_NMOUNT=$((_CK_NMOUNT + 1))
	CK_DERR=$CK_TMP/daemon.$_CK_NMOUNT.stderr
	CK_DLOG=$CK_TMP/daemon.$_CK_NMOUNT.log
	opts="cache=$CK_CACHE${CK_TEST_OPTS:+,$CK_TEST_OPTS}"
	[ "$CK_LOG_OPT" = 1 ] && opts+=",log=$CK_DLOG"
	[ -n "$extra" ] && opts+=",$extra"
	[ -x "$CKPTFS_BIN" ] || ck_fail "daemon binary $CKPTFS_BIN is missing (build it first)"
	ck_is_mounted "$CK_MNT" && ck_fail "ck_mount: $CK_MNT is already mounted"
	"$CKPTFS_BIN" -f -o "$opts" "$CK_BACKING" "$CK_MNT" >"$CK_DERR" 2>&1 </dev/null &
	CK_PID=$!
	_CK_DAEMONS+=("$CK_PID:$CK_MNT:$CK_DERR:$CK_DLOG")
	_ck_state "pid $CK_PID $CKPTFS_BIN"
	_ck_state "mnt $CK_MNT"
	i=0
	until ck_is_mounted "$CK_MNT"; do
		if ! _ck_pid_alive "$CK_PID"; then
			local rc=0
			wait "$CK_PID" || rc=$?
			ck_fail "daemon exited with status $rc before mounting $CK_MNT (-o $opts); stderr: $(tail -n 5 "$CK_DERR" | tr '\n' '|')"
		fi
		i=$((i + 1))
		[ $i -le $((CK_MOUNT_TIMEOUT * 20)) ] || ck_fail "mount did not appear on $CK_MNT within ${CK_MOUNT_TIMEOUT}s (daemon pid $CK_PID alive)"
		sleep 0.05
	done
	timeout 20 stat "$CK_MNT" >/dev/null || ck_fail "stat of the fresh mount $CK_MNT failed or hung"
}

# ck_mount_synclog [extra,-o,opts] — ck_mount with the daemon under
# build/synclog.so (LD_PRELOAD, tests/integration/helpers/synclog.c): every
# fsync/fdatasync ("sync PATH"), syncfs ("syncfs PATH") and unlink ("unlink
# PATH") it makes is appended, in order, to CK_SYNCLOG. What reached stable
# storage before what, without a power loss to pull.
ck_mount_synclog() {
	local shim
	shim=$(cd "$(dirname "$CKPTFS_BIN")" && pwd)/synclog.so
	[ -f "$shim" ] || ck_fail "$shim is missing (make $(dirname "$CKPTFS_BIN")/synclog.so)"
	CK_SYNCLOG=$CK_TMP/synclog
	: >"$CK_SYNCLOG"
	SYNCLOG=$CK_SYNCLOG LD_PRELOAD=$shim ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 \
		ck_mount "$@"
}

# ck_synclog_lines — how many events CK_SYNCLOG holds now; ck_synclog_since N
# prints those after the first N.
ck_synclog_lines() { wc -l <"$CK_SYNCLOG"; }
ck_synclog_since() { tail -n +$(($1 + 1)) "$CK_SYNCLOG"; }

# Prints the first lines of a sanitizer report (ASan, LeakSanitizer, UBSan)
# in FILE; false if it has none.
_ck_sanitizer_report() {
	[ -f "$1" ] && grep -q -E 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|SUMMARY: UndefinedBehaviorSanitizer' "$1" || return 1
	grep -m 3 -E 'ERROR:|runtime error:|#[0-4] ' "$1" | tr '\n' '|'
}

# Checks a daemon's stderr and log for sanitizer reports.
_ck_check_sanitizer() {
	local f out
	for f in "$@"; do
		if out=$(_ck_sanitizer_report "$f"); then
			ck_fail "sanitizer report in $f: $out"
		fi
	done
}

# Waits for our daemon PID to exit; sets _ck_rc to its status.
_ck_wait_daemon() {
	local pid=$1 t=$2 i=0
	_ck_rc=0
	while _ck_pid_alive "$pid"; do
		i=$((i + 1))
		[ $i -le $((t * 20)) ] || return 1
		sleep 0.05
	done
	wait "$pid" 2>/dev/null || _ck_rc=$?
	return 0
}

# ck_daemon_exit WHAT — after WHAT (an unmount, a signal) was done to our
# daemon: it must exit with status 0, with no sanitizer report (a leak at
# exit included, when ASAN_OPTIONS has detect_leaks=1), within
# CK_EXIT_TIMEOUT seconds.
ck_daemon_exit() {
	local what=$1 pid=$CK_PID
	[ -n "$pid" ] || ck_fail "ck_daemon_exit: no daemon started"
	_ck_wait_daemon "$pid" "$CK_EXIT_TIMEOUT" ||
		ck_fail "daemon $pid did not exit within ${CK_EXIT_TIMEOUT}s of $what; stderr: $(tail -n 5 "$CK_DERR" | tr '\n' '|')"
	CK_PID=
	_ck_state "exited $pid"
	_ck_check_sanitizer "$CK_DERR" "$CK_DLOG"
	[ "$_ck_rc" = 0 ] || ck_fail "daemon exited with status $_ck_rc after $what; stderr: $(tail -n 8 "$CK_DERR" | tr '\n' '|')"
	return 0
}

# ck_umount — fusermount3 -u, then the daemon must exit with status 0 (and no
# sanitizer report) within CK_EXIT_TIMEOUT seconds.
ck_umount() {
	local i=0 out
	[ -n "$CK_PID" ] || ck_fail "ck_umount: no daemon started"
	until out=$(fusermount3 -u "$CK_MNT" 2>&1); do
		i=$((i + 1))
		# EBUSY: a helper may still be closing a file; retry briefly.
		[ $i -le 40 ] || ck_fail "fusermount3 -u $CK_MNT failed: $out"
		sleep 0.1
	done
	ck_daemon_exit "a clean unmount (fusermount3 -u)"
	ck_is_mounted "$CK_MNT" && ck_fail "$CK_MNT still mounted after the daemon exited"
	return 0
}

# ck_term — SIGTERM to our daemon (a service or container stop), which must
# exit as after ck_umount, even with files still open; then no mount is left.
ck_term() {
	[ -n "$CK_PID" ] || ck_fail "ck_term: no daemon started"
	kill -TERM "$CK_PID"
	ck_daemon_exit SIGTERM
	if ck_is_mounted "$CK_MNT"; then
		fusermount3 -u "$CK_MNT" 2>/dev/null || umount -l "$CK_MNT" 2>/dev/null || true
	fi
	ck_is_mounted "$CK_MNT" && ck_fail "$CK_MNT still mounted after SIGTERM"
	return 0
}

ck_remount() {
	ck_umount
	ck_mount "${1:-}"
}

# _ck_stop_tree PID... — SIGSTOP each PID, then its children (found once
# their parent is stopped, so none is forked after the scan), and so on
# down; prints the PIDs stopped.
_ck_stop_tree() {
	local p
	for p in "$@"; do
		kill -STOP "$p" 2>/dev/null || continue
		echo "$p"
		# shellcheck disable=SC2046
		_ck_stop_tree $(ps -o pid= --ppid "$p")
	done
}

# ck_killed9 — the daemon was killed (kill -9) by a process of the case (a
# writer that kills it the moment its close returns, a trainer test's
# `kill -9 "$CK_PID"`): waits for it, records it, clears the dead mount and
# checks the daemon's sanitizer output, as ck_kill9 does after its own kill.
ck_killed9() {
	[ -n "$CK_PID" ] || ck_fail "ck_killed9: no daemon started"
	_ck_wait_daemon "$CK_PID" 20 || ck_fail "daemon $CK_PID still runs 20 s after its kill -9"
	_ck_state "exited $CK_PID"
	CK_PID=
	fusermount3 -u "$CK_MNT" 2>/dev/null || umount -l "$CK_MNT" 2>/dev/null || true
	ck_is_mounted "$CK_MNT" && ck_fail "could not clear the mount $CK_MNT after kill -9"
	_ck_check_sanitizer "$CK_DERR"
	return 0
}


# ck_kill9 [PID...] — SIGKILL the daemon we started, then the given helper
# PIDs with all their descendants (writers that must not go on into whatever
# is mounted next: a trainer's forked ranks would otherwise outlive their
# parent and write into the cleared mountpoint), and clear the dead mount.
# The helpers are stopped before the daemon dies (requests they have in
# flight stay in flight) and killed after it.
ck_kill9() {
	local p tree
	[ -n "$CK_PID" ] || ck_fail "ck_kill9: no daemon started"
	tree=$(_ck_stop_tree "$@")
	kill -9 "$CK_PID"
	_ck_wait_daemon "$CK_PID" 20 || ck_fail "daemon $CK_PID survived kill -9 for 20s"
	_ck_state "exited $CK_PID"
	CK_PID=
	for p in $tree; do
		kill -9 "$p" 2>/dev/null || true
	done
	for p in "$@"; do
		wait "$p" 2>/dev/null || true
	done
	fusermount3 -u "$CK_MNT" 2>/dev/null || umount -l "$CK_MNT" 2>/dev/null || true
	ck_is_mounted "$CK_MNT" && ck_fail "could not clear the mount $CK_MNT after kill -9"
	_ck_check_sanitizer "$CK_DERR"
	return 0
}

# Prints the tail of every daemon's stderr/log of this case (on failure).
_ck_dump_daemon_logs() {
	local d pid mnt err log
	for d in "${_CK_DAEMONS[@]}"; do
		IFS=: read -r pid mnt err log <<<"$d"
		if [ -s "$err" ]; then
			echo "---- daemon $pid stderr ($err), last 25 lines:"
			tail -n 25 "$err"
		fi
		if [ -s "$log" ]; then
			echo "---- daemon $pid log ($log), last 25 lines:"
			tail -n 25 "$log"
		fi
	done
}

# A sanitizer report (a leak at exit included) of any daemon this case
# started, also one the EXIT trap stopped: prints a FAIL line, returns 1.
_ck_daemons_sanitizer_clean() {
	local d pid mnt err log f out
	for d in "${_CK_DAEMONS[@]}"; do
		IFS=: read -r pid mnt err log <<<"$d"
		for f in "$err" "$log"; do
			if out=$(_ck_sanitizer_report "$f"); then
				printf 'FAIL: sanitizer report in %s: %s\n' "$f" "$out" >&2
				return 1
			fi
		done
	done
	return 0
}

# Removes every mount and process this case started (EXIT trap); returns 1
# if a daemon of the case left a sanitizer report.
_ck_cleanup() {
	local d pid mnt err log p rc=0
	for p in "${_CK_BG[@]}"; do
		_ck_pid_alive "$p" && kill -9 "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	for d in "${_CK_DAEMONS[@]}"; do
		IFS=: read -r pid mnt err log <<<"$d"
		if _ck_pid_alive "$pid"; then
			ck_is_mounted "$mnt" && timeout 10 fusermount3 -u "$mnt" 2>/dev/null
			_ck_wait_daemon "$pid" 10 || { kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }
		fi
		ck_is_mounted "$mnt" && { timeout 10 fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null; }
	done
	_ck_daemons_sanitizer_clean || rc=1
	# Extra mounts a case registered (ck_register_mount), e.g. bind mounts.
	for mnt in "${_CK_EXTRA_MOUNTS[@]}"; do
		if ck_is_mounted "$mnt"; then
			timeout 10 fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null
		fi
		_ck_any_mount "$mnt" && umount -l "$mnt" 2>/dev/null
	done
	if [ -n "${CK_TMP:-}" ] && [ -d "$CK_TMP" ]; then
		if awk -v t="$CK_TMP/" 'index($5, t) == 1 { f = 1 } END { exit !f }' /proc/self/mountinfo; then
			echo "WARNING: something is still mounted under $CK_TMP; not removing it" >&2
		else
			chmod -R u+rwX "$CK_TMP" 2>/dev/null
			rm -rf --one-file-system "$CK_TMP"
		fi
	fi
	return $rc
}

# Registers a path on which this case may mount something other than through
# ck_mount (bind mounts, a daemon started in daemon mode): unmounted at exit.
_CK_EXTRA_MOUNTS=()
ck_register_mount() {
	[[ " ${_CK_EXTRA_MOUNTS[*]} " == *" $1 "* ]] && return 0
	_CK_EXTRA_MOUNTS+=("$1")
	_ck_state "mnt $1"
}

# ck_write_small DIR N SEED — N files f000.. of 1 B to 60 KiB of random bytes
# in DIR (created), each closed before the next; a copy of each in
# CK_REF/<DIR's basename>, to compare with (t_smallfiles, t_packs).
ck_write_small() {
	"$PY" - "$1" "$2" "$3" "$CK_REF/$(basename "$1")" <<'EOF'
import os, random, sys
d, n, seed, ref = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rnd = random.Random(seed)
os.makedirs(d, exist_ok=True)
os.makedirs(ref, exist_ok=True)
for i in range(n):
    size = rnd.choice([1, 100, 4096, rnd.randint(1, 60 * 1024)])
    data = rnd.randbytes(size)
    with open(os.path.join(ref, "f%03d" % i), "wb") as f:
        f.write(data)
    fd = os.open(os.path.join(d, "f%03d" % i), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    os.write(fd, data)
    os.close(fd)
EOF
}

# ---- shared by groups: BACKING behind tests/faultfs, and another user

# ck_faultfs_up — mounts faultfs (store in CK_TMP/store, control file
# CK_TMP/ctl) and makes it this case's BACKING; its pid in CK_FAULTFS_PID.
CK_FAULTFS=$(dirname "${CKPTFS_BIN:-build/ckptfs}")/faultfs
ck_faultfs_up() {
	[ -x "$CK_FAULTFS" ] || ck_fail "$CK_FAULTFS is missing (make $(dirname "$CKPTFS_BIN")/faultfs)"
	mkdir -p "$CK_TMP/store" "$CK_TMP/fmnt"
	: >"$CK_TMP/ctl"
	ck_register_mount "$CK_TMP/fmnt"
	ck_bg "$CK_FAULTFS" -f -o "ctl=$CK_TMP/ctl" "$CK_TMP/store" "$CK_TMP/fmnt" 2>"$CK_TMP/faultfs.err"
	CK_FAULTFS_PID=$CK_BG_PID
	local i=0
	until ck_is_mounted "$CK_TMP/fmnt"; do
		i=$((i + 1))
		[ $i -le 200 ] || ck_fail "faultfs did not mount: $(cat "$CK_TMP/faultfs.err")"
		sleep 0.05
	done
	CK_BACKING=$CK_TMP/fmnt
}

# ck_fault "key=value" ... — replaces faultfs's whole fault configuration.
ck_fault() {
	printf '%s\n' "$@" >"$CK_TMP/ctl.tmp"
	mv "$CK_TMP/ctl.tmp" "$CK_TMP/ctl"
	sleep 0.3 # faultfs looks at most every 100 ms
}

# Another user, for permission cases (allow_other mounts).
NOBODY=65534
as_nobody() { setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups "$@"; }

# ck_at_exit CMD — CMD (a string, eval'd) runs when the case ends, on every
# path, before the harness stops what the case left (a private server the
# case started: ganesha, a trainer's process group); the case's status is
# kept whatever CMD returns. A case's own `trap ... EXIT` would replace the
# harness's, and one that runs a command before calling it loses the status
# (a failing case then passes).
_CK_AT_EXIT=()
ck_at_exit() { _CK_AT_EXIT+=("$1"); }

_ck_exit_trap() {
	local rc=$? c
	trap - ERR
	set +eE
	for c in "${_CK_AT_EXIT[@]}"; do
		eval "$c" || true
	done
	if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
		_ck_dump_daemon_logs >&2
	fi
	# a passing case fails if a daemon it left for this trap to stop leaked
	_ck_cleanup || { [ $rc -eq 0 ] && rc=1; }
	exit $rc
}

# ---------------------------------------------------------------- assertions

assert_eq() { # expected actual [what]
	[ "$1" == "$2" ] || ck_fail "${3:-value}: expected '$1', got '$2'"
}
assert_ne() {
	[ "$1" != "$2" ] || ck_fail "${3:-value}: expected something other than '$1'"
}
assert_lt() { # a b [what]: integer a < b
	[ "$1" -lt "$2" ] || ck_fail "${3:-value}: expected $1 < $2"
}
assert_le() {
	[ "$1" -le "$2" ] || ck_fail "${3:-value}: expected $1 <= $2"
}
assert_ge() {
	[ "$1" -ge "$2" ] || ck_fail "${3:-value}: expected $1 >= $2"
}
assert_contains() { # haystack needle [what]
	[[ "$1" == *"$2"* ]] || ck_fail "${3:-text}: '$1' does not contain '$2'"
}
assert_not_contains() {
	[[ "$1" != *"$2"* ]] || ck_fail "${3:-text}: '$1' contains '$2'"
}

# Byte-for-byte equality of two files (expected first).
assert_file_eq() {
	local exp=$1 act=$2 out se sa
	[ -e "$act" ] || ck_fail "$act does not exist (expected a copy of $exp)"
	if ! out=$(cmp -- "$exp" "$act" 2>&1); then
		se=$(stat -c %s "$exp" 2>/dev/null)
		sa=$(stat -c %s "$act" 2>/dev/null)
		ck_fail "content differs: $act vs $exp (sizes $sa vs $se): $out"
	fi
}

assert_size() { # path size
	local s
	s=$(stat -c %s "$1") || ck_fail "stat $1 failed"
	[ "$s" = "$2" ] || ck_fail "size of $1: expected $2, got $s"
}

assert_exists() { [ -e "$1" ] || [ -L "$1" ] || ck_fail "$1 should exist"; }
assert_not_exists() {
	local r
	r=$(fsop lstat "$1")
	[ "$r" = ENOENT ] || ck_fail "$1 should not exist (lstat: $r)"
}

# assert_ok cmd... : the command succeeds (its output is shown if not).
assert_ok() {
	local out rc=0
	out=$("$@" 2>&1) || rc=$?
	[ $rc -eq 0 ] || ck_fail "'$*' failed with status $rc: $(echo "$out" | tail -n 5 | tr '\n' '|')"
}
# assert_fails cmd... : the command exits non-zero.
assert_fails() {
	local rc=0
	"$@" >/dev/null 2>&1 || rc=$?
	[ $rc -ne 0 ] || ck_fail "'$*' succeeded, expected a failure"
}

# fsop OP ARGS... : runs one syscall through helpers/fsop.py; prints OK (or a
# value) or the errno name (ENOENT, ...).
fsop() { "$PY" "$CK_HELPERS/fsop.py" "$@"; }
# assert_op EXPECTED OP ARGS... : e.g. assert_op ENOTEMPTY rmdir "$CK_MNT/d"
assert_op() {
	local exp=$1 got
	shift
	got=$(fsop "$@") || ck_fail "fsop $* crashed"
	[ "$got" = "$exp" ] || ck_fail "$*: expected $exp, got $got"
}

# ---------------------------------------------------------------- data

# ck_rand PATH SIZE — SIZE random bytes into PATH.
ck_rand() {
	head -c "$2" /dev/urandom >"$1"
	[ "$(stat -c %s "$1")" = "$2" ] || ck_fail "could not write $2 random bytes to $1"
}
ck_sha256() { "$PY" "$CK_HELPERS/sha256.py" "$@"; }
ck_size() { stat -c %s "$1"; }
# Disk usage in bytes (blocks actually allocated) of a tree.
ck_du() { du -s --block-size=1 "$1" | cut -f1; }

# ck_save_step N SIZE_MIB — a committed generation run/step-N of SIZE_MIB MiB
# of random bytes (its reference copy in CK_REF/run/step-N/model.pt).
ck_save_step() {
	local n=$1 mib=$2
	mkdir -p "$CK_MNT/run/step-$n" "$CK_REF/run/step-$n"
	head -c $((mib * MiB)) /dev/urandom >"$CK_REF/run/step-$n/model.pt"
	cp "$CK_REF/run/step-$n/model.pt" "$CK_MNT/run/step-$n/model.pt"
	setfattr -n user.ckptfs.commit -v 1 "$CK_MNT/run/step-$n"
}

# ck_xor_byte FILE POS — flips bits of one byte in place (twice restores it).
ck_xor_byte() {
	"$PY" -c 'import sys
f = open(sys.argv[1], "r+b"); f.seek(int(sys.argv[2])); b = f.read(1)
assert len(b) == 1, "offset past the end"
f.seek(int(sys.argv[2])); f.write(bytes([b[0] ^ 0x5a])); f.close()' "$1" "$2"
}

# ck_obj_rel HASH — a chunk object's path under a cache or BACKING (FORMAT.md).
ck_obj_rel() { echo "chunks/${1:0:2}/${1:2:2}/$1"; }

# ---------------------------------------------------------------- catalog

ck_catalog() { echo "$CK_CACHE/catalog.db"; }
# ck_sql "SELECT ..." — one query on the catalog (read only use).
ck_sql() {
	[ -f "$CK_CACHE/catalog.db" ] || ck_fail "no catalog at $CK_CACHE/catalog.db"
	sqlite3 -batch -bail "$CK_CACHE/catalog.db" "$1" || ck_fail "catalog query failed: $1"
}
# Sum of the plain lengths of all distinct chunks: the unique data stored.
ck_unique_bytes() { ck_sql 'SELECT coalesce(sum(plain_len), 0) FROM chunks'; }
ck_chunk_count() { ck_sql 'SELECT count(*) FROM chunks'; }

# ck_wait_durable [TIMEOUT_S] — waits (60 s by default) until the upload queue
# is empty and every committed generation's current version is durable on
# BACKING; fails the case saying how many are not.
ck_wait_durable() {
	local t=${1:-60} i=0 left
	while :; do
		left=$(ck_sql "SELECT (SELECT COUNT(*) FROM uploads) + (SELECT COUNT(*) FROM generations WHERE state = 1 AND durable_version != version)")
		[ "$left" = 0 ] && return 0
		i=$((i + 1))
		[ $i -le $((t * 10)) ] || ck_fail "after ${t}s, $left uploads or generations are still not durable on BACKING"
		sleep 0.1
	done
}

# ---------------------------------------------------------------- chunk objects, loose or packed
#
# With -o packs=on (CK_TEST_OPTS, `make test-packs`) the small chunk objects
# live in pack files on BACKING (docs/FORMAT.md "Pack object"), not at
# chunks/ab/cd/<hex>. These helpers see both, so that a case counts, measures
# or damages "the object of chunk H" the same way in either layout.

# ck_store_format N — the format line's number a store of format N (3, or 4
# with codec=zstd) has after a mount with the run's options: N, or 5 when
# they turn packs on (FORMAT.md: the first mount with packs writes format 5).
ck_store_format() {
	if ck_packs_on && [ "$1" -lt 5 ]; then echo 5; else echo "$1"; fi
}

# ck_backing_objects [DIR] — how many chunk objects DIR (default CK_BACKING)
# holds: the loose files under chunks/, plus the members of every pack file
# under packs/ (the member count in its header, bytes 16-19).
ck_backing_objects() {
	local d=${1:-$CK_BACKING} loose packed
	loose=$(find "$d/chunks" -type f 2>/dev/null | wc -l)
	packed=$(find "$d/packs" -type f -name '*.ckp' -exec od -A n -t u4 -j 16 -N 4 {} \; 2>/dev/null |
		awk '{ s += $1 } END { print s + 0 }')
	echo $((loose + packed))
}

# ck_backing_object_bytes [DIR] — bytes of the chunk objects DIR (default
# CK_BACKING) holds: the loose files under chunks/ and the pack files.
ck_backing_object_bytes() {
	local d=${1:-$CK_BACKING}
	{ find "$d/chunks" -type f -printf '%s\n' 2>/dev/null; find "$d/packs" -type f -name '*.ckp' -printf '%s\n' 2>/dev/null; } |
		awk '{ s += $1 } END { printf "%.0f\n", s }'
}

# ck_obj_place H — where chunk H's object is on CK_BACKING, as "PATH OFF LEN":
# a member of a pack (the catalog's chunks.pack, pack_off, pack_len) or its
# loose file (offset 0, its size). Fails the case if neither is there.
ck_obj_place() {
	local h=$1 row pack off len loose
	loose=$CK_BACKING/chunks/${h:0:2}/${h:2:2}/$h
	row=$(sqlite3 -batch "$CK_CACHE/catalog.db" "SELECT lower(hex(pack)), pack_off, pack_len FROM chunks WHERE lower(hex(hash)) = '$h' AND pack IS NOT NULL" 2>/dev/null) || row=
	if [ -n "$row" ]; then
		IFS='|' read -r pack off len <<<"$row"
		[ -f "$CK_BACKING/packs/${pack:0:2}/$pack.ckp" ] || ck_fail "chunk $h: its pack $pack is not on BACKING"
		echo "$CK_BACKING/packs/${pack:0:2}/$pack.ckp $off $len"
	elif [ -f "$loose" ]; then
		echo "$loose 0 $(ck_size "$loose")"
	else
		ck_fail "chunk $h: no object on BACKING (no pack row, nothing at $loose)"
	fi
}

# ck_obj_is_packed H — true if chunk H's object on CK_BACKING is a pack member.
ck_obj_is_packed() {
	local place
	place=$(ck_obj_place "$1")
	[ "${place#"$CK_BACKING"/packs/}" != "$place" ]
}

# ck_obj_get H FILE — copies chunk H's object image on CK_BACKING (loose or
# packed) to FILE; ck_obj_put H FILE writes FILE back over that place (it
# must be the same length: a member's neighbours are never touched).
ck_obj_get() {
	local path off len
	read -r path off len <<<"$(ck_obj_place "$1")"
	dd if="$path" of="$2" bs=1M skip="$off" count="$len" status=none iflag=skip_bytes,count_bytes 2>/dev/null ||
		ck_fail "cannot read chunk $1's object from $path at $off"
	[ "$(ck_size "$2")" = "$len" ] || ck_fail "chunk $1's object at $path+$off: read $(ck_size "$2") of $len bytes"
}
ck_obj_put() {
	local path off len
	read -r path off len <<<"$(ck_obj_place "$1")"
	[ "$(ck_size "$2")" = "$len" ] || ck_fail "ck_obj_put: $2 is $(ck_size "$2") bytes, chunk $1's object is $len"
	dd if="$2" of="$path" bs=1M seek="$off" conv=notrunc status=none oflag=seek_bytes ||
		ck_fail "cannot write chunk $1's object into $path at $off"
}

# ck_objcheck [--allow-orphans] — the chunk objects in the cache and on
# CK_BACKING against the catalog (helpers/objcheck.py; the daemon stopped):
# logs its summary, or fails the case with its first problems.
ck_objcheck() {
	local out rc=0
	out=$("$PY" "$CK_HELPERS/objcheck.py" "$CK_BACKING" "$CK_CACHE" "$@" 2>&1) || rc=$?
	[ $rc = 0 ] || ck_fail "chunk objects in the cache and on BACKING vs the catalog: $(echo "$out" | head -n 8 | tr '\n' '|')"
	ck_log "$(echo "$out" | tail -n 1)"
}

# ck_staging_files PID — "SIZE ALLOCATED" of each staging file the daemon
# PID holds open (CACHE/staging/, unlinked: seen through /proc/PID/fd).
ck_staging_files() {
	local fd
	for fd in /proc/$1/fd/*; do
		case "$(readlink "$fd")" in
		"$CK_CACHE"/staging/*) stat -L -c '%s %b %B' "$fd" | awk '{ print $1, $2 * $3 }' ;;
		esac
	done
}

# ck_late_start DIR / ck_late CMD ARG... / ck_late_end — a file staged late
# by -o writebuf written step by step (helpers/wbuf_late.py, its commands);
# ck_late fails the case unless the step answered ok; ck_late_end closes its
# input and waits for it (CK_REF/sums then holds big.bin's SHA-256).
ck_late_start() {
	coproc CK_LATE { "$PY" "$CK_HELPERS/wbuf_late.py" "$1" "$CK_REF/sums" 2>"$CK_TMP/late.err"; }
}
ck_late() {
	local line
	echo "$*" >&"${CK_LATE[1]}"
	read -r -t 120 line <&"${CK_LATE[0]}" && [ "$line" = ok ] ||
		ck_fail "wbuf_late.py '$*' failed: $(cat "$CK_TMP/late.err")"
}
ck_late_end() {
	eval "exec ${CK_LATE[1]}>&-"
	wait "$CK_LATE_PID" || ck_fail "wbuf_late.py failed: $(cat "$CK_TMP/late.err")"
}

# ck_admin_stat KEY — the value of line "KEY N" of `ckptfs-admin stats`.
ck_admin_stat() {
	local out
	out=$("$CKPTFS_ADMIN" stats --cache "$CK_CACHE" 2>&1) || ck_fail "ckptfs-admin stats --cache $CK_CACHE failed: $out"
	echo "$out" | awk -v k="$1" '($1 == k || $1 == k":") { print $2; f = 1; exit } END { exit !f }' ||
		ck_fail "ckptfs-admin stats has no line '$1 N'; output: $(echo "$out" | tr '\n' '|')"
}

# ck_admin_rc RC ARGS... — ckptfs-admin ARGS exits RC; stdout in
# $CK_TMP/out, stderr in $CK_TMP/err.
ck_admin_rc() {
	local want=$1 rc=0
	shift
	"$CKPTFS_ADMIN" "$@" >"$CK_TMP/out" 2>"$CK_TMP/err" </dev/null || rc=$?
	[ "$rc" = "$want" ] || ck_fail "ckptfs-admin $*: exit $rc, expected $want; stdout: $(head -n 8 "$CK_TMP/out" | tr '\n' '|') stderr: $(head -n 5 "$CK_TMP/err" | tr '\n' '|')"
}

# ck_list_gen MNT NAME — generation NAME as `ckptfs-admin --json list --all
# MNT` shows it: "STATE RULE STEP" on one line, its held reason on the next.
ck_list_gen() {
	ck_admin_rc 0 --json list --all "$1"
	"$PY" -c '
import json, sys
g = [g for g in json.load(open(sys.argv[1])) if g["name"] == sys.argv[2]]
if g:
    print(g[0]["state"], g[0]["rule"], g[0]["step"])
    print(g[0]["held_reason"])
' "$CK_TMP/out" "$2"
}

# Does ckptfs-admin know COMMAND? (looks at its usage text)
ck_admin_has() {
	[ -x "$CKPTFS_ADMIN" ] || return 1
	"$CKPTFS_ADMIN" --help 2>&1 | grep -q -w -- "$1" && return 0
	"$CKPTFS_ADMIN" 2>&1 | grep -q -w -- "$1"
}

# ---------------------------------------------------------------- BACKING's claim
#
# The claim (fs/lib/claim.h, docs/FORMAT.md "The claim") is the directory
# claims/ of epochs, files named by 20 digits, each made once by an
# exclusive create; the claim is the largest epoch's record. ckptfs.claim,
# format 1's claim file, is a marker directory (with a README) older ckptfs
# stop at. A BACKING may be a directory or nfs:// (then through
# build/backing-tool, beside CKPTFS_BIN).

_ck_btool() { "$(dirname "$CKPTFS_BIN")/backing-tool" "$@"; }

# ck_claim_epochs [BACKING] — the epochs' names in claims/, one a line, sorted.
ck_claim_epochs() {
	local b=${1:-$CK_BACKING} names
	case $b in
	nfs://*) names=$(_ck_btool "$b" ls claims 2>/dev/null) || names= ;;
	*) names=$(ls "$b/claims" 2>/dev/null) || names= ;;
	esac
	printf '%s\n' "$names" | grep -E '^[0-9]{20}$' | sort || true
}

# ck_claim [BACKING] — the claim's text: the largest epoch's. A holder
# removes epochs below its own less one after each renewal (claim.h 10): a
# largest epoch gone between the listing and the read is looked up again.
# Fails the case when there is no epoch.
ck_claim() {
	local b=${1:-$CK_BACKING} i top text
	for i in $(seq 50); do
		top=$(ck_claim_epochs "$b" | tail -n 1)
		[ -n "$top" ] || ck_fail "no claim on $b (claims/ has no epoch)"
		case $b in
		nfs://*) text=$(_ck_btool "$b" get "claims/$top" - 2>/dev/null) ;;
		*) text=$(cat "$b/claims/$top" 2>/dev/null) ;;
		esac && { printf '%s\n' "$text"; return 0; }
		sleep 0.1
	done
	ck_fail "the claim's largest epoch of $b keeps going away: $(ck_claim_epochs "$b" | tr '\n' ' ')"
}

# ck_claim_field FIELD [FILE] — a field of the claim (or of the record in FILE).
ck_claim_field() {
	if [ -n "${2:-}" ]; then sed -n "s/^$1 //p" "$2"; else ck_claim | sed -n "s/^$1 //p"; fi
}

# ck_claim_plant [BACKING] <TEXT — TEXT as the next epoch, made as any party
# makes one (claim.h 1): an exclusive create of the largest + 1 (a complete
# file linked in, for a directory), again with the next number if another
# made that one first. Prints its name. A holder that sees it is fenced;
# a mount judges it as the claim.
ck_claim_plant() {
	local b=${1:-$CK_BACKING} text tmp top next i
	text=$(cat)
	tmp=$(mktemp "$CK_TMP/plant.XXXXXX")
	printf '%s\n' "$text" >"$tmp"
	case $b in nfs://*) ;; *) mkdir -p "$b/claims" ;; esac
	for i in $(seq 20); do
		top=$(ck_claim_epochs "$b" | tail -n 1)
		next=$(printf '%020d' $((10#${top:-0} + 1)))
		case $b in
		nfs://*) _ck_btool "$b" putnew "$tmp" "claims/$next" >/dev/null 2>&1 ;;
		*) cp "$tmp" "$b/claims/.plant.$$" && ln "$b/claims/.plant.$$" "$b/claims/$next" 2>/dev/null ;;
		esac
		local rc=$?
		case $b in nfs://*) ;; *) rm -f "$b/claims/.plant.$$" ;; esac
		[ $rc != 0 ] || { rm -f "$tmp"; echo "$next"; return 0; }
	done
	ck_fail "could not plant a claim on $b in 20 tries: $(ck_claim_epochs "$b" | tail -n 3 | tr '\n' ' ')"
}

# ck_claim_record CATALOG HOST CACHE PID RENEWED [LINE...] — a claim's record
# (the first lines of docs/FORMAT.md "The claim"; LINEs after, e.g. "mode
# shared", "released yes"), of a made-up instance and boot id.
ck_claim_record() {
	printf 'ckptfs claim 1\ncatalog %s\ninstance %s\nhost %s\nboot %s\ncache %s\npid %s\nrenewed %s\n' \
		"$1" fedcba9876543210fedcba9876543210 "$2" 00000000-0000-0000-0000-000000000000 "$3" "$4" "$5"
	shift 5
	[ $# = 0 ] || printf '%s\n' "$@"
}

# ck_claim_state [BACKING] — what the claim is on BACKING, to compare before
# and after something that must not touch it: the epochs' names, the
# largest's text and what ckptfs.claim is, with its files' checksums (a
# directory BACKING).
ck_claim_state() {
	local b=${1:-$CK_BACKING}
	ck_claim_epochs "$b" | tr '\n' ' '
	echo
	ck_claim "$b"
	stat -c '%F' "$b/ckptfs.claim" 2>/dev/null || echo "no ckptfs.claim"
	(cd "$b" && find ckptfs.claim -type f -exec sha256sum {} + 2>/dev/null) || true
}

# ck_claim_epochs_only_of INSTANCE — every epoch in claims/ of CK_BACKING is
# a record of the take INSTANCE (a holder's renewals): nobody else made one.
ck_claim_epochs_only_of() {
	local e others=
	for e in $(ck_claim_epochs); do
		grep -qx "instance $1" "$CK_BACKING/claims/$e" 2>/dev/null ||
			[ ! -e "$CK_BACKING/claims/$e" ] || others+=" $e"
	done
	[ -z "$others" ] || ck_fail "epochs not of the holder's take $1:$others: $(tr '\n' '|' <"$CK_BACKING/claims/${others##* }")"
}

# ck_backing_snapshot DIR — every file of BACKING DIR but temporaries and the
# claim (claims/, a new epoch at each renewal; ckptfs.claim, the marker:
# ck_claim_state compares those), with its SHA-256. A file that goes between
# find and sha256sum (the holder replacing its tree manifest) is left out of
# this snapshot, not an error: the snapshots then differ, which is what
# ck_backing_quiet waits out and the cases that compare them fail on.
ck_backing_snapshot() {
	(cd "$1" && find . \( -path ./tmp -o -path ./claims -o -path ./ckptfs.claim \) -prune -o -type f -print0 | sort -z |
		{ xargs -0 -r sha256sum 2>/dev/null || true; })
}

# ck_backing_quiet — waits until the holder is done writing CK_BACKING after
# a save: on an idle round up to 1 s after the uploads end (UP_TREE_EVERY_S)
# it writes the tree manifest (manifests/tree/), which ck_wait_durable does
# not wait for; on a busy machine (two lanes of run.sh) that write came
# between the snapshots of a case and was taken for one of another party.
ck_backing_quiet() {
	local a b i=0
	b=$(ck_backing_snapshot "$CK_BACKING")
	while :; do
		sleep 2
		a=$b
		b=$(ck_backing_snapshot "$CK_BACKING")
		[ "$a" != "$b" ] || return 0
		i=$((i + 1))
		[ $i -le 15 ] || ck_fail "BACKING still changes 30 s after the uploads ended"
	done
}

# ---------------------------------------------------------------- running

_ck_case_setup() {
	CK_TMP=$(mktemp -d /tmp/ckptfs-it.XXXXXX)
	chmod 755 "$CK_TMP" # other users (t_perms) must reach the mountpoint
	_ck_state "tmp $CK_TMP"
	CK_BACKING=$CK_TMP/backing
	CK_CACHE=$CK_TMP/cache
	CK_MNT=$CK_TMP/mnt
	CK_REF=$CK_TMP/ref
	mkdir -p "$CK_BACKING" "$CK_CACHE" "$CK_MNT" "$CK_REF"
	chmod 755 "$CK_MNT"
	export TMPDIR=$CK_TMP
}

# Lists the test_* functions of the group file in the order they are defined.
_ck_cases() {
	grep -o -E '^test_[A-Za-z0-9_]+ *\(\)' "$0" | sed -E 's/ *\(\)//'
}

# Kills/unmounts whatever a finished case left behind, from its state file.
# Prints a line per leftover.
_ck_reap() {
	local state=$1 kind a b alive
	[ -f "$state" ] || return 0
	declare -A exited=()
	while read -r kind a b; do
		[ "$kind" = exited ] && exited[$a]=1
	done <"$state"
	while read -r kind a b; do
		case $kind in
		bg | pid)
			[ -n "${exited[$a]:-}" ] && continue
			_ck_pid_alive "$a" || continue
			# Only a process this case started: its command line must still
			# be ours (the PID was not reused).
			alive=$(tr '\0' ' ' <"/proc/$a/cmdline" 2>/dev/null)
			if [ "$kind" = bg ] || [[ "$alive" == *"${b:-ckptfs}"* ]]; then
				echo "leftover process $a ($alive): killed"
				kill -9 "$a" 2>/dev/null
			fi
			;;
		mnt)
			if _ck_any_mount "$a"; then
				echo "leftover mount $a: lazily unmounted"
				fusermount3 -u -z "$a" 2>/dev/null || umount -l "$a" 2>/dev/null
			fi
			;;
		esac
	done <"$state"
	while read -r kind a b; do
		if [ "$kind" = tmp ] && [ -d "$a" ]; then
			if ! awk -v t="$a/" 'index($5, t) == 1 { f = 1 } END { exit !f }' /proc/self/mountinfo; then
				rm -rf --one-file-system "$a"
			fi
		fi
	done <"$state"
}

_ck_run_one() {
	local name=$1
	declare -F "$name" >/dev/null || {
		echo "FAIL: no case named $name in $0" >&2
		exit 2
	}
	trap _ck_exit_trap EXIT
	trap 'exit 143' TERM
	trap 'exit 130' INT
	_ck_case_setup
	set -eE
	trap '_ck_err_trap $? "$BASH_COMMAND" $LINENO' ERR
	cd "$CK_TMP"
	"$name"
	set +eE
	trap - ERR
	exit 0
}

# Runs the cases (all, or those named) one process each, prints one line per
# case, appends "PASS|FAIL|SKIP group/case" to $CK_RESULTS if set.
_ck_run_group() {
	local names=("$@") name t rc start end secs log state why leftover npass=0 nfail=0 nskip=0
	[ ${#names[@]} -gt 0 ] || mapfile -t names < <(_ck_cases)
	for name in "${names[@]}"; do
		log=$CK_ARTIFACTS/$CK_GROUP.$name.log
		state=$CK_ARTIFACTS/$CK_GROUP.$name.state
		: >"$state"
		if [ "$CK_QUICK" = 1 ] && [ -n "${_CK_SLOW[$name]:-}" ]; then
			printf 'SKIP %s/%s (slow case, CKPTFS_TEST_QUICK=1)\n' "$CK_GROUP" "$name"
			[ -n "${CK_RESULTS:-}" ] && echo "SKIP $CK_GROUP/$name" >>"$CK_RESULTS"
			nskip=$((nskip + 1))
			continue
		fi
		t=${_CK_TIMEOUT[$name]:-120}
		# ASan builds and the quick run are slower per byte: more time.
		[[ "$CKPTFS_BIN" == *asan* ]] && t=$((t * 2))
		start=$(date +%s.%N)
		rc=0
		# timeout runs the case in its own process group (a hang is ended with
		# TERM, then KILL, to the whole group); an interrupt of this runner is
		# passed on to it, and its leftovers reaped.
		CK_STATE=$state timeout -k 10 "$t" bash "$0" --one "$name" >"$log" 2>&1 </dev/null &
		_ck_tpid=$!
		trap 'kill -TERM $_ck_tpid 2>/dev/null; wait $_ck_tpid; _ck_reap "$state"; echo "interrupted in $CK_GROUP/$name"; exit 130' INT TERM
		wait $_ck_tpid || rc=$?
		trap - INT TERM
		end=$(date +%s.%N)
		secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
		leftover=$(_ck_reap "$state")
		if [ $rc -eq 0 ] && [ -z "$leftover" ]; then
			printf 'ok   %s/%s (%ss)\n' "$CK_GROUP" "$name" "$secs"
			[ -n "${CK_RESULTS:-}" ] && echo "PASS $CK_GROUP/$name $secs" >>"$CK_RESULTS"
			npass=$((npass + 1))
			rm -f "$state"
		elif [ $rc -eq 77 ]; then
			why=$(grep -m1 '^SKIP:' "$log" | sed 's/^SKIP: //')
			printf 'SKIP %s/%s (%s)\n' "$CK_GROUP" "$name" "$why"
			[ -n "${CK_RESULTS:-}" ] && echo "SKIP $CK_GROUP/$name $secs" >>"$CK_RESULTS"
			nskip=$((nskip + 1))
		else
			printf 'FAIL %s/%s (%ss)\n' "$CK_GROUP" "$name" "$secs"
			if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
				printf '     timed out after %ss\n' "$t"
			fi
			[ -n "$leftover" ] && printf '     %s\n' "$leftover"
			if grep -q -E '^(FAIL|WARNING):' "$log"; then
				grep -E '^(FAIL|WARNING):' "$log" | head -n 5 | sed 's/^/     /'
			fi
			printf '     full log: %s; last lines:\n' "$log"
			grep -v -E '^(FAIL):' "$log" | tail -n 30 | sed 's/^/     | /'
			[ -n "${CK_RESULTS:-}" ] && echo "FAIL $CK_GROUP/$name $secs" >>"$CK_RESULTS"
			nfail=$((nfail + 1))
		fi
	done
	printf '%s: %d passed, %d failed, %d skipped\n' "$CK_GROUP" "$npass" "$nfail" "$nskip"
	if [ $_CK_OWN_ARTIFACTS = 1 ]; then
		if [ $nfail -eq 0 ]; then rm -rf "$CK_ARTIFACTS"; else echo "logs kept in $CK_ARTIFACTS"; fi
	fi
	[ $nfail -eq 0 ]
}

# The last line of every group file.
ck_main() {
	if [ "${1:-}" = --one ]; then
		_ck_run_one "$2"
	else
		_ck_run_group "$@"
	fi
}
