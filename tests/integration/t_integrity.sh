#!/bin/bash
# t_integrity — a chunk object damaged on BACKING (a flipped payload byte, a
# truncated or deleted object, a bad header), its cache copy evicted, makes
# reads of the file using it fail with EIO, never return wrong bytes, and
# leave a daemon log line naming the inode, the offset and the chunk; a
# damaged cache copy is replaced from BACKING's good one; files whose chunks are intact still read
# byte-identical; `ckptfs-admin verify MOUNTPOINT` exits 1 naming the chunk;
# once the object is whole again, reads and verify succeed again (no failure
# is cached).
#
# Objects are damaged only while nothing is mounted (the kernel would serve
# pages it cached earlier), and repaired while mounted.
. "$(dirname "$0")/lib.sh"

# ---------------------------------------------------------------- helpers

# _extents NAME — "hash|off|len" of each extent of the file NAME, in file order.
_extents() {
	ck_sql "SELECT lower(hex(e.hash)), e.off, e.len FROM extents e JOIN dirents d ON d.ino = e.ino WHERE d.name = '$1' ORDER BY e.off"
}
_ino_of() { ck_sql "SELECT ino FROM dirents WHERE name = '$1'"; }
_obj() { echo "$CK_BACKING/chunks/${1:0:2}/${1:2:2}/$1"; }

# _pick_victim NAME — chooses a chunk of NAME (the middle extent, so that the
# file has intact chunks before it) and saves a copy of its object. Sets
# V_HASH, V_OFF, V_LEN, V_INO, V_OBJ, V_SAVED.
_pick_victim() {
	local ext n line
	ext=$(_extents "$1")
	n=$(echo "$ext" | grep -c .) || true
	[ "$n" -ge 1 ] || ck_fail "no extents for $1 in the catalog"
	line=$(echo "$ext" | sed -n "$((n / 2 + 1))p")
	IFS='|' read -r V_HASH V_OFF V_LEN <<<"$line"
	V_INO=$(_ino_of "$1")
	V_OBJ=$(_obj "$V_HASH")
	V_SAVED=$CK_TMP/saved.$V_HASH
	[ -f "$V_OBJ" ] || ck_fail "object of chunk $V_HASH (extent at $V_OFF of $1) not found at $V_OBJ"
	[ "$(echo "$ext" | cut -d'|' -f1 | grep -c -x "$V_HASH")" = 1 ] ||
		ck_fail "chunk $V_HASH is used twice by $1 (random data should not repeat)"
	cp -p "$V_OBJ" "$V_SAVED"
	_evict_victim
	ck_log "$1 (inode $V_INO): $n extents; damaging chunk $V_HASH at offset $V_OFF (+$V_LEN)"
}

# _evict_victim — drops the victim's cache copy (as cache_size would), while
# unmounted: reads then fetch BACKING's copy, the one the cases damage.
_evict_victim() {
	rm -f "$CK_CACHE/chunks/${V_HASH:0:2}/${V_HASH:2:2}/$V_HASH"
	ck_sql "UPDATE chunks SET cached = 0 WHERE lower(hex(hash)) = '$V_HASH'" >/dev/null
}

# _assert_chunk_not_used_by NAME — the victim chunk is not one of NAME's.
_assert_chunk_not_used_by() {
	assert_not_contains "$(_extents "$1" | cut -d'|' -f1)" "$V_HASH" "chunks of $1"
}

# _hdr_len OBJ — the header length an object's header gives (72 for format
# 2, 64 for format 1); its payload starts there.
_hdr_len() { od -A n -t u4 -j 12 -N 4 "$1" | tr -d ' '; }
_payload_len() { echo $(($(ck_size "$1") - $(_hdr_len "$1"))); }

# _restore — puts the saved object back, byte-identical.
_restore() {
	cp -p "$V_SAVED" "$V_OBJ"
	cmp -s "$V_SAVED" "$V_OBJ" || ck_fail "could not restore $V_OBJ"
}

