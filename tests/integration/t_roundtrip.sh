#!/bin/bash
# t_roundtrip — bytes written through the mount read back byte-identical, before
# and after unmount + remount: sizes around page and chunk boundaries, large and
# sparse files, pre-sized (safetensors), out-of-order, overwrite, append.
. "$(dirname "$0")/lib.sh"

# ck_write_cmp_remount NAME... : each $CK_REF/NAME was copied to $CK_MNT/NAME;
# compares them now, remounts, compares again.
_cmp_all() {
	local n
	for n in "$@"; do
		assert_file_eq "$CK_REF/$n" "$CK_MNT/$n"
		assert_size "$CK_MNT/$n" "$(ck_size "$CK_REF/$n")"
	done
}

_roundtrip_sizes() {
	local names=() s
	ck_mount
	for s in "$@"; do
		ck_rand "$CK_REF/f$s" "$s"
		cat "$CK_REF/f$s" >"$CK_MNT/f$s"
		names+=("f$s")
	done
	_cmp_all "${names[@]}"
	ck_remount
	_cmp_all "${names[@]}"
	ck_umount
}

test_small_sizes_roundtrip_and_survive_remount() {
	_roundtrip_sizes 0 1 2 511 4095 4096 4097 65535 65536 65537 131073 1000000
}

test_sizes_around_chunk_boundaries_roundtrip() {
	local sizes=() b
	for b in $((512 * KiB)) $MiB $((4 * MiB)) $((8 * MiB)); do
		sizes+=($((b - 1)) $b $((b + 1)))
	done
	_roundtrip_sizes "${sizes[@]}"
}

# _chunk_edges NAME — the file offsets where NAME's extents start.
_chunk_edges() {
	ck_sql "SELECT e.off FROM extents e JOIN dirents d ON d.ino = e.ino WHERE d.name = '$1' ORDER BY e.off" | tr '\n' ' '
}

# _evict_objects — drops the cache's chunk objects from the page cache, so
# that the daemon reads them from the disk (with O_DIRECT).
_evict_objects() {
	"$PY" - "$CK_CACHE/chunks" <<'EOF'
import os, sys
for root, _, files in os.walk(sys.argv[1]):
    for f in files:
        fd = os.open(os.path.join(root, f), os.O_RDONLY)
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
EOF
}

# Reads at odd offsets and of odd sizes, half of them across chunk edges,
# return exactly what was written: with direct_io (a read-only open of a file
# of 8 MiB or more: the daemon gets each read as issued, split at 1 MiB and,
# for a buffer that is not page aligned, at its 257th page), through the page
# cache (-o read_cache: 1 MiB FUSE_READs of readahead), and with O_DIRECT; in
# a file with holes too, whose reads are more pieces (64 KiB of zeros each)
# than one reply maps, so the daemon copies them instead.
test_odd_reads_across_chunk_edges_are_byte_exact() {
	ck_mount
	ck_rand "$CK_REF/f" $((9 * MiB + 777))
	cp "$CK_REF/f" "$CK_MNT/f"
	local f
	for f in "$CK_REF/holes" "$CK_MNT/holes"; do
		head -c $((MiB + 5)) "$CK_REF/f" | dd of="$f" status=none
		dd if="$CK_REF/f" of="$f" bs=1M skip=2 count=2 seek=$((4 * MiB + 3)) oflag=seek_bytes conv=notrunc status=none
		truncate -s $((9 * MiB)) "$f"
	done
	ck_umount
	local edges hole_edges opts
	edges=$(_chunk_edges f)
	hole_edges="$(_chunk_edges holes) $((MiB + 5)) $((4 * MiB + 3)) $((6 * MiB + 3))"
	[ "$(echo "$edges" | wc -w)" -ge 3 ] || ck_fail "f has fewer than 3 chunks: $edges"
	for opts in "" read_cache; do
		_evict_objects
		ck_mount "$opts"
		"$PY" "$CK_HELPERS/randread.py" "$CK_REF/f" "$CK_MNT/f" 1 300 $edges ||
			ck_fail "reads of f differ from what was written (-o '$opts')"
		"$PY" "$CK_HELPERS/randread.py" "$CK_REF/f" "$CK_MNT/f" 5 200 --unaligned $edges ||
			ck_fail "reads of f into unaligned buffers differ from what was written (-o '$opts')"
		_evict_objects
		"$PY" "$CK_HELPERS/randread.py" "$CK_REF/f" "$CK_MNT/f" 2 300 --direct $edges ||
			ck_fail "O_DIRECT reads of f differ from what was written (-o '$opts')"
		"$PY" "$CK_HELPERS/randread.py" "$CK_REF/holes" "$CK_MNT/holes" 3 200 $hole_edges ||
			ck_fail "reads of the file with holes differ (-o '$opts')"
		"$PY" "$CK_HELPERS/randread.py" "$CK_REF/holes" "$CK_MNT/holes" 4 200 --direct --unaligned $hole_edges ||
			ck_fail "O_DIRECT reads of the file with holes differ (-o '$opts')"
		_cmp_all f holes
		ck_umount
	done
}

