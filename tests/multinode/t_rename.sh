#!/bin/bash
# t_rename — renames across nodes (docs/MULTINODE.md "What POSIX semantics
# hold across nodes"): a file open for writing on one node that another
# node renames a file over (a checkpoint's rotation) keeps taking the
# writer's bytes, whose write, fsync and close succeed as on one node; the
# name holds the renamed file's bytes only, and the replaced inode's data
# goes once the writer closed (pgns.h N14). And the directory mtimes that
# HF Trainer's rotation sorts checkpoint-* by (/work/shared/TRAINERS.md)
# are the catalog's: the same on every node, advanced by a create on any
# node, so rotation on either node removes the oldest save.
. "$(dirname "$0")/mn.sh"

# _ren_ino DIR NAME: the inode of DIR/NAME (DIR in the root).
_ren_ino() {
	mn_psql "SELECT d.ino FROM ns_dirents d JOIN ns_dirents p ON p.ino = d.parent
		WHERE p.parent = 1 AND p.name = '$1' AND d.name = '$2'"
}

# _ren_flush X: node X releases what it has queued (node.h invariant 4).
_ren_flush() { "$CKPTFS_ADMIN" stats --cache "$CK_TMP/cache_$1" >/dev/null || ck_fail "stats on $1"; }

# The writer on A: opens PATH (mode r+b, or w+b: a new file), writes 1 MB
# of its bytes, fsyncs, makes GO and waits until GO is gone, then writes
# 1 MB more, fsyncs and closes. It records each step's outcome in OUT
# ("ok" or the errno) and what it wrote in WROTE.
_REN_WRITER='
import os, sys, time
path, mode, go, out, wrote = sys.argv[1:6]
steps = []
def step(name, fn):
    try:
        fn(); steps.append(name + "=ok")
    except OSError as e:
        steps.append("%s=errno%d" % (name, e.errno))
a = bytes((i * 7 + 3) % 251 for i in range(1 << 20))
b = bytes((i * 13 + 5) % 253 for i in range(1 << 20))
f = open(path, mode, buffering=0)
step("write1", lambda: f.write(a))
step("fsync1", lambda: os.fsync(f.fileno()))
open(go, "w").write("x")
while os.path.exists(go):
    time.sleep(0.05)
step("write2", lambda: f.write(b))
step("fsync2", lambda: os.fsync(f.fileno()))
f.seek(0)
back = f.read()
step("close", f.close)
steps.append("readback=" + ("same" if back == a + b else "differs(%d)" % len(back)))
open(wrote, "wb").write(a + b)
open(out, "w").write(" ".join(steps))'

