#!/bin/bash
# lanes.sh UNIT_TESTS SUITES [CRITERION_ARG...] — runs the unit tests as two
# criterion runners side by side, each one test at a time (--jobs 1): the
# first runs the suites named in SUITES ("a|b|c", extglob: "pg*" matches
# pggen and pgns), the second every other suite (--filter '!(@(SUITES))/*'),
# so between them every test runs once, whatever suites are added later.
#
# Why not one runner with --jobs 2: the ASan lane (make test-asan-unit) runs
# the tests one at a time per runner, because criterion 2.4's runner itself
# leaks 48 bytes now and then when it runs tests in parallel beside suites
# with timeouts, which LeakSanitizer rightly reports but which is not ours.
# Two runners of one test each never do that, and the stage takes half the
# time: most of the shared catalog's tests wait (for a PostgreSQL server to
# start, for a lease to run out), not compute.
#
# Each runner's output is kept in a file and printed whole, the first's then
# the second's, with its exit status; the exit status is non-zero if either
# runner's is. SUITES is the list of suites that take about half the time
# (make test-asan-unit names it, with the times it was balanced by).
set -u
if [ $# -lt 2 ]; then
	echo "usage: $0 UNIT_TESTS SUITES [CRITERION_ARG...]" >&2
	exit 2
fi
bin=$1 suites=$2
shift 2
[ -x "$bin" ] || { echo "lanes.sh: $bin: not found or not executable (build it first)" >&2; exit 2; }
[[ "$suites" =~ ^[A-Za-z0-9_*|]+$ ]] || { echo "lanes.sh: SUITES '$suites': want suite names (and *) joined by |" >&2; exit 2; }
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
"$bin" --jobs 1 --filter "@($suites)/*" "$@" >"$out/1" 2>&1 </dev/null &
pids+=($!)
"$bin" --jobs 1 --filter "!(@($suites))/*" "$@" >"$out/2" 2>&1 </dev/null &
pids+=($!)
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
	echo "== unit lane $i of 2 ($([ $i = 1 ] && echo "suites $suites" || echo "every other suite")): exit status ${status[$p]}, ${took[$p]} s"
	cat "$out/$i"
	[ "${status[$p]}" = 0 ] || rc=${status[$p]}
done
trap - INT TERM
rm -rf "$out"
exit $rc
