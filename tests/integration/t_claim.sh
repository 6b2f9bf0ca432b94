#!/bin/bash
# t_claim — one catalog per BACKING (fs/lib/claim.h, docs/DESIGN.md "One catalog
# per BACKING"): a second mount with another cache is refused with the holder
# named and BACKING untouched; a clean unmount releases the claim; a holder
# gone (kill -9 on this host, or another host's heartbeat older than
# claim_timeout) is taken over, by exactly one of two racing mounts; the same
# over nfs://. `ckptfs-admin rebuild` claims BACKING for the new catalog
# (refused while another daemon holds it; the catalog it passed is behind).
# A daemon whose claim was taken (also while it was stopped past
# claim_timeout) is fenced: EROFS for changes, reads on, BACKING untouched
# from then on; one stopped past claim_timeout whose claim nobody took takes
# it anew and goes on. A stale copy of a cache (cp -a) is refused once the
# original took BACKING again (claim.h 12); a rebuild killed after its claim
# leaves the old catalog mountable (13). And a catalog.db with damaged bytes: the mount is refused
# naming `ckptfs-admin rebuild`, `ckptfs-admin check` reports SQLite's
# integrity_check and exits 1.
. "$(dirname "$0")/lib.sh"

ck_timeout test_nfs_url_second_catalog_refused_then_stale_claim_taken_over 240
ck_slow test_nfs_url_second_catalog_refused_then_stale_claim_taken_over

_save() { # NAME MiB
	mkdir -p "$CK_MNT/run/$1" "$CK_REF/run/$1"
	ck_rand "$CK_REF/run/$1/model.pt" $(($2 * 1024 * 1024))
	cp "$CK_REF/run/$1/model.pt" "$CK_MNT/run/$1/model.pt"
	setfattr -n user.ckptfs.commit -v 1 "$CK_MNT/run/$1"
}

# _start CACHE MNT [opts] — a daemon (foreground, in the background) that
# the case's cleanup knows of; its pid in _SPID, stderr in $CACHE.stderr.
_start() {
	local cache=$1 mnt=$2 opts
	opts=$(ck_opts "cache=$1,log=$1.log")
	[ -n "${3:-}" ] && opts+=",$3"
	mkdir -p "$cache" "$mnt"
	"$CKPTFS_BIN" -f -o "$opts" "$CK_BACKING" "$mnt" >"$cache.stderr" 2>&1 </dev/null &
	_SPID=$!
	_CK_DAEMONS+=("$_SPID:$mnt:$cache.stderr:$cache.log")
	_ck_state "pid $_SPID $CKPTFS_BIN"
	_ck_state "mnt $mnt"
}

# _settle PID MNT — waits until PID has mounted MNT (prints "mounted") or
# exited (prints "exit N").
_settle() {
	local pid=$1 mnt=$2 i=0 rc=0
	while :; do
		if ck_is_mounted "$mnt"; then
			echo mounted
			return 0
		fi
		if ! _ck_pid_alive "$pid"; then
			wait "$pid" || rc=$?
			echo "exit $rc"
			return 0
		fi
		i=$((i + 1))
		[ $i -le 600 ] || ck_fail "daemon $pid neither mounted $mnt nor exited in 30 s"
		sleep 0.05
	done
}

# A claim of "another host" (FORMAT.md), renewed AGE seconds ago, planted as
# the next epoch of BACKING (default CK_BACKING): as another host's mount
# would make it (lib.sh ck_claim_plant).
_foreign_claim() { # AGE [BACKING]
	ck_claim_record 0123456789abcdef0123456789abcdef node-elsewhere /var/cache/ckptfs/abc 1234 \
		$(($(date +%s) - $1)) | ck_claim_plant "${2:-$CK_BACKING}" >/dev/null
}

test_second_catalog_on_a_claimed_backing_is_refused_naming_the_holder() {
	ck_mount
	_save step-1 3
	ck_wait_durable
	ck_backing_quiet
	local before after out
	before=$(ck_backing_snapshot "$CK_BACKING")
	_start "$CK_TMP/cache2" "$CK_TMP/mnt2"
	out=$(_settle "$_SPID" "$CK_TMP/mnt2")
	[ "$out" != mounted ] || ck_fail "a second catalog mounted the claimed BACKING"
	assert_ne "exit 0" "$out" "exit status of the refused mount"
	local err
	err=$(cat "$CK_TMP/cache2.stderr")
	assert_eq 1 "$(wc -l <"$CK_TMP/cache2.stderr")" "lines on stderr: $err"
	assert_contains "$err" "ckptfs: BACKING $CK_BACKING is claimed by another catalog (host $(hostname), cache $CK_CACHE, pid $CK_PID, renewed"
	assert_contains "$err" "unmount it there, or wait 60 s if that node is gone"
	after=$(ck_backing_snapshot "$CK_BACKING")
	[ "$before" == "$after" ] || ck_fail "the refused mount changed BACKING"
	ck_claim_epochs_only_of "$(ck_claim_field instance)"
	assert_eq "$CK_CACHE" "$(ck_claim_field cache)" "the claim's cache"
	assert_eq "$CK_PID" "$(ck_claim_field pid)" "the claim's pid"
	# released by a clean unmount: the second cache mounts and sees step-1
	ck_umount
	assert_eq yes "$(ck_claim_field released)" "a clean unmount marks the claim released: $(ck_claim)"
	assert_eq "$CK_CACHE" "$(ck_claim_field cache)" "the released claim names the last writer"
	CK_CACHE=$CK_TMP/cache2 ck_mount
	cmp -s "$CK_REF/run/step-1/model.pt" "$CK_MNT/run/step-1/model.pt" ||
		ck_fail "the next catalog does not read step-1"
	assert_eq "$CK_TMP/cache2" "$(ck_claim_field cache)" "the claim's cache after the take-over"
	ck_umount
}