# _ren_over MODE: d/f (2 MB, written on A and seen on B, when MODE is r+b;
# new on A when w+b) open for writing on A; B renames d/g (its own 3 MB)
# over d/f meanwhile. A's writes, fsyncs and close succeed and it reads
# its own bytes back; d/f holds g's bytes on both nodes, before and after
# A's close; the replaced inode stays while A writes, its row and extents
# go after A's close, and no ns_writing or ns_open row is left.
_ren_over() {
	local mode=$1
	mn_pg_start
	mn_mount A
	mn_mount B
	mkdir -p "$MN_MNT_A/d"
	if [ "$mode" = r+b ]; then
		ck_rand "$CK_REF/f.bin" 2000000
		cp "$CK_REF/f.bin" "$MN_MNT_A/d/f.bin"
		mn_see B d/f.bin 2
	fi
	mn_see B d 2
	ck_rand "$CK_REF/g.bin" 3000000
	cp "$CK_REF/g.bin" "$MN_MNT_B/d/g.bin"
	/usr/bin/python3 -c "$_REN_WRITER" "$MN_MNT_A/d/f.bin" "$mode" "$CK_TMP/go" \
		"$CK_TMP/steps" "$CK_TMP/wrote.bin" &
	local w=$!
	ck_wait_file "$CK_TMP/go" 60
	local ino
	ino=$(_ren_ino d f.bin)
	[ -n "$ino" ] || ck_fail "no inode for d/f.bin"
	assert_eq 1 "$(mn_psql "SELECT count(*) FROM ns_writing WHERE ino = $ino")" "A's ns_writing row"
	mn_see B d/f.bin 2
	mv "$MN_MNT_B/d/g.bin" "$MN_MNT_B/d/f.bin" || ck_fail "B's rename over d/f.bin"
	ls "$MN_MNT_B/d" >/dev/null
	_ren_flush B
	assert_eq "1 0" "$(mn_psql "SELECT count(*) || ' ' || COALESCE(max(nlink), -1) FROM ns_inodes WHERE ino = $ino")" "the replaced inode (rows, nlink) while A writes"
	assert_file_eq "$CK_REF/g.bin" "$MN_MNT_B/d/f.bin"
	rm "$CK_TMP/go"
	wait $w || ck_fail "A's writer failed"
	ck_log "A's writer: $(cat "$CK_TMP/steps")"
	assert_eq "write1=ok fsync1=ok write2=ok fsync2=ok close=ok readback=same" \
		"$(cat "$CK_TMP/steps")" "A's writes, fsyncs and close of the replaced file"
	# nothing of A's went into the file now named d/f.bin, on either node
	assert_file_eq "$CK_REF/g.bin" "$MN_MNT_B/d/f.bin"
	local i=0
	until cmp -s "$CK_REF/g.bin" "$MN_MNT_A/d/f.bin"; do
		i=$((i + 1))
		[ $i -le 100 ] || ck_fail "d/f.bin on A is not g's bytes (kernel timeouts are 1 s)"
		sleep 0.05
	done
	assert_eq "$(_ren_ino d f.bin)" "$(mn_psql "SELECT ino FROM ns_inodes WHERE ino <> $ino AND nlink = 1 AND size = 3000000")" "d/f.bin is g's inode"
	_ren_flush A
	mn_poll "SELECT count(*) FROM ns_inodes WHERE ino = $ino" 0 60 "the replaced inode released after A's close"
	assert_eq "0 0 0" "$(mn_psql "SELECT (SELECT count(*) FROM ns_writing) || ' ' || (SELECT count(*) FROM ns_open) || ' ' || (SELECT count(*) FROM ns_extents WHERE ino = $ino)")" "ns_writing, ns_open rows and extents of the replaced inode left"
	# the references of what is left are whole (pgns.h N1): every extent's chunk counted once
	assert_eq 0 "$(mn_psql "SELECT count(*) FROM ns_chunks c WHERE refcount <> (SELECT count(*) FROM ns_extents e WHERE e.hash = c.hash)")" "chunks whose count is not their extents'"
	mn_umount A
	mn_umount B
}

test_rename_over_a_file_another_node_writes() { _ren_over r+b; }
ck_timeout test_rename_over_a_file_another_node_writes 150

test_rename_over_a_new_file_another_node_writes() { _ren_over w+b; }
ck_timeout test_rename_over_a_new_file_another_node_writes 150

# _ren_mtimes X: "name mtime_ns" of out/checkpoint-*, sorted by name, as
# node X's mount sees them.
_ren_mtimes() {
	local v=MN_MNT_$1
	/usr/bin/python3 -c '
import os, sys
d = sys.argv[1]
for n in sorted(os.listdir(d)):
    if n.startswith("checkpoint-"):
        print(n, os.stat(os.path.join(d, n)).st_mtime_ns)' "${!v}/out"
}

# _ren_rotate X KEEP: HF Trainer's rotation (save_total_limit KEEP) on node
# X: checkpoint-* sorted by directory mtime, the oldest removed.
_ren_rotate() {
	local v=MN_MNT_$1
	/usr/bin/python3 -c '
import glob, os, shutil, sys
d, keep = sys.argv[1], int(sys.argv[2])
cks = sorted(glob.glob(os.path.join(d, "checkpoint-*")), key=os.path.getmtime)
for c in cks[:max(0, len(cks) - keep)]:
    shutil.rmtree(c, ignore_errors=True)' "${!v}/out" "$2"
}

