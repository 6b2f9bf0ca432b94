#!/bin/bash
# run.sh BUILD_DIR [GROUP[:CASE]...] — runs the integration tests against
# BUILD_DIR/ckptfs and BUILD_DIR/ckptfs-admin.
#
# Every tests/integration/t_*.sh is a group of cases (see lib.sh); each case
# runs in its own process with its own mount, temp dirs and timeout. The last
# line printed is exactly "N passed, N failed"; the exit status is non-zero if
# any case failed (skipped cases count as neither).
#
#   CKPTFS_TEST_QUICK=1   skip the slowest cases (multi-GiB, long stress) and
#                         shorten the rest (the ASan run uses this)
#   CK_GROUPS_DIR=DIR     run the t_*.sh groups of another directory that use
#   CK_SUITE=NAME         this harness (tests/trainers/run.sh), named NAME
#   run.sh build t_ops t_perms:test_x   run only these groups / cases
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

echo "ckptfs $suite tests: $CKPTFS_BIN$([ "$CKPTFS_TEST_QUICK" = 1 ] && echo ' (quick)')"
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
echo "$suite tests took $((t1 - t0))s"
echo "$npass passed, $nfail failed"
[ "$nfail" -eq 0 ]
