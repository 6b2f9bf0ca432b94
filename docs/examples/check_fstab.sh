#!/bin/bash
# docs/examples/check_fstab.sh [BUILD_DIR] — proves the packaging examples
# mount for real, through mount(8) and mount.fuse3, with BUILD_DIR/ckptfs on
# PATH as `ckptfs` (what `make install` provides). Needs root and /dev/fuse.
# `make check-examples` runs it.
#
# mount(8) runs its helper with no PATH, and mount.fuse3 starts `ckptfs`
# through /bin/sh, which then searches its default path only. So the script
# re-runs itself in a private mount namespace (unshare -m) and there binds a
# directory holding links to BUILD_DIR's binaries over /usr/local/sbin, the
# first directory of that path: the examples mount the ckptfs just built,
# nothing is installed, and the system outside never sees the bind.
#
#   1. mnt-ckpt.mount passes `systemd-analyze verify` (skipped without it);
#   2. `mount -t fuse.ckptfs BACKING MNT -o cache=…,allow_other,_netdev`
#      mounts; a file written is read back byte-identical, also by another
#      user (allow_other); after umount the daemon exits, and after a second
#      mount the file is still there;
#   3. the line of fstab.example, its paths swapped for temporary ones,
#      mounts with `mount --fstab FILE MNT`;
#   4. What=/Where=/Type=/Options= of mnt-ckpt.mount, paths swapped, mount
#      the way systemd mounts them (`mount What Where -t Type -o Options`);
#   5. ckptfs-ckpt.service passes `systemd-analyze verify` (with 1.), and its
#      ExecStart=/ExecStop= (ckptfs-admin umount), paths swapped, mount and
#      stop with the upload queue empty and the daemon gone when the stop
#      returns;
#   6. `make install PREFIX=<temp>` with SBINDIR=/sbin on an overlay private
#      to the namespace: mount -t ckptfs, a type-ckptfs fstab line and -t
#      fuse.ckptfs start the installed ckptfs through /sbin/mount.ckptfs
#      (mount(8) gives its helpers no PATH); man pages and docs are there.
# Every path unmounts (trap); only ckptfs daemons serving this script's own
# temp mountpoint are waited for or killed, by PID. Ends with "N passed, N failed".
set -u

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${1:-build}
case $build in /*) ;; *) build=$repo/$build ;; esac
passed=0 failed=0 skipped=0

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	echo "check_fstab: needs root and /dev/fuse (mount(8) of a FUSE type)" >&2
	echo "0 passed, 1 failed"
	exit 1
fi
if [ ! -x "$build/ckptfs" ]; then
	echo "check_fstab: $build/ckptfs not built (make all)" >&2
	echo "0 passed, 1 failed"
	exit 1
fi
export PATH=$build:$PATH
if [ -z "${CKPTFS_FSTAB_NS:-}" ]; then
	if ! command -v unshare >/dev/null; then
		echo "check_fstab: unshare (util-linux) not found: needed for a private mount namespace" >&2
		echo "0 passed, 1 failed"
		exit 1
	fi
	CKPTFS_FSTAB_NS=1 exec unshare --mount --propagation private "$0" "$build"
fi

T=$(mktemp -d /tmp/ckptfs-fstab-check.XXXXXX)
chmod 755 "$T" # allow_other is checked as user nobody
B=$T/backing M=$T/mnt C=$T/cache
mkdir -p "$B" "$M" "$C" "$T/sbin"
DAEMONS=()
ln -s "$build/ckptfs" "$T/sbin/ckptfs"
ln -s "$build/ckptfs-admin" "$T/sbin/ckptfs-admin"
if ! mkdir -p /usr/local/sbin || ! mount --bind "$T/sbin" /usr/local/sbin; then
	echo "check_fstab: cannot bind $T/sbin over /usr/local/sbin in the private namespace" >&2
	rm -rf "$T"
	echo "0 passed, 1 failed"
	exit 1
fi

is_mounted() { awk -v m="$M" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; }
fstype() { awk -v m="$M" '$5 == m { split($0, a, " - "); split(a[2], b, " "); print b[1] }' /proc/self/mountinfo; }

# PIDs of ckptfs processes whose arguments include our own mountpoint.
our_daemons() {
	local p
	for p in /proc/[0-9]*; do
		[ "$(basename "$(readlink "$p/exe" 2>/dev/null)")" = ckptfs ] || continue
		tr '\0' '\n' <"$p/cmdline" 2>/dev/null | grep -qxF "$M" && echo "${p#/proc/}"
	done
}

cleanup() {
	local pid
	if is_mounted; then umount "$M" 2>/dev/null || fusermount3 -u -z "$M" 2>/dev/null; fi
	for pid in "${DAEMONS[@]}" $(our_daemons); do
		for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill "$pid" 2>/dev/null
	done
	is_mounted && echo "check_fstab: WARNING: $M still mounted" >&2
	umount /usr/local/sbin 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1${2:+: $2}"; failed=$((failed + 1)); }
skip() { echo "SKIP $1: $2"; skipped=$((skipped + 1)); }

# After a mount(8) returned: the mount is there, with type fuse.ckptfs, and
# the daemon's PID is remembered.
after_mount() {
	is_mounted || { echo "nothing mounted on $M"; return 1; }
	[ "$(fstype)" = fuse.ckptfs ] || { echo "mounted as $(fstype), not fuse.ckptfs"; return 1; }
	local pids
	pids=$(our_daemons)
	[ -n "$pids" ] || { echo "no ckptfs process serves $M"; return 1; }
	read -ra DAEMONS <<<"$(echo "$pids" | tr '\n' ' ')"
}

# umount(8), then wait (60 s) for the daemon to exit: the cache lock is free again.
unmount_and_wait() {
	umount "$M" || { echo "umount $M failed"; return 1; }
	local pid
	for pid in "${DAEMONS[@]}"; do
		for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -0 "$pid" 2>/dev/null && { echo "ckptfs (pid $pid) still running 60 s after umount"; return 1; }
	done
	DAEMONS=()
}

# The example's paths, swapped for this run's temporary ones.
swap_paths() { sed -e "s#/data/ckpt-backing#$B#g" -e "s#/mnt/ckpt#$M#g" -e "s#/var/cache/ckptfs#$C#g"; }

# ---------------------------------------------------------------- 1. unit file

if command -v systemd-analyze >/dev/null; then
	if out=$(cd "$here" && systemd-analyze verify --man=no ./mnt-ckpt.mount 2>&1); then
		pass "mnt-ckpt.mount: systemd-analyze verify"
	else
		fail "mnt-ckpt.mount: systemd-analyze verify" "$out"
	fi
else
	skip "mnt-ckpt.mount: systemd-analyze verify" "systemd-analyze is not installed"
fi

if command -v systemd-analyze >/dev/null; then
	# verify checks that ExecStart='s programs exist: point them at this build
	sed "s#/usr/local/bin/#$build/#g" "$here/ckptfs-ckpt.service" >"$T/ckptfs-ckpt.service"
	if out=$(cd "$T" && systemd-analyze verify --man=no ./ckptfs-ckpt.service 2>&1); then
		pass "ckptfs-ckpt.service: systemd-analyze verify"
	else
		fail "ckptfs-ckpt.service: systemd-analyze verify" "$out"
	fi
else
	skip "ckptfs-ckpt.service: systemd-analyze verify" "systemd-analyze is not installed"
fi

# ---------------------------------------------------------------- 2. mount -t fuse.ckptfs

head -c $((5 * 1024 * 1024 + 3)) /dev/urandom >"$T/ref"
mount_t() {
	mount -t fuse.ckptfs "$B" "$M" -o "cache=$C,allow_other,_netdev" || { echo "mount(8) failed"; return 1; }
	after_mount || return 1
	cp "$T/ref" "$M/model.pt" || { echo "cp into the mount failed"; return 1; }
	cmp "$T/ref" "$M/model.pt" || { echo "read back differs"; return 1; }
	chmod 644 "$M/model.pt"
	setpriv --reuid=65534 --regid=65534 --clear-groups cmp "$T/ref" "$M/model.pt" ||
		{ echo "user nobody cannot read the file (allow_other)"; return 1; }
	unmount_and_wait || return 1
	mount -t fuse.ckptfs "$B" "$M" -o "cache=$C,allow_other,_netdev" || { echo "second mount failed"; return 1; }
	after_mount || return 1
	cmp "$T/ref" "$M/model.pt" || { echo "file differs after remount"; return 1; }
	unmount_and_wait
}
if out=$(mount_t 2>&1); then
	pass "mount -t fuse.ckptfs … -o cache=…,allow_other,_netdev: write, read (root and nobody), umount, remount"
else
	fail "mount -t fuse.ckptfs" "$out"
fi

# ---------------------------------------------------------------- 3. fstab line

mount_fstab() {
	grep -Ev '^\s*(#|$)' "$here/fstab.example" | swap_paths >"$T/fstab"
	[ "$(wc -l <"$T/fstab")" = 1 ] || { echo "fstab.example should have exactly one line: $(cat "$T/fstab")"; return 1; }
	mount --fstab "$T/fstab" "$M" || { echo "mount --fstab failed for: $(cat "$T/fstab")"; return 1; }
	after_mount || return 1
	cmp "$T/ref" "$M/model.pt" || { echo "file from the earlier mount differs"; return 1; }
	echo fstab >"$M/via-fstab" || { echo "write failed"; return 1; }
	[ "$(cat "$M/via-fstab")" = fstab ] || { echo "read back differs"; return 1; }
	unmount_and_wait
}
if out=$(mount_fstab 2>&1); then
	pass "fstab.example line mounts (mount --fstab), reads, writes, unmounts"
else
	fail "fstab.example line" "$out"
fi

# ---------------------------------------------------------------- 4. unit's mount

mount_unit() {
	local what where type options
	what=$(sed -n 's/^What=//p' "$here/mnt-ckpt.mount" | swap_paths)
	where=$(sed -n 's/^Where=//p' "$here/mnt-ckpt.mount" | swap_paths)
	type=$(sed -n 's/^Type=//p' "$here/mnt-ckpt.mount")
	options=$(sed -n 's/^Options=//p' "$here/mnt-ckpt.mount" | swap_paths)
	[ "$where" = "$M" ] || { echo "Where= is not /mnt/ckpt"; return 1; }
	mount "$what" "$where" -t "$type" -o "$options" || { echo "mount $what $where -t $type -o $options failed"; return 1; }
	after_mount || return 1
	[ "$(cat "$M/via-fstab")" = fstab ] || { echo "earlier file missing"; return 1; }
	unmount_and_wait
}
if out=$(mount_unit 2>&1); then
	pass "mnt-ckpt.mount What/Where/Type/Options mount as systemd mounts them"
else
	fail "mnt-ckpt.mount mount" "$out"
fi

# ---------------------------------------------------------------- 5. the service's start and stop

# ExecStart= then ExecStop= of ckptfs-ckpt.service, paths swapped, as systemd
# runs them: the stop (ckptfs-admin umount) returns only once the daemon has
# exited, with the upload queue empty and the generation durable on BACKING.
service_start_stop() {
	local start stop pid
	start=$(sed -n 's/^ExecStart=//p' "$here/ckptfs-ckpt.service" | swap_paths | sed "s#/usr/local/bin/#$T/sbin/#g")
	stop=$(sed -n 's/^ExecStop=//p' "$here/ckptfs-ckpt.service" | swap_paths | sed "s#/usr/local/bin/#$T/sbin/#g")
	[ -n "$start" ] && [ -n "$stop" ] || { echo "no ExecStart= or ExecStop="; return 1; }
	case $stop in *"ckptfs-admin umount"*) ;; *) echo "ExecStop= is not ckptfs-admin umount: $stop"; return 1 ;; esac
	$start || { echo "ExecStart failed: $start"; return 1; }
	after_mount || return 1
	pid=${DAEMONS[0]}
	mkdir "$M/svc" && mkdir "$M/svc/step-1" && head -c $((3 * 1024 * 1024)) /dev/urandom >"$M/svc/step-1/m.pt" &&
		setfattr -n user.ckptfs.commit -v 1 "$M/svc/step-1" || { echo "writing a generation failed"; return 1; }
	$stop || { echo "ExecStop failed: $stop"; return 1; }
	is_mounted && { echo "still mounted after ExecStop"; return 1; }
	# gone, or a zombie its reaper has not collected yet
	if [ -r "/proc/$pid/stat" ] && [ "$(sed -E 's/^[0-9]+ \(.*\) (.).*/\1/' "/proc/$pid/stat")" != Z ]; then
		echo "ckptfs (pid $pid) still runs after ExecStop returned"
		return 1
	fi
	DAEMONS=()
	local q
	q=$(sqlite3 "file:$C/catalog.db?mode=ro" "SELECT count(*) FROM uploads" 2>&1)
	[ "$q" = 0 ] || { echo "upload queue after ExecStop: $q"; return 1; }
}
if ! command -v setfattr >/dev/null || ! command -v sqlite3 >/dev/null; then
	skip "ckptfs-ckpt.service ExecStart/ExecStop" "setfattr or sqlite3 not installed"