# _read_fails NAME WHAT — reading $CK_MNT/NAME fails with EIO, and what it gave
# before failing is a prefix of the reference that stops before the damaged
# chunk (no byte of it, right or wrong, is served).
_read_fails() {
	local name=$1 what=$2 rc=0 got
	timeout 60 cat "$CK_MNT/$name" >"$CK_TMP/partial" 2>"$CK_TMP/read.err" || rc=$?
	[ $rc != 124 ] || ck_fail "$what: reading $name hung for 60 s"
	[ $rc != 0 ] || ck_fail "$what: reading $name succeeded (the damaged chunk's data must not be served)"
	assert_contains "$(cat "$CK_TMP/read.err")" "Input/output error" "$what: error reading $name"
	got=$(ck_size "$CK_TMP/partial")
	assert_le "$got" "$V_OFF" "$what: bytes of $name read before the error (the damaged chunk starts at $V_OFF)"
	cmp -s -n "$got" "$CK_REF/$name" "$CK_TMP/partial" ||
		ck_fail "$what: the $got bytes of $name read before the error differ from what was written"
}

# _read_ok NAME — $CK_MNT/NAME reads back byte-identical.
_read_ok() { assert_file_eq "$CK_REF/$1" "$CK_MNT/$1"; }

# _assert_logged_read_error WHAT — the current daemon's log has a line naming
# the victim's inode, an offset inside the damaged extent, and the chunk.
_assert_logged_read_error() {
	local what=$1 lines o found=0
	lines=$(cat "$CK_DLOG" "$CK_DERR" 2>/dev/null | grep -F -- "$V_HASH" | grep -E "inode $V_INO([^0-9]|$)") || true
	[ -n "$lines" ] || ck_fail "$what: no daemon log line names inode $V_INO and chunk $V_HASH; log: $(tail -n 5 "$CK_DLOG" 2>/dev/null | tr '\n' '|')"
	for o in $(echo "$lines" | grep -o -E 'offset [0-9]+' | awk '{ print $2 }'); do
		[ "$o" -ge "$V_OFF" ] && [ "$o" -lt $((V_OFF + V_LEN)) ] && found=1
	done
	[ $found = 1 ] || ck_fail "$what: the log lines naming inode $V_INO and chunk $V_HASH give no offset in [$V_OFF, $((V_OFF + V_LEN))): $(echo "$lines" | head -n 3 | tr '\n' '|')"
}

# _verify_reports WHAT — `ckptfs-admin verify MNT` exits 1 and names the chunk
# (and only it).
_verify_reports() {
	local what=$1 out rc=0
	out=$(timeout 120 "$CKPTFS_ADMIN" verify "$CK_MNT" 2>&1) || rc=$?
	assert_eq 1 "$rc" "$what: exit status of ckptfs-admin verify (output: $(echo "$out" | tr '\n' '|'))"
	assert_contains "$out" "$V_HASH" "$what: ckptfs-admin verify output"
	assert_eq 1 "$(echo "$out" | awk '$1 == "chunks_bad" { print $2 }')" "$what: chunks_bad of ckptfs-admin verify (output: $(echo "$out" | tr '\n' '|'))"
}

_verify_ok() {
	local out rc=0
	out=$(timeout 120 "$CKPTFS_ADMIN" verify "$CK_MNT" 2>&1) || rc=$?
	assert_eq 0 "$rc" "exit status of ckptfs-admin verify on a whole store (output: $(echo "$out" | tr '\n' '|'))"
	assert_eq 0 "$(echo "$out" | awk '$1 == "chunks_bad" { print $2 }')" "chunks_bad on a whole store"
}

# _setup_files — victim (3 MiB random) and other (2 MiB random), written
# through a mount that is then unmounted; picks the victim chunk.
_setup_files() {
	ck_rand "$CK_REF/victim" $((5 * MiB))
	ck_rand "$CK_REF/other" $((2 * MiB))
	ck_mount
	cp "$CK_REF/victim" "$CK_MNT/victim"
	cp "$CK_REF/other" "$CK_MNT/other"
	ck_umount
	_pick_victim victim
	_assert_chunk_not_used_by other
}

# ---------------------------------------------------------------- cases

