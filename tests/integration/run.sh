#!/bin/bash
# run.sh BUILD_DIR [GROUP[:CASE]...] — runs the integration tests against
# BUILD_DIR/ckptfs and BUILD_DIR/ckptfs-admin.
#
# Every tests/integration/t_*.sh is a group of cases (see lib.sh); each case
# runs in its own process with its own mount, temp dirs and timeout. The last
# line printed is exactly "N passed, N failed"; the exit status is non-zero if
# any case failed (skipped cases count as neither). Every case's line gives
# its seconds; before the summary come the 10 slowest cases of the run.
#
#   CK_JOBS=N             run up to N groups at once (lanes; default 1). The
#                         cases of a group still run one after another. Each
#                         group's output is kept in a file and printed whole,
#                         in a fixed order (the slowest groups, which start
#                         first, then the list's), once it and every group
#                         before it in that order are done; the summary and the exit
#                         status are those of a run in one lane. `make test`
#                         uses CK_JOBS=2 (the Makefile's CK_JOBS).
#   CKPTFS_TEST_QUICK=1   skip the slowest cases (multi-GiB, long stress) and
#                         shorten the rest (the ASan run uses this)
#   CK_GROUPS_DIR=DIR     run the t_*.sh groups of another directory that use
#   CK_SUITE=NAME         this harness (tests/trainers/run.sh), named NAME
#   run.sh build t_ops t_perms:test_x   run only these groups / cases
#
# Why groups can share the machine: every case has its own temp dir under
# /tmp (mktemp), its own mountpoints, daemons and helper PIDs (lib.sh kills
# and unmounts only what it recorded), ports from the kernel's ephemeral
# allocator (t_ecosys, the DCP helpers), its own tmpfs for a small cache
# (t_smallcache, t_persist), and it aborts only its own FUSE connection
# (t_torture). Nothing global is killed by name, and no case measures the
# machine's speed. The groups in CK_ALONE below run with no other group
# running, for the reasons given there. Known and harmless: t_ecosys's syslog
# case runs a daemon in a private mount namespace (unshare --mount), which
# holds copies of the other lane's FUSE mounts for its few seconds, so a
# daemon unmounted in that window exits only when the namespace ends (well
# within CK_EXIT_TIMEOUT). Cases that waited for something by a fixed sleep
# and so failed or skipped when the other lane loaded the machine wait for
# the thing itself now (t_dcp's random kill point, t_claim's snapshots).
#
# Needs root (FUSE mounts, other users via setpriv, bind mounts), fuse3,
# stress-ng, sqlite3, attr (getfattr), /usr/bin/python3 with torch.
set -u

