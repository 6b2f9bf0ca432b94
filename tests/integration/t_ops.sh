#!/bin/bash
# t_ops — POSIX namespace and file operations trainers and their tools use:
# mkdir races, O_TRUNC, rename in all its forms, unlink/rmdir/rm -rf, symlinks,
# truncate, chmod/chown, times, statfs, fsync, fallocate, locks, mmap, unlinked
# open files, hard links, xattrs.
. "$(dirname "$0")/lib.sh"

test_concurrent_mkdir_p_of_one_deep_path_all_succeed() {
	local round i pids=() rc failed=0
	ck_mount
	for round in 1 2 3 4; do
		pids=()
		for i in $(seq 16); do
			if [ $((i % 2)) = 0 ]; then
				ck_bg mkdir -p "$CK_MNT/ckpt$round/step-100/a/b/c/d"
			else
				# DCP: Path.mkdir(parents=True, exist_ok=True) from every rank.
				ck_bg "$PY" -c 'import pathlib, sys; pathlib.Path(sys.argv[1]).mkdir(parents=True, exist_ok=True)' \
					"$CK_MNT/ckpt$round/step-100/a/b/c/d"
			fi
			pids+=("$CK_BG_PID")
		done
		for i in "${pids[@]}"; do
			rc=0
			ck_bg_wait "$i" 30 || rc=$?
			[ $rc = 0 ] || failed=$((failed + 1))
		done
		[ $failed = 0 ] || ck_fail "round $round: $failed of 16 concurrent mkdir -p of the same path failed"
		[ -d "$CK_MNT/ckpt$round/step-100/a/b/c/d" ] || ck_fail "the directory was not created"
		assert_eq "step-100" "$(ls "$CK_MNT/ckpt$round")" "entries of ckpt$round"
		assert_eq "c" "$(ls "$CK_MNT/ckpt$round/step-100/a/b")" "entries of .../a/b"
	done
	ck_umount
}

test_open_o_trunc_over_existing_file_replaces_its_content() {
	ck_mount
	ck_rand "$CK_REF/old" $((3 * MiB))
	cp "$CK_REF/old" "$CK_MNT/f"
	printf abc >"$CK_MNT/f"
	assert_eq abc "$(cat "$CK_MNT/f")" "content after O_TRUNC + write"
	assert_size "$CK_MNT/f" 3
	# torch.save-like: open 'wb' over a bigger file, write less.
	ck_rand "$CK_REF/new" $((MiB + 3))
	"$PY" -c 'import sys; open(sys.argv[2], "wb").write(open(sys.argv[1], "rb").read())' "$CK_REF/new" "$CK_MNT/f"
	assert_file_eq "$CK_REF/new" "$CK_MNT/f"
	: >"$CK_MNT/g"
	cp "$CK_REF/old" "$CK_MNT/g"
	: >"$CK_MNT/g" # O_TRUNC without a write
	assert_size "$CK_MNT/g" 0
	ck_remount
	assert_file_eq "$CK_REF/new" "$CK_MNT/f"
	assert_size "$CK_MNT/g" 0
	ck_umount
}

test_rename_file_and_directory_moves_them() {
	ck_mount
	ck_rand "$CK_REF/a" 300000
	mkdir -p "$CK_MNT/d1/sub" "$CK_MNT/d2"
	cp "$CK_REF/a" "$CK_MNT/d1/a"
	cp "$CK_REF/a" "$CK_MNT/d1/sub/deep"
	mv "$CK_MNT/d1/a" "$CK_MNT/d1/b"
	assert_not_exists "$CK_MNT/d1/a"
	assert_file_eq "$CK_REF/a" "$CK_MNT/d1/b"
	mv "$CK_MNT/d1/b" "$CK_MNT/d2/c"
	assert_not_exists "$CK_MNT/d1/b"
	assert_file_eq "$CK_REF/a" "$CK_MNT/d2/c"
	# A directory with contents, into another directory.
	assert_op OK rename "$CK_MNT/d1" "$CK_MNT/d2/moved"
	assert_not_exists "$CK_MNT/d1"
	assert_file_eq "$CK_REF/a" "$CK_MNT/d2/moved/sub/deep"
	assert_eq "c moved" "$(ls "$CK_MNT/d2" | tr '\n' ' ' | sed 's/ $//')" "entries of d2"
	ck_remount
	assert_file_eq "$CK_REF/a" "$CK_MNT/d2/c"
	assert_file_eq "$CK_REF/a" "$CK_MNT/d2/moved/sub/deep"
	assert_not_exists "$CK_MNT/d1"
	ck_umount
}

test_rename_over_existing_file_replaces_it() {
	ck_mount
	ck_rand "$CK_REF/new" $((2 * MiB + 1))
	ck_rand "$CK_REF/old" $((5 * MiB))
	cp "$CK_REF/old" "$CK_MNT/target"
	cp "$CK_REF/new" "$CK_MNT/src"
	# A reader holding the old target keeps seeing the old bytes.
	exec {fd}<"$CK_MNT/target"
	assert_op OK rename "$CK_MNT/src" "$CK_MNT/target"
	assert_not_exists "$CK_MNT/src"
	assert_file_eq "$CK_REF/new" "$CK_MNT/target"
	cmp "$CK_REF/old" /dev/fd/$fd || ck_fail "an open handle of the replaced file no longer reads its old bytes"
	exec {fd}<&-
	assert_eq 1 "$(ls "$CK_MNT" | wc -l)" "number of entries after rename over a file"
	ck_remount
	assert_file_eq "$CK_REF/new" "$CK_MNT/target"
	ck_umount
}

