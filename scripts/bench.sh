#!/usr/bin/env bash
# make bench — ckptfs beside a plain directory on the same disk, the same work
# in the same run, reported as ratios (see docs/BENCH.md).
#
#   scripts/bench.sh BUILD_DIR
#
#   BENCH_SCALE=small   all sizes 8x smaller (a quick run)
#   BENCH_ROUNDS=N      rounds per run (default 3); the table shows the median
#   BENCH_TMP=DIR       where the plain directory, BACKING and cache live
#                       (default /var/tmp; one filesystem for all three)
#   BENCH_PERF=1        perf record -g the daemon during the unique write and
#                       print its top symbols
#
# Workloads, per round (each on a fresh mount, plain and ckptfs back to back,
# the order alternating between rounds):
#   1. unique write     4 files x 1 GiB of random data, 4 concurrent writers,
#                       1 MiB writes, fsync, close
#   2. cold read        the same 4 files, page cache dropped, 4 concurrent readers
#   3. replicated write 8 replicas: a name-dependent header (0..200 bytes) and the
#                       same 512 MiB random payload, 8 concurrent writers, fsync
#   4. daemon peak RSS  VmHWM of the daemon at the end of the round
#
# A benchmark, not a test: missed targets print "no" and exit 0. Exit 1 when
# something breaks: data read back differs, a worker or the daemon fails.
set -euo pipefail

BUILD=${1:?usage: scripts/bench.sh BUILD_DIR}
BIN=$(cd "$BUILD" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
IO="$HERE/bench_io.py"
MiB=1048576
HZ=$(getconf CLK_TCK)

case "${BENCH_SCALE:-full}" in
full) div=1 ;;
small) div=8 ;;
*) echo "bench: BENCH_SCALE must be full or small" >&2; exit 2 ;;
esac
ROUNDS=${BENCH_ROUNDS:-3}
NWRITERS=4
NREPLICAS=8
UNIQUE_FILE=$((1024 * MiB / div)) # per writer
REPLICA=$((512 * MiB / div))      # payload per replica
TMPROOT=${BENCH_TMP:-/var/tmp}

die() { echo "bench: $*" >&2; exit 1; }
if [ ! -x "$BIN/ckptfs" ] || [ ! -x "$BIN/ckptfs-admin" ]; then die "no ckptfs in $BIN (run make first)"; fi
"$PY" -c 'import numpy' 2>/dev/null || die "$PY cannot import numpy (apt-get install python3-numpy)"

# ---- temp space, cleanup --------------------------------------------------

work=$(mktemp -d "$TMPROOT/ckptfs-bench.XXXXXX")
shm=$(mktemp -d /dev/shm/ckptfs-bench.XXXXXX)
mnt='' pid='' perf_pid=''
workers=()

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

