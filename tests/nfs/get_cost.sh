#!/usr/bin/env bash
# get_cost.sh TOOL_A TOOL_B — what a get of one object costs, build against
# build (e.g. main's backing-tool against this tree's): N objects of SIZE
# bytes (default 600 × 1.2 MiB, a chunk's size) under random chunks/xx/yy/
# leaves of a private ganesha, put once by TOOL_B; then, 3 rounds
# alternating, each tool reads them all in one process (`serve`, each "get"
# being the tool's stat + get) and the script prints per object: the tool's
# CPU (user + sys, GNU time), ganesha's CPU (/proc/PID/stat) and the NFS RPCs
# sent (rpccount.so). CPU figures are 10 ms ticks over N objects: run it on a
# quiet machine, or more than once. A measurement, not a test.
set -u
here=$(cd "$(dirname "$0")" && pwd)
[ $# -eq 2 ] && [ -x "$1" ] && [ -x "$2" ] || { echo "usage: $0 TOOL_A TOOL_B (backing-tool binaries)" >&2; exit 2; }
A=$1 B=$2 N=${N:-600} SIZE=${SIZE:-1258291}
work=$(mktemp -d /tmp/ckptfs-getcost-XXXXXX)
url=$("$here/ganesha.sh" start "$work/g") || exit 1
trap '"$here/ganesha.sh" stop "$work/g"; rm -rf "$work"' EXIT
cc -shared -fPIC -O2 -o "$work/rpccount.so" "$here/rpccount.c" -ldl || exit 1
head -c "$SIZE" /dev/urandom >"$work/obj"
for i in $(seq "$N"); do
	h=$(printf '%04x' $((RANDOM * 7 % 65536)))
	echo "put $work/obj chunks/${h:0:2}/${h:2:2}/o$i" >>"$work/puts"
	echo "get chunks/${h:0:2}/${h:2:2}/o$i /dev/null" >>"$work/gets"
done
echo quit | tee -a "$work/puts" >>"$work/gets"
"$B" -t 10000 "$url" serve <"$work/puts" | grep -v '^ok' && { echo "get_cost: a put failed" >&2; exit 1; }
gpid=$(cat "$work/g/ganesha.pid")
gticks() { awk '{ print $14 + $15 }' "/proc/$gpid/stat"; }
for round in 1 2 3; do
	for side in A B; do
		tool=${!side}
		g0=$(gticks)
		/usr/bin/time -f "%U %S" -o "$work/time" "$tool" -t 10000 "$url" serve <"$work/gets" >"$work/replies"
		g1=$(gticks)
		read -r u s <"$work/time"
		rm -f "$work/count"
		RPCCOUNT_OUT=$work/count LD_PRELOAD=$work/rpccount.so "$tool" -t 10000 "$url" serve <"$work/gets" >/dev/null
		awk -v side="$side" -v r="$round" -v u="$u" -v s="$s" -v g=$((g1 - g0)) -v n="$N" -v hz="$(getconf CLK_TCK)" \
			-v ok="$(grep -c '^ok' "$work/replies")" -v rpcs="$(awk '$1 == "total" { print $2 }' "$work/count")" 'BEGIN {
			printf "%s r%d: %d of %d ok; tool CPU %.2f ms/object (user %.2f, sys %.2f), ganesha CPU %.2f ms/object, %.2f RPCs/object\n",
				side, r, ok, n, (u + s) * 1000 / n, u * 1000 / n, s * 1000 / n, g / hz * 1000 / n, rpcs / n }'
	done
done