test_rename_of_a_file_being_written_keeps_its_data() {
	ck_mount
	ck_rand "$CK_REF/f" $((3 * MiB + 1))
	mkdir "$CK_MNT/other"
	"$PY" - "$CK_REF/f" "$CK_MNT" <<'EOF'
import os, sys
src = open(sys.argv[1], "rb").read()
d = sys.argv[2]
fd = os.open(os.path.join(d, "tmpname"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, src[:2 << 20])
os.rename(os.path.join(d, "tmpname"), os.path.join(d, "other", "final"))
os.write(fd, src[2 << 20:])
os.close(fd)
EOF
	assert_not_exists "$CK_MNT/tmpname"
	assert_file_eq "$CK_REF/f" "$CK_MNT/other/final"
	ck_remount
	assert_file_eq "$CK_REF/f" "$CK_MNT/other/final"
	ck_umount
}

test_dcp_metadata_commit_by_unlink_and_rename() {
	# PyTorch DCP coordinator: .metadata.tmp, fsync, unlink .metadata, rename.
	ck_mount
	mkdir "$CK_MNT/step-10"
	echo old-metadata >"$CK_MNT/step-10/.metadata"
	"$PY" - "$CK_MNT/step-10" <<'EOF'
import os, sys
d = sys.argv[1]
with open(os.path.join(d, ".metadata.tmp"), "wb") as f:
    f.write(b"new-metadata\n" * 1000)
    f.flush()
    os.fsync(f.fileno())
os.unlink(os.path.join(d, ".metadata"))
os.rename(os.path.join(d, ".metadata.tmp"), os.path.join(d, ".metadata"))
EOF
	assert_eq ".metadata" "$(ls -A "$CK_MNT/step-10")" "entries after the commit"
	assert_eq 13000 "$(ck_size "$CK_MNT/step-10/.metadata")" "size of .metadata"
	ck_remount
	assert_eq "new-metadata" "$(head -n 1 "$CK_MNT/step-10/.metadata")" ".metadata after remount"
	ck_umount
}

test_rename_directory_over_empty_directory_replaces_it() {
	ck_mount
	mkdir -p "$CK_MNT/src/inner" "$CK_MNT/empty"
	echo x >"$CK_MNT/src/inner/f"
	assert_op OK rename "$CK_MNT/src" "$CK_MNT/empty"
	assert_not_exists "$CK_MNT/src"
	assert_eq x "$(cat "$CK_MNT/empty/inner/f")" "file under the renamed directory"
	ck_remount
	assert_eq x "$(cat "$CK_MNT/empty/inner/f")" "file under the renamed directory after remount"
	assert_not_exists "$CK_MNT/src"
	ck_umount
}

test_invalid_renames_fail_with_posix_errors() {
	ck_mount
	mkdir -p "$CK_MNT/a/b/c" "$CK_MNT/full/x" "$CK_MNT/dir"
	echo f >"$CK_MNT/file"
	assert_op EINVAL rename "$CK_MNT/a" "$CK_MNT/a/b/c/a"
	assert_op EINVAL rename "$CK_MNT/a" "$CK_MNT/a/b"
	assert_op ENOTEMPTY rename "$CK_MNT/dir" "$CK_MNT/full"
	assert_op EISDIR rename "$CK_MNT/file" "$CK_MNT/dir"
	assert_op ENOTDIR rename "$CK_MNT/dir" "$CK_MNT/file"
	assert_op ENOENT rename "$CK_MNT/missing" "$CK_MNT/other"
	assert_op ENOENT rename "$CK_MNT/file" "$CK_MNT/nodir/file"
	# Nothing moved.
	[ -d "$CK_MNT/a/b/c" ] && [ -d "$CK_MNT/full/x" ] && [ -d "$CK_MNT/dir" ] ||
		ck_fail "a failed rename changed the tree: $(find "$CK_MNT" | tr '\n' ' ')"
	assert_eq f "$(cat "$CK_MNT/file")"
	ck_umount
}

test_rename_noreplace_and_exchange() {
	ck_mount
	echo one >"$CK_MNT/one"
	echo two >"$CK_MNT/two"
	assert_op EEXIST renameat2 "$CK_MNT/one" "$CK_MNT/two" noreplace
	assert_op OK renameat2 "$CK_MNT/one" "$CK_MNT/three" noreplace
	assert_op OK renameat2 "$CK_MNT/three" "$CK_MNT/two" exchange
	assert_eq two "$(cat "$CK_MNT/three")" "three after exchange"
	assert_eq one "$(cat "$CK_MNT/two")" "two after exchange"
	assert_op ENOENT renameat2 "$CK_MNT/two" "$CK_MNT/missing" exchange
	ck_remount
	assert_eq two "$(cat "$CK_MNT/three")" "three after exchange and remount"
	ck_umount
}

test_unlink_removes_the_name_and_the_name_can_be_reused() {
	ck_mount
	ck_rand "$CK_REF/a" $((MiB + 5))
	ck_rand "$CK_REF/b" 1000
	cp "$CK_REF/a" "$CK_MNT/f"
	rm "$CK_MNT/f"
	assert_not_exists "$CK_MNT/f"
	assert_eq "" "$(ls -A "$CK_MNT")" "entries after unlink"
	assert_op ENOENT unlink "$CK_MNT/f"
	cp "$CK_REF/b" "$CK_MNT/f"
	assert_file_eq "$CK_REF/b" "$CK_MNT/f"
	mkdir "$CK_MNT/d"
	assert_op EISDIR unlink "$CK_MNT/d"
	ck_remount
	assert_file_eq "$CK_REF/b" "$CK_MNT/f"
	ck_umount
}

test_rmdir_removes_empty_and_refuses_non_empty_directories() {
	ck_mount
	mkdir -p "$CK_MNT/empty" "$CK_MNT/full/sub"
	touch "$CK_MNT/full/file"
	assert_op OK rmdir "$CK_MNT/empty"
	assert_not_exists "$CK_MNT/empty"
	assert_op ENOTEMPTY rmdir "$CK_MNT/full"
	rm "$CK_MNT/full/file"
	assert_op ENOTEMPTY rmdir "$CK_MNT/full"
	assert_op OK rmdir "$CK_MNT/full/sub"
	assert_op OK rmdir "$CK_MNT/full"
	echo x >"$CK_MNT/file"
	assert_op ENOTDIR rmdir "$CK_MNT/file"
	assert_op ENOENT rmdir "$CK_MNT/full"
	ck_remount
	assert_eq file "$(ls -A "$CK_MNT")" "entries after rmdirs and remount"
	ck_umount
}

test_rm_rf_of_a_500_file_tree_removes_everything() {
	ck_mount
	"$PY" - "$CK_MNT/tree" <<'EOF'
import os, random, sys
rnd = random.Random(5)
root = sys.argv[1]
for d in range(20):
    p = os.path.join(root, "part-%d" % d, "shard")  # not generation names
    os.makedirs(p)
    for f in range(25):
        with open(os.path.join(p if f % 2 else os.path.dirname(p), "f%d.pt" % f), "wb") as fh:
            fh.write(rnd.randbytes(rnd.randint(0, 20000)))
EOF
	assert_eq 500 "$(find "$CK_MNT/tree" -type f | wc -l)" "files created"
	rm -rf "$CK_MNT/tree"
	assert_not_exists "$CK_MNT/tree"
	assert_eq "" "$(ls -A "$CK_MNT")" "entries after rm -rf"
	ck_remount
	assert_eq "" "$(ls -A "$CK_MNT")" "entries after rm -rf and remount"
	ck_umount
}

test_readdir_lists_2000_entries_and_survives_concurrent_unlink() {
	ck_mount
	mkdir "$CK_MNT/big"
	"$PY" - "$CK_MNT/big" <<'EOF'
import os, sys
d = sys.argv[1]
for i in range(2000):
    open(os.path.join(d, "entry-%05d" % i), "w").close()
names = sorted(os.listdir(d))
want = ["entry-%05d" % i for i in range(2000)]
if names != want:
    sys.exit("listdir: %d names, missing %s, unexpected %s" % (len(names), sorted(set(want) - set(names))[:5],
                                                             sorted(set(names) - set(want))[:5]))
# Iterate while deleting every other entry (what rmtree and rotation do):
# each entry is seen at most once and every surviving one is seen.
seen = []
with os.scandir(d) as it:
    for e in it:
        seen.append(e.name)
        n = int(e.name.split("-")[1])
        if n % 2 == 0:
            os.unlink(os.path.join(d, e.name))
if len(seen) != len(set(seen)):
    sys.exit("scandir during unlink returned %d duplicate entries" % (len(seen) - len(set(seen))))
left = sorted(os.listdir(d))
if left != ["entry-%05d" % i for i in range(1, 2000, 2)]:
    sys.exit("after deleting even entries: %d left" % len(left))
if not set(left) <= set(seen):
    sys.exit("scandir during unlink missed %d surviving entries" % len(set(left) - set(seen)))
EOF
	ck_umount
}

test_relative_symlink_resolves_like_lightning_last_ckpt() {
	ck_mount
	mkdir "$CK_MNT/ckpts"
	ck_rand "$CK_REF/e1" 200000
	ck_rand "$CK_REF/e2" 300000
	cp "$CK_REF/e1" "$CK_MNT/ckpts/epoch=1-step=10.ckpt"
	ln -s "epoch=1-step=10.ckpt" "$CK_MNT/ckpts/last.ckpt"
	assert_eq "epoch=1-step=10.ckpt" "$(readlink "$CK_MNT/ckpts/last.ckpt")" "readlink"
	assert_file_eq "$CK_REF/e1" "$CK_MNT/ckpts/last.ckpt"
	assert_eq "symbolic link" "$(stat -c %F "$CK_MNT/ckpts/last.ckpt")" "lstat type"
	# save_last="link": os.remove then os.symlink to the new file.
	cp "$CK_REF/e2" "$CK_MNT/ckpts/epoch=2-step=20.ckpt"
	"$PY" -c 'import os, sys; os.remove(sys.argv[1]); os.symlink("epoch=2-step=20.ckpt", sys.argv[1])' "$CK_MNT/ckpts/last.ckpt"
	assert_file_eq "$CK_REF/e2" "$CK_MNT/ckpts/last.ckpt"
	# A link to a directory, a dangling one, and a long target.
	ln -s ckpts "$CK_MNT/ckdir"
	assert_file_eq "$CK_REF/e1" "$CK_MNT/ckdir/epoch=1-step=10.ckpt"
	ln -s does-not-exist "$CK_MNT/dangling"
	assert_op OK lstat "$CK_MNT/dangling"
	[ ! -e "$CK_MNT/dangling" ] || ck_fail "a dangling symlink resolves"
	local long
	long=$(printf 'x%.0s' $(seq 1000))/target
	ln -s "$long" "$CK_MNT/long"
	assert_eq "$long" "$(readlink "$CK_MNT/long")" "readlink of a 1007-byte target"
	ck_remount
	assert_eq "epoch=2-step=20.ckpt" "$(readlink "$CK_MNT/ckpts/last.ckpt")" "readlink after remount"
	assert_file_eq "$CK_REF/e2" "$CK_MNT/ckpts/last.ckpt"
	assert_eq "$long" "$(readlink "$CK_MNT/long")" "long readlink after remount"
	ck_umount
}

test_truncate_shrinks_and_grows_with_zeros() {
	local f
	ck_mount
	ck_rand "$CK_REF/f" $((3 * MiB))
	cp "$CK_REF/f" "$CK_MNT/f"
	# Closed file: shrink into the middle of a chunk, then grow: the bytes past
	# the cut must read as zeros, never as the old data.
	for f in "$CK_REF/f" "$CK_MNT/f"; do
		truncate -s $((MiB + 7)) "$f"
	done
	assert_file_eq "$CK_REF/f" "$CK_MNT/f"
	for f in "$CK_REF/f" "$CK_MNT/f"; do
		truncate -s $((5 * MiB)) "$f"
	done
	assert_file_eq "$CK_REF/f" "$CK_MNT/f"
	cmp -n $((4 * MiB - 7)) -i $((MiB + 7)):0 "$CK_MNT/f" /dev/zero || ck_fail "grown part of the file is not zeros"
	# Through an open handle (ftruncate while writing), the same rules.
	ck_rand "$CK_REF/src" $((2 * MiB))
	for f in "$CK_REF/g" "$CK_MNT/g"; do
		"$PY" - "$CK_REF/src" "$f" <<'EOF'
import os, sys
src = open(sys.argv[1], "rb").read()
fd = os.open(sys.argv[2], os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, src)
os.ftruncate(fd, 100000)
os.pwrite(fd, b"0123456789", 200000)
os.ftruncate(fd, 150000)
os.ftruncate(fd, 3 << 20)
assert os.fstat(fd).st_size == 3 << 20
os.close(fd)
EOF
	done
	assert_file_eq "$CK_REF/g" "$CK_MNT/g"
	# truncate to the same size and to 0.
	truncate -s 0 "$CK_MNT/f"
	assert_size "$CK_MNT/f" 0
	ck_remount
	assert_size "$CK_MNT/f" 0
	assert_file_eq "$CK_REF/g" "$CK_MNT/g"
	ck_umount
}

test_chmod_and_chown_change_mode_and_owner() {
	ck_mount
	echo x >"$CK_MNT/f"
	mkdir "$CK_MNT/d"
	local c0
	c0=$(fsop ctime_ns "$CK_MNT/f")
	sleep 0.02
	chmod 600 "$CK_MNT/f"
	assert_eq 600 "$(fsop mode "$CK_MNT/f")" "mode after chmod 600"
	[ "$(fsop ctime_ns "$CK_MNT/f")" -gt "$c0" ] || ck_fail "chmod did not advance ctime"
	chmod 4751 "$CK_MNT/f"
	assert_eq 4751 "$(fsop mode "$CK_MNT/f")" "mode after chmod 4751"
	chmod 1777 "$CK_MNT/d"
	assert_eq 1777 "$(fsop mode "$CK_MNT/d")" "mode of the directory after chmod 1777"
	chown 65534:65534 "$CK_MNT/f"
	assert_eq "65534:65534" "$(stat -c %u:%g "$CK_MNT/f")" "owner after chown"
	chown 123:456 "$CK_MNT/d"
	assert_eq "123:456" "$(stat -c %u:%g "$CK_MNT/d")" "owner of the directory after chown"
	ck_remount
	assert_eq "65534:65534" "$(stat -c %u:%g "$CK_MNT/f")" "owner after remount"
	assert_eq 1777 "$(fsop mode "$CK_MNT/d")" "directory mode after remount"
	assert_eq "123:456" "$(stat -c %u:%g "$CK_MNT/d")" "directory owner after remount"
	ck_umount
}

test_utimens_sets_exact_times() {
	ck_mount
	echo x >"$CK_MNT/f"
	mkdir "$CK_MNT/d"
	touch -d '2020-01-02 03:04:05.123456789 UTC' "$CK_MNT/f"
	assert_eq 1577934245123456789 "$(fsop mtime_ns "$CK_MNT/f")" "mtime after touch -d (ns)"
	assert_op OK utime "$CK_MNT/f" 1500000000000000001 1600000000987654321
	assert_eq 1600000000987654321 "$(fsop mtime_ns "$CK_MNT/f")" "mtime after os.utime(ns=)"
	assert_eq 1500000000000000001 "$("$PY" -c 'import os, sys; print(os.stat(sys.argv[1]).st_atime_ns)' "$CK_MNT/f")" "atime after os.utime(ns=)"
	assert_op OK utime "$CK_MNT/d" 1 1234567890123456789
	assert_eq 1234567890123456789 "$(fsop mtime_ns "$CK_MNT/d")" "directory mtime after os.utime"
	# touch (UTIME_NOW) sets the current time.
	local now m
	now=$(date +%s%N)
	touch "$CK_MNT/f"
	m=$(fsop mtime_ns "$CK_MNT/f")
	[ $((m - now)) -gt -2000000000 ] && [ $((m - now)) -lt 5000000000 ] ||
		ck_fail "touch set mtime $m, expected about now ($now)"
	assert_op OK utime "$CK_MNT/f" 1500000000000000001 1600000000987654321
	ck_remount
	assert_eq 1600000000987654321 "$(fsop mtime_ns "$CK_MNT/f")" "mtime after remount"
	assert_eq 1234567890123456789 "$(fsop mtime_ns "$CK_MNT/d")" "directory mtime after remount"
	ck_umount
}

test_directory_mtime_advances_on_create_unlink_rename() {
	local old=946684800000000000 m # 2000-01-01
	# show_open: the checkpoint-N directories below are generations that
	# commit a quiet period after trainer_state.json; this case is about mtimes
	ck_mount show_open
	mkdir "$CK_MNT/d" "$CK_MNT/other"
	_dir_mtime_advanced() { # what
		m=$(fsop mtime_ns "$CK_MNT/d")
		[ "$m" -gt "$old" ] || ck_fail "directory mtime did not change on $1"
		assert_op OK utime "$CK_MNT/d" $old $old
	}
	assert_op OK utime "$CK_MNT/d" $old $old
	echo x >"$CK_MNT/d/f"
	_dir_mtime_advanced "create"
	mkdir "$CK_MNT/d/sub"
	_dir_mtime_advanced "mkdir"
	mv "$CK_MNT/d/f" "$CK_MNT/d/g"
	_dir_mtime_advanced "rename within"
	mv "$CK_MNT/d/g" "$CK_MNT/other/g"
	_dir_mtime_advanced "rename out"
	mv "$CK_MNT/other/g" "$CK_MNT/d/g"
	_dir_mtime_advanced "rename in"
	rm "$CK_MNT/d/g"
	_dir_mtime_advanced "unlink"
	ln -s x "$CK_MNT/d/l"
	_dir_mtime_advanced "symlink"
	rmdir "$CK_MNT/d/sub"
	_dir_mtime_advanced "rmdir"
	# Hugging Face rotation sorts checkpoint-* by directory mtime: the
	# directories written in order must sort in that order.
	"$PY" - "$CK_MNT/out" <<'EOF'
import glob, os, sys, time
out = sys.argv[1]
for step in (500, 100, 300, 200):     # creation order != name order
    d = os.path.join(out, "checkpoint-%d" % step)
    os.makedirs(d)
    for name in ("model.safetensors", "optimizer.pt", "trainer_state.json"):
        with open(os.path.join(d, name), "wb") as f:
            f.write(os.urandom(10000))
    time.sleep(0.02)
got = [os.path.basename(p) for p in sorted(glob.glob(os.path.join(out, "checkpoint-*")), key=os.path.getmtime)]
want = ["checkpoint-%d" % s for s in (500, 100, 300, 200)]
if got != want:
    sys.exit("checkpoint dirs sorted by mtime: %s, expected %s" % (got, want))
EOF
	ck_umount
}

test_statfs_reports_sane_numbers() {
	ck_mount
	assert_ok df -B1 "$CK_MNT"
	local bsize frsize blocks bfree bavail files ffree namemax
	read -r bsize frsize blocks bfree bavail files ffree namemax <<<"$(fsop statvfs "$CK_MNT")"
	[ "$bsize" -gt 0 ] && [ "$frsize" -gt 0 ] || ck_fail "statvfs block sizes $bsize/$frsize"
	[ "$blocks" -gt 0 ] || ck_fail "statvfs f_blocks is 0"
	[ "$bfree" -le "$blocks" ] && [ "$bavail" -le "$bfree" ] || ck_fail "statvfs free counts: blocks $blocks bfree $bfree bavail $bavail"
	[ "$namemax" -ge 255 ] || ck_fail "statvfs f_namemax $namemax < 255"
	[ "$ffree" -le "$files" ] || ck_fail "statvfs f_ffree $ffree > f_files $files"
	# Free space is that of a real disk (the cache's, where saves land), not 0
	# and not made up: within 10% of the cache's file system.
	local want
	want=$(df -B1 --output=avail "$CK_CACHE" | tail -n 1)
	local got=$((bavail * frsize))
	[ "$got" -gt $((want / 10 * 9)) ] && [ "$got" -lt $((want / 10 * 11 + 1)) ] ||
		ck_fail "free space $got differs from the cache disk's $want by more than 10%"
	ck_umount
}

test_fsync_fdatasync_and_directory_fsync_succeed() {
	ck_mount
	ck_rand "$CK_REF/f" $((3 * MiB))
	"$PY" - "$CK_REF/f" "$CK_MNT" <<'EOF'
import os, sys
src = open(sys.argv[1], "rb").read()
d = sys.argv[2]
fd = os.open(os.path.join(d, "f"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, src[:1 << 20])
os.fsync(fd)
os.write(fd, src[1 << 20:])
os.fdatasync(fd)
os.fsync(fd)  # nothing new: still fine
os.close(fd)
dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
os.fsync(dfd)
os.close(dfd)
rfd = os.open(os.path.join(d, "f"), os.O_RDONLY)
os.fsync(rfd)  # fsync of a read-only handle is allowed
os.close(rfd)
EOF
	assert_file_eq "$CK_REF/f" "$CK_MNT/f"
	ck_umount
}

test_fallocate_grows_size_and_refuses_hole_punching() {
	# Documented (fs/ops.c): mode 0 sets the size to off+len if larger (zeros);
	# KEEP_SIZE is accepted and changes nothing visible; PUNCH_HOLE and other
	# modes are EOPNOTSUPP.
	ck_mount
	ck_rand "$CK_REF/f" 100000
	cp "$CK_REF/f" "$CK_MNT/f"
	assert_ok fallocate -l $((10 * MiB)) "$CK_MNT/f"
	assert_size "$CK_MNT/f" $((10 * MiB))
	cmp -n 100000 "$CK_REF/f" "$CK_MNT/f" || ck_fail "fallocate changed existing bytes"
	cmp -n $((10 * MiB - 100000)) -i 100000:0 "$CK_MNT/f" /dev/zero || ck_fail "fallocated range is not zeros"
	assert_op OK fallocate "$CK_MNT/f" 0 0 4096 # inside: no change
	assert_size "$CK_MNT/f" $((10 * MiB))
	assert_op OK fallocate "$CK_MNT/f" 1 0 $((20 * MiB)) # FALLOC_FL_KEEP_SIZE
	assert_size "$CK_MNT/f" $((10 * MiB))
	assert_op ENOTSUP fallocate "$CK_MNT/f" 3 0 4096 # PUNCH_HOLE|KEEP_SIZE
	cmp -n 100000 "$CK_REF/f" "$CK_MNT/f" || ck_fail "refused punch hole changed bytes"
	# posix_fallocate (glibc) on a new file.
	"$PY" -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644); os.posix_fallocate(fd, 0, 3 << 20); os.close(fd)' "$CK_MNT/g"
	assert_size "$CK_MNT/g" $((3 * MiB))
	ck_remount
	assert_size "$CK_MNT/f" $((10 * MiB))
	cmp -n 100000 "$CK_REF/f" "$CK_MNT/f" || ck_fail "bytes changed after fallocate and remount"
	assert_size "$CK_MNT/g" $((3 * MiB))
	ck_umount
}

_lock_excludes() { # kind
	local kind=$1
	ck_mount
	echo data >"$CK_MNT/lockfile"
	ck_bg "$PY" "$CK_HELPERS/lock.py" hold "$kind" "$CK_MNT/lockfile" "$CK_TMP/ready" "$CK_TMP/release"
	local holder=$CK_BG_PID
	ck_wait_file "$CK_TMP/ready"
	assert_eq BUSY "$("$PY" "$CK_HELPERS/lock.py" try "$kind" "$CK_MNT/lockfile")" "second $kind lock while the first is held"
	if [ "$kind" = flock ]; then
		assert_fails flock -n "$CK_MNT/lockfile" true
	fi
	touch "$CK_TMP/release"
	ck_bg_wait "$holder" 30 || ck_fail "lock holder failed"
	assert_eq LOCKED "$("$PY" "$CK_HELPERS/lock.py" try "$kind" "$CK_MNT/lockfile")" "$kind lock after the holder released it"
	[ "$kind" = flock ] && assert_ok flock -n "$CK_MNT/lockfile" true
	ck_umount
}
test_flock_excludes_a_second_process() { _lock_excludes flock; }
test_fcntl_lockf_excludes_a_second_process() { _lock_excludes lockf; }
test_ofd_lock_excludes_a_second_process() { _lock_excludes ofd; }

test_mmap_read_matches_file_bytes() {
	ck_mount
	ck_rand "$CK_REF/f" $((9 * MiB + 123))
	cp "$CK_REF/f" "$CK_MNT/f"
	ck_remount # read from the store, not from pages left by the write
	"$PY" - "$CK_REF/f" "$CK_MNT/f" <<'EOF'
import mmap, os, random, sys
want = open(sys.argv[1], "rb").read()
with open(sys.argv[2], "rb") as f:
    for access in (mmap.ACCESS_READ, mmap.ACCESS_COPY):  # MAP_SHARED, MAP_PRIVATE (torch.load mmap)
        m = mmap.mmap(f.fileno(), 0, access=access)
        if len(m) != len(want):
            sys.exit("mmap length %d, expected %d" % (len(m), len(want)))
        rnd = random.Random(1)
        for _ in range(200):
            off = rnd.randrange(len(want))
            n = rnd.randint(1, 70000)
            if m[off:off + n] != want[off:off + n]:
                sys.exit("mmap bytes differ at [%d, +%d) (access %d)" % (off, n, access))
        if m[:] != want:
            sys.exit("whole mmap differs (access %d)" % access)
        m.close()
EOF
	ck_umount
}

test_mmap_shared_write_reaches_the_file() {
	ck_mount
	ck_rand "$CK_REF/f" $((4 * MiB))
	cp "$CK_REF/f" "$CK_MNT/f"
	ck_rand "$CK_REF/patch" 10000
	for f in "$CK_REF/f" "$CK_MNT/f"; do
		"$PY" - "$CK_REF/patch" "$f" <<'EOF'
import mmap, os, sys
patch = open(sys.argv[1], "rb").read()
fd = os.open(sys.argv[2], os.O_RDWR)
m = mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
m[1000000:1000000 + len(patch)] = patch
m[4194304 - 5:] = b"ENDED"
m.flush()
m.close()
os.close(fd)
EOF
	done
	assert_file_eq "$CK_REF/f" "$CK_MNT/f"
	ck_remount
	assert_file_eq "$CK_REF/f" "$CK_MNT/f"
	ck_umount
}

# ---- read-only opens with direct_io (fuseinit.h, ops_open_node) ----

# _direct_reads_granted — skips the case unless this mount's kernel granted
# FUSE_DIRECT_IO_ALLOW_MMAP (Linux 6.6 and later): then read-only opens of
# files of 8 MiB or more bypass the page cache.
_direct_reads_granted() {
	local line
	line=$(grep -h "FUSE protocol" "$CK_DLOG" "$CK_DERR" 2>/dev/null | tail -n 1)
	[ -n "$line" ] || ck_fail "the daemon logged no line about the FUSE INIT"
	case $line in
	*"FUSE_DIRECT_IO_ALLOW_MMAP granted"*) ;;
	*)
		ck_umount
		ck_skip "read-only opens keep the page cache on this kernel: ${line#*info: }"
		;;
	esac
}