test_damaged_cache_copy_is_replaced_from_backing() {
	ck_rand "$CK_REF/victim" $((5 * MiB))
	ck_mount copy_uploads # two copies: BACKING shares the cache's filesystem here
	cp "$CK_REF/victim" "$CK_MNT/victim"
	ck_umount
	assert_eq 0 "$(find "$CK_BACKING/chunks" -type f -links +1 | wc -l)" "objects on BACKING linked despite copy_uploads"
	local ext hash cached
	ext=$(_extents victim | sed -n 2p)
	hash=${ext%%|*}
	cached=$CK_CACHE/chunks/${hash:0:2}/${hash:2:2}/$hash
	[ -f "$cached" ] || ck_fail "no cache copy of chunk $hash at $cached"
	ck_xor_byte "$cached" $(($(_hdr_len "$cached") + 1000))
	ck_mount
	_read_ok victim
	assert_contains "$(cat "$CK_DLOG")" "$hash" "a log line naming the damaged cache copy"
	ck_umount
	"$PY" "$CK_HELPERS/objcheck.py" "$CK_BACKING" "$CK_CACHE" >/dev/null || ck_fail "the cache copy was not replaced by a good one"
}

# BACKING on the cache's filesystem (the default here): every uploaded object
# is one file under two names, so a damaged cache copy is damage on BACKING
# too. Reads fail with EIO, never wrong bytes; verify names both copies;
# the byte restored, all is well again.
test_linked_copies_share_their_damage_and_read_as_eio() {
	ck_rand "$CK_REF/victim" $((5 * MiB))
	ck_mount
	cp "$CK_REF/victim" "$CK_MNT/victim"
	timeout 120 "$CKPTFS_ADMIN" wait "$CK_MNT" --timeout 60 >/dev/null || ck_fail "the uploads did not finish"
	assert_contains "$(cat "$CK_DLOG")" "hard links" "a log line saying objects are linked"
	ck_umount
	local n_obj=0 n_linked=0 o h ext hash="" cached V_OFF
	# an object under STORE_SMALL_MAX lives in the cache's small.db, not as a
	# file (a chunk cut at the random data's tail may be one): its BACKING
	# object is a copy; every other object is a link to the cache's file
	for o in $(find "$CK_BACKING/chunks" -type f); do
		h=$(basename "$o")
		[ -f "$CK_CACHE/chunks/${h:0:2}/${h:2:2}/$h" ] || continue
		n_obj=$((n_obj + 1))
		[ "$o" -ef "$CK_CACHE/chunks/${h:0:2}/${h:2:2}/$h" ] && n_linked=$((n_linked + 1))
	done
	[ "$n_obj" -ge 2 ] || ck_fail "only $n_obj objects on BACKING with a cache file"
	assert_eq "$n_obj" "$n_linked" "objects on BACKING that are links to the cache's"
	while IFS= read -r ext; do # the first extent past the first with a cache file
		IFS='|' read -r h V_OFF _ <<<"$ext"
		[ "$V_OFF" != 0 ] && [ -f "$CK_CACHE/chunks/${h:0:2}/${h:2:2}/$h" ] && hash=$h && break
	done < <(_extents victim)
	[ -n "$hash" ] || ck_fail "victim has no extent past its first with a cache file"
	cached=$CK_CACHE/chunks/${hash:0:2}/${hash:2:2}/$hash
	[ "$cached" -ef "$(_obj "$hash")" ] || ck_fail "the cache copy of $hash is not BACKING's file"
	ck_xor_byte "$cached" $(($(_hdr_len "$cached") + 1000))
	ck_mount
	_read_fails victim "payload byte flipped in the one linked copy"
	assert_contains "$(grep -F "$hash" "$CK_DLOG")" "payload does not match its CRC-32C" "log line of the damaged copy"
	timeout 120 "$CKPTFS_ADMIN" verify "$CK_MNT" >"$CK_TMP/verify.out" 2>&1 && ck_fail "verify passed with a damaged linked copy"
	assert_contains "$(cat "$CK_TMP/verify.out")" "corrupt chunk $hash in BACKING" "verify names BACKING's copy"
	ck_umount
	ck_xor_byte "$(_obj "$hash")" $(($(_hdr_len "$(_obj "$hash")") + 1000)) # the one file, whatever names it has left
	ck_mount
	_read_ok victim
	ck_umount
}

