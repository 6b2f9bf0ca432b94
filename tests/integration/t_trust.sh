#!/bin/bash
# t_trust — the daemon runs as root and trusts only what it created (shared
# invariant 7, docs/DESIGN.md "Trust model"): a cache directory another user
# owns or can write is refused before mounting; what it makes in the cache and
# on BACKING is private; symlinks planted at the names it uses, in the cache
# and on BACKING, before and during a mount, are never followed to a file of
# root's; ckptfs-admin export into a shared directory removes nothing it did
# not make. Each case keeps a root-owned mode-600 "victim" outside and checks
# it byte for byte.
. "$(dirname "$0")/lib.sh"


# A root file of mode 600 and a root directory of mode 700 outside the cache
# and BACKING, which no planted link may lead the daemon to.
make_victims() {
	VICTIM=$CK_TMP/victim
	VICTIM_DIR=$CK_TMP/victimdir
	printf "root's secret\n" >"$VICTIM"
	chmod 600 "$VICTIM"
	touch -d '2020-01-01 00:00:00' "$VICTIM"
	mkdir -m 700 "$VICTIM_DIR"
}

assert_victims_untouched() {
	assert_eq "root's secret" "$(cat "$VICTIM")" "content of root's mode-600 file outside ($1)"
	assert_eq "600 0 2020-01-01" "$(stat -c '%a %u %y' "$VICTIM" | cut -c1-16)" "mode, owner and mtime of root's file ($1)"
	assert_eq "" "$(ls -A "$VICTIM_DIR")" "entries in root's directory outside ($1)"
}

# refused NEEDLE CACHE: the daemon, in the foreground, over CACHE: a non-zero
# exit, one line on stderr containing NEEDLE, nothing mounted.
refused() {
	local needle=$1 cache=$2 rc=0 lines first
	ck_register_mount "$CK_MNT"
	timeout -k 5 20 "$CKPTFS_BIN" -f -o "$(ck_opts "cache=$cache")" "$CK_BACKING" "$CK_MNT" \
		>"$CK_TMP/out" 2>"$CK_TMP/err" </dev/null &
	local pid=$!
	_ck_state "pid $pid $CKPTFS_BIN"
	wait $pid || rc=$?
	if ck_is_mounted "$CK_MNT"; then
		fusermount3 -u "$CK_MNT" 2>/dev/null || umount -l "$CK_MNT"
		ck_fail "cache $cache was accepted (mounted), expected a refusal naming '$needle'"
	fi
	[ $rc != 124 ] && [ $rc != 137 ] || ck_fail "the daemon did not exit within 20 s"
	[ $rc != 0 ] || ck_fail "the daemon exited 0 over cache $cache, expected a refusal"
	lines=$(grep -c '' "$CK_TMP/err") || true
	first=$(head -n 1 "$CK_TMP/err")
	assert_contains "$first" "$needle" "the refusal line"
	[ "$lines" = 1 ] || ck_fail "$lines lines on stderr, expected one: $(tr '\n' '|' <"$CK_TMP/err")"
	ck_log "refused (exit $rc): $first"
}

# ---------------------------------------------------------------- the cache directory

test_a_cache_directory_owned_by_another_user_is_refused() {
	chown $NOBODY:$NOBODY "$CK_CACHE"
	chmod 700 "$CK_CACHE"
	refused "$CK_CACHE" "$CK_CACHE"
	assert_contains "$(cat "$CK_TMP/err")" "owned by uid $NOBODY" "the reason"
	assert_eq "" "$(ls -A "$CK_CACHE")" "what the refused daemon made in the other user's directory"
}

