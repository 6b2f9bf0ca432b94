#!/bin/bash
# cpu_per_gib.sh BUILD [MIB [PERF_OUT]] — the daemon's CPU-seconds per GiB of
# unique data written (issue 20 part 2), in well under a minute.
#
# A fresh mount of BUILD/ckptfs over a local BACKING (uploads are hard links),
# MIB MiB (default 1024) of random bytes from /dev/shm written with
# `dd bs=1M conv=fsync` into step-1/ after drop_caches; prints the daemon's
# utime+stime (/proc/PID/stat) per GiB until dd returned, the same 4 s later
# (the uploads' tail), and the split by thread name (threads alive at the end:
# FUSE threads that exited meanwhile are in the total only). PERF_OUT: also record
# `perf record -g` of the daemon over the write into that file. Compare builds
# by alternating runs: on shared machines whole-run CPU moves by ±10 %.
# Needs root (drop_caches, FUSE). Unmounts and removes its files on every path.
set -eu
BUILD=${1:?usage: cpu_per_gib.sh BUILD [MIB [PERF_OUT]]}
MIB=${2:-1024}
PERF_OUT=${3:-}
[ -x "$BUILD/ckptfs" ] || { echo "cpu_per_gib: $BUILD/ckptfs: not an executable" >&2; exit 2; }
case $MIB in '' | *[!0-9]* | 0) echo "cpu_per_gib: MIB '$MIB': not a positive number of MiB" >&2; exit 2 ;; esac

src=/dev/shm/ckptfs-cpu-per-gib-$MIB # kept between runs: the same bytes for A/B
[ -f "$src" ] || head -c $((MIB << 20)) /dev/urandom >"$src"
d=$(mktemp -d /var/tmp/ckptfs-cpu.XXXXXX)
pid='' perf_pid=''
cleanup() {
	[ -z "$perf_pid" ] || kill -INT "$perf_pid" 2>/dev/null || true
	if [ -n "$pid" ]; then
		mountpoint -q "$d/mnt" && fusermount3 -u "$d/mnt"
		wait "$pid" || true
	fi
	rm -rf "$d"
}
trap cleanup EXIT
mkdir -p "$d/backing" "$d/cache" "$d/mnt"
"$BUILD/ckptfs" -f -o cache="$d/cache" "$d/backing" "$d/mnt" 2>>"$d/daemon.log" &
pid=$!
for _ in $(seq 100); do mountpoint -q "$d/mnt" && break; sleep 0.1; done
mountpoint -q "$d/mnt" || { echo "cpu_per_gib: the mount failed:" >&2; cat "$d/daemon.log" >&2; exit 1; }
mkdir "$d/mnt/step-1"
sync
echo 3 >/proc/sys/vm/drop_caches
sleep 2

tck=$(getconf CLK_TCK)
cpu() { awk '{ print $14 + $15, $14, $15, $10 }' "/proc/$pid/stat"; } # ticks, user, system, minflt
threads() { # name ticks, summed by thread name
	for t in /proc/"$pid"/task/*; do echo "$(tr ' ' _ <"$t/comm") $(awk '{ print $14 + $15 }' "$t/stat")"; done |
		awk '{ s[$1] += $2 } END { for (k in s) print k, s[k] }' | sort
}
read -r a0 u0 s0 f0 < <(cpu)
th0=$(threads)
if [ -n "$PERF_OUT" ]; then
	perf record -F 2000 -g -p "$pid" -o "$PERF_OUT" 2>/dev/null &
	perf_pid=$!
	sleep 0.5
fi
t0=$(date +%s.%N)
dd if="$src" of="$d/mnt/step-1/f" bs=1M conv=fsync status=none
t1=$(date +%s.%N)
read -r a1 u1 s1 f1 < <(cpu)
th1=$(threads)
if [ -n "$perf_pid" ]; then kill -INT "$perf_pid"; wait "$perf_pid" || true; perf_pid=''; fi
sleep 4
read -r a2 _ _ _ < <(cpu)
cmp "$src" "$d/mnt/step-1/f" || { echo "cpu_per_gib: the file read back differs" >&2; exit 1; }
awk -v a0="$a0" -v a1="$a1" -v a2="$a2" -v u=$((u1 - u0)) -v s=$((s1 - s0)) -v f=$((f1 - f0)) \
	-v t="$tck" -v m="$MIB" -v w="$(echo "$t1 - $t0" | bc)" -v la="$(cut -d' ' -f1 /proc/loadavg)" \
	'BEGIN { g = m / 1024
		printf "%.3f CPU-s/GiB until dd returned (user %.3f, system %.3f), %.3f with the uploads\047 tail;", (a1 - a0) / t / g, u / t / g, s / t / g, (a2 - a0) / t / g
		printf " %.0f MB/s; %d minor faults; load %s\n", m * 1.048576 / w, f, la }'
join <(echo "$th0") <(echo "$th1") |
	awk -v t="$tck" -v g="$(awk -v m="$MIB" 'BEGIN { print m / 1024 }')" \
		'{ d = $3 - $2; if (d > 0) printf "  %s %.3f", $1, d / t / g } END { print "  (CPU-s/GiB by thread)" }'
