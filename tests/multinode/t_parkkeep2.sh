#!/bin/bash
# t_parkkeep2 — keep-latest-k and a write handle whose row its flush parked
# (-o meta=; fs/ns.h invariants 12, 14, pggen.h X12, X15, fs/gen.h 18). A
# rank on node B writes its file of step-100, keeps a dup of the descriptor
# and closes the other: that close's flush drops B's ns_writing row (so a
# completion signal commits the save at once), and its ns_open row says a
# write handle is parked there. keep=1: once step-200 is committed and on
# BACKING, keep-latest-k would expire step-100, and a write through the dup
# would then land in a file nothing names while pwrite, fsync and close
# succeed (review 42 F5). So the expire counts the parked handle: step-100
# is kept while the dup is open. Closed without a write, B asks for keep
# again (gen_writer_closed) and step-100 goes; written, the write reopens
# step-100 as version 2 (as on one node: t_keep's
# test_write_through_a_handle_open_before_keep_lands_in_a_new_version),
# whose bytes every node reads and an explicit commit keeps. Closed while
# PostgreSQL is down (both statements of B's last close fail), the parked
# mark is ended by B once PostgreSQL answers again (fs/ns.h invariant 15,
# review 50 F4: it stayed while B ran, and keep never expired step-100).
. "$(dirname "$0")/mn.sh"

PK2_OPTS=quiet=0.5,keep=1

pk2_row() { # NAME: "state version rule" of its newest row
	mn_psql "SELECT state || ' ' || version || ' ' || coalesce(nullif(rule, ''), '-') FROM ns_generations WHERE name = '$1' ORDER BY id DESC LIMIT 1"
}
pk2_parked() { # how many ns_open rows of a file called model.bin are marked parked
	mn_psql "SELECT count(*) FROM ns_open o JOIN ns_dirents d ON d.ino = o.ino WHERE d.name = 'model.bin' AND o.parked"
}
pk2_writing() { # NAME: how many ns_writing rows name a file called NAME
	mn_psql "SELECT count(*) FROM ns_writing w JOIN ns_dirents d ON d.ino = w.ino WHERE d.name = '$1'"
}
# pk2_marker X DIR: DIR's .ckptfs-commit made on node X, DIR committed
pk2_marker() {
	local v=MN_MNT_$1
	touch "${!v}/k/$2/.ckptfs-commit"
	mn_poll "SELECT state || ' ' || version || ' ' || rule FROM ns_generations WHERE name = '$2'" \
		"1 1 marker" 10 "$2 after its marker"
}
# pk2_expect X EXPECTED: node X lists EXPECTED in k within 20 s
pk2_expect() {
	local v=MN_MNT_$1 i=0
	while [ "$(mn_entries "${!v}/k")" != "$2" ] && [ $i -lt 200 ]; do
		i=$((i + 1))
		sleep 0.1
	done
	assert_eq "$2" "$(mn_entries "${!v}/k")" "series k on node $1"
}

# pk2_only_step200_then_umount: step-200 committed by its marker, both nodes list it
# alone, its bytes read on B; then B and A unmount.
pk2_only_step200_then_umount() {
	assert_eq "1 1 marker" "$(pk2_row step-200)" "step-200"
	pk2_expect A "step-200"
	pk2_expect B "step-200"
	assert_file_eq "$CK_TMP/s200" "$MN_MNT_B/k/step-200/model.bin"
	mn_umount B
	mn_umount A
}

