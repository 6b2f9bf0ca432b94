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
#   BENCH_PERF=1        in round 1, perf-record the daemon during the three ckptfs
#                       phases and count the FUSE requests; print the profile
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

die() { echo "bench: $*" >&2; exit 1; }
if [ ! -x "$BIN/ckptfs" ] || [ ! -x "$BIN/ckptfs-admin" ]; then die "no ckptfs in $BIN (run make first)"; fi
"$PY" -c 'import numpy' 2>/dev/null || die "$PY cannot import numpy (apt-get install python3-numpy)"
if [ "$PERF" = 1 ] && ! command -v perf >/dev/null; then die "BENCH_PERF=1 needs perf (apt-get install linux-perf)"; fi

# ---- temp space, cleanup: only what this script started ---------------------

work=$(mktemp -d "$TMPROOT/ckptfs-bench.XXXXXX")
shm=$(mktemp -d /dev/shm/ckptfs-bench.XXXXXX)
mnt='' pid='' perf_pids=()
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

perf_stop() {
	local p
	for p in "${perf_pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
	for p in "${perf_pids[@]}"; do wait "$p" 2>/dev/null || true; done
	perf_pids=()
}

cleanup() {
	local w
	for w in "${workers[@]}"; do kill "$w" 2>/dev/null || true; done
	perf_stop
	stop_daemon
	rm -rf "$work" "$shm"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- helpers ----------------------------------------------------------------

now_ns() { date +%s%N; }

# Starts the daemon on a fresh BACKING and cache under $1; sets mnt, pid,
# backing, conn (the FUSE connection number, for tracepoint filtering).
start_daemon() {
	local d=$1 i
	backing=$d/backing cache=$d/cache mnt=$d/mnt
	mkdir -p "$backing" "$cache" "$mnt"
	"$BIN/ckptfs" -f -o cache="$cache" "$backing" "$mnt" 2>"$d/daemon.log" &
	pid=$!
	for i in $(seq 200); do
		if mountpoint -q "$mnt"; then
			conn=$(mountpoint -d "$mnt" | cut -d: -f2)
			return 0
		fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
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

# run_group "CMD ARGS" ... — runs the command lines concurrently (no argument
# may contain spaces), waits for all, sets $elapsed (seconds). Dies if any of
# them fails. Runs in this shell, so that the EXIT trap can stop the workers.
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
echo "== ckptfs bench $(date -u '+%Y-%m-%d %H:%M:%S UTC'), scale ${BENCH_SCALE:-full}, $ROUNDS round(s)"
echo "commit   $(git -C "$HERE/.." rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$HERE/.." diff --quiet HEAD -- fs meta 2>/dev/null || echo ' (fs/ or meta/ differ from it in the work tree)'); binaries $BIN"
echo "kernel   $(uname -r), $(. /etc/os-release && echo "$PRETTY_NAME")"
echo "cpu      $(nproc) x $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo); load average $(loadavg)"
free -h | sed 's/^/memory   /'
echo "disk     $work: $dev ($(df --output=fstype "$work" | tail -1)), $(df -h --output=size "$work" | tail -1 | tr -d ' ') size, $(df -h --output=avail "$work" | tail -1 | tr -d ' ') free"
echo "data     generated into tmpfs $shm"
[ "$can_drop" = 1 ] || echo "WARNING: cannot write /proc/sys/vm/drop_caches (not root): the 'cold' read is not cold"

need=$((2 * NWRITERS * UNIQUE_FILE + 2 * NREPLICAS * REPLICA + 2 * REPLICA))
avail=$(df -B1 --output=avail "$work" | tail -1)
[ "$avail" -gt "$need" ] || die "$work: $((avail / MiB)) MiB free, the bench needs about $((need / MiB)) MiB"

# ---- the data: generated once, in tmpfs -------------------------------------

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

phase_unique_write() {
	local side=$1 dir=$2 t cmds=() i
	settle
	for i in $(seq 0 $((NWRITERS - 1))); do cmds+=("$PY $IO write $shm/unique$i $dir/unique$i.bin 0 -"); done
	if [ "$side" = ckptfs ]; then perf_start uw; cpu_begin; fi
	run_group "${cmds[@]}"
	t=$elapsed
	if [ "$side" = ckptfs ]; then cpu_end uw; perf_stop; check_daemon; fi
	R[uw,$side,$r]=$(mbps $((NWRITERS * UNIQUE_FILE)) "$t")
	report "$side" uw "unique write" "$t"
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
	done
	check_daemon
	R[rss,ckptfs,$r]=$(awk '/^VmHWM/ { printf "%.1f", $2 / 1024 }' "/proc/$pid/status")
	echo "   ckptfs  daemon VmHWM  ${R[rss,ckptfs,$r]} MiB"
	if grep -qiE ' (error|warn)' "$rd/daemon.log"; then
		echo "   ckptfs  daemon log (errors/warnings):"
		grep -iE ' (error|warn)' "$rd/daemon.log" | head -5 | sed 's/^/     /'
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

# ---- the table --------------------------------------------------------------

vals() { local out='' i; for i in $(seq 1 "$ROUNDS"); do out+="${R[$1,$2,$i]:-} "; done; echo "$out"; }
ratios() { local out='' i; for i in $(seq 1 "$ROUNDS"); do out+="$(div "${R[$1,ckptfs,$i]}" "${R[$1,plain,$i]}") "; done; echo "$out"; }
met() { awk -v v="$1" -v t="$2" -v op="$3" 'BEGIN { ok = (op == ">=") ? v >= t : (op == "<=") ? v <= t : v < t; print ok ? "yes" : "no" }'; }
row() { printf '%-34s %10s %10s %8s %8s %5s\n' "$@"; }

echo
echo "== per round: plain / ckptfs / ratio"
for m in uw cr rw; do
	case $m in uw) n="unique write MB/s" ;; cr) n="cold read MB/s" ;; rw) n="replicated write MB/s" ;; esac
	line=''
	for i in $(seq 1 "$ROUNDS"); do line+="   r$i ${R[$m,plain,$i]} / ${R[$m,ckptfs,$i]} / $(div "${R[$m,ckptfs,$i]}" "${R[$m,plain,$i]}")"; done
	printf '   %-23s%s\n' "$n" "$line"
