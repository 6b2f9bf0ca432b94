#!/usr/bin/env bash
# make bench — ckptfs beside a plain directory on the same disk, the same work
# in the same run, reported as ratios (see docs/BENCH.md).
#
#   scripts/bench.sh BUILD_DIR
#
#   BENCH_SCALE=small   all sizes 8x smaller (a quick run)
#   BENCH_ROUNDS=N      rounds (default 3); the table shows medians
#   BENCH_TMP=DIR       where the plain directory, BACKING and cache live
#                       (default /var/tmp; one filesystem for all three)
#   BENCH_PERF=1        in round 1, perf-record the daemon during the ckptfs
#                       phases and count the FUSE requests; print the profile
#   BENCH_PERF_KEEP=DIR with BENCH_PERF=1: copy the restore's perf data there
#   BENCH_ONLY=io|gen|meta|wb|codec|cost|restore  only the I/O phases (1-4),
#                       the generation phases (5-8), phase 5 alone, the
#                       write-back phases (9-12), the codec phase (13), the
#                       cost phase (14) or the nfs:// restore phase (15 = 12 at
#                       4 x 1 GiB); default all (everything but 15)
#   BENCH_MOUNT_OPTS=o1,o2  more -o options for every ckptfs mount of the bench
#                       (e.g. packs=on, to measure fs/uppack.h against the default)
#   BENCH_ONLY=multinode  phase 16 alone (in the default list too, about 2 min;
#                       skipped there without a PostgreSQL server)
#   BENCH_WB_BW=B/S     the faultfs throttle of phases 9-11 (default 100000000)
#   BENCH_COST_LATENCY_MS=N  faultfs latency_ms of phase 14 (default 1)
#   BENCH_COST_OPTS=OPTS     ckptfs mount options of phase 14 (default none)
#   BENCH_RESTORE_OPTS=OPTS  ckptfs mount options of the nfs:// restoring node
#                       of phases 12/15 (default none; e.g. prefetch=32)
#   BENCH_CODECS="lz4 zstd"  the -o codec= values of phase 13 ("default": no
#                       -o codec=, for a build that predates it)
#
# Per round, on a fresh mount (fresh BACKING and cache), each workload runs on
# the plain directory and on the mount back to back, the order alternating
# between rounds:
#   1. unique write     4 files x 1 GiB of random data, 4 concurrent writers,
#                       1 MiB writes, fsync, close
#   2. cold read        the same 4 files after sync + drop_caches, 4 concurrent
#                       readers, 1 MiB reads; then (untimed) compared byte for byte
#   3. replicated write 8 replicas = a name-dependent header (0..200 bytes) + the
#                       same 512 MiB random payload, 8 concurrent writers, fsync;
#                       then (untimed) compared byte for byte
#   4. daemon peak RSS  VmHWM of the daemon at the end of the round
# The generation phases (scripts/bench_gen.py; sizes for full, BENCH_SCALE=small
# divides the file counts and save sizes by 8), each round on fresh mounts
# (8 on one with -o keep=1). Phase 5 runs first, before phases 1-4, because
# files the bench deletes slow down creates on the plain side (see there);
# 6-8 run last:
#   5. metadata rate    10 000 files: create + one 4 KiB write + close, one
#                       process, in one generation directory (meta/step-1) and
#                       in a plain directory (flat/); files/s; also with the
#                       syncfs after each block counted. The two sides run in
#                       10 blocks each, interleaved (A B B A ...), so that they
#                       share the background load
#   6. rm -rf           a committed generation of 10 000 files of 1 KiB in 10
#                       subdirectories (+ its DCP files) against the same tree
#                       in the plain directory; seconds
#   7. commit latency   20 DCP-style saves (ckptfs only): 2 x 64 MiB written,
#                       fsync'd, closed, then .metadata.tmp written, fsync'd,
#                       closed and renamed onto .metadata; ms from the start of
#                       that rename until user.ckptfs.generation says
#                       state=committed; median and p95 over all rounds' saves
#   8. keep-latest-k    keep=1: with a committed generation of 10 000 files
#                       (as in 6), commit a small one; seconds from the start
#                       of its rename until the old one is out of the
#                       namespace (stat ENOENT, not listed), and when the new
#                       one showed as committed. Once just after writing the
#                       old one, once after a remount (its inodes not cached)
# These phases wait for `sync` + 1 s before each timed part but do not drop
# the caches: they measure the daemon's metadata work, not cold reads of the
# (shared, virtual) disk.
# The write-back phases (scripts/bench_wb.py), per round; BACKING is a slow
# network store: tests/faultfs over a local directory throttled to
# BENCH_WB_BW (100 MB/s), then nfs:// to a private nfs-ganesha on 127.0.0.1
# (tests/nfs/ganesha.sh). A save is 4 files x 512 MiB of random data (small:
# x 64 MiB), 4 concurrent writers, 1 MiB writes, fsync, close, into step-1/
# of a fresh ckptfs (default -o sync=local), then the commit xattr:
#   9. save             seconds until the save returns through the mount, and
#                       until it is durable on BACKING (catalog: no upload
#                       queued, durable_version = version), against the same
#                       files written (fsync) straight into the throttled mount
#  10. cold restore     unmount; a fresh node (new empty cache: the catalog is
#                       rebuilt from BACKING's manifests); drop_caches; 4
#                       concurrent readers through the mount, against reading
#                       the straight copy from the throttled mount
#  11. warm restore     drop_caches, read again (chunks now in the local
#                       cache), against a plain local directory with the same
#                       files; then (untimed) compared byte for byte
#  12. nfs://           9 and 10 with BACKING = the ganesha URL, against
#                       ganesha's own speed through libnfs for the same bytes
#                       (build/backing-tool put / get, 4 at once)
# The cost phase (issue 20 part 2), per round, on a fresh faultfs BACKING that
# adds BENCH_COST_LATENCY_MS (1) to each operation, no throttle:
#  14. cost             a save of 4 files x 256 MiB of random data (small: x 32
#                       MiB) through the mount as in 9, until durable, against
#                       cp of the same files into the faultfs mount + `sync` of
#                       each file and the directory (fsyncs reaching faultfs);
#                       the daemon's CPU seconds per GiB of unique data
#                       (/proc/PID/stat utime+stime from the first write to
#                       durable, and for the writes alone), and the BACKING
#                       operations per GiB uploaded (faultfs's own op counts
#                       for the ckptfs side: fsync of files, of directories,
#                       create, rename, mkdir, getattr, write, all)
# The nfs:// restore phase (issue 20 part 4), BENCH_ONLY=restore only: phase 12
#  15. with 4 x 1 GiB (small: 4 x 128 MiB): the cold restore by 4 readers on a
#                       fresh node against backing-tool get of the same bytes;
#                       after it, the daemon's own account of where its reads
#                       waited (the "reader:" line it logs at unmount: chunks
#                       prefetched, reads that found theirs loaded ahead,
#                       waited for a load under way, or loaded it themselves).
# The multi-node phase (issue 18; needs apt-get install postgresql), per round: a
# private PostgreSQL 15 (tests/pg/pgserver.sh) and two daemons with -o meta=
# over one BACKING directory, each its own cache and mountpoint (nodes A, B),
# beside one daemon on its SQLite catalog; the order alternates by round:
#  16. multi-node       one checkpoint of 4 shards x 256 MiB of random data
#                       (small: x 32 MiB), 1 MiB writes, fsync, close, then
#                       the completion signal (.metadata.tmp renamed onto
#                       .metadata) until state=committed: 4 writers through the
#                       one SQLite node against 2 writers through each of A and
#                       B at once; aggregate MB/s (target >= 0.9x). The
#                       PostgreSQL round trips of both nodes for it until
#                       their uploads are done, per GiB written (ckptfs-admin
#                       stats: pg_round_trips; the FUSE path's connection,
#                       not the lease's), and save -> durable: ms from the
#                       commit seen until both nodes' upload queues (chunks
#                       and the manifest) are empty. Each side's CPU-s per GiB
#                       from the first write until committed: its daemon(s),
#                       its PostgreSQL (postmaster and backends) and the
#                       writers (with bench_mn.py). Then 20
#                       small saves (2 x 1 MiB, shard 0 written on A, shard 1
#                       on B, the signal on A): ms from the start of the rename
#                       on A until node B reads state=committed (scripts/
#                       bench_mn.py); median and p95 over all rounds (target
#                       p95 < 100 ms).
# The codec phase (scripts/bench_ckpt.py, build/codec-bench), once, < 3 min:
#  13. real tensors     a small character-level model trained here for a few
#                       hundred Adam steps, saved as a mixed-precision trainer
#                       saves it (bf16 weights, fp32 master weights, fp32 Adam
#                       exp_avg and exp_avg_sq) with torch.save and as
#                       safetensors; each file, and 256 MiB of random bytes,
#                       written (1 MiB writes, fsync) to a fresh mount per
#                       -o codec= value; after `ckptfs-admin umount` (uploads
#                       done): BACKING's chunk object bytes / logical bytes
#                       (targets: <= 0.87 with lz4, <= 0.80 with zstd), write
#                       MB/s and the daemon's CPU seconds per GiB; a remount
#                       reads each file back byte for byte. Then codec-bench:
#                       fs/lib/codec.c alone, encode and decode MB per CPU-second
#                       on the same files (zstd_planes= counts codec 4 chunks).
#
# A benchmark, not a test: a missed target prints "no" and the exit status is
# still 0. It is 1 when something breaks: data read back differs from what was
# written, a worker fails, the daemon dies.
set -euo pipefail

BUILD=${1:?usage: scripts/bench.sh BUILD_DIR}
BIN=$(cd "$BUILD" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
IO="$HERE/bench_io.py"
GEN="$HERE/bench_gen.py"
MiB=1048576
HZ=$(getconf CLK_TCK)

case "${BENCH_SCALE:-full}" in
full) div=1 ;;
small) div=8 ;;
*) echo "bench: BENCH_SCALE must be full or small" >&2; exit 2 ;;
esac
ROUNDS=${BENCH_ROUNDS:-3}
PERF=${BENCH_PERF:-0}
NWRITERS=4
NREPLICAS=8
UNIQUE_FILE=$((1024 * MiB / div)) # per writer
REPLICA=$((512 * MiB / div))      # payload per replica
TMPROOT=${BENCH_TMP:-/var/tmp}
run_meta=0 run_cost=0 run_wbfs=1 run_mn=0 # phase 5 (with gen), 14, 9-11 (with wb), 16
case "${BENCH_ONLY:-all}" in
all) run_io=1 run_gen=1 run_wb=1 run_codec=1 run_meta=1 run_cost=1 run_mn=1 ;;
io) run_io=1 run_gen=0 run_wb=0 run_codec=0 ;;
gen) run_io=0 run_gen=1 run_wb=0 run_codec=0 run_meta=1 ;;
meta) run_io=0 run_gen=0 run_wb=0 run_codec=0 run_meta=1 ;;
wb) run_io=0 run_gen=0 run_wb=1 run_codec=0 ;;
codec) run_io=0 run_gen=0 run_wb=0 run_codec=1 ;;
cost) run_io=0 run_gen=0 run_wb=0 run_codec=0 run_cost=1 ;;
restore) run_io=0 run_gen=0 run_wb=1 run_codec=0 run_wbfs=0 ;;
multinode) run_io=0 run_gen=0 run_wb=0 run_codec=0 run_mn=1 ;;
*) echo "bench: BENCH_ONLY must be io, gen, meta, wb, codec, cost, restore or multinode (or unset: all)" >&2; exit 2 ;;
esac
COST_FILE=$((256 * MiB / div))             # phase 14: bytes per file (4 files)
COST_LAT=${BENCH_COST_LATENCY_MS:-1}       # phase 14: faultfs latency_ms
COST_OPTS=${BENCH_COST_OPTS:-}             # phase 14: mount options of the ckptfs side (e.g. upload_threads=8)
RESTORE_OPTS=${BENCH_RESTORE_OPTS:-}       # phases 12/15: mount options of the restoring node (e.g. prefetch=32)
CODECS=${BENCH_CODECS:-lz4 zstd} # phase 13
CKPT=$HERE/bench_ckpt.py
CKPT_STEPS=200                   # phase 13: Adam steps
CKPT_HIDDEN=768                  # phase 13: the model's width (1.6 M parameters, 22 MB per file)
CODEC_RANDOM=$((256 * MiB))      # phase 13: random bytes (the unique-write CPU)
WB_NFILES=4                    # phases 9-12: files per save (concurrent writers)
WB_FILE=$((512 * MiB / div))   # phases 9-12: bytes per file
[ "$run_wbfs" = 1 ] || WB_FILE=$((1024 * MiB / div)) # phase 15: 4 GiB (small: 512 MiB)
WB_BW=${BENCH_WB_BW:-100000000} # phases 9-11: faultfs bw= (bytes/s)
WB=$HERE/bench_wb.py
FAULTFS=$BIN/faultfs
BTOOL=$BIN/backing-tool
GANESHA=$HERE/../tests/nfs/ganesha.sh
NULLFS=$BIN/nullfs
FLOOR=${BENCH_FLOOR:-1}       # the FUSE floor (nullfs) beside phases 1-3 and 5
NFILES=$((10000 / div))     # phases 5, 6, 8: files per directory / generation
META_SIZE=4096              # phase 5: bytes per file
META_BLOCKS=10              # phase 5: blocks per side, alternating between the sides
DEL_SIZE=1024               # phases 6, 8: bytes per file
DEL_SUBDIRS=10              # phases 6, 8: subdirectories of the generation
MN_NSHARDS=4                # phase 16: shards per checkpoint (half through each node)
MN_FILE=$((256 * MiB / div)) # phase 16: bytes per shard
MN_NSAVES=20                 # phase 16: small saves per round (commit latency across nodes)
MN_SAVE=$MiB                 # phase 16: bytes per shard of a small save
MN=$HERE/bench_mn.py
PGSERVER=$HERE/../tests/pg/pgserver.sh
NSAVES=20                   # phase 7: saves per round
SAVE_FILE=$((64 * MiB / div)) # phase 7: bytes per .distcp file (2 per save)