test_a_cache_directory_others_can_write_is_refused() {
	chmod 777 "$CK_CACHE"
	refused "writable by group or others" "$CK_CACHE"
	chmod 770 "$CK_CACHE"
	refused "writable by group or others" "$CK_CACHE"
	assert_eq "" "$(ls -A "$CK_CACHE")" "what a refused daemon made"
	# StrictModes: a directory above it that another user can change
	mkdir -m 777 "$CK_TMP/open"
	mkdir -m 700 "$CK_TMP/open/cache"
	refused "$CK_TMP/open: a directory above it is writable by other users" "$CK_TMP/open/cache"
	chown $NOBODY "$CK_TMP/open"
	chmod 755 "$CK_TMP/open"
	refused "owned by uid $NOBODY" "$CK_TMP/open/cache"
	# a sticky one (/tmp) is fine: nobody else can move or remove our entry
	chown 0 "$CK_TMP/open"
	chmod 1777 "$CK_TMP/open"
	CK_CACHE=$CK_TMP/open/cache
	ck_mount
	echo hi >"$CK_MNT/f"
	ck_umount
}

test_a_premade_0755_cache_and_what_the_daemon_makes_are_private() {
	chmod 755 "$CK_CACHE"
	umask 022
	# as an older ckptfs left BACKING: 0755 directories, a 0444 object
	mkdir -m 755 "$CK_BACKING/chunks" "$CK_BACKING/manifests" "$CK_BACKING/chunks/00"
	echo old >"$CK_BACKING/chunks/00/old"
	chmod 444 "$CK_BACKING/chunks/00/old"
	ck_mount
	grep -q "made private" "$CK_DLOG" || ck_fail "the log does not say the cache was made private: $(grep cache "$CK_DLOG" | head -n 3 | tr '\n' '|')"
	mkdir -p "$CK_MNT/private/run/step-1"
	chmod 700 "$CK_MNT/private"
	ck_rand "$CK_REF/w" $((3 * MiB + 7))
	cp "$CK_REF/w" "$CK_MNT/private/run/step-1/w"
	chmod 600 "$CK_MNT/private/run/step-1/w"
	# an out-of-order write: the writer stages in CACHE/staging
	"$PY" -c "
import os
fd = os.open('$CK_MNT/private/run/step-1/s', os.O_CREAT | os.O_WRONLY, 0o600)
os.pwrite(fd, b'b' * 100000, 200000)
os.pwrite(fd, b'a' * 100000, 0)
os.fsync(fd)
os.close(fd)"
	setfattr -n user.ckptfs.commit -v 1 "$CK_MNT/private/run/step-1" 2>/dev/null || true
	ck_wait_durable
	assert_eq 700 "$(stat -c %a "$CK_CACHE")" "mode of the cache directory"
	assert_eq 600 "$(stat -c %a "$CK_CACHE/catalog.db")" "mode of catalog.db"
	local open
	open=$(find "$CK_CACHE" "$CK_BACKING" -mindepth 1 -perm /077 ! -type l ! -type s ! -path '*/chunks/00*' -printf '%m %p\n' | head -n 5)
	assert_eq "" "$open" "files and directories in the cache and on BACKING others can read"
	[ -n "$(find "$CK_BACKING/chunks" -type f ! -name old | head -n 1)" ] || ck_fail "no chunk object reached BACKING"
	as_nobody cat "$CK_BACKING/chunks/00/old" >/dev/null 2>&1 && ck_fail "uid $NOBODY read an object an older ckptfs left on BACKING"
	ck_umount
	open=$(find "$CK_CACHE" "$CK_BACKING" -mindepth 1 -perm /077 ! -type l ! -path '*/chunks/00*' -printf '%m %p\n' | head -n 5)
	assert_eq "" "$open" "files in the cache and on BACKING others can read after unmount"
	# another user cannot read the bytes of root's file from the cache
	local obj
	obj=$(find "$CK_CACHE/chunks" -type f | head -n 1)
	as_nobody cat "$obj" >/dev/null 2>&1 && ck_fail "uid $NOBODY read chunk object $obj"
	as_nobody cat "$CK_CACHE/catalog.db" >/dev/null 2>&1 && ck_fail "uid $NOBODY read catalog.db"
	return 0
}

