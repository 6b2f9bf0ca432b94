#!/bin/bash
# lanes.sh UNIT_TESTS 'SUITES [SUITES...]' [CRITERION_ARG...] — runs the unit
# tests as criterion runners side by side, each one test at a time (--jobs
# 1): one runner per SUITES ("a|b|c", extglob: "pg*" matches pggen and pgns;
# lists separated by spaces) running the suites it names, and one more
# running every other suite (--filter '!(@(a|b|c|...))/*', every list's
# suites together), so between them every test runs once, whatever suites
# are added later.
#
# Why not one runner with --jobs N: the ASan lane (make test-asan-unit) runs
# the tests one at a time per runner, because criterion 2.4's runner itself
# leaks 48 bytes now and then when it runs tests in parallel beside suites
# with timeouts, which LeakSanitizer rightly reports but which is not ours.
# Runners of one test each never do that, and the stage takes a fraction of
# the time: most of the shared catalog's tests wait (for a PostgreSQL server
# to start, for a lease to run out), not compute.
#
# Each runner's output is kept in a file and printed whole, in lane order,
# with its exit status and seconds; the exit status is non-zero if any
# runner's is. The lists are chosen so that the lanes take about the same
# time (make test-asan-unit names them, with the times they were balanced by).
set -u
if [ $# -lt 2 ]; then
	echo "usage: $0 UNIT_TESTS 'SUITES [SUITES...]' [CRITERION_ARG...]" >&2
	exit 2
fi
bin=$1 lists=$2
shift 2
[ -x "$bin" ] || { echo "lanes.sh: $bin: not found or not executable (build it first)" >&2; exit 2; }
[[ "$lists" =~ ^[A-Za-z0-9_*|\ ]+$ ]] && [[ "$lists" =~ [^\ ] ]] ||
	{ echo "lanes.sh: SUITES '$lists': want suite names (and *) joined by |, lanes separated by spaces" >&2; exit 2; }
read -r -a lane_suites <<<"$lists"
all=$(IFS='|' && echo "${lane_suites[*]}")
filters=() names=()
for s in "${lane_suites[@]}"; do
	filters+=("@($s)/*") names+=("suites $s")
done
filters+=("!(@($all))/*") names+=("every other suite")
n=${#filters[@]}
out=$(mktemp -d /tmp/ckptfs-unit-lanes.XXXXXX)
pids=()
on_interrupt() {
	local p
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
	wait
	echo "lanes.sh: interrupted; output in $out" >&2
	exit 130
}
trap on_interrupt INT TERM
t0=$SECONDS
for i in $(seq "$n"); do
	"$bin" --jobs 1 --filter "${filters[$((i - 1))]}" "$@" >"$out/$i" 2>&1 </dev/null &
	pids+=($!)
done
declare -A status=() took=()
running=("${pids[@]}")
while [ ${#running[@]} -gt 0 ]; do
	r=0 p=
	wait -n -p p "${running[@]}" || r=$?
	[ -n "$p" ] || continue
	status[$p]=$r took[$p]=$((SECONDS - t0))
	left=()
	for q in "${running[@]}"; do [ "$q" = "$p" ] || left+=("$q"); done
	running=("${left[@]}")
done
rc=0 i=0
for p in "${pids[@]}"; do
	i=$((i + 1))
	echo "== unit lane $i of $n (${names[$((i - 1))]}): exit status ${status[$p]}, ${took[$p]} s"
	cat "$out/$i"
	[ "${status[$p]}" = 0 ] || rc=${status[$p]}
done
trap - INT TERM
rm -rf "$out"
exit $rc