die() { echo "bench: $*" >&2; exit 1; }
if [ ! -x "$BIN/ckptfs" ] || [ ! -x "$BIN/ckptfs-admin" ]; then die "no ckptfs in $BIN (run make first)"; fi
"$PY" -c 'import numpy' 2>/dev/null || die "$PY cannot import numpy (apt-get install python3-numpy)"
if [ "$PERF" = 1 ] && ! command -v perf >/dev/null; then die "BENCH_PERF=1 needs perf (apt-get install linux-perf)"; fi
if { [ "$run_wb" = 1 ] || [ "$run_cost" = 1 ]; } && { [ ! -x "$FAULTFS" ] || [ ! -x "$BTOOL" ]; }; then
	echo "bench: building $BUILD/faultfs and $BUILD/backing-tool for the write-back phases"
	make -C "$HERE/.." -s BUILD="$BUILD" "$BUILD/faultfs" "$BUILD/backing-tool" >/dev/null ||
		die "could not build $FAULTFS and $BTOOL"
fi
if [ "$run_mn" = 1 ] && ! ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1; then
	[ "${BENCH_ONLY:-all}" = all ] || die "BENCH_ONLY=multinode needs a PostgreSQL server (apt-get install postgresql)"
	echo "bench: no PostgreSQL server: phase 16 (multi-node) is skipped (apt-get install postgresql)"
	run_mn=0
fi
if [ "$run_codec" = 1 ] && [ ! -x "$BIN/codec-bench" ]; then
	make -C "$HERE/.." -s BUILD="$BUILD" "$BUILD/codec-bench" >/dev/null || echo "bench: no $BUILD/codec-bench: phase 13 skips the microbenchmark"
fi
if [ "$FLOOR" = 1 ] && { [ "$run_io" = 1 ] || [ "$run_meta" = 1 ]; } && [ ! -x "$NULLFS" ]; then
	echo "bench: building $BUILD/nullfs for the FUSE floor"
	make -C "$HERE/.." -s BUILD="$BUILD" "$BUILD/nullfs" >/dev/null || die "could not build $NULLFS"
fi
wb_nfs=0
if [ "$run_wb" = 1 ]; then
	if command -v ganesha.nfsd >/dev/null && [ -x "$GANESHA" ]; then wb_nfs=1; else
		echo "bench: nfs-ganesha is not installed: phase 12 (nfs://) is skipped (apt-get install nfs-ganesha nfs-ganesha-vfs rpcbind libnfs-utils)"
	fi
fi

# ---- temp space, cleanup: only what this script started ---------------------

work=$(mktemp -d "$TMPROOT/ckptfs-bench.XXXXXX")
shm=$(mktemp -d /dev/shm/ckptfs-bench.XXXXXX)
mnt='' pid='' perf_pids=()
workers=()
fmnt='' fpid='' gdir='' # the faultfs mount and its PID, ganesha's directory (phases 9-12)
nmnt='' npid=''         # the nullfs mount (the FUSE floor) and its PID

stop_daemon() {
	if [ -n "$mnt" ] && mountpoint -q "$mnt" 2>/dev/null; then
		fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
	fi
	if [ -n "$pid" ]; then
		local i
		for i in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		if kill -0 "$pid" 2>/dev/null; then
			echo "bench: daemon $pid still running 10 s after unmount; killing it" >&2
			kill "$pid" 2>/dev/null || true
		fi
		wait "$pid" 2>/dev/null || true
	fi
	mnt='' pid=''
}

perf_stop() {
	local p
	for p in "${perf_pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
	for p in "${perf_pids[@]}"; do wait "$p" 2>/dev/null || true; done
	perf_pids=()
}

# Waits up to 10 s for a FUSE daemon (PID $2) to mount on $1. Returns 1,
# after printing its log $3, if it exits or does not mount in time.
wait_mounted() {
	local m=$1 p=$2 log=$3 i
	for i in $(seq 200); do
		mountpoint -q "$m" && return 0
		kill -0 "$p" 2>/dev/null || break
		sleep 0.05
	done
	cat "$log" >&2
	return 1
}

# Unmounts the FUSE helper mounted on $1 (if it is) and stops its PID $2
# (if set): it gets 5 s to exit by itself, then SIGTERM.
helper_down() {
	local m=$1 p=$2 i
	if [ -n "$m" ] && mountpoint -q "$m" 2>/dev/null; then
		fusermount3 -u "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
	fi
	if [ -n "$p" ]; then
		for i in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	fi
}

# The faultfs mount of phases 9-11 (after the daemon that uses it as BACKING).
faultfs_down() {
	helper_down "$fmnt" "$fpid"
	fmnt='' fpid=''
}

# nullfs (tests/nullfs): the same requests as ckptfs, no storage behind them.
nullfs_up() {
	mkdir -p "$work/null/mnt"
	"$NULLFS" -f -o default_permissions "$work/null/mnt" 2>>"$work/null/nullfs.log" &
	npid=$! nmnt=$work/null/mnt
	wait_mounted "$nmnt" "$npid" "$work/null/nullfs.log" || die "nullfs did not mount on $nmnt"
	# as ckptfs does at mount (ops_tune_readahead): 1 MiB FUSE reads
	if [ "$(id -u)" = 0 ]; then echo 1024 >"/sys/class/bdi/$(mountpoint -d "$nmnt")/read_ahead_kb" || true; fi
}

nullfs_down() {
	helper_down "$nmnt" "$npid"
	nmnt='' npid=''
}

ganesha_down() {
	if [ -n "$gdir" ]; then "$GANESHA" stop "$gdir" >/dev/null 2>&1 || true; fi
	gdir=''
}

# Phase 16's nodes (mounts and PIDs, in order) and private PostgreSQL: the
# daemons stop first (they still need the server to leave their leases).
mn_mnts=() mn_pids=() pgdir=''
mn_down() {
	local i
	for i in "${!mn_pids[@]}"; do helper_down "${mn_mnts[$i]}" "${mn_pids[$i]}"; done
	mn_mnts=() mn_pids=()
	if [ -n "$pgdir" ]; then "$PGSERVER" stop "$pgdir" >/dev/null 2>&1 || true; fi
	pgdir=''
}

cleanup() {
	local w
	for w in "${workers[@]}"; do kill "$w" 2>/dev/null || true; done
	perf_stop
	stop_daemon
	mn_down
	faultfs_down
	nullfs_down
	ganesha_down
	rm -rf "$work" "$shm"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- helpers ----------------------------------------------------------------

now_ns() { date +%s%N; }

# Starts the daemon on BACKING and cache under $1 (fresh unless a daemon ran
# there before), with the mount options $2 if given; BACKING $3 and cache $4
# instead if given; sets mnt, pid, backing, conn (the FUSE connection number,
# for tracepoint filtering).
start_daemon() {
	local d=$1
	backing=${3:-$d/backing} cache=${4:-$d/cache} mnt=$d/mnt
	case $backing in nfs://*) ;; *) mkdir -p "$backing" ;; esac
	mkdir -p "$cache" "$mnt"
	local o=${2:-}
	[ -n "${BENCH_MOUNT_OPTS:-}" ] && o=${o:+$o,}$BENCH_MOUNT_OPTS
	"$BIN/ckptfs" -f -o cache="$cache${o:+,$o}" "$backing" "$mnt" 2>>"$d/daemon.log" &
	pid=$!
	if wait_mounted "$mnt" "$pid" "$d/daemon.log"; then
		conn=$(mountpoint -d "$mnt" | cut -d: -f2)
		return 0
	fi
	die "mount of $mnt failed"
}

check_daemon() {
	if ! kill -0 "$pid" 2>/dev/null || ! mountpoint -q "$mnt"; then
		tail -20 "$work"/r*/daemon.log >&2 || true
		die "the daemon (pid $pid) died or the mount is gone"
	fi
}

# Cold state before every timed phase: nothing dirty, nothing cached. The
# pause lets a VM's free-page reporting (virtio-balloon) hand the dropped pages
# back to the host, so that every timed phase starts from the same state.
settle() {
	sync
	if [ "$can_drop" = 1 ]; then echo 3 >/proc/sys/vm/drop_caches; fi
	sleep 3
}

# run_group "CMD ARGS" ... — runs the command lines concurrently (no argument
# may contain spaces), waits for all, sets $elapsed (seconds). Dies if any of
# them fails. Runs in this shell, so that the EXIT trap can stop the workers.
run_group() {
	local t0 t1 rc=0 w
	workers=()
	t0=$(now_ns)
	set -f # nfs:// URLs hold a '?'
	for w in "$@"; do
		# shellcheck disable=SC2086
		$w &
		workers+=($!)
	done
	set +f
	for w in "${workers[@]}"; do wait "$w" || rc=1; done
	t1=$(now_ns)
	workers=()
	[ "$rc" = 0 ] || die "a worker failed (see above)"
	elapsed=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
}

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
sys_ticks() { awk '{ print $15 }' "/proc/$pid/stat"; }
stat_of() { "$BIN/ckptfs-admin" stats "$mnt" | awk -v k="$1" '$1 == k { print $2 }'; }
chunks_du() { du -sb "$backing/chunks" 2>/dev/null | cut -f1 || echo 0; }
chunks_files() { find "$backing/chunks" -type f -printf '%s\n' 2>/dev/null | awk '{ s += $1 } END { printf "%.0f\n", s }'; }
mbps() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.0f", b / 1e6 / s }'; }
div() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
max() { tr ' ' '\n' | grep -v '^$' | sort -g | tail -1; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# perf_start LABEL — in round 1 with BENCH_PERF=1: a call-graph profile of the
# daemon, and every FUSE request sent on any connection (filtered to ours later).
perf_start() {
	[ "$PERF" = 1 ] && [ "$r" = 1 ] || return 0
	perf record -g -o "$work/perf-$1.data" -p "$pid" >/dev/null 2>&1 &
	perf_pids+=($!)
	perf record -e fuse:fuse_request_send -a -o "$work/fuse-$1.data" >/dev/null 2>&1 &
	perf_pids+=($!)
	echo "$conn" >"$work/conn-$1"
	sleep 1
}

perf_print() {
	local label=$1 what=$2
	[ -s "$work/perf-$label.data" ] || return 0
	echo
	echo "== perf: the daemon during the $what (round 1; self time)"
	echo "   by library:"
	perf report -i "$work/perf-$label.data" --no-children -g none --sort dso --stdio 2>/dev/null |
		grep -E '^ +[0-9]' | head -8 | sed 's/^ */     /' || true
	echo "   top symbols:"
	perf report -i "$work/perf-$label.data" --no-children -g none --sort dso,sym --stdio 2>/dev/null |
		grep -E '^ +[0-9]' | head -15 | sed 's/^ */     /' || true
	if [ "$label" = nc ]; then # the restore: by thread (named by fs/reader.c, fs/cache.c)
		echo "   by thread:"
		perf report -i "$work/perf-$label.data" --no-children -g none --sort comm --stdio 2>/dev/null |
			grep -E '^ +[0-9]' | head -8 | sed 's/^ */     /' || true
	fi
	[ -z "${BENCH_PERF_KEEP:-}" ] || cp "$work/perf-$label.data" "$BENCH_PERF_KEEP/perf-$label.data"
	if [ -s "$work/fuse-$label.data" ]; then
		echo "   FUSE requests on this mount (connection $(cat "$work/conn-$label")), by opcode: count, mean bytes"
		perf script -i "$work/fuse-$label.data" 2>/dev/null |
			awk -v c="$(cat "$work/conn-$label")" '{
				for (i = 1; i < NF; i++) {
					if ($i == "connection") conn = $(i + 1)
					if ($i == "opcode") op = $(i + 2)
					if ($i == "len") len = $(i + 1)
				}
				if (conn == c) { n[op]++; s[op] += len }
			} END { for (o in n) printf "     %-16s %8d %10.0f\n", o, n[o], s[o] / n[o] }' | sort -k2 -rn | head -6 || true
	fi
}

# ---- the machine ----------------------------------------------------------

can_drop=0
if [ -w /proc/sys/vm/drop_caches ]; then can_drop=1; fi
dev=$(df --output=source "$work" | tail -1)
echo "== ckptfs bench $(date -u '+%Y-%m-%d %H:%M:%S UTC'), scale ${BENCH_SCALE:-full}, $ROUNDS round(s), phases ${BENCH_ONLY:-all}"
echo "commit   $(git -C "$HERE/.." rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$HERE/.." diff --quiet HEAD -- fs meta 2>/dev/null || echo ' (fs/ or meta/ differ from it in the work tree)'); binaries $BIN"
echo "kernel   $(uname -r), $(. /etc/os-release && echo "$PRETTY_NAME")"
echo "cpu      $(nproc) x $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo); load average $(loadavg)"
free -h | sed 's/^/memory   /'
echo "disk     $work: $dev ($(df --output=fstype "$work" | tail -1)), $(df -h --output=size "$work" | tail -1 | tr -d ' ') size, $(df -h --output=avail "$work" | tail -1 | tr -d ' ') free"
echo "data     generated into tmpfs $shm"
[ "$can_drop" = 1 ] || echo "WARNING: cannot write /proc/sys/vm/drop_caches (not root): the 'cold' read is not cold"

