#!/bin/bash
# shellcheck disable=SC2015 # `A && B || fail` is meant: a failing A or B fails the step
# scripts/test-deb.sh [DEB_DIR] — tests the Debian package `make deb` built
# (`make test-deb`): root, /dev/fuse, a Debian 12 machine with the runtime
# libraries installed (apt-get is not asked to download anything it has not
# got already; it may fetch a missing dependency when the lists allow).
#
#   1. lintian reports no error (warnings are printed, not failed);
#   2. the .deb holds the binaries, the mount helper, man pages, docs,
#      examples, copyright and changelog, and Depends names fuse3 and the
#      shared libraries ckptfs links (dpkg-shlibdeps);
#   3. `apt-get install ./ckptfs_*.deb` installs it on this machine; the
#      packaged systemd examples pass `systemd-analyze verify`;
#   4. the installed /usr/bin/ckptfs mounts a temp BACKING with a temp cache, a
#      file written is read back byte for byte, the installed
#      `ckptfs-admin umount` unmounts and the daemon is gone;
#   5. `mount -t fuse.ckptfs` and `mount -t ckptfs` start /usr/bin/ckptfs
#      through the installed /sbin/mount.fuse.ckptfs and /sbin/mount.ckptfs
#      (mount(8) gives its helpers no PATH), the file is still there;
#   6. `man -w` finds ckptfs(8), ckptfs-admin(1), mount.ckptfs(8);
#   7. `apt-get purge -y ckptfs` leaves nothing of `dpkg -L ckptfs` (taken
#      before the purge) but directories other packages own.
#
# Safety: it refuses to run when ckptfs is installed or any file of the
# package exists already (it would replace, then purge, someone's install);
# a stamp in /var/tmp marks an install of its own, so a run killed with -9 is
# cleaned by the next. It runs in a private mount namespace, so its mounts
# are invisible elsewhere and die with it; the trap unmounts, stops the
# daemons it started (by PID), purges the package and removes its temp dir.
# While it runs, `mount -t fuse.ckptfs` on this machine reaches the packaged
# helper: do not run it beside check-examples (make test runs them in turn).
# Ends with "N passed, N failed"; exits non-zero on any failure.
set -u

