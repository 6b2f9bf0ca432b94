#!/bin/bash
# t_writebuf — the writers' buffers are bounded (-o writebuf=, fs/wbuf.h,
# fs/writer.h invariant 8, review 38 F5): 64 files of a save opened at once
# and written interleaved keep the daemon's peak memory (VmHWM) near the
# bound, not 64 writer buffers; every file reads back byte for byte, the save
# commits and is durable; `ckptfs-admin stats` shows the writers staged. An
# invalid -o writebuf= is refused with one line. A file staged late (review
# 44 F2) puts only its bytes not stored yet into its staging file: the stored
# prefix is copied only once a write lands in it, and the file reads back
# byte for byte through reads while staged, a rewrite in the prefix, a
# truncate, a kill -9 after its close and a remount.
. "$(dirname "$0")/lib.sh"

ck_timeout test_many_files_at_once_stay_within_the_bound 240
ck_timeout test_a_file_staged_late_stages_only_what_is_not_stored 180

# _vmhwm PID — the peak resident set of PID, in KiB.
_vmhwm() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status"; }

# _write_many DIR N MIB — N files opened at once in DIR, each written MIB MiB
# in 256 KiB pieces, round robin: a random 4 KiB header, then a 64-byte
# pattern of its own repeated, as a tensor filled with a constant (a fresh
# optimizer's state), where the chunker finds no boundary and a writer
# buffers up to a maximal chunk; their SHA-256 in CK_REF/sums; then every
# one closed.
_write_many() {
	"$PY" - "$1" "$2" "$3" "$CK_REF/sums" <<'EOF'
import hashlib, os, random, sys
d, n, mib, sums = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
os.makedirs(d, exist_ok=True)
piece = 256 * 1024
fds, hs, rnds = [], [], []
for i in range(n):
    fds.append(os.open(os.path.join(d, "shard%02d.bin" % i), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    hs.append(hashlib.sha256())
    rnds.append(random.Random(1000 + i))
pats = [rnds[i].randbytes(64) * (piece // 64) for i in range(n)]
for k in range(mib * 1024 * 1024 // piece):
    for i in range(n):
        b = pats[i] if k else rnds[i].randbytes(4096) + pats[i][4096:]
        hs[i].update(b)
        assert os.write(fds[i], b) == piece
with open(sums, "w") as f:
    for i in range(n):
        f.write("%s  %s\n" % (hs[i].hexdigest(), os.path.join(d, "shard%02d.bin" % i)))
for fd in fds:
    os.close(fd)
EOF
}

test_many_files_at_once_stay_within_the_bound() {
	local bound_mib=16 n=64 mib=2 base peak limit
	ck_mount "writebuf=${bound_mib}M,quiet=0.5"
	# the daemon's own memory before any writer: catalog, caches, threads
	head -c 1M /dev/urandom >"$CK_MNT/warmup.bin"
	cat "$CK_MNT/warmup.bin" >/dev/null
	base=$(_vmhwm "$CK_PID")
	_write_many "$CK_MNT/run/checkpoint-100" $n $mib || ck_fail "writing $n files at once failed"
	peak=$(_vmhwm "$CK_PID")
	# Unbounded, 64 buffers of 2 MiB grew the daemon by ~130 MiB (main
	# before wbuf.h); bounded, by ~35. Allowed: the bound twice over (its
	# pages, the re-chunk buffers of staged commits running at once: wbuf.h
	# W3), and 32 MiB for what else grows with writing (recent's copies,
	# 16 MiB; the store queue's jobs; staging copies).
	limit=$((base + 2 * bound_mib * 1024 + 32 * 1024))
	ck_log "VmHWM: $((base / 1024)) MiB before, $((peak / 1024)) MiB after writing $n x $mib MiB at once (limit $((limit / 1024)) MiB)"
	# (under ASan, freed blocks sit in its quarantine and the shadow grows:
	# RSS says nothing about the writers' buffers there; the stats below do)
	[[ "$CKPTFS_BIN" == *asan* ]] || [ "$peak" -le "$limit" ] || ck_fail "the daemon's peak memory grew to $((peak / 1024)) MiB writing $n files at once with writebuf=${bound_mib}M (allowed $((limit / 1024)) MiB)"
	echo '{"global_step":100}' >"$CK_MNT/run/checkpoint-100/trainer_state.json"
	sha256sum --quiet -c "$CK_REF/sums" || ck_fail "files written at once read back different bytes"
	local staged bytes
	staged=$(ck_admin_stat writebuf_staged)
	bytes=$(ck_admin_stat writebuf_bytes)
	assert_eq "$((bound_mib << 20))" "$(ck_admin_stat writebuf_bound)" "writebuf_bound"
	[ "$staged" -gt 0 ] || ck_fail "no writer was staged at the bound (writebuf_staged $staged)"
	assert_eq 0 "$bytes" "writebuf_bytes with every file closed"
	ck_log "writers staged at the bound: $staged of $n"
	local wpeak
	wpeak=$(ck_admin_stat writebuf_peak)
	[ "$wpeak" -le $((bound_mib << 20)) ] || ck_log "writebuf_peak $wpeak: past the bound by staged commits' re-chunk buffers (wbuf.h W3)"
	[ "$wpeak" -le $((2 * bound_mib << 20)) ] || ck_fail "writebuf_peak $wpeak is more than twice the bound"
	local i=0
	until [ "$(ck_sql "SELECT count(*) FROM generations WHERE name = 'checkpoint-100' AND state = 1")" = 1 ]; do
		i=$((i + 1))
		[ $i -le 600 ] || ck_fail "the save checkpoint-100 did not commit within 60 s: $(ck_sql "SELECT name, state FROM generations" | tr '\n' ' ')"
		sleep 0.1
	done
	ck_wait_durable 120
	ck_umount
	ck_mount
	sha256sum --quiet -c "$CK_REF/sums" || ck_fail "files differ after a remount"
	ck_umount
}

test_a_file_staged_late_stages_only_what_is_not_stored() {
	local mib=1048576 size alloc found=0
	ck_mount "writebuf=8M"
	mkdir -p "$CK_MNT/run"
	ck_late_start "$CK_MNT/run"
	# 24 MiB streamed and stored; then hogs take the whole budget, and
	# bytes with no chunk boundary make big.bin's buffer grow: refused, so
	# staged at ~24 MiB
	ck_late a 24
	ck_late h 12
	ck_late P 8
	ck_late r 0 $((32 * mib))
	[ "$(ck_admin_stat writebuf_staged)" -gt 0 ] || ck_fail "no writer was staged"
	while read -r size alloc; do
		[ "$size" = $((32 * mib)) ] || continue
		found=1
		ck_log "big.bin's staging file: size $size, allocated $alloc"
		[ "$alloc" -le $((16 * mib)) ] || ck_fail "big.bin's staging file holds $alloc bytes of its 32 MiB: the stored prefix was copied into it"
	done < <(ck_staging_files "$CK_PID")
	[ $found = 1 ] || ck_fail "big.bin was not staged (staging files: $(ck_staging_files "$CK_PID" | tr '\n' ' '))"
	assert_eq 0 "$(ck_admin_stat writebuf_copied)" "writebuf_copied before a write into the stored prefix"
	# fsync commits the staged file: the prefix extents and the re-chunked rest
	sync "$CK_MNT/run/big.bin"
	ck_late a 4
	ck_late r $((20 * mib)) $((8 * mib))
	# a rewrite inside the stored prefix, after the switch: copied only now
	ck_late w $((5 * mib + 12345)) 300000
	[ "$(ck_admin_stat writebuf_copied)" -gt 0 ] || ck_fail "writebuf_copied 0 after a write below the staged point"
	ck_late r 0 $((36 * mib))
	ck_late t $((30 * mib + 777))
	ck_late w $((33 * mib)) 4096
	ck_late r 0 $((34 * mib))
	ck_late c
	ck_late_end
	sha256sum --quiet -c "$CK_REF/sums" || ck_fail "big.bin reads back different bytes after its close"
	assert_eq 0 "$(ck_admin_stat writebuf_bytes)" "writebuf_bytes with every file closed"
	ck_kill9
	ck_mount
	sha256sum --quiet -c "$CK_REF/sums" || ck_fail "big.bin differs after a kill -9 after its close"
	ck_umount
}

test_an_invalid_writebuf_is_refused_with_one_line() {
	local v rc lines
	for v in 1M -1 lots 99999999999999G ""; do
		ck_register_mount "$CK_MNT"
		rc=0
		timeout -k 5 20 "$CKPTFS_BIN" -f -o "$(ck_opts "cache=$CK_CACHE,writebuf=$v")" "$CK_BACKING" "$CK_MNT" >"$CK_TMP/out" 2>"$CK_TMP/err" </dev/null || rc=$?
		if ck_is_mounted "$CK_MNT"; then
			fusermount3 -u "$CK_MNT" 2>/dev/null || umount -l "$CK_MNT"
			ck_fail "writebuf=$v mounted (exit $rc) instead of being refused"
		fi
		[ $rc != 0 ] && [ $rc != 124 ] && [ $rc != 137 ] || ck_fail "writebuf=$v: exit $rc, expected a refusal"
		lines=$(grep -c '' "$CK_TMP/err") || true
		assert_eq 1 "$lines" "lines on stderr for writebuf=$v: $(tr '\n' '|' <"$CK_TMP/err")"
		assert_contains "$(cat "$CK_TMP/err")" "option 'writebuf=$v'" "the refusal"
		assert_contains "$(cat "$CK_TMP/err")" "at least 8M" "the refusal"
	done
}

ck_main "$@"
