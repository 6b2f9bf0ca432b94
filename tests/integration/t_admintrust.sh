#!/bin/bash
# t_admintrust — ckptfs-admin run as root trusts the control channel no
# further than the user who answers on it could act herself (admin_ctl.c 1-2,
# admin_umount.c 1-4): `umount --cache` unmounts only this cache's own ckptfs
# mount, whatever a program answering on CACHE/control.sock names. Each fake
# server case runs the tool in a private mount namespace (unshare -m) where a
# tmpfs "victim" holds a marker file: nothing the case mounts outlives it.
. "$(dirname "$0")/lib.sh"

E_PERM=5

# A cache with one committed generation, no daemon.
_cache() {
	ck_mount
	mkdir -p "$CK_MNT/run1/step-100"
	head -c 5000 /dev/urandom >"$CK_MNT/run1/step-100/a"
	setfattr -n user.ckptfs.commit -v 1 "$CK_MNT/run1/step-100"
	ck_umount
}

# _fake_script — $CK_TMP/fake.py, a control channel server for these cases:
#   fake.py SOCK [lock=PATH] VERB=LINES... [*=LINES]
# answers a request of VERB (or any other, with "*") with LINES (";"
# between them, %pid its own pid) and "ok"; with lock= it holds an
# exclusive flock on PATH, as a daemon holds CACHE/lock. SOCK.ready appears
# once it listens.
_fake_script() {
	cat >"$CK_TMP/fake.py" <<'PY'
import fcntl, os, socket, sys
sock, answers = sys.argv[1], {}
for a in sys.argv[2:]:
    k, v = a.split("=", 1)
    if k == "lock":
        lk = os.open(v, os.O_RDWR)
        fcntl.flock(lk, fcntl.LOCK_EX | fcntl.LOCK_NB)
    else:
        answers[k] = "".join(l + "\n" for l in v.replace("%pid", str(os.getpid())).split(";") if l)
s = socket.socket(socket.AF_UNIX)
s.bind(sock)
s.listen(8)
open(sock + ".ready", "w").close()
while True:
    c, _ = s.accept()
    try:
        req = c.recv(4096).decode().split()
        verb = req[2] if len(req) > 2 else ""
        c.sendall((answers.get(verb, answers.get("*", "")) + "ok\n").encode())
    except OSError:
        pass
    c.close()
PY
	chmod 644 "$CK_TMP/fake.py"
}

# _fake SOCK PID_SAYS MOUNTPOINT [LOCK] — a server that answers every request
# with "data pid PID_SAYS" ("self": its own), "data mountpoint MOUNTPOINT";
# with LOCK it holds it as a daemon does. FAKE_PID is its pid.
_fake() {
	local says=$2
	[ "$says" = self ] && says=%pid
	_fake_script
	rm -f "$1" "$1.ready"
	ck_bg "$PY" "$CK_TMP/fake.py" "$1" ${4:+lock=$4} "*=data pid $says;data mountpoint $3;data protocol 1"
	FAKE_PID=$CK_BG_PID
	ck_at_exit "rm -f '$1' '$1.ready'"
	ck_wait_file "$1.ready" 10
}

# Another process holds CK_CACHE/lock, as a daemon would (the pid ck_bg
# kills is the one holding it: bash execs sleep with the locked fd).
_hold_lock() {
	ck_bg bash -c 'exec 9>>"$1" && flock -x 9 && exec sleep 1000' _ "$CK_CACHE/lock"
	local i=0
	until ! flock -n -x "$CK_CACHE/lock" true; do
		i=$((i + 1))
		[ $i -le 200 ] || ck_fail "the lock holder did not take $CK_CACHE/lock within 10 s"
		sleep 0.05
	done
}

