#!/bin/bash
# t_tracker — a tracker (DeepSpeed's `latest`, Megatron's
# latest_checkpointed_iteration.txt) written the atomic way (a temporary
# written and fsynced, then os.replace'd onto the name) commits the save it
# names like one written in place, for root or the save's owner only
# (fs/gen.h invariants 12, 13; review 39 F3); and a tracker never commits a
# DCP save whose shards sit in a subdirectory without their .metadata
# (invariant 13; review 39 F4).
. "$(dirname "$0")/lib.sh"

OPTS=allow_other,default_permissions,quiet=0.5

# _gen NAME — "STATE RULE" of generation NAME's newest version (0 open, 1
# committed; rule - while none)
_gen() { ck_sql "SELECT state || ' ' || coalesce(nullif(rule, ''), '-') FROM generations WHERE name = '$1' ORDER BY id DESC LIMIT 1"; }
# _committed NAME RULE WHAT — the daemon's line committing NAME by RULE
# (up to 20 s), and the catalog says so
_committed() {
	ck_wait_log "$CK_DLOG" "generation $1 (series inode [0-9]*, step [0-9]*) committed: $2," 20 ||
		ck_fail "$3: generation $1 not committed by rule $2 (it is '$(_gen "$1")')"
	assert_eq "1 $2" "$(_gen "$1")" "$3"
}
# _shard PATH SIZE — random bytes written to PATH on the mount; their sum is
# kept for _intact, which reads every such file back through the mount
_shard() {
	head -c "$2" /dev/urandom >"$CK_TMP/shard"
	cp "$CK_TMP/shard" "$1"
	echo "$(sha256sum <"$CK_TMP/shard" | cut -d' ' -f1)  $1" >>"$CK_TMP/sums"
}
_intact() {
	sha256sum --quiet -c "$CK_TMP/sums" >"$CK_TMP/sums.out" 2>&1 ||
		ck_fail "files read back differ from what was written: $(head -n 3 "$CK_TMP/sums.out" | tr '\n' '|')"
}
# _replace PATH TEXT [open] — the atomic writer: TEXT into PATH.tmp, flushed
# and fsynced, os.replace'd onto PATH (with `open`: before the close)
_replace() {
	"$PY" - "$1" "$2" "${3:-}" <<'EOF'
import os, sys
path, text, still_open = sys.argv[1], sys.argv[2], sys.argv[3] == "open"
f = open(path + ".tmp", "w")
f.write(text)
f.flush()
os.fsync(f.fileno())
if still_open:
    os.replace(path + ".tmp", path)
    f.close()
else:
    f.close()
    os.replace(path + ".tmp", path)
EOF
}

# DeepSpeed's `latest` and Megatron's iteration file, each written to a
# temporary and renamed onto its name, commit the save they name.
test_an_atomically_replaced_tracker_commits_its_save() {
	ck_mount "$OPTS"
	mkdir -p "$CK_MNT/run/global_step100"
	_shard "$CK_MNT/run/global_step100/mp_rank_00_model_states.pt" 300000
	_replace "$CK_MNT/run/latest" global_step100 || ck_fail "the atomic write of run/latest failed"
	_committed global_step100 tracker "the save named by a replaced latest"
	mkdir "$CK_MNT/run/iter_0000200"
	_shard "$CK_MNT/run/iter_0000200/model_optim_rng.pt" 300000
	_replace "$CK_MNT/run/latest_checkpointed_iteration.txt" 200 ||
		ck_fail "the atomic write of the iteration file failed"
	_committed iter_0000200 tracker "the save named by a replaced iteration file"
	assert_eq "global_step100" "$(cat "$CK_MNT/run/latest")" "run/latest"
	assert_eq "200" "$(cat "$CK_MNT/run/latest_checkpointed_iteration.txt")" "the iteration file"
	assert_not_exists "$CK_MNT/run/latest.tmp"
	_intact
	ck_umount
}