if [ $# -lt 1 ]; then
	echo "usage: $0 BUILD_DIR [GROUP[:CASE]...]" >&2
	exit 2
fi
here=${CK_GROUPS_DIR:-$(cd "$(dirname "$0")" && pwd)}
suite=${CK_SUITE:-integration}
build=$1
shift
case $build in /*) ;; *) build=$(pwd)/$build ;; esac
export CKPTFS_BIN=$build/ckptfs
export CKPTFS_ADMIN=$build/ckptfs-admin
export CKPTFS_TEST_QUICK=${CKPTFS_TEST_QUICK:-0}

if [ ! -x "$CKPTFS_BIN" ]; then
	echo "run.sh: $CKPTFS_BIN: not found or not executable (build it first: make all)" >&2
	echo "0 passed, 1 failed"
	exit 1
fi
if [ "$(id -u)" != 0 ]; then
	echo "run.sh: the integration tests need root (FUSE mounts, setpriv, bind mounts)" >&2
	echo "0 passed, 1 failed"
	exit 1
fi
missing=
for tool in fusermount3 stress-ng sqlite3 getfattr setpriv flock timeout cmp; do
	command -v "$tool" >/dev/null || missing+=" $tool"
done
[ -x /usr/bin/python3 ] || missing+=" /usr/bin/python3"
if [ -n "$missing" ]; then
	echo "run.sh: missing tools:$missing (make deps)" >&2
	echo "0 passed, 1 failed"
	exit 1
fi

CK_ARTIFACTS=$(mktemp -d /tmp/ckptfs-it-logs.XXXXXX)
CK_RESULTS=$CK_ARTIFACTS/results
: >"$CK_RESULTS"
export CK_ARTIFACTS CK_RESULTS

# Which groups, and which cases of them.
declare -A want_cases=()
groups=()
if [ $# -gt 0 ]; then
	for sel in "$@"; do
		g=${sel%%:*}
		g=${g%.sh}
		[ -f "$here/$g.sh" ] || {
			echo "run.sh: no group $here/$g.sh" >&2
			exit 2
		}
		[[ " ${groups[*]} " == *" $g "* ]] || groups+=("$g")
		[[ "$sel" == *:* ]] && want_cases[$g]+=" ${sel#*:}"
	done
else
	for f in "$here"/t_*.sh; do
		groups+=("$(basename "${f%.sh}")")
	done
fi

# Lanes (CK_JOBS). Groups that must not share the machine with another
# group: none so far here (a group goes here with the reason it must run
# alone). A suite that runs its groups with this runner passes its own in
# the environment (tests/multinode/run.sh).
CK_ALONE=" ${CK_ALONE:-} "
# The groups that take longest start first, so that the lanes end together;
# the rest start in list order. In lanes, the output is printed in this start
# order (fixed: it does not depend on which lane ends first); results and
# exit status do not depend on it. A suite of other groups passes its own
# list (tests/multinode/run.sh).
CK_FIRST=${CK_FIRST:-"t_torture t_complete t_faults t_stress t_generations t_smallcache t_dcp t_roundtrip"}
jobs=${CK_JOBS:-1}
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || {
	echo "run.sh: CK_JOBS=$jobs: want a number of lanes >= 1" >&2
	exit 2
}
[ "$jobs" -gt ${#groups[@]} ] && jobs=${#groups[@]}

# rpcbind is one per machine (port 111, /run/rpcbind.sock), and
# tests/nfs/ganesha.sh starts one when none runs and stops it with its own
# server: cases of two lanes that use ganesha (t_claim, t_faults, multinode
# t_remote) would start and stop it under each other. With lanes, the runner
# starts it for the whole run when none runs, and stops it (by PID) at the
# end; ganesha.sh then leaves it alone.
rpc_pid=
rpcbind_up() {
	[ "$jobs" -gt 1 ] && command -v ganesha.nfsd >/dev/null && [ -x /usr/sbin/rpcbind ] || return 0
	pgrep -x rpcbind >/dev/null 2>&1 && return 0
	mkdir -p /run/rpcbind
	/usr/sbin/rpcbind -f -w >"$CK_ARTIFACTS/rpcbind.log" 2>&1 </dev/null &
	rpc_pid=$!
	local i
	for i in $(seq 50); do
		[ -S /run/rpcbind.sock ] && return 0
		sleep 0.1
	done
	echo "run.sh: rpcbind did not start ($(tail -n 2 "$CK_ARTIFACTS/rpcbind.log" | tr '\n' ' ')); the nfs cases will start their own" >&2
}
rpcbind_down() {
	[ -n "$rpc_pid" ] || return 0
	kill -TERM "$rpc_pid" 2>/dev/null
	wait "$rpc_pid" 2>/dev/null
	rpc_pid=
}

echo "ckptfs $suite tests: $CKPTFS_BIN$([ "$CKPTFS_TEST_QUICK" = 1 ] && echo ' (quick)')$([ "$jobs" -gt 1 ] && echo ", $jobs lanes")"
t0=$(date +%s)

_summary_counts() { echo "$(grep -c "^PASS " "$CK_RESULTS") passed, $(grep -c "^FAIL " "$CK_RESULTS") failed"; }

if [ "$jobs" = 1 ]; then
	trap 'echo "run.sh: interrupted; logs in $CK_ARTIFACTS"; _summary_counts; exit 130' INT TERM
	for g in "${groups[@]}"; do
		echo "== $g"
		# shellcheck disable=SC2086
		bash "$here/$g.sh" ${want_cases[$g]:-}
	done
else
	declare -A lane_pid=() done_g=()
	printed=0
	# Prints, in start order, every finished group not printed yet that no
	# unfinished group precedes.
	flush() {
		while [ $printed -lt ${#order[@]} ] && [ -n "${done_g[${order[$printed]}]:-}" ]; do
			echo "== ${order[$printed]}"
			cat "$CK_ARTIFACTS/${order[$printed]}.out"
			printed=$((printed + 1))
		done
	}
	# The group's bash itself is the background job (no subshell between):
	# $! is its PID, which on_interrupt signals.
	start() {
		# shellcheck disable=SC2086
		bash "$here/$1.sh" ${want_cases[$1]:-} >"$CK_ARTIFACTS/$1.out" 2>&1 </dev/null &
		lane_pid[$!]=$1
	}
	# Waits for one running group to end.
	reap_one() {
		local pid=
		wait -n -p pid
		[ -n "$pid" ] && [ -n "${lane_pid[$pid]:-}" ] || return 0
		done_g[${lane_pid[$pid]}]=1
		unset "lane_pid[$pid]"
		flush
	}
	# A group run in the background ignores SIGINT (bash): an interrupt of
	# this runner is passed on to each running group as TERM, on which it
	# stops its case and reaps what the case left (lib.sh).
	on_interrupt() {
		local pid
		for pid in "${!lane_pid[@]}"; do kill -TERM "$pid" 2>/dev/null; done
		for pid in "${!lane_pid[@]}"; do wait "$pid"; done
		for pid in "${!lane_pid[@]}"; do done_g[${lane_pid[$pid]}]=1; done
		for g in "${order[@]}"; do [ -f "$CK_ARTIFACTS/$g.out" ] && done_g[$g]=1; done
		flush
		rpcbind_down
		echo "run.sh: interrupted; logs in $CK_ARTIFACTS"
		_summary_counts
		exit 130
	}
	trap on_interrupt INT TERM
	rpcbind_up
	order=()
	for g in "${groups[@]}"; do [[ "$CK_ALONE" == *" $g "* ]] && order+=("$g"); done
	for g in $CK_FIRST; do
		[[ " ${groups[*]} " == *" $g "* ]] && [[ "$CK_ALONE" != *" $g "* ]] && order+=("$g")
	done
	for g in "${groups[@]}"; do [[ " ${order[*]} " != *" $g "* ]] && order+=("$g"); done
	for g in "${order[@]}"; do
		if [[ "$CK_ALONE" == *" $g "* ]]; then
			while [ ${#lane_pid[@]} -gt 0 ]; do reap_one; done
			start "$g"
			reap_one
			continue
		fi
		while [ ${#lane_pid[@]} -ge "$jobs" ]; do reap_one; done
		start "$g"
	done
	while [ ${#lane_pid[@]} -gt 0 ]; do reap_one; done
	rpcbind_down
	trap - INT TERM
fi
t1=$(date +%s)

npass=$(grep -c '^PASS ' "$CK_RESULTS")
nfail=$(grep -c '^FAIL ' "$CK_RESULTS")
nskip=$(grep -c '^SKIP ' "$CK_RESULTS")
echo
if [ "$nfail" -gt 0 ]; then
	echo "failed cases:"
	grep '^FAIL ' "$CK_RESULTS" | awk '{ print "  " $2 }'
	echo "logs kept in $CK_ARTIFACTS"
fi
[ "$nskip" -gt 0 ] && echo "$nskip skipped: $(grep '^SKIP ' "$CK_RESULTS" | awk '{ print $2 }' | tr '\n' ' ')"
if grep -q -E '^(PASS|FAIL) ' "$CK_RESULTS"; then
	echo "10 slowest cases:"
	awk 'NF == 3 && ($1 == "PASS" || $1 == "FAIL") { printf "%8.1fs  %s\n", $3, $2 }' "$CK_RESULTS" | sort -rn | head -n 10
fi
[ "$nfail" -eq 0 ] && rm -rf "$CK_ARTIFACTS"
echo "$suite tests took $((t1 - t0))s"
echo "$npass passed, $nfail failed"
[ "$nfail" -eq 0 ]