# _umount_in_ns VICTIM — in a private mount namespace: a tmpfs on VICTIM with
# a marker file, then `ckptfs-admin umount --cache CK_CACHE`; sets RC, ERR
# (its stderr), AFTER (VICTIM's type and marker afterwards, in there).
_umount_in_ns() {
	local v=$1
	mkdir -p "$v"
	cat >"$CK_TMP/ns.sh" <<'SH'
set -u
v=$1 cache=$2 out=$3
mount -t tmpfs -o size=1m tmpfs "$v" || exit 90
echo marker >"$v/m"
rc=0
timeout -k 5 60 "$CKPTFS_ADMIN" umount --cache "$cache" --timeout 20 >"$out.stdout" 2>"$out.stderr" </dev/null || rc=$?
echo "$rc" >"$out.rc"
echo "$(findmnt -n -o FSTYPE --mountpoint "$v") $(cat "$v/m" 2>&1)" >"$out.after"
SH
	unshare -m --propagation private bash "$CK_TMP/ns.sh" "$v" "$CK_CACHE" "$CK_TMP/ns" ||
		ck_fail "the private mount namespace did not run (exit $?)"
	RC=$(cat "$CK_TMP/ns.rc") ERR=$(cat "$CK_TMP/ns.stderr") AFTER=$(cat "$CK_TMP/ns.after")
	ck_log "exit $RC: $ERR"
}

# One line on stderr, naming the socket and containing NEEDLE; the victim
# still mounted with its marker.
_refused() {
	assert_eq "tmpfs marker" "$AFTER" "the victim tmpfs and its marker after umount --cache"
	assert_eq "$E_PERM" "$RC" "exit of umount --cache with a fake server"
	assert_eq 1 "$(printf '%s\n' "$ERR" | grep -c '')" "lines on stderr ($ERR)"
	assert_contains "$ERR" "control channel $CK_CACHE/control.sock" "the refusal"
	assert_contains "$ERR" "$1" "the reason"
}

# _root_refused CMD DIR NEEDLE [ARGS...] — root's `CMD --cache DIR ARGS` is
# refused: exit 5, one line on stderr containing NEEDLE, nothing on stdout.
_root_refused() {
	local cmd=$1 dir=$2 needle=$3 rc=0
	shift 3
	"$CKPTFS_ADMIN" "$cmd" --cache "$dir" "$@" >"$CK_TMP/out" 2>"$CK_TMP/err" </dev/null || rc=$?
	ck_log "$cmd --cache $dir: exit $rc: $(cat "$CK_TMP/err")"
	assert_eq "$E_PERM" "$rc" "exit of root's $cmd --cache $dir ($(cat "$CK_TMP/out"))"
	assert_eq 1 "$(grep -c '' "$CK_TMP/err")" "stderr lines of root's $cmd --cache $dir"
	assert_contains "$(cat "$CK_TMP/err")" "$needle" "root's $cmd --cache $dir"
	assert_eq "" "$(cat "$CK_TMP/out")" "stdout of root's $cmd --cache $dir"
}

# The review's probe: a server naming another pid (one holding the lock)
# and an unrelated tmpfs.
test_umount_by_cache_refuses_a_server_that_names_another_pid() {
	_cache
	local v=$CK_TMP/victim
	ck_bg sleep 1000
	local sp=$CK_BG_PID
	_hold_lock
	_fake "$CK_CACHE/control.sock" "$sp" "$v"
	_umount_in_ns "$v"
	_refused "its hello names pid $sp, but pid $FAKE_PID answered"
	_ck_pid_alive "$sp" || ck_fail "the pid the fake hello named was signalled"
}

# A server that holds the lock and names itself still names a tmpfs.
test_umount_by_cache_refuses_a_mount_that_is_not_ckptfs() {
	_cache
	local v=$CK_TMP/victim
	_fake "$CK_CACHE/control.sock" self "$v" "$CK_CACHE/lock"
	_umount_in_ns "$v"
	_refused "a tmpfs mount, not a ckptfs one"
}

# ... or a symlink to it: never followed.
test_umount_by_cache_does_not_follow_a_symlink_to_a_mount() {
	_cache
	local v=$CK_TMP/victim
	ln -s "$v" "$CK_TMP/link"
	_fake "$CK_CACHE/control.sock" self "$CK_TMP/link" "$CK_CACHE/lock"
	_umount_in_ns "$v"
	_refused "not a mount point"
}

