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
. "$(dirname "$0")/lib.sh"

E_PROBLEM=1 E_UNREACHABLE=12

_save() { # SERIES/NAME MiB
	mkdir -p "$CK_MNT/$1" "$CK_REF/$1"
	ck_rand "$CK_REF/$1/model.pt" $(($2 * MiB))
	cp "$CK_REF/$1/model.pt" "$CK_MNT/$1/model.pt"
	setfattr -n user.ckptfs.commit -v 1 "$CK_MNT/$1"
}

# _xor_byte FILE POS — flips bits of one byte in place.
_xor_byte() {
	"$PY" -c 'import sys
f = open(sys.argv[1], "r+b"); f.seek(int(sys.argv[2])); b = f.read(1)
assert len(b) == 1, "offset past the end"
f.seek(int(sys.argv[2])); f.write(bytes([b[0] ^ 0x5a])); f.close()' "$1" "$2"
}
# _damage OBJ — flips a payload byte (past the header its bytes 12..15 give).
_damage() {
	local hdr size
	hdr=$(od -A n -t u4 -j 12 -N 4 "$1" | tr -d ' ')
	size=$(ck_size "$1")
	_xor_byte "$1" $((hdr + (size - hdr) / 3))
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
	_save run/step-1 3
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
	_save run/step-1 3
	_save run/step-2 3
	ck_wait_durable 60
	ck_umount
	local rc total
	rc=$(_adm verify --cache "$CK_CACHE")
	assert_eq 0 "$rc" "exit status of verify on a whole store ($(_both))"
	total=$(_key chunks_ok)
	[ "$total" -ge 4 ] || ck_fail "only $total chunks to verify; the case needs four or more ($(_both))"
	assert_eq "$total" "$(_key backing_copies_ok)" "BACKING copies verified on a whole store"
	# BACKING answers (its listing works) but its reads fail: no verdict on
	# any copy, each one counted unreadable, verify runs to the end
	ck_fault eio=read
	rc=$(_adm verify --cache "$CK_CACHE")
	assert_eq $E_PROBLEM "$rc" "exit status of verify while BACKING's reads fail ($(_both))"
	assert_eq "$total" "$(_key chunks_unreadable)" "chunks_unreadable while BACKING's reads fail"
	assert_eq 0 "$(_key chunks_not_checked)" "chunks_not_checked while BACKING answers"
	assert_not_contains "$(cat "$CK_TMP/err")" "unreachable" "stderr while BACKING answers"
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
	ck_fault
	rc=$(_adm verify --cache "$CK_CACHE")
	assert_eq 0 "$rc" "exit status of verify once BACKING answers again ($(_both))"
}
ck_main "$@"
