#!/bin/bash
# t_adminfail — ckptfs-admin when a copy or BACKING fails it (docs/ADMIN.md):
# `export --cache` whose cache copy of a chunk is damaged reads that chunk
# from BACKING (one line naming it) and writes the generation byte for byte,
# and fails naming the chunk and both reasons only when BACKING's copy is
# damaged too, leaving nothing; `verify` over a BACKING that stops answering
# (tests/faultfs failing its reads and listings with EIO) stops after the
# first copy it could not read with one line, "BACKING … unreachable: N chunks
# not checked", and exit 12, while a BACKING that still answers (only its
# reads fail) is verified to the end, every copy counted unreadable.
# `rebuild` whose claim on BACKING went unsure while it read BACKING (the
# tool held up past the claim's timeout, here by a hung faultfs) and was
# taken by another catalog meanwhile does not put the catalog it built in
# place: one line, exit 1, the old catalog and the taker's claim untouched.
. "$(dirname "$0")/lib.sh"

ck_timeout test_rebuild_whose_claim_went_unsure_while_it_read_backing_keeps_the_old_catalog 240
ck_slow test_rebuild_whose_claim_went_unsure_while_it_read_backing_keeps_the_old_catalog

E_PROBLEM=1 E_UNREACHABLE=12

_save() { # SERIES/NAME MiB
	mkdir -p "$CK_MNT/$1" "$CK_REF/$1"
	ck_rand "$CK_REF/$1/model.pt" $(($2 * MiB))
	cp "$CK_REF/$1/model.pt" "$CK_MNT/$1/model.pt"
	setfattr -n user.ckptfs.commit -v 1 "$CK_MNT/$1"
}

# _damage OBJ — flips a payload byte of a chunk object (a third of the way
# past the header, whose length is its bytes 12..15: docs/FORMAT.md).
_damage() {
	"$PY" - "$1" <<'PYEOF'
import struct, sys
with open(sys.argv[1], "r+b") as f:
    data = f.read()
    hdr = struct.unpack_from("<I", data, 12)[0]
    pos = hdr + (len(data) - hdr) // 3
    assert hdr < pos < len(data), "no payload"
    f.seek(pos)
    f.write(bytes([data[pos] ^ 0x5A]))
PYEOF
}

# _adm ARGS... — stdout in $CK_TMP/out, stderr in $CK_TMP/err; prints the status.
_adm() {
	local rc=0
	timeout 300 "$CKPTFS_ADMIN" "$@" >"$CK_TMP/out" 2>"$CK_TMP/err" </dev/null || rc=$?
	echo "$rc"
}
_key() { awk -v k="$1" '$1 == k { print $2 }' "$CK_TMP/out"; }
_both() { cat "$CK_TMP/out" "$CK_TMP/err" | tr '\n' '|'; }