# claim.h invariant 4 (review 40 F2): a container on this kernel (the same
# host name and boot id: host network, Kubernetes hostNetwork pods) with its
# own mount and pid namespaces and a fresh cache at the same path mounts the
# same BACKING. Before, it judged the live holder's claim stale (the same
# cache path, in its namespace another directory) and took it: the holder
# was fenced at its next renewal (EROFS). Now the claim's "ns" line differs:
# judged as another host's, by its heartbeat, and refused naming the holder.
test_a_container_with_its_own_namespaces_is_refused_and_the_holder_writes_on() {
	command -v unshare >/dev/null || ck_skip "no unshare(1)"
	unshare -m -p -f --mount-proc true 2>/dev/null || ck_skip "unshare -m -p not permitted here"
	ck_mount claim_timeout=8
	_save step-1 2
	ck_wait_durable
	mkdir -p "$CK_TMP/cacheB" "$CK_TMP/mntB"
	chmod 700 "$CK_TMP/cacheB"
	# B: its own mount and pid namespaces, a fresh cache bind-mounted at A's
	# cache path; it unmounts what it mounted before it ends, on every path
	unshare -m -p -f --mount-proc --propagation private bash -c '
		mount --bind "$1" "$2" || { echo "exit bind"; exit 0; }
		"$3" -f -o "cache=$2${CKPTFS_TEST_MOUNT_OPTS:+,$CKPTFS_TEST_MOUNT_OPTS},log=$4.log" "$5" "$6" >"$4.stderr" 2>&1 </dev/null & q=$!
		for i in $(seq 600); do
			mountpoint -q "$6" && break
			kill -0 $q 2>/dev/null || break
			sleep 0.05
		done
		if mountpoint -q "$6"; then
			echo mounted; fusermount3 -u "$6"; wait $q
		else
			kill $q 2>/dev/null; wait $q; echo "exit $?"
		fi' bns "$CK_TMP/cacheB" "$CK_CACHE" "$CKPTFS_BIN" "$CK_TMP/b" "$CK_BACKING" \
		"$CK_TMP/mntB" >"$CK_TMP/b.out" 2>&1
	local out err
	out=$(cat "$CK_TMP/b.out")
	err=$(cat "$CK_TMP/b.stderr" 2>/dev/null)
	[ "$out" != mounted ] || ck_fail "a mount in other namespaces took the claim of a live holder: $(ck_claim | tr '\n' ' ')"
	assert_contains "$out" "exit " "B's end"
	assert_ne "exit 0" "$out" "exit status of the refused mount"
	assert_contains "$err" "ckptfs: BACKING $CK_BACKING is claimed by another catalog (host $(hostname), cache $CK_CACHE, pid $CK_PID, renewed"
	assert_eq "$CK_PID" "$(ck_claim_field pid)" "the claim's pid after B's attempt"
	ck_claim_epochs_only_of "$(ck_claim_field instance)"
	# A writes on, now and after its next renewal
	mkdir "$CK_MNT/run/step-2" || ck_fail "A cannot mkdir after B's attempt"
	printf 'two\n' >"$CK_MNT/run/step-2/f" || ck_fail "A cannot write after B's attempt"
	local r0 i=0
	r0=$(ck_claim_field renewed)
	while [ "$(ck_claim_field renewed)" == "$r0" ]; do
		i=$((i + 1))
		[ $i -le 300 ] || ck_fail "A's claim was not renewed in 30 s (claim_timeout=8)"
		sleep 0.1
	done
	mkdir "$CK_MNT/run/step-3" || ck_fail "A cannot mkdir after its next renewal: $(grep -i 'claim' "$CK_DLOG" | tail -n 2 | tr '\n' '|')"
	printf 'three\n' >"$CK_MNT/run/step-3/f" || ck_fail "A cannot write after its next renewal"
	assert_eq two "$(cat "$CK_MNT/run/step-2/f")" "step-2's bytes"
	assert_eq three "$(cat "$CK_MNT/run/step-3/f")" "step-3's bytes"
	assert_eq "$CK_PID" "$(ck_claim_field pid)" "the claim's pid after A's renewal"
	! grep -q "no longer holds the claim" "$CK_DLOG" || ck_fail "A was fenced: $(grep 'no longer holds' "$CK_DLOG")"
	assert_eq "$(stat -L -c %i /proc/self/ns/mnt) $(stat -L -c %i /proc/self/ns/pid)" \
		"$(ck_claim_field ns)" "the claim's ns line: $(ck_claim | tr '\n' ' ')"
	ck_umount
}

# _wal_synced_before_claim LOG — of the events of LOG (synclog with
# SYNCLOG_ORDER) up to the first link of an epoch claims/E (a take's
# exclusive create): "synced" when the last WAL write before it was followed by a sync
# of that WAL before it; "unsynced" when not; "no-link" when no claim was
# made.
_wal_synced_before_claim() {
	awk '$1 == "walwrite" && $2 ~ /\/catalog\.db[^/]*-wal$/ { wal = $2; synced = 0 }
		$1 == "sync" && wal != "" && $2 == wal { synced = 1 }
		$1 == "link" && $2 ~ /\/claims\/[0-9]+$/ { print (wal == "" ? "no-wal" : synced ? "synced" : "unsynced"); done = 1; exit }
		END { if (!done) print "no-link" }' "$1"
}

# claim.h invariant 14 (review 40 F4): the take begun is recorded in the
# catalog, and that record synced (an fdatasync of its WAL), before the
# claim naming it is created on BACKING: after a power loss the catalog
# still knows the take, and its own cache is not refused as a copy's.
# Before, the WAL frames were written but first synced at the unmount (or
# the first checkpoint). The same for `ckptfs-admin rebuild`'s stand-in.
test_the_take_begun_is_synced_before_the_claim_is_created() {
	ck_mount
	_save step-1 1
	ck_wait_durable
	ck_umount
	SYNCLOG_ORDER=1 ck_mount_synclog
	ck_umount
	assert_eq synced "$(_wal_synced_before_claim "$CK_SYNCLOG")" \
		"a WAL sync between the take begun and the claim's create: $(grep -E '^(walwrite|link|sync .*-wal)' "$CK_SYNCLOG" | head -n 12 | tr '\n' '|')"
	local shim log=$CK_TMP/synclog.rebuild
	shim=$(cd "$(dirname "$CKPTFS_BIN")" && pwd)/synclog.so
	: >"$log"
	SYNCLOG=$log SYNCLOG_ORDER=1 LD_PRELOAD=$shim ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 \
		"$CKPTFS_ADMIN" rebuild --cache "$CK_CACHE" >/dev/null || ck_fail "rebuild failed"
	assert_eq synced "$(_wal_synced_before_claim "$log")" \
		"rebuild: a WAL sync between the take begun and the claim's create: $(grep -E '^(walwrite|link|sync .*-wal)' "$log" | head -n 12 | tr '\n' '|')"
	ck_mount # the rebuilt catalog mounts and reads step-1
	cmp -s "$CK_REF/run/step-1/model.pt" "$CK_MNT/run/step-1/model.pt" || ck_fail "step-1 after the rebuild"
	ck_umount
}

