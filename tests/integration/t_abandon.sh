#!/bin/bash
# t_abandon — abandoned generations (-o abandon=S): an OPEN generation with no
# open write handle, no activity for S seconds and none of the processes that
# wrote to it alive is held (rule abandoned: not listed, kept byte for byte,
# `ckptfs-admin list --all` names the reason, `commit` promotes it, `rm`
# removes it). Not held: a slow save whose writer process is alive
# between files, a generation with an open write handle however long, a
# process whose writing thread has exited. A markerless generation left by a
# dead writer is committed instead if the next generation of its series starts
# first (next-gen); an abandoned rewrite of a committed generation gives back
# the committed version. And the other half of the open-handle rule (gen.h
# invariant 2): no commit while a write handle in the generation is open, for
# handles opened before a rewrite reopened it or before a rename made it one.
. "$(dirname "$0")/lib.sh"

_gen_field() { # PATH FIELD ("gone" if PATH no longer exists)
	local v i
	# a path walk that resolved the old version's root just before a
	# rollback or commit swapped the versions reads that root, which has no
	# generation any more: looked at again, the name gives the new one
	for i in 1 2 3; do
		v=$(getfattr --only-values -n user.ckptfs.generation "$1" 2>/dev/null) && break
		[ "$(fsop lstat "$1")" = ENOENT ] && { echo gone; return 0; }
		[ "$i" -lt 3 ] || ck_fail "getfattr user.ckptfs.generation $1 failed"
		sleep 0.05
	done
	echo "$v" | tr ' ' '\n' | sed -n "s/^$2=//p"
}
_gen_row() { # NAME: "state|rule" of its newest catalog row
	ck_sql "SELECT state || '|' || coalesce(rule, '') FROM generations WHERE name = '$1' ORDER BY id DESC LIMIT 1"
}
_listing() { ls "$1" | sort -V | tr '\n' ' ' | sed 's/ $//'; }
_now() { date +%s.%N; }
_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }'; }

# _wait_ended NAME TIMEOUT — waits until NAME's newest row is no longer OPEN;
# sets _ROW ("state|rule").
_wait_ended() {
	local i=0
	while :; do
		_ROW=$(_gen_row "$1")
		[ "${_ROW%%|*}" = 0 ] || return 0
		i=$((i + 1))
		[ $i -le $(($2 * 20)) ] || ck_fail "$1 still OPEN after ${2}s"
		sleep 0.05
	done
}

