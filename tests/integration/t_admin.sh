#!/bin/bash
# t_admin — ckptfs-admin (docs/ADMIN.md) on a real mount: every command, its
# --json form, the daemon's control channel, offline use with --cache, and
# every bad input (unknown generation, not a ckptfs mount, daemon not
# running, permission denied, names with ".." or a slash): one line on
# stderr, its own exit code, nothing changed. Bytes are compared with the
# reference copies the case wrote; catalog state is read with sqlite3.
. "$(dirname "$0")/lib.sh"

# Exit codes (tools/admin.h)
E_PROBLEM=1 E_USAGE=2 E_NOT_CKPTFS=3 E_NO_DAEMON=4 E_PERM=5 E_NO_GEN=6 E_BAD_NAME=7 E_BUSY=8 E_TIMEOUT=9

# adm [setpriv_admin] ARGS... — runs ckptfs-admin (as nobody after
# setpriv_admin); stdout in $CK_TMP/out, stderr in $CK_TMP/err; prints the
# exit status.
adm() {
	local rc=0 as=()
	if [ "${1:-}" = setpriv_admin ]; then
		shift
		as=(setpriv --reuid nobody --regid nogroup --clear-groups)
	fi
	"${as[@]}" "$CKPTFS_ADMIN" "$@" >"$CK_TMP/out" 2>"$CK_TMP/err" </dev/null || rc=$?
	echo "$rc"
}
out() { cat "$CK_TMP/out"; }
err() { cat "$CK_TMP/err"; }
# assert_adm RC ARGS... — the exit status is RC (output shown if not)
assert_adm() {
	local exp=$1 rc
	shift
	rc=$(adm "$@")
	[ "$rc" = "$exp" ] || ck_fail "ckptfs-admin $*: exit $rc, expected $exp; stdout: $(out | head -n 8 | tr '\n' '|') stderr: $(err | head -n 5 | tr '\n' '|')"
}
# A bad input: RC, exactly one line on stderr containing WORDS, no stdout.
assert_bad() {
	local exp=$1 words=$2 rc
	shift 2
	rc=$(adm "$@")
	[ "$rc" = "$exp" ] || ck_fail "ckptfs-admin $*: exit $rc, expected $exp; stderr: $(err | tr '\n' '|')"
	assert_eq 1 "$(err | wc -l)" "lines on stderr of ckptfs-admin $* ($(err | tr '\n' '|'))"
	assert_contains "$(err)" "$words" "stderr of ckptfs-admin $*"
	assert_eq "" "$(out)" "stdout of ckptfs-admin $*"
}
# json EXPR — evaluates a python expression on the JSON in $CK_TMP/out (as j)
json() { "$PY" -c "import json,sys; j = json.load(open(sys.argv[1])); print($1)" "$CK_TMP/out"; }

# mk_gen SERIES/NAME FILE:SIZE... — writes the files (random bytes, kept in
# $CK_REF) and commits the generation with the xattr.
mk_gen() {
	local g=$1 f
	shift
	mkdir -p "$CK_MNT/$g" "$CK_REF/$g"
	for f in "$@"; do
		ck_rand "$CK_REF/$g/${f%%:*}" "${f##*:}"
		cp "$CK_REF/$g/${f%%:*}" "$CK_MNT/$g/${f%%:*}"
	done
	setfattr -n user.ckptfs.commit -v 1 "$CK_MNT/$g"
}
gen_state() { # NAME → "state pinned rule" of its newest catalog row
	ck_sql "SELECT state || ' ' || pinned || ' ' || coalesce(nullif(rule, ''), '-') FROM generations WHERE name = '$1' ORDER BY id DESC LIMIT 1"
}
gens_dump() { ck_sql "SELECT id, state, pinned, rule, version FROM generations ORDER BY id" | md5sum; }
# The object path of the first chunk of a file (by its catalog inode).
chunk_of() { # PATH-IN-MOUNT → hex hash of its first extent's chunk
	local ino
	ino=$(stat -c %i "$1")
	ck_sql "SELECT hex(hash) FROM extents WHERE ino = $ino ORDER BY off LIMIT 1" | tr 'A-F' 'a-f'
}

# ---------------------------------------------------------------- list, show

test_list_shows_each_generation_with_state_sizes_and_json_numbers() {
	ck_mount
	mk_gen run1/step-100 a.pt:$((3 * MiB)) b.txt:100
	mkdir -p "$CK_REF/run1/step-200" "$CK_MNT/run1/step-200"
	cp "$CK_REF/run1/step-100/a.pt" "$CK_REF/run1/step-200/a.pt"
	cp "$CK_REF/run1/step-200/a.pt" "$CK_MNT/run1/step-200/a.pt"
	ck_rand "$CK_REF/run1/step-200/c.pt" $((MiB + 7))
	cp "$CK_REF/run1/step-200/c.pt" "$CK_MNT/run1/step-200/c.pt"
	# step-200 stays OPEN (no completion signal; the next-gen rule needs a next one)
	assert_adm 0 list "$CK_MNT"
	assert_contains "$(out)" "SERIES" "list header"
	out | grep -E '^run1 +step-100 +100 +(committed|durable) ' >/dev/null || ck_fail "list has no committed row for step-100: $(out | tr '\n' '|')"
	out | grep -E '^run1 +step-200 +200 +open ' >/dev/null || ck_fail "list has no open row for step-200: $(out | tr '\n' '|')"
	assert_adm 0 --json list "$CK_MNT"
	assert_eq 2 "$(json 'len(j)')" "generations in list --json"
	assert_eq "run1 step-100 100 False 2 $((3 * MiB + 100))" \
		"$(json '" ".join(str(x) for x in (j[0]["series"], j[0]["name"], j[0]["step"], j[0]["pinned"], j[0]["files"], j[0]["logical_bytes"]))')" "list --json step-100"
	# step-200 alone holds c.pt (random, incompressible); a.pt is shared
	assert_eq "open 2 $((4 * MiB + 7)) $((MiB + 7))" \
		"$(json '" ".join(str(x) for x in (j[1]["state"], j[1]["files"], j[1]["logical_bytes"], j[1]["exclusive_bytes"]))')" "list --json step-200"
	assert_ge "$(json 'j[1]["stored_bytes"]')" "$((MiB + 7))" "stored_bytes of step-200 (what it alone holds on disk)"
	# one series only, by name
	assert_adm 0 --json list "$CK_MNT" run1
	assert_eq 2 "$(json 'len(j)')" "list run1"
	mkdir "$CK_MNT/other"
	assert_adm 0 --json list "$CK_MNT" other
	assert_eq 0 "$(json 'len(j)')" "list of an empty series"
	# --all shows ended ones
	assert_adm 0 rm --force "$CK_MNT" run1/step-200
	assert_adm 0 --json list "$CK_MNT"
	assert_eq 1 "$(json 'len(j)')" "list without --all after rm"
	assert_adm 0 --json list --all "$CK_MNT"
	assert_eq "aborted admin-abort" "$(json 'j[1]["state"] + " " + j[1]["rule"]')" "list --all shows the aborted one"
	ck_umount
}

test_show_lists_files_with_chunks_and_what_is_shared_with_which_generation() {
	ck_mount
	mk_gen run1/step-100 a.pt:$((2 * MiB)) small:10
	mkdir -p "$CK_MNT/run1/step-200/sub"
	cp "$CK_REF/run1/step-100/a.pt" "$CK_MNT/run1/step-200/sub/a.pt"
	setfattr -n user.ckptfs.commit -v 1 "$CK_MNT/run1/step-200"
	assert_adm 0 --json show "$CK_MNT" run1/step-200
	assert_eq "run1/step-200" "$(json 'j["generation"]["series"] + "/" + j["generation"]["name"]')" "show names the generation"
	assert_eq "/run1/step-200/sub/a.pt $((2 * MiB))" "$(json 'j["files"][0]["path"] + " " + str(j["files"][0]["size"])')" "show lists the file"
	assert_ge "$(json 'j["files"][0]["chunks"]')" 1 "chunks of the file"
	assert_eq "run1/step-100 $((2 * MiB))" "$(json 'j["shares"][0]["generation"] + " " + str(j["shares"][0]["bytes"])')" "shared with step-100: all of a.pt"
	# the same through a path inside the mount, in the text form
	assert_adm 0 show "$CK_MNT" "$CK_MNT/run1/step-200/sub/a.pt"
	assert_contains "$(out)" "generation run1/step-200" "show by a path inside the generation"
	assert_contains "$(out)" "run1/step-100" "show's sharing section"
	# and by id
	local id
	id=$(ck_sql "SELECT id FROM generations WHERE name = 'step-100'")
	assert_adm 0 show "$CK_MNT" "id:$id"
	assert_contains "$(out)" "generation run1/step-100" "show id:N"
	ck_umount
}

# Any path inside the mount stands for MOUNTPOINT (like `juicefs info PATH`):
# for the commands that name a generation or a series it is that GEN/SERIES.
test_any_path_inside_the_mount_names_the_mount_and_the_generation() {
	ck_mount
	mk_gen run1/step-100 a.pt:$((MiB)) small:10
	assert_adm 0 show "$CK_MNT/run1/step-100"
	assert_contains "$(out)" "generation run1/step-100" "show PATH-INSIDE"
	assert_adm 0 show "$CK_MNT/run1/step-100/a.pt"
	assert_contains "$(out)" "generation run1/step-100" "show PATH-OF-A-FILE"
	assert_adm 0 --json list "$CK_MNT/run1"
	assert_eq "step-100" "$(json 'j[0]["name"]')" "list SERIES-PATH"
	assert_adm 0 pin "$CK_MNT/run1/step-100"
	assert_eq 1 "$(ck_sql "SELECT pinned FROM generations WHERE name = 'step-100'")" "pin PATH-INSIDE"
	assert_adm 0 stats "$CK_MNT/run1"
	assert_contains "$(out)" "generations_committed" "stats through a path inside"
	assert_adm 3 list /tmp
	ck_umount
}

# ---------------------------------------------------------------- changes