test_kill9_holder_then_a_fresh_cache_takes_over_and_the_same_cache_remounts() {
	ck_mount
	_save step-1 2
	ck_wait_durable
	local killed=$CK_PID
	ck_kill9
	assert_eq "$killed" "$(ck_claim_field pid)" "the claim left by the killed daemon: $(ck_claim)"
	assert_eq "" "$(ck_claim_field released)" "the killed daemon's claim is not released"
	# the same catalog again: ours
	ck_mount
	ck_kill9
	# a fresh node on this host: the holder's pid is dead, its cache unlocked
	local first=$CK_CACHE
	CK_CACHE=$CK_TMP/cache2
	ck_mount
	cmp -s "$CK_REF/run/step-1/model.pt" "$CK_MNT/run/step-1/model.pt" ||
		ck_fail "the fresh cache does not read step-1"
	grep -q "took over the claim of a gone holder" "$CK_DLOG" ||
		ck_fail "no take-over logged: $(tail -n 3 "$CK_DLOG" | tr '\n' '|')"
	ck_umount
	# the first cache now meets the second's released claim: the second
	# catalog may have written BACKING since the first last held it, so the
	# first is refused (claim.h invariant 8), naming the way out
	local out
	_start "$first" "$CK_TMP/mnt_first"
	out=$(_settle "$_SPID" "$CK_TMP/mnt_first")
	[ "$out" != mounted ] || ck_fail "a catalog behind BACKING mounted it"
	assert_contains "$(cat "$first.stderr")" "was written by another catalog (host $(hostname), cache $CK_TMP/cache2, released"
	assert_contains "$(cat "$first.stderr")" "mount with an empty cache"
	assert_eq "$CK_TMP/cache2" "$(ck_claim_field cache)" "the refused mount left the claim as it was"
}

# claim.h invariant 8, the data-loss case it prevents: cache 1 saves step-1
# and unmounts; a fresh cache 2 (another node) resumes, saves step-2 with
# step-1's bytes in it, and unmounts; cache 1 comes back. Before, it
# mounted: it knew nothing of step-2, and `rm -rf step-1` there removed the
# chunks step-2 is made of from BACKING, and its next manifest took a name
# step-2's manifest had. Now it is refused; an empty cache sees both steps.
test_a_catalog_behind_backing_is_refused_and_an_empty_cache_sees_every_step() {
	ck_mount
	_save step-1 2
	ck_wait_durable
	ck_umount
	local first=$CK_CACHE out
	CK_CACHE=$CK_TMP/cache2 ck_mount
	mkdir -p "$CK_MNT/run/step-2" "$CK_REF/run/step-2"
	cp "$CK_REF/run/step-1/model.pt" "$CK_MNT/run/step-2/model.pt"
	cp "$CK_REF/run/step-1/model.pt" "$CK_REF/run/step-2/model.pt"
	head -c 3000000 /dev/urandom | tee "$CK_MNT/run/step-2/extra.bin" >"$CK_REF/run/step-2/extra.bin"
	setfattr -n user.ckptfs.commit -v 1 "$CK_MNT/run/step-2"
	ck_wait_durable
	ck_umount
	_start "$first" "$CK_TMP/mnt_first"
	out=$(_settle "$_SPID" "$CK_TMP/mnt_first")
	[ "$out" != mounted ] || ck_fail "cache 1, behind BACKING, mounted it"
	assert_eq 1 "$(grep -vc ' info: ' "$first.stderr")" "error lines: $(cat "$first.stderr")"
	assert_contains "$(cat "$first.stderr")" "was written by another catalog"
	# offline changes of cache 1 likewise
	local rc=0
	out=$("$CKPTFS_ADMIN" rm --cache "$first" run/step-1 2>&1) || rc=$?
	assert_eq 8 "$rc" "exit status of offline rm by a catalog behind BACKING ($out)"
	assert_contains "$out" "was written by another catalog"
	# the way out: an empty cache, rebuilt from BACKING, knows both
	CK_CACHE=$CK_TMP/cache3 ck_mount
	cmp -s "$CK_REF/run/step-1/model.pt" "$CK_MNT/run/step-1/model.pt" || ck_fail "step-1 differs"
	cmp -s "$CK_REF/run/step-2/model.pt" "$CK_MNT/run/step-2/model.pt" || ck_fail "step-2 model differs"
	cmp -s "$CK_REF/run/step-2/extra.bin" "$CK_MNT/run/step-2/extra.bin" || ck_fail "step-2 extra differs"
	ck_umount
}

