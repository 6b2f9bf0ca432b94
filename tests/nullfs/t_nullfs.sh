#!/bin/bash
# t_nullfs.sh [NULLFS_BIN] — proves that nullfs, the bench's FUSE floor
# (tests/nullfs/nullfs.c), serves the workloads the bench runs on it: it keeps
# names and sizes, drops data and reads zeros, and behaves like ckptfs at the
# kernel boundary (write-only opens bypass the page cache).
#
# One nullfs daemon (foreground, PID recorded) on its own temp dir. The EXIT
# trap unmounts it, kills only that PID and removes the temp dir. The last
# line is "N passed, N failed"; the exit status is non-zero on any failure.
set -u

here=$(cd "$(dirname "$0")" && pwd)
NULLFS=${1:-$here/../../build/nullfs}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

if [ ! -x "$NULLFS" ]; then
	echo "t_nullfs: $NULLFS not built (make build/nullfs)" >&2
	echo "0 passed, 1 failed"
	exit 1
fi

T=$(mktemp -d /tmp/nullfs-test.XXXXXX)
MNT=$T/mnt
mkdir -p "$MNT"
FS_PID=

is_mounted() { awk -v m="$MNT" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; }

cleanup() {
	if is_mounted; then fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -uz "$MNT" 2>/dev/null; fi
	if [ -n "$FS_PID" ]; then
		for _ in $(seq 50); do kill -0 "$FS_PID" 2>/dev/null || break; sleep 0.1; done
		kill "$FS_PID" 2>/dev/null
	fi
	rm -rf "$T"
}
trap cleanup EXIT

"$NULLFS" -f -o default_permissions "$MNT" 2>"$T/log" &
FS_PID=$!
for _ in $(seq 100); do is_mounted && break; sleep 0.05; done

passed=0 failed=0
check() { # check NAME CMD...: a case passes when CMD exits 0
	local name=$1
	shift
	if "$@" >"$T/out" 2>&1; then
		passed=$((passed + 1))
		echo "ok   $name"
	else
		failed=$((failed + 1))
		echo "FAIL $name"
		sed 's/^/     /' "$T/out"
	fi
}

test_mounted() { is_mounted; }

test_create_write_keeps_size_reads_zeros() {
	"$PY" - "$MNT" <<'PY'
import os, sys
d = sys.argv[1]
os.makedirs(f"{d}/run/step-1", exist_ok=True)
p = f"{d}/run/step-1/f"
fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
assert os.write(fd, b"x" * 5000) == 5000
os.pwrite(fd, b"y" * 10, (3 << 20) - 10)
os.close(fd)
assert os.stat(p).st_size == 3 << 20, os.stat(p).st_size
with open(p, "rb") as f:
    data = f.read()
assert data == bytes(3 << 20), "reads must return zeros for the file's size"
PY
}

test_exclusive_create_refuses_existing_name() {
	"$PY" - "$MNT" <<'PY'
import errno, os, sys
p = f"{sys.argv[1]}/dup"
os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
try:
    os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
except OSError as e:
    assert e.errno == errno.EEXIST, e
else:
    raise SystemExit("O_EXCL create of an existing name succeeded")
PY
}

test_truncate_sets_size_and_otrunc_empties() {
	truncate -s 1G "$MNT/big" && [ "$(stat -c %s "$MNT/big")" = 1073741824 ] &&
		: >"$MNT/big" && [ "$(stat -c %s "$MNT/big")" = 0 ]
}

test_readdir_lists_names_and_rm_rf_empties_tree() {
	mkdir -p "$MNT/tree/a" "$MNT/tree/b" && touch "$MNT/tree/a/1" "$MNT/tree/a/2" "$MNT/tree/b/3" &&
		[ "$(ls "$MNT/tree/a" | tr '\n' ' ')" = "1 2 " ] &&
		! rmdir "$MNT/tree/a" 2>/dev/null &&
		rm -rf "$MNT/tree" && [ ! -e "$MNT/tree" ]
}

test_write_only_open_bypasses_page_cache() {
	# direct_io on write-only opens, as ckptfs: a 1 MiB write() arrives whole,
	# so an unaligned 1 MiB write needs no read-modify-write of pages. The
	# observable part here: O_WRONLY writes at odd offsets keep the size exact.
	"$PY" - "$MNT" <<'PY'
import os, sys
p = f"{sys.argv[1]}/odd"
fd = os.open(p, os.O_CREAT | os.O_WRONLY, 0o644)
os.pwrite(fd, b"z" * (1 << 20), 7)
os.close(fd)
assert os.stat(p).st_size == (1 << 20) + 7
PY
}

for t in test_mounted test_create_write_keeps_size_reads_zeros \
	test_exclusive_create_refuses_existing_name test_truncate_sets_size_and_otrunc_empties \
	test_readdir_lists_names_and_rm_rf_empties_tree test_write_only_open_bypasses_page_cache; do
	check "$t" "$t"
done

fusermount3 -u "$MNT" && for _ in $(seq 50); do kill -0 "$FS_PID" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$FS_PID" 2>/dev/null; then
	failed=$((failed + 1))
	echo "FAIL nullfs did not exit after unmount"
else
	wait "$FS_PID" && passed=$((passed + 1)) || { failed=$((failed + 1)); echo "FAIL nullfs exit status"; }
	FS_PID=
fi
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
