#!/bin/bash
# t_perms — ownership and permission checks for users other than the one that
# mounted (root), with allow_other: new files belong to their creator, and a
# user cannot write, create, chmod or chown what the modes do not allow.
. "$(dirname "$0")/lib.sh"

fsop_nobody() { as_nobody "$PY" "$CK_HELPERS/fsop.py" "$@"; }
assert_op_nobody() { # EXPECTED OP ARGS...
	local exp=$1 got
	shift
	got=$(fsop_nobody "$@") || ck_fail "fsop $* as uid $NOBODY crashed"
	[ "$got" = "$exp" ] || ck_fail "$* as uid $NOBODY: expected $exp, got $got"
}

test_files_created_by_another_user_are_owned_by_that_user() {
	ck_mount allow_other,default_permissions
	mkdir "$CK_MNT/shared"
	chmod 1777 "$CK_MNT/shared"
	as_nobody sh -c "echo hello >'$CK_MNT/shared/f' && mkdir '$CK_MNT/shared/d' && ln -s f '$CK_MNT/shared/l'" ||
		ck_fail "uid $NOBODY could not create entries in a 1777 directory"
	assert_eq "$NOBODY:$NOBODY" "$(stat -c %u:%g "$CK_MNT/shared/f")" "owner of a file created by uid $NOBODY"
	assert_eq "$NOBODY:$NOBODY" "$(stat -c %u:%g "$CK_MNT/shared/d")" "owner of a directory created by uid $NOBODY"
	assert_eq "$NOBODY:$NOBODY" "$(stat -c %u:%g "$CK_MNT/shared/l")" "owner of a symlink created by uid $NOBODY"
	assert_eq hello "$(as_nobody cat "$CK_MNT/shared/f")" "content read back by its creator"
	# The creator may chmod its own file.
	assert_op_nobody OK chmod "$CK_MNT/shared/f" 600
	assert_eq 600 "$(fsop mode "$CK_MNT/shared/f")" "mode after chmod by the owner"
	ck_remount allow_other,default_permissions
	assert_eq "$NOBODY:$NOBODY" "$(stat -c %u:%g "$CK_MNT/shared/f")" "owner after remount"
	assert_eq hello "$(as_nobody cat "$CK_MNT/shared/f")" "content after remount"
	ck_umount
}

test_other_user_cannot_write_a_root_owned_0644_file() {
	ck_mount allow_other,default_permissions
	echo original >"$CK_MNT/rootfile"
	chmod 644 "$CK_MNT/rootfile"
	assert_eq original "$(as_nobody cat "$CK_MNT/rootfile")" "uid $NOBODY reading a 0644 file"
	assert_op_nobody EACCES write "$CK_MNT/rootfile" changed
	assert_op_nobody EACCES open "$CK_MNT/rootfile" trunc
	assert_op_nobody EACCES open "$CK_MNT/rootfile" append
	assert_op_nobody EACCES truncate "$CK_MNT/rootfile" 0
	assert_op_nobody EPERM utime "$CK_MNT/rootfile" 1 1
	assert_eq original "$(cat "$CK_MNT/rootfile")" "content after the refused writes"
	chmod 600 "$CK_MNT/rootfile"
	assert_op_nobody EACCES open "$CK_MNT/rootfile" r
	ck_umount
}

test_other_user_cannot_create_or_remove_in_a_root_owned_0755_dir() {
	ck_mount allow_other,default_permissions
	mkdir "$CK_MNT/rootdir"
	chmod 755 "$CK_MNT/rootdir"
	echo x >"$CK_MNT/rootdir/existing"
	assert_op_nobody EACCES create "$CK_MNT/rootdir/new"
	assert_op_nobody EACCES mkdir "$CK_MNT/rootdir/newdir"
	assert_op_nobody EACCES symlink x "$CK_MNT/rootdir/newlink"
	assert_op_nobody EACCES unlink "$CK_MNT/rootdir/existing"
	assert_op_nobody EACCES rename "$CK_MNT/rootdir/existing" "$CK_MNT/rootdir/moved"
	# The mount root itself is root's 0755 directory.
	assert_op_nobody EACCES create "$CK_MNT/at-root"
	assert_eq existing "$(ls "$CK_MNT/rootdir")" "entries after the refused changes"
	mkdir "$CK_MNT/private"
	chmod 700 "$CK_MNT/private"
	assert_op_nobody EACCES lstat "$CK_MNT/private/anything"
	ck_umount
}