test_offline_admin_changes_respect_the_claim() {
	ck_mount
	_save step-1 1
	_save step-2 1
	# all on BACKING first: the snapshot below must see a BACKING nothing
	# changes (an upload cut short by a slow unmount leaves a temporary that
	# the next mount clears, and sha256sum then misses a listed file)
	ck_wait_durable 60
	ck_umount
	# another catalog (a fresh cache) holds BACKING now
	local first=$CK_CACHE first_pid
	CK_CACHE=$CK_TMP/cache2 ck_mount
	ck_backing_quiet # the new holder's first tree manifest
	local before rc out
	before=$(ck_backing_snapshot "$CK_BACKING")
	for cmd in "rm --cache $first run/step-1" "gc --delete --cache $first"; do
		rc=0
		out=$("$CKPTFS_ADMIN" $cmd 2>&1) || rc=$?
		assert_eq 8 "$rc" "exit status of offline '$cmd' on a claimed BACKING ($out)"
		assert_contains "$out" "ckptfs-admin: BACKING $CK_BACKING is claimed by another catalog (host $(hostname), cache $CK_TMP/cache2, pid $CK_PID"
	done
	# a dry-run gc claims nothing: it skips BACKING, saying whose it is
	out=$("$CKPTFS_ADMIN" gc --cache "$first" 2>&1) || ck_fail "dry-run gc --cache of the other catalog failed: $out"
	assert_contains "$out" "gc BACKING: skipped: BACKING's claim names another catalog"
	[ "$before" == "$(ck_backing_snapshot "$CK_BACKING")" ] || ck_fail "a refused offline change touched BACKING"
	# reading commands claim nothing
	"$CKPTFS_ADMIN" list --cache "$first" >/dev/null || ck_fail "list --cache of the other catalog failed"
	ck_umount
	# released by cache2's catalog, which may have written BACKING since the
	# first held it: the first's offline change is still refused (claim.h
	# invariant 8); cache2's own offline change runs, and releases in turn
	before=$(ck_backing_snapshot "$CK_BACKING")
	rc=0
	out=$("$CKPTFS_ADMIN" rm --cache "$first" run/step-1 2>&1) || rc=$?
	assert_eq 8 "$rc" "exit status of offline rm by a catalog behind BACKING ($out)"
	assert_contains "$out" "was written by another catalog (host $(hostname), cache $CK_TMP/cache2, released"
	[ "$before" == "$(ck_backing_snapshot "$CK_BACKING")" ] || ck_fail "a refused offline change touched BACKING"
	"$CKPTFS_ADMIN" rm --cache "$CK_TMP/cache2" run/step-1 >/dev/null || ck_fail "offline rm failed once BACKING was free"
	assert_eq yes "$(ck_claim_field released)" "offline rm released its claim: $(ck_claim)"
	assert_eq "$CK_TMP/cache2" "$(ck_claim_field cache)" "the claim names the last writer"
}

test_renewal_moves_the_heartbeat_and_records_the_daemon_pid() {
	ck_mount claim_timeout=4
	local r1 r2
	r1=$(ck_claim_field renewed)
	assert_eq "$CK_PID" "$(ck_claim_field pid)" "pid in the claim"
	sleep 2.5
	r2=$(ck_claim_field renewed)
	assert_lt "$r1" "$r2" "heartbeat renewed within timeout/4"
	ck_umount
}

test_claim_of_another_host_fresh_is_refused_stale_is_taken_over() {
	_foreign_claim 5
	_start "$CK_CACHE" "$CK_MNT"
	local out
	out=$(_settle "$_SPID" "$CK_MNT")
	[ "$out" != mounted ] || ck_fail "mounted over another host's fresh claim"
	assert_contains "$(cat "$CK_CACHE.stderr")" "is claimed by another catalog (host node-elsewhere, cache /var/cache/ckptfs/abc, pid 1234, renewed "
	grep -qE "renewed [5-7] s ago\)" "$CK_CACHE.stderr" || ck_fail "the age of the heartbeat: $(cat "$CK_CACHE.stderr")"
	assert_eq node-elsewhere "$(ck_claim_field host)" "the foreign claim is untouched"
	# a retry of the same (refused, so still fresh) cache once the claim is stale
	_foreign_claim 61
	ck_mount
	assert_eq "$(hostname)" "$(ck_claim_field host)" "host of the taken claim"
	assert_eq "$CK_PID" "$(ck_claim_field pid)" "pid of the taken claim"
	ck_umount
	# with a shorter lease: 10 s old is stale at claim_timeout=8 (for a
	# fresh cache: this one held a claim, so another catalog's is BEHIND it)
	_foreign_claim 10
	CK_CACHE=$CK_TMP/cache_short ck_mount claim_timeout=8
	ck_umount
}

test_two_mounts_racing_for_a_stale_claim_exactly_one_wins() {
	local round a b oa ob winners
	for round in 1 2 3; do
		rm -rf "$CK_TMP/ca$round" "$CK_TMP/cb$round"
		_foreign_claim 100
		_start "$CK_TMP/ca$round" "$CK_TMP/ma$round"
		a=$_SPID
		_start "$CK_TMP/cb$round" "$CK_TMP/mb$round"
		b=$_SPID
		oa=$(_settle "$a" "$CK_TMP/ma$round")
		ob=$(_settle "$b" "$CK_TMP/mb$round")
		winners=0
		[ "$oa" == mounted ] && winners=$((winners + 1))
		[ "$ob" == mounted ] && winners=$((winners + 1))
		assert_eq 1 "$winners" "round $round: mounts that won (a: $oa, b: $ob)"
		# claim.h 11: a loser's create that landed in the winner's first
		# renewal's gap is given back; the winner is never fenced by it
		grep -q 'no longer holds the claim' "$CK_TMP/ca$round.stderr" "$CK_TMP/cb$round.stderr" &&
			ck_fail "round $round: a mount was fenced: $(cat "$CK_TMP"/c[ab]$round.stderr)"
		if [ "$oa" == mounted ]; then
			assert_contains "$(cat "$CK_TMP/cb$round.stderr")" "claimed by another catalog (host $(hostname), cache $CK_TMP/ca$round, pid $a"
			fusermount3 -u "$CK_TMP/ma$round"
		else
			assert_contains "$(cat "$CK_TMP/ca$round.stderr")" "claimed by another catalog (host $(hostname), cache $CK_TMP/cb$round, pid $b"
			fusermount3 -u "$CK_TMP/mb$round"
		fi
		_ck_wait_daemon "$a" 30 || true
		_ck_wait_daemon "$b" 30 || true
		assert_eq yes "$(ck_claim_field released)" "round $round: the winner released the claim"
	done
}