test_flipped_payload_byte_reads_as_eio_until_restored() {
	_setup_files
	local pos=$(($(_hdr_len "$V_OBJ") + $(_payload_len "$V_OBJ") / 2))
	ck_xor_byte "$V_OBJ" $pos
	ck_mount
	_read_fails victim "payload byte $pos flipped"
	_assert_logged_read_error "payload byte flipped"
	_read_ok other
	_verify_reports "payload byte flipped"
	# Still failing on a second try (nothing served from a cache).
	_read_fails victim "payload byte flipped, second read"
	# The original byte back, while mounted: reads work again.
	ck_xor_byte "$V_OBJ" $pos
	cmp -s "$V_SAVED" "$V_OBJ" || ck_fail "flipping the byte back did not restore $V_OBJ"
	_read_ok victim
	_read_ok other
	_verify_ok
	ck_umount
}

# The read path loads a cache copy whose pages are not in memory with
# O_DIRECT: a byte flipped on the disk is caught there too (the copy is
# dropped and BACKING's fetched), and when BACKING's copy is damaged as well
# the read fails with EIO, logged with the inode, the offset and the chunk.
test_damaged_cache_copy_read_from_disk_is_caught() {
	_setup_files
	local cached=$CK_CACHE/chunks/${V_HASH:0:2}/${V_HASH:2:2}/$V_HASH
	local pos=$(($(_hdr_len "$V_OBJ") + $(_payload_len "$V_OBJ") / 3))
	cp -p "$V_SAVED" "$cached"
	ck_sql "UPDATE chunks SET cached = 1 WHERE lower(hex(hash)) = '$V_HASH'" >/dev/null
	ck_xor_byte "$cached" $pos
	ck_xor_byte "$V_OBJ" $pos
	"$PY" -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)' "$cached"
	ck_mount
	_read_fails victim "payload byte $pos flipped in the cache copy and on BACKING"
	_assert_logged_read_error "payload byte flipped in both copies"
	assert_contains "$(grep -F "$CK_CACHE" "$CK_DLOG" | grep -F "$V_HASH")" "payload does not match its CRC-32C" \
		"log line of the damaged cache copy"
	_read_ok other
	ck_xor_byte "$V_OBJ" $pos # BACKING whole again: the read fetches it
	_read_ok victim
	ck_umount
}

# The CRC-32C field of a format-2 header (bytes 64-67) is checked like the
# payload it covers: damaged, the object is corrupt (EIO), however whole its
# payload is.
test_flipped_crc_field_reads_as_eio() {
	_setup_files
	assert_eq 72 "$(_hdr_len "$V_OBJ")" "header length of a new object (format 2)"
	ck_xor_byte "$V_OBJ" 65
	ck_mount
	_read_fails victim "CRC-32C field byte flipped"
	_assert_logged_read_error "CRC-32C field byte flipped"
	assert_contains "$(grep -F "$V_HASH" "$CK_DLOG")" "payload does not match its CRC-32C" "log line of the damaged header"
	_read_ok other
	_verify_reports "CRC-32C field byte flipped"
	ck_xor_byte "$V_OBJ" 65
	_read_ok victim
	ck_umount
}

# _forge_crc OBJ POS — flips the payload byte at POS of a format-2 object and
# rewrites the CRC-32C in its header to match the damaged payload: damage a
# CRC cannot see, only SHA-256 can.
_forge_crc() {
	"$PY" - "$1" "$2" <<'PYEOF'
import struct, sys
t = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    t.append(c)
def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF
path, pos = sys.argv[1], int(sys.argv[2])
data = bytearray(open(path, "rb").read())
assert struct.unpack_from("<H", data, 8)[0] == 2 and struct.unpack_from("<I", data, 12)[0] == 72
data[pos] ^= 0x5A
struct.pack_into("<I", data, 64, crc32c(bytes(data[72:])))
open(path, "r+b").write(bytes(data))
PYEOF
}