test_markerless_generation_of_a_dead_writer_is_held_as_abandoned() {
	ck_mount abandon=1,quiet=0.5
	ck_rand "$CK_REF/model.pt" $((3 * MiB + 5))
	mkdir "$CK_MNT/run"
	mkdir "$CK_MNT/run/step-5"
	cp "$CK_REF/model.pt" "$CK_MNT/run/step-5/model.pt"
	local t0
	t0=$(_now)
	# mkdir and cp have exited: no writer is alive, no handle is open.
	assert_eq open "$(_gen_field "$CK_MNT/run/step-5" state)" "state of step-5 right after its writer exited"
	assert_eq "" "$(_listing "$CK_MNT/run")" "series listing with step-5 open"
	assert_file_eq "$CK_REF/model.pt" "$CK_MNT/run/step-5/model.pt"
	_wait_ended step-5 10
	local took
	took=$(_since "$t0")
	ck_log "step-5 ended ${took}s after its writer exited: $_ROW"
	assert_eq "4|abandoned" "$_ROW" "catalog state|rule of step-5"
	awk -v t="$took" 'BEGIN { exit !(t >= 0.8) }' || ck_fail "step-5 was held ${took}s after the last activity, before abandon=1 elapsed"
	awk -v t="$took" 'BEGIN { exit !(t <= 4) }' || ck_fail "step-5 was held only ${took}s after the last activity with abandon=1"
	# Held: not listed, but kept byte for byte and reachable by name.
	assert_eq "" "$(_listing "$CK_MNT/run")" "series listing with step-5 held"
	assert_eq held "$(_gen_field "$CK_MNT/run/step-5" state)" "state of step-5"
	assert_file_eq "$CK_REF/model.pt" "$CK_MNT/run/step-5/model.pt"
	"$CKPTFS_ADMIN" list "$CK_MNT" >"$CK_TMP/list" 2>&1 || ck_fail "list failed"
	grep -q "step-5" "$CK_TMP/list" && ck_fail "list (without --all) shows the held step-5: $(cat "$CK_TMP/list")"
	"$CKPTFS_ADMIN" list --all "$CK_MNT" >"$CK_TMP/list" 2>&1 || ck_fail "list --all failed"
	grep "step-5" "$CK_TMP/list" | grep -q "held.*abandoned after 1 s with no writer" ||
		ck_fail "list --all does not show step-5 held with its reason: $(cat "$CK_TMP/list")"
	"$CKPTFS_ADMIN" --json list --all "$CK_MNT" >"$CK_TMP/list.json" || ck_fail "list --json failed"
	"$PY" -c 'import json,sys; g=[x for x in json.load(open(sys.argv[1])) if x["name"]=="step-5"][0]; assert g["state"]=="held" and "abandoned" in g["held_reason"], g' "$CK_TMP/list.json" ||
		ck_fail "list --json --all: $(cat "$CK_TMP/list.json")"
	mkdir "$CK_MNT/run/other" # the series still works
	ck_umount
	ck_mount abandon=1,quiet=0.5
	assert_eq held "$(_gen_field "$CK_MNT/run/step-5" state)" "state of step-5 after a remount"
	assert_file_eq "$CK_REF/model.pt" "$CK_MNT/run/step-5/model.pt"
	# An explicit decision promotes it.
	"$CKPTFS_ADMIN" commit "$CK_MNT" run/step-5 >"$CK_TMP/commit" 2>&1 || ck_fail "commit of the held step-5: $(cat "$CK_TMP/commit")"
	assert_eq committed "$(_gen_field "$CK_MNT/run/step-5" state)" "state of step-5 after commit"
	assert_eq "other step-5" "$(_listing "$CK_MNT/run")" "series listing after the commit"
	assert_file_eq "$CK_REF/model.pt" "$CK_MNT/run/step-5/model.pt"
	ck_umount
	"$CKPTFS_ADMIN" check --cache "$CK_CACHE" >"$CK_TMP/chk" 2>&1 || ck_fail "ckptfs-admin check: $(head -n 5 "$CK_TMP/chk" | tr '\n' '|')"
	ck_objcheck
}

test_held_generation_is_removed_by_admin_rm_and_reclaimed_by_keep() {
	ck_mount abandon=1,quiet=0.5,keep=2
	ck_rand "$CK_REF/a.pt" $((MiB + 3))
	ck_rand "$CK_REF/b.pt" $((MiB + 7))
	mkdir -p "$CK_MNT/run/step-1" "$CK_MNT/run/step-2"
	cp "$CK_REF/a.pt" "$CK_MNT/run/step-1/model.pt"
	_wait_ended step-1 10
	_wait_ended step-2 10 # empty: held too
	assert_eq "4|abandoned" "$(_gen_row step-1)" "step-1 held"
	assert_eq "4|abandoned" "$(_gen_row step-2)" "step-2 held"
	# rm decides for step-2.
	"$CKPTFS_ADMIN" rm "$CK_MNT" run/step-2 >"$CK_TMP/rm" 2>&1 || ck_fail "rm of the held step-2: $(cat "$CK_TMP/rm")"
	assert_eq "3|admin" "$(_gen_row step-2)" "step-2 after rm"
	assert_not_exists "$CK_MNT/run/step-2"
	# keep=2: one newer committed save is not enough to reclaim step-1...
	local s
	for s in 3 4; do
		mkdir "$CK_MNT/run/step-$s"
		cp "$CK_REF/b.pt" "$CK_MNT/run/step-$s/model.pt"
		touch "$CK_MNT/run/step-$s/.ckptfs-commit"
		[ $s = 3 ] && { sleep 1; assert_eq "4|abandoned" "$(_gen_row step-1)" "step-1 with one newer committed save (keep=2)"; }
	done
	# ... two are: it goes, as keep-latest-k would take a committed one.
	local i=0
	while [ "$(_gen_row step-1)" != "3|keep-held" ]; do
		i=$((i + 1))
		[ $i -le 100 ] || ck_fail "step-1 still $(_gen_row step-1) with 2 newer committed saves (keep=2)"
		sleep 0.05
	done
	assert_eq "step-3 step-4" "$(_listing "$CK_MNT/run")" "series listing"
	assert_file_eq "$CK_REF/b.pt" "$CK_MNT/run/step-4/model.pt"
	ck_umount
	ck_objcheck
}

