#!/bin/bash
# t_owner — in a shared sticky series (allow_other, mode 1777), a user's
# save is committed by a tracker only when root or its owner wrote the
# tracker, and by next-gen only when a save of its own owner starts
# (fs/gen.h invariants 12-14, review 37 F2). Otherwise another user could
# commit a user's unfinished save, and keep-latest-k would then delete that
# user's older complete one.
. "$(dirname "$0")/lib.sh"

OPTS=allow_other,default_permissions,keep=1,quiet=0.5

_state() { ck_sql "SELECT state || ' ' || coalesce(nullif(rule, ''), '-') FROM generations WHERE name = '$1' ORDER BY id DESC LIMIT 1"; }
# _wait_state NAME "STATE RULE" WHAT — up to 20 s (0 open, 1 committed, 3 deleted)
_wait_state() {
	local i=0
	while [ "$(_state "$1")" != "$2" ]; do
		i=$((i + 1))
		[ $i -le 200 ] || ck_fail "$3: generation $1 is '$(_state "$1")', expected '$2'"
		sleep 0.1
	done
}
# _put PATH SIZE — random bytes into PATH on the mount, a copy in CK_REF
_put() {
	local ref="$CK_REF/${1#"$CK_MNT"/}"
	mkdir -p "$(dirname "$ref")"
	head -c "$2" /dev/urandom >"$ref"
	cp "$ref" "$1"
}
_same() { # REL: the mount's tree REL is what was written, byte for byte
	local out
	out=$(diff -r "$CK_REF/$1" "$CK_MNT/$1" 2>&1) ||
		ck_fail "$CK_MNT/$1 differs from what was written: $(echo "$out" | head -n 3 | tr '\n' '|')"
}
# _refused TRACKER — waits for the daemon's line refusing uid $NOBODY's tracker
_refused() {
	ck_wait_log "$CK_DLOG" "tracker $1 (inode [0-9]*) written by uid $NOBODY names generation $2 " 10 ||
		ck_fail "no refusal of uid $NOBODY's $1 naming $2 (generation $2: '$(_state "$2")')"
}

# The reviewer's probe: root's DCP step-100 is committed, root's step-200 has
# one of its two rank files and no .metadata; uid $NOBODY writes run/latest
# (and then Megatron's iteration file) naming step-200. It stays open,
# step-100 stays and reads back; root's own .metadata then commits step-200
# and keep=1 ends root's step-100.
test_another_users_tracker_does_not_commit_a_users_unfinished_save() {
	ck_mount "$OPTS"
	mkdir -m 1777 "$CK_MNT/run"
	local a=$CK_MNT/run/step-100 b=$CK_MNT/run/step-200
	mkdir "$a"
	_put "$a/__0_0.distcp" 200000
	_put "$a/__1_0.distcp" 200000
	echo meta >"$a/.metadata.tmp"
	mv "$a/.metadata.tmp" "$a/.metadata"
	echo meta >"$CK_REF/run/step-100/.metadata"
	_wait_state step-100 "1 dcp-metadata" "root's complete save"
	mkdir "$b"
	_put "$b/__0_0.distcp" 200000 # rank 1 not written yet
	as_nobody sh -c "echo step-200 >'$CK_MNT/run/latest'" || ck_fail "uid $NOBODY could not write run/latest"
	_refused latest step-200
	as_nobody sh -c "echo 200 >'$CK_MNT/run/latest_checkpointed_iteration.txt'" ||
		ck_fail "uid $NOBODY could not write the iteration file"
	_refused latest_checkpointed_iteration.txt step-200
	assert_eq "0 -" "$(_state step-200)" "root's unfinished step-200 after uid $NOBODY's trackers"
	assert_eq "1 dcp-metadata" "$(_state step-100)" "root's step-100 after uid $NOBODY's trackers"
	assert_eq "latest latest_checkpointed_iteration.txt step-100" "$(ls "$CK_MNT/run" | LC_ALL=C sort | tr '\n' ' ' | sed 's/ $//')" \
		"the series lists root's complete save only"
	_same run/step-100
	# root finishes its save: its own marker commits it; keep=1 ends step-100
	_put "$b/__1_0.distcp" 200000
	echo meta >"$b/.metadata.tmp"
	mv "$b/.metadata.tmp" "$b/.metadata"
	echo meta >"$CK_REF/run/step-200/.metadata"
	_wait_state step-200 "1 dcp-metadata" "root's step-200 with its .metadata"
	_wait_state step-100 "3 keep" "root's own step-100 once step-200 committed (keep=1)"
	_same run/step-200
	ck_umount
}

