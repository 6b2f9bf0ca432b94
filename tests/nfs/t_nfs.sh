#!/usr/bin/env bash
# t_nfs.sh [BUILD] — BACKING over nfs:// against a private nfs-ganesha.
#
# Starts ganesha (tests/nfs/ganesha.sh) on 127.0.0.1, then through
# BUILD/backing-tool: probe; round trips of 0 B, 1 B, 5 MiB and 64 MiB, byte
# for byte, also as seen in the exported directory itself; overwrite; list;
# remove; -ENOENT cases; a symlink on the export neither read, stat'ed nor
# written through, a symlink, FIFO and directory answering get by their kind,
# and puts private (0600/0700); range reads (backing_get_range) of exactly
# the bytes asked, ERANGE past the end, ENOENT, a symlink, FIFO and directory
# answering by their kind, 2 RPCs for a small range of a large file; 8
# threads sharing the
# 4-connection pool; no temporaries left. Then, with ONE backing kept open
# (backing-tool serve, 2 s timeout): the server is stopped and calls fail
# within the timeout instead of hanging; it is restarted and the same open
# backing works again; the server is frozen (SIGSTOP: connections accepted,
# nothing answered) and calls fail by timeout; it is thawed and they work.
# Then the NFS RPCs per put and per get, counted by type with rpccount.so
# (fs/lib/backing_nfs.c invariant 6), and the kept directory handles against
# another node's changes: a leaf directory removed and made again, one renamed
# away, a symlink planted where one was.
# ganesha is always stopped on exit. Ends with "N passed, N failed".
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
tool=$(cd "$build" && pwd)/backing-tool
[ -x "$tool" ] || { echo "t_nfs: $tool is missing (make $build/backing-tool)" >&2; exit 1; }

passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   $*"; }
bad() { failed=$((failed + 1)); echo "FAIL $*"; }
check() { # check NAME CMD...: passes when CMD succeeds
	local name=$1
	shift
	if "$@"; then ok "$name"; else bad "$name"; fi
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }

