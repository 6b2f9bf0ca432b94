#!/bin/bash
# run.sh BUILD_DIR [GROUP[:CASE]...] — the real-trainer end-to-end tests
# (tests/trainers/t_*.sh) against BUILD_DIR/ckptfs: checks that torch is
# there, then runs them with tests/integration/run.sh (whose harness, lib.sh,
# every group sources). The last line printed is exactly "N passed, N
# failed"; the exit status is non-zero if any case failed.
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
CK_GROUPS_DIR=$here CK_SUITE=trainer exec "$here/../integration/run.sh" "$build" "$@"