test_markerless_generation_of_a_dead_writer_commits_when_the_next_one_starts() {
	ck_mount abandon=3,quiet=0.5
	ck_rand "$CK_REF/model.pt" $((MiB + 5))
	mkdir -p "$CK_MNT/run/step-5"
	cp "$CK_REF/model.pt" "$CK_MNT/run/step-5/model.pt"
	assert_eq open "$(_gen_field "$CK_MNT/run/step-5" state)" "state of step-5 before step-6 starts"
	mkdir "$CK_MNT/run/step-6"
	assert_eq committed "$(_gen_field "$CK_MNT/run/step-5" state)" "state of step-5 once step-6 started"
	assert_eq next-gen "$(_gen_field "$CK_MNT/run/step-5" rule)" "commit rule of step-5"
	assert_eq "step-5" "$(_listing "$CK_MNT/run")" "series listing (step-6 is open)"
	# step-6 stays empty, its mkdir is long gone: abandoned after 3 s.
	_wait_ended step-6 10
	assert_eq "4|abandoned" "$_ROW" "catalog state|rule of the empty step-6 (held)"
	assert_eq committed "$(_gen_field "$CK_MNT/run/step-5" state)" "state of step-5 after step-6 was abandoned"
	assert_file_eq "$CK_REF/model.pt" "$CK_MNT/run/step-5/model.pt"
	ck_umount
}

test_slow_save_with_a_live_writer_process_is_not_aborted() {
	ck_mount abandon=1,quiet=0.5
	mkdir "$CK_MNT/run"
	# A DCP-like save that pauses 3 s between files with no handle open.
	cat >"$CK_TMP/slow.py" <<'EOF'
import os, sys, time
d, tmp = sys.argv[1], sys.argv[2]
os.makedirs(d, exist_ok=True)
for i, name in enumerate(["__0_0.distcp", "__1_0.distcp"]):
    with open(os.path.join(d, name), "wb") as f:
        f.write(os.urandom((i + 1) << 20))
        f.flush()
        os.fsync(f.fileno())
    open(os.path.join(tmp, "slow.%d" % i), "w").close()
    time.sleep(3)
with open(os.path.join(d, ".metadata.tmp"), "wb") as f:
    f.write(b"metadata")
    f.flush()
    os.fsync(f.fileno())
open(os.path.join(tmp, "slow.renaming"), "w").close()  # from here on, a commit is due
os.rename(os.path.join(d, ".metadata.tmp"), os.path.join(d, ".metadata"))
open(os.path.join(tmp, "slow.done"), "w").close()
EOF
	ck_bg "$PY" "$CK_TMP/slow.py" "$CK_MNT/run/step-7" "$CK_TMP"
	local w=$CK_BG_PID st n=0
	ck_wait_file "$CK_TMP/slow.0" 30
	while _ck_pid_alive "$w" && [ ! -e "$CK_TMP/slow.renaming" ]; do
		st=$(_gen_field "$CK_MNT/run/step-7" state)
		# a state read before the marker existed must be open; once the
		# writer is about to rename .metadata, committed is what is due
		[ "$st" = open ] || [ -e "$CK_TMP/slow.renaming" ] || ck_fail "step-7 is $st (rule $(_gen_field "$CK_MNT/run/step-7" rule)) during a slow save whose writer is alive (abandon=1)"
		n=$((n + 1))
		sleep 0.25
	done
	ck_bg_wait "$w" 30 || ck_fail "the slow writer failed"
	ck_log "step-7 stayed open through $n polls over the 6 s of pauses"
	assert_eq committed "$(_gen_field "$CK_MNT/run/step-7" state)" "state of step-7 after its .metadata rename"
	assert_eq dcp-metadata "$(_gen_field "$CK_MNT/run/step-7" rule)" "commit rule of step-7"
	assert_eq 3 "$(_gen_field "$CK_MNT/run/step-7" files)" "files of step-7"
	assert_eq "step-7" "$(_listing "$CK_MNT/run")" "series listing"
	sleep 2 # committed generations are never abandoned
	assert_eq committed "$(_gen_field "$CK_MNT/run/step-7" state)" "state of step-7 2 s after the commit"
	ck_umount
}

