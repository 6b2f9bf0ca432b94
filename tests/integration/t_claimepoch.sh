#!/bin/bash
# t_claimepoch — the claim as epochs (fs/lib/claim.h, docs/FORMAT.md "The
# claim"), seen from outside: `ckptfs-admin claim` names a running daemon's
# claim and then its release (and --json parses); `claim --break` fences a
# live holder at its next renewal (EROFS, reads on), keeps every other
# catalog out until the break's lease has passed, then lets one in with every
# durable generation, and deletes nothing; a BACKING an older ckptfs left
# (format 1: one ckptfs.claim, no claims/) is judged as before and, taken,
# moved into claims/…1 byte for byte with ckptfs.claim made the marker older
# daemons refuse (a directory: their reads fail); a live format-1 holder is
# refused, BACKING untouched; and a holder's renewals keep claims/ at most 3
# epochs (claim.h 10).
. "$(dirname "$0")/lib.sh"

# _refused CACHE MNT [opts] — a mount of CK_BACKING that must be refused:
# fails the case if it mounts; prints its stderr.
_refused() {
	local opts rc=0 out
	opts=$(ck_opts "cache=$1,log=$1.log")
	[ -n "${3:-}" ] && opts+=",$3"
	mkdir -p "$1" "$2"
	ck_register_mount "$2"
	out=$(timeout -k 5 60 "$CKPTFS_BIN" -f -o "$opts" "$CK_BACKING" "$2" 2>&1 </dev/null) || rc=$?
	if ck_is_mounted "$2"; then
		fusermount3 -u "$2"
		ck_fail "a mount of cache $1 was not refused"
	fi
	[ $rc != 0 ] && [ $rc != 124 ] || ck_fail "the mount of cache $1 exited $rc, expected a refusal: $out"
	printf '%s\n' "$out"
}

# _tree [DIR] — every file of BACKING (default CK_BACKING), the claim's too,
# with its SHA-256: for "nothing on BACKING changed".
_tree() {
	(cd "${1:-$CK_BACKING}" && find . -type f -print0 | sort -z | xargs -0 -r sha256sum)
}

# _json_claim — `ckptfs-admin --json claim CK_BACKING`, parsed: "STATE HOST
# CACHE PID EPOCH CATALOG".
_json_claim() {
	ck_admin_rc 0 --json claim "$CK_BACKING"
	"$PY" -c '
import json, sys
j = json.load(open(sys.argv[1]))
print(j["state"], j["host"], j["cache"], j["pid"], j["epoch"], j["catalog"])' "$CK_TMP/out" ||
		ck_fail "ckptfs-admin --json claim: not the JSON object expected: $(cat "$CK_TMP/out")"
}

test_admin_claim_names_a_running_daemons_claim_then_its_release() {
	ck_admin_has claim || ck_fail "ckptfs-admin has no claim command"
	ck_mount
	local id pid=$CK_PID top
	id=$(ck_sql "SELECT value FROM meta WHERE key = 'catalog_id'")
	ck_admin_rc 0 claim "$CK_BACKING"
	top=$(ck_claim_epochs | tail -n 1)
	assert_contains "$(cat "$CK_TMP/out")" "epoch $((10#$top)): held
catalog $id
host $(hostname)
cache $CK_CACHE
pid $pid
renewed " "ckptfs-admin claim of a running daemon"
	assert_eq "held $(hostname) $CK_CACHE $pid $((10#$top)) $id" "$(_json_claim)" "ckptfs-admin --json claim of a running daemon"
	ck_umount
	ck_admin_rc 0 claim "$CK_BACKING"
	top=$(ck_claim_epochs | tail -n 1)
	assert_contains "$(cat "$CK_TMP/out")" "epoch $((10#$top)): released
catalog $id
host $(hostname)
cache $CK_CACHE
pid $pid" "ckptfs-admin claim after the unmount"
	assert_eq "released $(hostname) $CK_CACHE $pid $((10#$top)) $id" "$(_json_claim)" "ckptfs-admin --json claim after the unmount"
	# a BACKING no ckptfs used: no claim (exit 0)
	mkdir -p "$CK_TMP/empty"
	ck_admin_rc 0 claim "$CK_TMP/empty"
	assert_eq "no claim" "$(cat "$CK_TMP/out")" "ckptfs-admin claim of an empty BACKING"
}