work=$(mktemp -d /tmp/ckptfs-nfs-XXXXXX)
srv=$work/server
data=$work/data
mkdir -p "$srv" "$data"
serve_pid=
cleanup() {
	[ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null
	[ -f "$srv/ganesha.pid" ] && kill -CONT "$(cat "$srv/ganesha.pid")" 2>/dev/null
	"$here/ganesha.sh" stop "$srv" || echo "t_nfs: stopping ganesha failed" >&2
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if ! url=$("$here/ganesha.sh" start "$srv"); then
	bad "ganesha starts"
	echo "$passed passed, $failed failed"
	exit 1
fi
ok "ganesha starts: $url"
export_dir=$srv/export
T() { "$tool" -t 5000 "$url" "$@"; }

# ---- one-shot calls ----
check "probe" T probe

for size in 0 1 $((5 * 1024 * 1024 + 1)); do
	head -c "$size" /dev/urandom >"$data/in.$size"
	T put "$data/in.$size" "rt/f.$size" &&
		T get "rt/f.$size" "$data/out.$size" &&
		cmp -s "$data/in.$size" "$data/out.$size" &&
		cmp -s "$data/in.$size" "$export_dir/rt/f.$size"
	check "round trip of $size bytes, also as stored in the export" [ $? -eq 0 ]
done

head -c $((64 * 1024 * 1024)) /dev/urandom >"$data/big"
put_out=$("$tool" -v -t 5000 "$url" put "$data/big" "chunks/ab/cd/big" 2>&1)
put_rc=$?
get_out=$("$tool" -v -t 5000 "$url" get "chunks/ab/cd/big" "$data/big.out" 2>&1)
get_rc=$?
[ $put_rc -eq 0 ] && [ $get_rc -eq 0 ] && cmp -s "$data/big" "$data/big.out" && cmp -s "$data/big" "$export_dir/chunks/ab/cd/big"
check "64 MiB put + get byte for byte, also as stored in the export" [ $? -eq 0 ]
put_s=$(echo "$put_out" | awk '/^put .* bytes/ {print $4}')
get_s=$(echo "$get_out" | awk '/^get .* bytes/ {print $4}')
if [ -n "$put_s" ] && [ -n "$get_s" ]; then
	echo "     64 MiB: put $put_s s ($(awk -v s="$put_s" 'BEGIN{printf "%.0f", 64/s}') MiB/s incl. COMMIT), get $get_s s ($(awk -v s="$get_s" 'BEGIN{printf "%.0f", 64/s}') MiB/s)"
fi

printf 'first version, longer than the second\n' >"$data/v1"
printf 'second\n' >"$data/v2"
T put "$data/v1" over/f && T put "$data/v2" over/f && T get over/f "$data/v.out"
check "overwrite replaces the whole file" cmp -s "$data/v2" "$data/v.out"
check "stat gives the new size" [ "$(T stat over/f)" = "$(stat -c %s "$data/v2")" ]

T put "$data/v1" ls/b && T put "$data/v1" ls/a && T put "$data/v1" ls/sub/c
check "list names each entry once" [ "$(T ls ls | tr '\n' ' ')" = "a b sub " ]
check "list of the root" bash -c "'$tool' '$url' ls | grep -qx chunks"

T rm ls/a
T stat ls/a >/dev/null 2>&1
check "remove, then stat is ENOENT (exit 3)" [ $? -eq 3 ]
check "remove of an absent file succeeds" T rm ls/a
T get nope/x "$data/nope" 2>/dev/null
check "get of an absent file is ENOENT (exit 3)" [ $? -eq 3 ]
T ls nodir >/dev/null 2>&1
check "list of an absent directory is ENOENT (exit 3)" [ $? -eq 3 ]
T put "$data/v1" "../escape" 2>/dev/null
check "a path with .. is refused" [ $? -eq 1 -a ! -e "$srv/escape" ]
# trust (backing_nfs.c invariant 5): a symlink planted on the export is never
# read through or written through; what a put makes is private
printf "root's secret\n" >"$export_dir/victim"
chmod 600 "$export_dir/victim"
ln -s victim "$export_dir/planted"
T get planted "$data/planted.out" 2>/dev/null
check "get of a symlink fails, and gives no bytes of its target" [ $? -ne 0 -a ! -s "$data/planted.out" ]
T stat planted >/dev/null 2>&1
check "stat of a symlink fails" [ $? -ne 0 ]
T put "$data/v1" planted 2>/dev/null && cmp -s "$data/v1" "$export_dir/planted" && [ ! -L "$export_dir/planted" ]
check "put over a symlink replaces the link, not its target" [ $? -eq 0 ]
check "the symlink's target is untouched" [ "$(cat "$export_dir/victim")" = "root's secret" ]
T put "$data/v1" private/d/f
check "put makes files 0600 and directories 0700" \
	[ "$(stat -c %a "$export_dir/private" "$export_dir/private/d" "$export_dir/private/d/f" | tr '\n' ' ')" = "700 700 600 " ]
# backing.h get: what is no regular file answers by its kind, as the
# directory backend does (bkobj.h B4 makes each a verdict on a chunk): a
# symlink ELOOP, a FIFO EINVAL (not opened: no hang), a directory EISDIR;
# a put over the FIFO replaces it by a rename
# (backing-tool read: one backing_get, no stat first, as bkobj_get; names
# never used before: ganesha may answer for a name replaced on its export
# with what it cached of the old file)
ln -s victim "$export_dir/planted.lnk"
T read planted.lnk 2>"$data/planted.err"
check "get of a symlink: ELOOP" grep -q "read .*: Too many levels of symbolic links" "$data/planted.err"
mkfifo -m 600 "$export_dir/planted.fifo"
T read planted.fifo 2>"$data/planted.err"
check "get of a FIFO: EINVAL" grep -q "read .*: Invalid argument" "$data/planted.err"
T put "$data/v1" planted.fifo 2>/dev/null && cmp -s "$data/v1" "$export_dir/planted.fifo" && [ ! -p "$export_dir/planted.fifo" ]
check "put over a FIFO replaces it by a regular file" [ $? -eq 0 ]
mkdir "$export_dir/planted.d"
T read planted.d 2>"$data/planted.err"
check "get of a directory: EISDIR" grep -q "read .*: Is a directory" "$data/planted.err"
rmdir "$export_dir/planted.d"
# range reads (backing.h 4, a pack's member): exactly the bytes asked, READs
# at the offset only; past the end ERANGE (never a short read); absent
# ENOENT; what is no regular file answers as get does, unread
psize=$((3 * 1024 * 1024 + 77))
head -c $psize /dev/urandom >"$data/pack"
T put "$data/pack" packs/ab/p.ckp
slice() { tail -c +$(($2 + 1)) "$1" | head -c "$3"; } # slice FILE OFF LEN
range_ok() { # range_ok OFF LEN: that range of packs/ab/p.ckp, byte for byte
	rm -f "$data/range.out"
	T range packs/ab/p.ckp "$1" "$2" "$data/range.out" && cmp -s "$data/range.out" <(slice "$data/pack" "$1" "$2")
}
range_err() { # range_err REL OFF LEN MESSAGE: fails with MESSAGE, writes nothing
	rm -f "$data/range.out"
	T range "$1" "$2" "$3" "$data/range.out" 2>"$data/range.err"
	grep -q "range .*: $4" "$data/range.err" && [ ! -e "$data/range.out" ]
}
check "range: the whole file" range_ok 0 $psize
check "range: a middle" range_ok 1000 70000
check "range: across 1 MiB READs" range_ok $((1024 * 1024 - 3)) $((2 * 1024 * 1024 + 5))
check "range: the last 4 KiB" range_ok $((psize - 4096)) 4096
check "range: empty, at the end" range_ok $psize 0
check "range: one byte past the end is ERANGE" \
	range_err packs/ab/p.ckp $((psize - 1)) 2 "Numerical result out of range"
check "range: an offset near 2^64 is ERANGE (no overflow)" \
	range_err packs/ab/p.ckp 18446744073709551615 2 "Numerical result out of range"
T range packs/no/p.ckp 0 1 "$data/range.out" 2>/dev/null
check "range: an absent file is ENOENT (exit 3)" [ $? -eq 3 ]
ln -s victim "$export_dir/range.lnk"
check "range: a symlink is ELOOP, nothing of its target read" \
	range_err range.lnk 0 4 "Too many levels of symbolic links"
mkfifo -m 600 "$export_dir/range.fifo"
check "range: a FIFO is EINVAL" range_err range.fifo 0 4 "Invalid argument"
mkdir "$export_dir/range.d"
check "range: a directory is EISDIR" range_err range.d 0 0 "Is a directory"
check "range: the symlink and FIFO are left as they were" [ -L "$export_dir/range.lnk" -a -p "$export_dir/range.fifo" ]
rmdir "$export_dir/range.d"
# a member's range costs one LOOKUP under the kept handle and its READs, not
# the file's: 70 000 bytes of the 3 MiB file are LOOKUP + READ (backing_counts)
printf '%s\n' "stat packs/ab/p.ckp" rpcs "range packs/ab/p.ckp 1000 70000 $data/range.out" rpcs quit |
	"$tool" -t 5000 "$url" serve >"$data/range.replies"
range_rpcs=$(awk '$1 == "ok" { n++; if (n == 2) a = $3; if (n == 4) b = $3 } END { print (n == 4 ? b - a : "?") }' "$data/range.replies")
check "range: 70 000 bytes of a 3 MiB file cost 2 RPCs, LOOKUP + READ [$range_rpcs]" [ "$range_rpcs" = 2 ]
check "range: and are its bytes" cmp -s "$data/range.out" <(slice "$data/pack" 1000 70000)
rm -f "$export_dir/victim" "$export_dir/planted" "$export_dir/planted.lnk" "$export_dir/planted.fifo" \
	"$export_dir/range.lnk" "$export_dir/range.fifo"
check "8 threads x 25 put/get/compare through 4 connections" T stress 8 25
# exclusive create (NFSv3 LINK of a temporary) and rename: the claim's primitives
T putnew "$data/v1" excl/f
check "putnew of a new name" cmp -s "$data/v1" "$export_dir/excl/f"
T putnew "$data/v2" excl/f
rc=$?
cmp -s "$data/v1" "$export_dir/excl/f" && same=1 || same=0
check "putnew of an existing name is EEXIST (exit 4), the file unchanged" [ $rc -eq 4 -a $same = 1 ]
T mv excl/f excl/g
cmp -s "$data/v1" "$export_dir/excl/g" && same=1 || same=0
check "mv renames" [ ! -e "$export_dir/excl/f" -a $same = 1 ]
T mv excl/f excl/h
check "mv of an absent name is ENOENT (exit 3)" [ $? -eq 3 ]
check "8 threads putnew one name, 20 rounds: exactly one wins each" T race-new 8 20
check "no temporaries left in tmp/" [ -z "$(ls -A "$export_dir/tmp")" ]

# ---- one open backing across an outage ----
# reply LIMIT_S: reads the next reply of the serve process within LIMIT_S s
# (a hang fails the test instead of hanging it) into $reply, wall time in $took.
coproc SERVE { exec "$tool" -t 2000 "$url" serve 2>"$work/serve.err"; }
serve_pid=$SERVE_PID
ask() { # ask LIMIT_S COMMAND...
	local limit=$1 t0
	shift
	t0=$(now_ms)
	echo "$*" >&"${SERVE[1]}"
	reply=
	read -r -t "$limit" -u "${SERVE[0]}" reply || reply="(no reply within ${limit} s)"
	took=$(($(now_ms) - t0))
}
expect() { # expect NAME PATTERN: the last reply matches PATTERN
	if [[ $reply == $2 ]]; then ok "$1 [$reply, ${took} ms]"; else bad "$1 [$reply, ${took} ms]"; fi
}

ask 10 stat over/f
expect "serve: stat while the server is up" "ok * 7"
"$here/ganesha.sh" stop "$srv"
ask 10 stat over/f
expect "server stopped: stat fails" "err *"
check "server stopped: stat fails within the 2 s timeout (+1 s slack)" [ "$took" -le 3000 ]
ask 10 put "$data/v1" outage/f
expect "server stopped: put fails" "err *"
check "server stopped: put fails within the timeout (+1 s slack)" [ "$took" -le 3000 ]
t0=$(now_ms)
"$tool" -t 2000 "$url" stat over/f >/dev/null 2>&1
rc=$?
took=$(($(now_ms) - t0))
check "server stopped: a fresh open fails within the timeout [$took ms]" [ $rc -ne 0 -a "$took" -le 3000 ]

if url2=$("$here/ganesha.sh" start "$srv"); then ok "ganesha restarts"; else bad "ganesha restarts"; fi
check "the URL is the same after the restart" [ "$url2" = "$url" ]
ask 10 stat over/f
expect "server back: the same open backing works again (stat)" "ok * 7"
ask 10 put "$data/v1" outage/f
expect "server back: put" "ok *"
ask 10 get outage/f "$data/outage.out"
expect "server back: get" "ok *"
check "server back: bytes intact" cmp -s "$data/v1" "$data/outage.out"
ask 10 probe
expect "server back: probe" "ok *"

gpid=$(cat "$srv/ganesha.pid")
kill -STOP "$gpid"
ask 10 stat over/f
expect "server frozen: stat fails" "err * ETIMEDOUT"
check "server frozen: stat fails by the 2 s timeout, not before 1 s, not after 3.5 s" \
	[ "$took" -ge 1000 -a "$took" -le 3500 ]
ask 10 put "$data/v2" frozen/f
expect "server frozen: put fails" "err *"
check "server frozen: put fails within the timeout (+1.5 s slack)" [ "$took" -le 3500 ]
kill -CONT "$gpid"
ask 10 stat over/f
expect "server thawed: stat works again" "ok * 7"
ask 10 put "$data/v2" frozen/f
expect "server thawed: put works again" "ok *"
ask 10 ls frozen
expect "server thawed: list" "ok * f"
ask 10 quit
wait "$serve_pid" 2>/dev/null
serve_pid=
check "no temporaries left in tmp/ after the outages" [ -z "$(ls -A "$export_dir/tmp")" ]

# ---- NFS round trips per object (backing_nfs.c 6), counted by type with
# tests/nfs/rpccount.c (LD_PRELOAD: it sees libnfs's own RPCs as well) ----
so=$work/rpccount.so
if cc -shared -fPIC -O2 -o "$so" "$here/rpccount.c" -ldl; then ok "rpccount.so builds"; else bad "rpccount.so builds"; fi
head -c $((1536 * 1024)) /dev/urandom >"$data/obj" # 2 WRITEs and 2 READs of 1 MiB
counted() { # counted OUT CMD...: a serve session running CMDs under rpccount.so
	local out=$1
	shift
	rm -f "$out"
	# (an ASan build wants its runtime first: rpccount.so is preloaded before it)
	printf '%s\n' "$@" quit | ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 \
		RPCCOUNT_OUT=$out LD_PRELOAD=$so "$tool" -t 5000 "$url" serve >"$data/replies"
}
count_of() { awk -v t="$2" '$1 == t { n = $2 } END { print n + 0 }' "$1"; } # count_of FILE TYPE
per_obj() { # per_obj FILE TYPE N: (FILE's TYPE - the empty session's) / N, 2 decimals
	awk -v a="$(count_of "$1" "$2")" -v z="$(count_of "$data/c0" "$2")" -v n="$3" 'BEGIN { printf "%.2f", (a - z) / n }'
}
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; }
counted "$data/c0" # mount and close only
puts=() gets=()
for i in 1 2 3 4 5 6 7 8; do
	puts+=("put $data/obj chunks/ab/c$i/o$i")
	gets+=("get chunks/ab/c$i/o$i $data/obj.out$i")
done
counted "$data/cput" "${puts[@]}"
check "count: 8 puts of 1.5 MiB into new leaf directories" [ "$(grep -c '^ok' "$data/replies")" = 8 ]
counted "$data/cget" rpcs "${gets[@]}" rpcs # a fresh session: no handle kept yet
rpcs_in=$(awk '/^ok/ { if (!n++) a = $3; r = $3 } END { print r - a }' "$data/replies") # backing_counts
check "count: 8 gets (each: the tool's stat, then the get) byte for byte" \
	bash -c "[ \"\$(grep -c '^ok' '$data/replies')\" = 10 ] && for i in 1 2 3 4 5 6 7 8; do cmp -s '$data/obj' '$data/obj.out'\$i || exit 1; done"
put_rpcs=$(per_obj "$data/cput" total 8) get_rpcs=$(per_obj "$data/cget" total 8)
echo "     RPCs per put: $put_rpcs ($(for t in LOOKUP CREATE WRITE COMMIT MKDIR RENAME; do printf '%s %s ' $t "$(per_obj "$data/cput" $t 8)"; done))"
echo "     RPCs per stat + get: $get_rpcs ($(for t in LOOKUP ACCESS GETATTR READ; do printf '%s %s ' $t "$(per_obj "$data/cget" $t 8)"; done))"
# before the handles (libnfs's path calls): 19 per put, 13 per stat + get
check "count: a put into a new leaf costs at most 8 RPCs (was 19) [$put_rpcs]" le "$put_rpcs" 8
check "count: a stat + get costs at most 6 RPCs (was 13) [$get_rpcs]" le "$get_rpcs" 6
check "count: no ACCESS or GETATTR for a get" [ "$(per_obj "$data/cget" ACCESS 8) $(per_obj "$data/cget" GETATTR 8)" = "0.00 0.00" ]
check "count: backing_counts.nfs_rpcs counts what went out [$rpcs_in]" \
	[ "$rpcs_in" = $(($(count_of "$data/cget" total) - $(count_of "$data/c0" total))) ]

# ---- kept directory handles (backing_nfs.c 6) against another node's
# changes: one backing kept open (serve) while a second NFS client
# (backing-tool, its raw libnfs calls) removes, recreates, renames directories
# and plants a symlink where one was ----
printf 'first bytes\n' >"$data/a"
printf 'other bytes, longer\n' >"$data/b"
printf 'third\n' >"$data/c"
coproc SERVE { exec "$tool" -v -t 5000 "$url" serve 2>"$work/serve.err"; }
serve_pid=$SERVE_PID
ask 10 put "$data/a" chunks/ef/01/x
ask 10 get chunks/ef/01/x "$data/x.out"
expect "handles: put + get through one open backing" "ok *"
T rm chunks/ef/01/x && T raw rmdir chunks/ef/01 && T put "$data/b" chunks/ef/01/x
check "handles: another node removes the leaf directory and makes it again" [ $? -eq 0 ]
ask 10 get chunks/ef/01/x "$data/x.out"
expect "stale handle: get" "ok *"
check "stale handle: get gives the new directory's file byte for byte" cmp -s "$data/b" "$data/x.out"
ask 10 put "$data/c" chunks/ef/01/y
expect "stale handle: put" "ok *"
check "stale handle: the put is in the new directory" cmp -s "$data/c" "$export_dir/chunks/ef/01/y"
ask 10 rm chunks/ef/01/x
expect "stale handle: remove" "ok *"
check "stale handle: the removed file is gone from the new directory" [ ! -e "$export_dir/chunks/ef/01/x" ]
ask 10 stat chunks/ef/01/x
expect "stale handle: stat of the removed file is ENOENT" "err * ENOENT"
# "absent" through a kept handle is asked again by the path: the directory
# renamed away by another node still has a valid handle
T mv chunks/ef/01 chunks/ef/moved && T put "$data/b" chunks/ef/01/z
check "handles: another node renames the directory away and makes a new one" [ $? -eq 0 ]
ask 10 get chunks/ef/01/z "$data/z.out"
expect "absent via a kept handle is looked up again: get" "ok *"
check "absent via a kept handle: the new directory's bytes" cmp -s "$data/b" "$data/z.out"
# a symlink where a kept directory was: never followed, nothing of its target read or changed
mkdir -p "$export_dir/victim"
printf "victim's bytes\n" >"$export_dir/victim/v"
ask 10 put "$data/a" chunks/ef/02/v
T rm chunks/ef/02/v && T raw rmdir chunks/ef/02 && T raw symlink ../../victim chunks/ef/02
check "handles: another node replaces a leaf directory by a symlink" [ $? -eq 0 -a -L "$export_dir/chunks/ef/02" ]
ask 10 get chunks/ef/02/v "$data/victim.out"
expect "symlink where a kept directory was: get fails" "err * ELOOP"
check "symlink: no bytes of its target read" [ ! -e "$data/victim.out" ]
ask 10 put "$data/c" chunks/ef/02/w
expect "symlink where a kept directory was: put fails" "err * ELOOP"
ask 10 rm chunks/ef/02/v
expect "symlink where a kept directory was: remove fails" "err * ELOOP"
check "symlink: its target directory is untouched" \
	[ "$(ls "$export_dir/victim")" = v -a "$(cat "$export_dir/victim/v")" = "victim's bytes" ]
ask 10 quit
wait "$serve_pid" 2>/dev/null
serve_pid=
grep -q 'directory handle went stale' "$work/serve.err"
check "the stale handles were noticed (logged), not missed" [ $? -eq 0 ]
rm -rf "$export_dir/victim" "$export_dir/chunks/ef/02"
check "no temporaries left in tmp/ after the handle cases" [ -z "$(ls -A "$export_dir/tmp")" ]

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