test_generation_with_an_open_write_handle_is_never_aborted() {
	ck_mount abandon=1,quiet=0.5
	mkdir "$CK_MNT/run"
	# The writer opens a file, writes, forks a child that inherits the open
	# handle and never writes, and exits: the only process that wrote is dead,
	# but a write handle stays open.
	cat >"$CK_TMP/hold.py" <<'EOF'
import os, sys, time
d, ready = sys.argv[1], sys.argv[2]
os.makedirs(d)
fd = os.open(os.path.join(d, "model.pt"), os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, os.urandom(200000))
if os.fork() == 0:
    open(ready, "w").close()
    while True:
        time.sleep(1)
os._exit(0)
EOF
	"$PY" "$CK_TMP/hold.py" "$CK_MNT/run/step-8" "$CK_TMP/held"
	ck_wait_file "$CK_TMP/held" 10
	local holder
	holder=$(pgrep -f "^$PY $CK_TMP/hold.py") || ck_fail "the handle-holding child is not running"
	_CK_BG+=("$holder") # killed below, or at the end of the case
	_ck_state "bg $holder"
	local i
	for i in $(seq 1 24); do
		sleep 0.25
		assert_eq open "$(_gen_field "$CK_MNT/run/step-8" state)" "state of step-8 after $((i / 4)) s with a write handle open (abandon=1)"
	done
	ck_log "step-8 stayed open 6 s with its writer dead and a write handle open"
	local t0
	kill -9 "$holder"
	t0=$(_now)
	_wait_ended step-8 10
	ck_log "step-8 ended $(_since "$t0")s after the handle was closed: $_ROW"
	assert_eq "4|abandoned" "$_ROW" "catalog state|rule of step-8 once its handle closed (held)"
	assert_eq "" "$(_listing "$CK_MNT/run")" "series listing with step-8 held"
	assert_eq 200000 "$(stat -c %s "$CK_MNT/run/step-8/model.pt")" "size of the held step-8's file"
	ck_umount
}

test_writer_process_alive_after_its_writing_thread_exited_is_not_abandoned() {
	ck_mount abandon=1,quiet=0.5
	mkdir "$CK_MNT/run"
	# As with DCP's async_save in a thread, or writer threads: the thread that
	# did every write has exited; the process that ran it lives on.
	cat >"$CK_TMP/thread.py" <<'EOF'
import os, sys, threading, time
d, ready = sys.argv[1], sys.argv[2]
def save():
    os.makedirs(d)
    with open(os.path.join(d, "__0_0.distcp"), "wb") as f:
        f.write(os.urandom(300000))
t = threading.Thread(target=save)
t.start()
t.join()
open(ready, "w").close()
while True:
    time.sleep(1)
EOF
	ck_bg "$PY" "$CK_TMP/thread.py" "$CK_MNT/run/step-9" "$CK_TMP/saved"
	local w=$CK_BG_PID i
	ck_wait_file "$CK_TMP/saved" 10
	for i in $(seq 1 16); do
		sleep 0.25
		_ck_pid_alive "$w" || ck_fail "the writer process died"
		assert_eq open "$(_gen_field "$CK_MNT/run/step-9" state)" "state of step-9 after $((i / 4)) s: the process that wrote it (pid $w) is alive, only its writing thread exited (abandon=1; catalog: $(_gen_row step-9))"
	done
	kill -9 "$w"
	_wait_ended step-9 10
	assert_eq "4|abandoned" "$_ROW" "catalog state|rule of step-9 once the process died (held)"
	ck_umount
}