# _cached_pages FILE r|rw — opens FILE read-only or read-write, reads it
# whole in 1 MiB reads, and prints how many of its pages the page cache
# holds then (cachestat(2) on that same descriptor: another open would drop
# them, as ckptfs does not keep a file's pages across opens).
_cached_pages() {
	"$PY" - "$1" "$2" <<'EOF'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
class Range(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]
class Stat(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in ("cache", "dirty", "writeback", "evicted", "recent")]
fd = os.open(sys.argv[1], os.O_RDONLY if sys.argv[2] == "r" else os.O_RDWR)
while os.read(fd, 1 << 20):
    pass
r, s = Range(0, 0), Stat()
if libc.syscall(451, fd, ctypes.byref(r), ctypes.byref(s), 0) != 0:  # cachestat, Linux 6.5
    sys.exit("cachestat: " + os.strerror(ctypes.get_errno()))
print(s.cache)
EOF
}

test_big_read_only_opens_bypass_the_page_cache() {
	ck_mount
	_direct_reads_granted
	assert_contains "$(cat "$CK_DLOG")" "read-only opens of files of 8 MiB or more bypass the page cache" "daemon log"
	ck_rand "$CK_REF/big" $((9 * MiB + 1))
	ck_rand "$CK_REF/small" $((2 * MiB + 1))
	cp "$CK_REF/big" "$CK_REF/small" "$CK_MNT/"
	assert_eq 0 "$(_cached_pages "$CK_MNT/big" r)" "cached pages after reading the 9 MiB file read-only"
	assert_ne 0 "$(_cached_pages "$CK_MNT/small" r)" "cached pages after reading the 2 MiB file read-only"
	assert_ne 0 "$(_cached_pages "$CK_MNT/big" rw)" "cached pages after reading the 9 MiB file read-write"
	assert_file_eq "$CK_REF/big" "$CK_MNT/big"
	ck_remount read_cache
	assert_contains "$(cat "$CK_DLOG")" "read-only opens keep the page cache (-o read_cache)" "daemon log"
	assert_ne 0 "$(_cached_pages "$CK_MNT/big" r)" "cached pages after a read-only read with -o read_cache"
	assert_file_eq "$CK_REF/big" "$CK_MNT/big"
	ck_umount
}

