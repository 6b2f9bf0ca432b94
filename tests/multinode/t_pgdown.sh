#!/bin/bash
# t_pgdown — a node unmounted while PostgreSQL is down waits out the outage
# once per connection, not once per catalog call (pg.h P8, review 45 F3):
# the daemon exits with status 0 about meta_timeout_ms after the unmount,
# says that its remaining calls failed at once, and loses nothing: with the
# database back, the same cache mounted again reads the save it had made.
# And a serving node's calls in an outage fail together about one
# meta_timeout_ms in, not one each (review 45 F7), and the node serves again
# by itself once the database is back (a stopping daemon too: review 49 F2,
# the unit case lease/a_stopping_connection_past_its_deadline_...).
. "$(dirname "$0")/mn.sh"

test_an_unmount_with_the_database_down_waits_one_timeout() {
	MN_LEASE_MS=3000 MN_META_TIMEOUT_MS=5000
	mn_pg_start
	mn_mount A
	mkdir -p "$MN_MNT_A/run/step-1"
	ck_rand "$CK_REF/w.bin" 3000000
	cp "$CK_REF/w.bin" "$MN_MNT_A/run/step-1/w.bin"
	echo 1 >"$MN_MNT_A/run/latest"
	local out
	out=$("$CKPTFS_ADMIN" wait "$MN_MNT_A" --timeout 60 2>&1) || ck_fail "the save is not on BACKING: $out"
	mn_pg kill
	local t0=$SECONDS
	mn_umount A
	# a hang detector, not a speed target: one meta_timeout (5 s) per
	# connection; before P8 each of the unmount's calls waited its own
	# (30-50 s here, 87 s with meta_timeout_ms=20000)
	assert_le $((SECONDS - t0)) 18 "seconds node A took to exit after its unmount with PostgreSQL down"
	ck_log "node A exited $((SECONDS - t0)) s after its unmount with PostgreSQL down"
	grep -q "while the daemon stops: calls fail at once" "$MN_DLOG_A" ||
		ck_fail "node A's log does not say its remaining calls failed at once"
	mn_pg resume
	mn_mount A
	assert_file_eq "$CK_REF/w.bin" "$MN_MNT_A/run/step-1/w.bin"
	assert_eq 1 "$(cat "$MN_MNT_A/run/latest")" "latest read after the remount"
	mn_umount A
}

# Runs `python3 -c CODE` in the background; its elapsed seconds and the
# errno it ended with go to FILE.
_timed_call() { # FILE CODE
	"$PY" - "$1" "$2" <<'EOF' &
import os, sys, time
out, code = sys.argv[1], sys.argv[2]
t0 = time.monotonic()
err = 0
try:
    exec(code)
except OSError as e:
    err = e.errno
open(out, "w").write(f"{time.monotonic() - t0:.1f} {err}\n")
EOF
}

test_calls_in_an_outage_fail_together_about_one_timeout_in() {
	MN_LEASE_MS=3000 MN_META_TIMEOUT_MS=4000
	mn_pg_start
	mn_mount A
	local m=$MN_MNT_A i pids=() worst=0 t e
	mkdir -p "$m/run/step-1"
	ck_rand "$CK_REF/w.bin" 1000000
	cp "$CK_REF/w.bin" "$m/run/step-1/w.bin"
	echo meta >"$m/run/step-1/.metadata.tmp"
	mn_pg kill
	# three requests queued behind the catalog's one connection, and a
	# rename that makes several catalog calls (F7: 82 s for 20 s)
	for i in 1 2 3; do
		_timed_call "$CK_TMP/call$i" "os.mkdir('$m/run/d$i')"
		pids+=($!)
	done
	_timed_call "$CK_TMP/call4" "os.rename('$m/run/step-1/.metadata.tmp', '$m/run/step-1/.metadata')"
	pids+=($!)
	for i in "${pids[@]}"; do wait "$i" || ck_fail "a timed call's process failed"; done
	for i in 1 2 3 4; do
		read -r t e <"$CK_TMP/call$i"
		ck_log "call $i: ${t} s, errno $e"
		[ "$e" != 0 ] || ck_fail "call $i succeeded with the database down"
		t=${t%.*}
		[ "$t" -le "$worst" ] || worst=$t
	done
	# a hang detector, not a speed target: one meta_timeout_ms (4 s) for
	# all, plus a connection attempt each; one per call was 16 s or more
	assert_le "$worst" 10 "seconds the slowest call took in the outage"
	mn_pg resume
	i=0
	until mkdir "$m/run/back" 2>/dev/null; do
		i=$((i + 1))
		[ $i -le 300 ] || ck_fail "node A did not serve a mkdir within 30 s of the database's return"
		sleep 0.1
	done
	assert_file_eq "$CK_REF/w.bin" "$m/run/step-1/w.bin"
	mv "$m/run/step-1/.metadata.tmp" "$m/run/step-1/.metadata"
	mn_umount A
}

ck_main "$@"