test_commit_pin_unpin_rm_go_through_the_daemon() {
	ck_mount
	mk_gen run1/step-100 a:1000
	mkdir -p "$CK_MNT/run1/step-200" && echo x >"$CK_MNT/run1/step-200/f"
	assert_eq "0 0 -" "$(gen_state step-200)" "step-200 before commit"
	assert_adm 0 --json commit "$CK_MNT" run1/step-200
	assert_eq "committed online" "$(json 'j["state"] + " " + j["mode"]')" "commit's answer"
	assert_eq "1 0 admin" "$(gen_state step-200)" "step-200 after commit"
	assert_contains "$(tail -n 50 "$CK_DLOG")" "control: commit" "the daemon's log names the request"
	assert_adm 0 pin "$CK_MNT" run1/step-100
	assert_eq 1 "$(gen_state step-100 | cut -d' ' -f2)" "pinned in the catalog"
	assert_adm 0 unpin "$CK_MNT" run1/step-100
	assert_eq 0 "$(gen_state step-100 | cut -d' ' -f2)" "unpinned in the catalog"
	assert_adm 0 rm "$CK_MNT" run1/step-100
	assert_eq "3 0 admin" "$(gen_state step-100)" "step-100 deleted by rm"
	assert_not_exists "$CK_MNT/run1/step-100"
	# an open one needs --force; refused = unchanged
	mkdir -p "$CK_MNT/run1/step-300" && echo y >"$CK_MNT/run1/step-300/f"
	assert_bad $E_BUSY "--force" rm "$CK_MNT" run1/step-300
	assert_eq "0 0 -" "$(gen_state step-300)" "open step-300 after a refused rm"
	assert_adm 0 rm --force "$CK_MNT" run1/step-300
	assert_eq "2 0 admin-abort" "$(gen_state step-300)" "rm --force aborts an open generation"
	# a commit of an ended generation is refused
	local id
	id=$(ck_sql "SELECT id FROM generations WHERE name = 'step-100'")
	assert_bad $E_NO_GEN "deleted" commit "$CK_MNT" "id:$id"
	same_file "$CK_MNT/run1/step-200/f" x
	ck_umount
}
same_file() { assert_eq "$2" "$(cat "$1")" "content of $1"; }

# An rm --force of an open rewrite puts its last version back (exit 0), and a
# name of the removed version the kernel still caches (up to 1 s) opens
# nothing: no read of dropped data, no write into an inode nothing names
# (ns.h invariant 7, node.h invariant 5).
test_rm_force_of_a_rewrite_restores_and_cached_names_open_nothing() {
	ck_mount
	mk_gen run1/step-400 a:5000
	"$PY" - "$CK_MNT/run1/step-400" >"$CK_TMP/probe" 2>&1 <<'PYEOF' || ck_fail "probe: $(cat "$CK_TMP/probe")"
import os, subprocess, sys
g = sys.argv[1]
old = open(g + '/a', 'rb').read()
with open(g + '/a', 'r+b') as f: # a rewrite: version 2, open
    f.write(b'B' * 100)
dfd = os.open(g, os.O_RDONLY | os.O_DIRECTORY)
os.stat('a', dir_fd=dfd) # the kernel caches the name
rm = subprocess.run([os.environ['CKPTFS_ADMIN'], 'rm', '--force', os.path.dirname(os.path.dirname(g)),
                     'run1/step-400'], capture_output=True, text=True)
print('rm', rm.returncode, rm.stderr.strip().replace('\n', '|'))
try:
    fd = os.open('a', os.O_RDONLY, dir_fd=dfd)
    got = os.read(fd, 1 << 20)
    os.close(fd)
    print('read', 'old' if got == old else 'WRONG %d bytes' % len(got))
except FileNotFoundError:
    print('read ENOENT')
try:
    fd = os.open('a', os.O_WRONLY | os.O_TRUNC, dir_fd=dfd)
    os.write(fd, b'C' * 3000)
    os.close(fd)
    print('write accepted')
except FileNotFoundError:
    print('write ENOENT')
PYEOF
	local probe
	probe=$(cat "$CK_TMP/probe")
	assert_contains "$probe" "rm 0 " "rm --force of an open rewrite answers success"
	assert_eq "1 0 admin-abort-restored" "$(gen_state step-400)" "the last version is back, committed"
	case "$probe" in *"read old"* | *"read ENOENT"*) ;; *) ck_fail "a read by a cached name: $probe" ;; esac
	assert_contains "$probe" "write ENOENT" "a write by a cached name is refused, not lost"
	assert_file_eq "$CK_REF/run1/step-400/a" "$CK_MNT/run1/step-400/a"
	ck_umount
}

test_offline_changes_take_the_cache_lock_and_online_ones_use_the_daemon() {
	ck_mount
	mk_gen run1/step-100 a:5000
	mk_gen run1/step-200 b:5000
	# --cache while mounted: the daemon does it
	assert_adm 0 --json pin --cache "$CK_CACHE" run1/step-100
	assert_eq online "$(json 'j["mode"]')" "pin --cache with a daemon running"
	ck_umount
	assert_adm 0 --json unpin --cache "$CK_CACHE" run1/step-100
	assert_eq offline "$(json 'j["mode"]')" "unpin --cache with no daemon"
	assert_eq 0 "$(gen_state step-100 | cut -d' ' -f2)" "unpinned offline"
	assert_adm 0 rm --cache "$CK_CACHE" run1/step-200
	assert_eq "3 0 admin" "$(gen_state step-200)" "deleted offline"
	assert_adm 0 check --cache "$CK_CACHE"
	ck_mount
	assert_not_exists "$CK_MNT/run1/step-200"
	assert_file_eq "$CK_REF/run1/step-100/a" "$CK_MNT/run1/step-100/a"
	ck_umount
}

# gen.h invariant 7 offline (review3 F5): `commit --cache` of a save an
# offline open held syncs the cache (its files were closed without fsync)
# before the catalog's commit is synced, as the daemon's commit does.
test_offline_commit_of_a_held_save_syncs_its_objects_before_the_catalog() {
	local shim log ev cache_line cat_line
	shim=$(cd "$(dirname "$CKPTFS_BIN")" && pwd)/synclog.so
	[ -f "$shim" ] || ck_fail "$shim is missing (make $(dirname "$CKPTFS_BIN")/synclog.so)"
	ck_mount
	mkdir -p "$CK_MNT/run1/step-300" "$CK_REF/run1/step-300"
	ck_rand "$CK_REF/run1/step-300/a" $((2 * MiB))
	cp "$CK_REF/run1/step-300/a" "$CK_MNT/run1/step-300/a"
	sync "$CK_MNT/run1/step-300/a" # its rows committed (the shim watches the tool only)
	ck_kill9 # open at the stop: the next open holds it
	log=$CK_TMP/synclog
	: >"$log"
	SYNCLOG=$log LD_PRELOAD=$shim ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 \
		"$CKPTFS_ADMIN" commit --cache "$CK_CACHE" run1/step-300 >"$CK_TMP/out" 2>"$CK_TMP/err" ||
		ck_fail "offline commit of the held step-300: $(err | tr '\n' '|')"
	assert_eq "1 0 admin" "$(gen_state step-300)" "committed offline"
	ev=$(sed "s|$CK_TMP/||" "$log")
	cache_line=$(echo "$ev" | grep -n "^syncfs cache" | head -n 1 | cut -d: -f1)
	[ -n "$cache_line" ] || ck_fail "step-300 was committed offline without syncing the cache (events: $(echo "$ev" | tr '\n' ' ' | cut -c1-600))"
	cat_line=$(echo "$ev" | tail -n +"$cache_line" | grep -n '^sync cache/catalog\.db' | head -n 1 | cut -d: -f1)
	[ -n "$cat_line" ] || ck_fail "step-300 was committed offline but the catalog was not fsync'd after its objects were (events: $(echo "$ev" | tr '\n' ' ' | cut -c1-600))"
	ck_mount
	assert_file_eq "$CK_REF/run1/step-300/a" "$CK_MNT/run1/step-300/a"
	ck_umount
}

# gen.h invariant 10 (review 31c F4): `ckptfs-admin commit` of a held save
# while a file of it is open for writing and not yet written commits it (it
# failed with EAGAIN after s30-gcsync); the handle's write afterwards opens
# version 2 and leaves version 1 as committed, byte for byte: `rm --force`
# of the rewrite puts it back.
test_commit_of_a_held_save_with_a_file_open_for_writing_not_written() {
	ck_mount
	mkdir -p "$CK_MNT/run1/step-500" "$CK_REF/run1/step-500"
	ck_rand "$CK_REF/run1/step-500/a" $((2 * MiB))
	cp "$CK_REF/run1/step-500/a" "$CK_MNT/run1/step-500/a"
	sync "$CK_MNT/run1/step-500/a"
	ck_kill9 # open at the stop: the next open holds it
	ck_mount
	assert_eq 4 "$(gen_state step-500 | cut -d' ' -f1)" "step-500 held after the crash"
	# a writer opens a (no O_CREAT, no O_TRUNC) and writes only when told
	"$PY" -c '
import os, sys, time
f = open(sys.argv[1], "r+b"); open(sys.argv[2], "w").write("x")
end = time.time() + 60
while not os.path.exists(sys.argv[3]) and time.time() < end: time.sleep(0.05)
f.seek(0, 2); f.write(b"late bytes"); f.close()' "$CK_MNT/run1/step-500/a" "$CK_TMP/opened" "$CK_TMP/go" &
	local w=$!
	while [ ! -e "$CK_TMP/opened" ] && kill -0 $w 2>/dev/null; do sleep 0.05; done
	[ -e "$CK_TMP/opened" ] || ck_fail "the open for writing of the held step-500 failed"
	local rc
	rc=$(adm commit "$CK_MNT" run1/step-500)
	touch "$CK_TMP/go"
	wait $w || ck_fail "the writer of step-500/a failed"
	[ "$rc" = 0 ] || ck_fail "commit of the held step-500 with a file open for writing: exit $rc: $(err | tr '\n' '|')"
	assert_eq "0 2" "$(ck_sql "SELECT state || ' ' || version FROM generations WHERE name = 'step-500'")" \
		"step-500 after the write: version 2 open"
	cp "$CK_REF/run1/step-500/a" "$CK_TMP/a2" && printf 'late bytes' >>"$CK_TMP/a2"
	assert_file_eq "$CK_TMP/a2" "$CK_MNT/run1/step-500/a"
	assert_adm 0 rm --force "$CK_MNT" run1/step-500
	assert_eq "1 0 admin-abort-restored" "$(gen_state step-500)" "version 1 back, committed"
	ck_umount
	ck_mount # no name the kernel cached of version 2
	assert_file_eq "$CK_REF/run1/step-500/a" "$CK_MNT/run1/step-500/a"
	ck_umount
}

