#!/bin/bash
# t_writebuf2 — a file staged late by -o writebuf (review 44 F2, fs/writer.h
# invariant 8) over the shared catalog (-o meta=): its stored prefix stays
# its pending extents in PostgreSQL while the rest is staged; reads while
# staged, a rewrite inside the prefix, a truncate into it, the close and a
# kill -9 after it leave the file byte for byte on its node and on another.
. "$(dirname "$0")/mn.sh"

ck_timeout test_a_file_staged_late_reads_back_whole_on_every_node 180

test_a_file_staged_late_reads_back_whole_on_every_node() {
	local mib=1048576
	mn_pg_start
	mn_mount A writebuf=8M
	mn_mount B
	mkdir -p "$MN_MNT_A/run"
	_mn_select A
	ck_late_start "$MN_MNT_A/run"
	# 24 MiB stored, hogs take the budget, then a buffer that must grow:
	# staged at ~24 MiB (t_writebuf has the staging file's size checked)
	ck_late a 24
	ck_late h 12
	ck_late P 8
	ck_late r 0 $((32 * mib))
	[ "$(ck_admin_stat writebuf_staged)" -gt 0 ] || ck_fail "no writer was staged"
	assert_eq 0 "$(ck_admin_stat writebuf_copied)" "writebuf_copied before a write into the stored prefix"
	sync "$MN_MNT_A/run/big.bin" # a commit: the prefix's extents and the re-chunked rest
	ck_late t $((20 * mib + 3)) # into the stored prefix
	ck_late a 6
	ck_late r 0 $((26 * mib + 3))
	ck_late w 4096 100000 # below the staged point: the prefix is copied now
	[ "$(ck_admin_stat writebuf_copied)" -gt 0 ] || ck_fail "writebuf_copied 0 after a write below the staged point"
	ck_late r 0 $((26 * mib + 3))
	ck_late c
	ck_late_end
	sha256sum --quiet -c "$CK_REF/sums" || ck_fail "big.bin reads back different bytes on A after its close"
	mn_kill9 A
	(cd / && sed "s|$MN_MNT_A|$MN_MNT_B|" "$CK_REF/sums" | sha256sum --quiet -c) ||
		ck_fail "big.bin differs on B after A's kill -9"
	mn_mount A
	sha256sum --quiet -c "$CK_REF/sums" || ck_fail "big.bin differs on A after its kill -9 and a remount"
	mn_umount A
	mn_umount B
}

ck_main "$@"