cleanup() {
	local w
	for w in "${workers[@]}"; do kill "$w" 2>/dev/null || true; done
	if [ -n "$perf_pid" ]; then kill -INT "$perf_pid" 2>/dev/null || true; wait "$perf_pid" 2>/dev/null || true; fi
	stop_daemon
	rm -rf "$work" "$shm"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- helpers ----------------------------------------------------------------

now_ns() { date +%s%N; }

# Starts the daemon on a fresh BACKING and cache; sets mnt, pid, backing, cache.
start_daemon() {
	local d=$1
	backing=$d/backing cache=$d/cache mnt=$d/mnt
	mkdir -p "$backing" "$cache" "$mnt"
	"$BIN/ckptfs" -f -o cache="$cache" "$backing" "$mnt" 2>"$d/daemon.log" &
	pid=$!
	local i
	for i in $(seq 200); do mountpoint -q "$mnt" && return 0; kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
	cat "$d/daemon.log" >&2
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

# run_group NAME CMD... — runs each "|"-separated command line concurrently,
# waits for all; prints the elapsed seconds. Fails if any worker fails.
# Usage: run_group "cmd1 args" "cmd2 args" ...
run_group() {
	local t0 t1 rc=0 w
	workers=()
	t0=$(now_ns)
	for w in "$@"; do
		# shellcheck disable=SC2086
		$w &
		workers+=($!)
	done
	for w in "${workers[@]}"; do wait "$w" || rc=1; done
	t1=$(now_ns)
	workers=()
	[ "$rc" = 0 ] || die "a worker failed (see above)"
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }'
}

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
sys_ticks() { awk '{ print $15 }' "/proc/$pid/stat"; }
stat_of() { "$BIN/ckptfs-admin" stats "$mnt" | awk -v k="$1" '$1 == k { print $2 }'; }
chunks_du() { du -sb "$backing/chunks" 2>/dev/null | cut -f1 || echo 0; }
chunks_files() { find "$backing/chunks" -type f -printf '%s\n' 2>/dev/null | awk '{ s += $1 } END { print s + 0 }'; }
mbps() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.0f", b / 1e6 / s }'; }
div() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
max() { tr ' ' '\n' | grep -v '^$' | sort -g | tail -1; }

# ---- the machine ----------------------------------------------------------

can_drop=0
if [ -w /proc/sys/vm/drop_caches ]; then can_drop=1; fi
dev=$(df --output=source "$work" | tail -1)
echo "== ckptfs bench $(date -u '+%Y-%m-%d %H:%M:%S UTC'), scale ${BENCH_SCALE:-full}, $ROUNDS round(s)"
echo "commit   $(git -C "$HERE/.." rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$HERE/.." diff --quiet HEAD -- fs meta 2>/dev/null || echo ' (fs/ or meta/ modified)')"
echo "kernel   $(uname -r), $(. /etc/os-release && echo "$PRETTY_NAME")"
echo "cpu      $(nproc) x $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)"
free -h | sed 's/^/memory   /'
echo "disk     $work on $dev ($(df --output=fstype "$work" | tail -1)), $(df -h --output=avail "$work" | tail -1 | tr -d ' ') free"
df -h "$work" | sed 's/^/         /'
echo "data     tmpfs $shm; ckptfs $(stat -c %s "$BIN/ckptfs") bytes, $BIN"
[ "$can_drop" = 1 ] || echo "WARNING: cannot write /proc/sys/vm/drop_caches (not root): the 'cold' read is not cold"

need=$(((NWRITERS * UNIQUE_FILE + NREPLICAS * REPLICA) * 2 + NWRITERS * UNIQUE_FILE))
avail=$(df -B1 --output=avail "$work" | tail -1)
[ "$avail" -gt "$need" ] || die "$work: $((avail / MiB)) MiB free, the bench needs about $((need / MiB)) MiB"

# ---- the data: generated once, in tmpfs -------------------------------------

echo
echo "== generating $((NWRITERS * UNIQUE_FILE / MiB + REPLICA / MiB)) MiB of random data in $shm"
gen=()
for i in $(seq 0 $((NWRITERS - 1))); do gen+=("$PY $IO gen $shm/unique$i $UNIQUE_FILE $((1000 + i))"); done
gen+=("$PY $IO gen $shm/payload $REPLICA 2000")
t=$(run_group "${gen[@]}")
echo "   in ${t}s"

# How much a page-cache fill costs here. On a VM whose balloon reports free
# pages to the host, a write into pages the host took back (after a drop or
# a few idle seconds) costs several times more than into pages just freed.
# Every byte ckptfs writes fills page cache twice (the FUSE file, the chunk
# object on the local disk); a plain directory once.
echo
echo "== page-cache fill cost (buffered write of $((UNIQUE_FILE / MiB)) MiB, no fsync, one writer)"
calib() {
	local t
	t=$(run_group "$PY $IO fill $shm/unique0 $work/calib")
	rm -f "$work/calib"
	mbps "$UNIQUE_FILE" "$t"
}
sync; sleep 5
fresh=$(calib) recycled=$(calib)
echo "   into fresh pages (after 5 s idle): $fresh MB/s; into pages just freed: $recycled MB/s"