# ---------------------------------------------------------------- gc, verify

# plant_orphans — sets h (the first chunk of run1/step-100/a.pt) and fake (a
# name no row has) and puts a copy of h's objects under fake's name in the
# cache and on BACKING: one orphan on each side.
plant_orphans() {
	h=$(chunk_of "$CK_MNT/run1/step-100/a.pt")
	fake=abababababababababababababababababababababababababababababababab
	mkdir -p "$CK_CACHE/chunks/ab/ab" "$CK_BACKING/chunks/ab/ab"
	cp "$CK_CACHE/$(ck_obj_rel "$h")" "$CK_CACHE/$(ck_obj_rel $fake)"
	cp "$CK_BACKING/$(ck_obj_rel "$h")" "$CK_BACKING/$(ck_obj_rel $fake)"
}

test_gc_removes_only_objects_nothing_names_in_cache_and_backing() {
	ck_mount
	mk_gen run1/step-100 a.pt:$((2 * MiB))
	assert_adm 0 wait "$CK_MNT" run1/step-100 --timeout 60
	local h fake
	plant_orphans
	local size
	size=$(stat -c %s "$CK_CACHE/$(ck_obj_rel $fake)")
	assert_adm 0 --json gc --dry-run "$CK_MNT"
	assert_eq "1 1 0 0" "$(json '" ".join(str(x) for x in (j["cache"]["orphans"], j["backing"]["orphans"], j["cache"]["removed"], j["backing"]["removed"]))')" "gc --dry-run"
	assert_exists "$CK_CACHE/$(ck_obj_rel $fake)"
	# without --delete gc is a dry run (JuiceFS's convention): it says what it would free
	assert_adm 0 gc "$CK_MNT"
	assert_contains "$(out)" "would free" "gc without --delete"
	assert_contains "$(out)" "--delete" "gc without --delete names the flag"
	assert_exists "$CK_CACHE/$(ck_obj_rel $fake)"
	assert_exists "$CK_BACKING/$(ck_obj_rel $fake)"
	assert_adm 0 --json gc --delete "$CK_MNT"
	assert_eq "1 1 $((2 * size))" "$(json '" ".join(str(x) for x in (j["cache"]["removed"], j["backing"]["removed"], j["freed_bytes"]))')" "gc"
	[ ! -e "$CK_CACHE/$(ck_obj_rel $fake)" ] || ck_fail "gc left the orphan in the cache"
	[ ! -e "$CK_BACKING/$(ck_obj_rel $fake)" ] || ck_fail "gc left the orphan on BACKING"
	assert_exists "$CK_BACKING/$(ck_obj_rel "$h")"
	assert_adm 0 gc --delete "$CK_MNT"
	assert_contains "$(out)" "0 named by nothing" "a second gc finds nothing"
	assert_adm 0 verify "$CK_MNT"
	ck_umount
	ck_mount
	assert_file_eq "$CK_REF/run1/step-100/a.pt" "$CK_MNT/run1/step-100/a.pt"
	ck_umount
	# offline: the same walk under the cache lock
	mkdir -p "$CK_BACKING/chunks/ab/ab"
	cp "$CK_BACKING/$(ck_obj_rel "$h")" "$CK_BACKING/$(ck_obj_rel $fake)"
	assert_adm 0 --json gc --delete --cache "$CK_CACHE"
	assert_eq "offline 1" "$(json 'j["mode"] + " " + str(j["backing"]["removed"])')" "offline gc"
}

# gen_hashes NAME → the distinct chunks (hex) of generation NAME's files
gen_hashes() {
	ck_sql "SELECT DISTINCT lower(hex(e.hash)) FROM extents e JOIN inodes i ON i.ino = e.ino JOIN generations g ON g.id = i.gen WHERE g.name = '$1' ORDER BY 1"
}
# same_objects DIR HASHES... — each object on BACKING is the copy in DIR, byte for byte
same_objects() {
	local d=$1 h
	shift
	for h in "$@"; do
		cmp -s "$d/$h" "$CK_BACKING/$(ck_obj_rel "$h")" || ck_fail "gc removed or changed $(ck_obj_rel "$h") on BACKING, named by a manifest there"
	done
}

# admin_query.h 3 (review finding 3): a manifest on BACKING that no catalog
# row names (a save a rebuild left out; here a real save's manifest and
# objects put back after its rm) keeps every chunk it names through gc
# --delete, online and offline, bytes intact, so a rebuild brings the save
# back whole.
test_gc_keeps_every_chunk_a_manifest_on_backing_names() {
	ck_mount
	mk_gen run1/step-100 a.pt:$((3 * MiB + 5))
	mk_gen run1/step-200 b.pt:$((MiB + 7))
	assert_adm 0 wait "$CK_MNT" --timeout 60
	ck_wait_durable
	local id m h hashes n
	id=$(ck_sql "SELECT id FROM generations WHERE name = 'step-100'")
	m=$(cd "$CK_BACKING" && ls manifests/gen/ | grep "^$id\.")
	[ -n "$m" ] || ck_fail "no manifest of generation $id on BACKING"
	hashes=$(gen_hashes step-100)
	n=$(echo "$hashes" | wc -l)
	mkdir "$CK_TMP/saved"
	cp "$CK_BACKING/manifests/gen/$m" "$CK_TMP/saved/manifest"
	for h in $hashes; do cp "$CK_BACKING/$(ck_obj_rel "$h")" "$CK_TMP/saved/$h"; done
	assert_adm 0 rm "$CK_MNT" run1/step-100
	ck_wait_durable
	assert_not_exists "$CK_BACKING/manifests/gen/$m"
	# what a rebuild that rejected the manifest leaves: it and its objects, no rows
	cp "$CK_TMP/saved/manifest" "$CK_BACKING/manifests/gen/$m"
	for h in $hashes; do
		mkdir -p "$CK_BACKING/$(dirname "$(ck_obj_rel "$h")")"
		cp "$CK_TMP/saved/$h" "$CK_BACKING/$(ck_obj_rel "$h")"
	done
	assert_eq 0 "$(ck_sql "SELECT COUNT(*) FROM chunks WHERE lower(hex(hash)) IN ($(printf "'%s'," $hashes | sed 's/,$//'))")" "catalog rows of the planted save's chunks"
	assert_adm 0 --json gc --delete "$CK_MNT"
	same_objects "$CK_TMP/saved" $hashes
	assert_eq "0 0 $n" "$(json '" ".join(str(x) for x in (j["backing"]["orphans"], j["backing"]["removed"], j["backing"]["manifest_kept"]))')" "online gc: orphans, removed, kept by the manifest"
	assert_adm 0 gc --delete "$CK_MNT"
	assert_contains "$(out)" "$n chunk objects named by no catalog row but by a manifest on BACKING" "gc's report"
	ck_umount
	assert_adm 0 --json gc --delete --cache "$CK_CACHE"
	assert_eq "offline 0 $n" "$(json 'j["mode"] + " " + str(j["backing"]["removed"]) + " " + str(j["backing"]["manifest_kept"])')" "offline gc"
	same_objects "$CK_TMP/saved" $hashes
	# the save is whole: a catalog rebuilt from BACKING reads it back
	assert_adm 0 rebuild --cache "$CK_CACHE"
	ck_mount
	assert_file_eq "$CK_REF/run1/step-100/a.pt" "$CK_MNT/run1/step-100/a.pt"
	assert_file_eq "$CK_REF/run1/step-200/b.pt" "$CK_MNT/run1/step-200/b.pt"
	ck_umount
}

# admin_query.h 3: a manifest gc cannot parse stops it before anything is
# removed (online and offline), with one line naming the manifest; moved
# away, gc removes the real orphans again.
test_gc_removes_nothing_while_a_manifest_on_backing_cannot_be_parsed() {
	ck_mount
	mk_gen run1/step-100 a.pt:$((2 * MiB))
	assert_adm 0 wait "$CK_MNT" run1/step-100 --timeout 60
	ck_wait_durable
	local h fake
	plant_orphans
	printf 'not a manifest\n' >"$CK_BACKING/manifests/gen/999.1.ckm"
	assert_bad $E_PROBLEM "manifests/gen/999.1.ckm cannot be parsed" gc --delete "$CK_MNT"
	assert_contains "$(err)" "removed nothing" "gc's error"
	assert_exists "$CK_CACHE/$(ck_obj_rel $fake)"
	assert_exists "$CK_BACKING/$(ck_obj_rel $fake)"
	ck_umount
	assert_bad $E_PROBLEM "manifests/gen/999.1.ckm cannot be parsed" gc --delete --cache "$CK_CACHE"
	assert_exists "$CK_CACHE/$(ck_obj_rel $fake)"
	assert_exists "$CK_BACKING/$(ck_obj_rel $fake)"
	mv "$CK_BACKING/manifests/gen/999.1.ckm" "$CK_TMP/"
	assert_adm 0 --json gc --delete --cache "$CK_CACHE"
	assert_eq "1 1" "$(json '" ".join(str(x) for x in (j["cache"]["removed"], j["backing"]["removed"]))')" "gc once the manifest is moved away"
	assert_not_exists "$CK_BACKING/$(ck_obj_rel $fake)"
	assert_exists "$CK_BACKING/$(ck_obj_rel "$h")"
}