repo=$(cd "$(dirname "$0")/.." && pwd)
debdir=${1:-build/deb}
case $debdir in /*) ;; *) debdir=$repo/$debdir ;; esac
STAMP=/var/tmp/ckptfs-test-deb.installed
passed=0 failed=0 skipped=0

pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1${2:+: $2}"; failed=$((failed + 1)); }
skip() { echo "SKIP $1: $2"; skipped=$((skipped + 1)); }
give_up() {
	echo "test-deb: $1" >&2
	echo "$passed passed, $((failed + 1)) failed"
	exit 1
}

[ "$(id -u)" = 0 ] && [ -c /dev/fuse ] || give_up "needs root and /dev/fuse (installs the package, mounts)"
debs=("$debdir"/ckptfs_*.deb)
[ ${#debs[@]} = 1 ] && [ -f "${debs[0]}" ] || give_up "want exactly one $debdir/ckptfs_*.deb (make deb): ${debs[*]}"
DEB=${debs[0]}

if [ -z "${CKPTFS_TEST_DEB_NS:-}" ]; then
	command -v unshare >/dev/null || give_up "unshare (util-linux) not found: needed for a private mount namespace"
	CKPTFS_TEST_DEB_NS=1 exec unshare --mount --propagation private "$0" "$debdir"
fi

pkg_state() { dpkg-query -W -f='${db:Status-Abbrev}' ckptfs 2>/dev/null | tr -d ' '; }
installed() { case $(pkg_state) in "" | un | pn) return 1 ;; *) return 0 ;; esac; }

# ---------------------------------------------------------------- safety first

if installed; then
	if [ -f "$STAMP" ]; then
		echo "test-deb: purging the ckptfs a killed earlier run left installed ($(cat "$STAMP"))" >&2
		DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 purge -y -qq ckptfs >/dev/null 2>&1 || dpkg --purge ckptfs >/dev/null
		rm -f "$STAMP"
	else
		give_up "the ckptfs package is installed on this machine (state $(pkg_state)), not by this test: not replacing and purging it"
	fi
fi
rm -f "$STAMP"
# every file of the package: none may exist yet (dpkg would overwrite an
# unowned file silently, and the purge would then delete it)
mapfile -t PKG_FILES < <(dpkg-deb -c "$DEB" | awk '$1 !~ /^d/ { p = $6; sub(/^\./, "", p); print p }')
[ ${#PKG_FILES[@]} -gt 0 ] || give_up "dpkg-deb -c $DEB lists no files"
for f in "${PKG_FILES[@]}"; do
	if [ -e "$f" ] || [ -L "$f" ]; then
		give_up "$f exists already (a make install?): not installing over it; remove it or run this elsewhere"
	fi
done

T=$(mktemp -d /tmp/ckptfs-test-deb.XXXXXX)
chmod 755 "$T"
B=$T/backing M=$T/mnt C=$T/cache
mkdir -p "$B" "$M" "$C"
DAEMONS=()
we_installed=0

is_mounted() { awk -v m="$M" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; }
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
	if [ "$we_installed" = 1 ] && installed; then
		DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 purge -y -qq ckptfs >/dev/null 2>&1 || dpkg --purge ckptfs >/dev/null 2>&1
	fi
	installed || rm -f "$STAMP"
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- 1. lintian

if ! command -v lintian >/dev/null; then
	fail "lintian" "not installed (scripts/install-pkg-deps.sh)"
else
	# lintian warns that it runs as root; its findings go to stdout
	lintian --fail-on error --display-info "$DEB" >"$T/lintian.out" 2>"$T/lintian.err"
	rc=$?
	sed 's/^/    /' "$T/lintian.out"
	if [ "$rc" = 0 ]; then
		pass "lintian: no errors ($(grep -c '^W:' "$T/lintian.out") warnings, $(grep -c '^I:' "$T/lintian.out") info)"
	else
		fail "lintian" "status $rc: $(grep '^E:' "$T/lintian.out" | head -n 5) $(tail -n 3 "$T/lintian.err")"
	fi
fi

# ---------------------------------------------------------------- 2. contents, Depends

contents() {
	local f want=(/usr/bin/ckptfs /usr/bin/ckptfs-admin /sbin/mount.ckptfs /sbin/mount.fuse.ckptfs
		/usr/share/man/man8/ckptfs.8.gz /usr/share/man/man1/ckptfs-admin.1.gz
		/usr/share/man/man8/mount.ckptfs.8.gz
		/usr/share/doc/ckptfs/copyright /usr/share/doc/ckptfs/changelog.gz
		/usr/share/doc/ckptfs/README.md.gz /usr/share/doc/ckptfs/ADMIN.md.gz
		/usr/share/doc/ckptfs/examples/mnt-ckpt.mount /usr/share/doc/ckptfs/examples/ckptfs-ckpt.service
		/usr/share/doc/ckptfs/examples/fstab.example)
	for f in "${want[@]}"; do
		printf '%s\n' "${PKG_FILES[@]}" | grep -qxF "$f" || { echo "$f is not in the package"; return 1; }
	done
	local dep
	dep=$(dpkg-deb -f "$DEB" Depends)
	for f in fuse3 libfuse3-3 libsqlite3-0 liblz4-1 libssl3 libnfs13 libmicrohttpd12; do
		echo "$dep" | tr ',' '\n' | grep -qE "^ *$f( |$)" || { echo "Depends lacks $f: $dep"; return 1; }
	done
	dpkg-deb --fsys-tarfile "$DEB" | tar -xO ./usr/share/doc/ckptfs/examples/ckptfs-ckpt.service |
		grep -q '^ExecStart=/usr/bin/ckptfs ' || { echo "the packaged ckptfs-ckpt.service does not start /usr/bin/ckptfs"; return 1; }
}
if out=$(contents 2>&1); then
	pass "package holds binaries, mount helper, man pages, docs, examples (paths /usr/bin), copyright, changelog; Depends: fuse3 + the libraries"
else
	fail "package contents" "$out"
fi

# ---------------------------------------------------------------- 3. install

echo "$DEB $(date -u +%FT%TZ) pid $$" >"$STAMP"
we_installed=1
if ! DEBIAN_FRONTEND=noninteractive timeout 180 apt-get -o DPkg::Lock::Timeout=120 install -y -q --no-install-recommends "$DEB" >"$T/apt.out" 2>&1; then
	fail "apt-get install $DEB" "$(tail -n 8 "$T/apt.out")"
	echo "$skipped skipped"
	echo "$passed passed, $failed failed"
	exit 1
fi
if [ "$(pkg_state)" = ii ] && [ -x /usr/bin/ckptfs ] && [ -x /sbin/mount.ckptfs ]; then
	pass "apt-get install ./$(basename "$DEB"): state ii, /usr/bin/ckptfs and /sbin/mount.ckptfs there"
else
	fail "apt-get install" "state $(pkg_state)"
fi
dpkg -L ckptfs >"$T/dpkg-L"

version=$(dpkg-deb -f "$DEB" Version)
if out=$(/usr/bin/ckptfs --version 2>&1) && [[ $out == "ckptfs $version "* ]] &&
	/usr/bin/ckptfs-admin --version >/dev/null 2>&1; then
	pass "/usr/bin/ckptfs --version: $out"
else
	fail "/usr/bin/ckptfs --version" "$out (package version $version)"
fi

# the packaged units name the installed binaries; systemd-analyze checks they exist
if command -v systemd-analyze >/dev/null; then
	if out=$(cd /usr/share/doc/ckptfs/examples && systemd-analyze verify --man=no ./ckptfs-ckpt.service ./mnt-ckpt.mount 2>&1); then
		pass "packaged examples: systemd-analyze verify ckptfs-ckpt.service (ExecStart=/usr/bin/ckptfs) mnt-ckpt.mount"
	else
		fail "packaged examples: systemd-analyze verify" "$out"
	fi
else
	skip "packaged examples: systemd-analyze verify" "systemd-analyze is not installed"
fi

# ---------------------------------------------------------------- 4.-5. mounts

# After a mount: the mount is there as fuse.ckptfs, served by /usr/bin/ckptfs.
after_mount() {
	is_mounted || { echo "nothing mounted on $M"; return 1; }
	local t pids
	t=$(awk -v m="$M" '$5 == m { split($0, a, " - "); split(a[2], b, " "); print b[1] }' /proc/self/mountinfo)
	[ "$t" = fuse.ckptfs ] || { echo "mounted as $t, not fuse.ckptfs"; return 1; }
	pids=$(our_daemons)
	[ -n "$pids" ] || { echo "no ckptfs process serves $M"; return 1; }
	read -ra DAEMONS <<<"$(echo "$pids" | tr '\n' ' ')"
	[ "$(readlink "/proc/${DAEMONS[0]}/exe")" = /usr/bin/ckptfs ] ||
		{ echo "the daemon is $(readlink "/proc/${DAEMONS[0]}/exe"), not the installed /usr/bin/ckptfs"; return 1; }
}
# The installed ckptfs-admin umount: returns with the mount gone and the daemon exited.
admin_umount() {
	/usr/bin/ckptfs-admin umount "$M" --timeout 60 || { echo "ckptfs-admin umount failed"; return 1; }
	is_mounted && { echo "still mounted after ckptfs-admin umount"; return 1; }
	local pid
	for pid in "${DAEMONS[@]}"; do
		for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		if [ -r "/proc/$pid/stat" ] && [ "$(sed -E 's/^[0-9]+ \(.*\) (.).*/\1/' "/proc/$pid/stat")" != Z ]; then
			echo "ckptfs (pid $pid) still runs after ckptfs-admin umount"
			return 1
		fi
	done
	DAEMONS=()
}