done
printf '   %-23s%s\n' "stored / one replica" "$(for i in $(seq 1 "$ROUNDS"); do printf '   r%d %s / %s' "$i" "${R[rs,plain,$i]}" "${R[rs,ckptfs,$i]}"; done)"
printf '   %-23s%s\n' "daemon VmHWM MiB" "$(for i in $(seq 1 "$ROUNDS"); do printf '   r%d %s' "$i" "${R[rss,ckptfs,$i]}"; done)"

echo
echo "== result ($ROUNDS round(s), scale ${BENCH_SCALE:-full}; MB = 10^6 bytes; ratio = median of the per-round ckptfs/plain)"
row metric plain ckptfs ratio target "met?"
row --------------------------------- ---------- ---------- -------- -------- -----
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
row "replicated: stored / one replica" "$(vals rs plain | median)x" "${rs}x" "-" "<=1.05x" "$(met "$rs" 1.05 '<=')"
rss=$(vals rss ckptfs | max)
row "daemon peak RSS (MiB, VmHWM)" "-" "$rss" "-" "<256" "$(met "$rss" 256 '<')"
echo
echo "stored: growth of du -sb BACKING/chunks during the replicated write (worst round); plain: du -sb of its replicas."
echo "daemon CPU seconds, median (kernel part): unique write $(vals uwcpu ckptfs | median) ($(vals uwsys ckptfs | median)), cold read $(vals crcpu ckptfs | median) ($(vals crsys ckptfs | median)), replicated write $(vals rwcpu ckptfs | median) ($(vals rwsys ckptfs | median))"
echo "load average at the end: $(loadavg)"