# F2 (claim.h invariant 8): `ckptfs-admin rebuild` claims BACKING for the new
# catalog before it reads it. Before, it read BACKING while another catalog
# ran on it, and the rebuilt catalog, counted as fresh at its mount, took
# over later; the other catalog, whose saves it did not know, stayed in
# charge of its own claim. Now the rebuild is refused while another
# catalog's daemon holds BACKING, and once it ran, the catalog it passed is
# behind.
test_rebuild_claims_backing_for_the_new_catalog_and_the_other_is_behind() {
	local c2=$CK_TMP/cache2 first=$CK_CACHE rc out
	CK_CACHE=$c2
	ck_mount
	_save step-1 1
	ck_wait_durable
	ck_umount
	CK_CACHE=$first
	ck_mount # cache 1: fresh, takes cache 2's released claim, saves step-2
	_save step-2 1
	ck_wait_durable
	rc=0
	out=$("$CKPTFS_ADMIN" rebuild --cache "$c2" 2>&1) || rc=$?
	assert_eq 8 "$rc" "exit status of a rebuild while another catalog holds BACKING ($out)"
	assert_eq 1 "$(printf '%s\n' "$out" | wc -l)" "lines of the refusal: $out"
	assert_contains "$out" "ckptfs-admin: BACKING $CK_BACKING is claimed by another catalog (host $(hostname), cache $first, pid $CK_PID"
	ls "$c2" | grep -q before-rebuild && ck_fail "the refused rebuild replaced cache 2's catalog"
	assert_eq "$first" "$(ck_claim_field cache)" "the refused rebuild left the claim"
	ck_umount
	# BACKING released: the rebuild claims it for the new catalog, and
	# releases it at exit, naming cache 2
	"$CKPTFS_ADMIN" rebuild --cache "$c2" >/dev/null || ck_fail "rebuild of cache 2 failed once BACKING was free"
	assert_eq "$c2" "$(ck_claim_field cache)" "the claim names the rebuilt catalog's cache: $(ck_claim)"
	assert_eq yes "$(ck_claim_field released)" "the rebuild released its claim: $(ck_claim)"
	# cache 1 wrote BACKING before; the rebuilt catalog now did: behind
	_start "$first" "$CK_TMP/mnt_first"
	out=$(_settle "$_SPID" "$CK_TMP/mnt_first")
	[ "$out" != mounted ] || ck_fail "cache 1 mounted after another catalog was rebuilt from BACKING"
	assert_contains "$(cat "$first.stderr")" "was written by another catalog (host $(hostname), cache $c2, released"
	# the rebuilt catalog mounts (its claim, not fresh any more) and has both
	CK_CACHE=$c2 ck_mount
	cmp -s "$CK_REF/run/step-1/model.pt" "$CK_MNT/run/step-1/model.pt" || ck_fail "step-1 differs"
	cmp -s "$CK_REF/run/step-2/model.pt" "$CK_MNT/run/step-2/model.pt" || ck_fail "step-2 differs"
	ck_umount
}

# Review 32B F1 (claim.h invariant 12): a copy of a cache (cp -a) has its
# catalog's id. Once the original took BACKING again and saved a step that
# shares a chunk with one the copy knows, the copy's offline rm (and mount)
# is refused, exit 8, naming the copy; the original's save keeps its BACKING
# copy. Before, the copy took the claim and its uploader removed the shared
# chunk: verify found it missing.
test_a_stale_copy_of_a_cache_is_refused_once_the_original_took_backing_again() {
	ck_mount
	_save step-1 1
	ck_wait_durable
	ck_umount
	local copy=$CK_TMP/copy rc out
	cp -a "$CK_CACHE" "$copy"
	ck_mount
	mkdir -p "$CK_MNT/run/step-2" "$CK_REF/run/step-2"
	cp "$CK_REF/run/step-1/model.pt" "$CK_REF/run/step-2/model.pt"
	cp "$CK_REF/run/step-1/model.pt" "$CK_MNT/run/step-2/model.pt" # the same chunks
	setfattr -n user.ckptfs.commit -v 1 "$CK_MNT/run/step-2"
	ck_wait_durable
	ck_umount
	local claim
	claim=$(ck_claim)
	rc=0
	out=$("$CKPTFS_ADMIN" rm --cache "$copy" run/step-1 2>&1) || rc=$?
	assert_eq 8 "$rc" "exit status of the stale copy's offline rm ($out)"
	assert_eq 1 "$(printf '%s\n' "$out" | wc -l)" "lines of the refusal: $out"
	assert_contains "$out" "was taken by another copy of this catalog"
	assert_contains "$out" "cache $CK_CACHE"
	assert_eq "$claim" "$(ck_claim)" "the refused rm changed the claim"
	_start "$copy" "$CK_TMP/mnt_copy"
	out=$(_settle "$_SPID" "$CK_TMP/mnt_copy")
	[ "$out" != mounted ] || ck_fail "the stale copy mounted BACKING"
	assert_contains "$(cat "$copy.stderr")" "another copy of this catalog"
	rc=0
	out=$("$CKPTFS_ADMIN" verify --cache "$CK_CACHE" 2>&1) || rc=$?
	assert_eq 0 "$rc" "verify of the original ($out)"
	ck_mount
	cmp -s "$CK_REF/run/step-2/model.pt" "$CK_MNT/run/step-2/model.pt" || ck_fail "step-2 differs"
	cmp -s "$CK_REF/run/step-1/model.pt" "$CK_MNT/run/step-1/model.pt" || ck_fail "step-1 differs"
	ck_umount
	assert_eq 3 "$(ck_claim_field take)" "the original's third take: $(ck_claim)"
}