# Renamed onto `latest` while its handle is still open: its close commits.
test_a_tracker_renamed_before_its_close_commits_at_the_close() {
	ck_mount "$OPTS"
	mkdir -p "$CK_MNT/run/global_step100"
	_shard "$CK_MNT/run/global_step100/mp_rank_00_model_states.pt" 300000
	_replace "$CK_MNT/run/latest" global_step100 open || ck_fail "the write of run/latest failed"
	_committed global_step100 tracker "the save named by latest, closed after its rename"
	_intact
	ck_umount
}

# In a shared sticky series, another user's file renamed onto `latest`
# names root's save: refused with a line naming the renamer (invariant 12);
# root's own replace commits it.
test_another_users_replaced_tracker_does_not_commit_a_save() {
	ck_mount "$OPTS"
	mkdir -m 1777 "$CK_MNT/run"
	mkdir "$CK_MNT/run/global_step100"
	_shard "$CK_MNT/run/global_step100/mp_rank_00_model_states.pt" 300000
	as_nobody "$PY" -c '
import os, sys
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write("global_step100")
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
' "$CK_MNT/run/latest" || ck_fail "uid $NOBODY could not replace run/latest"
	ck_wait_log "$CK_DLOG" "tracker latest (inode [0-9]*) written by uid $NOBODY names generation global_step100 " 10 ||
		ck_fail "no refusal of uid $NOBODY's latest (global_step100: '$(_gen global_step100)')"
	assert_eq "0 -" "$(_gen global_step100)" "root's save after uid $NOBODY's latest"
	rm "$CK_MNT/run/latest"
	_replace "$CK_MNT/run/latest" global_step100 || ck_fail "root's atomic write of run/latest failed"
	_committed global_step100 tracker "root's save named by root's replaced latest"
	_intact
	ck_umount
}

# A DCP save one level down (HF Accelerate's pytorch_model_fsdp_0/): the
# tracker leaves it open until the .metadata there, which commits it.
test_a_tracker_waits_for_a_dcp_save_in_a_subdirectory() {
	ck_mount "$OPTS"
	local s=$CK_MNT/run/step-100
	mkdir -p "$s/pytorch_model_fsdp_0"
	_shard "$s/pytorch_model_fsdp_0/__0_0.distcp" 200000
	echo 100 >"$CK_MNT/run/latest_checkpointed_iteration.txt"
	ck_wait_log "$CK_DLOG" "tracker latest_checkpointed_iteration.txt (inode [0-9]*) names generation step-100 (step 100, open): not committed, it has DCP shards and no .metadata yet (in directory pytorch_model_fsdp_0 " 10 ||
		ck_fail "no line keeping step-100 open at its tracker (step-100: '$(_gen step-100)')"
	assert_eq "0 -" "$(_gen step-100)" "step-100 (a shard one level down, no .metadata) after its tracker"
	_shard "$s/pytorch_model_fsdp_0/__1_0.distcp" 200000
	echo meta >"$s/pytorch_model_fsdp_0/.metadata.tmp"
	mv "$s/pytorch_model_fsdp_0/.metadata.tmp" "$s/pytorch_model_fsdp_0/.metadata"
	_committed step-100 dcp-metadata "step-100 with its .metadata"
	assert_eq "meta" "$(cat "$s/pytorch_model_fsdp_0/.metadata")" "step-100's .metadata"
	_intact
	ck_umount
}