test_abandoned_rewrite_of_a_committed_generation_restores_it() {
	ck_mount abandon=1,quiet=0.5
	ck_rand "$CK_REF/v1" $((2 * MiB + 7))
	ck_rand "$CK_REF/v2" $((MiB + 3))
	mkdir -p "$CK_MNT/run/step-3"
	cp "$CK_REF/v1" "$CK_MNT/run/step-3/__0_0.distcp"
	echo meta >"$CK_MNT/run/step-3/.metadata.tmp"
	mv "$CK_MNT/run/step-3/.metadata.tmp" "$CK_MNT/run/step-3/.metadata"
	assert_eq committed "$(_gen_field "$CK_MNT/run/step-3" state)" "state of step-3 after its .metadata rename"
	assert_eq 1 "$(_gen_field "$CK_MNT/run/step-3" version)" "version of step-3"
	# A rewrite by a process that then dies without renaming .metadata again.
	cp "$CK_REF/v2" "$CK_MNT/run/step-3/__0_0.distcp"
	local t0
	t0=$(_now)
	assert_eq open "$(_gen_field "$CK_MNT/run/step-3" state)" "state of step-3 during the rewrite"
	assert_eq 2 "$(_gen_field "$CK_MNT/run/step-3" version)" "version of step-3 during the rewrite"
	local i=0 st
	while :; do
		st=$(_gen_field "$CK_MNT/run/step-3" state)
		[ "$st" = open ] || break
		i=$((i + 1))
		[ $i -le 200 ] || ck_fail "the rewrite of step-3 still open 10 s after its writer exited (abandon=1)"
		sleep 0.05
	done
	ck_log "the rewrite ended $(_since "$t0")s after its writer exited: $(getfattr --only-values -n user.ckptfs.generation "$CK_MNT/run/step-3" 2>/dev/null)"
	assert_eq committed "$st" "state of step-3 after its abandoned rewrite"
	assert_eq 1 "$(_gen_field "$CK_MNT/run/step-3" version)" "version of step-3 after its abandoned rewrite"
	assert_file_eq "$CK_REF/v1" "$CK_MNT/run/step-3/__0_0.distcp"
	assert_eq "step-3" "$(_listing "$CK_MNT/run")" "series listing"
	ck_remount
	assert_file_eq "$CK_REF/v1" "$CK_MNT/run/step-3/__0_0.distcp"
	ck_umount
	ck_objcheck
}

# A committed generation written through a handle opened BEFORE the first
# write (O_WRONLY without O_TRUNC, as an in-place pwrite would): the first
# write reopens it as version 2, and that handle is a write handle in it like
# any other: never aborted while it is open (its opener exited, a child holds
# it), and no commit rule completes while it is open (invariant 2 of gen.h).
_commit_step3() { # commits MNT/run/step-3 holding REF/v1, by .metadata rename
	ck_rand "$CK_REF/v1" $((2 * MiB + 7))
	mkdir -p "$CK_MNT/run/step-3"
	cp "$CK_REF/v1" "$CK_MNT/run/step-3/__0_0.distcp"
	echo meta >"$CK_MNT/run/step-3/.metadata.tmp"
	mv "$CK_MNT/run/step-3/.metadata.tmp" "$CK_MNT/run/step-3/.metadata"
	assert_eq committed "$(_gen_field "$CK_MNT/run/step-3" state)" "state of step-3 after its .metadata rename"
	cat >"$CK_TMP/inplace.py" <<'EOF'
import os, sys, time
path, ready = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_WRONLY)  # no O_TRUNC: the generation is still committed here
os.pwrite(fd, b"x" * 65536, 4096)  # the first write reopens it
if os.fork() == 0:
    open(ready, "w").close()
    while not os.path.exists(ready + ".more"):
        time.sleep(0.05)
    os.pwrite(fd, b"y" * 65536, 1 << 20)
    os.fsync(fd)
    open(ready + ".wrote", "w").close()
    while True:
        time.sleep(1)
os._exit(0)
EOF
	"$PY" "$CK_TMP/inplace.py" "$CK_MNT/run/step-3/__0_0.distcp" "$CK_TMP/inplace"
	ck_wait_file "$CK_TMP/inplace" 10
	_HOLDER=$(pgrep -f "^$PY $CK_TMP/inplace.py") || ck_fail "the handle-holding child is not running"
	_CK_BG+=("$_HOLDER")
	_ck_state "bg $_HOLDER"
}