# admin_query.h 4 (DESIGN invariant 7): a symlink planted at a cache shard
# (chunks/XY -> a directory holding cd/<an orphan's name>) is not followed
# by gc, online or offline: the file it leads to stays; orphans elsewhere go.
test_cache_gc_follows_no_symlink_planted_in_the_cache() {
	ck_mount
	mk_gen run1/step-100 a.pt:$((2 * MiB))
	assert_adm 0 wait "$CK_MNT" run1/step-100 --timeout 60
	local v=$CK_TMP/victim name h fake p=
	h=$(chunk_of "$CK_MNT/run1/step-100/a.pt")
	for p in $(printf '%02x ' $(seq 0 255)); do [ -e "$CK_CACHE/chunks/$p" ] || break; done
	name=${p}cd$(printf '%060d' 0)
	mkdir -p "$v/cd"
	echo "root's file" >"$v/cd/$name"
	ln -s "$v" "$CK_CACHE/chunks/$p"
	fake=efefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefef
	mkdir -p "$CK_CACHE/chunks/ef/ef"
	cp "$CK_CACHE/$(ck_obj_rel "$h")" "$CK_CACHE/$(ck_obj_rel $fake)"
	assert_adm 0 --json gc --delete "$CK_MNT"
	assert_eq "1" "$(json 'j["cache"]["removed"]')" "online gc of the cache"
	assert_eq "root's file" "$(cat "$v/cd/$name")" "the file behind the planted symlink"
	assert_not_exists "$CK_CACHE/$(ck_obj_rel $fake)"
	ck_umount
	cp "$CK_BACKING/$(ck_obj_rel "$h")" "$CK_CACHE/$(ck_obj_rel $fake)"
	assert_adm 0 --json gc --delete --cache "$CK_CACHE"
	assert_eq "1" "$(json 'j["cache"]["removed"]')" "offline gc of the cache"
	assert_eq "root's file" "$(cat "$v/cd/$name")" "the file behind the planted symlink"
	rm "$CK_CACHE/chunks/$p"
}

test_verify_names_corrupt_and_missing_copies_by_file_and_generation() {
	ck_mount copy_uploads # two independent copies (BACKING shares the cache's filesystem here)
	mk_gen run1/step-100 a.pt:$((MiB + 11))
	mk_gen run1/step-200 b.pt:$((MiB + 13))
	assert_adm 0 wait "$CK_MNT" --timeout 60
	assert_adm 0 verify "$CK_MNT"
	assert_contains "$(out)" "chunks_bad 0" "verify of a whole store"
	local ha hb
	ha=$(chunk_of "$CK_MNT/run1/step-100/a.pt")
	hb=$(chunk_of "$CK_MNT/run1/step-200/b.pt")
	# corrupt the BACKING copy of a's chunk (a byte of its payload), remove b's cache copy
	chmod 644 "$CK_BACKING/$(ck_obj_rel "$ha")"
	ck_xor_byte "$CK_BACKING/$(ck_obj_rel "$ha")" 100
	rm -f "$CK_CACHE/$(ck_obj_rel "$hb")"
	assert_adm $E_PROBLEM verify "$CK_MNT"
	assert_contains "$(out)" "corrupt chunk $ha in BACKING" "verify names the corrupt copy"
	assert_contains "$(out)" "in /run1/step-100/a.pt (generation run1/step-100)" "verify names the file and generation"
	assert_contains "$(out)" "missing chunk $hb in cache" "verify names the missing copy"
	assert_contains "$(out)" "chunks_bad 2" "verify's count"
	# BACKING's copy bad, the cache's good: put again from the cache (upload.h U13)
	assert_contains "$(out)" "backing_copies_put_again 1" "verify's count of copies put again"
	ck_wait_durable
	chmod 644 "$CK_BACKING/$(ck_obj_rel "$ha")"
	ck_xor_byte "$CK_BACKING/$(ck_obj_rel "$ha")" 100
	assert_adm $E_PROBLEM --json verify "$CK_MNT" run1/step-100
	assert_eq "$ha BACKING corrupt run1/step-100" "$(json 'j["bad"][0]["chunk"] + " " + j["bad"][0]["where"] + " " + j["bad"][0]["problem"] + " " + j["bad"][0]["files"][0]["generation"]')" "verify GEN --json"
	assert_eq 1 "$(json 'len(j["bad"])')" "verify GEN checks only that generation's chunks"
	ck_umount
}

# ---------------------------------------------------------------- stats, wait

test_stats_prints_key_values_json_and_prometheus() {
	ck_mount
	mk_gen run1/step-100 a:$((MiB))
	mkdir -p "$CK_MNT/run1/step-200" && cp "$CK_REF/run1/step-100/a" "$CK_MNT/run1/step-200/a"
	setfattr -n user.ckptfs.commit -v 1 "$CK_MNT/run1/step-200"
	assert_adm 0 wait "$CK_MNT" --timeout 60
	cat "$CK_MNT/run1/step-100/a" >/dev/null
	assert_adm 0 stats "$CK_MNT"
	local k
	for k in logical_bytes unique_bytes stored_bytes dedup_ratio compression_ratio cache_bytes \
		dirty_bytes upload_queue upload_lag_seconds cache_hit_rate chunk_cache_hit_rate generations_durable; do
		out | grep -qE "^$k [0-9.]+" || ck_fail "stats has no line '$k N': $(out | tr '\n' '|')"
	done
	assert_contains "$(out)" "mode online" "stats mode"
	assert_eq "$((2 * MiB))" "$(out | awk '$1 == "logical_bytes" { print $2 }')" "logical_bytes"
	assert_eq "$((MiB))" "$(out | awk '$1 == "unique_bytes" { print $2 }')" "unique_bytes (dedup)"
	assert_adm 0 --json stats "$CK_MNT"
	assert_eq "2.0 0 2" "$(json '" ".join(str(x) for x in (round(j["dedup_ratio"], 1), j["dirty_bytes"], j["generations_durable"]))')" "stats --json"
	assert_adm 0 stats --prometheus "$CK_MNT"
	out | grep -v '^#' | grep -vE '^ckptfs_[a-z_]+\{cache="[^"]*"(,mountpoint="[^"]*")?\} [0-9]+(\.[0-9]+)?$' >"$CK_TMP/badlines" || true
	[ ! -s "$CK_TMP/badlines" ] || ck_fail "not Prometheus text format: $(head -n 3 "$CK_TMP/badlines" | tr '\n' '|')"
	assert_contains "$(out)" "# TYPE ckptfs_logical_bytes gauge" "prometheus TYPE line"
	assert_contains "$(out)" "ckptfs_daemon_up{cache=\"$CK_CACHE\",mountpoint=\"$(realpath "$CK_MNT")\"} 1" "prometheus daemon_up"
	ck_umount
	assert_adm 0 stats --prometheus --cache "$CK_CACHE"
	assert_contains "$(out)" "ckptfs_daemon_up{cache=\"$CK_CACHE\"} 0" "prometheus offline"
}

test_wait_blocks_until_durable_and_times_out() {
	ck_mount
	mk_gen run1/step-100 a:$((MiB))
	assert_adm 0 wait "$CK_MNT" --timeout 60
	assert_contains "$(out)" "1 generation durable" "wait for all"
	mkdir -p "$CK_MNT/run1/step-200" && echo z >"$CK_MNT/run1/step-200/f"
	local t0 t1
	t0=$(date +%s.%N)
	assert_bad $E_TIMEOUT "timeout" wait "$CK_MNT" run1/step-200 --timeout 1
	t1=$(date +%s.%N)
	assert_eq 1 "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print (b - a >= 0.9 && b - a < 10) }')" "wait --timeout 1 took $t0..$t1"
	# committed while wait blocks: it returns 0 once durable
	ck_bg bash -c "sleep 1; setfattr -n user.ckptfs.commit -v 1 '$CK_MNT/run1/step-200'"
	assert_adm 0 wait "$CK_MNT" run1/step-200 --timeout 60
	assert_eq "1 0 explicit" "$(gen_state step-200)" "committed while waiting"
	assert_eq 1 "$(ck_sql "SELECT durable_version = version FROM generations WHERE name = 'step-200'")" "durable when wait returned"
	# an open one aborted while waiting: exit 1
	mkdir -p "$CK_MNT/run1/step-300" && echo q >"$CK_MNT/run1/step-300/f"
	ck_bg bash -c "sleep 1; '$CKPTFS_ADMIN' rm --force '$CK_MNT' run1/step-300"
	assert_bad $E_PROBLEM "aborted" wait "$CK_MNT" run1/step-300 --timeout 60
	ck_umount
}

# _dirty_of INO — how many chunks inode INO names are not on BACKING yet.
_dirty_of() { ck_sql "SELECT COUNT(*) FROM extents e JOIN chunks c ON c.hash = e.hash WHERE e.ino = $1 AND c.uploaded = 0"; }
_has_dirty() { [ "$(_dirty_of "$1")" -gt 0 ]; }
# its extents committed, every chunk of them on BACKING
_all_uploaded() { [ "$(ck_sql "SELECT COUNT(*) FROM extents WHERE ino = $1")" -gt 0 ] && [ "$(_dirty_of "$1")" = 0 ]; }
# _write_outside NAME — 3 MiB of random bytes as run/NAME (its reference in
# CK_REF), a file outside generations; prints its inode.
_write_outside() {
	ck_rand "$CK_REF/$1" $((3 * MiB))
	cp "$CK_REF/$1" "$CK_MNT/run/$1"
	stat -c %i "$CK_MNT/run/$1"
}
_tree_manifest_there() { [ -n "$(ls "$CK_BACKING/manifests/tree" 2>/dev/null)" ]; }
# _poll SECONDS WHAT CMD... — until CMD succeeds, looking every 0.1 s; else fails with WHAT.
_poll() {
	local n=$(($1 * 10)) what=$2 i=0
	shift 2
	until "$@"; do
		i=$((i + 1))
		[ $i -le $n ] || ck_fail "$what after $((n / 10)) s"
		sleep 0.1
	done
}