test_export_cache_reads_a_damaged_cache_copy_from_backing_and_fails_only_when_both_are() {
	ck_mount copy_uploads # two copies: BACKING shares the cache's filesystem here
	_save run/step-1 5
	ck_wait_durable 60
	ck_umount
	local hash ext n
	ext=$(ck_sql "SELECT lower(hex(e.hash)) FROM extents e JOIN dirents d ON d.ino = e.ino WHERE d.name = 'model.pt' ORDER BY e.off")
	n=$(echo "$ext" | grep -c .) || true
	[ "$n" -ge 2 ] || ck_fail "model.pt has $n chunks; the case needs two or more"
	hash=$(echo "$ext" | sed -n "$((n / 2 + 1))p")
	local cached=$CK_CACHE/chunks/${hash:0:2}/${hash:2:2}/$hash
	local onbk=$CK_BACKING/chunks/${hash:0:2}/${hash:2:2}/$hash
	[ -f "$cached" ] || ck_fail "no cache copy of chunk $hash at $cached"
	[ -f "$onbk" ] || ck_fail "no BACKING copy of chunk $hash at $onbk"
	[ "$(stat -c %i "$cached")" != "$(stat -c %i "$onbk")" ] || ck_fail "the two copies of $hash are one file"
	_damage "$cached"
	local rc
	mkdir "$CK_TMP/a" "$CK_TMP/b"
	rc=$(_adm export --cache "$CK_CACHE" run/step-1 "$CK_TMP/a")
	assert_eq 0 "$rc" "exit status of export --cache with the cache's copy damaged ($(_both))"
	assert_file_eq "$CK_REF/run/step-1/model.pt" "$CK_TMP/a/step-1/model.pt"
	assert_contains "$(cat "$CK_TMP/err")" "export: chunk $hash: the cache's copy is damaged (payload does not match its CRC-32C); reading BACKING's" \
		"stderr of export --cache with the cache's copy damaged"
	assert_eq 1 "$(grep -c . "$CK_TMP/err")" "lines on stderr (one per damaged chunk: $(_both))"
	assert_contains "$(cat "$CK_TMP/out")" "exported run/step-1" "stdout of export --cache"
	# both copies damaged: one line naming the chunk and both reasons, nothing left
	_damage "$onbk"
	rc=$(_adm export --cache "$CK_CACHE" run/step-1 "$CK_TMP/b")
	assert_eq $E_PROBLEM "$rc" "exit status of export --cache with both copies damaged ($(_both))"
	assert_contains "$(cat "$CK_TMP/err")" "chunk $hash: the cache's copy damaged: payload does not match its CRC-32C; BACKING's copy damaged: payload does not match its CRC-32C" \
		"stderr of export --cache with both copies damaged"
	assert_eq "" "$(ls -A "$CK_TMP/b")" "what the failed export left"
	assert_eq "" "$(cat "$CK_TMP/out")" "stdout of the failed export"
}