test_rewrite_through_a_handle_opened_before_it_is_never_aborted_while_open() {
	ck_mount abandon=1,quiet=0.5
	_commit_step3
	assert_eq open "$(_gen_field "$CK_MNT/run/step-3" state)" "state of step-3 after an in-place write"
	assert_eq 2 "$(_gen_field "$CK_MNT/run/step-3" version)" "version of step-3 after an in-place write"
	local i
	for i in $(seq 1 16); do
		sleep 0.25
		assert_eq "open 2" "$(_gen_field "$CK_MNT/run/step-3" state) $(_gen_field "$CK_MNT/run/step-3" version)" \
			"state and version of step-3 after $((i / 4)) s with the rewriting write handle still open (abandon=1; catalog: $(_gen_row step-3))"
	done
	kill -9 "$_HOLDER"
	_wait_ended step-3 10
	assert_eq committed "$(_gen_field "$CK_MNT/run/step-3" state)" "state of step-3 once the handle closed and its rewrite was abandoned"
	assert_file_eq "$CK_REF/v1" "$CK_MNT/run/step-3/__0_0.distcp"
	ck_umount
}

test_rewrite_through_a_handle_opened_before_it_does_not_commit_while_open() {
	ck_mount abandon=0
	_commit_step3
	# The .metadata rename (DCP's commit signal) while the handle is open.
	echo meta2 >"$CK_MNT/run/step-3/.metadata.tmp"
	mv "$CK_MNT/run/step-3/.metadata.tmp" "$CK_MNT/run/step-3/.metadata"
	sleep 0.5
	assert_eq open "$(_gen_field "$CK_MNT/run/step-3" state)" "state of step-3 after the .metadata rename while a write handle in it is open (invariant 2; catalog: $(_gen_row step-3) v$(_gen_field "$CK_MNT/run/step-3" version))"
	touch "$CK_TMP/inplace.more"
	ck_wait_file "$CK_TMP/inplace.wrote" 10
	kill -9 "$_HOLDER"
	local i=0
	until [ "$(_gen_field "$CK_MNT/run/step-3" state)" = committed ]; do
		i=$((i + 1))
		[ $i -le 100 ] || ck_fail "step-3 not committed 5 s after its last write handle closed"
		sleep 0.05
	done
	assert_eq 2 "$(_gen_field "$CK_MNT/run/step-3" version)" "version of step-3 once committed"
	ck_umount
}

# A file opened for writing before its directory became a generation (a temp
# dir renamed to step-N while a writer still has a file in it open): that
# handle is a write handle in the generation from the rename on, so the rename
# rule waits for it (invariant 2) and the committed version holds every byte
# written through it.
test_temp_dir_renamed_to_a_generation_with_a_write_handle_open_commits_after_close() {
	ck_mount abandon=0
	mkdir -p "$CK_MNT/run/tmp.save"
	cat >"$CK_TMP/late.py" <<'EOF'
import os, sys, time
run, ready, go = sys.argv[1], sys.argv[2], sys.argv[3]
fd = os.open(os.path.join(run, "tmp.save", "model.pt"), os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, b"x" * 100000)
os.rename(os.path.join(run, "tmp.save"), os.path.join(run, "step-5"))
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.05)
os.write(fd, b"y" * 100000)
os.fsync(fd)
os.close(fd)
EOF
	ck_bg "$PY" "$CK_TMP/late.py" "$CK_MNT/run" "$CK_TMP/renamed" "$CK_TMP/go"
	local w=$CK_BG_PID
	ck_wait_file "$CK_TMP/renamed" 10
	sleep 0.5
	assert_eq open "$(_gen_field "$CK_MNT/run/step-5" state)" "state of step-5 renamed in while a write handle in it is open (invariant 2; xattr: $(getfattr --only-values -n user.ckptfs.generation "$CK_MNT/run/step-5" 2>/dev/null))"
	touch "$CK_TMP/go"
	ck_bg_wait "$w" 30 || ck_fail "the late writer failed"
	local i=0
	until [ "$(_gen_field "$CK_MNT/run/step-5" state)" = committed ]; do
		i=$((i + 1))
		[ $i -le 100 ] || ck_fail "step-5 not committed 5 s after its write handle closed"
		sleep 0.05
	done
	assert_eq "rename 1 200000" "$(_gen_field "$CK_MNT/run/step-5" rule) $(_gen_field "$CK_MNT/run/step-5" version) $(_gen_field "$CK_MNT/run/step-5" bytes)" "rule, version and bytes of step-5 once committed"
	ck_umount
}

ck_main "$@"