# Review 44 F4 (fs/ns.h invariant 10): a tracker's rule runs at its flush; its
# release does not run it again, so a rule that does not commit logs its line
# once per tracker write, not twice.
test_a_tracker_that_does_not_commit_logs_its_line_once_per_close() {
	ck_mount "$OPTS"
	local s=$CK_MNT/run/step-100 line n
	mkdir -p "$s/pytorch_model_fsdp_0"
	_shard "$s/pytorch_model_fsdp_0/__0_0.distcp" 200000
	line="tracker latest_checkpointed_iteration.txt (inode [0-9]*) names generation step-100 (step 100, open): not committed, it has DCP shards"
	echo 100 >"$CK_MNT/run/latest_checkpointed_iteration.txt"
	ck_wait_log "$CK_DLOG" "$line" 10 || ck_fail "no line keeping step-100 open at its tracker"
	echo 100 >"$CK_MNT/run/latest_checkpointed_iteration.txt"
	# every release has run once the daemon has exited
	ck_umount
	n=$(grep -c "$line" "$CK_DLOG") || true
	assert_eq 2 "$n" "lines for two tracker writes (one per close): $(grep "$line" "$CK_DLOG" | cut -c1-60 | tr '\n' '|')"
}

# ---- review 43 F1: a trigger file opened through a dentry READDIRPLUS made
# (fs/ns.c ns_readdirplus_add notes its name as a LOOKUP does)

# _gen_is NAME "STATE RULE" WHAT — polls the catalog up to 10 s
_gen_is() {
	local i
	for i in $(seq 100); do
		[ "$(_gen "$1")" = "$2" ] && return 0
		sleep 0.1
	done
	assert_eq "$2" "$(_gen "$1")" "$3"
}
# _listed_rewrite DIR LIST FILE=TEXT... (paths under DIR) — in one process
# (well inside the 1 s entry timeout): os.listdir(LIST), then each FILE
# rewritten in place (opened with O_TRUNC through the dentry the listing
# made, no LOOKUP)
_listed_rewrite() {
	"$PY" - "$@" <<'EOF'
import os, sys
d, lst, files = sys.argv[1], sys.argv[2], sys.argv[3:]
os.listdir(os.path.join(d, lst))
for f in files:
    name, text = f.split("=", 1)
    with open(os.path.join(d, name), "w") as fh:
        fh.write(text)
EOF
}

# After a remount, Megatron lists its run directory and rewrites
# latest_checkpointed_iteration.txt in place: the save it names commits
# (before the fix the name was never noted and the save stayed open).
test_a_tracker_rewritten_right_after_a_listing_commits_its_save() {
	ck_mount "$OPTS"
	mkdir -p "$CK_MNT/run/iter_0000001/mp_rank_00" "$CK_MNT/ds/global_step1"
	_shard "$CK_MNT/run/iter_0000001/mp_rank_00/model_optim_rng.pt" 200000
	echo 1 >"$CK_MNT/run/latest_checkpointed_iteration.txt"
	_committed iter_0000001 tracker "the first Megatron save"
	_shard "$CK_MNT/ds/global_step1/mp_rank_00_model_states.pt" 200000
	echo -n global_step1 >"$CK_MNT/ds/latest"
	_committed global_step1 tracker "the first DeepSpeed save"
	ck_remount "$OPTS"
	mkdir -p "$CK_MNT/run/iter_0000002/mp_rank_00" "$CK_MNT/ds/global_step2"
	_shard "$CK_MNT/run/iter_0000002/mp_rank_00/model_optim_rng.pt" 200000
	_shard "$CK_MNT/ds/global_step2/mp_rank_00_model_states.pt" 200000
	_listed_rewrite "$CK_MNT" run run/latest_checkpointed_iteration.txt=2 ||
		ck_fail "the Megatron tracker rewrite failed"
	_listed_rewrite "$CK_MNT" ds ds/latest=global_step2 || ck_fail "the DeepSpeed tracker rewrite failed"
	_gen_is iter_0000002 "1 tracker" "a Megatron save named by a tracker rewritten after a listing"
	_gen_is global_step2 "1 tracker" "a DeepSpeed save named by a latest rewritten after a listing"
	_intact
	ck_umount
}

