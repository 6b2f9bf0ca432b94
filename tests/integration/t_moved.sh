#!/bin/bash
# t_moved — renaming a generation's root (meta/generation.h G8): a rename
# never ends a rewrite (refused with EBUSY: the backup is the only copy of the
# committed version), a held save renamed to another step name stays held
# with its bytes, and a temp dir (or an open first version) renamed to a step
# name still commits by rule "rename". State is read from the
# user.ckptfs.generation xattr and the catalog; bytes are compared with a
# reference copy on the local disk.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/helpers/gen.sh"

GEN_OPTS=quiet=0.5

listed() { ls -a "$1" | grep -qxF -- "$2"; }
# "STATE RULE VERSION HELD?" of the newest catalog row named $1
cat_gen() {
	ck_sql "SELECT state || ' ' || coalesce(nullif(rule, ''), '-') || ' ' || version || ' ' || (held != '') FROM generations WHERE name = '$1' ORDER BY id DESC LIMIT 1"
}
# mv_refused SRC DST: mv fails with EBUSY and SRC is still there
mv_refused() {
	local err
	if err=$(mv -T "$1" "$2" 2>&1); then
		ck_fail "mv $1 $2 succeeded: a rewrite's root was moved"
	fi
	assert_contains "$err" "busy" "mv $1 $2"
	[ -e "$1" ] || ck_fail "$1 is gone after a refused mv"
	[ ! -e "$2" ] || ck_fail "$2 exists after a refused mv"
}

test_rename_of_a_rewrites_root_is_refused() {
	ck_mount "$GEN_OPTS"
	mkdir -p "$CK_MNT/ck/step-100" "$CK_REF/ck/step-100" "$CK_REF/v2"
	ck_rand "$CK_REF/ck/step-100/a.bin" 300000
	ck_rand "$CK_REF/ck/step-100/b.bin" 300000
	cp "$CK_REF/ck/step-100/a.bin" "$CK_REF/ck/step-100/b.bin" "$CK_MNT/ck/step-100/"
	: >"$CK_REF/ck/step-100/.ckptfs-commit"
	: >"$CK_MNT/ck/step-100/.ckptfs-commit"
	gen_expect "$CK_MNT/ck/step-100" state=committed version=1 --wait 5
	# a rewrite: a.bin cut and half written again, b.bin untouched
	ck_rand "$CK_REF/v2/a.bin" 1000
	cp "$CK_REF/v2/a.bin" "$CK_MNT/ck/step-100/a.bin"
	gen_expect "$CK_MNT/ck/step-100" state=open version=2
	mv_refused "$CK_MNT/ck/step-100" "$CK_MNT/ck/step-150"
	mv_refused "$CK_MNT/ck/step-100" "$CK_MNT/ck/step-100.old"
	mkdir "$CK_MNT/elsewhere"
	mv_refused "$CK_MNT/ck/step-100" "$CK_MNT/elsewhere/step-100"
	grep -q 'not moved to "step-150": version 2 is being written over version 1' "$CK_DLOG" ||
		ck_fail "no log line names the refused rename: $(grep -i step-100 "$CK_DLOG" | tail -n 3 | tr '\n' '|')"
	gen_expect "$CK_MNT/ck/step-100" state=open version=2
	cmp -s "$CK_REF/v2/a.bin" "$CK_MNT/ck/step-100/a.bin" || ck_fail "the rewrite's a.bin changed"
	# the rewrite aborted: version 1 is back, byte for byte
	ck_admin_rc 0 rm --force "$CK_MNT" ck/step-100
	gen_expect "$CK_MNT/ck/step-100" state=committed version=1
	same ck
	# a rewrite that commits: then the rename works as before
	cp "$CK_REF/v2/a.bin" "$CK_MNT/ck/step-100/a.bin"
	cp "$CK_REF/v2/a.bin" "$CK_REF/ck/step-100/a.bin"
	gen_expect "$CK_MNT/ck/step-100" state=open version=2
	setfattr -n user.ckptfs.commit -v 1 "$CK_MNT/ck/step-100"
	gen_expect "$CK_MNT/ck/step-100" state=committed version=2 --wait 5
	mv "$CK_MNT/ck/step-100" "$CK_MNT/ck/step-150"
	mv "$CK_REF/ck/step-100" "$CK_REF/ck/step-150"
	gen_expect "$CK_MNT/ck/step-150" name=step-150 step=150 state=committed --wait 5
	same ck
	ck_remount "$GEN_OPTS"
	gen_expect "$CK_MNT/ck/step-150" name=step-150 state=committed
	same ck
	ck_umount
}