head -c $((5 * 1024 * 1024 + 7)) /dev/urandom >"$T/ref"
direct() {
	/usr/bin/ckptfs "$B" "$M" -o "cache=$C" || { echo "/usr/bin/ckptfs failed to mount"; return 1; }
	after_mount || return 1
	mkdir "$M/run" && cp "$T/ref" "$M/run/model.pt" || { echo "cp into the mount failed"; return 1; }
	cmp "$T/ref" "$M/run/model.pt" || { echo "read back differs"; return 1; }
	admin_umount || return 1
	[ -n "$(find "$B" -type f | head -n 1)" ] || { echo "nothing on BACKING"; return 1; }
}
if out=$(direct 2>&1); then
	pass "/usr/bin/ckptfs mounts, 5 MiB written and read back byte for byte, ckptfs-admin umount unmounts and the daemon exits"
else
	fail "/usr/bin/ckptfs mount" "$out"
fi

# mount -t TYPE through the packaged helper, with mount(8)-only options it must drop
via_helper() {
	local type=$1 tag=$2
	mount -t "$type" "$B" "$M" -o "cache=$C,_netdev,noauto" || { echo "mount -t $type failed"; return 1; }
	after_mount || return 1
	cmp "$T/ref" "$M/run/model.pt" || { echo "the file from the earlier mount differs"; return 1; }
	echo "$tag" >"$M/run/$tag" && [ "$(cat "$M/run/$tag")" = "$tag" ] || { echo "write/read failed"; return 1; }
	admin_umount
}
for type in fuse.ckptfs ckptfs; do
	if out=$(via_helper "$type" "via-$type" 2>&1); then
		pass "mount -t $type: the packaged /sbin/mount*.ckptfs starts /usr/bin/ckptfs; earlier file intact, write/read, ckptfs-admin umount"
	else
		fail "mount -t $type" "$out"
	fi