# DeepSpeed-like saves of uid $NOBODY: its own `latest` commits its save
# (rule tracker); root's iteration file commits anyone's; uid 4242's does not.
test_the_owners_and_roots_trackers_still_commit() {
	ck_mount "$OPTS"
	mkdir -m 1777 "$CK_MNT/run"
	local s=$CK_MNT/run/global_step100
	as_nobody sh -c "mkdir '$s' && head -c 100000 /dev/urandom >'$s/mp_rank_00_model_states.pt' &&
		echo global_step100 >'$CK_MNT/run/latest'" || ck_fail "uid $NOBODY's save failed"
	_wait_state global_step100 "1 tracker" "uid $NOBODY's save named by its own latest"
	s=$CK_MNT/run/global_step200
	as_nobody sh -c "mkdir '$s' && head -c 100000 /dev/urandom >'$s/mp_rank_00_model_states.pt'" ||
		ck_fail "uid $NOBODY's second save failed"
	setpriv --reuid=4242 --regid=4242 --clear-groups sh -c "echo 200 >'$CK_MNT/run/latest_checkpointed_iteration.txt'" ||
		ck_fail "uid 4242 could not write the iteration file"
	ck_wait_log "$CK_DLOG" "tracker latest_checkpointed_iteration.txt (inode [0-9]*) written by uid 4242 names generation global_step200 " 10 ||
		ck_fail "no refusal of uid 4242's tracker (global_step200: '$(_state global_step200)')"
	assert_eq "0 -" "$(_state global_step200)" "uid $NOBODY's step 200 after uid 4242's tracker"
	rm "$CK_MNT/run/latest_checkpointed_iteration.txt"
	echo 200 >"$CK_MNT/run/latest_checkpointed_iteration.txt"
	_wait_state global_step200 "1 tracker" "uid $NOBODY's step 200 named by root's iteration file"
	_wait_state global_step100 "3 keep" "uid $NOBODY's step 100 once its step 200 committed (keep=1)"
	ck_umount
}

# next-gen: a new save commits the older open saves of its own owner only.
test_next_gen_commits_only_the_starting_owners_saves() {
	ck_mount "$OPTS"
	mkdir -m 1777 "$CK_MNT/run"
	mkdir "$CK_MNT/run/step-100"
	_put "$CK_MNT/run/step-100/model.bin" 150000 # no marker: next-gen or abandon decide
	as_nobody mkdir "$CK_MNT/run/step-200"
	ck_wait_log "$CK_DLOG" "generation step-100 (step 100, uid 0): not committed by the next save, another user's" 10 ||
		ck_fail "no line keeping root's step-100 at uid $NOBODY's next save (step-100: '$(_state step-100)')"
	assert_eq "0 -" "$(_state step-100)" "root's step-100 after uid $NOBODY's step-200 started"
	# each later save of another user asks again, and says so at info once
	# (gen.c gen_said; review 39 F2): gen_started runs before mkdir returns
	as_nobody mkdir "$CK_MNT/run/step-250"
	assert_eq "0 -" "$(_state step-100)" "root's step-100 after uid $NOBODY's step-250 started"
	assert_eq 1 "$(grep -c "generation step-100 (step 100, uid 0): not committed by the next save" "$CK_DLOG")" \
		"info lines keeping root's step-100 from uid $NOBODY's two saves"
	mkdir "$CK_MNT/run/step-300"
	_wait_state step-100 "1 next-gen" "root's step-100 after root's step-300 started"
	_same run/step-100
	assert_eq "0 -" "$(_state step-200)" "uid $NOBODY's step-200 after root's step-300 started"
	ck_umount
}

# A tracker, even the owner's, never commits a DCP save before its metadata
# (gen.h invariant 13): the shards alone are no complete save.
test_a_tracker_waits_for_a_dcp_saves_metadata() {
	ck_mount "$OPTS"
	mkdir -p "$CK_MNT/run/step-100"
	local a=$CK_MNT/run/step-100
	_put "$a/__0_0.distcp" 200000
	echo 100 >"$CK_MNT/run/latest_checkpointed_iteration.txt"
	ck_wait_log "$CK_DLOG" "tracker latest_checkpointed_iteration.txt (inode [0-9]*) names generation step-100 (step 100, open): not committed, it has DCP shards" 10 ||
		ck_fail "no line keeping step-100 open at its tracker (step-100: '$(_state step-100)')"
	assert_eq "0 -" "$(_state step-100)" "step-100 (one shard, no .metadata) after its tracker"
	_put "$a/__1_0.distcp" 200000
	echo meta >"$a/.metadata.tmp"
	mv "$a/.metadata.tmp" "$a/.metadata"
	echo meta >"$CK_REF/run/step-100/.metadata"
	_wait_state step-100 "1 dcp-metadata" "step-100 with its .metadata"
	_same run/step-100
	ck_umount
}

ck_main "$@"