# Saves of a two-node run: for step N, one node makes out/checkpoint-N
# and writes its shard, the other writes its shard into it (nodes take
# turns making the directory). The mtimes of the directories are the same
# on both nodes and increase with N; the rotation on B keeps the newest
# two, on A then the newest one.
test_checkpoint_dirs_mtimes_are_shared_and_rotation_removes_the_oldest() {
	mn_pg_start
	mn_mount A
	mn_mount B
	mkdir -p "$MN_MNT_A/out"
	mn_see B out 2
	local n first second v1 v2 m0 m1 i
	for n in 1 2 3 4; do
		if [ $((n % 2)) = 1 ]; then first=A second=B; else first=B second=A; fi
		v1=MN_MNT_$first v2=MN_MNT_$second
		mkdir "${!v1}/out/checkpoint-$n"
		ck_rand "$CK_TMP/s$n-0.bin" 100000
		cp "$CK_TMP/s$n-0.bin" "${!v1}/out/checkpoint-$n/rank0.bin"
		mn_see "$second" "out/checkpoint-$n" 2
		m0=$(stat -c %Y.%y "${!v1}/out/checkpoint-$n")
		ck_rand "$CK_TMP/s$n-1.bin" 100000
		cp "$CK_TMP/s$n-1.bin" "${!v2}/out/checkpoint-$n/rank1.bin"
		# the second node's create advanced the mtime, as the first node sees it
		m1=$(stat -c %Y.%y "${!v2}/out/checkpoint-$n")
		[ "$m1" != "$m0" ] || ck_fail "checkpoint-$n: $second's create left its mtime at $m0"
		i=0
		until [ "$(stat -c %Y.%y "${!v1}/out/checkpoint-$n")" = "$m1" ]; do
			i=$((i + 1))
			[ $i -le 100 ] || ck_fail "checkpoint-$n: $first sees mtime $(stat -c %y "${!v1}/out/checkpoint-$n"), $second $m1"
			sleep 0.05
		done
	done
	# checkpoint-N+1 committed checkpoint-N (next-gen); the last is
	# committed as the trainer's save ends (an OPEN one is not listed)
	setfattr -n user.ckptfs.commit -v 1 "$MN_MNT_A/out/checkpoint-4" || ck_fail "commit of checkpoint-4"
	# both nodes agree (attributes are cached up to 1 s, ops.c)
	local ma mb
	i=0
	until ma=$(_ren_mtimes A) && mb=$(_ren_mtimes B) && [ "$ma" = "$mb" ]; do
		i=$((i + 1))
		[ $i -le 100 ] || ck_fail "directory mtimes differ: A: $(echo $ma) B: $(echo $mb)"
		sleep 0.05
	done
	ck_log "mtimes: $(echo $ma)"
	assert_eq "$(mn_psql "SELECT string_agg(d.name || ' ' || i.mtime_ns, ' ' ORDER BY d.name)
		FROM ns_dirents d JOIN ns_inodes i ON i.ino = d.ino JOIN ns_dirents o ON o.ino = d.parent
		WHERE o.parent = 1 AND o.name = 'out'")" "$(echo $ma)" "the catalog's mtimes"
	# each directory's mtime is its last create's: the second node's, after the first's
	assert_eq "checkpoint-1 checkpoint-2 checkpoint-3 checkpoint-4" \
		"$(echo "$ma" | sort -k2,2n | cut -d' ' -f1 | tr '\n' ' ' | sed 's/ $//')" "the order by mtime"
	_ren_rotate B 2
	assert_eq "checkpoint-3 checkpoint-4" "$(mn_entries "$MN_MNT_B/out")" "out/ after rotation on B"
	i=0
	until [ "$(mn_entries "$MN_MNT_A/out")" = "checkpoint-3 checkpoint-4" ]; do
		i=$((i + 1))
		[ $i -le 100 ] || ck_fail "A sees out/ as $(mn_entries "$MN_MNT_A/out")"
		sleep 0.05
	done
	_ren_rotate A 1
	assert_eq "checkpoint-4" "$(mn_entries "$MN_MNT_B/out")" "out/ after rotation on A"
	local f
	for f in 0 1; do
		assert_file_eq "$CK_TMP/s4-$f.bin" "$MN_MNT_B/out/checkpoint-4/rank$f.bin"
	done
	mn_umount A
	mn_umount B
}
ck_timeout test_checkpoint_dirs_mtimes_are_shared_and_rotation_removes_the_oldest 120

