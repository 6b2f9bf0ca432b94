#!/bin/bash
# t_keep — keep-latest-k (-o keep=K, fs/gen.h): after each commit, committed
# generations of the series past the newest K by step are deleted (state
# deleted, rule keep) and their unique chunks reclaimed; pinned and OPEN
# generations are never deleted; keep=0 keeps all; a trainer's own deletes may
# race it. Saves are scripted DCP saves (helpers/gen_trainers.py).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/helpers/gen.sh"

GEN_OPTS=quiet=0.5

cat_gen() {
	ck_sql "SELECT state || ' ' || coalesce(nullif(rule, ''), '-') || ' ' || version FROM generations WHERE name = '$1' ORDER BY id DESC LIMIT 1"
}
assert_cat_gen() { # NAME STATE [RULE]  (0 open, 1 committed, 2 aborted, 3 deleted)
	local got
	got=$(cat_gen "$1")
	[ -n "$got" ] || ck_fail "no catalog row for generation $1"
	assert_eq "$2" "${got%% *}" "catalog state of generation $1 (row: $got)"
	if [ -n "${3:-}" ]; then
		local rest=${got#* }
		assert_eq "$3" "${rest%% *}" "catalog rule of generation $1 (row: $got)"
	fi
}
# wait_cat_gen NAME STATE RULE — keep deletes after the commit is answered,
# and keeps the newest durable generation while newer ones are only in the
# cache: its deletion may come when an upload lands. Waits up to 20 s.
wait_cat_gen() {
	local i=0
	while [ "$(cat_gen "$1" | cut -d' ' -f1-2)" != "$2 $3" ] && [ $i -lt 200 ]; do
		i=$((i + 1))
		sleep 0.1
	done
	assert_cat_gen "$1" "$2" "$3"
}
tree_bytes() { find "$1" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }'; }
# The entries of a series directory, sorted, on one line.
entries() { ls -A "$1" | sort -V | tr '\n' ' ' | sed 's/ $//'; }
# assert_entries DIR EXPECTED WHAT — keep runs after each commit and again
# when a generation becomes durable on BACKING (until then the newest durable
# one is kept too): the series must reach EXPECTED within 20 s.
assert_entries() {
	ck_until_eq "$2" 200 "$3" entries "$1"
}
# A full DCP save that must commit.
save() {
	GT dcp "$1"
	gen_expect "$CK_MNT/$1" state=committed rule=dcp-metadata --wait 3
}
# The trainer's copy of a generation deleted by keep goes from the reference too.
forget_ref() { rm -rf "${CK_REF:?}/$1"; }

test_keep_2_leaves_the_newest_two_and_reclaims_the_rest() {
	ck_mount "$GEN_OPTS,keep=2"
	mkdir "$CK_MNT/k"
	local s
	for s in 100 200 300 400 500; do save "k/step-$s"; done
	assert_entries "$CK_MNT/k" "step-400 step-500" "series k after 5 saves with keep=2"
	for s in 100 200 300; do
		assert_not_exists "$CK_MNT/k/step-$s"
		wait_cat_gen "step-$s" 3 keep
		forget_ref "k/step-$s"
	done
	assert_cat_gen step-400 1 dcp-metadata
	assert_cat_gen step-500 1 dcp-metadata
	same k
	ck_umount
	# only the kept generations' chunks are left (all contents are distinct)
	assert_eq "$(tree_bytes "$CK_REF")" "$(ck_unique_bytes)" "unique chunk bytes vs the kept generations' bytes"
	ck_objcheck
	ck_mount "$GEN_OPTS,keep=2"
	same k
	ck_umount
}

test_pinned_generation_survives_keep() {
	ck_mount "$GEN_OPTS,keep=2"
	mkdir "$CK_MNT/p"
	save p/step-1
	setfattr -n user.ckptfs.pin -v 1 "$CK_MNT/p/step-1"
	gen_expect "$CK_MNT/p/step-1" state=committed pinned=1
	save p/step-2
	save p/step-3
	save p/step-4
	assert_entries "$CK_MNT/p" "step-1 step-3 step-4" "series with step-1 pinned, keep=2"
	wait_cat_gen step-2 3 keep
	forget_ref p/step-2
	gen_expect "$CK_MNT/p/step-1" state=committed pinned=1 version=1
	same p
	# the pin survives a remount
	ck_remount "$GEN_OPTS,keep=2"
	gen_expect "$CK_MNT/p/step-1" state=committed pinned=1
	# unpinned: the next commit applies keep to it
	setfattr -n user.ckptfs.pin -v 0 "$CK_MNT/p/step-1"
	gen_expect "$CK_MNT/p/step-1" state=committed pinned=0
	# the unpin rewrites the manifest on BACKING; that upload finishing is
	# not a commit, and keep does not run on it
	ck_wait_durable
	sleep 0.3
	gen_expect "$CK_MNT/p/step-1" state=committed pinned=0
	save p/step-5
	assert_entries "$CK_MNT/p" "step-4 step-5" "series after unpinning step-1 and one more save"
	wait_cat_gen step-1 3 keep
	wait_cat_gen step-3 3 keep
	forget_ref p/step-1
	forget_ref p/step-3
	same p
	ck_umount
}

test_open_generation_is_never_deleted_by_keep() {
	ck_mount "$GEN_OPTS,keep=2"
	mkdir "$CK_MNT/o"
	save o/step-1
	save o/step-2
	# step-3: shards written, no .metadata yet (an async save still going)
	GT dcp o/step-3 --phase files
	gen_expect "$CK_MNT/o/step-3" state=open
	save o/step-4
	save o/step-5
	gen_expect "$CK_MNT/o/step-3" state=open version=1
	same o/step-3
	wait_cat_gen step-1 3 keep
	wait_cat_gen step-2 3 keep
	# a committed generation being rewritten (OPEN version 2, a shard still
	# open for writing 'wb') is not deleted either
	ck_rand "$CK_REF/v2shard" $((100 * KiB))
	ck_bg "$PY" "$CK_HELPERS/holdopen.py" "$CK_REF/v2shard" "$CK_MNT/o/step-4/__0_0.distcp" "$CK_TMP/ready"
	local holder=$CK_BG_PID
	ck_wait_file "$CK_TMP/ready"
	gen_expect "$CK_MNT/o/step-4" state=open version=2
	save o/step-6
	save o/step-7
	gen_expect "$CK_MNT/o/step-4" state=open version=2
	cmp "$CK_REF/v2shard" "$CK_MNT/o/step-4/__0_0.distcp" || ck_fail "step-4's new shard differs"
	gen_expect "$CK_MNT/o/step-3" state=open version=1
	wait_cat_gen step-5 3 keep
	assert_entries "$CK_MNT/o" "step-6 step-7" "listed generations (OPEN ones hidden)"
	kill -9 "$holder"
	wait "$holder" 2>/dev/null || true
	ck_umount
}

test_keep_counts_by_step_not_by_commit_time() {
	ck_mount "$GEN_OPTS,keep=2"
	mkdir "$CK_MNT/t"
	save t/step-100
	save t/step-300
	save t/step-200
	assert_entries "$CK_MNT/t" "step-200 step-300" "series after saving steps 100, 300, 200 with keep=2"
	wait_cat_gen step-100 3 keep
	forget_ref t/step-100
	same t
	# an older step committed late is itself past the newest two by step
	# (gen.h does not say whether it survives as "the newest committed one")
	GT dcp t/step-150
	sleep 0.3
	ck_log "step-150 committed after 300 and 200: catalog row $(cat_gen step-150)"
	assert_cat_gen step-300 1
	assert_cat_gen step-200 1
	ck_umount
}

test_keep_0_keeps_everything() {
	ck_mount "$GEN_OPTS,keep=0"
	mkdir "$CK_MNT/z"
	local s
	for s in 1 2 3 4 5; do save "z/step-$s"; done
	assert_entries "$CK_MNT/z" "step-1 step-2 step-3 step-4 step-5" "series with keep=0"
	same z
	ck_umount
	# the default keeps everything too
	ck_mount "$GEN_OPTS"
	save z/step-6
	assert_entries "$CK_MNT/z" "step-1 step-2 step-3 step-4 step-5 step-6" "series with no keep option"
	ck_umount
}

test_keep_is_per_series() {
	ck_mount "$GEN_OPTS,keep=1"
	mkdir -p "$CK_MNT/a" "$CK_MNT/b"
	save a/step-1
	save b/step-1
	save a/step-2
	assert_entries "$CK_MNT/a" "step-2" "series a with keep=1"
	assert_entries "$CK_MNT/b" "step-1" "series b (untouched by a's saves)"
	forget_ref a/step-1
	same a
	same b
	ck_umount
}

test_trainer_delete_racing_keep() {
	ck_mount "$GEN_OPTS,keep=2"
	mkdir "$CK_MNT/r"
	save r/step-1
	save r/step-2
	local s out errors=0
	# the trainer purges the same steps the daemon's keep deletes, while it
	# writes the next save (rmtree with ignore_errors, as HF rotation does)
	local when=shards
	for s in 3 4 5 6 7 8 9 10; do
		# half of the purges run while rank 0 renames .metadata, when keep runs
		[ $((s % 2)) = 0 ] && when=metadata || when=shards
		out=$(GT titan-race r --purge "step-$((s - 2))" --save "step-$s" --ignore-errors --purge-when $when)
		if [ -n "$out" ]; then
			errors=$((errors + 1))
			ck_log "save step-$s: $out"
		fi
		gen_expect "$CK_MNT/r/step-$s" state=committed --wait 3
	done
	ck_log "$errors of 8 purges saw the directory vanish under them"
	# every save but the newest two gone, whoever deleted it
	assert_entries "$CK_MNT/r" "step-9 step-10" "series after racing deletes"
	for s in 1 2 3 4 5 6 7 8; do
		assert_cat_gen "step-$s" 3
		forget_ref "r/step-$s"
	done
	assert_eq 0 "$(ck_sql "SELECT count(*) FROM generations WHERE state = 0")" "OPEN generations left"
	same r
	ck_umount
	assert_eq "$(tree_bytes "$CK_REF")" "$(ck_unique_bytes)" "unique chunk bytes vs the kept generations' bytes"
	if ck_admin_has check; then
		out=$("$CKPTFS_ADMIN" check --cache "$CK_CACHE" 2>&1) || ck_fail "ckptfs-admin check after racing deletes: $(echo "$out" | head -n 5 | tr '\n' '|')"
	fi
}

# N files of 1 KiB, each distinct, in 10 directories of DIR (not in the reference).
many_files() {
	"$PY" - "$1" "$2" <<'PYEOF'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
base = os.urandom(1024)
for i in range(n):
    sub = os.path.join(d, "d%02d" % (i % 10))
    os.makedirs(sub, exist_ok=True)
    with open(os.path.join(sub, "f%06d" % i), "wb") as f:
        f.write(i.to_bytes(8, "little") + os.urandom(8) + base[16:])
PYEOF
}

# keep=1 deletes a 3000-file generation on the generation thread, after the
# commit that triggered it was answered; kill -9 while it releases the
# inodes and unlinks their objects: the next start finishes it (recovery
# releases what had nlink 0, keep runs over every series at start), leaking
# no chunk and losing none of the kept save.
test_kill9_during_keep_deletion_leaks_nothing() {
	ck_mount "$GEN_OPTS,keep=1"
	mkdir "$CK_MNT/b"
	many_files "$CK_MNT/b/step-1" 3000
	save b/step-1
	ck_wait_durable
	ck_remount "$GEN_OPTS,keep=1" # the kernel holds none of step-1's inodes
	local t0 t1
	t0=$(date +%s%N)
	save b/step-2
	t1=$(date +%s%N)
	ck_log "save of step-2 (the commit that deletes step-1) took $(( (t1 - t0) / 1000000 )) ms"
	sleep 0.$((RANDOM % 5))
	ck_kill9
	ck_mount "$GEN_OPTS,keep=1"
	assert_entries "$CK_MNT/b" "step-2" "series after kill -9 during keep's deletion"
	wait_cat_gen step-1 3 keep
	forget_ref b/step-1
	same b
	ck_umount
	assert_eq 0 "$(ck_sql 'SELECT count(*) FROM inodes WHERE nlink = 0')" "unlinked inodes left"
	assert_eq "$(tree_bytes "$CK_REF")" "$(ck_unique_bytes)" "unique chunk bytes vs the kept generation's bytes"
	ck_objcheck
}

# The interleaving behind a flake of the case above: at the restart, the
# test's listing of the series ran before keep's pass at start deleted
# step-1, so the kernel held a lookup of step-1's root while keep removed
# it. Such an inode keeps its row (nlink 0, its data dropped: node.h 5)
# until the kernel forgets it, and the kernel sends no FORGET once it is
# unmounting: the clean unmount must release it itself. Here the lookup is
# taken on purpose (stat) and the next commit's keep deletes step-1.
test_keep_deleting_what_the_kernel_holds_leaves_no_unlinked_inode() {
	ck_mount "$GEN_OPTS,keep=1"
	mkdir "$CK_MNT/h"
	many_files "$CK_MNT/h/step-1" 30
	save h/step-1
	ck_remount "$GEN_OPTS,keep=1" # only the lookups below are held
	stat "$CK_MNT/h/step-1" "$CK_MNT/h/step-1/d00" "$CK_MNT/h/step-1/d00/f000000" >/dev/null
	save h/step-2
	assert_entries "$CK_MNT/h" "step-2" "series after step-2's commit with keep=1"
	wait_cat_gen step-1 3 keep
	forget_ref h/step-1
	same h
	ck_umount
	assert_eq 0 "$(ck_sql 'SELECT count(*) FROM inodes WHERE nlink = 0')" "unlinked inodes left"
	assert_eq "$(tree_bytes "$CK_REF")" "$(ck_unique_bytes)" "unique chunk bytes vs the kept generation's bytes"
	ck_objcheck
}

# Generations left over from a keep=0 mount (or a deletion a stop cut short)
# go at the next start with keep=K, not only at the next commit.
test_keep_runs_over_every_series_at_start() {
	ck_mount "$GEN_OPTS"
	mkdir "$CK_MNT/s" "$CK_MNT/u"
	local s
	for s in 10 20 30; do save "s/step-$s"; done
	save u/step-1
	ck_remount "$GEN_OPTS,keep=2"
	assert_entries "$CK_MNT/s" "step-20 step-30" "series s at start with keep=2"
	assert_entries "$CK_MNT/u" "step-1" "series u at start with keep=2"
	wait_cat_gen step-10 3 keep
	assert_cat_gen step-1 1 dcp-metadata
	forget_ref s/step-10
	same s
	ck_umount
	assert_eq "$(tree_bytes "$CK_REF")" "$(ck_unique_bytes)" "unique chunk bytes vs the kept generations' bytes"
}

# openhold ARGS...: helpers/openhold.py in the background (FILE READY GO
# DONE under CK_TMP/oh.*), once its file is open.
openhold() {
	rm -f "$CK_TMP"/oh.*
	ck_bg "$PY" "$CK_HELPERS/openhold.py" "$1" "$CK_TMP/oh.ready" "$CK_TMP/oh.go" "$CK_TMP/oh.done" "${@:2}"
	OH_PID=$CK_BG_PID
	ck_wait_file "$CK_TMP/oh.ready"
}
# openhold_finish EXPECTED WHAT: lets it go on, waits for it and asserts
# what it wrote to DONE
openhold_finish() {
	touch "$CK_TMP/oh.go"
	ck_bg_wait "$OH_PID" 20 || ck_fail "openhold.py failed ($2)"
	assert_eq "$1" "$(cat "$CK_TMP/oh.done")" "$2"
}
# keep_kept_for_writer NAME: keep's pass after the newer commit kept NAME for
# its open write handle (generation.h G11); on the old code it was deleted.
keep_kept_for_writer() {
	ck_wait_log "$CK_DLOG" "$1 .*kept by keep-latest-k: a file of it is open for writing" 10 ||
		ck_fail "keep did not keep $1 for its open writer; catalog row: $(cat_gen "$1"); $(grep -h "$1" "$CK_DLOG" | tail -n 2 | cut -c1-160 | tr '\n' '|')"
}

# review 42 F5: keep=1, a file of committed step-100 open O_RDWR (nothing
# written yet) when step-200 commits. step-100 stays while the handle is
# open (the write it may make must not land in a removed file), whole; the
# close without a write runs keep again, which deletes it then, and step-200
# is untouched (version 1).
test_open_writer_keeps_its_save_until_it_closes() {
	ck_mount "$GEN_OPTS,keep=1"
	mkdir "$CK_MNT/w"
	save w/step-100
	openhold "$CK_MNT/w/step-100/__0_0.distcp"
	save w/step-200
	keep_kept_for_writer step-100
	assert_entries "$CK_MNT/w" "step-100 step-200" "series with step-100 open for writing"
	same w/step-100
	gen_expect "$CK_MNT/w/step-100" state=committed version=1
	openhold_finish "closed" "the writer's close"
	wait_cat_gen step-100 3 keep
	assert_entries "$CK_MNT/w" "step-200" "series once the writer closed"
	assert_cat_gen step-200 1 dcp-metadata
	gen_expect "$CK_MNT/w/step-200" state=committed version=1
	forget_ref w/step-100
	same w
	ck_umount
}

# The same with a write through that handle after step-200's commit: the
# write reopens step-100 as version 2 (as on -o meta=, pggen.h X12), its
# bytes readable by name after the close and committed by an explicit
# commit; step-100 is then its owner's latest commit, kept (gen.h 3).
test_write_through_a_handle_open_before_keep_lands_in_a_new_version() {
	ck_mount "$GEN_OPTS,keep=1"
	mkdir "$CK_MNT/x"
	save x/step-100
	local f=x/step-100/__0_0.distcp
	openhold "$CK_MNT/$f" --write 4096
	save x/step-200
	keep_kept_for_writer step-100
	openhold_finish "wrote 4096 closed" "the writer's pwrite, fsync and close"
	{ head -c 4096 /dev/zero | tr '\0' X; tail -c +4097 "$CK_REF/$f"; } >"$CK_TMP/expected"
	cp "$CK_TMP/expected" "$CK_REF/$f"
	gen_expect "$CK_MNT/x/step-100" state=open version=2
	cmp "$CK_REF/$f" "$CK_MNT/$f" || ck_fail "the bytes written after step-200's commit are not in step-100"
	setfattr -n user.ckptfs.commit -v 1 "$CK_MNT/x/step-100"
	gen_expect "$CK_MNT/x/step-100" state=committed version=2 --wait 3
	assert_entries "$CK_MNT/x" "step-100 step-200" "series after step-100's version 2 committed"
	same x
	ck_remount "$GEN_OPTS,keep=1"
	same x
	ck_umount
}

# The read side is unchanged: a handle open for reading keeps nothing, and
# reads the removed file's bytes until its close.
test_open_reader_does_not_keep_its_save() {
	ck_mount "$GEN_OPTS,keep=1"
	mkdir "$CK_MNT/y"
	save y/step-100
	local f=y/step-100/__0_0.distcp sum
	sum=$(sha256sum <"$CK_REF/$f" | cut -d' ' -f1)
	openhold "$CK_MNT/$f" --rdonly
	save y/step-200
	assert_entries "$CK_MNT/y" "step-200" "series with step-100 open for reading"
	wait_cat_gen step-100 3 keep
	openhold_finish "read $sum closed" "the reader's bytes of the removed file"
	forget_ref y/step-100
	same y
	ck_umount
	assert_eq 0 "$(ck_sql 'SELECT count(*) FROM inodes WHERE nlink = 0')" "unlinked inodes left"
}

ck_main "$@"