# -o verify=sha256: reads from the local cache re-hash every chunk, so a
# payload changed together with its CRC (which the default CRC-32C check
# would pass: it catches rot and torn writes, not a rewritten object) reads
# as EIO, logged as a hash mismatch; ckptfs-admin verify (always SHA-256)
# reports it too. BACKING is on the cache's filesystem (the default here):
# the one linked copy holds the damage, so nothing can repair it.
test_verify_sha256_catches_a_payload_rewritten_with_its_crc() {
	ck_rand "$CK_REF/victim" $((200 * 1024)) # one chunk, small enough for Python's CRC
	ck_rand "$CK_REF/other" $((2 * MiB))
	ck_mount verify=sha256
	cp "$CK_REF/victim" "$CK_MNT/victim"
	cp "$CK_REF/other" "$CK_MNT/other"
	timeout 120 "$CKPTFS_ADMIN" wait "$CK_MNT" --timeout 60 >/dev/null || ck_fail "the uploads did not finish"
	ck_umount
	local ext cached
	ext=$(_extents victim)
	assert_eq 1 "$(echo "$ext" | grep -c .)" "extents of a 200 KiB file"
	IFS='|' read -r V_HASH V_OFF V_LEN <<<"$ext"
	V_INO=$(_ino_of victim)
	cached=$CK_CACHE/chunks/${V_HASH:0:2}/${V_HASH:2:2}/$V_HASH
	[ -f "$cached" ] || ck_fail "no cache copy of chunk $V_HASH"
	_forge_crc "$cached" $((72 + 5000))
	# With packs=on (CKPTFS_TEST_MOUNT_OPTS) BACKING's object is not the cache
	# copy's link (a pack member, or a pack of one put loose as a copy): the
	# same rewrite goes there too, so again no good copy is left.
	local place
	place=$(ck_obj_place "$V_HASH")
	if ck_packs_on && ! [ "${place%% *}" -ef "$cached" ]; then
		ck_obj_get "$V_HASH" "$CK_TMP/member"
		_forge_crc "$CK_TMP/member" $((72 + 5000))
		ck_obj_put "$V_HASH" "$CK_TMP/member"
		echo "chunk $V_HASH on BACKING ($place) is not the cache copy's link: rewritten the same way" >&2
	fi
	ck_mount verify=sha256
	_read_fails victim "payload rewritten with a matching CRC, verify=sha256"
	_assert_logged_read_error "payload rewritten with a matching CRC"
	assert_contains "$(grep -F "$V_HASH" "$CK_DLOG")" "bytes do not match their hash" "log line of the rewritten object"
	_read_ok other
	_verify_reports "payload rewritten with a matching CRC"
	ck_umount
}

test_flipped_byte_in_a_compressed_chunk_reads_as_eio() {
	# Repetitive text: stored as LZ4.
	"$PY" -c 'import random, sys
r = random.Random(7); words = [b"layer.", b"weight ", b"bias ", b"0.125 ", b"norm\n"]
out = bytearray()
while len(out) < 3 << 20: out += r.choice(words)
open(sys.argv[1], "wb").write(out[:3 << 20])' "$CK_REF/victim"
	ck_rand "$CK_REF/other" $((2 * MiB))
	ck_mount
	cp "$CK_REF/victim" "$CK_MNT/victim"
	cp "$CK_REF/other" "$CK_MNT/other"
	ck_umount
	_pick_victim victim
	_assert_chunk_not_used_by other
	local codec
	codec=$(od -A n -t u1 -j 10 -N 1 "$V_OBJ" | tr -d ' ')
	assert_eq 1 "$codec" "codec byte of a chunk of repetitive text (LZ4)"
	assert_lt "$(_payload_len "$V_OBJ")" "$V_LEN" "LZ4 payload vs plain length"
	local pos=$(($(_hdr_len "$V_OBJ") + $(_payload_len "$V_OBJ") / 2))
	ck_xor_byte "$V_OBJ" $pos
	ck_mount
	_read_fails victim "LZ4 payload byte flipped"
	_assert_logged_read_error "LZ4 payload byte flipped"
	_read_ok other
	_verify_reports "LZ4 payload byte flipped"
	_restore
	_read_ok victim
	_verify_ok
	ck_umount
}

test_truncated_chunk_object_reads_as_eio() {
	_setup_files
	truncate -s $(($(_hdr_len "$V_OBJ") + $(_payload_len "$V_OBJ") / 2)) "$V_OBJ"
	ck_mount
	_read_fails victim "payload cut in half"
	_assert_logged_read_error "payload cut in half"
	_read_ok other
	_verify_reports "payload cut in half"
	# Cut inside the header, then to nothing at all.
	truncate -s 40 "$V_OBJ"
	_read_fails victim "header cut at 40 bytes"
	_verify_reports "header cut at 40 bytes"
	truncate -s 0 "$V_OBJ"
	_read_fails victim "empty object"
	_restore
	_read_ok victim
	_verify_ok
	ck_umount
}

