#!/bin/bash
# t_torture — the crash torture loop over checkpoint generations: a DCP-style
# trainer (helpers/torture_writer.py) saves, rewrites and deletes step-N
# generations while the daemon is killed with -9 at a random moment, cycle
# after cycle, over the same BACKING and cache (-o keep=3, so keep-latest-k runs
# too). After each kill and remount (helpers/torture_check.py): no generation is
# OPEN, the listing shows exactly the committed ones, every committed one is
# byte-identical to what the writer logged for its version (a rewrite cut by the
# kill shows the previous version), nothing the writer saw committed is lost;
# then ckptfs-admin check, a clean unmount, and objcheck.py: no leaked or
# missing chunk object on BACKING. A second case aims the kill at a reader
# listing the series while keep deletions are being invalidated in the kernel.
# A daemon that cannot finish dying after kill -9 fails the case with the
# kernel stacks of its threads (and its FUSE connection is aborted).
#
#   CKPTFS_TORTURE_CYCLES=N   cycles (default 50; `make torture` runs 500); the
#                             listing case runs N/5 (default 40)
#   CKPTFS_TEST_QUICK=1       15 cycles each
#   CKPTFS_TORTURE_SEED=S     replay a run (the seed is printed)
. "$(dirname "$0")/lib.sh"

TORTURE_KEEP=3
if [ -n "${CKPTFS_TORTURE_CYCLES:-}" ]; then
	TORTURE_CYCLES=$CKPTFS_TORTURE_CYCLES
elif [ "$CK_QUICK" = 1 ]; then
	TORTURE_CYCLES=15
else
	TORTURE_CYCLES=50
fi

_torture_objcheck() {
	local out rc=0
	out=$("$PY" "$CK_HELPERS/objcheck.py" "$CK_BACKING" "$CK_CACHE/catalog.db" 2>&1) || rc=$?
	[ $rc = 0 ] || ck_fail "cycle $1: BACKING objects vs catalog after a clean unmount: $(echo "$out" | head -n 8 | tr '\n' '|')"
	_TORTURE_OBJ=$(echo "$out" | tail -n 1 | sed -E 's/^objcheck: ([0-9]+) chunks.*/\1 chunks/')
}

# ck_kill9 WRITER, except that a daemon which cannot finish dying is diagnosed
# and failed within seconds instead of hanging the case: after SIGKILL a
# daemon thread stuck in the kernel keeps the process (and so /dev/fuse, the
# mount and the cache's lock) alive, and `wait` would block for ever. The
# stuck FUSE connection is then aborted through fusectl to free the mount.
_torture_kill9() { # HELPER_PID...
	local pid=$CK_PID i=0 p
	kill -9 "$pid"
	# Dead = no thread left but a zombie leader (then wait returns at once).
	until [ "$(ls "/proc/$pid/task" 2>/dev/null | wc -l)" -le 1 ] && ! _ck_pid_alive "$pid"; do
		i=$((i + 1))
		[ $i -le 200 ] || _torture_stuck_daemon "$pid" "$@"
		sleep 0.05
	done
	wait "$pid" 2>/dev/null || true
	_ck_state "exited $pid"
	CK_PID=
	for p in "$@"; do kill -9 "$p" 2>/dev/null || true; done
	for p in "$@"; do wait "$p" 2>/dev/null || true; done
	fusermount3 -u "$CK_MNT" 2>/dev/null || umount -l "$CK_MNT" 2>/dev/null || true
	ck_is_mounted "$CK_MNT" && ck_fail "could not clear the mount $CK_MNT after kill -9"
	_ck_check_sanitizer "$CK_DERR"
	return 0
}

_torture_stack() { # /proc/PID/task/TID: "TID state: frame <- frame <- ..."
	printf '%s %s: %s' "$(basename "$1")" "$(awk '{ print $3 }' "$1/stat" 2>/dev/null)" \
		"$(sed -E 's/^\[<[0-9a-f]+>\] //; s/\+0x.*//' "$1/stack" 2>/dev/null | head -n 5 | paste -sd '<' | sed 's/</ <- /g')"
}