# A server of a uid that is neither root nor the cache's owner is asked
# nothing.
# _fake_nobody MOUNTPOINT — a server of uid NOBODY (neither root nor the
# cache's owner) on CK_CACHE/control.sock, naming its own pid and
# MOUNTPOINT; the cache lock held as a daemon would.
_fake_nobody() {
	local d=$CK_TMP/nobody
	mkdir -m 755 "$d"
	chown $NOBODY "$d"
	_hold_lock
	# it binds where it may, root moves the socket into the cache
	_fake_script
	ck_bg setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups "$PY" "$CK_TMP/fake.py" "$d/s" \
		"*=data pid %pid;data mountpoint $1;data state committed"
	ck_wait_file "$d/s.ready" 10
	mv "$d/s" "$CK_CACHE/control.sock"
}

# A server of a uid that is neither root nor the cache's owner is asked
# nothing.
test_umount_by_cache_refuses_a_server_of_another_uid() {
	_cache
	local v=$CK_TMP/victim
	_fake_nobody "$v"
	_umount_in_ns "$v"
	_refused "answered by uid $NOBODY"
	assert_contains "$ERR" "neither root nor the cache's owner (uid 0)" "the reason"
}

# ... by any command: rm through it is refused, not reported done.
test_rm_by_cache_refuses_a_server_of_another_uid() {
	_cache
	_fake_nobody "$CK_TMP/victim"
	_root_refused rm "$CK_CACHE" "control channel $CK_CACHE/control.sock: answered by uid $NOBODY" \
		run1/step-100
}

# A server that names the ckptfs mount of another cache: refused, that mount
# stays.
test_umount_by_cache_refuses_the_mount_of_another_cache() {
	_cache
	local save_cache=$CK_CACHE save_mnt=$CK_MNT
	CK_CACHE=$CK_TMP/cache2 CK_MNT=$CK_TMP/mnt2
	mkdir -p "$CK_CACHE" "$CK_MNT"
	ck_mount
	local other=$CK_MNT
	CK_CACHE=$save_cache CK_MNT=$save_mnt
	_fake "$CK_CACHE/control.sock" self "$other" "$CK_CACHE/lock"
	local rc=0
	"$CKPTFS_ADMIN" umount --cache "$CK_CACHE" --timeout 20 >"$CK_TMP/out" 2>"$CK_TMP/err" </dev/null || rc=$?
	ck_log "exit $rc: $(cat "$CK_TMP/err")"
	ck_is_mounted "$other" || ck_fail "umount --cache $CK_CACHE unmounted $other, the mount of another cache"
	assert_eq "$E_PERM" "$rc" "exit of umount --cache naming another cache's mount"
	assert_eq 1 "$(grep -c '' "$CK_TMP/err")" "lines on stderr"
	assert_contains "$(cat "$CK_TMP/err")" "control channel $CK_CACHE/control.sock" "the refusal"
	assert_contains "$(cat "$CK_TMP/err")" "the mount of another cache (its source is ckptfs:$CK_TMP/cache2)" "the reason"
	CK_MNT=$other
	ck_umount
	CK_MNT=$save_mnt
}

# The daemon's own answer: its mount names its cache, and umount --cache of a
# mounted daemon unmounts it and waits for it.
test_umount_by_cache_unmounts_its_own_mount() {
	ck_mount
	mkdir -p "$CK_MNT/run1/step-100"
	head -c 5000 /dev/urandom >"$CK_MNT/run1/step-100/a"
	setfattr -n user.ckptfs.commit -v 1 "$CK_MNT/run1/step-100"
	assert_eq "ckptfs:$CK_CACHE fuse.ckptfs" "$(findmnt -n -o SOURCE,FSTYPE --mountpoint "$CK_MNT" | tr -s ' ')" "the mount's source and type"
	local rc=0
	"$CKPTFS_ADMIN" umount --cache "$CK_CACHE" --timeout 60 >"$CK_TMP/out" 2>"$CK_TMP/err" </dev/null || rc=$?
	assert_eq 0 "$rc" "exit of umount --cache of a mounted daemon ($(cat "$CK_TMP/err"))"
	ck_is_mounted "$CK_MNT" && ck_fail "still mounted after umount --cache"
	ck_daemon_exit "ckptfs-admin umount --cache"
	assert_contains "$(cat "$CK_TMP/out")" "$CK_MNT: unmounted" "the tool's line"
}