test_deleted_chunk_object_reads_as_eio() {
	_setup_files
	rm -f "$V_OBJ"
	ck_mount
	_read_fails victim "object deleted"
	_assert_logged_read_error "object deleted"
	_read_ok other
	_verify_reports "object deleted"
	_restore
	_read_ok victim
	_verify_ok
	ck_umount
}

test_bad_header_reads_as_eio() {
	_setup_files
	# Magic, format version, header length, the hash field: each alone.
	local pos
	for pos in 0 8 12 40; do
		ck_xor_byte "$V_OBJ" $pos
		_evict_victim # the read after the last repair cached a good copy
		ck_mount
		_read_fails victim "header byte $pos flipped"
		_assert_logged_read_error "header byte $pos flipped"
		_read_ok other
		ck_xor_byte "$V_OBJ" $pos
		_read_ok victim
		ck_umount
	done
	# Another chunk's whole, valid object under the victim's name.
	local other_hash
	other_hash=$(_extents other | head -n 1 | cut -d'|' -f1)
	cp -p "$(_obj "$other_hash")" "$V_OBJ"
	_evict_victim
	ck_mount
	_read_fails victim "another chunk's object under this name"
	_read_ok other
	_verify_reports "another chunk's object under this name"
	ck_umount
}

# A payload length far past the object's size is corruption like any other:
# EIO, not ENOMEM from trying to allocate it (nor an abort under ASan).
test_absurd_payload_length_in_header_reads_as_eio() {
	_setup_files
	"$PY" -c 'import struct, sys
f = open(sys.argv[1], "r+b"); f.seek(24); f.write(struct.pack("<Q", 1 << 40)); f.close()' "$V_OBJ"
	ck_mount
	_read_fails victim "payload length 2^40 in the header"
	_assert_logged_read_error "payload length 2^40 in the header"
	_read_ok other
	_verify_reports "payload length 2^40 in the header"
	_restore
	_read_ok victim
	ck_umount
}

# ---- something other than a file planted at an object on BACKING

# _read_fails_fast WHAT — _read_fails victim, in under 5 s although BACKING's
# timeout is 10 s: a verdict is not retried (bkobj.h B1, B4).
_read_fails_fast() {
	local t0 ms
	t0=$(date +%s%N)
	_read_fails victim "$1"
	ms=$((($(date +%s%N) - t0) / 1000000))
	[ "$ms" -lt 5000 ] || ck_fail "$1: reading victim took $ms ms to fail: retried as if BACKING did not answer (backing_timeout=10)"
}

# _verify_names_planted WHAT WHY — verify counts the chunk corrupt (not
# unreadable), naming its path on BACKING and WHY.
_verify_names_planted() {
	local out rel=chunks/${V_HASH:0:2}/${V_HASH:2:2}/$V_HASH
	_verify_reports "$1"
	out=$(timeout 120 "$CKPTFS_ADMIN" verify "$CK_MNT" 2>&1) || true
	assert_contains "$out" "corrupt chunk $V_HASH in BACKING ($rel: $2" "$1: verify's line"
	assert_not_contains "$out" "unreadable chunk" "$1: verify's output"
	assert_eq 0 "$(echo "$out" | awk '$1 == "chunks_unreadable" { print $2 }')" "$1: chunks_unreadable of verify"
}

