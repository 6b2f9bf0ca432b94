#!/bin/bash
# t_addonly2 — a file added to a committed save from another node of a
# shared catalog (fs/gen.h invariant 15, docs/GENERATIONS.md "Files added to
# a committed save", "Several nodes"): node A saves checkpoint-100 and
# commits it by trainer_state.json; node B writes a late rng_state_1.pth.
# Version 2 is version 1 plus a closed file: committed (rule added) by B's
# quiet tick, or by B's unmount, never rolled back with the file dropped.
. "$(dirname "$0")/mn.sh"

# "state:version:rule" of generation $1 in the shared catalog
ad_gen() { mn_psql "SELECT state || ':' || version || ':' || rule FROM ns_generations WHERE name = '$1'"; }

# a torch.save-like zip (complete: proof.h's checks pass) to $1
ad_torch() {
	"$PY" - "$1" <<'PY'
import io, os, pickle, sys, zipfile
buf = io.BytesIO()
with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
    z.writestr("archive/data.pkl", pickle.dumps({"rng": os.urandom(8).hex()}, protocol=2))
    z.writestr("archive/data/0", os.urandom(3000))
    z.writestr("archive/version", b"3\n")
open(sys.argv[1], "wb").write(buf.getvalue())
PY
}

# A writes out/checkpoint-100 (a shard, rank 0's rng state, trainer_state.json),
# committed by hf-trainer-state; B is mounted with B_OPTS.
ad_v1() {
	mn_pg_start
	mn_mount A quiet=0.5
	mn_mount B "$1"
	mkdir -p "$MN_MNT_A/out/checkpoint-100"
	ck_rand "$CK_REF/model.bin" 300000
	ad_torch "$CK_REF/rng_state_0.pth"
	ad_torch "$CK_REF/rng_state_1.pth"
	cp "$CK_REF/model.bin" "$MN_MNT_A/out/checkpoint-100/model.bin"
	cp "$CK_REF/rng_state_0.pth" "$MN_MNT_A/out/checkpoint-100/rng_state_0.pth"
	echo '{"global_step": 100}' >"$CK_REF/trainer_state.json"
	cp "$CK_REF/trainer_state.json" "$MN_MNT_A/out/checkpoint-100/trainer_state.json"
	mn_poll "SELECT state || ':' || version FROM ns_generations WHERE name = 'checkpoint-100'" \
		1:1 10 "checkpoint-100 committed by A"
	mn_see B out/checkpoint-100/trainer_state.json 2
}

ad_same() { # every node reads every file of version 2
	local x f
	for x in "$@"; do
		local v=MN_MNT_$x
		for f in model.bin rng_state_0.pth rng_state_1.pth trainer_state.json; do
			assert_file_eq "$CK_REF/$f" "${!v}/out/checkpoint-100/$f"
		done
	done
}

test_late_file_from_another_node_is_committed_added() {
	ad_v1 quiet=0.5
	cp "$CK_REF/rng_state_1.pth" "$MN_MNT_B/out/checkpoint-100/rng_state_1.pth"
	mn_poll "SELECT state || ':' || version || ':' || rule FROM ns_generations WHERE name = 'checkpoint-100'" \
		1:2:added 10 "checkpoint-100 after B's late file"
	ad_same A B
	mn_umount A
	mn_umount B
	mn_mount A
	assert_eq 1:2:added "$(ad_gen checkpoint-100)" "checkpoint-100 after both unmounted"
	ad_same A
	mn_umount A
}
ck_timeout test_late_file_from_another_node_is_committed_added 120

test_late_file_from_another_node_survives_its_unmount_before_quiet() {
	ad_v1 quiet=600
	cp "$CK_REF/rng_state_1.pth" "$MN_MNT_B/out/checkpoint-100/rng_state_1.pth"
	assert_eq "0:2:hf-trainer-state" "$(ad_gen checkpoint-100)" "checkpoint-100 after B's late file"
	mn_umount B
	assert_eq 1:2:added "$(ad_gen checkpoint-100)" "checkpoint-100 after B's unmount"
	ad_same A
	mn_umount A
}
ck_timeout test_late_file_from_another_node_survives_its_unmount_before_quiet 120

ck_main "$@"