# Review 32B F3 (claim.h invariant 13): a rebuild killed after it claimed
# BACKING, before its swap, left the old catalog refused as behind ("mount
# with an empty cache") though nobody wrote BACKING. Its claim stands in
# for the one it replaced: the old catalog mounts with every step, and a
# rebuild run again still works. The kill lands while the claim names the
# new catalog and catalog.db is still the old one (looked at with the
# rebuild stopped; a race lost to the swap is tried again from a copy).
test_a_rebuild_killed_after_its_claim_leaves_the_old_catalog_mountable() {
	ck_mount
	local i j
	for i in $(seq 1 30); do
		mkdir -p "$CK_MNT/run/step-$i" "$CK_REF/run/step-$i"
		for j in 1 2 3 4 5 6; do
			ck_rand "$CK_REF/run/step-$i/f$j" 3000
			cp "$CK_REF/run/step-$i/f$j" "$CK_MNT/run/step-$i/f$j"
		done
		setfattr -n user.ckptfs.commit -v 1 "$CK_MNT/run/step-$i"
	done
	ck_wait_durable
	ck_umount
	local old try rp stopped=
	old=$(ck_sql "SELECT value FROM meta WHERE key = 'catalog_id'")
	cp -a "$CK_CACHE" "$CK_TMP/cache.saved"
	cp -a "$CK_BACKING/claims" "$CK_TMP/claims.saved"
	for try in 1 2 3 4 5; do
		"$CKPTFS_ADMIN" rebuild --cache "$CK_CACHE" >"$CK_TMP/rb.out" 2>&1 &
		rp=$!
		"$PY" -c '
import os, signal, sys
d, old, pid = sys.argv[1], sys.argv[2], int(sys.argv[3])
for _ in range(2000000):
    try: t = open(os.path.join(d, max(n for n in os.listdir(d) if n.isdigit()))).read()
    except (OSError, ValueError): continue
    if "\ncatalog " in t and ("catalog " + old) not in t:
        os.kill(pid, signal.SIGSTOP); print("stopped"); break
' "$CK_BACKING/claims" "$old" "$rp" >"$CK_TMP/stopper" 2>&1 || true
		if grep -q stopped "$CK_TMP/stopper" && [ -e "$CK_CACHE/catalog.db.rebuilding" ] &&
			[ "$(ck_sql "SELECT value FROM meta WHERE key = 'catalog_id'")" = "$old" ]; then
			kill -9 "$rp"
			wait "$rp" 2>/dev/null || true
			stopped=1
			break
		fi
		kill -9 "$rp" 2>/dev/null || true
		kill -CONT "$rp" 2>/dev/null || true
		wait "$rp" 2>/dev/null || true
		rm -rf "$CK_CACHE" # ours: the case's cache, put back from the copy
		cp -a "$CK_TMP/cache.saved" "$CK_CACHE"
		rm -rf "$CK_BACKING/claims" # the claim as it was before the rebuild
		cp -a "$CK_TMP/claims.saved" "$CK_BACKING/claims"
	done
	[ -n "$stopped" ] || ck_fail "the rebuild was never stopped between its claim and its swap in 5 tries"
	local left
	left=$(ck_claim)
	ck_mount # the old catalog: nobody wrote BACKING since its last take
	for i in 1 17 30; do
		cmp -s "$CK_REF/run/step-$i/f3" "$CK_MNT/run/step-$i/f3" || ck_fail "step-$i/f3 differs"
	done
	ck_umount
	assert_contains "$left" "replaces $old " "the killed rebuild's claim"
	local rc=0 out
	out=$("$CKPTFS_ADMIN" rebuild --cache "$CK_CACHE" 2>&1) || rc=$?
	assert_eq 0 "$rc" "the rebuild run again ($out)"
	ck_mount
	cmp -s "$CK_REF/run/step-30/f6" "$CK_MNT/run/step-30/f6" || ck_fail "step-30/f6 differs after the rebuild"
	ck_umount
}

# _fenced_checks WHAT — the fenced daemon (CK_PID, its log CK_DLOG) refuses
# changes with EROFS and reads step-1 and the open step-2; then it unmounts
# with BACKING exactly as in $_BEFORE (the open step-2 is committed at the
# unmount, in the cache only), the claim not released, and the cache's
# catalog keeps step-2.
_fenced_checks() {
	local out rc
	out=$( (echo x >"$CK_MNT/run/new.bin") 2>&1) && ck_fail "a write succeeded on a daemon fenced by $1"
	assert_contains "$out" "Read-only file system"
	out=$(rm -rf "$CK_MNT/run/step-1" 2>&1) && ck_fail "rm succeeded on a daemon fenced by $1"
	assert_contains "$out" "Read-only file system"
	rc=0
	out=$("$CKPTFS_ADMIN" rm "$CK_MNT" run/step-1 2>&1) || rc=$?
	assert_ne 0 "$rc" "exit status of ckptfs-admin rm on a fenced daemon ($out)"
	assert_contains "$out" "lost BACKING's claim"
	cmp -s "$CK_REF/run/step-1/model.pt" "$CK_MNT/run/step-1/model.pt" || ck_fail "step-1 unreadable after the fence"
	cmp -s "$CK_REF/run/step-2/model.pt" "$CK_MNT/run/step-2/model.pt" || ck_fail "step-2 unreadable after the fence"
	local claim
	claim=$(ck_claim_state)
	ck_umount
	[ "$_BEFORE" == "$(ck_backing_snapshot "$CK_BACKING")" ] ||
		ck_fail "the fenced daemon changed BACKING: $(diff <(echo "$_BEFORE") <(ck_backing_snapshot "$CK_BACKING") | head -n 5 | tr '\n' '|')"
	assert_eq "$claim" "$(ck_claim_state)" "the fenced daemon made or removed an epoch, or wrote ckptfs.claim"
	assert_eq node-elsewhere "$(ck_claim_field host)" "the taker's claim after the fenced daemon's unmount"
	grep -q "lost BACKING's claim: the upload queue stays in the cache" "$CK_DLOG" ||
		ck_fail "the unmount did not say the queue stays: $(tail -n 3 "$CK_DLOG" | tr '\n' '|')"
	"$CKPTFS_ADMIN" list --cache "$CK_CACHE" | grep -q step-2 ||
		ck_fail "step-2, written before the fence, is not in the cache's catalog"
}

# _open_step2 — step-2 written, not committed (its generation stays open),
# its chunks uploaded: BACKING quiet, snapshot in _BEFORE.
_open_step2() {
	mkdir -p "$CK_MNT/run/step-2" "$CK_REF/run/step-2"
	ck_rand "$CK_REF/run/step-2/model.pt" $((1024 * 1024))
	cp "$CK_REF/run/step-2/model.pt" "$CK_MNT/run/step-2/model.pt"
	ck_backing_quiet
	_BEFORE=$(ck_backing_snapshot "$CK_BACKING")
}