# Replica i: header of hlen(i) bytes (0..200, growing with the name) + payload.
rname() { printf 'checkpoint-step-%06d/rank%02d/model_states%s.pt' 1000 "$1" "$(printf '%*s' "$1" '' | tr ' ' '_')"; }
hlen() { echo $(( $1 * 200 / (NREPLICAS - 1) )); }

# ---- one round ------------------------------------------------------------

declare -A R # R[metric,side,round]

# phase_unique SIDE DIR ROUND
phase_unique_write() {
	local side=$1 dir=$2 r=$3 c0 c1 k0 k1 t cmds=() i
	settle
	for i in $(seq 0 $((NWRITERS - 1))); do cmds+=("$PY $IO write $shm/unique$i $dir/unique$i.bin 0 -"); done
	[ "$side" = ckptfs ] && c0=$(cpu_ticks) k0=$(sys_ticks)
	if [ "$side" = ckptfs ] && [ "${BENCH_PERF:-0}" = 1 ] && [ "$r" = 1 ]; then
		perf record -g -o "$work/perf.data" -p "$pid" 2>"$work/perf.log" >/dev/null &
		perf_pid=$!
		sleep 0.5
	fi
	t=$(run_group "${cmds[@]}")
	if [ -n "$perf_pid" ]; then kill -INT "$perf_pid"; wait "$perf_pid" || true; perf_pid=; fi
	R[uw,$side,$r]=$(mbps $((NWRITERS * UNIQUE_FILE)) "$t")
	if [ "$side" = ckptfs ]; then
		c1=$(cpu_ticks) k1=$(sys_ticks)
		R[uwcpu,$side,$r]=$(div $((c1 - c0)) "$HZ") R[uwsys,$side,$r]=$(div $((k1 - k0)) "$HZ")
		check_daemon
	fi
	printf '   %-7s unique write     %6.2fs  %5s MB/s%s\n' "$side" "$t" "${R[uw,$side,$r]}" \
		"$([ "$side" = ckptfs ] && echo "   (daemon CPU ${R[uwcpu,$side,$r]}s, of which kernel ${R[uwsys,$side,$r]}s)")"
}

phase_cold_read() {
	local side=$1 dir=$2 r=$3 c0 c1 k0 k1 t cmds=() i
	settle
	for i in $(seq 0 $((NWRITERS - 1))); do cmds+=("$PY $IO read $dir/unique$i.bin"); done
	[ "$side" = ckptfs ] && c0=$(cpu_ticks) k0=$(sys_ticks)
	t=$(run_group "${cmds[@]}")
	R[cr,$side,$r]=$(mbps $((NWRITERS * UNIQUE_FILE)) "$t")
	if [ "$side" = ckptfs ]; then
		c1=$(cpu_ticks) k1=$(sys_ticks)
		R[crcpu,$side,$r]=$(div $((c1 - c0)) "$HZ") R[crsys,$side,$r]=$(div $((k1 - k0)) "$HZ")
		check_daemon
	fi
	printf '   %-7s cold read        %6.2fs  %5s MB/s%s\n' "$side" "$t" "${R[cr,$side,$r]}" \
		"$([ "$side" = ckptfs ] && echo "   (daemon CPU ${R[crcpu,$side,$r]}s, of which kernel ${R[crsys,$side,$r]}s)")"
	# untimed: every byte read back equals what was written
	cmds=()
	for i in $(seq 0 $((NWRITERS - 1))); do cmds+=("$PY $IO verify $shm/unique$i $dir/unique$i.bin 0 -"); done
	run_group "${cmds[@]}" >/dev/null || die "$side: unique files differ from what was written"
}