_torture_stuck_daemon() { # PID HELPER_PID...
	local pid=$1 t why dev i=0 w nr a1 rest
	shift
	set +eE # diagnosing; the case fails at the end anyway
	trap - ERR
	why="daemon $pid did not finish dying 10 s after kill -9 (threads:"
	for t in /proc/"$pid"/task/*; do why+=" [$(_torture_stack "$t")]"; done
	why+=")"
	for w in "$@"; do
		why+="; helper $w:"
		for t in /proc/"$w"/task/*; do why+=" [$(_torture_stack "$t")]"; done
		if read -r nr a1 rest <"/proc/$w/syscall" 2>/dev/null && [[ "$a1" == 0x* ]] && [ $((a1)) -lt 65536 ]; then
			why+=" in syscall $nr on fd $((a1)) = $(readlink "/proc/$w/fd/$((a1))" 2>/dev/null || echo '?')"
		fi
	done
	ck_log "$why"
	# Free the mount: abort the FUSE connection (fusectl, by the mount's minor device).
	dev=$(awk -v m="$CK_MNT" '$5 == m { print $3 }' /proc/self/mountinfo | head -n 1)
	mountpoint -q /sys/fs/fuse/connections || mount -t fusectl fusectl /sys/fs/fuse/connections 2>/dev/null || true
	if [ -n "$dev" ] && [ -w "/sys/fs/fuse/connections/${dev#*:}/abort" ]; then
		echo 1 >"/sys/fs/fuse/connections/${dev#*:}/abort"
		ck_log "aborted FUSE connection ${dev#*:} of $CK_MNT"
		while [ "$(ls "/proc/$pid/task" 2>/dev/null | wc -l)" -gt 1 ] && [ $i -lt 200 ]; do
			i=$((i + 1))
			sleep 0.05
		done
	fi
	if [ "$(ls "/proc/$pid/task" 2>/dev/null | wc -l)" -le 1 ]; then
		wait "$pid" 2>/dev/null || true
		_ck_state "exited $pid"
		CK_PID=
	fi
	for w in "$@"; do kill -9 "$w" 2>/dev/null || true; done
	ck_fail "$why"
}

# What the writer was doing when the daemon died (the last "begin" of this
# cycle without its "commit" / "deleted"), and what became of it after the
# remount, from the catalog.
_torture_inflight() { # LOG CYCLE
	"$PY" - "$1" "$2" "$CK_CACHE/catalog.db" <<'EOF'
import json, sqlite3, sys
cycle = int(sys.argv[2])
recs = [json.loads(l) for l in open(sys.argv[1]) if l.endswith("\n")]
recs = [r for r in recs if r.get("cycle") == cycle]
done = sum(1 for r in recs if r["ev"] in ("commit", "deleted"))
last = None
for r in recs:
    if r["ev"] == "begin":
        last = r
    elif r["ev"] in ("commit", "deleted"):
        last = None
    elif r["ev"] == "intent" and last is not None:
        last = dict(last, renaming=True)
if last is None:
    print("%d ops done, killed between two" % done)
    sys.exit(0)
db = sqlite3.connect("file:%s?mode=ro" % sys.argv[3], uri=True)
row = db.execute("SELECT state, rule, version FROM generations WHERE name = ? ORDER BY id DESC LIMIT 1",
                 (last["name"],)).fetchone()
states = {0: "open", 1: "committed", 2: "aborted", 3: "deleted", 4: "held"}
became = "no generation" if row is None else "%s v%d (%s)" % (states.get(row[0]), row[2], row[1])
print("%d ops done, killed in %s %s%s -> %s" % (done, last["op"], last["name"],
      " after the intent (at the .metadata rename)" if last.get("renaming") else "", became))
EOF
}

test_kill9_torture_loop_over_generations() {
	local seed=${CKPTFS_TORTURE_SEED:-$((RANDOM * 32768 + RANDOM))}
	local state=$CK_TMP/torture c delay t0 t1 w out rc summary inflight total0
	mkdir -p "$state"
	: >"$state/log"
	ck_log "$TORTURE_CYCLES cycles, keep=$TORTURE_KEEP, seed $seed (CKPTFS_TORTURE_SEED=$seed to replay)"
	total0=$(date +%s.%N)
	for ((c = 1; c <= TORTURE_CYCLES; c++)); do
		t0=$(date +%s.%N)
		delay=$(awk -v s=$((seed + c)) 'BEGIN { srand(s); printf "%.3f", 0.05 + rand() * 1.45 }')
		ck_mount "keep=$TORTURE_KEEP"
		ck_bg "$PY" "$CK_HELPERS/torture_writer.py" "$CK_MNT" "$state" $((seed * 1000 + c)) $c $TORTURE_KEEP
		w=$CK_BG_PID
		sleep "$delay"
		_ck_pid_alive "$w" || {
			rc=0
			wait "$w" || rc=$?
			ck_fail "cycle $c: the writer stopped by itself before the kill (status $rc): $(grep '"problem"' "$state/log" | tail -n 3 | tr '\n' '|')"
		}
		_torture_kill9 "$w"
		ck_mount "keep=$TORTURE_KEEP"
		inflight=$(_torture_inflight "$state/log" $c)
		rc=0
		out=$("$PY" "$CK_HELPERS/torture_check.py" "$CK_MNT" "$CK_CACHE/catalog.db" "$state" $TORTURE_KEEP $c 2>&1) || rc=$?
		if [ $rc != 0 ]; then
			ck_log "cycle $c: $inflight; $(echo "$out" | head -n 1)"
			echo "$out" | grep -v "^PROBLEM" | head -n 30 | sed "s/^/    /" >&2
			echo "$out" | grep '^PROBLEM' | head -n 20 | sed 's/^/    /' >&2
			ck_log "writer log, last 8 records of cycle $c:"
			grep "\"cycle\": $c[,}]" "$state/log" | tail -n 8 | cut -c1-300 | sed 's/^/    /' >&2
			ck_log "daemon log of the killed mount:"
			grep -i -E 'generation|recover|error|warn' "$CK_TMP/daemon.$((_CK_NMOUNT - 1)).log" 2>/dev/null | tail -n 12 | sed 's/^/    /' >&2
			ck_log "daemon log of the remount:"
			grep -i -E 'generation|recover|error|warn' "$CK_DLOG" 2>/dev/null | tail -n 12 | sed 's/^/    /' >&2
			ck_fail "cycle $c (seed $seed): generations after kill -9 and remount: $(echo "$out" | grep -m 1 '^PROBLEM' | cut -c 10-400)"
		fi
		summary=$(echo "$out" | tail -n 1)
		out=$("$CKPTFS_ADMIN" check "$CK_MNT" 2>&1) || ck_fail "cycle $c (seed $seed): ckptfs-admin check on the remounted file system: $(echo "$out" | head -n 8 | tr '\n' '|')"
		ck_umount
		_torture_objcheck $c
		t1=$(date +%s.%N)
		printf '  cycle %d/%d: kill at %ss, %s; after remount %s; %s ok (%ss)\n' "$c" "$TORTURE_CYCLES" "$delay" \
			"$inflight" "$summary" "$_TORTURE_OBJ" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')" >&2
		# Old daemon logs of passed cycles: only the last two are of interest.
		rm -f "$CK_TMP/daemon.$((_CK_NMOUNT - 3)).log" "$CK_TMP/daemon.$((_CK_NMOUNT - 3)).stderr"
	done
	"$CKPTFS_ADMIN" check --cache "$CK_CACHE" >/dev/null 2>&1 || ck_fail "ckptfs-admin check --cache after the last cycle: $("$CKPTFS_ADMIN" check --cache "$CK_CACHE" 2>&1 | head -n 5 | tr '\n' '|')"
	ck_log "$(grep -c '"ev": "commit"' "$state/log") commits confirmed by the writer over $TORTURE_CYCLES cycles," \
		"$(awk -v a="$total0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')s"
}
ck_timeout test_kill9_torture_loop_over_generations $((90 + TORTURE_CYCLES * 8))

# The same kill -9, aimed at one window: a reader listing the series (holding
# the directory's lock while it waits for the daemon's READDIR answer) while
# commits with keep=1 delete generations, so the daemon's background thread is
# telling the kernel to forget their names (which needs that same lock). The
# daemon must still die at once, and recover like any other kill.
test_kill9_while_a_reader_lists_the_series_during_keep_deletions() {
	local cycles=40 c delay out lister saver t0
	[ "$CK_QUICK" = 1 ] && cycles=15
	[ -n "${CKPTFS_TORTURE_CYCLES:-}" ] && cycles=$(((CKPTFS_TORTURE_CYCLES + 4) / 5))
	cat >"$CK_TMP/lister.py" <<'EOF'
import os, sys
while True:
    try:
        os.listdir(sys.argv[1])
    except FileNotFoundError:
        pass
    except OSError:  # the daemon was killed
        break
EOF
	cat >"$CK_TMP/saver.py" <<'EOF'
import errno, os, sys
d, n = sys.argv[1], int(sys.argv[2])
try:
    while True:
        n += 1
        g = os.path.join(d, "step-%d" % n)
        os.makedirs(g)
        with open(os.path.join(g, "__0_0.distcp"), "wb") as f:
            f.write(os.urandom(4096))
        with open(os.path.join(g, ".metadata.tmp"), "wb") as f:
            f.write(b"m")
        os.rename(os.path.join(g, ".metadata.tmp"), os.path.join(g, ".metadata"))
except OSError as e:  # the daemon was killed
    if e.errno not in (errno.ENOTCONN, errno.ECONNABORTED):
        raise
EOF
	for ((c = 1; c <= cycles; c++)); do
		t0=$(date +%s.%N)
		ck_mount keep=1
		mkdir -p "$CK_MNT/run"
		ck_bg "$PY" "$CK_TMP/lister.py" "$CK_MNT/run"
		lister=$CK_BG_PID
		ck_bg "$PY" "$CK_TMP/saver.py" "$CK_MNT/run" $((c * 100000))
		saver=$CK_BG_PID
		delay=$(awk -v s="$c$RANDOM" 'BEGIN { srand(s); printf "%.2f", 0.2 + rand() * 0.6 }')
		sleep "$delay"
		_torture_kill9 "$lister" "$saver"
		ck_mount keep=1
		assert_eq 0 "$(ck_sql 'SELECT count(*) FROM generations WHERE state = 0')" "cycle $c: OPEN generations after kill -9 and remount"
		# keep runs at start (a pass the kill cut short) and again when the
		# newest becomes durable: the two views may differ for a moment
		local tries=0 committed
		while :; do
			committed=$(ck_sql "SELECT name FROM generations WHERE state = 1 ORDER BY name" | tr '\n' ' ')
			out=$(ls "$CK_MNT/run" | LC_ALL=C sort | tr '\n' ' ')
			[ "$out" = "$committed" ] || [ $tries -ge 50 ] && break
			tries=$((tries + 1))
			sleep 0.1
		done
		assert_eq "$committed" "$out" "cycle $c: series listing vs committed generations"
		assert_le "$(echo $out | wc -w)" 2 "cycle $c: committed generations with keep=1 (one more if the kill cut a keep pass)"
		out=$("$CKPTFS_ADMIN" check "$CK_MNT" 2>&1) || ck_fail "cycle $c: ckptfs-admin check: $out"
		rm -rf "$CK_MNT/run"/* # a fresh series each cycle
		ck_umount
		_torture_objcheck $c
		printf '  cycle %d/%d: kill at %ss, %s generations so far; ok (%ss)\n' "$c" "$cycles" "$delay" \
			"$(ck_sql 'SELECT count(*) FROM generations')" "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')" >&2
		rm -f "$CK_TMP/daemon.$((_CK_NMOUNT - 3)).log" "$CK_TMP/daemon.$((_CK_NMOUNT - 3)).stderr"
	done
}
ck_timeout test_kill9_while_a_reader_lists_the_series_during_keep_deletions 600

ck_main "$@"