# The by-hand decision (claim.h 7-9): the holder, alive, is fenced at its
# next renewal (claim_timeout=8: every 2 s); another catalog is refused until
# the break's lease (the holder's claim_timeout) has passed from
# the break (by then the holder stopped writing), then mounts, rebuilt from
# BACKING with every durable generation; the break deleted nothing, and the
# holder's last epoch is still beside it.
ck_timeout test_claim_break_fences_the_holder_and_frees_backing_after_the_timeout 200
test_claim_break_fences_the_holder_and_frees_backing_after_the_timeout() {
	ck_admin_has claim || ck_fail "ckptfs-admin has no claim command"
	ck_mount claim_timeout=8
	ck_save_step 1 2
	ck_save_step 2 1
	ck_wait_durable
	ck_backing_quiet
	local before holder t0 broken out lease
	before=$(ck_backing_snapshot "$CK_BACKING")
	holder=$(ck_claim_field instance)
	t0=$(date +%s)
	ck_admin_rc 0 claim --break "$CK_BACKING"
	assert_contains "$(cat "$CK_TMP/out")" "BACKING $CK_BACKING: claim broken by hand (epoch " "claim --break"
	broken=$(sed -n 's/.*(epoch \([0-9]*\)).*/\1/p' "$CK_TMP/out")
	assert_eq "$broken" "$((10#$(ck_claim_epochs | tail -n 1)))" "the broken epoch is the largest"
	assert_eq broken-by-hand "$(ck_claim_field vacant)" "the claim after the break: $(ck_claim | tr '\n' '|')"
	lease=$(ck_claim_field lease)
	assert_le 8 "${lease:-0}" "the break's lease: the holder's claim_timeout at least ($(ck_claim | tr '\n' '|'))"
	ck_admin_rc 0 claim "$CK_BACKING"
	assert_contains "$(cat "$CK_TMP/out")" "epoch $broken: broken-by-hand" "ckptfs-admin claim after the break"
	# another catalog is refused while the timeout runs from the break
	out=$(_refused "$CK_TMP/cache2" "$CK_TMP/mnt2" claim_timeout=8)
	assert_contains "$out" "BACKING $CK_BACKING: its claim was broken by hand " "the refusal within the timeout"
	# the holder is fenced at its next renewal
	ck_wait_log "$CK_DLOG" "this daemon no longer holds the claim (epoch " 6 ||
		ck_fail "the holder was not fenced within 6 s of the break: $(tail -n 3 "$CK_DLOG" | tr '\n' '|')"
	assert_contains "$(grep 'no longer holds the claim' "$CK_DLOG")" " of claims/: another holder made a larger epoch)" "the fence line"
	out=$( (echo x >"$CK_MNT/run/new.bin") 2>&1) && ck_fail "a write succeeded on the fenced holder"
	assert_contains "$out" "Read-only file system" "a write on the fenced holder"
	out=$(rm -rf "$CK_MNT/run/step-1" 2>&1) && ck_fail "rm succeeded on the fenced holder"
	assert_contains "$out" "Read-only file system" "rm on the fenced holder"
	assert_file_eq "$CK_REF/run/step-1/model.pt" "$CK_MNT/run/step-1/model.pt"
	assert_file_eq "$CK_REF/run/step-2/model.pt" "$CK_MNT/run/step-2/model.pt"
	# nothing deleted or changed by the break; the holder's last epoch stays
	assert_eq "$before" "$(ck_backing_snapshot "$CK_BACKING")" "BACKING's files after the break"
	grep -qx "instance $holder" "$CK_BACKING/claims/$(printf '%020d' $((broken - 1)))" ||
		ck_fail "the holder's epoch $((broken - 1)) is not beside the break: $(ck_claim_epochs | tr '\n' ' ')"
	# the break's lease passed: another cache mounts, rebuilt from BACKING
	while [ "$(date +%s)" -le $((t0 + lease + 1)) ]; do sleep 0.2; done
	local a_pid=$CK_PID a_mnt=$CK_MNT a_log=$CK_DLOG
	mkdir -p "$CK_TMP/mnt3"
	CK_CACHE=$CK_TMP/cache3 CK_MNT=$CK_TMP/mnt3 ck_mount claim_timeout=8
	assert_file_eq "$CK_REF/run/step-1/model.pt" "$CK_TMP/mnt3/run/step-1/model.pt"
	assert_file_eq "$CK_REF/run/step-2/model.pt" "$CK_TMP/mnt3/run/step-2/model.pt"
	assert_eq "$CK_TMP/cache3" "$(ck_claim_field cache)" "the claim after the take"
	CK_MNT=$CK_TMP/mnt3 ck_umount
	# the fenced holder unmounts writing nothing; its cache is behind now
	CK_PID=$a_pid CK_MNT=$a_mnt CK_DLOG=$a_log
	local claim
	claim=$(ck_claim_state)
	ck_umount
	assert_eq "$claim" "$(ck_claim_state)" "the claim after the fenced holder's unmount"
	out=$(_refused "$CK_CACHE" "$CK_TMP/mnt4" claim_timeout=8)
	assert_contains "$out" "was written by another catalog (host $(hostname), cache $CK_TMP/cache3, released" "the broken holder's cache afterwards"
}