# A BACKING others can write (a group's shared export) is used, not refused:
# nothing planted there is followed, and the log says what others can still do.
test_a_backing_directory_others_can_write_is_used_with_a_warning() {
	chmod 777 "$CK_BACKING"
	ck_mount
	echo hi >"$CK_MNT/f"
	ck_wait_durable
	grep -q "BACKING $CK_BACKING: writable by other users (mode 0777" "$CK_DLOG" ||
		ck_fail "no warning about the writable BACKING in the log"
	ck_umount
	assert_eq "" "$(find "$CK_BACKING" -mindepth 1 -perm /077 -printf '%m %p\n' | head -n 3)" "what BACKING got that others can read"
}

# ---------------------------------------------------------------- planted symlinks

test_symlinks_planted_at_the_cache_names_before_mounting_are_refused() {
	make_victims
	local name
	for name in lock catalog.db catalog.db-wal catalog.db-shm catalog.db-journal catalog.db-defer \
		backing backing.tmp ckptfs.log; do
		ln -s "$VICTIM" "$CK_CACHE/$name"
		refused "$name" "$CK_CACHE"
		assert_victims_untouched "a symlink at $name"
		rm "$CK_CACHE/$name"
	done
	for name in staging chunks tmp; do
		rm -rf "${CK_CACHE:?}/$name"
		ln -s "$VICTIM_DIR" "$CK_CACHE/$name"
		refused "$name" "$CK_CACHE"
		assert_victims_untouched "a symlink at $name/"
		rm "$CK_CACHE/$name"
	done
	# a cache made by root beforehand: its owner is root, so it is used
	ck_mount
	echo ok >"$CK_MNT/f"
	ck_umount
	assert_victims_untouched "after a mount"
}

test_symlinks_planted_in_the_cache_while_mounted_are_not_followed() {
	make_victims
	ck_mount
	ck_rand "$CK_REF/a" 100000
	cp "$CK_REF/a" "$CK_MNT/a"
	ck_wait_durable # a's object is on BACKING too
	# the next object's shard, and the store's tmp/, now lead outside
	ck_rand "$CK_REF/b" 100001
	local hex
	hex=$(sha256sum "$CK_REF/b" | cut -c1-64)
	mkdir -p "$CK_CACHE/chunks/${hex:0:2}"
	rm -rf "$CK_CACHE/chunks/${hex:0:2}/${hex:2:2}"
	ln -s "$VICTIM_DIR" "$CK_CACHE/chunks/${hex:0:2}/${hex:2:2}"
	mv "$CK_CACHE/tmp" "$CK_CACHE/tmp.moved"
	ln -s "$VICTIM_DIR" "$CK_CACHE/tmp"
	cp "$CK_REF/b" "$CK_MNT/b" 2>/dev/null || ck_log "the write through planted links failed (as it may)"
	sync "$CK_MNT/b" 2>/dev/null || true
	# a cached object replaced by a link to root's file: never its bytes
	local ahex
	ahex=$(sha256sum "$CK_REF/a" | cut -c1-64)
	if [ -f "$CK_CACHE/chunks/${ahex:0:2}/${ahex:2:2}/$ahex" ]; then
		rm "$CK_CACHE/chunks/${ahex:0:2}/${ahex:2:2}/$ahex"
		ln -s "$VICTIM" "$CK_CACHE/chunks/${ahex:0:2}/${ahex:2:2}/$ahex"
		echo 3 >/proc/sys/vm/drop_caches
		# taken for a damaged copy: dropped, and BACKING's is fetched
		assert_file_eq "$CK_REF/a" "$CK_MNT/a"
		[ -L "$CK_CACHE/chunks/${ahex:0:2}/${ahex:2:2}/$ahex" ] && ck_fail "the planted object is still in the cache"
	else
		ck_fail "a's object is not in the cache"
	fi
	assert_victims_untouched "links planted while mounted"
	rm "$CK_CACHE/tmp"
	mv "$CK_CACHE/tmp.moved" "$CK_CACHE/tmp"
	rm "$CK_CACHE/chunks/${hex:0:2}/${hex:2:2}"
	ck_umount
	assert_victims_untouched "after unmount"
}