done

# ---------------------------------------------------------------- 6. man

if grep -hqsE '^\s*path-exclude\s*=?\s*/usr/share/man' /etc/dpkg/dpkg.cfg.d/* /etc/dpkg/dpkg.cfg; then
	skip "man -w" "dpkg excludes /usr/share/man on this machine (path-exclude)"
elif ! command -v man >/dev/null; then
	fail "man -w" "man-db is not installed (scripts/install-pkg-deps.sh)"
else
	mans() {
		local p
		p=$(man -w ckptfs) && [ "$p" = /usr/share/man/man8/ckptfs.8.gz ] || { echo "man -w ckptfs: $p"; return 1; }
		p=$(man -w ckptfs-admin) && [ "$p" = /usr/share/man/man1/ckptfs-admin.1.gz ] || { echo "man -w ckptfs-admin: $p"; return 1; }
		man -w mount.ckptfs >/dev/null || return 1
		MANWIDTH=80 man ckptfs 2>&1 | grep -q 'ckptfs' || { echo "man ckptfs renders nothing"; return 1; }
	}
	if out=$(mans 2>&1); then
		pass "man -w finds ckptfs(8), ckptfs-admin(1), mount.ckptfs(8) under /usr/share/man"
	else
		fail "man -w" "$out"
	fi
fi

# ---------------------------------------------------------------- 7. purge

purge() {
	DEBIAN_FRONTEND=noninteractive timeout 180 apt-get -o DPkg::Lock::Timeout=120 purge -y -q ckptfs >"$T/purge.out" 2>&1 ||
		{ echo "apt-get purge failed: $(tail -n 5 "$T/purge.out")"; return 1; }
	installed && { echo "still installed: state $(pkg_state)"; return 1; }
	local p left=()
	while read -r p; do
		[ "$p" = /. ] && continue
		if [ -d "$p" ]; then # a directory, or a link to one (/sbin -> usr/sbin)
			dpkg-query -S "$p" >/dev/null 2>&1 || left+=("$p/") # no other package owns it
		elif [ -L "$p" ] || [ -e "$p" ]; then
			left+=("$p")
		fi
	done <"$T/dpkg-L"
	[ ${#left[@]} -eq 0 ] || { echo "left after purge: ${left[*]}"; return 1; }
	left=()
	mapfile -t left < <(find /usr/bin /usr/sbin /sbin/ /usr/share/man /usr/share/doc /etc -name '*ckptfs*' 2>/dev/null)
	[ ${#left[@]} -eq 0 ] || { echo "ckptfs files left: ${left[*]}"; return 1; }
}
if out=$(purge 2>&1); then
	pass "apt-get purge -y ckptfs: nothing of its $(wc -l <"$T/dpkg-L") dpkg -L paths left but shared directories"
else
	fail "apt-get purge" "$out"
fi

echo "$skipped skipped"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