# F4 (claim.h invariant 9): another catalog took the claim (here written by
# hand as another host's, renewed now) while this daemon runs. Before, it
# logged and went on: its unmount committed step-2 and put its manifest, its
# rm removed chunks. Now it is fenced at its next renewal.
test_a_daemon_whose_claim_was_taken_writes_nothing_more_to_backing() {
	ck_mount claim_timeout=4
	_save step-1 1
	ck_wait_durable
	_open_step2
	_foreign_claim 0
	ck_wait_log "$CK_DLOG" "this daemon no longer holds the claim (epoch " 30 ||
		ck_fail "no fence logged: $(tail -n 3 "$CK_DLOG" | tr '\n' '|')"
	assert_contains "$(grep 'no longer holds the claim' "$CK_DLOG")" " of claims/: another holder made " "the fence line"
	assert_eq 1 "$(grep -c 'no longer holds the claim' "$CK_DLOG")" "fence lines in the log"
	_fenced_checks "a taken claim"
}

# F4, by time (claim.h invariant 9): the daemon stopped (SIGSTOP, as a
# paused VM) for longer than claim_timeout while another catalog took
# BACKING over (here its claim written by hand). When it runs again it is
# past its deadline: it writes nothing until a renewal, which finds the
# claim another's: lost, EROFS, BACKING untouched.
test_a_daemon_stopped_past_claim_timeout_while_its_claim_was_taken_writes_nothing_more() {
	ck_mount claim_timeout=4
	_save step-1 1
	ck_wait_durable
	_open_step2
	kill -STOP "$CK_PID"
	sleep 5
	local mine
	mine=$(ck_claim_epochs | tail -n 1)
	_foreign_claim 0
	kill -CONT "$CK_PID"
	ck_wait_log "$CK_DLOG" "this daemon no longer holds the claim (epoch $((10#$mine)) of claims/: another holder made a larger epoch)" 30 ||
		ck_fail "no fence logged: $(tail -n 3 "$CK_DLOG" | tr '\n' '|')"
	_fenced_checks "a stop past claim_timeout"
}

# Invariant 9: stopped past claim_timeout and nobody took BACKING: the
# daemon waits (nothing put), then its renewal finds its own epoch still the
# largest, makes the next (claim.h 3) and it goes on — writes never failed,
# and what it wrote since reaches BACKING.
test_a_daemon_stopped_past_claim_timeout_takes_its_own_claim_anew_and_goes_on() {
	ck_mount claim_timeout=4
	_save step-1 1
	ck_wait_durable
	local instance e0 i=0
	instance=$(ck_claim_field instance)
	kill -STOP "$CK_PID"
	e0=$(ck_claim_epochs | tail -n 1)
	sleep 5
	kill -CONT "$CK_PID"
	while [ "$(ck_claim_epochs | tail -n 1)" == "$e0" ]; do
		i=$((i + 1))
		[ $i -le 300 ] || ck_fail "the daemon did not renew its claim in 30 s after SIGCONT: $(tail -n 3 "$CK_DLOG" | tr '\n' '|')"
		sleep 0.1
	done
	ck_wait_log "$CK_DLOG" "was not renewed for 4 s less a margin" 30 ||
		ck_fail "the wait past the deadline was not logged: $(tail -n 3 "$CK_DLOG" | tr '\n' '|')"
	grep -q "no longer holds the claim" "$CK_DLOG" && ck_fail "fenced although nobody took the claim"
	assert_eq "$instance" "$(ck_claim_field instance)" "the claim's instance after the take"
	assert_eq "$CK_CACHE" "$(ck_claim_field cache)" "the claim's cache after the take"
	_save step-2 1
	ck_wait_durable
	cmp -s "$CK_REF/run/step-2/model.pt" "$CK_MNT/run/step-2/model.pt" || ck_fail "step-2 differs"
	ck_umount
	assert_eq yes "$(ck_claim_field released)" "the claim released at the unmount"
	ck_mount
	cmp -s "$CK_REF/run/step-2/model.pt" "$CK_MNT/run/step-2/model.pt" || ck_fail "step-2 differs after a remount"
	ck_umount
}

test_malformed_catalog_refuses_the_mount_naming_rebuild_and_check_reports_it() {
	ck_mount
	local i
	for i in $(seq 1 300); do echo "$i" >"$CK_MNT/f$i"; done
	ck_umount
	# overwrite 40 bytes inside the first leaf page of dirents_by_parent
	local page pgsz
	pgsz=$(sqlite3 "$(ck_catalog)" 'PRAGMA page_size')
	page=$(sqlite3 "$(ck_catalog)" "SELECT pageno FROM dbstat WHERE name = 'dirents_by_parent' AND pagetype = 'leaf' LIMIT 1")
	[ -n "$page" ] || page=$(sqlite3 "$(ck_catalog)" "SELECT rootpage FROM sqlite_master WHERE name = 'dirents_by_parent'")
	printf '%040d' 0 | tr 0 '\377' |
		dd of="$(ck_catalog)" bs=1 seek=$(((page - 1) * pgsz + 200)) conv=notrunc status=none
	local ic
	ic=$(sqlite3 "$(ck_catalog)" 'PRAGMA integrity_check' 2>&1 || true)
	[ "$ic" != ok ] || ck_fail "the damage did not show in integrity_check"
	# check: reports SQLite's findings, exits 1
	local rc=0 out
	out=$("$CKPTFS_ADMIN" check --cache "$CK_CACHE" 2>&1) || rc=$?
	assert_eq 1 "$rc" "exit status of check on a damaged catalog ($out)"
	assert_contains "$out" "integrity_check"
	assert_not_contains "$out" "catalog ok"
	# mount: refused, naming the rebuild command
	rc=0
	out=$(timeout 30 "$CKPTFS_BIN" -f -o "$(ck_opts "cache=$CK_CACHE,log=$CK_TMP/bad.log")" "$CK_BACKING" "$CK_MNT" 2>&1) || rc=$?
	ck_is_mounted "$CK_MNT" && ck_fail "a damaged catalog was mounted"
	assert_ne 0 "$rc" "exit status of the refused mount"
	assert_contains "$out" "ckptfs-admin rebuild --cache $CK_CACHE $CK_BACKING"
	grep -q "quick_check" "$CK_TMP/bad.log" || ck_fail "the log does not say what SQLite found"
}

