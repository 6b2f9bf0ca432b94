#!/bin/bash
# t_rewritekeep2 — t_rewritekeep on the shared catalog (-o meta=,
# generation.h G10, fs/gen.h 5): a half-done rewrite of raw files is not
# committed by the unmount over the complete version 1, and a rolled-back
# rewrite (the unmount's hold, a node lost mid-rewrite) is kept HELD beside
# it as "<name>.rewrite-<id>", byte for byte (review 42 F2, F4).
. "$(dirname "$0")/mn.sh"

RK2_OPTS=quiet=0.3

rk2_row() { # NAME: "state version rule" of its newest row
	mn_psql "SELECT state || ' ' || version || ' ' || coalesce(nullif(rule, ''), '-') FROM ns_generations WHERE name = '$1' ORDER BY id DESC LIMIT 1"
}
rk2_wait() { # NAME "STATE VERSION RULE"
	mn_poll "SELECT state || ' ' || version || ' ' || coalesce(nullif(rule, ''), '-') FROM ns_generations WHERE name = '$1' ORDER BY id DESC LIMIT 1" \
		"$2" 20 "catalog state, version and rule of $1"
}
rk2_kept() { # NAME: the HELD rows kept beside it
	mn_psql "SELECT name FROM ns_generations WHERE state = 4 AND name LIKE '$1.rewrite-%' ORDER BY id"
}
# rk2_save X DIR: model.bin 4 MiB + optim.bin 2 MiB on node X, its marker
rk2_save() {
	local v=MN_MNT_$1
	mkdir -p "${!v}/$2" "$CK_TMP/v1/$2"
	head -c 4M /dev/urandom >"$CK_TMP/v1/$2/model.bin"
	head -c 2M /dev/urandom >"$CK_TMP/v1/$2/optim.bin"
	cp "$CK_TMP/v1/$2/model.bin" "$CK_TMP/v1/$2/optim.bin" "${!v}/$2/"
	touch "${!v}/$2/.ckptfs-commit"
	rk2_wait "$(basename "$2")" "1 1 marker"
}
# rk2_killed_rewrite FILE SRC: a writer opens FILE O_TRUNC, writes SRC's
# bytes, and is SIGKILLed before its close
rk2_killed_rewrite() {
	"$PY" -c "
import os, signal
fd = os.open('$1', os.O_WRONLY | os.O_TRUNC)
os.write(fd, open('$2', 'rb').read())
os.kill(os.getpid(), signal.SIGKILL)" || true
}
rk2_v1() { # X DIR: version 1 byte for byte at its name on node X
	local v=MN_MNT_$1
	assert_file_eq "$CK_TMP/v1/$2/model.bin" "${!v}/$2/model.bin"
	assert_file_eq "$CK_TMP/v1/$2/optim.bin" "${!v}/$2/optim.bin"
}

test_unmount_keeps_v1_and_holds_a_half_rewrite() {
	mn_pg_start
	mn_mount A "$RK2_OPTS"
	rk2_save A run/step-100
	ck_rand "$CK_TMP/part" $((1024 * 1024))
	rk2_killed_rewrite "$MN_MNT_A/run/step-100/model.bin" "$CK_TMP/part"
	rk2_wait step-100 "0 2 marker"
	sleep 0.5
	mn_umount A
	assert_eq "1 1 unmount-restored" "$(rk2_row step-100)" "step-100 after the unmount"
	local kept
	kept=$(rk2_kept step-100)
	[ -n "$kept" ] || ck_fail "no rolled-back version kept (rows: $(mn_psql "SELECT id || ':' || name || ':' || state FROM ns_generations" | tr '\n' ' '))"
	assert_eq "4 1 unmount" "$(rk2_row "$kept")" "the kept version's row"
	assert_contains "$(mn_psql "SELECT held FROM ns_generations WHERE name = '$kept'")" \
		"version 2 of step-100" "its held reason"
	# another node sees version 1 at the name and the kept version by name
	mn_mount B "$RK2_OPTS"
	rk2_v1 B run/step-100
	assert_file_eq "$CK_TMP/part" "$MN_MNT_B/run/$kept/model.bin"
	assert_file_eq "$CK_TMP/v1/run/step-100/optim.bin" "$MN_MNT_B/run/$kept/optim.bin"
	assert_not_contains "$(ls -a "$MN_MNT_B/run")" "$kept" "the kept version in the listing"
	ck_admin_rc 0 commit "$MN_MNT_B" "run/$kept"
	rk2_wait "$kept" "1 1 admin"
	assert_file_eq "$CK_TMP/part" "$MN_MNT_B/run/$kept/model.bin"
	rk2_v1 B run/step-100
	mn_umount B
}

test_node_lost_mid_rewrite_keeps_the_new_version() {
	mn_pg_start
	mn_mount A "$RK2_OPTS"
	mn_mount B "$RK2_OPTS"
	rk2_save A run/step-100
	ck_rand "$CK_TMP/v2" $((3 * 1024 * 1024))
	dd if="$CK_TMP/v2" of="$MN_MNT_A/run/step-100/model.bin" bs=1M conv=fsync status=none
	rk2_wait step-100 "0 2 marker"
	mn_kill9 A
	# B settles A's lease once it runs out, or A's restart does: either
	# way version 1 is back at the name and version 2 kept
	mn_mount A "$RK2_OPTS"
	rk2_wait step-100 "1 1 node-lost-restored"
	local kept
	kept=$(rk2_kept step-100)
	[ -n "$kept" ] || ck_fail "no rolled-back version kept (rows: $(mn_psql "SELECT id || ':' || name || ':' || state || ':' || rule FROM ns_generations" | tr '\n' ' '))"
	rk2_v1 B run/step-100
	assert_file_eq "$CK_TMP/v2" "$MN_MNT_B/run/$kept/model.bin"
	assert_file_eq "$CK_TMP/v2" "$MN_MNT_A/run/$kept/model.bin"
	ck_admin_rc 0 rm "$MN_MNT_B" "run/$kept"
	mn_poll "SELECT count(*) FROM ns_generations WHERE name = '$kept' AND state = 4" 0 20 "the kept version after rm"
	rk2_v1 A run/step-100
	mn_umount B
	mn_umount A
}

# review 46 F2 on the shared engine: a planted name gives way to the next
# free one (pggen_name_taken), the unmount's hold goes through
test_a_planted_name_gives_way_on_the_shared_engine() {
	mn_pg_start
	mn_mount A "$RK2_OPTS"
	rk2_save A run/step-100
	ck_rand "$CK_TMP/part" $((1024 * 1024))
	rk2_killed_rewrite "$MN_MNT_A/run/step-100/model.bin" "$CK_TMP/part"
	rk2_wait step-100 "0 2 marker"
	local next
	next=$(($(mn_psql "SELECT max(id) FROM ns_generations") + 1))
	echo planted >"$MN_MNT_A/run/step-100.rewrite-$next"
	sleep 0.5
	mn_umount A
	assert_eq "1 1 unmount-restored" "$(rk2_row step-100)" "step-100 after the unmount"
	assert_eq "4 1 unmount" "$(rk2_row "step-100.rewrite-$next-2")" "the version kept under the next name"
	mn_mount B "$RK2_OPTS"
	rk2_v1 B run/step-100
	assert_file_eq "$CK_TMP/part" "$MN_MNT_B/run/step-100.rewrite-$next-2/model.bin"
	assert_eq planted "$(cat "$MN_MNT_B/run/step-100.rewrite-$next")" "the planted file"
	mn_umount B
}

ck_main "$@"