# The old temporary names on BACKING were "tmp/<host>.<pid>.<n>" and
# "tmp/probe.<host>.<pid>.<n>": a user who can write BACKING linked them to
# root's file before the daemon started. The wrapper plants them for its own
# pid, then execs the daemon (same pid).
test_symlinks_planted_at_guessable_backing_temporaries_are_not_followed() {
	make_victims
	local host real=$CKPTFS_BIN
	host=$(hostname | tr './' '__')
	cat >"$CK_TMP/planting-ckptfs" <<EOF
#!/bin/bash
for n in \$(seq 0 300); do
	ln -s '$VICTIM' '$CK_BACKING/tmp/$host.'\$\$".\$n"
	ln -s '$VICTIM' '$CK_BACKING/tmp/probe.$host.'\$\$".\$n"
done
exec '$real' "\$@"
EOF
	chmod 755 "$CK_TMP/planting-ckptfs"
	mkdir -p "$CK_BACKING/tmp"
	CKPTFS_BIN=$CK_TMP/planting-ckptfs
	ck_mount
	CKPTFS_BIN=$real
	mkdir -p "$CK_MNT/run/step-1"
	ck_rand "$CK_REF/m" 300000
	cp "$CK_REF/m" "$CK_MNT/run/step-1/m"
	setfattr -n user.ckptfs.commit -v 1 "$CK_MNT/run/step-1" 2>/dev/null || true
	echo tree >"$CK_MNT/outside"
	assert_victims_untouched "links at the old temporary names on BACKING, at mount"
	ck_wait_durable
	ck_umount
	assert_victims_untouched "links at the old temporary names on BACKING"
	[ -n "$(find "$CK_BACKING/manifests" -type f | head -n 1)" ] || ck_fail "no manifest reached BACKING"
}

# ---------------------------------------------------------------- ckptfs-admin export

# Issue 16: export into a sticky directory removed another user's tree whose
# name was its temporary name (.NAME.export-PID). The wrapper lets uid 65534
# make that name for the admin's pid, then execs ckptfs-admin (same pid).
test_export_into_a_sticky_directory_keeps_another_users_colliding_tree() {
	ck_mount
	mkdir -p "$CK_MNT/run1/step-1"
	echo weights >"$CK_MNT/run1/step-1/w"
	setfattr -n user.ckptfs.commit -v 1 "$CK_MNT/run1/step-1"
	local pub=$CK_TMP/pub rc=0
	mkdir -m 1777 "$pub"
	bash -c '
		setpriv --reuid='$NOBODY' --regid='$NOBODY' --clear-groups \
			sh -c "mkdir -p \"$1/.step-1.export-$$/keep\" && echo theirs >\"$1/.step-1.export-$$/keep/f\"" || exit 99
		exec "$2" export "$3" run1/step-1 "$1"' _ "$pub" "$CKPTFS_ADMIN" "$CK_MNT" \
		>"$CK_TMP/out" 2>"$CK_TMP/err" || rc=$?
	[ $rc != 99 ] || ck_fail "uid $NOBODY could not make its tree in $pub"
	local theirs
	theirs=$(find "$pub" -path '*/keep/f' | head -n 1)
	[ -n "$theirs" ] || ck_fail "export (exit $rc: $(tr '\n' '|' <"$CK_TMP/err")) removed uid $NOBODY's tree in $pub"
	assert_eq theirs "$(cat "$theirs")" "the other user's file"
	assert_eq "$NOBODY" "$(stat -c %u "$theirs")" "its owner"
	assert_eq 0 "$rc" "export's exit status ($(tr '\n' '|' <"$CK_TMP/err"))"
	assert_eq weights "$(cat "$pub/step-1/w")" "the exported file"
	ck_umount
}

ck_main "$@"