# A save rewritten after a remount whose completion marker is rewritten in
# place right after a listing of the save commits its new version.
test_a_marker_rewritten_right_after_a_listing_commits_the_rewrite() {
	ck_mount "$OPTS"
	mkdir -p "$CK_MNT/ex/step-700"
	_shard "$CK_MNT/ex/step-700/model.pt" 200000
	printf 'done\n' >"$CK_MNT/ex/step-700/.ckptfs-commit"
	_gen_is step-700 "1 marker" "the first version"
	ck_remount "$OPTS"
	: >"$CK_TMP/sums"
	_shard "$CK_MNT/ex/step-700/model.pt" 300000
	_listed_rewrite "$CK_MNT/ex/step-700" . .ckptfs-commit=again || ck_fail "the marker rewrite failed"
	_gen_is step-700 "1 marker" "the rewrite committed by its marker rewritten after a listing"
	_intact
	ck_umount
}

# ---- review 43 F3: a completion signal's close implies the files before it
# (fs/ns.h invariant 9: the deferred batch is committed at its flush)

# Three times: a save of small files (deferred, catalog_defer.c) and its
# .ckptfs-commit marker; the writer kill -9s the daemon as soon as the
# marker's close returns. After the remount every file closed before the
# marker is in the save, with its bytes (before the fix the last batch,
# marker included, was lost).
test_a_kill9_right_after_the_marker_close_keeps_every_file_before_it() {
	local i f
	for i in 1 2 3; do
		ck_mount "$OPTS"
		"$PY" - "$CK_MNT/ex/step-$i" "$CK_PID" "$CK_TMP/sums" <<'EOF' || ck_fail "run $i: the writer failed"
import hashlib, os, sys
d, pid, sums = sys.argv[1], int(sys.argv[2]), sys.argv[3]
os.makedirs(d)
with open(sums, "a") as s:
    for name in ("model.pt", "optim.pt", "rng_state.pth", "config.json"):
        data = os.urandom(3000)
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
        s.write(f"{hashlib.sha256(data).hexdigest()}  {d}/{name}\n")
open(os.path.join(d, ".ckptfs-commit"), "w").close()
os.kill(pid, 9)
EOF
		ck_killed9
		ck_mount "$OPTS"
		for f in model.pt optim.pt rng_state.pth config.json .ckptfs-commit; do
			[ -e "$CK_MNT/ex/step-$i/$f" ] ||
				ck_fail "run $i: step-$i/$f, closed before the kill, is gone after the remount" \
					"($(ls -A "$CK_MNT/ex/step-$i" 2>&1 | tr '\n' ' '))"
		done
		_intact
		ck_umount
	done
}

# ---- review 43 F2: a tracker's rule runs before its close returns
# (fs/ns.h invariant 10)

# Three times: DeepSpeed's global_stepN and `latest` naming it; the writer
# kill -9s the daemon as soon as the tracker's close returns. After the
# remount the save is committed by its tracker, not held (before the fix the
# rule ran after the RELEASE reply, which close(2) does not wait for).
test_a_kill9_right_after_the_tracker_close_keeps_its_save_committed() {
	local i
	for i in 1 2 3; do
		ck_mount "$OPTS"
		"$PY" - "$CK_MNT/ds" "$i" "$CK_PID" "$CK_TMP/sums" <<'EOF' || ck_fail "run $i: the writer failed"
import hashlib, os, sys
run, i, pid, sums = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
d = f"{run}/global_step{i}"
os.makedirs(d)
with open(sums, "a") as s:
    for name in ("mp_rank_00_model_states.pt", "zero_pp_rank_0_mp_rank_00_optim_states.pt"):
        data = os.urandom(200000)
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
        s.write(f"{hashlib.sha256(data).hexdigest()}  {d}/{name}\n")
with open(f"{run}/latest", "w") as f:
    f.write(f"global_step{i}")
os.kill(pid, 9)
EOF
		ck_killed9
		ck_mount "$OPTS"
		assert_eq "1 tracker" "$(_gen "global_step$i")" \
			"run $i: global_step$i, named by latest before the kill -9"
		assert_eq "global_step$i" "$(cat "$CK_MNT/ds/latest")" "run $i: latest"
		_intact
		ck_umount
	done
}

ck_main "$@"