elif out=$(service_start_stop 2>&1); then
	pass "ckptfs-ckpt.service: ExecStart mounts, ExecStop (ckptfs-admin umount) returns with the uploads done and the daemon gone"
else
	fail "ckptfs-ckpt.service ExecStart/ExecStop" "$out"
fi

# ---------------------------------------------------------------- 6. make install, mount -t ckptfs

# `make install PREFIX=$T/prefix` (a PREFIX mount(8) knows nothing of) with
# SBINDIR=/sbin, where /sbin is an overlay private to this namespace: the
# installed mount.ckptfs must start $T/prefix/bin/ckptfs with no PATH, for
# type ckptfs (mount -t, an fstab line) and for fuse.ckptfs (mount.fuse.ckptfs).
SBIN_REAL=$(readlink -f /sbin)
install_and_mount() {
	mkdir -p "$T/ovl" && mount -t tmpfs tmpfs "$T/ovl" && mkdir "$T/ovl/u" "$T/ovl/w" ||
		{ echo "cannot make a tmpfs for the overlay"; return 1; }
	mount -t overlay overlay -o "lowerdir=$SBIN_REAL,upperdir=$T/ovl/u,workdir=$T/ovl/w" "$SBIN_REAL" ||
		{ echo "cannot put an overlay on $SBIN_REAL"; return 1; }
	make -s -C "$repo" install BUILD="$build" PREFIX="$T/prefix" SBINDIR=/sbin >"$T/install.out" 2>&1 ||
		{ echo "make install failed: $(tail -n 5 "$T/install.out")"; return 1; }
	local f
	for f in bin/ckptfs bin/ckptfs-admin share/man/man8/ckptfs.8 share/man/man1/ckptfs-admin.1 \
		share/doc/ckptfs/README.md share/doc/ckptfs/ADMIN.md share/doc/ckptfs/examples/ckptfs-ckpt.service; do
		[ -e "$T/prefix/$f" ] || { echo "make install did not install PREFIX/$f"; return 1; }
	done
	[ -x /sbin/mount.ckptfs ] && [ -L /sbin/mount.fuse.ckptfs ] || { echo "no /sbin/mount.ckptfs or mount.fuse.ckptfs"; return 1; }
	grep -qF "$T/prefix/bin/ckptfs" /sbin/mount.ckptfs || { echo "mount.ckptfs does not name $T/prefix/bin/ckptfs"; return 1; }
	if command -v man >/dev/null; then
		local warn
		warn=$(MANWIDTH=80 man -l --warnings "$T/prefix/share/man/man8/ckptfs.8" 2>&1 >/dev/null)
		[ -z "$warn" ] || { echo "ckptfs.8 renders with warnings: $warn"; return 1; }
	fi
	# mount -t ckptfs
	mount -t ckptfs "$B" "$M" -o "cache=$C,allow_other,_netdev,noauto" || { echo "mount -t ckptfs failed"; return 1; }
	after_mount || return 1
	[ "$(readlink "/proc/${DAEMONS[0]}/exe")" = "$T/prefix/bin/ckptfs" ] ||
		{ echo "the daemon is $(readlink "/proc/${DAEMONS[0]}/exe"), not the installed $T/prefix/bin/ckptfs"; return 1; }
	cmp "$T/ref" "$M/model.pt" || { echo "file from the earlier mounts differs"; return 1; }
	unmount_and_wait || return 1
	# an fstab line of type ckptfs
	echo "$B $M ckptfs cache=$C,allow_other,_netdev,nofail 0 0" >"$T/fstab.ckptfs"
	mount --fstab "$T/fstab.ckptfs" "$M" || { echo "mount --fstab (type ckptfs) failed"; return 1; }
	after_mount || return 1
	[ "$(cat "$M/via-fstab")" = fstab ] || { echo "earlier file missing"; return 1; }
	unmount_and_wait || return 1
	# type fuse.ckptfs now reaches mount.fuse.ckptfs, with /usr/local/sbin hiding nothing
	umount /usr/local/sbin 2>/dev/null
	mount -t fuse.ckptfs "$B" "$M" -o "cache=$C" || { echo "mount -t fuse.ckptfs (mount.fuse.ckptfs) failed"; return 1; }
	after_mount || return 1
	[ "$(readlink "/proc/${DAEMONS[0]}/exe")" = "$T/prefix/bin/ckptfs" ] ||
		{ echo "fuse.ckptfs started $(readlink "/proc/${DAEMONS[0]}/exe")"; return 1; }
	unmount_and_wait
}
if ! command -v make >/dev/null; then
	skip "make install + mount -t ckptfs" "make is not installed"
elif out=$(install_and_mount 2>&1); then
	pass "make install PREFIX=elsewhere: mount -t ckptfs, an fstab line of type ckptfs and -t fuse.ckptfs start the installed ckptfs through /sbin/mount.ckptfs; man pages and docs installed"
else
	fail "make install + mount -t ckptfs" "$out"
fi
umount "$SBIN_REAL" 2>/dev/null
umount "$T/ovl" 2>/dev/null

echo "$skipped skipped"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