# A mount the user named (fsname=): its source names no cache. By MOUNTPOINT
# (which named the cache through the mount's user.ckptfs.cache) it is
# unmounted; by --cache, which has only the daemon's word for the mount, not.
test_umount_of_a_mount_with_the_users_fsname() {
	ck_mount fsname=mine
	assert_eq "mine" "$(findmnt -n -o SOURCE --mountpoint "$CK_MNT")" "the mount's source with fsname=mine"
	local rc=0
	"$CKPTFS_ADMIN" umount --cache "$CK_CACHE" --timeout 60 >"$CK_TMP/out" 2>"$CK_TMP/err" </dev/null || rc=$?
	ck_is_mounted "$CK_MNT" || ck_fail "umount --cache unmounted a mount whose source names no cache"
	assert_eq "$E_PERM" "$rc" "exit of umount --cache"
	assert_contains "$(cat "$CK_TMP/err")" "its source (mine) does not name a cache" "the reason"
	assert_contains "$(cat "$CK_TMP/err")" "give MOUNTPOINT, not --cache" "the way out"
	rc=0
	"$CKPTFS_ADMIN" umount "$CK_MNT" --timeout 60 >"$CK_TMP/out" 2>"$CK_TMP/err" </dev/null || rc=$?
	assert_eq 0 "$rc" "exit of umount MOUNTPOINT ($(cat "$CK_TMP/err"))"
	ck_is_mounted "$CK_MNT" && ck_fail "still mounted after umount MOUNTPOINT"
	ck_daemon_exit "ckptfs-admin umount MOUNTPOINT"
}

# Through a mount whose control channel answers as a node of a shared
# catalog (the daemon's socket name taken over by a program of the cache's
# owner): a generation named "victimdir" in series "/.." would make export
# read $CK_TMP/victimdir, outside the mount. Refused; DIR stays empty.
test_export_refuses_a_generation_named_outside_the_mount() {
	ck_mount
	mkdir -p "$CK_MNT/run1/step-100"
	echo data >"$CK_MNT/run1/step-100/a"
	setfattr -n user.ckptfs.commit -v 1 "$CK_MNT/run1/step-100"
	mkdir -m 700 "$CK_TMP/victimdir"
	printf "root's secret\n" >"$CK_TMP/victimdir/secret"
	_fake_script
	rm -f "$CK_CACHE/control.sock"
	ck_bg "$PY" "$CK_TMP/fake.py" "$CK_CACHE/control.sock" "hello=data pid %pid;data shared 1" \
		"gen=data series 9 /..;data generation 7 committed 1 0 100 1 14 0 9 victimdir"
	ck_wait_file "$CK_CACHE/control.sock.ready" 10
	mkdir "$CK_TMP/dir"
	local rc=0
	"$CKPTFS_ADMIN" export "$CK_MNT" run1/step-100 "$CK_TMP/dir" >"$CK_TMP/out" 2>"$CK_TMP/err" </dev/null || rc=$?
	assert_eq "" "$(ls -A "$CK_TMP/dir")" "what export put in DIR"
	assert_eq "$E_PERM" "$rc" "exit of export ($(cat "$CK_TMP/out"))"
	assert_eq 1 "$(grep -c '' "$CK_TMP/err")" "lines on stderr"
	assert_contains "$(cat "$CK_TMP/err")" "control channel $CK_CACHE/control.sock: the answer names generation 'victimdir' of series '/..', a path outside the mount" "the refusal"
	kill "$CK_BG_PID"
	wait "$CK_BG_PID" 2>/dev/null || true
	ck_umount
}