test_chmod_and_chown_by_non_owner_fail() {
	ck_mount allow_other,default_permissions
	echo x >"$CK_MNT/rootfile"
	chmod 666 "$CK_MNT/rootfile"
	assert_op_nobody EPERM chmod "$CK_MNT/rootfile" 777
	assert_op_nobody EPERM chown "$CK_MNT/rootfile" $NOBODY $NOBODY
	assert_eq 666 "$(fsop mode "$CK_MNT/rootfile")" "mode after a refused chmod"
	assert_eq "0:0" "$(stat -c %u:%g "$CK_MNT/rootfile")" "owner after a refused chown"
	# Even its owner cannot give a file away.
	mkdir -m 1777 "$CK_MNT/shared"
	as_nobody touch "$CK_MNT/shared/mine"
	assert_op_nobody EPERM chown "$CK_MNT/shared/mine" 0 0
	# A world-writable file can be written by others (0666), not chmod'ed.
	assert_op_nobody OK write "$CK_MNT/rootfile" y
	ck_umount
}

test_sticky_directory_protects_other_users_files() {
	ck_mount allow_other,default_permissions
	mkdir -m 1777 "$CK_MNT/tmp"
	echo x >"$CK_MNT/tmp/roots"
	chmod 666 "$CK_MNT/tmp/roots"
	local got
	got=$(fsop_nobody unlink "$CK_MNT/tmp/roots")
	[ "$got" = EPERM ] || [ "$got" = EACCES ] || ck_fail "uid $NOBODY unlinking root's file in a sticky dir: got $got, expected EPERM"
	assert_op OK lstat "$CK_MNT/tmp/roots"
	ck_umount
}

test_permissions_are_enforced_with_allow_other_alone() {
	# default_permissions is documented as on by default: allow_other alone
	# must not let every user write every file.
	ck_mount allow_other
	echo original >"$CK_MNT/rootfile"
	chmod 644 "$CK_MNT/rootfile"
	assert_op_nobody EACCES write "$CK_MNT/rootfile" changed
	assert_op_nobody EACCES create "$CK_MNT/new"
	assert_eq original "$(cat "$CK_MNT/rootfile")" "content after the refused write"
	ck_umount
}

test_other_users_are_refused_without_allow_other() {
	ck_mount
	echo x >"$CK_MNT/f"
	chmod 644 "$CK_MNT/f"
	assert_op_nobody EACCES lstat "$CK_MNT/f"
	ck_umount
}

test_setgid_directory_passes_its_group_to_new_entries() {
	ck_mount allow_other,default_permissions
	mkdir "$CK_MNT/proj"
	chown 0:4321 "$CK_MNT/proj"
	chmod 2777 "$CK_MNT/proj"
	as_nobody touch "$CK_MNT/proj/f"
	as_nobody mkdir "$CK_MNT/proj/sub"
	assert_eq "$NOBODY:4321" "$(stat -c %u:%g "$CK_MNT/proj/f")" "owner of a file created in a setgid directory"
	assert_eq "$NOBODY:4321" "$(stat -c %u:%g "$CK_MNT/proj/sub")" "owner of a directory created in a setgid directory"
	[ -g "$CK_MNT/proj/sub" ] || ck_fail "a directory created in a setgid directory did not inherit the setgid bit"
	ck_umount
}

