#!/bin/bash
# t_killpriv — setuid/setgid bits are cleared as the kernel clears them on a
# local filesystem (FUSE_CAP_HANDLE_KILLPRIV leaves it to the daemon): a
# write or truncate by a caller without CAP_FSETID (not root) clears setuid,
# and setgid when group-exec is set; a chown clears them whoever asks; root
# writing keeps them. pjdfstest chmod/12.t and chown/00.t, against ext4.
. "$(dirname "$0")/lib.sh"

fsop_nobody() { as_nobody "$PY" "$CK_HELPERS/fsop.py" "$@"; }
assert_op_nobody() { # EXPECTED OP ARGS...
	local exp=$1 got
	shift
	got=$(fsop_nobody "$@") || ck_fail "fsop $* as uid $NOBODY crashed"
	[ "$got" = "$exp" ] || ck_fail "$* as uid $NOBODY: expected $exp, got $got"
}
# A root-owned file with MODE (octal) and some content.
setid_file() { # PATH MODE
	echo original >"$1"
	chmod "$2" "$1"
	assert_eq "$2" "$(fsop mode "$1")" "mode of $1 after chmod"
}

test_write_by_another_user_clears_setuid_and_setgid() {
	ck_mount allow_other,default_permissions
	setid_file "$CK_MNT/f" 6777
	assert_op_nobody OK write "$CK_MNT/f" x
	assert_eq 777 "$(fsop mode "$CK_MNT/f")" "mode after a write by uid $NOBODY"
	assert_eq xriginal "$(cat "$CK_MNT/f")" "content after the write"
	# through a read-write handle (the page cache's path, not direct_io)
	setid_file "$CK_MNT/rw" 6777
	as_nobody sh -c "printf y 1<>'$CK_MNT/rw'"
	assert_eq 777 "$(fsop mode "$CK_MNT/rw")" "mode after a write by uid $NOBODY through an O_RDWR handle"
	assert_eq yriginal "$(cat "$CK_MNT/rw")" "content after the O_RDWR write"
	# a file the writer owns (chmod/12.t)
	mkdir -m 1777 "$CK_MNT/tmp"
	as_nobody sh -c "echo mine >'$CK_MNT/tmp/own' && chmod 6777 '$CK_MNT/tmp/own'"
	assert_eq 6777 "$(fsop mode "$CK_MNT/tmp/own")" "mode of uid $NOBODY's own file"
	assert_op_nobody OK write "$CK_MNT/tmp/own" y
	assert_eq 777 "$(fsop mode "$CK_MNT/tmp/own")" "mode after a write by its owner $NOBODY"
	ck_remount allow_other,default_permissions
	assert_eq 777 "$(fsop mode "$CK_MNT/f")" "mode after remount"
	assert_eq 777 "$(fsop mode "$CK_MNT/tmp/own")" "mode of the owned file after remount"
	ck_umount
}

test_setgid_without_group_exec_survives_a_write_by_a_group_member() {
	# setgid without group-exec is a locking mark: a writer in the file's
	# group leaves it, one outside clears it too (setattr_should_drop_sgid)
	ck_mount allow_other,default_permissions
	setid_file "$CK_MNT/f" 6767
	assert_op_nobody OK write "$CK_MNT/f" x
	assert_eq 767 "$(fsop mode "$CK_MNT/f")" "mode of a 6767 file of group 0 after a write by uid $NOBODY"
	setid_file "$CK_MNT/g" 6767
	chgrp $NOBODY "$CK_MNT/g"
	chmod 6767 "$CK_MNT/g"
	assert_op_nobody OK write "$CK_MNT/g" x
	assert_eq 2767 "$(fsop mode "$CK_MNT/g")" "mode of a 6767 file of group $NOBODY after a write by uid $NOBODY"
	ck_umount
}

test_truncating_open_by_another_user_clears_them() {
	ck_mount allow_other,default_permissions
	setid_file "$CK_MNT/f" 6777
	assert_op_nobody OK open "$CK_MNT/f" trunc
	assert_eq 777 "$(fsop mode "$CK_MNT/f")" "mode after an O_TRUNC open by uid $NOBODY"
	assert_eq 0 "$(ck_size "$CK_MNT/f")" "size after the O_TRUNC open"
	setid_file "$CK_MNT/g" 6777
	assert_op_nobody OK truncate "$CK_MNT/g" 3
	assert_eq 777 "$(fsop mode "$CK_MNT/g")" "mode after truncate(2) by uid $NOBODY"
	assert_eq ori "$(cat "$CK_MNT/g")" "content after truncate(2)"
	ck_umount
}

test_chown_clears_them_even_by_root() {
	ck_mount allow_other,default_permissions
	setid_file "$CK_MNT/f" 6777
	chown $NOBODY:$NOBODY "$CK_MNT/f"
	assert_eq 777 "$(fsop mode "$CK_MNT/f")" "mode after chown by root"
	setid_file "$CK_MNT/g" 6767
	chgrp $NOBODY "$CK_MNT/g"
	assert_eq 2767 "$(fsop mode "$CK_MNT/g")" "mode of a 6767 file after chgrp by root"
	# directories keep theirs
	mkdir "$CK_MNT/d"
	chmod 2777 "$CK_MNT/d"
	chown $NOBODY "$CK_MNT/d"
	assert_eq 2777 "$(fsop mode "$CK_MNT/d")" "mode of a setgid directory after chown"
	ck_umount
}

test_write_by_root_keeps_them() {
	# root has CAP_FSETID: ext4 keeps the bits
	ck_mount allow_other,default_permissions
	setid_file "$CK_MNT/f" 6777
	fsop write "$CK_MNT/f" x >/dev/null
	assert_eq 6777 "$(fsop mode "$CK_MNT/f")" "mode after a write by root"
	fsop open "$CK_MNT/f" trunc >/dev/null
	assert_eq 6777 "$(fsop mode "$CK_MNT/f")" "mode after an O_TRUNC open by root"
	ck_umount
}

ck_main "$@"
