#!/bin/bash
# t_concurrency — many processes at once: parallel writers and readers, the
# same bytes written by several ranks (stored once), shifted copies (content-
# defined chunking finds them), O_APPEND writers, save racing rotation.
. "$(dirname "$0")/lib.sh"

# Bytes of all chunk objects in BACKING (headers included).
_backing_bytes() {
	find "$CK_BACKING" -type f -path '*/chunks/*' -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }'
}

test_parallel_writers_and_readers_are_byte_identical() {
	local size=$((32 * MiB)) i pids=() p rc bad=0
	[ "$CK_QUICK" = 1 ] && size=$((8 * MiB))
	for i in 1 2 3 4 5 6 7 8; do ck_rand "$CK_REF/w$i" $size; done
	for i in 1 2 3 4; do ck_rand "$CK_REF/r$i" $size; done
	ck_mount
	for i in 1 2 3 4; do cp "$CK_REF/r$i" "$CK_MNT/r$i"; done
	ck_remount # readers read from the store
	for i in 1 2 3 4 5 6 7 8; do
		ck_bg dd if="$CK_REF/w$i" of="$CK_MNT/w$i" bs=1M status=none
		pids+=("$CK_BG_PID:writer w$i")
	done
	for i in 1 2 3 4; do
		ck_bg cmp "$CK_REF/r$i" "$CK_MNT/r$i"
		pids+=("$CK_BG_PID:reader r$i")
	done
	for p in "${pids[@]}"; do
		rc=0
		ck_bg_wait "${p%%:*}" 300 || rc=$?
		[ $rc = 0 ] || {
			ck_log "${p#*:} exited with status $rc"
			bad=$((bad + 1))
		}
	done
	[ $bad = 0 ] || ck_fail "$bad of 12 concurrent writers/readers failed"
	for i in 1 2 3 4 5 6 7 8; do assert_file_eq "$CK_REF/w$i" "$CK_MNT/w$i"; done
	ck_remount
	for i in 1 2 3 4 5 6 7 8; do assert_file_eq "$CK_REF/w$i" "$CK_MNT/w$i"; done
	ck_umount
}
ck_timeout test_parallel_writers_and_readers_are_byte_identical 300

test_identical_content_from_4_processes_is_stored_once() {
	local size=$((32 * MiB)) i pids=() unique stored
	[ "$CK_QUICK" = 1 ] && size=$((16 * MiB))
	ck_rand "$CK_REF/a" $size
	ck_mount
	mkdir "$CK_MNT/replicas" # not a generation name: this case is about dedup
	# Four ranks write the same replicated shard to their own files at once.
	for i in 0 1 2 3; do
		ck_bg dd if="$CK_REF/a" of="$CK_MNT/replicas/__${i}_0.distcp" bs=1M status=none conv=fsync
		pids+=("$CK_BG_PID")
	done
	for i in "${pids[@]}"; do ck_bg_wait "$i" 300 || ck_fail "a writer failed"; done
	ck_umount
	unique=$(ck_unique_bytes)
	stored=$(_backing_bytes)
	ck_log "4 x $size bytes written: unique chunk bytes $unique, object bytes in BACKING $stored"
	assert_lt "$unique" $((size * 11 / 10)) "unique chunk bytes (catalog) for 4 identical files"
	assert_ge "$unique" "$size" "unique chunk bytes (catalog) cannot be less than one copy of random data"
	assert_lt "$stored" $((size * 11 / 10)) "object bytes in BACKING for 4 identical files"
	ck_mount
	for i in 0 1 2 3; do assert_file_eq "$CK_REF/a" "$CK_MNT/replicas/__${i}_0.distcp"; done
	ck_umount
}
ck_timeout test_identical_content_from_4_processes_is_stored_once 300

test_shifted_content_dedups_mostly() {
	# B = 100 bytes + A: fixed-size blocks would share nothing; content-
	# defined chunks realign after the first chunk or two.
	local size=$((48 * MiB)) unique
	ck_rand "$CK_REF/a" $size
	ck_rand "$CK_REF/b" 100
	cat "$CK_REF/a" >>"$CK_REF/b"
	ck_mount
	cp "$CK_REF/a" "$CK_MNT/a.ckpt"
	cp "$CK_REF/b" "$CK_MNT/b.ckpt"
	ck_umount
	unique=$(ck_unique_bytes)
	ck_log "A = $size bytes, B = 100 bytes + A: unique chunk bytes $unique ($((unique * 100 / size))% of one copy)"
	# At most two maximum-size (4 MiB) chunks more than one copy.
	assert_lt "$unique" $((size + 100 + 8 * MiB)) "unique chunk bytes for A and 100 bytes + A"
	ck_mount
	assert_file_eq "$CK_REF/a" "$CK_MNT/a.ckpt"
	assert_file_eq "$CK_REF/b" "$CK_MNT/b.ckpt"
	ck_umount
}

test_admin_stats_match_the_catalog() {
	local logical unique
	ck_rand "$CK_REF/a" $((6 * MiB + 5))
	ck_mount
	cp "$CK_REF/a" "$CK_MNT/a"
	cp "$CK_REF/a" "$CK_MNT/b"
	echo small >"$CK_MNT/c"
	ck_umount
	[ -x "$CKPTFS_ADMIN" ] || ck_fail "$CKPTFS_ADMIN is missing"
	logical=$(ck_admin_stat logical_bytes)
	unique=$(ck_admin_stat unique_bytes)
	assert_eq $((2 * (6 * MiB + 5) + 6)) "$logical" "ckptfs-admin stats logical_bytes (sum of file sizes)"
	assert_eq "$(ck_unique_bytes)" "$unique" "ckptfs-admin stats unique_bytes vs the catalog's chunks"
	assert_lt "$unique" $((7 * MiB)) "unique_bytes of two identical 6 MiB files"
}

