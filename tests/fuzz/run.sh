#!/usr/bin/env bash
# Runs every libFuzzer harness built in FUZZ_BUILD for SECONDS each, one at a
# time (tests/fuzz/README.md). Seeds: tests/fuzz/corpus/<harness>/ (read
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

passed=0
failed=0
mkdir -p "$build/artifacts"
for h in "${harnesses[@]}"; do
	bin=$build/$h
	corpus=$here/corpus/$h
	work=$build/work/$h
	mkdir -p "$work" "$corpus"
	log=$build/$h.log
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
		passed=$((passed + 1))
		echo "fuzz: $h passed: ${execs:-?} inputs in ${took}s"
	else
		failed=$((failed + 1))
		echo "fuzz: $h FAILED (status $rc) after ${took}s; log $log:"
		{ grep -m 4 -E "ERROR|runtime error|Assertion|SUMMARY" "$log"
		  grep -E "#[0-9]+ 0x.* in .* [^ ]*(fs|meta|tests/fuzz)/" "$log" | head -8
		  grep -m 1 "Test unit written" "$log"; } | sed 's/^/  /'
	fi
	if [ "${MERGE:-0}" = 1 ] && [ $rc -eq 0 ]; then
		nice "$bin" -merge=1 -timeout=10 -rss_limit_mb=1024 "$corpus" "$work" \
			>"$build/$h.merge.log" 2>&1 || echo "fuzz: $h: merge failed ($build/$h.merge.log)"
	fi
done
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