need=0
if [ "$run_io" = 1 ]; then need=$((2 * NWRITERS * UNIQUE_FILE + 2 * NREPLICAS * REPLICA + 2 * REPLICA)); fi
if [ "$run_gen" = 1 ]; then need=$((need + 2 * NSAVES * SAVE_FILE + 512 * MiB)); fi
if [ "$run_wb" = 1 ]; then need=$((need + 6 * WB_NFILES * WB_FILE + 512 * MiB)); fi
if [ "$run_cost" = 1 ]; then need=$((need + 3 * 4 * COST_FILE)); fi
if [ "$run_mn" = 1 ]; then need=$((need + 2 * MN_NSHARDS * MN_FILE + 256 * MiB)); fi
avail=$(df -B1 --output=avail "$work" | tail -1)
[ "$avail" -gt "$need" ] || die "$work: $((avail / MiB)) MiB free, the bench needs about $((need / MiB)) MiB"

# ---- the data: generated once, in tmpfs -------------------------------------

if [ "$run_io" = 1 ]; then
echo
echo "== generating $((NWRITERS * UNIQUE_FILE / MiB + REPLICA / MiB)) MiB of random data (numpy SFC64, one seed per file)"
gen=()
for i in $(seq 0 $((NWRITERS - 1))); do gen+=("$PY $IO gen $shm/unique$i $UNIQUE_FILE $((1000 + i))"); done
gen+=("$PY $IO gen $shm/payload $REPLICA 2000")
run_group "${gen[@]}"
t=$elapsed
echo "   in ${t}s"

# What a page-cache fill costs here. On a VM whose balloon reports free pages
# to the host, writing into pages the host took back (after a drop, or a few
# idle seconds) costs several times more than into pages just freed. Every
# byte written to ckptfs fills page cache twice (the FUSE file, then the chunk
# object on the local disk), a plain directory once.
echo
echo "== page-cache fill (buffered write of $((UNIQUE_FILE / MiB)) MiB, no fsync, one writer)"
fill() {
	run_group "$PY $IO fill $shm/unique0 $work/fill"
	rm -f "$work/fill"
	mbps "$UNIQUE_FILE" "$elapsed"
}
sync
sleep 5
fresh=$(fill)
recycled=$(fill)
echo "   into fresh pages (after 5 s idle): $fresh MB/s; into pages just freed: $recycled MB/s"
fi

# Replica i: a header of hlen(i) bytes (0..200, growing with the name), then
# the payload.
rname() { printf 'checkpoint-step-%06d/rank%02d/model_states%s.pt' 1000 "$1" "$(printf '%*s' "$1" '' | tr ' ' '_')"; }
hlen() { echo $(($1 * 200 / (NREPLICAS - 1))); }
ONE_REPLICA=$((REPLICA + $(hlen $((NREPLICAS - 1))))) # the largest one

# ---- the workloads ----------------------------------------------------------

declare -A R # R[metric,side,round]

# cpu_begin / cpu_end KEY: the daemon's CPU seconds (total, kernel) in between.
cpu_begin() { c0=$(cpu_ticks) k0=$(sys_ticks); }
cpu_end() {
	R[$1cpu,ckptfs,$r]=$(div $(($(cpu_ticks) - c0)) "$HZ")
	R[$1sys,ckptfs,$r]=$(div $(($(sys_ticks) - k0)) "$HZ")
}

report() { # report SIDE KEY NAME SECONDS
	local extra=''
	if [ "$1" = ckptfs ]; then extra="   (daemon CPU ${R[$2cpu,ckptfs,$r]}s, kernel ${R[$2sys,ckptfs,$r]}s of it)"; fi
	printf '   %-7s %-17s %7.2fs %6s MB/s%s\n' "$1" "$3" "$4" "${R[$2,$1,$r]}" "$extra"
}

