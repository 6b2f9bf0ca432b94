#!/bin/bash
# t_copyrace — ckptfs-admin export and import, run as root, write their
# destination by fd (tools/admin_copy.c C1-C3, review 40 F1): another user who
# can write the destination's parent (DIR for export, SERIES for import) and
# swaps the temporary top for a symlink to a victim directory the moment it
# appears (build/swaptop, inotify) gets nothing made in the victim and its
# mode unchanged; the tool either exports/imports the right bytes to the
# right place or fails with one error saying what happened. The swap lands
# at a different point of the copy each run, so each case runs N times and
# requires 0 escapes.
. "$(dirname "$0")/lib.sh"

N=${CK_COPYRACE_N:-5}
SWAP=$(dirname "$CKPTFS_ADMIN")/swaptop

_need_swap() {
	[ -x "$SWAP" ] || ck_fail "$SWAP is missing (make $(dirname "$CKPTFS_ADMIN")/swaptop)"
}

# A victim directory (stand-in for /etc/cron.d): 0700, one marker file.
_victim() {
	mkdir -p "$CK_TMP/victim"
	chmod 0700 "$CK_TMP/victim"
	echo marker >"$CK_TMP/victim/marker"
}
_victim_intact() {
	assert_eq "marker" "$(ls -A "$CK_TMP/victim" | tr '\n' ' ' | sed 's/ $//')" "$1: victim directory's entries"
	assert_eq "700" "$(stat -c %a "$CK_TMP/victim")" "$1: victim directory's mode"
}

# _race WHAT PARENT PATTERN CMD... — runs CMD (the admin tool, as root) with
# the swapper (as nobody) watching PARENT; sets RC, leaves stderr in
# $CK_TMP/err.
_race() {
	local what=$1 parent=$2 pattern=$3
	shift 3
	mkdir -p "$CK_TMP/sig"
	chmod 0777 "$CK_TMP/sig" # the swapper (nobody) says it is ready here
	rm -f "$CK_TMP/sig/ready"
	ck_bg as_nobody "$SWAP" "$parent" "$pattern" "$CK_TMP/victim" "$CK_TMP/sig/ready"
	local swp=$CK_BG_PID
	ck_wait_file "$CK_TMP/sig/ready" 20
	RC=0
	"$@" >"$CK_TMP/out" 2>"$CK_TMP/err" </dev/null || RC=$?
	kill "$swp" 2>/dev/null || true
	wait "$swp" 2>/dev/null || true
	_victim_intact "$what"
	if [ "$RC" != 0 ]; then
		# one error line naming the place and why
		local n
		n=$(grep -c '^ckptfs-admin:' "$CK_TMP/err" || true)
		assert_eq 1 "$n" "$what: error lines ($(tr '\n' '|' <"$CK_TMP/err"))"
		grep -q "replaced by another user" "$CK_TMP/err" ||
			ck_fail "$what: the error does not say the copy was swapped: $(cat "$CK_TMP/err")"
	fi
}

# _check_export WHAT DIR NAME REF: exported right, or refused without a
# directory of ours at DIR/NAME.
_check_export() {
	local what=$1 dir=$2 name=$3 ref=$4
	if [ "$RC" = 0 ]; then
		[ -d "$dir/$name" ] && [ ! -L "$dir/$name" ] || ck_fail "$what: exit 0 but $dir/$name is not a directory: $(ls -la "$dir")"
		diff -r "$ref" "$dir/$name" || ck_fail "$what: exported bytes differ"
	fi
}

_gen() {
	mkdir -p "$CK_MNT/run/step-100" "$CK_REF/step-100/d"
	local i
	for i in 1 2 3; do ck_rand "$CK_REF/step-100/shard$i.bin" $((3 * MiB + i)); done
	ck_rand "$CK_REF/step-100/d/zz-cron" 100
	cp -r "$CK_REF/step-100/." "$CK_MNT/run/step-100/"
	setfattr -n user.ckptfs.commit -v 1 "$CK_MNT/run/step-100"
}

test_export_through_the_mount_into_a_swapped_top_makes_nothing_in_the_victim() {
	_need_swap
	ck_mount
	_victim
	_gen
	local i ok=0
	for i in $(seq "$N"); do
		mkdir -p "$CK_TMP/out$i"
		chmod 0777 "$CK_TMP/out$i"
		_race "export run $i" "$CK_TMP/out$i" export- "$CKPTFS_ADMIN" export "$CK_MNT" run/step-100 "$CK_TMP/out$i"
		_check_export "export run $i" "$CK_TMP/out$i" step-100 "$CK_REF/step-100"
		[ "$RC" = 0 ] && ok=$((ok + 1))
	done
	ck_log "export: $ok of $N runs exported, the rest refused; 0 escapes"
	ck_umount
}

test_offline_export_into_a_swapped_top_makes_nothing_in_the_victim() {
	_need_swap
	ck_mount
	_victim
	_gen
	ck_umount
	local i
	for i in $(seq "$N"); do
		mkdir -p "$CK_TMP/off$i"
		chmod 0777 "$CK_TMP/off$i"
		_race "offline export run $i" "$CK_TMP/off$i" export- "$CKPTFS_ADMIN" export --cache "$CK_CACHE" run/step-100 "$CK_TMP/off$i"
		_check_export "offline export run $i" "$CK_TMP/off$i" step-100 "$CK_REF/step-100"
	done
}

test_import_into_a_swapped_top_makes_nothing_outside_the_mount() {
	_need_swap
	ck_mount allow_other
	_victim
	mkdir -p "$CK_TMP/src/step-300/d"
	local i
	for i in 1 2 3; do ck_rand "$CK_TMP/src/step-300/shard$i.bin" $((3 * MiB + i)); done
	echo planted >"$CK_TMP/src/step-300/d/zz-file"
	for i in $(seq "$N"); do
		mkdir -p "$CK_MNT/alice$i"
		chmod 0777 "$CK_MNT/alice$i"
		_race "import run $i" "$CK_MNT/alice$i" import- "$CKPTFS_ADMIN" import "$CK_MNT" "$CK_TMP/src/step-300" "alice$i"
		if [ "$RC" = 0 ]; then
			[ -d "$CK_MNT/alice$i/step-300" ] && [ ! -L "$CK_MNT/alice$i/step-300" ] ||
				ck_fail "import run $i: exit 0 but alice$i/step-300 is not a directory"
			diff -r "$CK_TMP/src/step-300" "$CK_MNT/alice$i/step-300" || ck_fail "import run $i: imported bytes differ"
		fi
	done
	ck_umount
}

ck_main "$@"
