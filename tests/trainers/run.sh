#!/bin/bash
# run.sh BUILD_DIR [GROUP[:CASE]...] — the real-trainer end-to-end tests
# (tests/trainers/t_*.sh) against BUILD_DIR/ckptfs, in the style of
# tests/integration/run.sh (whose harness, lib.sh, every group sources; that
# runner only looks in its own directory). The last line printed is exactly
# "N passed, N failed"; the exit status is non-zero if any case failed.
set -u
if [ $# -lt 1 ]; then
	echo "usage: $0 BUILD_DIR [GROUP[:CASE]...]" >&2
	exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
build=$1
shift
case $build in /*) ;; *) build=$(pwd)/$build ;; esac
export CKPTFS_BIN=$build/ckptfs CKPTFS_ADMIN=$build/ckptfs-admin
if [ ! -x "$CKPTFS_BIN" ] || [ "$(id -u)" != 0 ] || ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
	echo "run.sh: needs root, $CKPTFS_BIN (make all) and /usr/bin/python3 with torch (make deps)" >&2
	echo "0 passed, 1 failed"
	exit 1
fi
CK_ARTIFACTS=$(mktemp -d /tmp/ckptfs-it-logs.XXXXXX)
CK_RESULTS=$CK_ARTIFACTS/results
: >"$CK_RESULTS"
export CK_ARTIFACTS CK_RESULTS

declare -A want_cases=()
groups=()
if [ $# -gt 0 ]; then
	for sel in "$@"; do
		g=${sel%%:*}
		g=${g%.sh}
		[ -f "$here/$g.sh" ] || { echo "run.sh: no group $here/$g.sh" >&2; exit 2; }
		[[ " ${groups[*]} " == *" $g "* ]] || groups+=("$g")
		[[ "$sel" == *:* ]] && want_cases[$g]+=" ${sel#*:}"
	done
else
	for f in "$here"/t_*.sh; do groups+=("$(basename "${f%.sh}")"); done
fi

echo "ckptfs real-trainer tests: $CKPTFS_BIN"
t0=$(date +%s)
trap 'echo "run.sh: interrupted; logs in $CK_ARTIFACTS"; echo "$(grep -c "^PASS " "$CK_RESULTS") passed, $(grep -c "^FAIL " "$CK_RESULTS") failed"; exit 130' INT TERM
for g in "${groups[@]}"; do
	echo "== $g"
	# shellcheck disable=SC2086
	bash "$here/$g.sh" ${want_cases[$g]:-}
done
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
[ "$nfail" -eq 0 ] && rm -rf "$CK_ARTIFACTS"
echo "trainer tests took $((t1 - t0))s"
echo "$npass passed, $nfail failed"
[ "$nfail" -eq 0 ]