# "NAME TICKS" per thread name of the daemon (user + system): the FUSE
# threads that run the writers ("ckptfs"), the store's ("ckptfs-store"), the
# uploader's ("ckptfs-upload"), ... Its threads live as long as the mount.
thread_ticks() {
	local t c
	for t in /proc/"$pid"/task/*; do
		c=$(cat "$t/comm" 2>/dev/null) || continue
		awk -v c="$c" '{ sub(/^.*\) /, ""); print c, $12 + $13 }' "$t/stat" 2>/dev/null
	done | awk '{ s[$1] += $2 } END { for (k in s) print k, s[k] }' | sort
}

# The CPU-s per GiB of BYTES each thread name spent between two thread_ticks
# listings, largest first: "ckptfs 0.98, ckptfs-store 0.31, ...".
thread_split() {
	join -a 2 -e 0 -o 0,1.2,2.2 <(echo "$1") <(echo "$2") |
		awk -v hz="$HZ" -v b="$3" '{ d = ($3 - $2) / hz / (b / 1073741824); if (d > 0) printf "%s %.2f\n", $1, d }' |
		sort -k2 -g -r | awk '{ printf "%s%s %s", (NR > 1 ? ", " : ""), $1, $2 } END { print "" }'
}

phase_unique_write() {
	local side=$1 dir=$2 t cmds=() i th0=''
	settle
	for i in $(seq 0 $((NWRITERS - 1))); do cmds+=("$PY $IO write $shm/unique$i $dir/unique$i.bin 0 -"); done
	if [ "$side" = ckptfs ]; then perf_start uw; th0=$(thread_ticks); cpu_begin; fi
	run_group "${cmds[@]}"
	t=$elapsed
	if [ "$side" = ckptfs ]; then
		cpu_end uw
		R[uwthreads,ckptfs,$r]=$(thread_split "$th0" "$(thread_ticks)" $((NWRITERS * UNIQUE_FILE)))
		perf_stop
		check_daemon
	fi
	R[uw,$side,$r]=$(mbps $((NWRITERS * UNIQUE_FILE)) "$t")
	report "$side" uw "unique write" "$t"
	if [ "$side" = ckptfs ]; then
		printf '   %-7s daemon CPU-s per GiB by thread: %s\n' ckptfs "${R[uwthreads,ckptfs,$r]}"
	fi
}

phase_cold_read() {
	local side=$1 dir=$2 t cmds=() i
	settle
	for i in $(seq 0 $((NWRITERS - 1))); do cmds+=("$PY $IO read $dir/unique$i.bin"); done
	if [ "$side" = ckptfs ]; then perf_start cr; cpu_begin; fi
	run_group "${cmds[@]}"
	t=$elapsed
	if [ "$side" = ckptfs ]; then cpu_end cr; perf_stop; check_daemon; fi
	R[cr,$side,$r]=$(mbps $((NWRITERS * UNIQUE_FILE)) "$t")
	report "$side" cr "cold read" "$t"
	[ "$side" != nullfs ] || return 0 # it reads zeros
	cmds=()
	for i in $(seq 0 $((NWRITERS - 1))); do cmds+=("$PY $IO verify $shm/unique$i $dir/unique$i.bin 0 -"); done
	run_group "${cmds[@]}" # dies on a difference
}

phase_replicated_write() {
	local side=$1 dir=$2 t cmds=() i du0 du1 f0 f1 s0 s1 u0 u1 logical=0
	for i in $(seq 0 $((NREPLICAS - 1))); do
		mkdir -p "$(dirname "$dir/replicas/$(rname "$i")")"
		cmds+=("$PY $IO write $shm/payload $dir/replicas/$(rname "$i") $(hlen "$i") $(rname "$i")")
		logical=$((logical + REPLICA + $(hlen "$i")))
	done
	settle
	if [ "$side" = ckptfs ]; then
		du0=$(chunks_du) f0=$(chunks_files) s0=$(stat_of stored_bytes) u0=$(stat_of unique_bytes)
		perf_start rw
		cpu_begin
	fi
	run_group "${cmds[@]}"
	t=$elapsed
	R[rw,$side,$r]=$(mbps "$logical" "$t")
	if [ "$side" = ckptfs ]; then
		cpu_end rw
		perf_stop
		check_daemon
		du1=$(chunks_du) f1=$(chunks_files) s1=$(stat_of stored_bytes) u1=$(stat_of unique_bytes)
		R[rs,$side,$r]=$(div $((du1 - du0)) "$ONE_REPLICA")
		report "$side" rw "replicated write" "$t"
		printf '   %-7s   stored for the %d replicas: BACKING/chunks du -sb +%d, object files +%d;' \
			"$side" "$NREPLICAS" $((du1 - du0)) $((f1 - f0))
		printf ' catalog stored_bytes +%d, unique_bytes +%d; one replica %d\n' \
			$((s1 - s0)) $((u1 - u0)) "$ONE_REPLICA"
	elif [ "$side" = nullfs ]; then
		report "$side" rw "replicated write" "$t"
		return 0 # it stores nothing to verify
	else
		R[rs,$side,$r]=$(div "$(du -sb "$dir/replicas" | cut -f1)" "$ONE_REPLICA")
		report "$side" rw "replicated write" "$t"
	fi
	cmds=()
	for i in $(seq 0 $((NREPLICAS - 1))); do
		cmds+=("$PY $IO verify $shm/payload $dir/replicas/$(rname "$i") $(hlen "$i") $(rname "$i")")
	done
	run_group "${cmds[@]}" # dies on a difference
}

# ---- the generation phases (5-8) -------------------------------------------

# kv KEY: the value of KEY in the KEY=VALUE words on stdin (first match).
kv() { tr ' ' '\n' | awk -F= -v k="$1" '$1 == k { print $2; exit }'; }
# gen_run ARGS: scripts/bench_gen.py ARGS; its stdout. Dies if it fails.
gen_run() { "$PY" "$GEN" "$@" || die "bench_gen.py $1 failed (see above)"; }
fps() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%.0f", n / s }'; }
imedian() { median | awk '{ printf "%.0f\n", $1 }'; }
pct() { tr ' ' '\n' | grep -v '^$' | sort -g | awk -v p="$1" '{ v[NR] = $1 } END { i = int(NR * p / 100); if (i < NR * p / 100) i++; if (i < 1) i = 1; print v[i] }'; }
# Nothing dirty, caches kept (see the top of this file).
quiesce() { sync; sleep 1; }

# 5. create + 4 KiB write + close of NFILES files on each side, in META_BLOCKS
# blocks alternating between the sides (A B B A ..., A = the first side of
# this round), each block followed by a syncfs of the local filesystem: KIND
# mg in a generation directory (meta/step-1), mf in a plain one (flat/).
phase_meta() { # phase_meta KIND
	local kind=$1 sub side out t ts
	if [ "$kind" = mg ]; then sub=meta/step-1; else sub=flat; fi
	quiesce
	[ "$kind" = mf ] || perf_start "$kind"
	# mg: then until the daemon queues no upload (its objects on BACKING,
	# which may follow the creates: catalog_defer.c D9), so that nothing of
	# it runs into the next phase, and that time is shown
	out=$(gen_run meta "$NFILES" "$META_SIZE" "$META_BLOCKS" "$pid" "${order%% *}" "$rd/plain/$sub" "$mnt/$sub" "$rd/plain" \
		$([ "$kind" = mg ] && echo "$cache/catalog.db"))
	perf_stop
	check_daemon
	R[${kind}cpu,ckptfs,$r]=$(kv cpu_s <<<"$out") R[${kind}sys,ckptfs,$r]=$(kv sys_s <<<"$out")
	for side in $order; do
		t=$(kv "${side}_s" <<<"$out") ts=$(kv "${side}_syncfs_s" <<<"$out")
		R[$kind,$side,$r]=$(fps "$NFILES" "$t")
		R[${kind}s,$side,$r]=$(fps "$NFILES" "$(awk -v a="$t" -v b="$ts" 'BEGIN { print a + b }')")
		printf '   %-7s %-24s %7.2fs %6s files/s; with the syncfs %.2fs more: %s files/s' "$side" \
			"$([ "$kind" = mg ] && echo "create, generation dir" || echo "create, plain dir")" \
			"$t" "${R[$kind,$side,$r]}" "$ts" "${R[${kind}s,$side,$r]}"
		if [ "$side" = ckptfs ]; then printf '   (daemon CPU %ss, kernel %ss of it)' "${R[${kind}cpu,ckptfs,$r]}" "${R[${kind}sys,ckptfs,$r]}"; fi
		echo
	done
	if [ "$kind" = mg ]; then
		t=$(kv ckptfs_s <<<"$out") ts=$(kv ckptfs_drain_s <<<"$out")
		R[mgu,ckptfs,$r]=$(fps "$NFILES" "$(awk -v a="$t" -v b="$ts" 'BEGIN { print a + b }')")
		printf '   %-7s %-24s %7.2fs more: %s files/s with the uploads   (daemon CPU %ss from the first block to then)\n' ckptfs \
			"uploads to BACKING done" "$ts" "${R[mgu,ckptfs,$r]}" "$(kv cpu_all_s <<<"$out")"
	fi
}

# 5, the FUSE floor: the same creates into nullfs (a generation-like
# directory), alternating with a fresh plain directory of the same run.
phase_meta_floor() {
	local out
	quiesce
	out=$(gen_run meta "$NFILES" "$META_SIZE" "$META_BLOCKS" "$npid" "${order%% *}" "$rd/plain/floor" "$nmnt/rmeta$r/meta/step-1" "$rd/plain")
	R[nm,plain,$r]=$(fps "$NFILES" "$(kv plain_s <<<"$out")")
	R[nm,nullfs,$r]=$(fps "$NFILES" "$(kv ckptfs_s <<<"$out")")
	printf '   %-7s %-24s %7.2fs %6s files/s   (plain beside it: %s files/s; ratio %s)\n' nullfs \
		"create, the FUSE floor" "$(kv ckptfs_s <<<"$out")" "${R[nm,nullfs,$r]}" "${R[nm,plain,$r]}" \
		"$(div "${R[nm,nullfs,$r]}" "${R[nm,plain,$r]}")"
	rm -rf "${nmnt:?}/rmeta$r"
}

# A generation of NFILES files of DEL_SIZE bytes in DEL_SUBDIRS subdirectories
# plus DCP files (__0_0.distcp, .metadata), committed on the mount.
make_tree() { # make_tree SIDE GENDIR
	gen_run mkfiles "$2" "$NFILES" "$DEL_SIZE" "$DEL_SUBDIRS" - 4 >/dev/null # 4 processes
	gen_run dcpprep "$2" "$DEL_SIZE" >/dev/null
	if [ "$1" = ckptfs ]; then
		gen_run dcpcommit "$2" >/dev/null
	else
		mv "$2/.metadata.tmp" "$2/.metadata"
	fi
}

# 6. rm -rf of that generation.
phase_rm() {
	local side=$1 dir=$2 out t
	quiesce
	if [ "$side" = ckptfs ]; then perf_start rm; cpu_begin; fi
	out=$(gen_run rmrf "$dir/del/step-1")
	if [ "$side" = ckptfs ]; then cpu_end rm; perf_stop; check_daemon; fi
	t=$(kv seconds <<<"$out")
	R[rm,$side,$r]=$t
	printf '   %-7s %-24s %7.3fs' "$side" "rm -rf $((NFILES + 2))-file gen." "$t"
	if [ "$side" = ckptfs ]; then printf '   (daemon CPU %ss, kernel %ss of it)' "${R[rmcpu,ckptfs,$r]}" "${R[rmsys,ckptfs,$r]}"; fi
	echo
}

# 7. commit latency of NSAVES DCP saves (ckptfs only).
CMS='' RMS='' FSS='' # commit ms, rename ms, fsync s of every save of every round
phase_commit() {
	local out cms rms fss
	quiesce
	out=$(gen_run saves "$mnt/ckpt" "$NSAVES" "$SAVE_FILE" $((3000 + r)))
	check_daemon
	cms=$(awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^commit_ms=/) print substr($i, 11) }' <<<"$out" | tr '\n' ' ')
	rms=$(awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^rename_ms=/) print substr($i, 11) }' <<<"$out" | tr '\n' ' ')
	fss=$(awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^fsync_s=/) print substr($i, 9) }' <<<"$out" | tr '\n' ' ')
	[ "$(wc -w <<<"$cms")" = "$NSAVES" ] || die "phase 7: expected $NSAVES saves, got: $out"
	CMS+="$cms" RMS+="$rms" FSS+="$fss"
	R[cm,ckptfs,$r]=$(median <<<"$cms") R[cp,ckptfs,$r]=$(pct 95 <<<"$cms")
	printf '   %-7s %-24s median %s ms, p95 %s ms, max %s ms (rename() alone: median %s ms); fsyncs per save: median %s s\n' \
		ckptfs "commit of $NSAVES saves" "${R[cm,ckptfs,$r]}" "${R[cp,ckptfs,$r]}" "$(max <<<"$cms")" \
		"$(median <<<"$rms")" "$(median <<<"$fss")"
}

# 8. keep-latest-k, on a fresh keep=1 mount: a committed NFILES-file
# generation, then a small one committed: the seconds until the big one is
# gone (KEY kp), and when the new one showed as committed (kpc, ms). Twice: kp
# with the old generation's inodes still in the kernel's cache (it was just
# written), kr after a remount (the daemon knows none of them: the usual case
# for a generation written long ago).
keep_once() { # keep_once KEY OLD NEW
	local key=$1 out
	quiesce
	perf_start "$key"
	cpu_begin
	out=$(gen_run keepwait "$mnt/keep" "$2" "$3")
	cpu_end "$key"
	perf_stop
	check_daemon
	R[$key,ckptfs,$r]=$(awk -v m="$(kv gone_ms <<<"$out")" 'BEGIN { printf "%.3f", m / 1000 }')
	R[${key}c,ckptfs,$r]=$(kv new_committed_ms <<<"$out")
	printf '   %-7s %-24s %7.3fs   (ms: rename() of %s %s, committed %s, %s stat ENOENT %s, unlisted %s; daemon CPU %ss)\n' \
		ckptfs "keep=1 deletes $2" "${R[$key,ckptfs,$r]}" "$3" "$(kv rename_ms <<<"$out")" "${R[${key}c,ckptfs,$r]}" \
		"$2" "$(kv stat_enoent_ms <<<"$out")" "$(kv unlisted_ms <<<"$out")" "${R[${key}cpu,ckptfs,$r]}"
}
phase_keep() {
	make_tree ckptfs "$mnt/keep/step-1"
	gen_run dcpprep "$mnt/keep/step-2" "$DEL_SIZE" >/dev/null
	keep_once kp step-1 step-2
	make_tree ckptfs "$mnt/keep/step-3" # its commit deletes step-2
	stop_daemon
	start_daemon "$rd" keep=1 # the same BACKING and cache
	echo "   ckptfs  (remounted)"
	# after the remount: an open DCP save is aborted at a clean unmount
	gen_run dcpprep "$mnt/keep/step-4" "$DEL_SIZE" >/dev/null
	keep_once kr step-3 step-4
}

daemon_log_check() {
	if grep -qiE ' (error|warn)' "$1/daemon.log"; then
		echo "   ckptfs  daemon log (errors/warnings):"
		grep -m 5 -iE ' (error|warn)' "$1/daemon.log" | sed 's/^/     /'
	fi
}

# The FUSE floor's mount, for phases 1-3 and 5 (tests/nullfs).
if [ "$FLOOR" = 1 ] && { [ "$run_io" = 1 ] || [ "$run_meta" = 1 ]; }; then nullfs_up; fi

# Phase 5 runs first, before anything of this bench deletes files: on this
# ext4 (no journal) the inode allocator skips inodes deleted in the last 60 s
# (360 s while their inode table block is dirty), so that after a mass
# deletion every create on the plain side scans them (recently_deleted() in
# fs/ext4/ialloc.c) and slows down up to 10x. ckptfs creates no local inode per
# small file. Its rounds' directories stay until the end.
if [ "$run_meta" = 1 ]; then
	for r in $(seq 1 "$ROUNDS"); do
		echo
		echo "== generations, metadata round $r/$ROUNDS: $NFILES files per side (load average $(loadavg))"
		rd=$work/rmeta$r
		mkdir -p "$rd/plain"
		start_daemon "$rd"
		if [ $((r % 2)) = 1 ]; then order="plain ckptfs"; else order="ckptfs plain"; fi
		phase_meta mg
		phase_meta mf
		if [ "$FLOOR" = 1 ]; then phase_meta_floor; fi
		gen_run dcpprep "$mnt/meta/step-1" "$DEL_SIZE" >/dev/null # commit it, untimed
		gen_run dcpcommit "$mnt/meta/step-1" >/dev/null
		daemon_log_check "$rd"
		stop_daemon
	done
	if [ "$PERF" = 1 ]; then
		perf_print mg "creates in a generation directory"
		echo "   (round 1's ckptfs timings include the profiling overhead)"
	fi
fi

if [ "$run_io" = 1 ]; then
for r in $(seq 1 "$ROUNDS"); do
	echo
	echo "== round $r/$ROUNDS (load average $(loadavg))"
	rd=$work/r$r
	mkdir -p "$rd/plain"
	start_daemon "$rd"
	if [ $((r % 2)) = 1 ]; then order="plain ckptfs"; else order="ckptfs plain"; fi
	for phase in phase_unique_write phase_cold_read phase_replicated_write; do
		for side in $order; do
			if [ "$side" = plain ]; then $phase plain "$rd/plain"; else $phase ckptfs "$mnt"; fi
		done
		if [ "$FLOOR" = 1 ]; then mkdir -p "$nmnt/r$r"; $phase nullfs "$nmnt/r$r"; fi
	done
	if [ "$FLOOR" = 1 ]; then rm -rf "${nmnt:?}/r$r"; fi
	check_daemon
	R[rss,ckptfs,$r]=$(awk '/^VmHWM/ { printf "%.1f", $2 / 1024 }' "/proc/$pid/status")
	echo "   ckptfs  daemon VmHWM  ${R[rss,ckptfs,$r]} MiB"
	if grep -qiE ' (error|warn)' "$rd/daemon.log"; then
		echo "   ckptfs  daemon log (errors/warnings):"
		grep -m 5 -iE ' (error|warn)' "$rd/daemon.log" | sed 's/^/     /'
	fi
	stop_daemon
	rm -rf "$rd"
done

if [ "$PERF" = 1 ]; then
	perf_print uw "unique write"
	perf_print cr "cold read"
	perf_print rw "replicated write"
	echo "   (round 1's ckptfs timings include the profiling overhead)"
fi
fi # run_io

if [ "$run_gen" = 1 ]; then
	echo
	echo "== generations: $NFILES-file generations to delete, $NSAVES saves of 2 x $((SAVE_FILE / MiB)) MiB per round"
	for r in $(seq 1 "$ROUNDS"); do
		echo
		echo "== generations, round $r/$ROUNDS (load average $(loadavg))"
		rd=$work/rgen$r
		mkdir -p "$rd/plain"
		start_daemon "$rd"
		if [ $((r % 2)) = 1 ]; then order="plain ckptfs"; else order="ckptfs plain"; fi
		make_tree plain "$rd/plain/del/step-1"
		make_tree ckptfs "$mnt/del/step-1"
		for side in $order; do
			if [ "$side" = plain ]; then phase_rm plain "$rd/plain"; else phase_rm ckptfs "$mnt"; fi
		done
		phase_commit
		daemon_log_check "$rd"
		stop_daemon
		rm -rf "$rd"

		rd=$work/rkeep$r
		mkdir -p "$rd/plain"
		start_daemon "$rd" keep=1
		phase_keep
		daemon_log_check "$rd"
		stop_daemon
		rm -rf "$rd"
	done
	if [ "$PERF" = 1 ]; then
		perf_print rm "rm -rf of a generation"
		perf_print kp "keep=1 deletion of a generation"
		perf_print kr "keep=1 deletion of a generation, after a remount"
		echo "   (round 1's ckptfs timings include the profiling overhead)"
	fi
fi # run_gen

# ---- the write-back phases (9-12) -------------------------------------------

# wb_files DIR: the save's file paths under DIR, one per writer.
wb_files() { local i; for i in $(seq 0 $((WB_NFILES - 1))); do echo "$1/part$i.bin"; done; }
fstat() { awk -F= -v k="$1" '$1 == k { print $2 }' "$fctl.stats" 2>/dev/null || echo 0; }
secs_since() { awk -v a="$1" -v b="$(now_ns)" 'BEGIN { printf "%.3f", (b - a) / 1e9 }'; }
wb_line() { # SIDE WHAT SECONDS [EXTRA]: one result line, MB/s of the save's bytes
	printf '   %-7s %-34s %7.2fs %6s MB/s%s\n' "$1" "$2" "$3" "$(mbps "$WB_BYTES" "$3")" "${4:+   ($4)}"
}
WB_BYTES=$((WB_NFILES * WB_FILE))

# faultfs over DIR/store, mounted on DIR/fmnt, throttled to WB_BW.
faultfs_up() {
	local d=$1
	mkdir -p "$d/store" "$d/fmnt"
	fctl=$d/fctl
	printf 'bw=%s\n' "$WB_BW" >"$fctl"
	"$FAULTFS" -f -o "ctl=$fctl" "$d/store" "$d/fmnt" 2>>"$d/faultfs.log" &
	fpid=$! fmnt=$d/fmnt
	wait_mounted "$fmnt" "$fpid" "$d/faultfs.log" || die "faultfs did not mount on $fmnt"
}

# wb_straight_write KEY DIR|URL: the save's files written straight into the
# throttled mount (DIR) or put into ganesha through libnfs (URL); R[KEY,plain].
wb_straight_write() {
	local key=$1 dst=$2 cmds=() i
	settle
	for i in $(seq 0 $((WB_NFILES - 1))); do
		case $dst in
		nfs://*) cmds+=("$BTOOL $dst put $shm/wb$i straight$r/part$i.bin") ;;
		*) cmds+=("$PY $IO write $shm/wb$i $dst/part$i.bin 0 -") ;;
		esac
	done
	case $dst in nfs://*) "$BTOOL" "$dst" probe >/dev/null ;; *) mkdir -p "$dst" ;; esac
	run_group "${cmds[@]}"
	R[$key,plain,$r]=$(mbps "$WB_BYTES" "$elapsed")
	wb_line "$pname" \
		"save, straight (fsync each)" "$elapsed" "$([ "$key" = ns ] && echo "backing-tool put: temp, COMMIT, rename")"
}

# wb_save SKEY DKEY: the save through the mount into run/step-1, the commit
# xattr, then the wait until the catalog says it is durable on BACKING.
wb_save() {
	local skey=$1 dkey=$2 cmds=() i t0 ts tc out b0=0 b1=0 c1 ks
	mkdir -p "$mnt/run/step-1"
	for i in $(seq 0 $((WB_NFILES - 1))); do cmds+=("$PY $IO write $shm/wb$i $mnt/run/step-1/part$i.bin 0 -"); done
	settle
	[ -z "$fmnt" ] || b0=$(fstat bytes_written)
	cpu_begin
	t0=$(now_ns)
	run_group "${cmds[@]}"
	ts=$elapsed
	setfattr -n user.ckptfs.commit -v 1 "$mnt/run/step-1"
	tc=$(secs_since "$t0")
	cpu_end "${skey}"
	c1=$(cpu_ticks) ks=$(sys_ticks)
	out=$("$PY" "$WB" durable "$cache/catalog.db" 1800) || die "the save did not become durable on BACKING"
	R[$dkey,ckptfs,$r]=$(mbps "$WB_BYTES" "$(secs_since "$t0")")
	local td; td=$(secs_since "$t0")
	R[${dkey}cpu,ckptfs,$r]=$(div $(($(cpu_ticks) - c1)) "$HZ") R[${dkey}sys,ckptfs,$r]=$(div $(($(sys_ticks) - ks)) "$HZ")
	check_daemon
	if [ -n "$fmnt" ]; then sleep 1.2; b1=$(fstat bytes_written); fi
	R[$skey,ckptfs,$r]=$(mbps "$WB_BYTES" "$tc")
	wb_line ckptfs "save returns (writers + commit)" "$tc" \
		"writers ${ts}s; daemon CPU ${R[${skey}cpu,ckptfs,$r]}s, kernel ${R[${skey}sys,ckptfs,$r]}s of it"
	wb_line ckptfs "  durable on BACKING" "$td" \
		"after the save returned: daemon CPU ${R[${dkey}cpu,ckptfs,$r]}s, kernel ${R[${dkey}sys,ckptfs,$r]}s$([ -z "$fmnt" ] || echo "; faultfs got $(((b1 - b0) / 1000000)) MB")"
}

# CPU ticks (all CPUs) the whole machine spent busy, and ganesha's own.
busy_ticks() { awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }
ganesha_ticks() {
	local gp; gp=$(cat "$gdir/ganesha.pid" 2>/dev/null) || { echo 0; return; }
	awk '{ print $14 + $15 }' "/proc/$gp/stat" 2>/dev/null || echo 0
}

# wb_read KEY SIDE LABEL FILES...: concurrent cold readers (drop_caches first).
# For phase 12/15's nfs:// reads (key nc) it also says where the CPU went
# (ganesha's share, the machine's busy CPU: 2 cores here, shared with other
# work) and, for ckptfs, the daemon's peak RSS (the restore's memory bound).
wb_read() {
	local key=$1 side=$2 label=$3 cmds=() f g0=0 m0=0
	shift 3
	for f in "$@"; do
		case $f in
		nfs://*) cmds+=("$BTOOL ${f%% *} get ${f#* } /dev/null") ;;
		*) cmds+=("$PY $IO read $f") ;;
		esac
	done
	settle
	local b0=0 extra=''
	[ -z "$fmnt" ] || b0=$(fstat bytes_read)
	if [ "$side" = ckptfs ]; then
		[ "$key" != nc ] || perf_start nc
		cpu_begin
	fi
	if [ "$key" = nc ]; then g0=$(ganesha_ticks) m0=$(busy_ticks); fi
	run_group "${cmds[@]}"
	if [ "$key" = nc ]; then
		extra="ganesha CPU $(div $(($(ganesha_ticks) - g0)) "$HZ")s, machine busy $(div $(($(busy_ticks) - m0)) "$HZ") CPU-s"
	fi
	if [ "$side" = ckptfs ]; then
		cpu_end "$key"
		[ "$key" != nc ] || perf_stop
		check_daemon
		extra+="${extra:+; }daemon CPU ${R[${key}cpu,ckptfs,$r]}s, kernel ${R[${key}sys,ckptfs,$r]}s of it"
		[ "$key" != nc ] || extra+=", VmHWM $(awk '/^VmHWM/ { printf "%.0f", $2 / 1024 }' "/proc/$pid/status") MiB"
	fi
	if [ -n "$fmnt" ] && [ "$key" = wc ]; then
		sleep 1.2 # faultfs rewrites its stats every second
		extra+="${extra:+; }faultfs served $((($(fstat bytes_read) - b0) / 1000000)) MB"
	fi
	R[$key,$side,$r]=$(mbps "$WB_BYTES" "$elapsed")
	wb_line "$([ "$side" = plain ] && echo "$pname" || echo ckptfs)" "$label" "$elapsed" "$extra"
}

wb_verify_cost() { # DIR: the cost phase's files equal the sources
	local cmds=() i
	for i in 0 1 2 3; do cmds+=("$PY $IO verify $shm/cost$i $1/part$i.bin 0 -"); done
	run_group "${cmds[@]}" # dies on a difference
}

wb_verify() { # DIR: the save's files equal the sources
	local cmds=() i
	for i in $(seq 0 $((WB_NFILES - 1))); do cmds+=("$PY $IO verify $shm/wb$i $1/part$i.bin 0 -"); done
	run_group "${cmds[@]}" # dies on a difference
}

# A fresh node over BACKING $1: a new empty cache $2; R[mt|nmt] = seconds
# until the mount answers (includes the rebuild of the catalog).
wb_fresh_node() { # KEY BACKING CACHE [OPTS]
	local key=$1 t0 n
	t0=$(now_ns)
	start_daemon "$rd" "${4:-}" "$2" "$3"
	n=$(find "$mnt/run/step-1" -name 'part*.bin' | wc -l)
	R[$key,ckptfs,$r]=$(secs_since "$t0")
	[ "$n" = "$WB_NFILES" ] || die "the fresh node over $2 sees $n of the $WB_NFILES files"
	printf '   %-7s %-34s %7.2fs   (new empty cache; catalog rebuilt from BACKING)\n' ckptfs "fresh node: mount + lookup" "${R[$key,ckptfs,$r]}"
}

if [ "$run_wb" = 1 ]; then
	echo
	echo "== generating $((WB_BYTES / MiB)) MiB of random data for the write-back phases ($WB_NFILES x $((WB_FILE / MiB)) MiB)"
	gen=()
	for i in $(seq 0 $((WB_NFILES - 1))); do gen+=("$PY $IO gen $shm/wb$i $WB_FILE $((4000 + i))"); done
	run_group "${gen[@]}"
	echo "   in ${elapsed}s"
	if [ "$wb_nfs" = 1 ]; then
		gdir=$work/ganesha
		url=$("$GANESHA" start "$gdir" 2>"$work/ganesha.err") || { cat "$work/ganesha.err" >&2; gdir=''; die "ganesha did not start"; }
		echo "   nfs-ganesha: $url"
	fi
	for r in $(seq 1 "$ROUNDS"); do
		if [ $((r % 2)) = 1 ]; then order="plain ckptfs"; else order="ckptfs plain"; fi
		if [ "$run_wbfs" = 1 ]; then # phases 9-11 (not with BENCH_ONLY=restore)
		echo
		echo "== write-back, round $r/$ROUNDS: BACKING = faultfs bw=$WB_BW B/s (load average $(loadavg))"
		rd=$work/rwb$r
		mkdir -p "$rd/plain"
		faultfs_up "$rd"
		pname=plain
		if [ $((r % 2)) = 1 ]; then order="plain ckptfs"; else order="ckptfs plain"; fi
		# 9. the save
		for side in $order; do
			if [ "$side" = plain ]; then
				wb_straight_write ws "$fmnt/straight/step-1"
			else
				start_daemon "$rd" "" "$fmnt/ck" "$rd/cache1"
				wb_save ws wd
				t0=$(now_ns)
				stop_daemon
				printf '   %-7s %-34s %7.2fs\n' ckptfs "unmount (nothing left to upload)" "$(secs_since "$t0")"
			fi
		done
		R[wd,plain,$r]=${R[ws,plain,$r]}
		# 10. cold restore: a fresh node against the throttled mount
		wb_fresh_node mt "$fmnt/ck" "$rd/cache2"
		for side in $order; do
			if [ "$side" = plain ]; then
				# shellcheck disable=SC2046
				wb_read wc plain "cold read, straight from BACKING" $(wb_files "$fmnt/straight/step-1")
			else
				# shellcheck disable=SC2046
				wb_read wc ckptfs "cold restore through the mount" $(wb_files "$mnt/run/step-1")
			fi
		done
		# 11. warm restore: the chunks are in the cache now
		cp "$shm"/wb* "$rd/plain/"
		for i in $(seq 0 $((WB_NFILES - 1))); do mv "$rd/plain/wb$i" "$rd/plain/part$i.bin"; done
		for side in $order; do
			if [ "$side" = plain ]; then
				# shellcheck disable=SC2046
				wb_read ww plain "warm: plain local directory" $(wb_files "$rd/plain")
			else
				# shellcheck disable=SC2046
				wb_read ww ckptfs "warm restore (chunks in the cache)" $(wb_files "$mnt/run/step-1")
			fi
		done
		wb_verify "$mnt/run/step-1"
		echo "   ckptfs  faultfs: $(fstat bytes_written) bytes written, $(fstat bytes_read) read, throttled $(fstat throttle_ms) ms"
		daemon_log_check "$rd"
		stop_daemon
		faultfs_down
		rm -rf "$rd"
		fi # run_wbfs

		# 12. the same over nfs://
		[ "$wb_nfs" = 1 ] || continue
		echo
		echo "== write-back, round $r/$ROUNDS: BACKING = nfs:// (nfs-ganesha on 127.0.0.1, unthrottled; load average $(loadavg))"
		rd=$work/rwbn$r
		mkdir -p "$rd" "$gdir/export/ck$r" "$gdir/export/straight$r"
		pname=ganesha
		nurl="${url%%\?*}/ck$r?${url#*\?}"
		for side in $order; do
			if [ "$side" = plain ]; then
				wb_straight_write ns "$url"
			else
				start_daemon "$rd" "" "$nurl" "$rd/cache1"
				wb_save ns nd
				stop_daemon
			fi
		done
		R[nd,plain,$r]=${R[ns,plain,$r]}
		wb_fresh_node nmt "$nurl" "$rd/cache2" "$RESTORE_OPTS"
		for side in $order; do
			if [ "$side" = plain ]; then
				nf=()
				for i in $(seq 0 $((WB_NFILES - 1))); do nf+=("$url straight$r/part$i.bin"); done
				wb_read nc plain "cold read, straight (backing-tool get)" "${nf[@]}"
			else
				# shellcheck disable=SC2046
				wb_read nc ckptfs "cold restore through the mount" $(wb_files "$mnt/run/step-1")
			fi
		done
		# where the restoring daemon's reads waited (fs/reader.c logs it at
		# unmount): unmounted before the verify, so that it counts the restore alone
		stop_daemon
		grep -o 'reader: .*' "$rd/daemon.log" | tail -n 1 | sed 's/^/   ckptfs  /' || true
		# and what the restoring node asked of ganesha (fs/lib/backing_nfs.c logs it at close)
		grep -o 'BACKING .*NFS RPCs sent.*' "$rd/daemon.log" | tail -n 1 | sed 's/^/   ckptfs  /' || true
		start_daemon "$rd" "" "$nurl" "$rd/cache2"
		wb_verify "$mnt/run/step-1"
		daemon_log_check "$rd"
		stop_daemon
		rm -rf "$rd" "$gdir/export/ck$r" "$gdir/export/straight$r"
	done
	ganesha_down
	perf_print nc "nfs:// cold restore"
fi # run_wb

# ---- the cost phase (14) ----------------------------------------------------

# cost_ops: the faultfs op counters of interest, as "k=v ..." (see
# tests/faultfs/README.md; fsyncdir is the part of op.fsync on directories).
COST_KEYS="ops op.fsync fsyncdir op.create op.open op.rename op.mkdir op.getattr op.write op.opendir bytes_written"
cost_ops() {
	sleep 1.2 # faultfs rewrites its stats every second
	local k out=''
	for k in $COST_KEYS; do out+="$k=$(fstat "$k") "; done
	echo "$out"
}

# 14. per round: a fresh faultfs with latency_ms=COST_LAT; the save through
# the mount until durable against cp + sync of the same files into it.
if [ "$run_cost" = 1 ]; then
	COST_BYTES=$((4 * COST_FILE))
	echo
	echo "== generating $((COST_BYTES / MiB)) MiB of random data for the cost phase (4 x $((COST_FILE / MiB)) MiB)"
	gen=()
	for i in 0 1 2 3; do gen+=("$PY $IO gen $shm/cost$i $COST_FILE $((5000 + i))"); done
	run_group "${gen[@]}"
	for r in $(seq 1 "$ROUNDS"); do
		echo
		echo "== cost, round $r/$ROUNDS: BACKING = faultfs latency_ms=$COST_LAT, unthrottled${COST_OPTS:+; ckptfs -o $COST_OPTS} (load average $(loadavg))"
		rd=$work/rcost$r
		mkdir -p "$rd"
		faultfs_up "$rd"
		printf 'latency_ms=%s\n' "$COST_LAT" >"$fctl.tmp" && mv "$fctl.tmp" "$fctl"
		sleep 0.3 # faultfs reloads its control file at most every 100 ms
		if [ $((r % 2)) = 1 ]; then order="plain ckptfs"; else order="ckptfs plain"; fi
		for side in $order; do
			if [ "$side" = plain ]; then
				mkdir -p "$fmnt/straight"
				settle
				t0=$(now_ns)
				cp "$shm"/cost0 "$shm"/cost1 "$shm"/cost2 "$shm"/cost3 "$fmnt/straight/"
				sync "$fmnt"/straight/cost? "$fmnt/straight" # fsync of each file and the directory
				R[kd,plain,$r]=$(secs_since "$t0")
				printf '   %-7s %-34s %7.2fs %6s MB/s\n' plain "cp + sync, straight into faultfs" \
					"${R[kd,plain,$r]}" "$(mbps "$COST_BYTES" "${R[kd,plain,$r]}")"
			else
				start_daemon "$rd" "$COST_OPTS" "$fmnt/ck" "$rd/cache"
				mkdir -p "$mnt/run/step-1"
				cmds=()
				for i in 0 1 2 3; do cmds+=("$PY $IO write $shm/cost$i $mnt/run/step-1/part$i.bin 0 -"); done
				settle
				o0=$(cost_ops)
				perf_start cost
				c0=$(cpu_ticks)
				t0=$(now_ns)
				run_group "${cmds[@]}"
				setfattr -n user.ckptfs.commit -v 1 "$mnt/run/step-1"
				tw=$(secs_since "$t0") cw=$(cpu_ticks)
				"$PY" "$WB" durable "$cache/catalog.db" 1800 >/dev/null || die "the cost save did not become durable"
				R[kd,ckptfs,$r]=$(secs_since "$t0")
				c1=$(cpu_ticks)
				perf_stop
				check_daemon
				o1=$(cost_ops)
				gib=$(awk -v b="$COST_BYTES" 'BEGIN { print b / 1073741824 }')
				R[kcpu,ckptfs,$r]=$(awk -v t=$((c1 - c0)) -v hz="$HZ" -v g="$gib" 'BEGIN { printf "%.2f", t / hz / g }')
				R[kwcpu,ckptfs,$r]=$(awk -v t=$((cw - c0)) -v hz="$HZ" -v g="$gib" 'BEGIN { printf "%.2f", t / hz / g }')
				up=$(($(kv bytes_written <<<"$o1") - $(kv bytes_written <<<"$o0")))
				ugib=$(awk -v b="$up" 'BEGIN { print b / 1073741824 }')
				line=''
				for k in $COST_KEYS; do
					[ "$k" != bytes_written ] || continue
					v=$(awk -v a="$(kv "$k" <<<"$o0")" -v b="$(kv "$k" <<<"$o1")" -v g="$ugib" 'BEGIN { printf "%.0f", (b - a) / g }')
					R[k$k,ckptfs,$r]=$v
					line+=" ${k#op.}=$v"
				done
				printf '   %-7s %-34s %7.2fs %6s MB/s   (writers + commit %ss)\n' ckptfs "save until durable on BACKING" \
					"${R[kd,ckptfs,$r]}" "$(mbps "$COST_BYTES" "${R[kd,ckptfs,$r]}")" "$tw"
				printf '   %-7s daemon CPU-s per GiB of unique data: %s until durable, %s for the writes alone\n' ckptfs \
					"${R[kcpu,ckptfs,$r]}" "${R[kwcpu,ckptfs,$r]}"
				printf '   %-7s BACKING ops per GiB uploaded (%d MB to faultfs):%s\n' ckptfs $((up / 1000000)) "$line"
				wb_verify_cost "$mnt/run/step-1"
				daemon_log_check "$rd"
				stop_daemon
			fi
		done
		faultfs_down
		rm -rf "$rd"
	done
	rm -f "$shm"/cost?
	if [ "$PERF" = 1 ]; then
		perf_print cost "cost phase's save until durable (faultfs 1 ms/op)"
		echo "   (round 1's ckptfs timings include the profiling overhead)"
	fi
fi # run_cost

# ---- the codec phase (13) ---------------------------------------------------

declare -A C # C[metric,codec,file]
if [ "$run_codec" = 1 ]; then
	echo
	echo "== codec (phase 13): training the checkpoint ($CKPT_STEPS Adam steps, width $CKPT_HIDDEN; load average $(loadavg))"
	line=$("$PY" "$CKPT" train "$shm/ckpt" "$CKPT_STEPS" "$CKPT_HIDDEN") || die "bench_ckpt.py train failed"
	echo "   $line"
	"$PY" "$IO" gen "$shm/random.bin" "$CODEC_RANDOM" 3000
	cp "$shm/ckpt/ckpt.pt" "$shm/ckpt/ckpt.safetensors" "$shm/"
	for c in $CODECS; do
		opt=''
		[ "$c" = default ] || opt="codec=$c"
		for f in ckpt.pt ckpt.safetensors random.bin; do
			rd=$work/codec-$c-$f # a fresh BACKING per file: no dedup between the two formats
			mkdir -p "$rd"
			start_daemon "$rd" "$opt"
			size=$(stat -c %s "$shm/$f")
			settle
			c0=$(cpu_ticks)
			run_group "$PY $IO write $shm/$f $mnt/$f 0 -"
			c1=$(cpu_ticks)
			"$BIN/ckptfs-admin" umount "$mnt" >/dev/null 2>&1 || die "ckptfs-admin umount $mnt failed"
			stop_daemon
			stored=$(chunks_files)
			C[ratio,$c,$f]=$(div "$stored" "$size")
			C[mbps,$c,$f]=$(mbps "$size" "$elapsed")
			C[cpu,$c,$f]=$(awk -v t=$((c1 - c0)) -v hz="$HZ" -v b="$size" 'BEGIN { printf "%.2f", t / hz / (b / 1073741824) }')
			start_daemon "$rd" "$opt" # the same BACKING and cache: read back after a remount
			"$PY" "$IO" verify "$shm/$f" "$mnt/$f" 0 - || die "$f read back through a remount differs"
			daemon_log_check "$rd"
			stop_daemon
			rm -rf "$rd"
			printf '   %-5s %-17s %6.1f MB logical, BACKING %s x, write %s MB/s, daemon %s CPU-s/GiB\n' \
				"$c" "$f" "$(div "$size" 1000000)" "${C[ratio,$c,$f]}" "${C[mbps,$c,$f]}" "${C[cpu,$c,$f]}"
		done
		if [ -x "$BIN/codec-bench" ] && [ "$c" != default ]; then
			for f in ckpt.pt ckpt.safetensors random.bin; do
				echo "   codec-bench $f: $("$BIN/codec-bench" "$shm/$f" "$c")"
			done
		fi
	done
	rm -f "$shm/ckpt.pt" "$shm/ckpt.safetensors" "$shm/random.bin"
fi # run_codec

# ---- phase 16: several nodes over one store ---------------------------------

if [ "$run_mn" = 1 ]; then
echo
echo "== multi-node (phase 16): $MN_NSHARDS x $((MN_FILE / MiB)) MiB, 1 node on SQLite against 2 nodes with -o meta= (PostgreSQL 15 on a Unix socket)"
gen=()
for i in $(seq 0 $((MN_NSHARDS - 1))); do gen+=("$PY $IO gen $shm/mn$i $MN_FILE $((3000 + i))"); done
run_group "${gen[@]}"

# mn_node D NAME: a node of the shared catalog $pgurl over BACKING $1/../backing.
mn_node() {
	local d=$1 name=$2 p
	mkdir -p "$d/cache" "$d/mnt"
	"$BIN/ckptfs" -f -o "cache=$d/cache,meta=$pgurl,node_name=bench-$name" "$mn_backing" "$d/mnt" 2>>"$d/daemon.log" &
	p=$!
	mn_mnts+=("$d/mnt") mn_pids+=("$p")
	wait_mounted "$d/mnt" "$p" "$d/daemon.log" || die "node $name did not mount on $d/mnt"
}
mn_stat() { "$BIN/ckptfs-admin" stats "$1" | awk -v k="$2" '$1 == k { print $2 }'; }
# mn_ckpt GENDIR_OF_SHARD... : the shards written at once (shard i into the
# i-th directory: the same generation through one node or two), then the
# signal in the first, watched through the last; sets $elapsed.
mn_ckpt() {
	local cmds=() i=0 d t0 c0
	for d in "$@"; do cmds+=("$PY $IO write $shm/mn$i $d/shard$i.bin 0 -"); i=$((i + 1)); done
	mn_cpu; c0=$mn_cpu_now
	t0=$(now_ns)
	run_group "${cmds[@]}"
	"$PY" "$MN" commit "$1" "${!#}" >/dev/null || die "the completion signal did not commit"
	elapsed=$(awk -v a="$t0" -v b="$(now_ns)" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
	mn_cpu
	mn_cpu_used=$(mn_cpu_diff "$c0" "$mn_cpu_now")
}
# mn_cpu: sets mn_cpu_now to "DAEMONS PG CHILDREN", the CPU ticks (utime +
# stime) so far of the side's daemons ($pid, or the nodes' $mn_pids), of its
# PostgreSQL server (the postmaster with its reaped children, and its live
# backends) and of this shell's reaped children (the writers and bench_mn.py,
# via `times`: so not in a subshell).
mn_cpu() {
	local d=0 g=0 p pm='' hz
	hz=$(getconf CLK_TCK)
	if [ "${#mn_pids[@]}" -gt 0 ]; then
		for p in "${mn_pids[@]}"; do d=$((d + $(awk '{ print $14 + $15 }' "/proc/$p/stat"))); done
		pm=$(head -1 "$pgdir/data/postmaster.pid")
		# cat, not awk FILES: a process may exit between the glob and its read
		g=$({ cat /proc/[0-9]*/stat 2>/dev/null || true; } | sed -E 's/ \(.*\) / x /' |
			awk -v pm="$pm" '$1 == pm { s += $14 + $15 + $16 + $17 } $4 == pm { s += $14 + $15 } END { print s + 0 }')
	else
		d=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
	fi
	# times' second line: the children's user and system time, "XmY.YYYs"
	times >"$work/times" # not $(times): a subshell has reaped no children
	mn_cpu_now=$(awk -v hz="$hz" -v d="$d" -v g="$g" 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/)
		printf "%d %d %.0f\n", d, g, ((u[1] + s[1]) * 60 + u[2] + s[2]) * hz }' "$work/times")
}
# mn_cpu_diff BEFORE AFTER: "daemons=X pg=Y writers=Z" in CPU-s per GiB of the
# checkpoint.
mn_cpu_diff() {
	awk -v a="$1" -v b="$2" -v hz="$(getconf CLK_TCK)" -v gib="$(awk -v b=$((MN_NSHARDS * MN_FILE)) 'BEGIN { print b / 1073741824 }')" 'BEGIN {
		split(a, x, " "); split(b, y, " ")
		printf "daemons=%.2f pg=%.2f writers=%.2f", (y[1] - x[1]) / hz / gib, (y[2] - x[2]) / hz / gib, (y[3] - x[3]) / hz / gib }'
}
mn_verify() { # DIR...: shard i read back through the i-th directory
	local i=0 d
	for d in "$@"; do "$PY" "$IO" verify "$shm/mn$i" "$d/shard$i.bin" 0 - || die "shard $i differs through $d"; i=$((i + 1)); done
}
MNL=''
for r in $(seq 1 "$ROUNDS"); do
	echo "-- round $r"
	order="one two"
	[ $((r % 2)) = 1 ] || order="two one"
	for side in $order; do
		rd=$work/mn$r-$side
		mkdir -p "$rd"
		if [ "$side" = one ]; then
			start_daemon "$rd"
			mkdir -p "$mnt/run/step-1"
			dirs=()
			for i in $(seq 1 "$MN_NSHARDS"); do dirs+=("$mnt/run/step-1"); done
			settle
			mn_ckpt "${dirs[@]}"
			check_daemon
			R[mn,plain,$r]=$(mbps $((MN_NSHARDS * MN_FILE)) "$elapsed")
			printf '   1 node (SQLite)   %7.2fs %6s MB/s; CPU-s/GiB until committed: %s\n' "$elapsed" "${R[mn,plain,$r]}" "$mn_cpu_used"
			mn_verify "${dirs[@]}"
			stop_daemon
		else
			pgdir=$(mktemp -u /tmp/ckptfs-bench-pg.XXXXXX)
			pgurl=$("$PGSERVER" start "$pgdir" $$) || die "could not start PostgreSQL in $pgdir"
			mn_backing=$rd/backing
			mkdir -p "$mn_backing"
			mn_node "$rd/A" A
			mn_node "$rd/B" B
			a=$rd/A/mnt b=$rd/B/mnt
			mkdir -p "$a/run/step-1"
			[ -d "$b/run/step-1" ] || die "node B does not see run/step-1 made on node A"
			dirs=()
			for i in $(seq 0 $((MN_NSHARDS - 1))); do
				if [ "$i" -lt $((MN_NSHARDS / 2)) ]; then dirs+=("$a/run/step-1"); else dirs+=("$b/run/step-1"); fi
			done
			# what a poll of both nodes' stats costs by itself (the least of
			# three, as the nodes' own ticks add to some): taken off the
			# save's round trips for each poll below
			per_poll='' x=$(($(mn_stat "$a" pg_round_trips) + $(mn_stat "$b" pg_round_trips)))
			for i in 1 2 3; do
				rt0=$(($(mn_stat "$a" pg_round_trips) + $(mn_stat "$b" pg_round_trips)))
				if [ -z "$per_poll" ] || [ $((rt0 - x)) -lt "$per_poll" ]; then per_poll=$((rt0 - x)); fi
				x=$rt0
			done
			settle
			mn_ckpt "${dirs[@]}"
			t=$elapsed
			# the round trips of the whole save: its writes, commit and uploads;
			# save -> durable: from the commit seen until both upload queues
			# (chunks and the manifest) are empty (bench_mn.py durable)
			out=$("$PY" "$MN" durable "$BIN/ckptfs-admin" "$(now_ns)" "$a" "$b") || die "the nodes' uploads did not drain within 120 s"
			R[mndur,ckptfs,$r]=$(kv durable_ms <<<"$out")
			polls=$((1 + $(kv polls <<<"$out"))) # and rt1's own
			elapsed=$t
			rt1=$(($(mn_stat "$a" pg_round_trips) + $(mn_stat "$b" pg_round_trips) - polls * per_poll))
			R[mn,ckptfs,$r]=$(mbps $((MN_NSHARDS * MN_FILE)) "$elapsed")
			R[mnrt,ckptfs,$r]=$(awk -v n=$((rt1 - rt0)) -v b=$((MN_NSHARDS * MN_FILE)) 'BEGIN { printf "%.0f", n / (b / 1073741824) }')
			printf '   2 nodes (meta=)   %7.2fs %6s MB/s, %d PostgreSQL round trips until uploaded (%s per GiB; %d per stats call, %d calls taken off), durable %s ms after the commit\n' \
				"$elapsed" "${R[mn,ckptfs,$r]}" $((rt1 - rt0)) "${R[mnrt,ckptfs,$r]}" "$per_poll" "$polls" "${R[mndur,ckptfs,$r]}"
			echo "                     CPU-s/GiB until committed: $mn_cpu_used"
			# every shard read back through the other node
			rdirs=()
			for d in "${dirs[@]}"; do if [ "$d" = "$a/run/step-1" ]; then rdirs+=("$b/run/step-1"); else rdirs+=("$a/run/step-1"); fi; done
			mn_verify "${rdirs[@]}"
			sync
			sleep 1
			out=$("$PY" "$MN" saves "$a/series" "$b/series" "$MN_NSAVES" "$MN_SAVE") || die "bench_mn.py saves failed"
			l=$(kv commit_ms <<<"$(tr '\n' ' ' <<<"$out")")
			lat=$(awk -F'commit_ms=' 'NF > 1 { split($2, v, " "); printf "%s ", v[1] }' <<<"$out")
			MNL+="$lat"
			echo "   commit across nodes: median $(median <<<"$lat") ms, p95 $(pct 95 <<<"$lat") ms, max $(max <<<"$lat") ms over $MN_NSAVES saves (first $l ms)"
			for i in "${!mn_pids[@]}"; do
				kill -0 "${mn_pids[$i]}" 2>/dev/null || die "node daemon ${mn_pids[$i]} died"
			done
			mn_down
		fi
		rm -rf "$rd"
	done