test_verify_stops_at_once_when_backing_is_unreachable_and_says_how_many_were_not_checked() {
	ck_faultfs_up
	ck_mount
	_save run/step-1 5
	_save run/step-2 5
	ck_wait_durable 60
	ck_umount
	local rc total
	rc=$(_adm verify --cache "$CK_CACHE")
	assert_eq 0 "$rc" "exit status of verify on a whole store ($(_both))"
	total=$(_key chunks_ok)
	[ "$total" -ge 4 ] || ck_fail "only $total chunks to verify; the case needs four or more ($(_both))"
	assert_eq "$total" "$(_key backing_copies_ok)" "BACKING copies verified on a whole store"
	# BACKING gone (its listing fails too): stops after the first copy
	ck_fault eio=read,readdir
	rc=$(_adm verify --cache "$CK_CACHE")
	assert_eq $E_UNREACHABLE "$rc" "exit status of verify with BACKING unreachable ($(_both))"
	assert_contains "$(cat "$CK_TMP/err")" "verify: BACKING $CK_BACKING unreachable: $((total - 1)) chunks not checked" \
		"stderr of verify with BACKING unreachable"
	# one line of the tool's (BACKING's own failures are logged above it)
	assert_eq 1 "$(grep -c '^ckptfs-admin:' "$CK_TMP/err")" "lines of ckptfs-admin on stderr ($(_both))"
	assert_eq 1 "$(grep -c '^unreadable chunk' "$CK_TMP/out")" "copies reported unreadable ($(_both))"
	assert_eq 1 "$(_key chunks_unreadable)" "chunks_unreadable with BACKING unreachable"
	assert_eq $((total - 1)) "$(_key chunks_not_checked)" "chunks_not_checked with BACKING unreachable"
	assert_eq 0 "$(_key chunks_bad)" "chunks_bad with BACKING unreachable (no verdict)"
	rc=$(_adm --json verify --cache "$CK_CACHE")
	assert_eq $E_UNREACHABLE "$rc" "exit status of verify --json with BACKING unreachable"
	assert_eq "$((total - 1)) True" "$("$PY" -c 'import json,sys; j = json.load(open(sys.argv[1])); print(j["chunks_not_checked"], j["backing_unreachable"])' "$CK_TMP/out")" \
		"chunks_not_checked and backing_unreachable in --json"
	# BACKING answers (its listing works) but its reads fail: no verdict on
	# any copy, each one counted unreadable, verify runs to the end
	ck_fault eio=read
	rc=$(_adm verify --cache "$CK_CACHE")
	assert_eq $E_PROBLEM "$rc" "exit status of verify while BACKING's reads fail ($(_both))"
	assert_eq "$total" "$(_key chunks_unreadable)" "chunks_unreadable while BACKING's reads fail"
	assert_eq 0 "$(_key chunks_not_checked)" "chunks_not_checked while BACKING answers"
	assert_not_contains "$(cat "$CK_TMP/err")" "unreachable" "stderr while BACKING answers"
	ck_fault
	rc=$(_adm verify --cache "$CK_CACHE")
	assert_eq 0 "$rc" "exit status of verify once BACKING answers again ($(_both))"
}
# The claim's default timeout is 60 s (the tool has no option for it): the
# tool must be held up for longer than 60 s less an eighth (claim.h 9).
test_rebuild_whose_claim_went_unsure_while_it_read_backing_keeps_the_old_catalog() {
	ck_faultfs_up
	ck_mount
	_save run/step-1 1
	_save run/step-2 1
	ck_wait_durable 60
	ck_umount
	local gens store=$CK_TMP/store pid i=0 rc=0 taker taken
	gens=$(ck_sql "SELECT id || ' ' || name || ' ' || state FROM generations ORDER BY id")
	ck_fault latency_ms=300 # its reads take seconds: time to hang them
	ck_bg "$CKPTFS_ADMIN" rebuild --cache "$CK_CACHE" >"$CK_TMP/out" 2>"$CK_TMP/err" </dev/null
	pid=$CK_BG_PID
	# it holds the claim: its take and the first renewal after it (a take is
	# void while a larger epoch appears before its check: claim.h 11)
	until [ "$(grep -lx "pid $pid" "$store"/claims/* 2>/dev/null | wc -l)" -ge 2 ]; do
		i=$((i + 1))
		[ $i -le 600 ] || ck_fail "rebuild did not claim BACKING in 30 s: $(_both)"
		_ck_pid_alive "$pid" || ck_fail "rebuild ended before it was held up: $(_both)"
		sleep 0.05
	done
	ck_fault hang=1
	_ck_pid_alive "$pid" || ck_fail "rebuild ended before BACKING hung: $(_both)"
	# another catalog takes BACKING over while the tool cannot renew
	ck_claim_record 0123456789abcdef0123456789abcdef node-elsewhere /var/cache/ckptfs/abc 1234 \
		"$(date +%s)" >"$CK_TMP/taker.claim"
	taker=$(ck_claim_plant "$store" <"$CK_TMP/taker.claim")
	sleep 56 # past the claim's timeout less an eighth since its last renewal
	ck_fault
	ck_bg_wait "$pid" 120 || rc=$?
	assert_eq 1 "$rc" "exit status of the rebuild whose claim went unsure ($(_both))"
	assert_contains "$(cat "$CK_TMP/err")" "rebuild: BACKING's claim could not be renewed lately or was taken (EROFS) while BACKING was read" \
		"stderr of the rebuild"
	assert_eq 1 "$(grep -c '^ckptfs-admin:' "$CK_TMP/err")" "lines of ckptfs-admin on stderr ($(_both))"
	assert_eq "$gens" "$(ck_sql "SELECT id || ' ' || name || ' ' || state FROM generations ORDER BY id")" \
		"the catalog's generations after the refused rebuild"
	assert_eq "" "$(ls "$CK_CACHE" | grep -E 'before-rebuild|rebuilding')" "catalogs moved aside or left half-built"
	taken=$(ck_claim_epochs "$store" | tail -n 1)
	assert_eq "$taker" "$taken" "the largest epoch: the taker's"
	cmp -s "$CK_TMP/taker.claim" "$store/claims/$taken" || ck_fail "the taker's claim was changed: $(tr '\n' '|' <"$store/claims/$taken")"
}

ck_main "$@"
