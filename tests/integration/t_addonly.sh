#!/bin/bash
# t_addonly — a file added to a committed save (fs/gen.h invariant 15, fs/proof.h
# invariant 7): a late rank's rng_state_1.pth after HF's trainer_state.json
# reopens checkpoint-N as version 2, which only adds a closed file to the
# complete version 1. It is committed (rule `added`) by the quiet tick,
# abandon or the unmount, never rolled back with the file dropped; a rewrite
# that changed a file of version 1 still waits for its marker and is rolled
# back without it. Bytes are compared with the reference the writers wrote.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/helpers/gen.sh"

GEN_OPTS=quiet=0.5

listed() { ls -a "$1" | grep -qxF -- "$2"; }
# late_rng REL: a torch.save-like rng state (a complete zip: proof.h's checks
# pass), written into the mount and the reference
late_rng() {
	"$PY" - "$CK_MNT/$1" "$CK_REF/$1" <<'PY'
import io, os, pickle, sys, zipfile
buf = io.BytesIO()
with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
    z.writestr("rng_state_1/data.pkl", pickle.dumps({"rng": "rank 1"}, protocol=2))
    z.writestr("rng_state_1/data/0", os.urandom(3000))
    z.writestr("rng_state_1/version", b"3\n")
for p in sys.argv[1:]:
    with open(p, "wb") as f:
        f.write(buf.getvalue())
PY
}
# hf_v1: out/checkpoint-100 saved by one rank (6 files) and committed by
# trainer_state.json
hf_v1() {
	mkdir "$CK_MNT/out"
	GT --ranks 1 hf out/checkpoint-100
	gen_expect "$CK_MNT/out/checkpoint-100" state=committed rule=hf-trainer-state version=1 files=6 --wait 5
}

# added_after_remount: after a clean unmount and mount, checkpoint-100 is
# version 2 (rule added) and every file reads back as written
added_after_remount() {
	ck_remount "$GEN_OPTS"
	gen_expect "$CK_MNT/out/checkpoint-100" state=committed rule=added version=2 files=7
	same out
	ck_umount
}

test_late_rng_file_is_committed_after_quiet_and_kept() {
	ck_mount "$GEN_OPTS"
	local g=$CK_MNT/out/checkpoint-100
	hf_v1
	late_rng out/checkpoint-100/rng_state_1.pth
	# version 2 is version 1 plus a closed file: committed once quiet
	gen_expect "$g" state=committed rule=added version=2 files=7 --wait 5
	listed "$CK_MNT/out" checkpoint-100 || ck_fail "checkpoint-100 is not listed once committed again"
	assert_eq checkpoint-100 "$(GT hf-last out)" "HF get_last_checkpoint"
	same out
	added_after_remount
}

test_late_rng_file_survives_an_unmount_before_quiet() {
	ck_mount "$GEN_OPTS"
	local g=$CK_MNT/out/checkpoint-100
	hf_v1
	ck_remount quiet=600
	late_rng out/checkpoint-100/rng_state_1.pth
	gen_expect "$g" state=open version=2
	# the unmount decides it: version 1 plus the closed file, committed
	added_after_remount
}

test_late_file_is_committed_by_abandon_not_rolled_back() {
	ck_mount "$GEN_OPTS"
	local g=$CK_MNT/out/checkpoint-100
	hf_v1
	ck_remount quiet=600,abandon=1
	# an eval script's result, its process gone: abandon decides
	echo '{"eval_loss": 1.25}' >"$CK_REF/out/checkpoint-100/eval_results.json"
	cp "$CK_REF/out/checkpoint-100/eval_results.json" "$g/eval_results.json"
	gen_expect "$g" state=committed rule=added version=2 files=7 --wait 10
	added_after_remount
}

test_rewrite_that_changed_a_file_still_waits_for_its_marker() {
	ck_mount "$GEN_OPTS"
	local g=$CK_MNT/out/checkpoint-100
	hf_v1
	cp -a "$CK_REF/out" "$CK_TMP/v1"
	# a resumed job saving the step again: an old file rewritten, a new one
	# added, no trainer_state.json yet
	GT --salt v2 put out/checkpoint-100/scheduler.pt
	late_rng out/checkpoint-100/rng_state_1.pth
	cmp -s "$CK_TMP/v1/checkpoint-100/scheduler.pt" "$g/scheduler.pt" && ck_fail "the test did not change scheduler.pt"
	gen_expect "$g" state=open version=2 --stable 1.5
	# no marker by the unmount: version 1 comes back whole
	ck_remount "$GEN_OPTS"
	gen_expect "$g" state=committed version=1 rule=unmount-restored
	local out
	out=$(diff -r "$CK_TMP/v1" "$CK_MNT/out" 2>&1) || ck_fail "after the unmount out/ is not version 1: $(echo "$out" | head -n 5 | tr '\n' '|')"
	ck_umount
}

ck_main "$@"