done
rm -f "$shm"/mn*
fi # run_mn

# ---- the table --------------------------------------------------------------

vals() { local out='' i; for i in $(seq 1 "$ROUNDS"); do out+="${R[$1,$2,$i]:-} "; done; echo "$out"; }
ratios() { local out='' i; for i in $(seq 1 "$ROUNDS"); do out+="$(div "${R[$1,ckptfs,$i]}" "${R[$1,plain,$i]}") "; done; echo "$out"; }
nratios() { local out='' i; for i in $(seq 1 "$ROUNDS"); do out+="$(div "${R[$1,nullfs,$i]}" "${R[$1,plain,$i]}") "; done; echo "$out"; }
met() { awk -v v="$1" -v t="$2" -v op="$3" 'BEGIN { ok = (op == ">=") ? v >= t : (op == "<=") ? v <= t : v < t; print ok ? "yes" : "no" }'; }
# round_line M SIDE: "   rN plain / SIDE / ratio" for every round of metric M.
round_line() { local i; for i in $(seq 1 "$ROUNDS"); do printf '   r%d %s / %s / %s' "$i" "${R[$1,plain,$i]}" "${R[$1,$2,$i]}" "$(div "${R[$1,$2,$i]}" "${R[$1,plain,$i]}")"; done; }
row() { printf '%-34s %10s %10s %8s %8s %5s\n' "$@"; }