# A format-1 claim record (as an older ckptfs wrote ckptfs.claim) of another
# catalog on another host, renewed AGE seconds ago; LINEs after.
_format1_claim() { # AGE [LINE...]
	local age=$1
	shift
	ck_claim_record 0123456789abcdef0123456789abcdef node-elsewhere /var/cache/ckptfs/abc 1234 \
		$(($(date +%s) - age)) "take 7" "$@"
}

# CK_BACKING made as an older ckptfs left it after cache 1 (CK_CACHE) saved
# step-1: no claims/, ckptfs.claim the format-1 claim on stdin.
_as_format1() {
	rm -rf "$CK_BACKING/claims" "$CK_BACKING/ckptfs.claim"
	cat >"$CK_BACKING/ckptfs.claim"
}

# Upgrade (claim.h 15): the format-1 claim is judged as format 1 judged it —
# another catalog's released claim keeps a catalog that held BACKING before
# out (BEHIND), BACKING untouched — and, taken by a fresh cache, moved into
# claims/…1 byte for byte, ckptfs.claim made the marker (a directory with a
# README), no aside left.
test_a_format1_released_claim_is_judged_as_before_and_moved_into_epoch_1() {
	ck_mount
	ck_save_step 1 1
	ck_wait_durable
	ck_umount
	_format1_claim 30 "released yes" >"$CK_TMP/f1.claim"
	_as_format1 <"$CK_TMP/f1.claim"
	ck_admin_rc 0 claim "$CK_BACKING"
	assert_eq "format 1 (ckptfs.claim, an older ckptfs's): moved to epochs by the next mount" "$(head -n 1 "$CK_TMP/out")" "ckptfs-admin claim of a format-1 BACKING"
	grep -qx "host node-elsewhere" "$CK_TMP/out" || ck_fail "ckptfs-admin claim of a format-1 BACKING does not name its holder: $(tr '\n' '|' <"$CK_TMP/out")"
	local tree out
	tree=$(_tree)
	out=$(_refused "$CK_CACHE" "$CK_MNT")
	assert_contains "$out" "BACKING $CK_BACKING was written by another catalog (host node-elsewhere, cache /var/cache/ckptfs/abc, released " "cache 1's refusal"
	assert_eq "$tree" "$(_tree)" "BACKING after cache 1's refused mount"
	# a fresh cache takes it; epoch 1 is kept by a hard link as soon as it is
	# made (the mount's first renewal removes it: claim.h 10)
	ck_bg "$PY" -c '
import os, sys, time
src, dst = sys.argv[1], sys.argv[2]
open(sys.argv[3], "w").close()
end = time.time() + 60
while time.time() < end:
    try:
        os.link(src, dst); sys.exit(0)
    except FileNotFoundError:
        pass
sys.exit(1)' "$CK_BACKING/claims/$(printf '%020d' 1)" "$CK_TMP/epoch1" "$CK_TMP/keeper.up"
	local keeper=$CK_BG_PID
	ck_wait_file "$CK_TMP/keeper.up" 30
	CK_CACHE=$CK_TMP/cache2 ck_mount
	ck_wait_file "$CK_TMP/epoch1" 10 # claims/…1 made (and linked)
	ck_bg_wait "$keeper" 10 || ck_fail "the keeper of claims/…1 failed"
	cmp -s "$CK_TMP/f1.claim" "$CK_TMP/epoch1" || ck_fail "claims/…1 is not the format-1 claim's bytes: $(tr '\n' '|' <"$CK_TMP/epoch1")"
	assert_file_eq "$CK_REF/run/step-1/model.pt" "$CK_MNT/run/step-1/model.pt"
	[ -d "$CK_BACKING/ckptfs.claim" ] && [ -s "$CK_BACKING/ckptfs.claim/README" ] ||
		ck_fail "ckptfs.claim after the upgrade is not the marker (a directory with a README): $(ls -l "$CK_BACKING" | grep claim | tr '\n' '|')"
	assert_eq "" "$(ls "$CK_BACKING/tmp" 2>/dev/null | grep '^claim\.')" "format-1 asides left in tmp/"
	assert_eq "$CK_TMP/cache2" "$(ck_claim_field cache)" "the claim after the upgrade"
	grep -q "its claim moved to format 2" "$CK_DLOG" || ck_fail "the upgrade was not logged: $(grep -i claim "$CK_DLOG" | tr '\n' '|')"
	ck_umount
}