# Review 35 F1: `wait MOUNT` looked at generations only: with BACKING
# refusing puts, a final model written outside any generation was only in
# the cache, and wait said "1 generation durable on BACKING", exit 0, at
# once. Now it waits for those files too: the timeout names the file, exit
# 9; once BACKING takes puts again it returns 0 with every chunk of the file
# on BACKING, and a new node (same BACKING, an empty cache) reads its bytes.
test_wait_without_gen_waits_for_files_outside_generations() {
	ck_faultfs_up
	ck_mount
	mk_gen run/step-1 model.pt:$((2 * MiB))
	assert_adm 0 wait "$CK_MNT" --timeout 60
	ck_fault "eio=rename,link,create"
	local ino
	ino=$(_write_outside final_model.pt)
	_poll 60 "precondition: final_model.pt has no chunk only in the cache" _has_dirty "$ino"
	assert_bad $E_TIMEOUT "run/final_model.pt" wait "$CK_MNT" --timeout 2
	assert_contains "$(err)" "1 file outside generations" "wait's timeout"
	assert_contains "$(err)" "not on BACKING yet" "wait's timeout"
	# with GEN: that generation only, as before
	assert_adm 0 wait "$CK_MNT" run/step-1 --timeout 60
	ck_fault ""
	assert_adm 0 wait "$CK_MNT" --timeout 120
	assert_contains "$(out)" "the files outside generations are on BACKING" "wait's report"
	assert_eq 0 "$(_dirty_of "$ino")" "chunks of final_model.pt not on BACKING when wait returned 0"
	local h
	for h in $(ck_sql "SELECT DISTINCT lower(hex(hash)) FROM extents WHERE ino = $ino"); do
		[ -s "$CK_TMP/store/$(ck_obj_rel "$h")" ] || ck_fail "chunk $h of final_model.pt is not on BACKING after wait returned 0"
	done
	ck_umount
	CK_CACHE=$CK_TMP/cache2
	mkdir -p "$CK_CACHE"
	ck_mount
	assert_file_eq "$CK_REF/final_model.pt" "$CK_MNT/run/final_model.pt"
	assert_file_eq "$CK_REF/run/step-1/model.pt" "$CK_MNT/run/step-1/model.pt"
	ck_umount
}