echo
echo "== per round: plain / ckptfs / ratio"
if [ "$run_io" = 1 ]; then
for m in uw cr rw; do
	case $m in uw) n="unique write MB/s" ;; cr) n="cold read MB/s" ;; rw) n="replicated write MB/s" ;; esac
	printf '   %-23s%s\n' "$n" "$(round_line $m ckptfs)"
done
if [ "$FLOOR" = 1 ]; then
	for m in uw cr rw; do
		case $m in uw) n="  nullfs unique write" ;; cr) n="  nullfs cold read" ;; rw) n="  nullfs replicated" ;; esac
		printf '   %-23s%s\n' "$n" "$(round_line $m nullfs)"
	done
fi
printf '   %-23s%s\n' "stored / one replica" "$(for i in $(seq 1 "$ROUNDS"); do printf '   r%d %s / %s' "$i" "${R[rs,plain,$i]}" "${R[rs,ckptfs,$i]}"; done)"
printf '   %-23s%s\n' "daemon VmHWM MiB" "$(for i in $(seq 1 "$ROUNDS"); do printf '   r%d %s' "$i" "${R[rss,ckptfs,$i]}"; done)"
fi
if [ "$run_mn" = 1 ]; then
	printf '   %-23s%s\n' "1 node / 2 nodes MB/s" "$(round_line mn ckptfs)"