test_two_processes_pwrite_disjoint_parts_of_one_file() {
	# Two writers (e.g. DCP writer threads, or async save processes) share one
	# pre-sized file, each filling alternate 1 MiB blocks.
	local size=$((24 * MiB)) p1 p2
	ck_rand "$CK_REF/f" $size
	ck_mount
	truncate -s $size "$CK_MNT/f"
	cat >"$CK_TMP/half.py" <<'EOF'
import os, sys
src, dst, parity = sys.argv[1], sys.argv[2], int(sys.argv[3])
data = open(src, "rb").read()
fd = os.open(dst, os.O_WRONLY)
for off in range(parity << 20, len(data), 2 << 20):
    os.pwrite(fd, data[off:off + (1 << 20)], off)
os.close(fd)
EOF
	ck_bg "$PY" "$CK_TMP/half.py" "$CK_REF/f" "$CK_MNT/f" 0
	p1=$CK_BG_PID
	ck_bg "$PY" "$CK_TMP/half.py" "$CK_REF/f" "$CK_MNT/f" 1
	p2=$CK_BG_PID
	ck_bg_wait $p1 120 || ck_fail "writer of the even blocks failed"
	ck_bg_wait $p2 120 || ck_fail "writer of the odd blocks failed"
	assert_file_eq "$CK_REF/f" "$CK_MNT/f"
	ck_remount
	assert_file_eq "$CK_REF/f" "$CK_MNT/f"
	ck_umount
}

test_concurrent_o_append_writers_keep_whole_records() {
	ck_mount
	local i pids=()
	for i in 0 1 2 3; do
		ck_bg "$PY" -c '
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
for n in range(500):
    rec = ("writer %s record %04d " % (sys.argv[2], n)).ljust(99, "x") + "\n"
    os.write(fd, rec.encode())
os.close(fd)' "$CK_MNT/log.txt" $i
		pids+=("$CK_BG_PID")
	done
	for i in "${pids[@]}"; do ck_bg_wait "$i" 120 || ck_fail "an O_APPEND writer failed"; done
	assert_size "$CK_MNT/log.txt" $((4 * 500 * 100))
	"$PY" - "$CK_MNT/log.txt" <<'EOF'
import re, sys
lines = open(sys.argv[1], "rb").read().split(b"\n")[:-1]
ok = [l for l in lines if re.fullmatch(rb"writer [0-3] record \d{4} x*", l) and len(l) == 99]
if len(ok) != 2000 or len(set(ok)) != 2000:
    sys.exit("%d whole distinct records out of 2000 (lines: %d)" % (len(set(ok)), len(lines)))
EOF
	ck_umount
}

test_checkpoint_rotation_racing_new_saves() {
	# TorchTitan keep_latest_k / HF save_total_limit: a purger rmtree's old
	# step directories while the trainer writes the next ones.
	local keep=3
	ck_mount
	"$PY" - "$CK_MNT/ckpt" $keep <<'EOF'
import os, re, shutil, sys, threading, time, hashlib
root, keep = sys.argv[1], int(sys.argv[2])
os.makedirs(root)
errors = []
done = threading.Event()
sums = {}

def purge():
    while True:
        finished = done.is_set()
        try:
            steps = sorted(int(m.group(1)) for m in (re.search(r"step-(\d+)$", n) for n in os.listdir(root)) if m)
            complete = [s for s in steps if os.path.exists(os.path.join(root, "step-%d" % s, ".metadata"))]
            for s in complete[:-keep]:
                shutil.rmtree(os.path.join(root, "step-%d" % s))
        except Exception as e:
            errors.append("purger: %r" % e)
            return
        if finished:
            return
        time.sleep(0.01)

t = threading.Thread(target=purge)
t.start()
for step in range(1, 13):
    d = os.path.join(root, "step-%d" % step)
    os.makedirs(d, exist_ok=True)
    for rank in range(4):
        data = os.urandom(1 << 20) + bytes([step, rank]) * 1000
        with open(os.path.join(d, "__%d_0.distcp" % rank), "wb") as f:
            f.write(data)
        sums[(step, rank)] = hashlib.sha256(data).hexdigest()
    with open(os.path.join(d, ".metadata.tmp"), "wb") as f:
        f.write(b"meta %d" % step)
        os.fsync(f.fileno())
    os.rename(os.path.join(d, ".metadata.tmp"), os.path.join(d, ".metadata"))
done.set()
t.join()
if errors:
    sys.exit(errors[0])
left = sorted(os.listdir(root))
want = sorted("step-%d" % s for s in range(13 - keep, 13))
if left != want:
    sys.exit("after rotation: %s, expected %s" % (left, want))
for s in range(13 - keep, 13):
    for rank in range(4):
        got = hashlib.sha256(open(os.path.join(root, "step-%d" % s, "__%d_0.distcp" % rank), "rb").read()).hexdigest()
        if got != sums[(s, rank)]:
            sys.exit("step-%d rank %d: content differs" % (s, rank))
EOF
	ck_umount
}

ck_main "$@"