# Review 35 F5 (admin.c A1): user nobody owns a cache whose backing file
# names root's BACKING (the "victim") and whose catalog lost its claim rows
# (a "fresh" catalog takes a released claim); root's `gc --delete --cache`
# walked the victim's BACKING with deletion on and took its claim: the
# victim's next mount was refused as behind. Now root is refused there (exit
# 5, one line naming the cache, its owner and how to run it as the owner),
# nothing read or changed; --as-owner runs as nobody, who cannot open the
# victim's BACKING, and works on nobody's own.
test_root_on_a_cache_another_user_owns_is_refused_unless_as_owner() {
	local vb=$CK_TMP/victim-backing vc=$CK_TMP/victim-cache
	mkdir -p "$vb" "$vc"
	chmod 700 "$vb" "$vc"
	CK_BACKING=$vb CK_CACHE=$vc
	ck_mount
	mkdir -p "$CK_MNT/run1/step-1" "$CK_REF"
	head -c 300000 /dev/urandom >"$CK_REF/a"
	cp "$CK_REF/a" "$CK_MNT/run1/step-1/a"
	setfattr -n user.ckptfs.commit -v 1 "$CK_MNT/run1/step-1"
	ck_wait_durable
	ck_umount
	local claim objs
	claim=$(ck_claim_state "$vb")
	objs=$(find "$vb/chunks" -type f | sort | md5sum)
	# nobody's own cache (made by a mount of its own BACKING), then handed over
	local ub=$CK_TMP/user-backing uc=$CK_TMP/user-cache
	mkdir -p "$ub" "$uc"
	chmod 700 "$ub" "$uc"
	CK_BACKING=$ub CK_CACHE=$uc
	ck_mount
	mkdir -p "$CK_MNT/run1/step-7"
	echo seven >"$CK_MNT/run1/step-7/a"
	setfattr -n user.ckptfs.commit -v 1 "$CK_MNT/run1/step-7"
	ck_wait_durable
	ck_umount
	chown -R $NOBODY:$NOBODY "$ub" "$uc"
	as_nobody sh -c "printf '%s\n' '$vb' >'$uc/backing.new' && mv '$uc/backing.new' '$uc/backing'"
	as_nobody sqlite3 "$uc/catalog.db" "DELETE FROM meta WHERE key LIKE 'claim%'"
	local cmd rc
	for cmd in "gc --delete" "gc" "list" "rebuild" "rm run1/step-7"; do
		rc=0
		# shellcheck disable=SC2086
		"$CKPTFS_ADMIN" ${cmd%% *} --cache "$uc" $(echo "$cmd" | cut -s -d' ' -f2-) >"$CK_TMP/out" 2>"$CK_TMP/err" </dev/null || rc=$?
		assert_eq $E_PERM "$rc" "exit of root's $cmd --cache on nobody's cache ($(tr '\n' '|' <"$CK_TMP/err"))"
		assert_eq 1 "$(grep -c '' "$CK_TMP/err")" "stderr lines of root's $cmd"
		assert_contains "$(cat "$CK_TMP/err")" "cache $uc: owned by nobody (uid $NOBODY), not root" "root's $cmd"
		assert_contains "$(cat "$CK_TMP/err")" "runuser -u nobody -- ckptfs-admin" "root's $cmd"
		assert_eq "" "$(cat "$CK_TMP/out")" "stdout of root's $cmd"
	done
	assert_eq "$claim" "$(ck_claim_state "$vb")" "the victim's claim"
	assert_eq "$objs" "$(find "$vb/chunks" -type f | sort | md5sum)" "the victim's objects"
	# --as-owner: nobody's rights, which do not reach the victim's BACKING
	rc=0
	"$CKPTFS_ADMIN" gc --delete --as-owner --cache "$uc" >"$CK_TMP/out" 2>"$CK_TMP/err" </dev/null || rc=$?
	[ "$rc" != 0 ] || ck_fail "gc --delete --as-owner on a cache naming root's BACKING exited 0: $(cat "$CK_TMP/out")"
	assert_contains "$(cat "$CK_TMP/err")" "$vb" "gc --as-owner's error"
	assert_contains "$(cat "$CK_TMP/err")" "ermission denied" "gc --as-owner's error"
	assert_eq "$claim" "$(ck_claim_state "$vb")" "the victim's claim after --as-owner"
	assert_eq "$objs" "$(find "$vb/chunks" -type f | sort | md5sum)" "the victim's objects after --as-owner"
	CK_BACKING=$vb CK_CACHE=$vc
	ck_mount
	assert_file_eq "$CK_REF/a" "$CK_MNT/run1/step-1/a"
	ck_umount
	# on nobody's own BACKING, --as-owner works (as nobody would herself)
	as_nobody sh -c "printf '%s\n' '$ub' >'$uc/backing.new' && mv '$uc/backing.new' '$uc/backing'"
	rc=0
	"$CKPTFS_ADMIN" list --as-owner --cache "$uc" >"$CK_TMP/out" 2>"$CK_TMP/err" </dev/null || rc=$?
	assert_eq 0 "$rc" "list --as-owner on nobody's own cache ($(tr '\n' '|' <"$CK_TMP/err"))"
	assert_contains "$(cat "$CK_TMP/out")" "step-7" "list --as-owner"
	rc=0
	"$CKPTFS_ADMIN" list --as-owner "$CK_MNT" >"$CK_TMP/out" 2>"$CK_TMP/err" </dev/null || rc=$?
	assert_eq 2 "$rc" "list --as-owner MOUNTPOINT"
	assert_contains "$(cat "$CK_TMP/err")" "--as-owner goes with --cache DIR" "list --as-owner MOUNTPOINT"
}