# generation.h G8 on the shared engine (pggen.c): a rename of a rewrite's root
# is refused (EBUSY) and the committed version is back byte for byte once the
# rewrite is aborted; a held save renamed to another step name stays held.
test_rename_of_a_rewrites_root_is_refused_and_a_held_save_stays_held() {
	mn_pg_start
	mn_mount A
	mkdir -p "$MN_MNT_A/ck"
	mn_save A ck/step-100 a.bin 300000 v1
	mn_poll "SELECT state FROM ns_generations WHERE name = 'step-100'" 1 10 "step-100 committed"
	ck_rand "$CK_TMP/v2.bin" 1000
	cp "$CK_TMP/v2.bin" "$MN_MNT_A/ck/step-100/a.bin"
	assert_eq open "$(mn_gen_state "$MN_MNT_A" ck/step-100)" "step-100 during its rewrite"
	local err
	err=$(mv -T "$MN_MNT_A/ck/step-100" "$MN_MNT_A/ck/step-150" 2>&1) && ck_fail "a rewrite's root was renamed"
	assert_contains "$err" "busy" "mv of a rewrite's root"
	grep -q 'not moved to "step-150"' "$MN_DLOG_A" || ck_fail "no log line names the refused rename"
	"$CKPTFS_ADMIN" rm --force "$MN_MNT_A" ck/step-100 >/dev/null || ck_fail "rm --force of the rewrite"
	assert_eq committed "$(mn_gen_state "$MN_MNT_A" ck/step-100)" "step-100 after the abort"
	assert_file_eq "$CK_TMP/v1.bin" "$MN_MNT_A/ck/step-100/a.bin"
	# an unfinished DCP save (no .metadata), held at unmount
	mkdir -p "$MN_MNT_A/ub/step-8"
	ck_rand "$CK_TMP/d0.bin" 200000
	cp "$CK_TMP/d0.bin" "$MN_MNT_A/ub/step-8/__0_0.distcp"
	mn_umount A
	mn_mount A
	assert_eq held "$(mn_gen_state "$MN_MNT_A" ub/step-8)" "the unfinished step-8"
	mv "$MN_MNT_A/ub/step-8" "$MN_MNT_A/ub/step-9"
	assert_eq held "$(mn_gen_state "$MN_MNT_A" ub/step-9)" "the held save renamed to step-9"
	assert_eq "4 1" "$(mn_psql "SELECT state || ' ' || (held <> '')::int FROM ns_generations WHERE name = 'step-9'")" "step-9's row"
	assert_file_eq "$CK_TMP/d0.bin" "$MN_MNT_A/ub/step-9/__0_0.distcp"
	# to a name that is no step name: refused (G8, review 39 F1), still held
	mv "$MN_MNT_A/ub/step-9" "$MN_MNT_A/ub/step-9.old" 2>/dev/null &&
		ck_fail "a held save was renamed to a name that is no step name"
	assert_eq "4 1" "$(mn_psql "SELECT state || ' ' || (held <> '')::int FROM ns_generations WHERE name = 'step-9'")" "step-9's row after the refused move"
	assert_file_eq "$CK_TMP/d0.bin" "$MN_MNT_A/ub/step-9/__0_0.distcp"
	mn_umount A
}
ck_timeout test_rename_of_a_rewrites_root_is_refused_and_a_held_save_stays_held 120

ck_main "$@"
