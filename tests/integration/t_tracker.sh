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

# ---- review 43 F2, the rest: the start reads the trackers (fs/gen.h
# invariant 17)

# _held_save RUN NAME TRACKER TEXT MODE [truncated] — one process, as a
# trainer whose save is still held open at the kill: NAME's two shards
# written and closed (summed for _intact; with `truncated`, the model shard
# is half of a torch.save zip), then, once their releases are in (0.5 s),
# a handle of the model shard opened for writing through which nothing is
# written (another rank's file not yet released: the tracker's rule waits
# for it), then TRACKER written with TEXT (MODE inplace: rewritten in place,
# the kill right after its close; replace: a temporary fsynced, closed and
# os.replace'd onto it, the kill 1 s later, after its release; none: not
# written), then the daemon kill -9'd. RUN is made if missing.
_held_save() {
	"$PY" - "$@" "$CK_PID" "$CK_TMP/sums" <<'PYEOF'
import hashlib, io, os, sys, time
run, name, tracker, text, mode = sys.argv[1:6]
truncated = sys.argv[6] == "truncated" if len(sys.argv) > 8 else False
pid, sums = int(sys.argv[-2]), sys.argv[-1]
d = os.path.join(run, name)
os.makedirs(d)
with open(sums, "a") as s:
    for f in ("mp_rank_00_model_states.pt", "zero_pp_rank_0_mp_rank_00_optim_states.pt"):
        data = os.urandom(200000)
        if truncated and f.startswith("mp_"):
            import torch
            b = io.BytesIO()
            torch.save({"w": torch.zeros(100000)}, b)
            data = b.getvalue()[: len(b.getvalue()) // 2]
        with open(os.path.join(d, f), "wb") as fh:
            fh.write(data)
        s.write(f"{hashlib.sha256(data).hexdigest()}  {d}/{f}\n")
time.sleep(0.5)
idle = os.open(os.path.join(d, "mp_rank_00_model_states.pt"), os.O_WRONLY)
path = os.path.join(run, tracker)
if mode == "inplace":
    with open(path, "w") as fh:
        fh.write(text)
elif mode == "replace":
    with open(path + ".tmp", "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(path + ".tmp", path)
    time.sleep(1)
os.kill(pid, 9)
PYEOF
}

# DeepSpeed's `latest` rewritten in place, the kill right after its close,
# and Megatron's iteration file replaced, the kill after its release: each
# save is held by the crash (a handle of it was open), and the start reads
# its tracker and commits it by rule tracker, its bytes whole. Before the
# fix both stayed held ("open when the daemon stopped").
test_a_save_held_by_a_crash_commits_at_start_by_its_tracker() {
	ck_mount "$OPTS"
	_held_save "$CK_MNT/ds" global_step1 latest global_step1 inplace ||
		ck_fail "the DeepSpeed writer failed"
	ck_killed9
	ck_mount "$OPTS"
	_committed global_step1 tracker "global_step1, held by a crash, named by ds/latest"
	_held_save "$CK_MNT/mg" iter_0000002 latest_checkpointed_iteration.txt 2 replace ||
		ck_fail "the Megatron writer failed"
	ck_killed9
	ck_mount "$OPTS"
	_committed iter_0000002 tracker "iter_0000002, held by a crash, named by the iteration file"
	assert_eq "global_step1" "$(cat "$CK_MNT/ds/latest")" "ds/latest"
	assert_eq "2" "$(cat "$CK_MNT/mg/latest_checkpointed_iteration.txt")" "the iteration file"
	assert_eq "global_step1" "$(ls "$CK_MNT/ds" | grep global_step)" "ds/ lists the save"
	_intact
	ck_umount
}

# What the start does not commit: a crash-held save whose model shard is a
# truncated torch.save zip (BROKEN), one whose tracker was written before
# the save began (a stale `latest`), one a tracker of another (non-root)
# user names, one whose tracker others may write (mode 0664: its last
# writer is unknown), and a save held at an unmount for a sign (its marker
# never came, not a crash) that `latest` names. Each stays held, with a line.
test_a_tracker_at_start_commits_no_unproven_or_foreign_save() {
	ck_mount "$OPTS"
	mkdir -p "$CK_MNT/old"
	echo -n global_step1 >"$CK_MNT/old/latest"
	mkdir "$CK_MNT/old/global_step1"
	_shard "$CK_MNT/old/global_step1/mp_rank_00_model_states.pt" 200000
	ck_remount "$OPTS"
	assert_eq "4 unmount" "$(_gen global_step1)" "old/global_step1 after the unmount"
	_held_save "$CK_MNT/broken" global_step2 latest global_step2 inplace truncated ||
		ck_fail "the writer of the broken save failed"
	ck_killed9
	ck_mount "$OPTS"
	mkdir -p "$CK_MNT/stale"
	echo -n global_step3 >"$CK_MNT/stale/latest"
	sleep 0.1
	_held_save "$CK_MNT/stale" global_step3 latest global_step3 none ||
		ck_fail "the writer of the stale-tracker save failed"
	ck_killed9
	ck_mount "$OPTS"
	mkdir -m 1777 "$CK_MNT/shared"
	mkdir "$CK_MNT/gw"
	mkdir -m 0777 "$CK_MNT/ww" # review 46 F5: anyone may rename a file onto ww/latest
	chmod 0777 "$CK_MNT/ww"
	"$PY" - "$CK_MNT" "$CK_PID" "$NOBODY" <<'PYEOF' || ck_fail "the shared-series writer failed"
import os, subprocess, sys, time
mnt, pid, nobody = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
idle = []
for run, name in (("shared", "global_step4"), ("gw", "global_step5"), ("ww", "global_step6")):
    d = os.path.join(mnt, run, name)
    os.makedirs(d)
    with open(os.path.join(d, "mp_rank_00_model_states.pt"), "wb") as fh:
        fh.write(os.urandom(200000))
time.sleep(0.5)
for run, name in (("shared", "global_step4"), ("gw", "global_step5"), ("ww", "global_step6")):
    idle.append(os.open(os.path.join(mnt, run, name, "mp_rank_00_model_states.pt"), os.O_WRONLY))
subprocess.run(["setpriv", f"--reuid={nobody}", f"--regid={nobody}", "--clear-groups",
                "sh", "-c", f"printf global_step4 >{mnt}/shared/latest"], check=True)
with open(os.path.join(mnt, "gw", "latest"), "w") as fh:
    fh.write("global_step5")
os.chmod(os.path.join(mnt, "gw", "latest"), 0o664)
with open(os.path.join(mnt, "ww", "latest"), "w") as fh:
    fh.write("global_step6")
os.kill(pid, 9)
PYEOF
	ck_killed9
	ck_mount "$OPTS"
	ck_wait_log "$CK_DLOG" "tracker latest (inode [0-9]*) written by uid $NOBODY names generation global_step4 " 20 ||
		ck_fail "no line refusing uid $NOBODY's latest at start (global_step4: '$(_gen global_step4)')"
	ck_wait_log "$CK_DLOG" "names generation global_step2 (step 2), held after a crash: not committed at start, its content shows a sign" 20 ||
		ck_fail "no line keeping the broken global_step2 held ('$(_gen global_step2)')"
	ck_wait_log "$CK_DLOG" "names generation global_step3 (step 3), held after a crash: not committed at start, the tracker was last written before the save began" 20 ||
		ck_fail "no line keeping global_step3 (stale latest) held ('$(_gen global_step3)')"
	ck_wait_log "$CK_DLOG" "names generation global_step5 (step 5), held after a crash: not committed at start, the tracker is writable by others than its owner (uid 0, mode 0664)" 20 ||
		ck_fail "no line keeping global_step5 (a group-writable latest) held ('$(_gen global_step5)')"
	assert_eq "4 crash" "$(_gen global_step2)" "the broken global_step2"
	assert_eq "4 crash" "$(_gen global_step3)" "global_step3 named by a stale latest"
	assert_eq "4 crash" "$(_gen global_step4)" "root's global_step4 named by uid $NOBODY's latest"
	assert_eq "4 crash" "$(_gen global_step5)" "global_step5 named by a group-writable latest"
	ck_wait_log "$CK_DLOG" "names generation global_step6 (step 6), held after a crash: not committed at start, its series directory lets others than the tracker's owner replace it (uid 0, mode 0777)" 20 ||
		ck_fail "no line keeping global_step6 (latest in a world-writable directory) held ('$(_gen global_step6)')"
	assert_eq "4 crash" "$(_gen global_step6)" "global_step6 named by a latest others could have put there"
	assert_eq "4 unmount" "$(_gen global_step1)" "old/global_step1, held at an unmount, named by old/latest"
	_intact
	ck_umount
}

ck_main "$@"