# Review 36 F4d (admin.c A1): the owner test was a stat() of the path and
# every open after went by the path again, so a user who can change a
# directory on it could show root's directory to the test and her own cache
# to the opens. Now DIR is opened once with O_NOFOLLOW and the owner judged
# on that fd: a symlink given as DIR is refused, and so is a path another
# user could change after the test (a directory above it hers, or the cache
# writable by others): one line, exit 5, nothing read. Both ran on main.
test_root_judges_the_cache_directory_itself() {
	_cache
	local claim
	claim=$(ck_claim_state)
	ln -s "$CK_CACHE" "$CK_TMP/link"
	local cmd
	for cmd in list gc; do
		_root_refused $cmd "$CK_TMP/link" \
			"--cache $CK_TMP/link: a symlink (to $CK_CACHE): give the real path"
	done
	# the cache (root's) below a directory nobody owns: nobody could swap it
	mkdir -m 755 "$CK_TMP/hers"
	chown $NOBODY "$CK_TMP/hers"
	mv "$CK_CACHE" "$CK_TMP/hers/cache"
	for cmd in list gc; do
		_root_refused $cmd "$CK_TMP/hers/cache" \
			"cache $CK_TMP/hers/cache: refused as root: $CK_TMP/hers: a directory above it is owned by uid $NOBODY, not root or 0"
	done
	# root's own directory, writable by others
	mv "$CK_TMP/hers/cache" "$CK_CACHE"
	chmod 777 "$CK_CACHE"
	_root_refused list "$CK_CACHE" "cache $CK_CACHE: refused as root: $CK_CACHE: writable by group or others (mode 0777)"
	assert_eq "$claim" "$(ck_claim_state)" "BACKING's claim after the refusals"
	# the real path, root's alone: read as before
	chmod 700 "$CK_CACHE"
	local rc=0
	"$CKPTFS_ADMIN" list --cache "$CK_CACHE" >"$CK_TMP/out" 2>"$CK_TMP/err" </dev/null || rc=$?
	assert_eq 0 "$rc" "list --cache on root's own cache ($(cat "$CK_TMP/err"))"
	assert_contains "$(cat "$CK_TMP/out")" "step-100" "list --cache on root's own cache"
	rc=0
	"$CKPTFS_ADMIN" umount --cache "$CK_TMP/link" --timeout 20 >"$CK_TMP/out" 2>"$CK_TMP/err" </dev/null || rc=$?
	assert_eq 4 "$rc" "umount --cache through the symlink, exempt"
	assert_contains "$(cat "$CK_TMP/err")" "cache $CK_CACHE: no ckptfs daemon uses it" "umount --cache through the symlink, exempt"
}

ck_main "$@"