# bkobj.h B4 (review 47 F5): a symlink (to a good copy of the very object,
# outside BACKING) or a FIFO planted at a chunk object's path on BACKING is
# damage, not a BACKING that does not answer: the read fails EIO at once
# (before, each read request was retried for backing_timeout: 31 s for this
# file at 10 s), the log and verify name the path and what is there, the
# symlink is never followed and nothing planted is removed. Once the object
# is back, the file reads again.
test_a_symlink_or_fifo_planted_at_an_object_on_backing_is_damage_at_once() {
	_setup_files
	cp -p "$V_SAVED" "$CK_TMP/good.obj"
	rm -f "$V_OBJ"
	ln -s "$CK_TMP/good.obj" "$V_OBJ"
	ck_mount "backing_timeout=10"
	_read_fails_fast "a symlink at the object's path"
	_assert_logged_read_error "a symlink at the object's path"
	assert_contains "$(grep -F "$V_HASH" "$CK_DLOG")" "chunk $V_HASH is corrupt: a symlink at its path or on its way, not followed (chunks/${V_HASH:0:2}/${V_HASH:2:2}/$V_HASH)" "the log line of the symlink"
	_read_ok other
	_verify_names_planted "a symlink at the object's path" "a symlink at its path or on its way, not followed"
	[ -L "$V_OBJ" ] || ck_fail "the planted symlink was removed or replaced"
	cmp -s "$V_SAVED" "$CK_TMP/good.obj" || ck_fail "the symlink's target changed"
	# A FIFO in its place (nothing of the chunk was ever served to cache).
	rm -f "$V_OBJ"
	mkfifo -m 600 "$V_OBJ"
	_read_fails_fast "a FIFO at the object's path"
	_verify_names_planted "a FIFO at the object's path" "not a regular file but a directory, FIFO, socket or device"
	[ -p "$V_OBJ" ] || ck_fail "the planted FIFO was removed or replaced"
	rm -f "$V_OBJ"
	_restore
	_read_ok victim
	_verify_ok
	ck_umount
}

# ---- a new save of bytes whose object is damaged or gone (review2 F1)
#
# NAME a (3 MiB random) is written and unmounted; then the cache's object of
# its middle chunk is damaged (xor) or removed with BACKING's copy (rm); with
# BACKING on the cache's disk (the default here) BACKING's copy is the same
# file. The trainer saves the very same bytes again as b, with fsync, which
# succeeds: b must read back whole, as from a plain directory — the dedup hit
# on the damaged row is checked and the chunk stored again from the bytes
# written (writer.h invariant 6) — and, once uploaded, from BACKING alone.

# _resave_damage HOW — writes a, damages its middle chunk (HOW: xor | rm).
# Sets V_HASH, V_OFF, V_LEN.
_resave_damage() {
	local ext line obj
	ck_rand "$CK_REF/a" $((3 * MiB))
	cp "$CK_REF/a" "$CK_REF/b"
	ck_mount
	cp "$CK_REF/a" "$CK_MNT/a"
	ck_umount
	ext=$(_extents a)
	line=$(echo "$ext" | sed -n "$(($(echo "$ext" | grep -c .) / 2 + 1))p")
	IFS='|' read -r V_HASH V_OFF V_LEN <<<"$line"
	obj=$CK_CACHE/chunks/${V_HASH:0:2}/${V_HASH:2:2}/$V_HASH
	[ -f "$obj" ] || ck_fail "no cache object for chunk $V_HASH (is it a row of small.db?)"
	if [ "$1" = xor ]; then
		ck_xor_byte "$obj" $(($(_hdr_len "$obj") + 1000))
	else
		rm -f "$obj" "$(_obj "$V_HASH")"
	fi
}

# _resave_reads_back WHAT — saves b (a's bytes) with fsync; b reads back
# whole, the log names the chunk stored again, and after its upload b reads
# back from BACKING alone (its cache copy evicted).
_resave_reads_back() {
	local what=$1
	ck_mount
	"$PY" -c 'import os, sys
d = open(sys.argv[1], "rb").read()
fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, d); os.fsync(fd); os.close(fd)' "$CK_REF/b" "$CK_MNT/b" || ck_fail "$what: writing b and its fsync failed"
	assert_contains "$(_extents b | cut -d'|' -f1)" "$V_HASH" "$what: chunks of b"
	_read_ok b
	assert_contains "$(grep -F "$V_HASH" "$CK_DLOG")" "stored again" "$what: a log line naming the chunk"
	timeout 120 "$CKPTFS_ADMIN" wait "$CK_MNT" --timeout 60 >/dev/null || ck_fail "$what: the uploads did not finish"
	ck_umount
	_evict_victim
	ck_mount
	_read_ok b
	ck_umount
}

test_resave_of_bytes_whose_object_is_damaged_reads_back() {
	_resave_damage xor
	_resave_reads_back "a payload byte of the object flipped"
}

test_resave_of_bytes_whose_object_is_gone_reads_back() {
	_resave_damage rm
	_resave_reads_back "the object removed from the cache and BACKING"
}

ck_main "$@"
