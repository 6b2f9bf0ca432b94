#!/bin/bash
# t_rebuild_held — a save whose manifest a rebuild cannot put back under its
# name (fs/rebuild.c invariant 7, meta/manifest.h M4) comes back HELD as
# NAME.rebuild-ID: hidden from its series directory, its files byte for byte
# by name, listed by `ckptfs-admin list --all` with the reason; its chunks
# are counted, so deleting the save it shares them with removes none of its
# objects from BACKING; `commit` shows it, `rm` removes it.
. "$(dirname "$0")/lib.sh"

# rh_save SERIES/NAME FILE — writes FILE of the reference tree into a new
# save and commits it.
rh_save() {
	mkdir -p "$CK_MNT/$1"
	cp "$CK_REF/$2" "$CK_MNT/$1/${2##*/}"
	setfattr -n user.ckptfs.commit -v 1 "$CK_MNT/$1"
}

# The object paths (relative to BACKING) of the chunks of a file in the mount.
rh_objects() {
	local ino
	ino=$(stat -c %i "$1")
	ck_sql "SELECT DISTINCT lower(hex(hash)) FROM extents WHERE ino = $ino" |
		while read -r h; do echo "chunks/${h:0:2}/${h:2:2}/$h"; done
}

# step-200 (id A) is removed and made again (id B, a copy of step-100's
# bytes); A's manifest and objects are put back on BACKING, as a rebuild
# finds them when A's removal had not reached BACKING (meta/upload.h U8's
# case is the same for the rebuild: a lower id at the path). The rebuild
# puts A at run1/step-200 and B, which conflicts, held.
test_a_save_rebuilt_in_conflict_is_held_whole_and_keeps_its_chunks() {
	ck_mount
	ck_rand "$CK_REF/a.pt" $((3 * MiB + 11))
	ck_rand "$CK_REF/b.pt" $((MiB + 5))
	rh_save run1/step-100 a.pt
	rh_save run1/step-200 b.pt
	ck_wait_durable
	local a b m o
	a=$(ck_sql "SELECT id FROM generations WHERE name = 'step-200' AND state = 1")
	m=$(cd "$CK_BACKING" && ls manifests/gen/ | grep "^$a\.")
	[ -n "$m" ] || ck_fail "no manifest of generation $a on BACKING"
	mkdir -p "$CK_TMP/saved"
	cp "$CK_BACKING/manifests/gen/$m" "$CK_TMP/saved/manifest"
	rh_objects "$CK_MNT/run1/step-200/b.pt" >"$CK_TMP/saved/objects"
	while read -r o; do
		mkdir -p "$CK_TMP/saved/$(dirname "$o")"
		cp "$CK_BACKING/$o" "$CK_TMP/saved/$o"
	done <"$CK_TMP/saved/objects"
	rm -rf "$CK_MNT/run1/step-200"
	ck_wait_durable
	assert_not_exists "$CK_BACKING/manifests/gen/$m"
	rh_save run1/step-200 a.pt # B: step-100's bytes, its chunks shared
	ck_wait_durable
	b=$(ck_sql "SELECT id FROM generations WHERE name = 'step-200' AND state = 1")
	ck_umount

	cp "$CK_TMP/saved/manifest" "$CK_BACKING/manifests/gen/$m"
	while read -r o; do
		mkdir -p "$CK_BACKING/$(dirname "$o")"
		cp "$CK_TMP/saved/$o" "$CK_BACKING/$o"
	done <"$CK_TMP/saved/objects"
	ck_admin_rc 1 rebuild --cache "$CK_CACHE" "$CK_BACKING"
	assert_contains "$(cat "$CK_TMP/out")" "1 conflicting manifests" "rebuild's report"
	assert_contains "$(cat "$CK_TMP/err")" "applied HELD as run1/step-200.rebuild-$b" "rebuild's log"
	ck_admin_rc 0 check --cache "$CK_CACHE"

	ck_mount
	local held=step-200.rebuild-$b
	assert_eq "step-100 step-200" "$(ls "$CK_MNT/run1" | tr '\n' ' ' | sed 's/ $//')" "run1 lists no held save"
	assert_file_eq "$CK_REF/b.pt" "$CK_MNT/run1/step-200/b.pt"
	assert_file_eq "$CK_REF/a.pt" "$CK_MNT/run1/$held/a.pt"
	local listed
	listed=$(ck_list_gen "$CK_MNT" "$held")
	assert_eq "held rebuild 200" "$(echo "$listed" | head -n 1)" "the held save in list --all"
	assert_contains "$(echo "$listed" | tail -n 1)" \
		"rebuild: manifests/gen/$b.1.ckm conflicts with the catalog at run1/step-200 (" "its reason"

	# the save sharing its chunks goes: its objects stay on BACKING
	rh_objects "$CK_MNT/run1/$held/a.pt" >"$CK_TMP/shared"
	[ -s "$CK_TMP/shared" ] || ck_fail "no chunk of $held/a.pt"
	ck_admin_rc 0 rm "$CK_MNT" run1/step-100
	ck_wait_durable
	while read -r o; do assert_exists "$CK_BACKING/$o"; done <"$CK_TMP/shared"
	ck_umount
	ck_admin_rc 0 verify --cache "$CK_CACHE"

	# a decision: commit shows it, rm removes it with its manifest
	ck_mount
	ck_admin_rc 0 commit "$CK_MNT" "run1/$held"
	assert_eq "step-200 $held" "$(ls "$CK_MNT/run1" | tr '\n' ' ' | sed 's/ $//')" "run1 after commit"
	assert_file_eq "$CK_REF/a.pt" "$CK_MNT/run1/$held/a.pt"
	ck_admin_rc 0 rm "$CK_MNT" "run1/$held"
	ck_wait_durable
	assert_eq "" "$(cd "$CK_BACKING" && ls manifests/gen/ | grep "^$b\.")" "its manifests after rm"
	while read -r o; do assert_not_exists "$CK_BACKING/$o"; done <"$CK_TMP/shared"
	ck_umount
}

ck_main "$@"
