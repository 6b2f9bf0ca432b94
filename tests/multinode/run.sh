#!/bin/bash
# run.sh BUILD_DIR [GROUP[:CASE]...] — the multi-node tests
# (tests/multinode/t_*.sh, issue 18): several ckptfs daemons on this machine
# as nodes of one shared catalog on a private PostgreSQL 15 they start
# themselves (tests/pg/pgserver.sh), over one BACKING. Checks that
# PostgreSQL and torch are there, then runs the groups with
# tests/integration/run.sh (whose harness, lib.sh, mn.sh extends). The last
# line printed is exactly "N passed, N failed"; the exit status is non-zero
# if any case failed.
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
if [ ! -x "$CKPTFS_BIN" ] || [ "$(id -u)" != 0 ] || ! /usr/bin/python3 -c 'import torch' 2>/dev/null ||
	! ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1; then
	echo "run.sh: needs root, $CKPTFS_BIN (make all), /usr/bin/python3 with torch and a PostgreSQL server (make deps)" >&2
	echo "0 passed, 1 failed"
	exit 1
fi
# Lanes: CK_JOBS groups at a time (make test's CK_JOBS, 2; default 1 when
# run by hand), as tests/integration/run.sh runs them. The groups can share
# the machine: each case has its own PostgreSQL server (a socket in its own
# directory; TCP only on its own namespace's veth address), its own network
# namespace (key: the case's PID), its own ganesha on ports from the kernel
# (the runner keeps one rpcbind for the whole run), its own temp dirs and
# mounts. The slowest groups
# start first so that the lanes end together (per-group seconds of a
# one-lane run); CK_ALONE names groups that must run with no other (none).
CK_FIRST=${CK_FIRST:-"t_remote t_rot2 t_keep2 t_multinode t_pgstall t_uploadfirst2 t_gaps t_reclaim"}
CK_JOBS=${CK_JOBS:-1} CK_FIRST=$CK_FIRST CK_GROUPS_DIR=$here CK_SUITE=multinode exec "$here/../integration/run.sh" "$build" "$@"