test_random_64mib_file_roundtrips() {
	ck_mount
	ck_rand "$CK_REF/big" $((64 * MiB))
	dd if="$CK_REF/big" of="$CK_MNT/big" bs=1M status=none
	_cmp_all big
	ck_remount
	_cmp_all big
	# A second, concurrent-free read through a fresh open (no page cache of
	# this mount yet after the remount above) gives the same hash.
	assert_eq "$(ck_sha256 "$CK_REF/big")" "$(ck_sha256 "$CK_MNT/big")" "sha256 of the 64 MiB file"
	ck_umount
}

test_unaligned_sequential_writes_roundtrip() {
	ck_mount
	ck_rand "$CK_REF/src" $((20 * MiB + 4321))
	# One stream of writes of random sizes 1 B .. 300 KB, never page aligned.
	"$PY" - "$CK_REF/src" "$CK_MNT/src" <<'EOF'
import os, random, sys
src = open(sys.argv[1], "rb").read()
rnd = random.Random(7)
fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
pos = 0
while pos < len(src):
    n = rnd.choice([1, 3, 100, 4095, 4097, rnd.randint(1, 300000)])
    pos += os.write(fd, src[pos:pos + n])
os.close(fd)
EOF
	_cmp_all src
	ck_remount
	_cmp_all src
	ck_umount
}

test_sparse_3gib_file_keeps_holes_and_content() {
	local size=$((3 * GiB)) off f
	ck_mount
	local before
	before=$(($(ck_du "$CK_BACKING") + $(ck_du "$CK_CACHE")))
	truncate -s 3G "$CK_MNT/sparse"
	truncate -s 3G "$CK_REF/sparse"
	assert_size "$CK_MNT/sparse" $size
	ck_rand "$CK_REF/blk" $((4 * MiB))
	# A few MiB at the start, unaligned in the middle, across the 2 GiB mark
	# and ending exactly at the end.
	for off in 0 $((GiB + 12345)) $((2 * GiB - 2 * MiB)) $((size - 4 * MiB)); do
		for f in "$CK_MNT/sparse" "$CK_REF/sparse"; do
			dd if="$CK_REF/blk" of="$f" bs=1M seek="$off" oflag=seek_bytes conv=notrunc status=none
		done
	done
	assert_size "$CK_MNT/sparse" $size
	# The written ranges now; the whole file (holes included) after a remount.
	for off in 0 $((GiB + 12345)) $((2 * GiB - 2 * MiB)) $((size - 4 * MiB)); do
		cmp -n $((4 * MiB)) -i "$off:0" "$CK_MNT/sparse" "$CK_REF/blk" ||
			ck_fail "the 4 MiB written at offset $off of the sparse file read back differently"
	done
	local want
	want=$(ck_sha256 "$CK_REF/sparse")
	ck_remount
	assert_size "$CK_MNT/sparse" $size
	assert_eq "$want" "$(ck_sha256 "$CK_MNT/sparse")" "sha256 of the 3 GiB sparse file after remount"
	ck_umount
	local grown
	grown=$(($(ck_du "$CK_BACKING") + $(ck_du "$CK_CACHE") - before))
	ck_log "BACKING+cache grew by $grown bytes for one 4 MiB block written at 4 places in a 3 GiB file"
	assert_lt "$grown" $((128 * MiB)) "bytes allocated in BACKING+cache for a 3 GiB sparse file with 16 MiB of data"
}
ck_slow test_sparse_3gib_file_keeps_holes_and_content
ck_timeout test_sparse_3gib_file_keeps_holes_and_content 240

