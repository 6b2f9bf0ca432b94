#!/bin/bash
# ckptfs-entrypoint [COMMAND ARGS...] — the ckptfs image's entrypoint.
#
# With no COMMAND: runs `ckptfs -f [-o $CKPTFS_OPTIONS] $BACKING $MOUNTPOINT`
# as PID 1's replacement; `docker stop` (SIGTERM) makes ckptfs unmount cleanly
# and upload what is still queued before it exits (compose.yaml's
# stop_grace_period gives it the time).
# With a COMMAND (the tutorial's trainer): mounts, runs COMMAND against the
# mount, then unmounts with `ckptfs-admin umount` (waits for the uploads and for
# ckptfs to exit, with progress), so everything the command
# wrote is durable on BACKING when the container stops. Exit status: COMMAND's,
# or ckptfs's if it fails.
set -euo pipefail

BACKING=${BACKING:-/backing}
MOUNTPOINT=${MOUNTPOINT:-/mnt/ckpt}
CKPTFS_OPTIONS=${CKPTFS_OPTIONS:-}

mkdir -p "$MOUNTPOINT"
case $BACKING in /*) mkdir -p "$BACKING" ;; esac
opts=()
[ -n "$CKPTFS_OPTIONS" ] && opts=(-o "$CKPTFS_OPTIONS")

if [ $# -eq 0 ]; then
	exec ckptfs -f "${opts[@]}" "$BACKING" "$MOUNTPOINT"
fi

is_mounted() { awk -v m="$MOUNTPOINT" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; }

ckptfs -f "${opts[@]}" "$BACKING" "$MOUNTPOINT" &
fs_pid=$!
until is_mounted; do
	if ! kill -0 "$fs_pid" 2>/dev/null; then
		rc=0
		wait "$fs_pid" || rc=$?
		echo "ckptfs-entrypoint: ckptfs exited with status $rc before mounting $BACKING on $MOUNTPOINT" >&2
		exit $((rc == 0 ? 1 : rc))
	fi
	sleep 0.1
done
echo "ckptfs-entrypoint: $BACKING mounted on $MOUNTPOINT (ckptfs pid $fs_pid)" >&2

cmd_pid=
trap '[ -n "$cmd_pid" ] && kill -TERM "$cmd_pid" 2>/dev/null' TERM INT
"$@" &
cmd_pid=$!
rc=0
wait "$cmd_pid" || rc=$?
# A trapped signal interrupts wait; wait again for the command to finish.
kill -0 "$cmd_pid" 2>/dev/null && { wait "$cmd_pid" || rc=$?; }

# ckptfs-admin umount returns once every upload is on BACKING and ckptfs has
# exited (progress on stderr); fusermount3 -u would return at once.
ckptfs-admin umount "$MOUNTPOINT" || fusermount3 -u "$MOUNTPOINT" || umount "$MOUNTPOINT" || true
fs_rc=0
wait "$fs_pid" || fs_rc=$?
echo "ckptfs-entrypoint: unmounted; command status $rc, ckptfs status $fs_rc" >&2
[ "$rc" -ne 0 ] && exit "$rc"
exit "$fs_rc"