# One read-only descriptor of a direct_io file: read() at odd offsets and of
# odd sizes into unaligned buffers, a MAP_SHARED and a MAP_PRIVATE mapping of
# it (safetensors maps files shared, torch.load(mmap=True) private), and
# read() again while the mappings exist: every byte is the file's, and a
# write to the private mapping stays private.
test_direct_io_file_reads_and_maps_alike() {
	ck_mount
	_direct_reads_granted
	ck_rand "$CK_REF/f" $((11 * MiB + 333))
	cp "$CK_REF/f" "$CK_MNT/f"
	ck_remount # read from the store, not from what the write left
	"$PY" - "$CK_REF/f" "$CK_MNT/f" <<'EOF'
import mmap, os, random, sys
want = open(sys.argv[1], "rb").read()
fd = os.open(sys.argv[2], os.O_RDONLY)
rnd = random.Random(7)
def reads(what):
    for i in range(300):
        n = rnd.choice([1, 2, 3, 4096, 4097, 65537, (1 << 20) - 1, (1 << 20) + 1, rnd.randrange(1, 5 << 20)])
        off = rnd.randrange(0, len(want) + 10)
        skew = rnd.randrange(0, 4096)  # the reader's buffer: not page aligned
        buf = bytearray(n + skew)
        got = os.preadv(fd, [memoryview(buf)[skew:]], off)
        if bytes(buf[skew:skew + got]) != want[off:off + n]:
            sys.exit("%s: read %d at offset %d size %d: %d bytes, differ" % (what, i, off, n, got))
reads("before mapping")
shared = mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ)
private = mmap.mmap(fd, 0, mmap.MAP_PRIVATE, mmap.PROT_READ | mmap.PROT_WRITE)
for name, m in (("MAP_SHARED", shared), ("MAP_PRIVATE", private)):
    if len(m) != len(want) or m[:] != want:
        sys.exit(name + " mapping differs from the file")
