#!/bin/bash
# t_stress — stress-ng file-system stressors inside the mount, with --verify
# where the stressor supports it (stress-ng --verifiable): data (hdd, seek,
# file-backed mmap, sync-file, iomix, readahead, copy-file, fallocate),
# metadata (dir, dentry, rename, fstat, link, symlink, chmod, chown, touch,
# utime, getdent, filename, mknod, access) and locks (lockf, flock, fcntl, OFD,
# locka). Each run must exit 0 with no "fail:" line, the daemon must then
# unmount cleanly, nothing may be left in the mount, and the catalog must pass
# ckptfs-admin check.
. "$(dirname "$0")/lib.sh"

_stress() { # SECONDS STRESSOR-ARGS...
	local t=$1 rc=0
	shift
	[ "$CK_QUICK" = 1 ] && t=$(((t + 1) / 2))
	mkdir "$CK_MNT/stress"
	(cd "$CK_MNT/stress" && stress-ng --temp-path "$CK_MNT/stress" --verify --timeout "${t}s" \
		--metrics-brief "$@") >"$CK_TMP/stress.out" 2>&1 || rc=$?
	if [ $rc != 0 ] || grep -q -E '(fail|error):' "$CK_TMP/stress.out"; then
		grep -E 'fail|error|stressor|skipp' "$CK_TMP/stress.out" | head -n 20 >&2
		ck_fail "stress-ng $* exited with status $rc (see the lines above; 2 = a stressor failed or a verification error)"
	fi
	grep -E 'successful run|skipped' "$CK_TMP/stress.out" | sed 's/^/  /' >&2 || true
	local left
	left=$(find "$CK_MNT/stress" -mindepth 1 | head -n 5)
	[ -z "$left" ] || ck_fail "stress-ng left entries behind (a delete that did not happen?): $left"
	rmdir "$CK_MNT/stress"
	ck_umount
	local out
	out=$("$CKPTFS_ADMIN" check --cache "$CK_CACHE" 2>&1) || ck_fail "ckptfs-admin check after stress: $(echo "$out" | head -n 5 | tr '\n' '|')"
}

test_stress_ng_data_stressors_verify_inside_the_mount() {
	ck_mount
	_stress 24 --hdd 2 --hdd-bytes 64M --seek 1 --seek-size 32M --mmap 1 --mmap-file --mmap-bytes 16M \
		--sync-file 1 --sync-file-bytes 16M --iomix 1 --iomix-bytes 32M --readahead 1 \
		--readahead-bytes 16M --copy-file 1 --copy-file-bytes 128M --fallocate 1 --fallocate-bytes 16M
}
ck_timeout test_stress_ng_data_stressors_verify_inside_the_mount 150

test_stress_ng_metadata_stressors_inside_the_mount() {
	# no --getdent: it walks /proc, /sys and /tmp, i.e. other mounts, not this one
	ck_mount
	_stress 20 --dir 1 --dentry 1 --rename 1 --fstat 1 --fstat-dir "$CK_MNT" --link 1 --symlink 1 \
		--chmod 1 --chown 1 --touch 1 --utime 1 --filename 1 --mknod 1 --access 1
}
ck_timeout test_stress_ng_metadata_stressors_inside_the_mount 150

test_stress_ng_lock_stressors_inside_the_mount() {
	ck_mount
	_stress 12 --lockf 2 --flock 2 --fcntl 1 --lockofd 1 --locka 1
}

ck_main "$@"
