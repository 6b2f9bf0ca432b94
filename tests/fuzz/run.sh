#!/usr/bin/env bash
# Runs every libFuzzer harness built in FUZZ_BUILD for SECONDS each, CK_JOBS
# (default 1) at a time: each harness is one process on one core, so on an
# otherwise idle machine with as many cores as lanes each still gets its
# SECONDS of a core (tests/fuzz/README.md); the lines are printed in
# harness order. Seeds: tests/fuzz/corpus/<harness>/ (read
# only); new inputs go to FUZZ_BUILD/work/<harness>/, crashes to
# FUZZ_BUILD/artifacts/. With MERGE=1, inputs that add coverage are merged
# into the committed corpus afterwards (-merge=1).
# Usage: run.sh FUZZ_BUILD SECONDS [harness…]. Prints "N passed, N failed";
# exits non-zero if any harness failed.
set -uo pipefail

build=$1
secs=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -gt 0 ]; then
	harnesses=("$@")
else
	harnesses=()
	for src in "$here"/fuzz_*.c; do
		harnesses+=("$(basename "$src" .c)")
	done
fi

jobs=${CK_JOBS:-1}
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: CK_JOBS=$jobs: want a number >= 1" >&2; exit 2; }
mkdir -p "$build/artifacts"

# One harness: its report in $build/$h.report, its status the harness's.
fuzz_one() {
	local h=$1 bin=$build/$1 corpus=$here/corpus/$1 work=$build/work/$1 log=$build/$1.log
	local start rc took execs
	mkdir -p "$work" "$corpus"
	start=$(date +%s)
	# -timeout: one input slower than this is a finding; -rss_limit_mb: so is
	# this much memory (a decoder sized by a value from disk)
	nice "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=1024 \
		-print_final_stats=1 -artifact_prefix="$build/artifacts/$h-" \
		"$work" "$corpus" >"$log" 2>&1
	rc=$?
	took=$(($(date +%s) - start))
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	if [ $rc -eq 0 ]; then
		echo "fuzz: $h passed: ${execs:-?} inputs in ${took}s"
	else
		echo "fuzz: $h FAILED (status $rc) after ${took}s; log $log:"
		{ grep -m 4 -E "ERROR|runtime error|Assertion|SUMMARY" "$log"
		  grep -E "#[0-9]+ 0x.* in .* [^ ]*(fs|meta|tests/fuzz)/" "$log" | head -8
		  grep -m 1 "Test unit written" "$log"; } | sed 's/^/  /'
	fi
	if [ "${MERGE:-0}" = 1 ] && [ $rc -eq 0 ]; then
		nice "$bin" -merge=1 -timeout=10 -rss_limit_mb=1024 "$corpus" "$work" \
			>"$build/$h.merge.log" 2>&1 || echo "fuzz: $h: merge failed ($build/$h.merge.log)"
	fi
	return $rc
}

# Lanes: at most $jobs harnesses at once (MERGE writes the corpus directory
# of its own harness only). A report is printed once it and every one
# before it are done.
passed=0
failed=0
printed=0
flush() {
	local h
	while [ $printed -lt ${#harnesses[@]} ] && [ -s "$build/${harnesses[$printed]}.rc" ]; do
		h=${harnesses[$printed]}
		cat "$build/$h.report"
		if [ "$(cat "$build/$h.rc")" = 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
		rm -f "$build/$h.report" "$build/$h.rc"
		printed=$((printed + 1))
	done
}
for h in "${harnesses[@]}"; do rm -f "$build/$h.rc"; done
running=0
for h in "${harnesses[@]}"; do
	while [ $running -ge "$jobs" ]; do
		wait -n
		running=$((running - 1))
		flush
	done
	( fuzz_one "$h" >"$build/$h.report" 2>&1; echo $? >"$build/$h.rc" ) &
	running=$((running + 1))
done
wait
flush
echo "$passed passed, $failed failed"
[ $failed -eq 0 ] && [ $printed -eq ${#harnesses[@]} ]