reads("while mapped")
private[5:10] = b"XXXXX"
if shared[5:10] != want[5:10] or os.pread(fd, 5, 5) != want[5:10]:
    sys.exit("a write to the MAP_PRIVATE mapping reached the file")
shared.close()
private.close()
reads("after unmapping")
if os.pread(fd, 100, len(want) - 50) != want[-50:] or os.pread(fd, 10, len(want) + 1) != b"":
    sys.exit("reads at and past the end of the file")
os.close(fd)
EOF
	ck_umount
}

# A reader with direct_io never sees bytes older than the last close of a
# writer: not through a descriptor opened before the rewrite, not through a
# new one, not through a new shared mapping, and not through a shared mapping
# made before the rewrite (direct_io writes drop the file's cached pages).
test_direct_io_reader_sees_a_rewrite_after_the_writer_closes() {
	ck_mount
	_direct_reads_granted
	ck_rand "$CK_REF/old" $((10 * MiB))
	ck_rand "$CK_REF/patch" $((3 * MiB + 7))
	cp "$CK_REF/old" "$CK_MNT/f"
	"$PY" - "$CK_REF/old" "$CK_REF/patch" "$CK_MNT/f" <<'EOF'
import mmap, os, sys
old = open(sys.argv[1], "rb").read()
patch = open(sys.argv[2], "rb").read()
path = sys.argv[3]
def check(what, fd, want, m=None):
    got = os.pread(fd, len(want) + 1, 0)
    if got != want:
        sys.exit("%s: read() returned %d bytes, %s" % (what, len(got), "old ones" if got == old else "not the file's"))
    if m is not None and m[:len(want)] != want[:len(m)]:
        sys.exit("%s: the shared mapping shows %s" % (what, "old bytes" if m[:] == old[:len(m)] else "other bytes"))
r = os.open(path, os.O_RDONLY)
m = mmap.mmap(r, 0, mmap.MAP_SHARED, mmap.PROT_READ)
check("before", r, old, m)
new = old[:2000001] + patch + old[2000001 + len(patch):]
for flags in (os.O_WRONLY, os.O_RDWR):  # a write-only (direct_io) and a read-write (page cache) writer
    w = os.open(path, flags)
    os.pwrite(w, patch, 2000001)
    os.close(w)
    check("after a rewrite through %s" % ("O_WRONLY" if flags == os.O_WRONLY else "O_RDWR"), r, new, m)
    patch = patch[::-1]
    new = old[:2000001] + patch + old[2000001 + len(patch):]
patch = patch[::-1]
new = old[:2000001] + patch + old[2000001 + len(patch):]
r2 = os.open(path, os.O_RDONLY)
m2 = mmap.mmap(r2, 0, mmap.MAP_SHARED, mmap.PROT_READ)
check("a new descriptor and mapping", r2, new, m2)
w = os.open(path, os.O_WRONLY | os.O_TRUNC)
os.write(w, patch)
os.close(w)
check("after truncating to %d bytes" % len(patch), r2, patch)
m.close(); m2.close(); os.close(r); os.close(r2)
EOF
	ck_umount
}