fi
if [ "$run_meta" = 1 ] || [ "$run_gen" = 1 ]; then
	ms=''
	[ "$run_meta" = 0 ] || ms+='mg mf mgs mfs '
	[ "$run_gen" = 0 ] || ms+='rm kp kr'
	for m in $ms; do
		case $m in
		mg) n="creates gen dir files/s" ;; mf) n="creates flat files/s" ;;
		mgs) n="  gen dir + syncfs" ;; mfs) n="  flat + syncfs" ;;
		rm) n="rm -rf gen. s" ;; kp) n="keep=1 deletion s" ;; kr) n="  after a remount s" ;;
		esac
		p=$m
		if [ $m = kp ] || [ $m = kr ]; then p='rm'; fi # against the plain rm -rf of the same round
		line=''
		for i in $(seq 1 "$ROUNDS"); do line+="   r$i ${R[$p,plain,$i]} / ${R[$m,ckptfs,$i]} / $(div "${R[$m,ckptfs,$i]}" "${R[$p,plain,$i]}")"; done
		printf '   %-23s%s\n' "$n" "$line"
	done
	if [ "$FLOOR" = 1 ] && [ "$run_meta" = 1 ]; then
		printf '   %-23s%s\n' "  nullfs creates" "$(round_line nm nullfs)"
		printf '   %-23s%s\n' "  ckptfs / nullfs" "$(for i in $(seq 1 "$ROUNDS"); do printf '   r%d %s / %s / %s' "$i" "${R[nm,nullfs,$i]}" "${R[mg,ckptfs,$i]}" "$(div "${R[mg,ckptfs,$i]}" "${R[nm,nullfs,$i]}")"; done)"
		printf '   %-23s%s\n' "  + uploads / nullfs" "$(for i in $(seq 1 "$ROUNDS"); do printf '   r%d %s / %s / %s' "$i" "${R[nm,nullfs,$i]}" "${R[mgu,ckptfs,$i]}" "$(div "${R[mgu,ckptfs,$i]}" "${R[nm,nullfs,$i]}")"; done)"
	fi
	if [ "$run_gen" = 1 ]; then
		printf '   %-23s%s\n' "commit ms median, p95" "$(for i in $(seq 1 "$ROUNDS"); do printf '   r%d %s, %s' "$i" "${R[cm,ckptfs,$i]}" "${R[cp,ckptfs,$i]}"; done)"
	fi
	if [ "$run_gen" = 1 ]; then
		printf '   %-23s%s\n' "keep=1 commit ms" "$(for i in $(seq 1 "$ROUNDS"); do printf '   r%d %s, remounted %s' "$i" "${R[kpc,ckptfs,$i]}" "${R[krc,ckptfs,$i]}"; done)"
	fi
fi
if [ "$run_wb" = 1 ]; then
	for m in ws wd wc ww ns nd nc; do
		[ "$wb_nfs" = 1 ] || case $m in n*) continue ;; esac
		[ "$run_wbfs" = 1 ] || case $m in w*) continue ;; esac
		case $m in
		ws) n="wb save returns MB/s" ;; wd) n="  durable on BACKING" ;; wc) n="wb cold restore MB/s" ;;
		ww) n="wb warm restore MB/s" ;; ns) n="nfs save returns MB/s" ;; nd) n="  durable on nfs://" ;;
		nc) n="nfs cold restore MB/s" ;;
		esac
		printf '   %-23s%s\n' "$n" "$(round_line $m ckptfs)"
	done
	printf '   %-23s%s\n' "fresh-node mount s" "$(for i in $(seq 1 "$ROUNDS"); do printf '   r%d %s%s' "$i" "${R[mt,ckptfs,$i]:-}" "$([ "$wb_nfs" = 0 ] || echo ", nfs:// ${R[nmt,ckptfs,$i]:-}")"; done)"
fi

if [ "$run_cost" = 1 ]; then
	printf '   %-23s%s\n' "cost: durable s" "$(round_line kd ckptfs)"
	printf '   %-23s%s\n' "  CPU-s/GiB, fsync/GiB" "$(for i in $(seq 1 "$ROUNDS"); do printf '   r%d %s, files %s + dirs %s' "$i" "${R[kcpu,ckptfs,$i]}" "$((${R[kop.fsync,ckptfs,$i]:-0} - ${R[kfsyncdir,ckptfs,$i]:-0}))" "${R[kfsyncdir,ckptfs,$i]:-}"; done)"
