#!/bin/bash
# t_pgdown — a node unmounted while PostgreSQL is down waits out the outage
# once per connection, not once per catalog call (pg.h P8, review 45 F3):
# the daemon exits with status 0 about meta_timeout_ms after the unmount,
# says that its remaining calls failed at once, and loses nothing: with the
# database back, the same cache mounted again reads the save it had made.
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
	grep -q "while the daemon stops: its remaining calls fail at once" "$MN_DLOG_A" ||
		ck_fail "node A's log does not say its remaining calls failed at once"
	mn_pg resume
	mn_mount A
	assert_file_eq "$CK_REF/w.bin" "$MN_MNT_A/run/step-1/w.bin"
	assert_eq 1 "$(cat "$MN_MNT_A/run/latest")" "latest read after the remount"
	mn_umount A
}

ck_main "$@"