test_unlinked_open_file_stays_readable_through_its_fd() {
	ck_mount
	ck_rand "$CK_REF/f" $((3 * MiB + 3))
	ck_rand "$CK_REF/g" 5000
	cp "$CK_REF/f" "$CK_MNT/f"
	"$PY" - "$CK_REF/f" "$CK_REF/g" "$CK_MNT" <<'EOF'
import os, sys
want = open(sys.argv[1], "rb").read()
other = open(sys.argv[2], "rb").read()
d = sys.argv[3]
p = os.path.join(d, "f")
fd = os.open(p, os.O_RDWR)
os.unlink(p)
try:
    os.stat(p)
    sys.exit("stat of the unlinked name succeeded")
except FileNotFoundError:
    pass
if "f" in os.listdir(d):
    sys.exit("the unlinked name is still listed")
# A new file under the same name is a different file.
with open(p, "wb") as nf:
    nf.write(other)
got = b""
while True:
    b = os.pread(fd, 1 << 20, len(got))
    if not b:
        break
    got += b
if got != want:
    sys.exit("read through the fd of the unlinked file: %d bytes, %s" % (len(got), "equal prefix" if want.startswith(got) else "different bytes"))
# Still writable through the fd.
os.pwrite(fd, b"tail", len(want))
if os.pread(fd, 4, len(want)) != b"tail" or os.fstat(fd).st_size != len(want) + 4:
    sys.exit("write through the fd of the unlinked file did not read back")
os.close(fd)
if open(p, "rb").read() != other:
    sys.exit("the new file with the old name has the wrong content")
EOF
	ck_remount
	assert_file_eq "$CK_REF/g" "$CK_MNT/f"
	assert_eq f "$(ls -A "$CK_MNT")" "entries after remount"
	ck_umount
}