phase_replicated_write() {
	local side=$1 dir=$2 r=$3 c0 c1 k0 k1 t cmds=() i du0 du1 f0 f1 s0 s1 u0 u1 logical=0
	mkdir -p "$dir/replicas"
	settle
	for i in $(seq 0 $((NREPLICAS - 1))); do
		mkdir -p "$(dirname "$dir/replicas/$(rname "$i")")"
		cmds+=("$PY $IO write $shm/payload $dir/replicas/$(rname "$i") $(hlen "$i") $(rname "$i")")
		logical=$((logical + REPLICA + $(hlen "$i")))
	done
	if [ "$side" = ckptfs ]; then
		c0=$(cpu_ticks) k0=$(sys_ticks) du0=$(chunks_du) f0=$(chunks_files) s0=$(stat_of stored_bytes) u0=$(stat_of unique_bytes)
	fi
	t=$(run_group "${cmds[@]}")
	R[rw,$side,$r]=$(mbps "$logical" "$t")
	if [ "$side" = ckptfs ]; then
		c1=$(cpu_ticks) k1=$(sys_ticks) du1=$(chunks_du) f1=$(chunks_files) s1=$(stat_of stored_bytes) u1=$(stat_of unique_bytes)
		R[rwcpu,$side,$r]=$(div $((c1 - c0)) "$HZ") R[rwsys,$side,$r]=$(div $((k1 - k0)) "$HZ")
		R[rs,$side,$r]=$(div $((du1 - du0)) $((REPLICA + $(hlen $((NREPLICAS - 1))))))
		R[rsdu,$side,$r]=$((du1 - du0)) R[rsfiles,$side,$r]=$((f1 - f0))
		R[rsstored,$side,$r]=$((s1 - s0)) R[rsunique,$side,$r]=$((u1 - u0))
		check_daemon
	else
		du1=$(du -sb "$dir/replicas" | cut -f1)
		R[rs,$side,$r]=$(div "$du1" $((REPLICA + $(hlen $((NREPLICAS - 1))))))
		R[rsdu,$side,$r]=$du1
	fi
	printf '   %-7s replicated write %6.2fs  %5s MB/s%s\n' "$side" "$t" "${R[rw,$side,$r]}" \
		"$([ "$side" = ckptfs ] && echo "   (daemon CPU ${R[rwcpu,$side,$r]}s, of which kernel ${R[rwsys,$side,$r]}s)")"
	if [ "$side" = ckptfs ]; then
		printf '   %-7s   growth: du -sb BACKING/chunks %d, object files %d, catalog stored_bytes %d, unique_bytes %d (one replica %d)\n' \
			"$side" $((du1 - du0)) $((f1 - f0)) $((s1 - s0)) $((u1 - u0)) $((REPLICA + $(hlen $((NREPLICAS - 1)))))
	fi
	cmds=()
	for i in $(seq 0 $((NREPLICAS - 1))); do
		cmds+=("$PY $IO verify $shm/payload $dir/replicas/$(rname "$i") $(hlen "$i") $(rname "$i")")
	done
	run_group "${cmds[@]}" >/dev/null || die "$side: replicas differ from what was written"
}

for r in $(seq 1 "$ROUNDS"); do
	echo
	echo "== round $r/$ROUNDS"
	rd=$work/r$r
	mkdir -p "$rd/plain"
	start_daemon "$rd"
	if [ $((r % 2)) = 1 ]; then order="plain ckptfs"; else order="ckptfs plain"; fi
	for phase in phase_unique_write phase_cold_read phase_replicated_write; do
		for side in $order; do
			if [ "$side" = plain ]; then $phase plain "$rd/plain" "$r"; else $phase ckptfs "$mnt" "$r"; fi
		done
	done
	check_daemon
	R[rss,ckptfs,$r]=$(awk '/^VmHWM/ { printf "%.1f", $2 / 1024 }' "/proc/$pid/status")
	echo "   ckptfs  daemon VmHWM      ${R[rss,ckptfs,$r]} MiB"
	if grep -qiE 'error|corrupt' "$rd/daemon.log"; then
		echo "   ckptfs  daemon log has errors:"; grep -iE 'error|corrupt' "$rd/daemon.log" | head -5 | sed 's/^/     /'
	fi
	stop_daemon
	rm -rf "$rd"