# Review 36 F4a (meta/upload.h U11, fs/uploader.c T7): `wait MOUNT` said
# "the files outside generations are on BACKING" (exit 0) once their chunks
# were uploaded, but only the tree manifest names them there, and it came
# later (an idle round) or, as here, not at all: BACKING refuses it
# (manifests/tree/ made immutable, chattr +i: the daemon holds its fd, so
# only the inode's flag stops a put there) while it takes chunks. A job that then
# exits and loses its node loses final.pt: a new cache applies the older tree
# manifest. On main `wait --timeout 3` below exits 0 (the assert_bad fails).
# Now it times out naming the tree manifest; once BACKING takes it, wait
# returns 0, and with the daemon killed right then (no drain: the node is
# lost) a fresh cache over the same BACKING reads final.pt byte for byte.
test_wait_without_gen_waits_for_the_tree_manifest_naming_the_files() {
	ck_mount
	mk_gen run/step-1 model.pt:$((2 * MiB))
	assert_adm 0 wait "$CK_MNT" --timeout 60
	_poll 30 "precondition: no tree manifest on BACKING" _tree_manifest_there
	local tdir=$CK_BACKING/manifests/tree
	ck_at_exit "chattr -i '$tdir' 2>/dev/null"
	chattr +i "$tdir" 2>/dev/null || ck_skip "chattr +i is not supported on $CK_TMP's filesystem"
	local ino
	ino=$(_write_outside final.pt)
	_poll 60 "precondition: final.pt's chunks not on BACKING" _all_uploaded "$ino"
	assert_bad $E_TIMEOUT "tree manifest" wait "$CK_MNT" --timeout 3
	assert_contains "$(err)" "not described on BACKING yet" "wait's timeout"
	grep -qs final.pt "$tdir"/*.ckm && ck_fail "precondition: final.pt in a tree manifest with puts refused"
	chattr -i "$tdir" # BACKING takes the tree manifest again
	assert_adm 0 wait "$CK_MNT" --timeout 60
	assert_contains "$(out)" "the files outside generations are on BACKING" "wait's report"
	grep -qs final.pt "$CK_BACKING"/manifests/tree/*.ckm || ck_fail "wait returned 0 with no tree manifest naming final.pt on BACKING"
	ck_kill9 # the node is lost: no drain
	CK_CACHE=$CK_TMP/cache2
	mkdir -p "$CK_CACHE"
	ck_mount
	assert_file_eq "$CK_REF/final.pt" "$CK_MNT/run/final.pt"
	assert_file_eq "$CK_REF/run/step-1/model.pt" "$CK_MNT/run/step-1/model.pt"
	ck_umount
}

# ---------------------------------------------------------------- export, import

test_export_writes_plain_files_mounted_and_offline() {
	ck_mount
	mk_gen run1/step-100 model.pt:$((3 * MiB + 5)) opt.pt:4097
	mkdir "$CK_MNT/run1/step-200"
	mkdir -p "$CK_REF/run1/step-200/d" "$CK_MNT/run1/step-200/d"
	ck_rand "$CK_REF/run1/step-200/d/x" 77777
	cp "$CK_REF/run1/step-200/d/x" "$CK_MNT/run1/step-200/d/x"
	ln -s d/x "$CK_MNT/run1/step-200/link"
	ln -s d/x "$CK_REF/run1/step-200/link"
	setfattr -n user.ckptfs.commit -v 1 "$CK_MNT/run1/step-200"
	assert_adm 0 export "$CK_MNT" run1/step-100 "$CK_TMP/exp"
	diff -r "$CK_REF/run1/step-100" "$CK_TMP/exp/step-100" || ck_fail "export through the mount differs"
	assert_file_eq "$CK_REF/run1/step-100/model.pt" "$CK_TMP/exp/step-100/model.pt"
	# DIR/NAME exists: refused, unchanged
	assert_bad $E_BUSY "already exists" export "$CK_MNT" run1/step-100 "$CK_TMP/exp"
	ck_umount
	assert_adm 0 export --cache "$CK_CACHE" run1/step-200 "$CK_TMP/off"
	diff -r --no-dereference "$CK_REF/run1/step-200" "$CK_TMP/off/step-200" || ck_fail "offline export differs"
	assert_eq "d/x" "$(readlink "$CK_TMP/off/step-200/link")" "symlink exported"
	# an evicted cache copy: the offline export reads BACKING's
	rm -rf "$CK_CACHE/chunks"
	assert_adm 0 export --cache "$CK_CACHE" run1/step-100 "$CK_TMP/off"
	assert_file_eq "$CK_REF/run1/step-100/model.pt" "$CK_TMP/off/step-100/model.pt"
	ls -A "$CK_TMP/off" | grep -q export && ck_fail "a temporary export directory was left: $(ls -A "$CK_TMP/off")"
	return 0
}

test_import_takes_a_plain_checkpoint_in_as_a_committed_generation() {
	ck_mount
	mkdir -p "$CK_TMP/src/step-500/sub"
	ck_rand "$CK_TMP/src/step-500/sub/w.pt" $((2 * MiB + 3))
	ck_rand "$CK_TMP/src/step-500/meta" 10
	ck_rand "$CK_TMP/src/epoch=1-step=30.ckpt" 5000
	assert_adm 0 import "$CK_MNT" "$CK_TMP/src/step-500" runs/imported
	assert_eq "1 0 rename" "$(gen_state step-500)" "imported generation"
	diff -r "$CK_TMP/src/step-500" "$CK_MNT/runs/imported/step-500" || ck_fail "imported bytes differ"
	# a single-file checkpoint
	assert_adm 0 --json import "$CK_MNT" "$CK_TMP/src/epoch=1-step=30.ckpt" runs/imported
	assert_eq committed "$(json 'j["state"]')" "single-file import"
	assert_file_eq "$CK_TMP/src/epoch=1-step=30.ckpt" "$CK_MNT/runs/imported/epoch=1-step=30.ckpt"
	# --name
	assert_adm 0 import --name step-600 "$CK_MNT" "$CK_TMP/src/step-500" runs/imported
	diff -r "$CK_TMP/src/step-500" "$CK_MNT/runs/imported/step-600" || ck_fail "import --name differs"
	# refused, each leaving nothing behind
	local before
	before=$(gens_dump)
	assert_bad $E_BUSY "already exists" import "$CK_MNT" "$CK_TMP/src/step-500" runs/imported
	assert_bad $E_BAD_NAME "not a generation name" import --name notastep "$CK_MNT" "$CK_TMP/src/step-500" runs/imported
	assert_bad $E_BAD_NAME "'..'" import "$CK_MNT" "$CK_TMP/src/step-500" runs/../x
	assert_bad $E_BAD_NAME "no '/'" import --name a/step-1 "$CK_MNT" "$CK_TMP/src/step-500" runs
	assert_bad $E_BAD_NAME "inside a generation" import --name step-700 "$CK_MNT" "$CK_TMP/src/step-500" runs/imported/step-500
	assert_bad $E_USAGE "MOUNTPOINT" import --cache "$CK_CACHE" "$CK_TMP/src/step-500" runs
	assert_eq "$before" "$(gens_dump)" "generations after refused imports"
	assert_eq "epoch=1-step=30.ckpt step-500 step-600" "$(ls -A "$CK_MNT/runs/imported" | tr '\n' ' ' | sed 's/ $//')" "series after refused imports"
	ck_remount
	diff -r "$CK_TMP/src/step-500" "$CK_MNT/runs/imported/step-500" || ck_fail "imported bytes differ after remount"
	ck_umount
}

# ---------------------------------------------------------------- rebuild

test_rebuild_recreates_the_catalog_from_backing() {
	ck_mount
	mk_gen run1/step-100 a.pt:$((MiB + 1))
	# pinned while open (a pin after the commit rewrites the manifest too:
	# t_writeback)
	mkdir -p "$CK_MNT/run1/step-200" "$CK_REF/run1/step-200"
	ck_rand "$CK_REF/run1/step-200/b.pt" $((2 * MiB))
	cp "$CK_REF/run1/step-200/b.pt" "$CK_MNT/run1/step-200/b.pt"
	assert_adm 0 pin "$CK_MNT" run1/step-200
	setfattr -n user.ckptfs.commit -v 1 "$CK_MNT/run1/step-200"
	echo 200 >"$CK_MNT/run1/latest"
	assert_adm 0 wait "$CK_MNT" --timeout 60
	# the tree manifest (files outside generations) is rewritten by an idle uploader
	local i=0
	until grep -qs latest "$CK_BACKING"/manifests/tree/*.ckm; do
		i=$((i + 1))
		[ $i -le 600 ] || ck_fail "no tree manifest naming 'latest' on BACKING after 30 s"
		sleep 0.05
	done
	assert_bad $E_BUSY "unmount first" rebuild "$CK_MNT"
	assert_bad $E_BUSY "unmount first" rebuild --cache "$CK_CACHE"
	ck_umount
	assert_adm 0 --json list --cache "$CK_CACHE"
	json '[(g["name"], g["pinned"], g["logical_bytes"]) for g in j]' >"$CK_TMP/before"
	mv "$CK_CACHE/catalog.db" "$CK_TMP/lost.db"
	rm -f "$CK_CACHE/catalog.db-wal" "$CK_CACHE/catalog.db-shm"
	assert_adm 0 rebuild --cache "$CK_CACHE" "$CK_BACKING"
	assert_contains "$(out)" "2 generations" "rebuild's report"
	assert_contains "$(out)" "chunks still in the cache are used again" "rebuild's report"
	[ "$(ck_sql 'SELECT COUNT(*) FROM chunks WHERE cached = 1')" -gt 0 ] || ck_fail "no chunk of the cache was taken back after rebuild"
	assert_adm 0 --json list --cache "$CK_CACHE"
	assert_eq "$(cat "$CK_TMP/before")" "$(json '[(g["name"], g["pinned"], g["logical_bytes"]) for g in j]')" "generations after rebuild"
	assert_adm 0 check --cache "$CK_CACHE"
	# a second rebuild keeps the first one's catalog aside
	assert_adm 0 rebuild --cache "$CK_CACHE"
	assert_contains "$(out)" "kept as" "the old catalog is kept"
	ls "$CK_CACHE" | grep -q 'catalog.db.before-rebuild-' || ck_fail "no catalog.db.before-rebuild-* in $CK_CACHE"
	ck_mount
	assert_file_eq "$CK_REF/run1/step-100/a.pt" "$CK_MNT/run1/step-100/a.pt"
	assert_file_eq "$CK_REF/run1/step-200/b.pt" "$CK_MNT/run1/step-200/b.pt"
	assert_eq 200 "$(cat "$CK_MNT/run1/latest")" "a file outside generations"
	ck_umount
}

# _mount_refused WHAT — a mount of CK_CACHE is refused with one line on
# stderr (the daemon's log in a file), nothing mounted; the line in $CK_TMP/refused.
_mount_refused() {
	local rc=0
	"$CKPTFS_BIN" -f -o "$(ck_opts "cache=$CK_CACHE,log=$CK_TMP/refused.log")" "$CK_BACKING" "$CK_MNT" \
		>"$CK_TMP/refused" 2>&1 </dev/null || rc=$?
	ck_is_mounted "$CK_MNT" && ck_fail "$1: mounted"
	assert_ne 0 "$rc" "$1: the daemon's exit status"
	assert_eq 1 "$(wc -l <"$CK_TMP/refused")" "$1: lines on stderr ($(tr '\n' '|' <"$CK_TMP/refused"))"
}
# _cache_files — the cache's file names and sizes (catalog.db's -wal, -shm aside)
_cache_files() { (cd "$CK_CACHE" && find . -name 'catalog.db-*' -prune -o -type f -printf '%p %s\n' | sort); }

# Review 47 F6: a catalog.db cut to half, or with a page zeroed, was refused
# with "cannot read its catalog: Input/output error" (M1's count of durable
# saves reads it before main_open_catalog's documented line). Now one line
# names the file, SQLite's reason and `ckptfs-admin rebuild`; nothing in the
# cache is moved or deleted; following the line, the mount works.
test_a_damaged_catalog_is_refused_naming_the_reason_and_rebuild() {
	ck_mount
	mk_gen run/step-1 a.pt:$((MiB + 1)) b.json:3000
	assert_adm 0 wait "$CK_MNT" --timeout 60
	ck_umount
	cp "$CK_CACHE/catalog.db" "$CK_TMP/whole.db"
	local how before
	for how in truncated zeroed; do
		cp "$CK_TMP/whole.db" "$CK_CACHE/catalog.db"
		rm -f "$CK_CACHE/catalog.db-wal" "$CK_CACHE/catalog.db-shm"
		if [ $how = truncated ]; then
			truncate -s $(($(ck_size "$CK_TMP/whole.db") / 2)) "$CK_CACHE/catalog.db"
		else
			dd if=/dev/zero of="$CK_CACHE/catalog.db" bs=4096 seek=2 count=1 conv=notrunc 2>/dev/null
		fi
		before=$(_cache_files)
		_mount_refused "catalog.db $how"
		assert_contains "$(cat "$CK_TMP/refused")" "catalog $CK_CACHE/catalog.db is damaged (" "catalog.db $how: the refusal"
		assert_contains "$(cat "$CK_TMP/refused")" "rebuild it from BACKING with \`ckptfs-admin rebuild --cache $CK_CACHE $CK_BACKING\`" "catalog.db $how: the refusal"
		[ $how = zeroed ] || assert_contains "$(cat "$CK_TMP/refused")" "(database disk image is malformed)" "catalog.db $how: SQLite's reason"
		assert_eq "$before" "$(_cache_files)" "catalog.db $how: the cache's files after the refusal"
	done
	assert_adm 0 rebuild --cache "$CK_CACHE" "$CK_BACKING"
	ck_mount
	assert_file_eq "$CK_REF/run/step-1/a.pt" "$CK_MNT/run/step-1/a.pt"
	assert_file_eq "$CK_REF/run/step-1/b.json" "$CK_MNT/run/step-1/b.json"
	ck_umount
}

# Review 47 F6: a small.db cut to half was refused with "cannot open
# small.db: Input/output error", no word of what to do. Now one line names
# it, the reason, how to move it aside and what that costs, from the catalog:
# nothing when no chunk waits for upload (then, moved aside, its rows are
# fetched from BACKING: every file reads right), else how many chunks are
# not on BACKING yet; and that rebuild does not help. Nothing is moved.
test_a_damaged_small_db_is_refused_naming_what_moving_it_aside_costs() {
	ck_mount
	mk_gen run/step-1 a.pt:$((MiB + 1)) b.json:3000 c.json:5000 d.txt:700
	assert_adm 0 wait "$CK_MNT" --timeout 60
	ck_umount
	[ -s "$CK_CACHE/small.db" ] || ck_fail "precondition: no small.db in the cache"
	cp "$CK_CACHE/small.db" "$CK_TMP/small.whole"
	truncate -s $(($(ck_size "$CK_CACHE/small.db") / 2)) "$CK_CACHE/small.db"
	local before line
	before=$(_cache_files)
	_mount_refused "small.db truncated"
	line=$(cat "$CK_TMP/refused")
	assert_contains "$line" "cache $CK_CACHE: small.db is damaged (" "the refusal"
	assert_contains "$line" "mv $CK_CACHE/small.db $CK_CACHE/small.db.damaged" "the refusal"
	assert_contains "$line" "no chunk of this cache waits for upload, so every row is on BACKING too" "the refusal"
	assert_contains "$line" "\`ckptfs-admin rebuild\` does not help" "the refusal"
	assert_eq "$before" "$(_cache_files)" "the cache's files after the refusal"
	# chunks the catalog says are not on BACKING yet: counted
	ck_sql "UPDATE chunks SET uploaded = 0 WHERE hash IN (SELECT hash FROM chunks LIMIT 2)" >/dev/null
	_mount_refused "small.db truncated, 2 chunks not uploaded"
	assert_contains "$(cat "$CK_TMP/refused")" "2 chunks of this cache are not on BACKING yet: those of at most 64 KiB have their only copy in it" "the refusal with chunks not uploaded"
	ck_sql "UPDATE chunks SET uploaded = 1 WHERE cached = 1" >/dev/null
	# the remedy, with no chunk waiting: every file reads right, from BACKING
	mv "$CK_CACHE/small.db" "$CK_CACHE/small.db.damaged"
	rm -f "$CK_CACHE/small.db-wal" "$CK_CACHE/small.db-shm"
	ck_mount
	local f
	for f in a.pt b.json c.json d.txt; do
		assert_file_eq "$CK_REF/run/step-1/$f" "$CK_MNT/run/step-1/$f"
	done
	ck_umount
}

# Review 32B F2: a daemon killed leaves catalog.db-wal; catalog.db gone (by
# hand, or a rebuild stopped between its renames), rebuild renamed the new
# catalog in beside the old log and SQLite replayed it: the old catalog id
# and its open step-300 were back, and the next mount was refused as behind.
# Now the log is moved aside (kept, said so) and the new catalog mounts.
test_rebuild_moves_aside_a_write_ahead_log_whose_catalog_is_gone() {
	ck_mount
	mk_gen run1/step-100 a.pt:50000
	assert_adm 0 wait "$CK_MNT" --timeout 60
	mkdir -p "$CK_MNT/run1/step-300"
	ck_rand "$CK_MNT/run1/step-300/x" 3000
	local old
	old=$(ck_sql "SELECT value FROM meta WHERE key = 'catalog_id'")
	ck_kill9
	[ -s "$CK_CACHE/catalog.db-wal" ] || ck_fail "precondition: no write-ahead log left by kill -9"
	mv "$CK_CACHE/catalog.db" "$CK_TMP/lost.db"
	assert_adm 0 rebuild --cache "$CK_CACHE"
	local id
	id=$(ck_sql "SELECT value FROM meta WHERE key = 'catalog_id'")
	[ "$id" != "$old" ] || ck_fail "the catalog in place has the old catalog's id: the old log was replayed"
	assert_contains "$(out)" "write-ahead log without its catalog" "rebuild's report"
	assert_eq "" "$(ck_sql "SELECT name FROM generations WHERE name = 'step-300'")" "the old catalog's open step-300"
	ls "$CK_CACHE" | grep -q '^catalog\.db\.before-rebuild-.*-wal$' || ck_fail "the old log was not kept: $(ls "$CK_CACHE" | tr '\n' ' ')"
	ck_mount
	assert_file_eq "$CK_REF/run1/step-100/a.pt" "$CK_MNT/run1/step-100/a.pt"
	ck_umount
}

# Review 35 F3: the daemon died while BACKING failed (step-2 committed and
# queued, step-3 open); `rebuild` moved the catalog aside and rebuilt from
# BACKING: both saves gone, exit 0, no word of them. Now it refuses (exit 8,
# one line naming them), the catalog stays, and a mount has them whole;
# --force rebuilds as before, saying what it drops (admin_rebuild.c R1).
test_rebuild_refuses_a_catalog_with_saves_not_on_backing_unless_force() {
	ck_faultfs_up
	ck_mount
	mk_gen run/step-1 model.pt:$((2 * MiB))
	ck_wait_durable
	ck_fault "eio=rename,link"
	mk_gen run/step-2 model.pt:$((2 * MiB))
	mkdir -p "$CK_MNT/run/step-3" "$CK_REF/run/step-3"
	ck_rand "$CK_REF/run/step-3/model.pt" $((2 * MiB))
	cp "$CK_REF/run/step-3/model.pt" "$CK_MNT/run/step-3/model.pt"
	# fsync'd: a file only closed in an OPEN save is committed in the next
	# 10 ms batch, which a kill -9 may beat (README "Persistence")
	sync "$CK_MNT/run/step-3/model.pt"
	local id
	id=$(ck_sql "SELECT value FROM meta WHERE key = 'catalog_id'")
	ck_kill9
	ck_fault ""
	assert_bad $E_BUSY "not durable" rebuild --cache "$CK_CACHE"
	assert_contains "$(err)" "run/step-2 (committed, not on BACKING yet)" "rebuild's refusal"
	assert_contains "$(err)" "run/step-3 (open)" "rebuild's refusal"
	assert_contains "$(err)" "--force" "rebuild's refusal"
	assert_eq "$id" "$(ck_sql "SELECT value FROM meta WHERE key = 'catalog_id'")" "the catalog in place after the refusal"
	ls "$CK_CACHE" | grep -q 'catalog.db.before-rebuild-' && ck_fail "rebuild moved the catalog aside: $(ls "$CK_CACHE" | tr '\n' ' ')"
	ck_mount
	assert_file_eq "$CK_REF/run/step-1/model.pt" "$CK_MNT/run/step-1/model.pt"
	assert_file_eq "$CK_REF/run/step-2/model.pt" "$CK_MNT/run/step-2/model.pt"
	assert_file_eq "$CK_REF/run/step-3/model.pt" "$CK_MNT/run/step-3/model.pt"
	assert_adm 0 commit "$CK_MNT" run/step-3 # held since the crash: decided
	assert_adm 0 wait "$CK_MNT" --timeout 60
	ck_fault "eio=rename,link"
	mk_gen run/step-4 model.pt:$((2 * MiB))
	ck_kill9
	ck_fault ""
	assert_adm 0 rebuild --force --cache "$CK_CACHE"
	assert_contains "$(err)" "dropping" "rebuild --force's stderr"
	assert_contains "$(err)" "run/step-4" "rebuild --force's stderr"
	ls "$CK_CACHE" | grep -q 'catalog.db.before-rebuild-' || ck_fail "rebuild --force kept no old catalog"
	ck_mount
	local n
	for n in 1 2 3; do
		assert_file_eq "$CK_REF/run/step-$n/model.pt" "$CK_MNT/run/step-$n/model.pt"
	done
	[ -e "$CK_MNT/run/step-4" ] && ck_fail "step-4 (never on BACKING) came back after rebuild --force"
	ck_umount
}

# admin_rebuild.c R1: a catalog this ckptfs cannot read read-only (another
# schema version) cannot be asked what it holds: refused, unless --force.
test_rebuild_refuses_a_catalog_of_another_schema_version_unless_force() {
	ck_mount
	mk_gen run/step-1 model.pt:$((1 * MiB))
	ck_umount
	ck_sql "PRAGMA user_version = 99; UPDATE meta SET value = '99' WHERE key = 'schema_version'"
	local before
	before=$(sha256sum "$CK_CACHE/catalog.db")
	assert_bad $E_BUSY "another schema version" rebuild --cache "$CK_CACHE"
	assert_contains "$(err)" "--force" "rebuild's refusal"
	assert_eq "$before" "$(sha256sum "$CK_CACHE/catalog.db")" "the catalog after the refusal"
	ls "$CK_CACHE" | grep -q 'catalog.db.before-rebuild-' && ck_fail "rebuild moved the catalog aside: $(ls "$CK_CACHE" | tr '\n' ' ')"
	assert_eq 99 "$(ck_sql "PRAGMA user_version")" "the catalog after the refusal"
	assert_adm 0 rebuild --force --cache "$CK_CACHE"
	ls "$CK_CACHE" | grep -q 'catalog.db.before-rebuild-' || ck_fail "rebuild --force kept no old catalog"
	ck_mount
	assert_file_eq "$CK_REF/run/step-1/model.pt" "$CK_MNT/run/step-1/model.pt"
	ck_umount
}

# ---------------------------------------------------------------- bad input

test_bad_input_is_one_line_with_its_own_exit_code_and_changes_nothing() {
	ck_mount
	mk_gen run1/step-100 a:1000
	local before
	before=$(gens_dump)
	assert_bad $E_NO_GEN "no such generation" show "$CK_MNT" run1/step-999
	assert_bad $E_NO_GEN "no such generation" rm "$CK_MNT" run1/step-999
	assert_bad $E_NO_GEN "no such generation" pin "$CK_MNT" nosuch/step-1
	assert_bad $E_NO_GEN "no such generation" commit "$CK_MNT" id:99999
	assert_bad $E_NO_GEN "no such directory" list "$CK_MNT" nosuch
	assert_bad $E_BAD_NAME "'..'" rm "$CK_MNT" run1/../run1/step-100
	assert_bad $E_BAD_NAME "'..'" pin "$CK_MNT" ../step-100
	assert_bad $E_BAD_NAME "'..'" show "$CK_MNT" run1//step-100
	assert_bad $E_BAD_NAME "not inside the mount" rm "$CK_MNT" /etc/step-100
	assert_bad $E_USAGE "unknown command" frobnicate "$CK_MNT"
	assert_bad $E_USAGE "unknown option" rm --bogus "$CK_MNT" run1/step-100
	assert_bad $E_USAGE "expected one GEN" rm "$CK_MNT"
	assert_bad $E_USAGE "MOUNTPOINT" list
	assert_bad $E_NOT_CKPTFS "not a ckptfs mount" list "$CK_TMP"
	assert_bad $E_NOT_CKPTFS "not a ckptfs mount" rm "$CK_TMP" run1/step-100
	assert_bad $E_NOT_CKPTFS "not a ckptfs cache" list --cache "$CK_TMP"
	# review 43 F4: an emptied cache says how it is rebuilt (a mount of it)
	mkdir "$CK_TMP/emptied"
	assert_bad $E_NOT_CKPTFS "the directory is empty; a mount of it" rebuild --cache "$CK_TMP/emptied"
	# permission denied: another user, whether or not the mount lets them in
	assert_bad $E_PERM "ermission denied" setpriv_admin rm "$CK_MNT" run1/step-100
	assert_eq "$before" "$(gens_dump)" "generations after bad input"
	ck_umount
	ck_mount allow_other
	assert_bad $E_PERM "ermission denied" setpriv_admin pin "$CK_MNT" run1/step-100
	assert_bad $E_PERM "ermission denied" setpriv_admin list "$CK_MNT"
	assert_eq "$before" "$(gens_dump)" "generations after a refused user"
	# the daemon is gone, the mount stale
	kill -9 "$CK_PID"
	_ck_wait_daemon "$CK_PID" 20 || ck_fail "daemon survived kill -9"
	_ck_state "exited $CK_PID"
	CK_PID=
	assert_bad $E_NO_DAEMON "not running" rm "$CK_MNT" run1/step-100
	assert_bad $E_NO_DAEMON "not running" list "$CK_MNT"
	fusermount3 -u "$CK_MNT" 2>/dev/null || umount -l "$CK_MNT"
	assert_eq "$before" "$(gens_dump)" "generations after the daemon died"
}
test_control_channel_is_a_0600_socket_that_refuses_other_users() {
	ck_mount allow_other
	local sock=$CK_CACHE/control.sock
	[ -S "$sock" ] || ck_fail "no control socket at $sock"
	assert_eq "600 0" "$(stat -c '%a %u' "$sock")" "mode and owner of the control socket"
	# a protocol exchange by hand
	local ans
	ans=$(printf 'ckptfs-control 1 hello\n' | timeout 10 "$PY" -c '
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(sys.stdin.buffer.read())
print(s.makefile().read(), end="")' "$sock")
	assert_contains "$ans" "data pid $CK_PID" "hello names the daemon"
	assert_eq ok "$(echo "$ans" | tail -n 1)" "last line of the answer"
	ans=$(printf 'ckptfs-control 1 frob\n' | timeout 10 "$PY" -c '
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(sys.stdin.buffer.read())
print(s.makefile().read(), end="")' "$sock")
	assert_contains "$ans" "error 22 " "an unknown verb is EINVAL"
	# another user cannot even connect
	ans=$(setpriv --reuid nobody --regid nogroup --clear-groups "$PY" -c '
import socket, sys
try:
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print("connected")
except OSError as e:
    print(e.errno)' "$sock")
	assert_eq 13 "$ans" "connect as nobody (EACCES)"
	ck_umount
	[ ! -e "$sock" ] || ck_fail "the control socket is left after unmount"
}

# ---------------------------------------------------------------- help, man, progress

test_help_and_man_page_cover_every_command_and_exit_code() {
	local c
	assert_adm 0 --help
	for c in list show commit pin unpin rm gc verify stats wait rebuild export import umount; do
		assert_contains "$(out)" "  $c" "ckptfs-admin --help lists $c"
	done
	assert_contains "$(out)" "exit codes" "--help documents exit codes"
	for c in list show commit pin unpin rm gc verify check stats wait rebuild export import umount; do
		assert_adm 0 "$c" --help
		assert_contains "$(out)" "usage: ckptfs-admin [--json] $c" "$c --help"
		assert_contains "$(out)" "exit codes" "$c --help"
	done
	local man=$CK_REPO/docs/ckptfs-admin.1
	[ -f "$man" ] || ck_fail "no man page at $man"
	MANWIDTH=100 man -l "$man" >"$CK_TMP/man.txt" 2>"$CK_TMP/man.err" || ck_fail "man -l $man failed: $(head -n 3 "$CK_TMP/man.err")"
	for c in list show commit pin unpin rm gc verify stats wait rebuild export import umount; do
		grep -qE "^ +$c( |$)" "$CK_TMP/man.txt" || ck_fail "the man page has no entry for $c"
	done
	for c in 0 1 2 3 4 5 6 7 8 9 10; do
		grep -qE "^ +$c +" "$CK_TMP/man.txt" || ck_fail "the man page does not document exit code $c"
	done
}

test_progress_bar_only_when_stderr_is_a_terminal() {
	ck_mount
	mk_gen run1/step-100 a:$((2 * MiB))
	assert_adm 0 verify "$CK_MNT"
	[ ! -s "$CK_TMP/err" ] || ck_fail "verify printed on a non-terminal stderr: $(err | head -c 200)"
	# under a pseudo-terminal: a bar drawn with \r
	script -q -e -c "'$CKPTFS_ADMIN' verify '$CK_MNT' >/dev/null" "$CK_TMP/typescript" >/dev/null 2>&1 </dev/null ||
		ck_fail "verify under script(1) failed: $(tail -c 300 "$CK_TMP/typescript")"
	grep -q 'verify *\[' "$CK_TMP/typescript" || ck_fail "no progress bar on a terminal: $(tail -c 300 "$CK_TMP/typescript" | tr '\r' '|')"
	ck_umount
}

# ------------------------------------ what a command acts on, and says (s32)

test_rm_and_commit_of_a_path_inside_a_generation_are_refused() {
	# review B 5: rm FILE deleted the whole generation (admin_gen.c G1)
	ck_mount
	mk_gen run1/step-100 a:5000 b:7000
	local before; before=$(gens_dump)
	assert_bad $E_BAD_NAME "'$CK_MNT/run1/step-100/a': names a path inside the generation run1/step-100, not the generation" \
		rm "$CK_MNT/run1/step-100/a"
	assert_bad $E_BAD_NAME "names a path inside the generation run1/step-100" rm "$CK_MNT" run1/step-100/b
	assert_bad $E_BAD_NAME "names a path inside the generation run1/step-100" rm --force "$CK_MNT" "$CK_MNT/run1/step-100/b"
	assert_bad $E_BAD_NAME "commit acts on a whole generation" commit "$CK_MNT/run1/step-100/a"
	assert_eq "$before" "$(gens_dump)" "generations after the refused rm and commit"
	cmp "$CK_REF/run1/step-100/a" "$CK_MNT/run1/step-100/a" || ck_fail "a changed"
	cmp "$CK_REF/run1/step-100/b" "$CK_MNT/run1/step-100/b" || ck_fail "b changed"
	# reading commands and pin still take a file inside
	assert_adm 0 show "$CK_MNT/run1/step-100/b"
	assert_contains "$(out)" "run1/step-100" "show of a file inside"
	assert_adm 0 pin "$CK_MNT/run1/step-100/a"
	assert_adm 0 unpin "$CK_MNT" run1/step-100/a
	ck_umount
	assert_bad $E_BAD_NAME "names a path inside the generation run1/step-100" rm --cache "$CK_CACHE" run1/step-100/a
	assert_eq "1 0 explicit" "$(gen_state step-100)" "step-100 after the refused offline rm"
	ck_mount
	cmp "$CK_REF/run1/step-100/b" "$CK_MNT/run1/step-100/b" || ck_fail "b changed"
	# the root itself, by its absolute path, is removed
	assert_adm 0 rm "$CK_MNT/run1/step-100"
	assert_contains "$(out)" "run1/step-100: rm (deleted)" "rm of the root"
	ck_umount
}

test_rm_of_an_open_generation_says_what_force_does() {
	# review B 7: "add --force to remove it anyway", but --force gives a
	# rewrite's previous version back
	ck_mount
	mk_gen run1/step-100 a:5000
	exec 7>>"$CK_MNT/run1/step-100/a"
	echo more >&7
	assert_bad $E_BUSY "rm --force aborts the rewrite and gives back the previous version (committed), deleting nothing" \
		rm "$CK_MNT" run1/step-100
	assert_adm 0 rm --force "$CK_MNT" run1/step-100
	exec 7>&-
	assert_contains "$(out)" "run1/step-100: rm (committed)" "rm --force of a rewrite"
	assert_contains "$(err)" "the rewrite was aborted and the previous version is back (committed)" "rm --force of a rewrite"
	cmp "$CK_REF/run1/step-100/a" "$CK_MNT/run1/step-100/a" || ck_fail "step-100/a is not the committed version"
	# a new save, open: --force deletes what was written
	mkdir -p "$CK_MNT/run1/step-200"
	ck_rand "$CK_MNT/run1/step-200/x" 3000
	assert_bad $E_BUSY "rm --force aborts it and deletes what was written" rm "$CK_MNT" run1/step-200
	assert_adm 0 rm --force "$CK_MNT" run1/step-200
	assert_contains "$(out)" "run1/step-200: rm (aborted)" "rm --force of a new save"
	assert_eq "" "$(err)" "stderr of rm --force of a new save"
	ck_umount
}

# A helper holds CACHE/lock (flock) as another offline ckptfs-admin would;
# its pid in $LOCKER; _release_cache_lock lets go and waits for it.
_hold_cache_lock() {
	rm -f "$CK_TMP/locked" "$CK_TMP/unlock"
	ck_bg "$PY" "$CK_HELPERS/lock.py" hold flock "$CK_CACHE/lock" "$CK_TMP/locked" "$CK_TMP/unlock"
	LOCKER=$CK_BG_PID
	ck_wait_file "$CK_TMP/locked" 10
}
_release_cache_lock() {
	touch "$CK_TMP/unlock"
	ck_bg_wait "$LOCKER" 10 || ck_fail "the lock helper failed"
}

test_offline_change_while_another_holds_the_cache_lock_names_the_holder() {
	# review B 8: "the daemon does not answer ... is it running?" exit 4
	ck_mount
	mk_gen run1/step-100 a:5000
	ck_umount
	local before; before=$(gens_dump)
	_hold_cache_lock
	local w="its lock $CK_CACHE/lock is held by pid $LOCKER (python3) and no daemon answers"
	assert_bad $E_BUSY "$w" rm --cache "$CK_CACHE" run1/step-100
	assert_bad $E_BUSY "$w" pin --cache "$CK_CACHE" run1/step-100
	assert_bad $E_BUSY "$w" gc --delete --cache "$CK_CACHE"
	assert_bad $E_BUSY "$w" rebuild --cache "$CK_CACHE"
	assert_adm 0 list --cache "$CK_CACHE" # reading takes no lock
	_release_cache_lock
	assert_eq "$before" "$(gens_dump)" "generations after the refusals"
	assert_adm 0 rm --cache "$CK_CACHE" run1/step-100
	assert_contains "$(out)" "rm (deleted) [offline]" "rm once the lock is free"
}

test_offline_dry_run_gc_claims_nothing_and_writes_nothing() {
	# review B 10: a dry run took the lock, opened the catalog read-write and
	# claimed BACKING
	ck_mount
	mk_gen run1/step-100 a:$((2 * MiB))
	ck_umount
	local orphan; orphan=$CK_BACKING/$(ck_obj_rel "00ff$(printf '%060d' 0)")
	mkdir -p "$(dirname "$orphan")"
	ck_rand "$orphan" 100 # an orphan on BACKING
	local claim cat
	claim=$(ck_claim_state)
	cat=$(md5sum <"$CK_CACHE/catalog.db")
	_hold_cache_lock # another offline admin: a dry run still reads
	assert_adm 0 gc --cache "$CK_CACHE"
	assert_contains "$(out)" "1 named by nothing (100 B); dry run: would free 100 B" "dry run"
	assert_adm 0 --json gc --cache "$CK_CACHE" --dry-run
	assert_eq "True 1 offline" "$(json 'j["dry_run"], j["backing"]["orphans"], j["mode"]')" "gc --json dry run"
	_release_cache_lock
	assert_eq "$claim" "$(ck_claim_state)" "BACKING's claim after a dry run"
	assert_eq "$cat" "$(md5sum <"$CK_CACHE/catalog.db")" "the catalog after a dry run"
	# a claim naming another catalog: BACKING is not counted against this one
	ck_claim | sed 's/^catalog .*/catalog 0123456789abcdef0123456789abcdef/' | ck_claim_plant >/dev/null
	assert_adm 0 gc --cache "$CK_CACHE"
	assert_contains "$(out)" "gc BACKING: skipped: BACKING's claim names another catalog (0123456789abcdef0123456789abcdef" "dry run, another's claim"
	[ -e "$orphan" ] || ck_fail "a dry run removed an object"
}