test_hard_link_shares_contents() {
	ck_mount
	ck_rand "$CK_REF/a" $((MiB + 1))
	cp "$CK_REF/a" "$CK_MNT/a"
	ln "$CK_MNT/a" "$CK_MNT/b"
	assert_file_eq "$CK_REF/a" "$CK_MNT/b"
	assert_eq 2 "$(stat -c %h "$CK_MNT/a")" "nlink after ln"
	assert_eq "$(stat -c %i "$CK_MNT/a")" "$(stat -c %i "$CK_MNT/b")" "inode numbers of the two links"
	echo appended >>"$CK_MNT/a"
	echo appended >>"$CK_REF/a"
	assert_file_eq "$CK_REF/a" "$CK_MNT/b"
	rm "$CK_MNT/a"
	assert_eq 1 "$(stat -c %h "$CK_MNT/b")" "nlink after removing one link"
	assert_file_eq "$CK_REF/a" "$CK_MNT/b"
	mkdir "$CK_MNT/d"
	assert_op EPERM link "$CK_MNT/d" "$CK_MNT/d2"
	ck_remount
	assert_file_eq "$CK_REF/a" "$CK_MNT/b"
	assert_eq 1 "$(stat -c %h "$CK_MNT/b")" "nlink after remount"
	ck_umount
}

