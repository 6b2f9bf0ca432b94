#!/bin/bash
# t_dedup — 8 data-parallel ranks (processes) each torch.save the same
# replicated state (~12 MB: model + Adam, bit-identical in every rank) under
# their own file name into one step directory; the unique chunk bytes in the
# catalog (SUM(plain_len) FROM chunks) and the chunk objects on BACKING after
# upload must be about one replica: <= 1.05 x one replica + 64 KiB.
. "$(dirname "$0")/../integration/lib.sh"
. "$(dirname "$0")/common.sh"

_replicas_dedup() { # VIA
	ck_mount "keep=$TR_KEEP"
	"$PY" "$TR_HELPERS/replicas.py" save "$CK_MNT/job/step-100" "$CK_REF" --ranks 8 --via "$1" >"$CK_TMP/save.out" 2>&1 ||
		ck_fail "8-rank save failed: $(tail -n 5 "$CK_TMP/save.out" | tr '\n' '|')"
	setfattr -n user.ckptfs.commit -v 1 "$CK_MNT/job/step-100"
	local one bound uniq logical onb
	one=$(ck_size "$CK_REF/replica.pt")
	bound=$((one * 105 / 100 + 64 * KiB))
	logical=$(du -b -s "$CK_MNT/job/step-100" | cut -f1)
	uniq=$(ck_unique_bytes)
	tr_wait_uploads 90
	onb=$(find "$CK_BACKING/chunks" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
	ck_log "one replica $one B; 8 files $logical B; unique chunk bytes $uniq B ($(ck_chunk_count) chunks); chunk objects on BACKING $onb B; bound $bound B"
	"$PY" "$TR_HELPERS/replicas.py" check "$CK_MNT/job/step-100" "$CK_REF" --ranks 8 >/dev/null 2>&1 ||
		ck_fail "a rank's file does not load back equal to the replica"
	assert_le "$uniq" "$bound" "unique chunk bytes in the catalog vs one replica (x1.05 + 64 KiB)"
	assert_le "$onb" "$bound" "bytes of chunk objects on BACKING vs one replica (x1.05 + 64 KiB)"
	ck_umount
	tr_objcheck
}

# torch.save into an open file (what Lightning's fsspec path does): every
# rank's file is byte-identical.
test_replicas_saved_through_file_objects_are_stored_once() {
	_replicas_dedup fileobj
}
ck_timeout test_replicas_saved_through_file_objects_are_stored_once 180

# Regression (found by this suite): torch.save(obj, path) names every zip
# record after the file, so replicas under other names differ in every header;
# without zip-aware cuts (fs/lib/zipcut.c) no chunk of a few-MB tensor was shared.
test_per_rank_torch_save_by_path_replicas_are_stored_once() {
	_replicas_dedup path
}
ck_timeout test_per_rank_torch_save_by_path_replicas_are_stored_once 180

ck_main "$@"