# keep-latest-k deletes only what the user whose commit triggered it could
# delete by hand: in a sticky (1777) series directory, another user's saves
# do not delete root's generations (fs/gen.c, gen_may_delete).
_gen_state() { ck_sql "SELECT state FROM generations WHERE name = '$1' ORDER BY id DESC LIMIT 1"; }
_save_as() { # WHO STEP: a one-file save committed by its marker
	local d="$CK_MNT/run/step-$2"
	$1 sh -c "mkdir '$d' && head -c 70000 /dev/urandom >'$d/model.bin' && touch '$d/.ckptfs-commit'" ||
		ck_fail "save step-$2 failed"
	local i=0
	while [ "$(_gen_state "step-$2")" != 1 ]; do
		i=$((i + 1))
		[ $i -le 100 ] || ck_fail "step-$2 not committed: state $(_gen_state "step-$2")"
		sleep 0.05
	done
}
test_keep_latest_k_deletes_only_what_the_committing_user_could_delete() {
	ck_mount allow_other,default_permissions,keep=2,quiet=0.5
	mkdir -m 1777 "$CK_MNT/run"
	_save_as "" 1
	_save_as "" 2
	_save_as as_nobody 3
	_save_as as_nobody 4
	sleep 3 # keep ran after each commit, and again as each became durable
	assert_eq 1 "$(_gen_state step-1)" "root's step-1 after uid $NOBODY's saves with keep=2 (sticky series)"
	assert_eq 1 "$(_gen_state step-2)" "root's step-2 after uid $NOBODY's saves with keep=2 (sticky series)"
	[ -f "$CK_MNT/run/step-1/model.bin" ] || ck_fail "root's step-1 lost its file"
	# root's own commit: root may delete anything, but counts per owner
	# (gen.h invariant 6): root's step-1 goes, uid $NOBODY's two stay
	_save_as "" 5
	_wait_series "step-2 step-3 step-4 step-5" "after root's step-5 (keep=2)"
	# uid $NOBODY's third save trims uid $NOBODY's saves
	_save_as as_nobody 6
	_wait_series "step-2 step-4 step-5 step-6" "after uid $NOBODY's step-6 (keep=2)"
	assert_eq 3 "$(_gen_state step-3)" "uid $NOBODY's step-3 after its own step-6"
	ck_umount
}

_wait_series() { # "NAMES" WHEN: waits up to 20 s for the series listing
	local i=0
	while [ "$(ls "$CK_MNT/run" | sort -V | tr '\n' ' ')" != "$1 " ]; do
		i=$((i + 1))
		[ $i -le 200 ] || ck_fail "series $2: $(ls "$CK_MNT/run" | tr '\n' ' '), expected $1"
		sleep 0.1
	done
}

USER_A=4242
as_user_a() { setpriv --reuid=$USER_A --regid=$USER_A --clear-groups "$@"; }

# A user's saves are never deleted because of another user's: uid $NOBODY
# plants two higher steps in a shared sticky series, then uid $USER_A's two
# saves (its newest) stay with keep=2; uid $USER_A's own third save trims
# only uid $USER_A's oldest.
test_keep_latest_k_never_deletes_a_users_newest_saves_for_another_users_higher_steps() {
	ck_mount allow_other,default_permissions,keep=2,quiet=0.5
	mkdir -m 1777 "$CK_MNT/run"
	_save_as as_nobody 999998
	_save_as as_nobody 999999
	_save_as as_user_a 200
	_save_as as_user_a 300
	sleep 3 # keep ran after each commit, and again as each became durable
	assert_eq 1 "$(_gen_state step-200)" "uid $USER_A's step-200 after uid $NOBODY's higher steps (keep=2)"
	assert_eq 1 "$(_gen_state step-300)" "uid $USER_A's step-300 after uid $NOBODY's higher steps (keep=2)"
	assert_eq 70000 "$(stat -c %s "$CK_MNT/run/step-300/model.bin")" "size of uid $USER_A's step-300/model.bin"
	_save_as as_user_a 400
	_wait_series "step-300 step-400 step-999998 step-999999" "after uid $USER_A's step-400 (keep=2)"
	assert_eq "$USER_A:$USER_A" "$(stat -c %u:%g "$CK_MNT/run/step-300")" "owner of step-300"
	# a restart's pass (as each save's owner) changes nothing
	ck_remount allow_other,default_permissions,keep=2,quiet=0.5
	sleep 2
	_wait_series "step-300 step-400 step-999998 step-999999" "after a remount (keep=2)"
	ck_umount
}

ck_main "$@"