test_xattrs_report_cache_and_backing_dirs() {
	ck_mount
	assert_eq "$(realpath "$CK_CACHE")" "$(getfattr -n user.ckptfs.cache --only-values "$CK_MNT")" "user.ckptfs.cache"
	assert_eq "$(realpath "$CK_BACKING")" "$(getfattr -n user.ckptfs.backing --only-values "$CK_MNT")" "user.ckptfs.backing"
	local names
	names=$(getfattr -d -m - "$CK_MNT" 2>/dev/null | grep -c '^user\.ckptfs\.') || true
	assert_eq 2 "$names" "xattrs listed on the root"
	echo x >"$CK_MNT/f"
	assert_fails getfattr -n user.ckptfs.cache "$CK_MNT/f"
	assert_fails setfattr -n user.test -v 1 "$CK_MNT/f"
	ck_umount
}

test_shutil_move_from_tmp_keeps_bytes_mode_and_mtime() {
	# Lightning's "atomic" save: torch.save into $TMPDIR, then shutil.move
	# across devices (copy via sendfile + copystat + unlink).
	ck_mount
	ck_rand "$CK_REF/src.ckpt" $((5 * MiB + 99))
	cp "$CK_REF/src.ckpt" "$CK_REF/keep"
	chmod 640 "$CK_REF/src.ckpt"
	touch -d '2021-06-07 08:09:10.5 UTC' "$CK_REF/src.ckpt"
	local mt
	mt=$(fsop mtime_ns "$CK_REF/src.ckpt")
	"$PY" -c 'import shutil, sys; shutil.move(sys.argv[1], sys.argv[2])' "$CK_REF/src.ckpt" "$CK_MNT/epoch=0-step=1.ckpt"
	assert_not_exists "$CK_REF/src.ckpt"
	assert_file_eq "$CK_REF/keep" "$CK_MNT/epoch=0-step=1.ckpt"
	assert_eq 640 "$(fsop mode "$CK_MNT/epoch=0-step=1.ckpt")" "mode after shutil.move"
	assert_eq "$mt" "$(fsop mtime_ns "$CK_MNT/epoch=0-step=1.ckpt")" "mtime after shutil.move"
	ck_remount
	assert_file_eq "$CK_REF/keep" "$CK_MNT/epoch=0-step=1.ckpt"
	assert_eq "$mt" "$(fsop mtime_ns "$CK_MNT/epoch=0-step=1.ckpt")" "mtime after remount"
	ck_umount
}

test_create_exclusive_and_name_length_limits() {
	ck_mount
	echo x >"$CK_MNT/f"
	assert_eq EEXIST "$("$PY" -c 'import errno, os, sys
try:
    os.open(sys.argv[1], os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    print("OK")
except OSError as e:
    print(errno.errorcode[e.errno])' "$CK_MNT/f")" "O_CREAT|O_EXCL on an existing file"
	local n255 n256
	n255=$(printf 'n%.0s' $(seq 255))
	n256=${n255}x
	assert_op OK create "$CK_MNT/$n255"
	assert_op ENAMETOOLONG create "$CK_MNT/$n256"
	assert_op OK lstat "$CK_MNT/$n255"
	mkfifo "$CK_MNT/fifo"
	assert_eq "fifo" "$(stat -c %F "$CK_MNT/fifo")" "type of a mkfifo node"
	ck_remount
	assert_op OK lstat "$CK_MNT/$n255"
	assert_eq "fifo" "$(stat -c %F "$CK_MNT/fifo")" "fifo after remount"
	ck_umount
}

ck_main "$@"