fi
echo
echo "== result ($ROUNDS round(s), scale ${BENCH_SCALE:-full}; MB = 10^6 bytes; ratio = median of the per-round ckptfs/plain)"
row metric plain ckptfs ratio target "met?"
row --------------------------------- ---------- ---------- -------- -------- -----
if [ "$run_io" = 1 ]; then
for m in uw cr rw; do
	case $m in
	uw) n="unique write (MB/s)" tgt=0.8 ;;
	cr) n="cold read (MB/s)" tgt=0.8 ;;
	rw) n="replicated write (MB/s)" tgt=2.0 ;;
	esac
	ratio=$(ratios $m | median)
	row "$n" "$(vals $m plain | median)" "$(vals $m ckptfs | median)" "${ratio}x" ">=${tgt}x" "$(met "$ratio" "$tgt" '>=')"
	if [ "$FLOOR" = 1 ]; then
		row "  FUSE floor: nullfs" "$(vals $m plain | median)" "$(vals $m nullfs | median)" "$(nratios $m | median)x" "-" "-"
	fi
done
rs=$(vals rs ckptfs | max)
row "replicated: stored / one replica" "$(vals rs plain | median)x" "${rs}x" "-" "<=1.05x" "$(met "$rs" 1.05 '<=')"
rss=$(vals rss ckptfs | max)
row "daemon peak RSS (MiB, VmHWM)" "-" "$rss" "-" "<256" "$(met "$rss" 256 '<')"
fi
if [ "$run_meta" = 1 ]; then
	for m in mg mf mgs mfs; do
		case $m in
		mg) n="create+4K+close, gen dir (files/s)" tgt=0.3 ;;
		mf) n="create+4K+close, flat (files/s)" tgt=0.3 ;;
		mgs) n="  gen dir, then syncfs (files/s)" tgt='' ;;
		mfs) n="  flat, then syncfs (files/s)" tgt='' ;;
		esac
		ratio=$(ratios $m | median)
		if [ -n "$tgt" ]; then
			row "$n" "$(vals $m plain | imedian)" "$(vals $m ckptfs | imedian)" "${ratio}x" ">=${tgt}x" "$(met "$ratio" "$tgt" '>=')"
		else
			row "$n" "$(vals $m plain | imedian)" "$(vals $m ckptfs | imedian)" "${ratio}x" "-" "-"
		fi
		if [ "$m" = mg ] && [ "$FLOOR" = 1 ]; then
			row "  FUSE floor: nullfs (files/s)" "$(vals nm plain | imedian)" "$(vals nm nullfs | imedian)" "$(nratios nm | median)x" "-" "-"
			nr='' # issue 20 part 3: ckptfs against nullfs of the same round
			for i in $(seq 1 "$ROUNDS"); do nr+="$(div "${R[mg,ckptfs,$i]}" "${R[nm,nullfs,$i]}") "; done
			nr=$(median <<<"$nr")
			row "  gen dir / nullfs (files/s)" "$(vals nm nullfs | imedian)" "$(vals mg ckptfs | imedian)" "${nr}x" ">=0.5x" "$(met "$nr" 0.5 '>=')"
			nr='' # the same with the time until the uploads were done (D9 lets them follow)
			for i in $(seq 1 "$ROUNDS"); do nr+="$(div "${R[mgu,ckptfs,$i]}" "${R[nm,nullfs,$i]}") "; done
			row "  + uploads / nullfs (files/s)" "$(vals nm nullfs | imedian)" "$(vals mgu ckptfs | imedian)" "$(median <<<"$nr")x" "-" "-"
		fi
	done
fi
if [ "$run_gen" = 1 ]; then
	rmp=$(vals rm plain | median) rmc=$(vals rm ckptfs | median)
	row "rm -rf of a $((NFILES + 2))-file gen. (s)" "$rmp" "$rmc" "$(ratios rm | median)x" "<1s" "$(met "$rmc" 1 '<')"
	for m in kp kr; do
		case $m in kp) n="keep=1 deletion of it (s)" ;; kr) n="  the same after a remount (s)" ;; esac
		kr=''
		for i in $(seq 1 "$ROUNDS"); do kr+="$(div "${R[$m,ckptfs,$i]}" "${R[rm,plain,$i]}") "; done
		kpc=$(vals $m ckptfs | median)
		row "$n" "$rmp" "$kpc" "$(median <<<"$kr")x" "<1s" "$(met "$kpc" 1 '<')"
	done
	cm=$(median <<<"$CMS") cp=$(pct 95 <<<"$CMS")
	row "commit latency, median (ms)" "-" "$cm" "-" "<100ms" "$(met "$cm" 100 '<')"
	row "commit latency, p95 (ms)" "-" "$cp" "-" "<100ms" "$(met "$cp" 100 '<')"
	for m in kpc krc; do
		case $m in kpc) n="  when keep=1 deletes (ms)" ;; krc) n="  the same after a remount (ms)" ;; esac
		cm=$(vals $m ckptfs | median)
		row "$n" "-" "$cm" "-" "<100ms" "$(met "$cm" 100 '<')"
	done
fi
if [ "$run_wb" = 1 ]; then
	for m in ws wd wc ww ns nd nc; do
		[ "$wb_nfs" = 1 ] || case $m in n*) continue ;; esac
		[ "$run_wbfs" = 1 ] || case $m in w*) continue ;; esac
		case $m in
		ws) n="wb: save returns (MB/s)" tgt=5 ;;
		wd) n="wb:   durable on BACKING (MB/s)" tgt='' ;;
		wc) n="wb: cold restore (MB/s)" tgt=0.8 ;;
		ww) n="wb: warm restore (MB/s)" tgt=0.8 ;;
		ns) n="nfs://: save returns (MB/s)" tgt='' ;;
		nd) n="nfs://:   durable (MB/s)" tgt='' ;;
		nc) n="nfs://: cold restore (MB/s)" tgt=0.9 ;; # issue 20 part 4
		esac
		ratio=$(ratios $m | median)
		if [ -n "$tgt" ]; then
			row "$n" "$(vals $m plain | imedian)" "$(vals $m ckptfs | imedian)" "${ratio}x" ">=${tgt}x" "$(met "$ratio" "$tgt" '>=')"
		else
			row "$n" "$(vals $m plain | imedian)" "$(vals $m ckptfs | imedian)" "${ratio}x" "-" "-"
		fi
	done
fi
if [ "$run_mn" = 1 ]; then
	ratio=$(ratios mn | median)
	row "2 nodes (meta=) vs 1 (SQLite) MB/s" "$(vals mn plain | imedian)" "$(vals mn ckptfs | imedian)" "${ratio}x" ">=0.9x" "$(met "$ratio" 0.9 '>=')"
	v=$(pct 95 <<<"$MNL")
	row "  commit A -> B p95 (ms)" "-" "$v" "-" "<100" "$(met "$v" 100 '<')"
	row "  commit A -> B median (ms)" "-" "$(median <<<"$MNL")" "-" "-" "-"
	row "  PostgreSQL round trips / GiB" "-" "$(vals mnrt ckptfs | imedian)" "-" "-" "-"
	row "  save -> durable median (ms)" "-" "$(vals mndur ckptfs | median)" "-" "-" "-"
fi
if [ "$run_cost" = 1 ]; then
	ratio=$(ratios kd | median)
	row "cost: durable, 1 ms/op BACKING (s)" "$(vals kd plain | median)" "$(vals kd ckptfs | median)" "${ratio}x" "<=1.1x" "$(met "$ratio" 1.1 '<=')"
	v=$(vals kcpu ckptfs | median)
	row "  daemon CPU-s / GiB unique data" "-" "$v" "-" "<=1.2" "$(met "$v" 1.2 '<=')"
	row "  the writes alone" "-" "$(vals kwcpu ckptfs | median)" "-" "-" "-"
	for k in $COST_KEYS; do
		[ "$k" != bytes_written ] || continue
		row "  BACKING ${k#op.} / GiB uploaded" "-" "$(vals "k$k" ckptfs | imedian)" "-" "-" "-"
	done
fi
echo
if [ "$FLOOR" = 1 ] && { [ "$run_io" = 1 ] || [ "$run_meta" = 1 ]; }; then
	echo "FUSE floor: the same work on nullfs (tests/nullfs: ckptfs's FUSE settings, no storage: writes dropped, reads of zeros),"
	echo "  against the plain directory of the same round: what any FUSE filesystem can reach here (BENCH_FLOOR=0 to skip)."
fi
if [ "$run_io" = 1 ]; then
echo "stored: growth of du -sb BACKING/chunks during the replicated write (worst round); plain: du -sb of its replicas."
echo "daemon CPU-s per GiB of unique data written (phase 1, median): $(awk -v c="$(vals uwcpu ckptfs | median)" -v b=$((NWRITERS * UNIQUE_FILE)) 'BEGIN { printf "%.2f", c / (b / 1073741824) }') (target <= 1.2; BACKING shares the cache's filesystem: uploads are hard links)"
echo "daemon CPU seconds, median (kernel part): unique write $(vals uwcpu ckptfs | median) ($(vals uwsys ckptfs | median)), cold read $(vals crcpu ckptfs | median) ($(vals crsys ckptfs | median)), replicated write $(vals rwcpu ckptfs | median) ($(vals rwsys ckptfs | median))"
fi
if [ "$run_gen" = 1 ]; then
	echo "generations: for times (s) the ratio is ckptfs/plain, above 1 = ckptfs slower; keep=1 deletion against the plain rm -rf."
	echo "commit latency: from the start of the rename of .metadata.tmp onto .metadata to the first read of state=committed,"
	echo "  over all $(wc -w <<<"$CMS") saves; rename() alone: median $(median <<<"$RMS") ms, p95 $(pct 95 <<<"$RMS") ms; the fsyncs before it: median $(median <<<"$FSS") s per save."
	echo "  'when keep=1 deletes': the commit of the small generation that makes keep=1 delete the $((NFILES + 2))-file one (phase 8), median of the rounds."
	echo "daemon CPU seconds, median (kernel part): creates in a gen dir $(vals mgcpu ckptfs | median) ($(vals mgsys ckptfs | median)), flat $(vals mfcpu ckptfs | median) ($(vals mfsys ckptfs | median)), rm -rf $(vals rmcpu ckptfs | median) ($(vals rmsys ckptfs | median)), keep=1 deletion $(vals kpcpu ckptfs | median) ($(vals kpsys ckptfs | median)), after a remount $(vals krcpu ckptfs | median) ($(vals krsys ckptfs | median))"
fi
if [ "$run_wb" = 1 ]; then
	echo "write-back: $WB_NFILES x $((WB_FILE / MiB)) MiB per save; plain = the same files straight into BACKING (faultfs bw=$WB_BW B/s) with fsync,"
	echo "  read back from it cold; warm restore against a plain local directory; 'durable': save start to the catalog saying nothing is queued"
	echo "  and the generation durable (plain: its straight write); cold restore on a fresh node (new empty cache), after drop_caches."
	[ "$wb_nfs" = 0 ] || echo "  nfs://: plain = ganesha's own speed through libnfs (build/backing-tool put/get, 4 at once, unthrottled loopback)."
	[ "$run_wbfs" = 1 ] || echo "  (BENCH_ONLY=restore: phase 15, only the nfs:// part, $WB_NFILES x $((WB_FILE / MiB)) MiB)"
	echo "  fresh-node mount (median): $(vals mt ckptfs | median) s$([ "$wb_nfs" = 0 ] || echo ", nfs:// $(vals nmt ckptfs | median) s");" \
		"daemon CPU seconds, median (kernel part): save $(vals wscpu ckptfs | median) ($(vals wssys ckptfs | median)), upload tail $(vals wdcpu ckptfs | median) ($(vals wdsys ckptfs | median)), cold restore $(vals wccpu ckptfs | median) ($(vals wcsys ckptfs | median)), warm $(vals wwcpu ckptfs | median) ($(vals wwsys ckptfs | median))"
fi
if [ "$run_codec" = 1 ]; then
	echo "codec (phase 13): BACKING bytes / logical bytes of a trained checkpoint, one fresh mount per file and codec:"
	for c in $CODECS; do
		t=''
		case $c in lz4) t=0.87 ;; zstd) t=0.80 ;; esac
		for f in ckpt.pt ckpt.safetensors; do
			printf '   %-5s %-17s %s x%s\n' "$c" "$f" "${C[ratio,$c,$f]}" \
				"$([ -z "$t" ] || echo " (target <= $t: $(met "${C[ratio,$c,$f]}" "$t" "<="))")"
		done
		printf '   %-5s %-17s %s MB/s, daemon %s CPU-s/GiB (unique write)\n' "$c" random.bin "${C[mbps,$c,random.bin]}" "${C[cpu,$c,random.bin]}"
	done
fi
echo "load average at the end: $(loadavg)"