done

if [ "${BENCH_PERF:-0}" = 1 ] && [ -s "$work/perf.data" ]; then
	echo
	echo "== perf: daemon during the unique write of round 1 (self time, top 25)"
	perf report -i "$work/perf.data" --no-children --sort symbol --stdio 2>/dev/null |
		grep -E '^ +[0-9]' | head -25
	echo "   by shared object:"
	perf report -i "$work/perf.data" --no-children --sort dso --stdio 2>/dev/null |
		grep -E '^ +[0-9]' | head -10
fi

# ---- the table --------------------------------------------------------------

vals() { local m=$1 s=$2 r out=; for r in $(seq 1 "$ROUNDS"); do out+="${R[$m,$s,$r]:-} "; done; echo "$out"; }
met() { awk -v v="$1" -v t="$2" -v op="$3" 'BEGIN { ok = (op == ">=") ? v >= t : (op == "<=") ? v <= t : v < t; print ok ? "yes" : "no" }'; }
ratios() { local m=$1 r out=; for r in $(seq 1 "$ROUNDS"); do out+="$(div "${R[$m,ckptfs,$r]}" "${R[$m,plain,$r]}") "; done; echo "$out"; }

echo
echo "== per round (plain / ckptfs / ratio)"
for m in uw cr rw; do
	case $m in uw) n="unique write MB/s" ;; cr) n="cold read MB/s" ;; rw) n="replicated write MB/s" ;; esac
	line=
	for r in $(seq 1 "$ROUNDS"); do line+="  r$r ${R[$m,plain,$r]} / ${R[$m,ckptfs,$r]} / $(div "${R[$m,ckptfs,$r]}" "${R[$m,plain,$r]}")"; done
	printf '   %-24s%s\n' "$n" "$line"
done
printf '   %-24s%s\n' "replicated stored/1" "$(for r in $(seq 1 "$ROUNDS"); do printf '  r%d %s / %s' "$r" "${R[rs,plain,$r]}" "${R[rs,ckptfs,$r]}"; done)"
printf '   %-24s%s\n' "daemon VmHWM MiB" "$(for r in $(seq 1 "$ROUNDS"); do printf '  r%d %s' "$r" "${R[rss,ckptfs,$r]}"; done)"

echo
echo "== result: median of $ROUNDS round(s); ratio = ckptfs / plain, medians of the per-round ratios"
row() { printf '%-34s %10s %10s %8s %8s %5s\n' "$@"; }
row metric plain ckptfs ratio target "met?"
row "$(printf '%s' ---------------------------------)" ---------- ---------- -------- -------- -----
for m in uw cr rw; do
	case $m in
	uw) n="unique write (MB/s)" tgt=0.8 ;;
	cr) n="cold read (MB/s)" tgt=0.8 ;;
	rw) n="replicated write (MB/s)" tgt=2.0 ;;
	esac
	ratio=$(ratios $m | median)
	row "$n" "$(vals $m plain | median)" "$(vals $m ckptfs | median)" "${ratio}x" ">=${tgt}x" "$(met "$ratio" "$tgt" '>=')"
done
rs=$(vals rs ckptfs | max)
row "replicated stored / one replica" "$(vals rs plain | median)x" "${rs}x" "-" "<=1.05x" "$(met "$rs" 1.05 '<=')"
rss=$(vals rss ckptfs | max)
row "daemon peak RSS (MiB, VmHWM)" "-" "$rss" "-" "<256" "$(met "$rss" 256 '<')"
echo
echo "stored: du -sb BACKING/chunks grown by the replicated write (worst round); plain: du -sb of the replicas."
echo "daemon CPU seconds (median): unique write $(vals uwcpu ckptfs | median), cold read $(vals crcpu ckptfs | median), replicated write $(vals rwcpu ckptfs | median)"