test_node_catalog_offline_is_refused_when_backing_is_away() {
	# review B 6: with BACKING's claim unreadable the node's catalog was read
	ck_mount
	ck_umount
	sqlite3 "$CK_CACHE/catalog.db" "UPDATE meta SET value = 'node' WHERE key = 'role'"
	mv "$CK_BACKING" "$CK_TMP/backing.away"
	ck_at_exit "[ -e '$CK_TMP/backing.away' ] && mv '$CK_TMP/backing.away' '$CK_BACKING'"
	local w="is the cache of a node of a shared catalog (its catalog's role marker says so) and no daemon answers"
	assert_bad 10 "list: $CK_CACHE $w" list --cache "$CK_CACHE"
	assert_bad 10 "wait: $CK_CACHE $w" wait --cache "$CK_CACHE"
	assert_bad 10 "$w" pin --cache "$CK_CACHE" run1/x
	mv "$CK_TMP/backing.away" "$CK_BACKING"
}

test_control_request_longer_than_a_line_gets_one_error() {
	# review B 11: the client got nothing (the daemon closed with input unread)
	ck_mount
	mk_gen run1/step-100 a:5000
	local ans
	ans=$("$PY" -c '
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall(b"ckptfs-control 1 list " + b"a" * 5000 + b"\n")
print(s.makefile(errors="replace").read(), end="")' "$CK_CACHE/control.sock" 2>&1)
	assert_eq "error 7 request line longer than 4095 bytes with its newline" "$ans" "answer to a long request"
	assert_adm 0 rm "$CK_MNT" run1/step-100 # the daemon answers on
	ck_umount
}

ck_main "$@"