# A format-1 holder that renewed just now (an older daemon of another host
# running): refused, naming it, and nothing on BACKING changes.
test_a_live_format1_claim_of_another_host_is_refused_and_backing_is_untouched() {
	ck_mount
	ck_save_step 1 1
	ck_wait_durable
	ck_umount
	_format1_claim 0 | _as_format1
	local tree out
	tree=$(_tree)
	out=$(_refused "$CK_TMP/cache2" "$CK_TMP/mnt2")
	assert_contains "$out" "BACKING $CK_BACKING is claimed by another catalog (host node-elsewhere, cache /var/cache/ckptfs/abc, pid 1234, renewed " "the refusal"
	assert_eq "$tree" "$(_tree)" "BACKING after the refused mount"
	assert_not_exists "$CK_BACKING/claims"
}

# claim.h 10: a holder removes the epochs below its own less one after each
# renewal, so claims/ holds at most 3 (a renewal's new one before its trim).
test_the_claims_directory_stays_small_while_a_daemon_renews() {
	ck_mount claim_timeout=4
	local first top n max=0 i=0
	first=$(ck_claim_epochs | tail -n 1)
	[ -n "$first" ] || ck_fail "no epoch in claims/ after the mount: $(ls "$CK_BACKING")"
	while :; do
		n=$(ck_claim_epochs | wc -l)
		[ "$n" -le "$max" ] || max=$n
		top=$(ck_claim_epochs | tail -n 1)
		[ $((10#$top)) -lt $((10#$first + 4)) ] || break
		i=$((i + 1))
		[ $i -le 300 ] || ck_fail "4 renewals not made in 15 s at claim_timeout=4: epochs $(ck_claim_epochs | tr '\n' ' ')"
		sleep 0.05
	done
	assert_le "$max" 3 "epochs in claims/ while the daemon renewed"
	ck_umount
	assert_le "$(ck_claim_epochs | wc -l)" 3 "epochs in claims/ after the release"
	assert_eq yes "$(ck_claim_field released)" "the claim after the unmount"
}

ck_main "$@"