# pk2_setup: A and B (keep=1); B's rank writes k/step-100/model.bin ($CK_TMP/v1),
# keeps a dup and closes the first descriptor (no row left: parked), then
# waits for a word on fifo go: "write" pwrites $CK_TMP/v2 over it through
# the dup and fsyncs; then the dup is closed and "<word> closed" written to
# fifo ack. step-100 committed by its marker on A, step-200 saved on A and
# on BACKING: keep=1 chose step-100. PK2_WRITER is B's rank.
pk2_setup() {
	mn_pg_start
	mn_mount A "$PK2_OPTS"
	mn_mount B "$PK2_OPTS"
	mkdir -p "$MN_MNT_A/k/step-100"
	mn_see B k/step-100 2
	ck_rand "$CK_TMP/v1" 300000
	ck_rand "$CK_TMP/v2" 300000
	ck_rand "$CK_TMP/s200" 200000
	mkfifo "$CK_TMP/go" "$CK_TMP/ack"
	ck_bg "$PY" -c "
import os
fd = os.open('$MN_MNT_B/k/step-100/model.bin', os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
fd2 = os.dup(fd)
data = open('$CK_TMP/v1', 'rb').read()
assert os.write(fd, data) == len(data)
os.close(fd)
open('$CK_TMP/ack', 'w').write('closed\n')
word = open('$CK_TMP/go').read().strip()
if word == 'write':
    data = open('$CK_TMP/v2', 'rb').read()
    assert os.pwrite(fd2, data, 0) == len(data)
    os.fsync(fd2)
os.close(fd2)
open('$CK_TMP/ack', 'w').write(word + ' closed\n')"
	PK2_WRITER=$CK_BG_PID
	assert_eq closed "$(cat "$CK_TMP/ack")" "B's rank's first close"
	assert_eq 0 "$(pk2_writing model.bin)" "B's writing rows after its first close (parked)"
	pk2_marker A step-100
	mkdir "$MN_MNT_A/k/step-200"
	cp "$CK_TMP/s200" "$MN_MNT_A/k/step-200/model.bin"
	pk2_marker A step-200
	mn_poll "SELECT durable_version = version FROM ns_generations WHERE name = 'step-200'" t 30 \
		"step-200 on BACKING"
	# keep's pass once step-200 is durable (the duty's holder: A or B)
	local i=0
	until grep -q "generation step-100 .*kept: reopened, pinned" "$MN_DLOG_A" "$MN_DLOG_B"; do
		i=$((i + 1))
		[ $i -le 100 ] || ck_fail "keep did not keep step-100 for B's parked write handle: step-100 is '$(pk2_row step-100)'; $(grep -h "step-100" "$MN_DLOG_A" "$MN_DLOG_B" | tail -n 3 | cut -c1-200 | tr '\n' '|')"
		sleep 0.1
	done
	assert_eq "1 1 marker" "$(pk2_row step-100)" "step-100 while B's dup is open"
	pk2_expect A "step-100 step-200"
	assert_file_eq "$CK_TMP/v1" "$MN_MNT_A/k/step-100/model.bin"
}

# Closed without a write: B's release asks for keep, which expires step-100.
test_a_parked_handle_keeps_its_save_until_it_closes() {
	pk2_setup
	echo close >"$CK_TMP/go"
	assert_eq "close closed" "$(cat "$CK_TMP/ack")" "B's rank's last close"
	ck_bg_wait "$PK2_WRITER" 20 || ck_fail "B's rank failed"
	mn_poll "SELECT state || ' ' || rule FROM ns_generations WHERE name = 'step-100'" "3 keep" 20 \
		"step-100 once B's last handle of it closed"
	pk2_only_step200_then_umount
}

# Closed with PostgreSQL down: the release's statement that ends the mark
# (G_WRITING) and its ns_open row's deletion both fail, the close(2) itself
# succeeds (its flush needs no statement: the row was parked). Once
# PostgreSQL is back B ends the mark (invariant 15) and asks for keep again
# (gen.h 18): step-100 goes, though no new save came. A lease of 60 s, so
# that B stays live through the outage (a node swept holds nothing anyway).
test_a_mark_left_by_a_last_close_with_postgresql_down_ends_once_it_answers() {
	local MN_LEASE_MS=60000 MN_META_TIMEOUT_MS=2000
	pk2_setup
	assert_eq 1 "$(pk2_parked)" "B's parked marks before its last close"
	mn_pg kill
	echo close >"$CK_TMP/go"
	assert_eq "close closed" "$(cat "$CK_TMP/ack")" "B's rank's last close, PostgreSQL down"
	ck_bg_wait "$PK2_WRITER" 20 || ck_fail "B's rank failed"
	local i=0
	until grep -q "cannot tell the shared catalog it is closed here" "$MN_DLOG_B"; do
		i=$((i + 1))
		[ $i -le 200 ] || ck_fail "B's release did not fail its statements with PostgreSQL down: $(tail -n 3 "$MN_DLOG_B" | cut -c1-200 | tr '\n' '|')"
		sleep 0.1
	done
	grep -q "cannot tell the shared catalog the file is closed" "$MN_DLOG_B" ||
		ck_fail "B's release: its G_WRITING statement did not fail"
	mn_pg resume
	mn_poll "SELECT count(*) FROM ns_open o JOIN ns_dirents d ON d.ino = o.ino WHERE d.name = 'model.bin' AND o.parked" \
		0 20 "B's parked marks once PostgreSQL answers again"
	grep -q "its parked mark, which its last close could not end, is ended" "$MN_DLOG_B" ||
		ck_fail "B's log does not say it ended the mark"
	mn_poll "SELECT state || ' ' || rule FROM ns_generations WHERE name = 'step-100'" "3 keep" 30 \
		"step-100 once B's mark is ended"
	pk2_only_step200_then_umount
}

# Written through the dup after keep kept step-100: the write lands in
# step-100's version 2, read by both nodes, kept by an explicit commit (the
# owner's most recently committed save, gen.h invariant 3).
test_a_write_through_a_parked_handle_lands_in_a_new_version() {
	pk2_setup
	echo write >"$CK_TMP/go"
	assert_eq "write closed" "$(cat "$CK_TMP/ack")" "B's rank's pwrite, fsync and close"
	ck_bg_wait "$PK2_WRITER" 20 || ck_fail "B's rank failed"
	mn_poll "SELECT state || ' ' || version FROM ns_generations WHERE name = 'step-100'" "0 2" 10 \
		"step-100 after the write through the dup"
	assert_file_eq "$CK_TMP/v2" "$MN_MNT_B/k/step-100/model.bin"
	assert_file_eq "$CK_TMP/v2" "$MN_MNT_A/k/step-100/model.bin"
	setfattr -n user.ckptfs.commit -v 1 "$MN_MNT_A/k/step-100" || ck_fail "explicit commit of step-100"
	mn_poll "SELECT state || ' ' || version || ' ' || rule FROM ns_generations WHERE name = 'step-100'" \
		"1 2 explicit" 10 "step-100 after its explicit commit"
	ck_admin_rc 0 wait "$MN_MNT_B" --timeout 60
	sleep 1 # a keep pass after that commit keeps it (the owner's last commit)
	assert_eq "1 2 explicit" "$(pk2_row step-100)" "step-100 after the keep pass of its commit"
	pk2_expect A "step-100 step-200"
	pk2_expect B "step-100 step-200"
	assert_file_eq "$CK_TMP/v2" "$MN_MNT_A/k/step-100/model.bin"
	assert_file_eq "$CK_TMP/s200" "$MN_MNT_A/k/step-200/model.bin"
	mn_umount B
	mn_umount A
}

ck_main "$@"