test_index_rows_missing_are_reported_by_check_and_refused_after_an_unclean_stop() {
	ck_mount
	local i
	for i in $(seq 1 20); do echo "$i" >"$CK_MNT/f$i"; done
	ck_umount
	# dirents_by_ino loses the entries of three rows (they move to new ids while
	# the index is declared partial, WHERE 0): quick_check sees nothing, the
	# namespace is unchanged, only integrity_check finds the missing rows
	local db
	db=$(ck_catalog)
	sqlite3 "$db" "PRAGMA writable_schema=ON; UPDATE sqlite_master SET sql = 'CREATE INDEX dirents_by_ino ON dirents(ino) WHERE 0' WHERE name = 'dirents_by_ino';"
	sqlite3 "$db" "CREATE TEMP TABLE x AS SELECT parent, name, ino FROM dirents WHERE name IN ('f1', 'f2', 'f3');
		DELETE FROM dirents WHERE name IN ('f1', 'f2', 'f3') AND parent = 1;
		INSERT INTO dirents(parent, name, ino) SELECT parent, name, ino FROM x;"
	sqlite3 "$db" "PRAGMA writable_schema=ON; UPDATE sqlite_master SET sql = 'CREATE INDEX dirents_by_ino ON dirents(ino)' WHERE name = 'dirents_by_ino';"
	assert_eq ok "$(sqlite3 "$db" 'PRAGMA quick_check')" "quick_check of the damaged catalog"
	assert_contains "$(sqlite3 "$db" 'PRAGMA integrity_check')" "missing from index dirents_by_ino"
	local rc=0 out
	out=$("$CKPTFS_ADMIN" check --cache "$CK_CACHE" 2>&1) || rc=$?
	assert_eq 1 "$rc" "exit status of check ($out)"
	assert_contains "$out" "integrity_check found: row"
	assert_contains "$out" "missing from index dirents_by_ino"
	# a clean catalog mounts after quick_check (FORMAT.md: the full check runs
	# after an unclean stop); left by kill -9, the same damage is refused
	ck_mount
	cmp -s <(echo 1) "$CK_MNT/f1" || ck_fail "f1 does not read back"
	ck_kill9
	[ -s "$db-wal" ] || { sqlite3 "$db" 'PRAGMA journal_mode' >/dev/null; }
	if [ -s "$db-wal" ]; then
		rc=0
		out=$(timeout 30 "$CKPTFS_BIN" -f -o "$(ck_opts "cache=$CK_CACHE,log=$CK_TMP/bad.log")" "$CK_BACKING" "$CK_MNT" 2>&1) || rc=$?
		ck_is_mounted "$CK_MNT" && ck_fail "a damaged catalog was mounted after an unclean stop"
		assert_ne 0 "$rc" "exit status of the refused mount"
		assert_contains "$out" "ckptfs-admin rebuild --cache $CK_CACHE $CK_BACKING"
		grep -q "integrity_check found" "$CK_TMP/bad.log" || ck_fail "the log does not say what integrity_check found"
	else
		ck_log "no WAL left by kill -9: the unclean-stop half is not exercised"
	fi
}

test_nfs_url_second_catalog_refused_then_stale_claim_taken_over() {
	command -v ganesha.nfsd >/dev/null || ck_skip "nfs-ganesha is not installed"
	local url tool=$(dirname "$CKPTFS_BIN")/backing-tool
	[ -x "$tool" ] || ck_skip "$tool is not built (make build/backing-tool)"
	url=$("$CK_REPO/tests/nfs/ganesha.sh" start "$CK_TMP/nfs" 2>"$CK_TMP/ganesha.err") ||
		ck_fail "ganesha did not start: $(tail -n 3 "$CK_TMP/ganesha.err" | tr '\n' '|')"
	ck_at_exit '"$CK_REPO/tests/nfs/ganesha.sh" stop "$CK_TMP/nfs" >/dev/null 2>&1'
	CK_BACKING=$url
	ck_mount
	_save step-1 2
	ck_wait_durable 120
	local out
	_start "$CK_TMP/cache2" "$CK_TMP/mnt2"
	out=$(_settle "$_SPID" "$CK_TMP/mnt2")
	[ "$out" != mounted ] || ck_fail "a second catalog mounted the claimed nfs:// BACKING"
	assert_contains "$(cat "$CK_TMP/cache2.stderr")" "is claimed by another catalog (host $(hostname), cache $CK_CACHE, pid $CK_PID"
	ck_kill9
	# another host's stale claim over nfs://: two racing fresh caches, one wins
	_foreign_claim 100 "$url"
	rm -rf "$CK_TMP/cache2"
	_start "$CK_TMP/cache2" "$CK_TMP/mnt2"
	local a=$_SPID
	_start "$CK_TMP/cache3" "$CK_TMP/mnt3"
	local b=$_SPID oa ob
	oa=$(_settle "$a" "$CK_TMP/mnt2")
	ob=$(_settle "$b" "$CK_TMP/mnt3")
	{ [ "$oa" == mounted ] && [ "$ob" != mounted ]; } || { [ "$oa" != mounted ] && [ "$ob" == mounted ]; } ||
		ck_fail "exactly one of two racing mounts should win over nfs:// (a: $oa, b: $ob)"
	local m=$CK_TMP/mnt2
	[ "$oa" == mounted ] || m=$CK_TMP/mnt3
	cmp -s "$CK_REF/run/step-1/model.pt" "$m/run/step-1/model.pt" || ck_fail "the winner does not read step-1"
	fusermount3 -u "$m"
	_ck_wait_daemon "$a" 60 || true
	_ck_wait_daemon "$b" 60 || true
	ck_claim "$url" >"$CK_TMP/claim.after"
	assert_eq yes "$(ck_claim_field released "$CK_TMP/claim.after")" "the claim is released over nfs://"
	assert_eq "$CK_TMP/cache${m#"$CK_TMP/mnt"}" "$(ck_claim_field cache "$CK_TMP/claim.after")" "the released claim names the winner"
	"$CK_REPO/tests/nfs/ganesha.sh" stop "$CK_TMP/nfs" >/dev/null
}

ck_main "$@"