test_offsets_beyond_4gib_roundtrip() {
	# 32-bit offset arithmetic fails here: data straddling 4 GiB and at 5 GiB.
	ck_mount
	ck_rand "$CK_REF/blk" $((MiB + 3))
	"$PY" - "$CK_REF/blk" "$CK_MNT/huge" <<'EOF'
import os, sys
blk = open(sys.argv[1], "rb").read()
offs = [(4 << 30) - 512 * 1024, (5 << 30) + 3, (1 << 32) * 3 - 7]
fd = os.open(sys.argv[2], os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
for o in offs:
    os.pwrite(fd, blk, o)
os.close(fd)
EOF
	ck_remount
	"$PY" - "$CK_REF/blk" "$CK_MNT/huge" <<'EOF'
import os, sys
blk = open(sys.argv[1], "rb").read()
offs = [(4 << 30) - 512 * 1024, (5 << 30) + 3, (1 << 32) * 3 - 7]
fd = os.open(sys.argv[2], os.O_RDONLY)
size = os.fstat(fd).st_size
if size != offs[-1] + len(blk):
    sys.exit("size %d, expected %d" % (size, offs[-1] + len(blk)))
for o in offs:
    got = os.pread(fd, len(blk), o)
    if got != blk:
        sys.exit("bytes written at offset %d read back differently (%d bytes)" % (o, len(got)))
    if os.pread(fd, 4096, o - 4096) != bytes(4096):
        sys.exit("the hole before offset %d is not zeros" % o)
os.close(fd)
EOF
	ck_umount
}

test_o_direct_writes_and_reads_roundtrip() {
	# DeepSpeed's FastPersist and some loaders use O_DIRECT.
	ck_mount
	ck_rand "$CK_REF/f" $((16 * MiB))
	dd if="$CK_REF/f" of="$CK_MNT/f" bs=1M oflag=direct status=none ||
		ck_fail "dd oflag=direct into the mount failed"
	assert_file_eq "$CK_REF/f" "$CK_MNT/f"
	ck_remount
	dd if="$CK_MNT/f" of="$CK_TMP/back" bs=1M iflag=direct status=none ||
		ck_fail "dd iflag=direct from the mount failed"
	assert_file_eq "$CK_REF/f" "$CK_TMP/back"
	ck_umount
}

test_presized_file_written_sequentially_roundtrips() {
	# safetensors >= 0.8: ftruncate to the final size, then write from 0.
	ck_mount
	ck_rand "$CK_REF/model.safetensors" $((24 * MiB + 12345))
	"$PY" "$CK_HELPERS/pwrite.py" "$CK_REF/model.safetensors" "$CK_MNT/model.safetensors" seq $MiB --presize
	ck_rand "$CK_REF/small.safetensors" 100001
	"$PY" "$CK_HELPERS/pwrite.py" "$CK_REF/small.safetensors" "$CK_MNT/small.safetensors" seq 4096 --presize --fsync
	_cmp_all model.safetensors small.safetensors
	ck_remount
	_cmp_all model.safetensors small.safetensors
	ck_umount
}

test_out_of_order_pwrites_roundtrip() {
	ck_mount
	ck_rand "$CK_REF/random_1m" $((32 * MiB + 777))
	ck_rand "$CK_REF/reverse_4k" $((8 * MiB))
	ck_rand "$CK_REF/interleave_64k" $((6 * MiB + 1))
	ck_rand "$CK_REF/presized_reverse" $((10 * MiB))
	"$PY" "$CK_HELPERS/pwrite.py" "$CK_REF/random_1m" "$CK_MNT/random_1m" random $MiB --seed 3
	"$PY" "$CK_HELPERS/pwrite.py" "$CK_REF/reverse_4k" "$CK_MNT/reverse_4k" reverse 4096
	"$PY" "$CK_HELPERS/pwrite.py" "$CK_REF/interleave_64k" "$CK_MNT/interleave_64k" interleave 65536
	"$PY" "$CK_HELPERS/pwrite.py" "$CK_REF/presized_reverse" "$CK_MNT/presized_reverse" reverse 1000000 --presize
	_cmp_all random_1m reverse_4k interleave_64k presized_reverse
	ck_remount
	_cmp_all random_1m reverse_4k interleave_64k presized_reverse
	ck_umount
}

test_overwrite_in_the_middle_keeps_the_rest() {
	local f
	ck_mount
	ck_rand "$CK_REF/f" $((10 * MiB))
	cp "$CK_REF/f" "$CK_MNT/f"
	ck_rand "$CK_REF/patch" $((MiB + 17))
	ck_rand "$CK_REF/tiny" 100
	for f in "$CK_REF/f" "$CK_MNT/f"; do
		# Unaligned, straddling the 4 MiB mark; a tiny one; and zeros over
		# data (an all-zero range must read back as zeros, not old bytes).
		dd if="$CK_REF/patch" of="$f" bs=1M seek=$((4 * MiB - 5)) oflag=seek_bytes conv=notrunc status=none
		dd if="$CK_REF/tiny" of="$f" bs=100 seek=$((7 * MiB + 3)) oflag=seek_bytes conv=notrunc status=none
		dd if=/dev/zero of="$f" bs=1M count=2 seek=$((MiB + 1)) oflag=seek_bytes conv=notrunc status=none
	done
	_cmp_all f
	ck_remount
	_cmp_all f
	# Overwrite again after the remount (a writer starting from committed data).
	for f in "$CK_REF/f" "$CK_MNT/f"; do
		dd if="$CK_REF/tiny" of="$f" bs=100 seek=$((9 * MiB)) oflag=seek_bytes conv=notrunc status=none
	done
	_cmp_all f
	ck_remount
	_cmp_all f
	ck_umount
}

test_append_extends_an_existing_file() {
	local f
	ck_mount
	ck_rand "$CK_REF/log" $((3 * MiB + 5))
	cp "$CK_REF/log" "$CK_MNT/log"
	ck_rand "$CK_REF/a1" 1
	ck_rand "$CK_REF/a2" $((2 * MiB + 3))
	for f in "$CK_REF/log" "$CK_MNT/log"; do
		cat "$CK_REF/a1" >>"$f"
		cat "$CK_REF/a2" >>"$f"
	done
	_cmp_all log
	ck_remount
	cat "$CK_REF/a1" >>"$CK_MNT/log"
	cat "$CK_REF/a1" >>"$CK_REF/log"
	_cmp_all log
	ck_remount
	_cmp_all log
	ck_umount
}

test_random_operations_match_a_reference_file() {
	local seed ops=300
	[ "$CK_QUICK" = 1 ] && ops=150
	ck_mount
	for seed in 1 2 3; do
		assert_ok "$PY" "$CK_HELPERS/fsx.py" "$CK_MNT/fsx$seed" "$CK_REF/fsx$seed" --seed $seed --ops $ops
	done
	ck_remount
	_cmp_all fsx1 fsx2 fsx3
	ck_umount
}
ck_timeout test_random_operations_match_a_reference_file 240

test_readers_see_bytes_written_before_close() {
	ck_mount
	ck_rand "$CK_REF/f" $((6 * MiB))
	# The writer keeps the file open; another process reads the prefix.
	"$PY" - "$CK_REF/f" "$CK_MNT/f" <<'EOF'
import os, subprocess, sys
src = open(sys.argv[1], "rb").read()
fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
for n in (1 << 20, 3 << 20, (5 << 20) + 1):
    os.write(fd, src[os.lseek(fd, 0, os.SEEK_CUR):n])
    with open(sys.argv[2], "rb") as r:
        got = r.read()
    if got != src[:n]:
        sys.exit("reader of the open file saw %d bytes (%s), expected the first %d written" %
                 (len(got), "a prefix" if src.startswith(got) else "different bytes", n))
os.write(fd, src[os.lseek(fd, 0, os.SEEK_CUR):])
os.close(fd)
EOF
	_cmp_all f
	ck_umount
}

# Real tensors (bf16 and fp32 weights, fp32 Adam states) saved with
# torch.save through a mount with -o codec=zstd: byte-identical after a
# remount, the chunks are stored as zstd byte planes (codec 4), BACKING holds
# fewer bytes than the file, and its marker says store format 4 (which a
# format-3 daemon refuses), still 4 after a mount with the default LZ4.
test_torch_tensors_with_codec_zstd_shrink_on_backing_and_read_back() {
	ck_mount codec=zstd
	"$PY" - "$CK_REF/ckpt.pt" <<'PYEOF'
import sys, torch
torch.manual_seed(7)
w = {"l%d.weight" % i: torch.randn(512, 512) * 0.02 for i in range(4)}
opt = {k: {"exp_avg": torch.randn_like(v) * 1e-3, "exp_avg_sq": (torch.randn_like(v) * 1e-3) ** 2}
       for k, v in w.items()}
torch.save({"model": {k: v.to(torch.bfloat16) for k, v in w.items()}, "master": w,
            "optimizer": opt}, sys.argv[1])
PYEOF
	cp "$CK_REF/ckpt.pt" "$CK_MNT/ckpt.pt"
	sync "$CK_MNT/ckpt.pt"
	_cmp_all ckpt.pt
	ck_wait_durable
	ck_remount codec=zstd
	_cmp_all ckpt.pt
	ck_umount
	local logical stored zstd
	logical=$(ck_size "$CK_REF/ckpt.pt")
	stored=$(ck_backing_object_bytes)
	zstd=$(ck_sql 'SELECT count(*) FROM chunks WHERE codec = 4')
	ck_log "BACKING holds $stored bytes of chunk objects for $logical logical bytes; $zstd zstd-planes chunks"
	[ "$stored" -lt $((logical * 90 / 100)) ] || ck_fail "BACKING holds $stored bytes for a $logical-byte checkpoint: not 10% smaller"
	[ "$zstd" -gt 0 ] || ck_fail "no chunk was stored as zstd planes (codec 4)"
	assert_eq "ckptfs store format $(ck_store_format 4)" "$(head -n 1 "$CK_BACKING/ckptfs.store")" "the marker of a store written with codec=zstd"
	ck_mount
	_cmp_all ckpt.pt
	ck_umount
	assert_eq "ckptfs store format $(ck_store_format 4)" "$(head -n 1 "$CK_BACKING/ckptfs.store")" "the marker after a mount with the default codec"
	ck_objcheck
}

# A store of format 3 (written with LZ4) becomes format 4 at its first mount
# with -o codec=zstd, and stays 3 when mounted with the default LZ4. Formats 3
# and 4 are stores without packs (a mount with packs=on writes 5): when the
# run turns packs on (CKPTFS_TEST_MOUNT_OPTS), this case mounts with
# packs=off.
test_store_format_3_becomes_4_with_codec_zstd_only() {
	local marker=$CK_BACKING/ckptfs.store lo=
	if ck_packs_on; then
		lo=packs=off,
		ck_log "the run has packs=on; this case is about formats 3 and 4 (stores without packs): it mounts with packs=off"
	fi
	ck_rand "$CK_REF/a" $((2 * MiB))
	ck_mount "${lo%,}"
	cp "$CK_REF/a" "$CK_MNT/a"
	ck_umount
	assert_eq "ckptfs store format 3" "$(head -n 1 "$marker")" "the marker of a store written with LZ4"
	ck_mount "${lo}codec=zstd"
	assert_contains "$(cat "$CK_DLOG")" "store format 3 upgraded to 4" "the daemon log of the first zstd mount"
	_cmp_all a
	ck_umount
	assert_eq "ckptfs store format 4" "$(head -n 1 "$marker")" "the marker after a mount with codec=zstd"
}

test_codec_option_rejects_an_unknown_value() {
	local rc=0
	"$CKPTFS_BIN" -f -o "$(ck_opts "cache=$CK_CACHE,codec=gzip")" "$CK_BACKING" "$CK_MNT" >"$CK_TMP/err" 2>&1 </dev/null || rc=$?
	[ $rc != 0 ] || ck_fail "ckptfs accepted -o codec=gzip"
	assert_eq 1 "$(wc -l <"$CK_TMP/err")" "lines of the error for -o codec=gzip"
	assert_contains "$(cat "$CK_TMP/err")" "expects codec=lz4 or codec=zstd" "the error for -o codec=gzip"
}

ck_main "$@"