test_a_held_save_renamed_to_another_step_stays_held() {
	ck_mount "$GEN_OPTS"
	mkdir -p "$CK_MNT/ub"
	# DCP files without .metadata: unfinished, held at unmount
	GT dcp ub/step-8 --phase files
	gen_expect "$CK_MNT/ub/step-8" state=open
	ck_umount
	ck_mount "$GEN_OPTS"
	gen_expect "$CK_MNT/ub/step-8" state=held
	local before
	before=$(ck_sql "SELECT id || ' ' || held FROM generations WHERE name = 'step-8'")
	mv "$CK_MNT/ub/step-8" "$CK_MNT/ub/step-9"
	mv "$CK_REF/ub/step-8" "$CK_REF/ub/step-9"
	gen_expect "$CK_MNT/ub/step-9" name=step-9 step=9 state=held
	assert_eq "4 unmount 1 1" "$(cat_gen step-9)" "catalog row of the renamed held save"
	assert_eq "$before" "$(ck_sql "SELECT id || ' ' || held FROM generations WHERE name = 'step-9'")" "the held save's id and reason after the rename"
	! listed "$CK_MNT/ub" step-9 || ck_fail "the held step-9 is listed"
	same ub/step-9
	# moved to another series with a step name: still the same held save
	mkdir "$CK_MNT/uc" "$CK_REF/uc"
	mv "$CK_MNT/ub/step-9" "$CK_MNT/uc/step-10"
	mv "$CK_REF/ub/step-9" "$CK_REF/uc/step-10"
	gen_expect "$CK_MNT/uc/step-10" name=step-10 step=10 state=held
	same uc/step-10
	# any other move of a held save is refused (G8, review 39 F1): to a name
	# that is no step name, an exchange with another directory, its series
	# into a save. Each would show its files as plain, complete ones. On the
	# code before, each move went through: "renamed", the save gone from the
	# catalog, its unproven files listed.
	mv "$CK_MNT/uc/step-10" "$CK_MNT/uc/step-10.old" 2>/dev/null &&
		ck_fail "a held save was renamed to a name that is no step name"
	mkdir "$CK_MNT/uc/other" "$CK_REF/uc/other"
	/usr/bin/python3 - "$CK_MNT/uc/step-10" "$CK_MNT/uc/other" <<'PY' && ck_fail "a held save's root was exchanged"
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
rc = libc.renameat2(AT_FDCWD, sys.argv[1].encode(), AT_FDCWD, sys.argv[2].encode(), RENAME_EXCHANGE)
sys.exit(0 if rc == 0 else 1)
PY
	mkdir -p "$CK_MNT/ud/step-1" "$CK_REF/ud/step-1"
	GT put ud/step-1/model.pt
	gen_expect "$CK_MNT/ud/step-1" state=open
	mv "$CK_MNT/uc" "$CK_MNT/ud/step-1/uc" 2>/dev/null && ck_fail "a held save's series was moved into a save"
	ck_wait_log "$CK_DLOG" "not moved to \"step-10.old\": it is held" 5 || ck_fail "no line naming the refused move"
	gen_expect "$CK_MNT/uc/step-10" name=step-10 state=held
	assert_eq "4 unmount 1 1" "$(cat_gen step-10)" "catalog row after the refused moves"
	same uc/step-10
	ck_remount "$GEN_OPTS"
	gen_expect "$CK_MNT/uc/step-10" name=step-10 state=held
	assert_eq "4 unmount 1 1" "$(cat_gen step-10)" "catalog row after a remount"
	same uc/step-10
	ck_umount
}

test_a_temp_dir_or_open_save_renamed_to_a_step_commits() {
	ck_mount "$GEN_OPTS"
	# a whole DCP save (its .metadata renamed in) written under a temp name
	# outside generations, then renamed to its step
	mkdir -p "$CK_MNT/rn"
	GT dcp rn/step-300.tmp
	mv "$CK_MNT/rn/step-300.tmp" "$CK_MNT/rn/step-300"
	mv "$CK_REF/rn/step-300.tmp" "$CK_REF/rn/step-300"
	gen_expect "$CK_MNT/rn/step-300" name=step-300 step=300 state=committed rule=rename version=1 --wait 3
	same rn
	# an open first version renamed: a new save committed by the rename
	mkdir -p "$CK_MNT/rn/step-400" "$CK_REF/rn/step-400"
	GT put rn/step-400/model.pt
	gen_expect "$CK_MNT/rn/step-400" state=open version=1
	mv "$CK_MNT/rn/step-400" "$CK_MNT/rn/step-500"
	mv "$CK_REF/rn/step-400" "$CK_REF/rn/step-500"
	gen_expect "$CK_MNT/rn/step-500" name=step-500 step=500 state=committed rule=rename version=1 files=1 --wait 3
	same rn
	ck_remount "$GEN_OPTS"
	gen_expect "$CK_MNT/rn/step-300" state=committed rule=rename
	gen_expect "$CK_MNT/rn/step-500" state=committed rule=rename
	same rn
	ck_umount
}

ck_main "$@"
