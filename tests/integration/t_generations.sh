#!/bin/bash
# t_generations — checkpoint generations (fs/gen.h, meta/generation.h): every
# commit rule driven by a scripted replica of the trainer that relies on it
# (helpers/gen_trainers.py follows /work/shared/TRAINERS.md call by call),
# OPEN generations hidden from listings but reachable by name, rewrites of a
# committed generation (new version, old one kept until the commit, restored
# after a crash), trainer deletes (also racing a save), clean unmount, SIGTERM,
# kill -9 and abandoned saves. State is read from the user.ckptfs.generation
# xattr and from the catalog's generations table; bytes are always compared
# with a reference copy written by the same helper.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/helpers/gen.sh"

# quiet commits after 0.5 s keep the cases fast
GEN_OPTS=quiet=0.5

gen_line() { "$PY" "$CK_HELPERS/gen_trainers.py" gen "$1"; }
# PATH exists and is in no generation
gen_none() {
	local out
	out=$("$PY" "$CK_HELPERS/gen_trainers.py" noattr "$1" 2>&1) || ck_fail "$out"
}
# The newest catalog row of a generation name: "STATE RULE VERSION" (STATE 0
# open, 1 committed, 2 aborted, 3 deleted), or nothing.
cat_gen() {
	ck_sql "SELECT state || ' ' || coalesce(nullif(rule, ''), '-') || ' ' || version FROM generations WHERE name = '$1' ORDER BY id DESC LIMIT 1"
}
# assert_cat_gen NAME STATE [RULE]
assert_cat_gen() {
	local got
	got=$(cat_gen "$1")
	[ -n "$got" ] || ck_fail "no catalog row for generation $1"
	assert_eq "$2" "${got%% *}" "catalog state of generation $1 (row: $got)"
	if [ -n "${3:-}" ]; then
		local rest=${got#* }
		assert_eq "$3" "${rest%% *}" "catalog rule of generation $1 (row: $got)"
	fi
}
listed() { ls -a "$1" | grep -qxF -- "$2"; }
assert_listed() { listed "$1" "$2" || ck_fail "$2 is not listed in $1: $(ls -a "$1" | tr '\n' ' ')"; }
assert_not_listed() { ! listed "$1" "$2" || ck_fail "$2 (an OPEN generation) is listed in $1"; }
tree_bytes() { find "$1" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }'; }
tree_files() { find "$1" -type f | wc -l; }

# ---------------------------------------------------------------- DCP

test_dcp_metadata_rename_commits_a_torchtitan_step() {
	ck_mount "$GEN_OPTS"
	mkdir "$CK_MNT/ckpt"
	local g=$CK_MNT/ckpt/step-100
	# Two ranks mkdir(exist_ok) at once and write their shards, fsync, close.
	GT dcp ckpt/step-100 --phase files
	# fsync and close prove nothing: still OPEN after more than the quiet period
	gen_expect "$g" name=step-100 step=100 state=open version=1 --stable 1.2
	gen_expect "$g/__1_0.distcp" name=step-100 state=open
	assert_not_listed "$CK_MNT/ckpt" step-100
	local names
	names=$(ls -A "$g" | tr '\n' ' ')
	assert_eq "__0_0.distcp __1_0.distcp " "$names" "ls of the OPEN generation itself"
	assert_eq none "$(GT titan-resume ckpt)" "TorchTitan resume step while step-100 has no .metadata"
	# rank 0: .metadata.tmp, fsync, rename -> committed at once
	GT dcp ckpt/step-100 --phase final
	gen_expect "$g" name=step-100 state=committed rule=dcp-metadata version=1 files=3 \
		bytes="$(tree_bytes "$CK_REF/ckpt/step-100")" --wait 3
	assert_listed "$CK_MNT/ckpt" step-100
	assert_eq 100 "$(GT titan-resume ckpt)" "TorchTitan resume step"
	same ckpt
	# the next save: step-100 stays as it was
	GT dcp ckpt/step-200
	gen_expect "$CK_MNT/ckpt/step-200" state=committed rule=dcp-metadata version=1 --wait 3
	gen_expect "$g" state=committed rule=dcp-metadata version=1
	assert_eq 200 "$(GT titan-resume ckpt)" "TorchTitan resume step"
	assert_cat_gen step-100 1 dcp-metadata
	ck_remount "$GEN_OPTS"
	gen_expect "$g" state=committed rule=dcp-metadata version=1
	gen_expect "$CK_MNT/ckpt/step-200" state=committed rule=dcp-metadata version=1
	same ckpt
	ck_umount
}

test_dcp_rank_metadata_commits_after_the_quiet_period() {
	ck_mount "$GEN_OPTS"
	mkdir "$CK_MNT/ckpt"
	local g=$CK_MNT/ckpt/step-10
	GT dcp-rank-meta ckpt/step-10 --phase files
	gen_expect "$g" state=open --stable 1.0
	# use_collectives=False: each rank renames __{rank}.metadata.tmp -> __{rank}.metadata
	GT dcp-rank-meta ckpt/step-10 --phase final
	gen_expect "$g" state=committed rule=dcp-rank-metadata version=1 files=4 --wait 5
	assert_listed "$CK_MNT/ckpt" step-10
	same ckpt
	ck_umount
}

test_dcp_overwrite_in_place_commits_a_new_version() {
	ck_mount "$GEN_OPTS"
	mkdir "$CK_MNT/ckpt"
	local g=$CK_MNT/ckpt/step-100
	GT dcp ckpt/step-100
	gen_expect "$g" state=committed version=1 --wait 3
	cp -a "$CK_REF/ckpt/step-100" "$CK_TMP/v1"
	# the same step saved again: shards opened 'wb' over the old ones
	GT --salt s1 dcp ckpt/step-100 --phase files
	gen_expect "$g" state=open version=2 --stable 1.0
	# the previous version's .metadata is still there until rank 0 replaces it
	GT --salt s1 dcp ckpt/step-100 --phase final
	gen_expect "$g" state=committed rule=dcp-metadata version=2 files=3 --wait 3
	same ckpt
	cmp -s "$CK_TMP/v1/__0_0.distcp" "$CK_MNT/ckpt/step-100/__0_0.distcp" && ck_fail "version 2 still shows version 1's shard"
	assert_eq 0 "$(ck_sql "SELECT backup_root FROM generations WHERE name = 'step-100' ORDER BY id DESC LIMIT 1")" "backup_root once version 2 committed"
	ck_remount "$GEN_OPTS"
	gen_expect "$g" state=committed version=2
	same ckpt
	ck_umount
}

# ---------------------------------------------------------------- HF Trainer

test_hf_trainer_state_commits_after_quiet_and_resume_sees_only_committed() {
	ck_mount "$GEN_OPTS"
	mkdir "$CK_MNT/out"
	local t0 a=$CK_MNT/out/checkpoint-500 b=$CK_MNT/out/checkpoint-1000
	t0=$(date +%s%N)
	GT hf out/checkpoint-500
	# 7 files: config, model (pre-sized), optimizer, scheduler, rng 0,
	# trainer_state.json, then rank 1's rng file after it
	gen_expect "$a" name=checkpoint-500 step=500 state=committed rule=hf-trainer-state version=1 files=7 \
		bytes="$(tree_bytes "$CK_REF/out/checkpoint-500")" --wait 5
	assert_eq checkpoint-500 "$(GT hf-last out)" "HF get_last_checkpoint"
	GT hf out/checkpoint-1000 --phase files
	gen_expect "$b" state=open --stable 1.0
	assert_not_listed "$CK_MNT/out" checkpoint-1000
	assert_eq checkpoint-500 "$(GT hf-last out)" "HF get_last_checkpoint while checkpoint-1000 is being written"
	GT hf out/checkpoint-1000 --phase final
	gen_expect "$b" state=committed rule=hf-trainer-state version=1 files=7 --wait 5
	assert_eq checkpoint-1000 "$(GT hf-last out)" "HF get_last_checkpoint"
	same out
	# rotation sorts checkpoint-* by directory mtime: sane and in save order
	local sorted now m1 m2
	now=$(date +%s%N)
	sorted=$(GT hf-sorted out)
	assert_eq "checkpoint-500 checkpoint-1000" "$(echo "$sorted" | awk '{ print $1 }' | tr '\n' ' ' | sed 's/ $//')" "checkpoint-* sorted by mtime"
	m1=$(echo "$sorted" | awk 'NR == 1 { print $2 }')
	m2=$(echo "$sorted" | awk 'NR == 2 { print $2 }')
	assert_le "$t0" "$m1" "mtime of checkpoint-500 vs the start of the case"
	assert_lt "$m1" "$m2" "mtimes of checkpoint-500 and checkpoint-1000"
	assert_le "$m2" "$now" "mtime of checkpoint-1000 vs now"
	ck_remount "$GEN_OPTS"
	assert_eq "$m1 $m2" "$(fsop mtime_ns "$a") $(fsop mtime_ns "$b")" "directory mtimes after remount"
	assert_eq checkpoint-1000 "$(GT hf-last out)" "HF get_last_checkpoint after remount"
	same out
	ck_umount
}

# ---------------------------------------------------------------- DeepSpeed, Megatron

test_deepspeed_latest_rewritten_in_place_commits_by_tracker() {
	ck_mount "$GEN_OPTS"
	mkdir "$CK_MNT/ds"
	local g=$CK_MNT/ds/global_step100
	GT deepspeed ds global_step100 --phase files
	gen_expect "$g" name=global_step100 step=100 state=open --stable 1.0
	gen_none "$CK_MNT/ds/zero_to_fp32.py"
	GT deepspeed ds global_step100 --phase final
	gen_expect "$g" state=committed rule=tracker version=1 files=3 --wait 3
	gen_none "$CK_MNT/ds/latest"
	# the next save rewrites `latest` in place (open 'w') again
	GT deepspeed ds global_step200
	gen_expect "$CK_MNT/ds/global_step200" state=committed rule=tracker version=1 files=3 --wait 3
	gen_expect "$g" state=committed rule=tracker version=1
	assert_eq global_step200 "$(cat "$CK_MNT/ds/latest")" "content of latest"
	same ds
	ck_umount
}

test_megatron_tracker_file_and_torch_dist_metadata_json() {
	ck_mount "$GEN_OPTS"
	mkdir "$CK_MNT/mg" "$CK_MNT/mgd"
	local g=$CK_MNT/mg/iter_0000100
	GT megatron mg 100 --phase files
	gen_expect "$g" name=iter_0000100 step=100 state=open --stable 1.0
	gen_expect "$g/mp_rank_00/model_optim_rng.pt" name=iter_0000100 state=open
	GT megatron mg 100 --phase final
	gen_expect "$g" state=committed rule=tracker version=1 files=1 --wait 3
	gen_none "$CK_MNT/mg/latest_checkpointed_iteration.txt"
	# Megatron's ensure_directory_exists (makedirs exist_ok) on a committed
	# checkpoint creates nothing: it must not reopen it
	"$PY" -c 'import os, sys; os.makedirs(sys.argv[1], exist_ok=True)' "$g/mp_rank_00"
	gen_expect "$g" state=committed version=1 --stable 0.3
	# torch_dist: DCP shard (fsync) + common.pt, then metadata.json last
	local d=$CK_MNT/mgd/iter_0000200
	GT megatron-dist mgd 200 --phase files
	gen_expect "$d" name=iter_0000200 step=200 state=open --stable 1.0
	GT megatron-dist mgd 200 --phase final
	gen_expect "$d" state=committed rule=metadata-json version=1 files=3 --wait 3
	same mg
	same mgd
	ck_remount "$GEN_OPTS"
	gen_expect "$g" state=committed rule=tracker version=1
	gen_expect "$d" state=committed rule=metadata-json version=1
	same mg
	same mgd
	ck_umount
}

# ---------------------------------------------------------------- Lightning

test_lightning_single_file_commits_by_content_once_closed_complete() {
	ck_mount "$GEN_OPTS"
	mkdir "$CK_MNT/lt"
	local a="$CK_MNT/lt/epoch=0-step=10.ckpt" b="$CK_MNT/lt/epoch=0-step=20.ckpt" c="$CK_MNT/lt/epoch=0-step=20-v1.ckpt"
	# torch.save into $TMPDIR, shutil.move across devices (copy + unlink): a
	# complete torch.save zip commits by its content after the quiet period
	# (0.5 s), listed within quiet + 1 s of its close
	GT lightning-file lt epoch=0-step=10.ckpt
	gen_expect "$a" name=epoch=0-step=10.ckpt step=10 state=committed rule=content files=1 --wait 1.5
	assert_listed "$CK_MNT/lt" "epoch=0-step=10.ckpt"
	GT lightning-link lt last.ckpt epoch=0-step=10.ckpt
	GT lightning-file lt epoch=0-step=20.ckpt
	gen_expect "$a" state=committed rule=content version=1
	gen_expect "$b" step=20 state=committed rule=content --wait 1.5
	assert_listed "$CK_MNT/lt" "epoch=0-step=20.ckpt"
	# save_last="link": os.remove + relative os.symlink, an ordinary entry
	GT lightning-link lt last.ckpt epoch=0-step=20.ckpt
	assert_eq "epoch=0-step=20.ckpt" "$(readlink "$CK_MNT/lt/last.ckpt")" "last.ckpt link"
	assert_eq 0 "$(ck_sql "SELECT count(*) FROM generations WHERE name = 'last.ckpt'")" "generations named last.ckpt"
	cmp "$CK_REF/lt/epoch=0-step=20.ckpt" "$CK_MNT/lt/last.ckpt" || ck_fail "reading through last.ckpt"
	# -vN on a name clash
	GT lightning-file lt epoch=0-step=20-v1.ckpt
	gen_expect "$b" state=committed rule=content
	gen_expect "$c" name=epoch=0-step=20-v1.ckpt step=20 state=committed rule=content --wait 1.5
	# save_top_k: the older file removed by the trainer
	rm "$a"
	rm "$CK_REF/lt/epoch=0-step=10.ckpt"
	assert_cat_gen "epoch=0-step=10.ckpt" 3
	cmp "$CK_REF/lt/epoch=0-step=20.ckpt" "$b" || ck_fail "epoch=0-step=20.ckpt differs"
	cmp "$CK_REF/lt/epoch=0-step=20-v1.ckpt" "$c" || ck_fail "epoch=0-step=20-v1.ckpt differs"
	ck_remount "$GEN_OPTS"
	gen_expect "$c" state=committed rule=content version=1
	gen_expect "$b" state=committed rule=content version=1
	assert_not_exists "$a"
	same lt
	ck_umount
}

test_lightning_fsdp_dir_commits_on_meta_pt_not_on_metadata() {
	ck_mount "$GEN_OPTS"
	mkdir "$CK_MNT/lf"
	local g="$CK_MNT/lf/epoch=0-step=30.ckpt"
	GT lightning-fsdp "lf/epoch=0-step=30.ckpt" --phase files
	[ -f "$g/.metadata" ] || ck_fail ".metadata missing in $g"
	# .metadata renamed into a Lightning X.ckpt/ dir does not commit it
	gen_expect "$g" name=epoch=0-step=30.ckpt step=30 state=open --stable 1.0
	GT lightning-fsdp "lf/epoch=0-step=30.ckpt" --phase final
	gen_expect "$g" state=committed rule=lightning-meta version=1 files=4 --wait 3
	same lf
	ck_umount
}

# ---------------------------------------------------------------- rename, explicit, marker

test_rename_of_a_temp_dir_or_file_commits() {
	ck_mount "$GEN_OPTS"
	mkdir -p "$CK_MNT/rn/step-300.tmp" "$CK_REF/rn/step-300.tmp"
	GT put rn/step-300.tmp/model.pt
	GT put rn/step-300.tmp/optim.pt
	gen_none "$CK_MNT/rn/step-300.tmp"
	gen_none "$CK_MNT/rn/step-300.tmp/model.pt"
	mv "$CK_MNT/rn/step-300.tmp" "$CK_MNT/rn/step-300"
	mv "$CK_REF/rn/step-300.tmp" "$CK_REF/rn/step-300"
	gen_expect "$CK_MNT/rn/step-300" name=step-300 step=300 state=committed rule=rename version=1 files=2 --wait 3
	gen_expect "$CK_MNT/rn/step-300/model.pt" name=step-300 state=committed
	# a single file: step-400.pt.tmp is no generation, step-400.pt is
	GT put rn/step-400.pt.tmp
	gen_none "$CK_MNT/rn/step-400.pt.tmp"
	mv "$CK_MNT/rn/step-400.pt.tmp" "$CK_MNT/rn/step-400.pt"
	mv "$CK_REF/rn/step-400.pt.tmp" "$CK_REF/rn/step-400.pt"
	gen_expect "$CK_MNT/rn/step-400.pt" name=step-400.pt step=400 state=committed rule=rename version=1 files=1 --wait 3
	assert_listed "$CK_MNT/rn" step-400.pt
	same rn
	# saved again to the temp name and os.replace()d over the committed file
	GT --salt s2 put rn/step-400.pt.tmp
	mv "$CK_MNT/rn/step-400.pt.tmp" "$CK_MNT/rn/step-400.pt"
	mv "$CK_REF/rn/step-400.pt.tmp" "$CK_REF/rn/step-400.pt"
	gen_expect "$CK_MNT/rn/step-400.pt" name=step-400.pt state=committed rule=rename version=1 --wait 3
	assert_eq 2 "$(ck_sql "SELECT count(*) FROM generations WHERE name = 'step-400.pt'")" "generations named step-400.pt (the replaced one and the new one)"
	assert_eq "3 replaced" "$(ck_sql "SELECT state || ' ' || rule FROM generations WHERE name = 'step-400.pt' ORDER BY id LIMIT 1")" "the replaced step-400.pt"
	same rn
	ck_remount "$GEN_OPTS"
	gen_expect "$CK_MNT/rn/step-300" state=committed rule=rename
	gen_expect "$CK_MNT/rn/step-400.pt" state=committed rule=rename
	same rn
	ck_umount
}

test_explicit_commit_xattr_and_marker_file() {
	ck_mount "$GEN_OPTS"
	mkdir -p "$CK_MNT/ex1/step-600" "$CK_MNT/ex2/step-700" "$CK_MNT/ex3/step-800"
	GT put ex1/step-600/model.pt
	gen_expect "$CK_MNT/ex1/step-600" state=open --stable 1.0
	setfattr -n user.ckptfs.commit -v 1 "$CK_MNT/ex1/step-600"
	gen_expect "$CK_MNT/ex1/step-600" state=committed rule=explicit version=1 files=1 --wait 3
	# committing a committed one again: no error, nothing changes
	setfattr -n user.ckptfs.commit -v 1 "$CK_MNT/ex1/step-600"
	gen_expect "$CK_MNT/ex1/step-600" state=committed rule=explicit version=1
	# outside any generation: refused
	assert_fails setfattr -n user.ckptfs.commit -v 1 "$CK_MNT/ex1"
	# a marker with content
	GT put ex2/step-700/model.pt
	printf 'done\n' >"$CK_MNT/ex2/step-700/.ckptfs-commit"
	gen_expect "$CK_MNT/ex2/step-700" state=committed rule=marker version=1 --wait 3
	# an empty marker created with touch (no write at all)
	GT put ex3/step-800/model.pt
	gen_expect "$CK_MNT/ex3/step-800" state=open
	touch "$CK_MNT/ex3/step-800/.ckptfs-commit"
	gen_expect "$CK_MNT/ex3/step-800" state=committed rule=marker version=1 --wait 3
	# an empty file made by mknod(2) (no handle, so no release clears its
	# create's being-written mark, generation.h G7): closed as made, its
	# save commits by its marker (before the fix, G9 refused every rule)
	mkdir -p "$CK_MNT/ex4/step-900"
	GT put ex4/step-900/model.pt
	/usr/bin/python3 -c 'import os, stat, sys; os.mknod(sys.argv[1], 0o644 | stat.S_IFREG)' \
		"$CK_MNT/ex4/step-900/empty.txt" || ck_fail "mknod of a regular file failed"
	printf 'done\n' >"$CK_MNT/ex4/step-900/.ckptfs-commit"
	gen_expect "$CK_MNT/ex4/step-900" state=committed rule=marker version=1 --wait 3
	ck_umount
}

# ---------------------------------------------------------------- names and series

test_nested_series_and_default_generation_names() {
	ck_mount "$GEN_OPTS"
	mkdir -p "$CK_MNT/run-42" "$CK_MNT/a/b/c"
	GT dcp run-42/step-100
	gen_expect "$CK_MNT/run-42/step-100" name=step-100 step=100 state=committed rule=dcp-metadata --wait 3
	gen_none "$CK_MNT/run-42"
	GT dcp a/b/c/step-5
	gen_expect "$CK_MNT/a/b/c/step-5" name=step-5 step=5 state=committed rule=dcp-metadata --wait 3
	gen_none "$CK_MNT/a/b"
	assert_eq 2 "$(ck_sql "SELECT count(DISTINCT series) FROM generations WHERE name IN ('step-100', 'step-5')")" "series of run-42/step-100 and a/b/c/step-5"
	# every default name, one series each (so that next-gen stays out of it)
	local spec name step i=0
	for spec in step-1:1 step_2:2 checkpoint-3:3 global_step4:4 iter_0000005:5 \
		"epoch=1-step=6.ckpt:6" "epoch=1-step=7-v2.ckpt:7" ckpt-8:8 step-9.pt:9 \
		checkpoint_10.safetensors:10 iteration-11:11; do
		name=${spec%:*}
		step=${spec##*:}
		i=$((i + 1))
		mkdir "$CK_MNT/n$i"
		case $name in
		*.pt | *.safetensors) echo x >"$CK_MNT/n$i/$name" ;;
		*) mkdir "$CK_MNT/n$i/$name" ;;
		esac
		gen_expect "$CK_MNT/n$i/$name" "name=$name" "step=$step" state=open
	done
	# names that are no generation
	mkdir "$CK_MNT/neg"
	for name in step-300.tmp step-400.pt.tmp checkpoint latest run-42 mystep-5 step-5.txt step- "model-step-5"; do
		mkdir "$CK_MNT/neg/$name"
		gen_none "$CK_MNT/neg/$name"
	done
	# a step-like name inside a generation is an ordinary entry of it
	mkdir -p "$CK_MNT/in/step-21/step-22/checkpoint-23"
	gen_expect "$CK_MNT/in/step-21/step-22/checkpoint-23" name=step-21 step=21 state=open
	assert_eq 0 "$(ck_sql "SELECT count(*) FROM generations WHERE name IN ('step-22', 'checkpoint-23')")" "generations made inside step-21"
	ck_umount
}

test_gen_pattern_option_and_show_open() {
	ck_mount "$GEN_OPTS,gen_pattern=^save([0-9]+)$,show_open"
	mkdir "$CK_MNT/s" "$CK_MNT/s/save12" "$CK_MNT/s/step-5"
	gen_expect "$CK_MNT/s/save12" name=save12 step=12 state=open
	gen_none "$CK_MNT/s/step-5"
	# show_open: the OPEN generation is listed
	assert_listed "$CK_MNT/s" save12
	ck_umount
}

test_renaming_a_generation_root_away_ends_it() {
	ck_mount "$GEN_OPTS"
	mkdir "$CK_MNT/ckpt"
	GT dcp ckpt/step-5
	gen_expect "$CK_MNT/ckpt/step-5" state=committed --wait 3
	mv "$CK_MNT/ckpt/step-5" "$CK_MNT/ckpt/old-5"
	mv "$CK_REF/ckpt/step-5" "$CK_REF/ckpt/old-5"
	gen_none "$CK_MNT/ckpt/old-5"
	gen_none "$CK_MNT/ckpt/old-5/.metadata"
	assert_cat_gen step-5 3 renamed
	same ckpt
	ck_remount "$GEN_OPTS"
	gen_none "$CK_MNT/ckpt/old-5"
	same ckpt
	ck_umount
}

# ---------------------------------------------------------------- rewrites

test_rewrite_of_a_committed_generation_is_a_new_version_restored_after_a_crash() {
	ck_mount "$GEN_OPTS"
	mkdir "$CK_MNT/rw"
	local g=$CK_MNT/rw/step-100
	GT dcp rw/step-100
	gen_expect "$g" state=committed rule=dcp-metadata version=1 --wait 3
	cp -a "$CK_REF/rw/step-100" "$CK_TMP/v1"
	# overwrite one file: version 2 OPEN, version 1 kept as a backup
	GT --salt v2 put rw/step-100/__0_0.distcp
	gen_expect "$g" state=open version=2 --stable 1.0
	local backup
	backup=$(ck_sql "SELECT backup_root FROM generations WHERE name = 'step-100' ORDER BY id DESC LIMIT 1")
	assert_ne 0 "$backup" "backup_root while version 2 is open"
	# reachable by name, new bytes visible to readers
	same rw/step-100
	setfattr -n user.ckptfs.commit -v 1 "$g"
	gen_expect "$g" state=committed rule=explicit version=2 files=3 --wait 3
	assert_eq 0 "$(ck_sql "SELECT backup_root FROM generations WHERE name = 'step-100' ORDER BY id DESC LIMIT 1")" "backup_root once version 2 committed"
	same rw
	cp -a "$CK_REF/rw/step-100" "$CK_TMP/v2"
	cmp -s "$CK_TMP/v1/__0_0.distcp" "$CK_TMP/v2/__0_0.distcp" && ck_fail "the test did not change the shard"
	# a third version, half written, then kill -9: version 2 comes back
	GT --salt v3 put rw/step-100/__1_0.distcp
	GT --salt v3 put rw/step-100/extra.pt
	gen_expect "$g" state=open version=3
	ck_kill9
	ck_mount "$GEN_OPTS"
	gen_expect "$g" state=committed version=2
	local out
	out=$(diff -r "$CK_TMP/v2" "$g" 2>&1) || ck_fail "after the crash step-100 is not version 2: $(echo "$out" | head -n 5 | tr '\n' '|')"
	assert_listed "$CK_MNT/rw" step-100
	ck_umount
}

test_next_gen_does_not_commit_a_half_rewritten_dcp_generation() {
	ck_mount "$GEN_OPTS"
	mkdir "$CK_MNT/ckpt"
	local g=$CK_MNT/ckpt/step-100
	GT dcp ckpt/step-100
	gen_expect "$g" state=committed version=1 --wait 3
	cp -a "$CK_REF/ckpt/step-100" "$CK_TMP/v1"
	# step-100 saved again in place: rank 0 has rewritten its shard ('wb'),
	# rank 1 has not yet, no new .metadata: a DCP save in progress
	GT --salt v2 put ckpt/step-100/__0_0.distcp
	gen_expect "$g" state=open version=2
	# another save starts in the series: step-100 is not a finished save
	# (its marker layout has shards newer than its .metadata), so next-gen
	# must not commit this mix of version 1 and version 2 shards
	GT dcp ckpt/step-200 --phase files
	gen_expect "$g" state=open version=2 --stable 0.6
	# a crash now: version 1 as it was
	ck_kill9
	ck_mount "$GEN_OPTS"
	gen_expect "$g" state=committed version=1
	local out
	out=$(diff -r "$CK_TMP/v1" "$g" 2>&1) || ck_fail "after the crash step-100 is not version 1: $(echo "$out" | head -n 5 | tr '\n' '|')"
	ck_umount
}

test_commit_waits_for_every_open_write_handle() {
	ck_mount "$GEN_OPTS"
	mkdir "$CK_MNT/w"
	local g=$CK_MNT/w/step-1
	# rank 1 (slow async writer) still has its shard open when rank 0 renames .metadata
	GT dcp w/step-1 --phase files
	ck_rand "$CK_REF/late" $((200 * KiB))
	ck_bg "$PY" "$CK_HELPERS/holdopen.py" "$CK_REF/late" "$g/__2_0.distcp" "$CK_TMP/ready"
	local holder=$CK_BG_PID
	ck_wait_file "$CK_TMP/ready"
	GT dcp w/step-1 --phase final
	gen_expect "$g" state=open --stable 1.0
	setfattr -n user.ckptfs.commit -v 1 "$g"
	gen_expect "$g" state=open --stable 0.5
	kill -9 "$holder"
	wait "$holder" 2>/dev/null || true
	gen_expect "$g" state=committed version=1 files=4 --wait 3
	cmp "$CK_REF/late" "$g/__2_0.distcp" || ck_fail "the late shard differs"
	ck_umount
}

test_write_handle_opened_on_a_committed_file_holds_the_commit() {
	ck_mount "$GEN_OPTS"
	mkdir "$CK_MNT/h"
	local g=$CK_MNT/h/step-1
	GT dcp h/step-1
	gen_expect "$g" state=committed version=1 --wait 3
	# an in-place update through a handle opened without O_TRUNC ('r+b'):
	# the first write reopens step-1 as version 2 while the handle is open
	ck_bg "$PY" "$CK_HELPERS/gen_trainers.py" --root "$CK_MNT" --ref "$CK_REF" --salt upd \
		hold h/step-1/__0_0.distcp "$CK_TMP/ready" "$CK_TMP/go"
	local holder=$CK_BG_PID
	ck_wait_file "$CK_TMP/ready"
	gen_expect "$g" state=open version=2
	# invariant 2: no commit while a write handle in it is open
	setfattr -n user.ckptfs.commit -v 1 "$g"
	gen_expect "$g" state=open version=2 --stable 0.8
	touch "$CK_TMP/go"
	ck_bg_wait "$holder" 30 || ck_fail "the writer holding __0_0.distcp failed"
	gen_expect "$g" state=committed rule=explicit version=2 --wait 3
	same h
	# nothing written after that commit: a crash keeps exactly version 2
	ck_kill9
	ck_mount "$GEN_OPTS"
	gen_expect "$g" state=committed version=2
	same h
	ck_umount
}

test_hard_link_inside_a_committed_generation_is_a_change() {
	ck_mount "$GEN_OPTS"
	mkdir "$CK_MNT/l"
	local g=$CK_MNT/l/step-1
	GT dcp l/step-1
	gen_expect "$g" state=committed version=1 --wait 3
	# a new name in a committed generation: refused, or a new OPEN version
	local r
	r=$(fsop link "$g/__0_0.distcp" "$g/copy.distcp")
	if [ "$r" = OK ]; then
		gen_expect "$g" state=open version=2
	else
		ck_log "link inside a committed generation refused: $r"
		gen_expect "$g" state=committed version=1
	fi
	# links across a generation's boundary would put one inode in two places
	assert_ne OK "$(fsop link "$g/__1_0.distcp" "$CK_MNT/l/outside")" "link from a generation to outside"
	ck_kill9
	ck_mount "$GEN_OPTS"
	gen_expect "$g" state=committed version=1
	same l
	ck_umount
}

# ---------------------------------------------------------------- deletes

test_trainer_rm_rf_deletes_and_reclaims_even_after_a_crash() {
	ck_mount "$GEN_OPTS"
	mkdir "$CK_MNT/td"
	GT dcp td/step-1
	# step-1's objects on BACKING before step-2 writes: with packs=on, no pack
	# then holds members of both, and deleting step-1 removes whole packs
	ck_wait_durable
	GT dcp td/step-2
	gen_expect "$CK_MNT/td/step-2" state=committed --wait 3
	ck_umount
	local chunks_before objs_before
	chunks_before=$(ck_chunk_count)
	objs_before=$(ck_backing_objects)
	ck_mount "$GEN_OPTS"
	gen_expect "$CK_MNT/td/step-1" state=committed
	rm -rf "$CK_MNT/td/step-1"
	rm -rf "$CK_REF/td/step-1"
	assert_not_exists "$CK_MNT/td/step-1"
	assert_cat_gen step-1 3
	ck_log "trainer delete recorded as: $(cat_gen step-1)"
	# a crash right after: the deleted checkpoint must not come back
	ck_kill9
	ck_mount "$GEN_OPTS"
	assert_not_exists "$CK_MNT/td/step-1"
	assert_cat_gen step-1 3
	gen_expect "$CK_MNT/td/step-2" state=committed version=1
	same td
	ck_umount
	local chunks_after objs_after
	chunks_after=$(ck_chunk_count)
	objs_after=$(ck_backing_objects)
	ck_log "chunks $chunks_before -> $chunks_after, objects $objs_before -> $objs_after"
	assert_lt "$chunks_after" "$chunks_before" "catalog chunks after deleting step-1"
	assert_lt "$objs_after" "$objs_before" "chunk objects in BACKING after deleting step-1"
	assert_eq "$(tree_bytes "$CK_REF")" "$(ck_unique_bytes)" "unique chunk bytes vs the bytes of the files left"
}

# files_both REL N: N files of 1 KiB in 10 subdirectories of REL, written to
# the mount and to the reference alike.
files_both() {
	"$PY" - "$CK_MNT/$1" "$CK_REF/$1" "$2" <<'PYEOF'
import os, sys
mnt, ref, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
base = os.urandom(1024)
for i in range(n):
    data = i.to_bytes(8, "little") + os.urandom(8) + base[16:]
    for top in (mnt, ref):
        sub = os.path.join(top, "d%02d" % (i % 10))
        os.makedirs(sub, exist_ok=True)
        with open(os.path.join(sub, "f%06d" % i), "wb") as f:
            f.write(data)
PYEOF
}
# Files still listed in generation NAME's subdirectories, as committed.
gen_files_committed() {
	ck_sql "SELECT count(*) FROM dirents WHERE parent IN (SELECT d.ino FROM dirents d JOIN generations g ON d.parent = g.root WHERE g.name = '$1' AND g.state IN (0, 1))"
}

# The removals of a trainer's rm -rf inside the generation it reopened are
# group committed (meta/catalog_defer.c): kill -9 half-way must bring the
# committed generation back whole, version 1, with every byte and nothing
# leaked; a complete rm -rf, then kill -9 at once, must stay deleted.
test_kill9_during_rm_rf_of_a_committed_generation_brings_it_back_whole() {
	ck_mount "$GEN_OPTS"
	mkdir "$CK_MNT/rr" "$CK_REF/rr"
	files_both rr/step-1 4000
	GT dcp rr/step-1
	gen_expect "$CK_MNT/rr/step-1" state=committed version=1 --wait 3
	GT dcp rr/step-2
	gen_expect "$CK_MNT/rr/step-2" state=committed --wait 3
	ck_wait_durable
	ck_remount "$GEN_OPTS"
	local objs0 left i=0
	objs0=$(ck_backing_objects)
	rm -rf "$CK_MNT/rr/step-1" &
	local rmpid=$!
	while left=$(gen_files_committed step-1) && [ "$left" -gt 3800 ] && [ $i -lt 1000 ]; do
		i=$((i + 1))
		sleep 0.01
	done
	kill -0 "$rmpid" 2>/dev/null || ck_fail "rm -rf of 4000 files finished before the kill (committed files left: $left)"
	ck_kill9 "$rmpid"
	ck_log "killed with $left of 4000 files committed in step-1 (uncommitted removals not counted)"
	ck_mount "$GEN_OPTS"
	gen_expect "$CK_MNT/rr/step-1" state=committed version=1
	assert_cat_gen step-1 1 crash-restored
	same rr
	ck_umount
	assert_eq 0 "$(ck_sql 'SELECT count(*) FROM inodes WHERE nlink = 0')" "unlinked inodes left"
	assert_eq "$(tree_bytes "$CK_REF")" "$(ck_unique_bytes)" "unique chunk bytes vs the bytes of the files"
	ck_objcheck

	ck_mount "$GEN_OPTS"
	rm -rf "$CK_MNT/rr/step-1"
	rm -rf "${CK_REF:?}/rr/step-1"
	ck_kill9
	ck_mount "$GEN_OPTS"
	assert_not_exists "$CK_MNT/rr/step-1"
	assert_cat_gen step-1 3 trainer
	gen_expect "$CK_MNT/rr/step-2" state=committed version=1
	same rr
	ck_umount
	assert_eq 0 "$(ck_sql 'SELECT count(*) FROM inodes WHERE nlink = 0')" "unlinked inodes left"
	assert_eq "$(tree_bytes "$CK_REF")" "$(ck_unique_bytes)" "unique chunk bytes vs the bytes of the files left"
	ck_objcheck
	ck_log "objects on BACKING: $objs0 before, $(ck_backing_objects) after"
}

# A removal inside an OPEN generation, then its commit, then kill -9: the
# commit carries the removal (D2 of meta/catalog_defer.c).
test_kill9_after_a_commit_keeps_the_removals_before_it() {
	ck_mount "$GEN_OPTS"
	mkdir "$CK_MNT/rk"
	GT dcp rk/step-1 --phase files
	mkdir "$CK_MNT/rk/step-1/sub"
	GT put rk/step-1/stale.bin
	GT put rk/step-1/sub/old.bin
	gen_expect "$CK_MNT/rk/step-1" state=open
	rm "$CK_MNT/rk/step-1/stale.bin" "$CK_REF/rk/step-1/stale.bin"
	rm -r "$CK_MNT/rk/step-1/sub" "$CK_REF/rk/step-1/sub"
	GT dcp rk/step-1 --phase final
	gen_expect "$CK_MNT/rk/step-1" state=committed version=1 --wait 3
	ck_kill9
	ck_mount "$GEN_OPTS"
	gen_expect "$CK_MNT/rk/step-1" state=committed version=1
	assert_not_exists "$CK_MNT/rk/step-1/stale.bin"
	assert_not_exists "$CK_MNT/rk/step-1/sub"
	same rk
	ck_umount
}

# Small files inside an OPEN generation are group committed too (creates,
# contents, commits at close: meta/catalog_defer.c D1, D7), files outside
# generations are not. kill -9 while both are being written: every file whose
# close returned outside generations is there byte for byte, the open
# generation is rolled back, the committed one is whole, and no chunk object
# leaked (objects written for rows the crash took are reclaimed at the next
# mount) or went missing (one deduplicated by a committed file stays).
test_kill9_during_small_files_keeps_every_file_closed_outside_generations() {
	ck_mount "$GEN_OPTS"
	mkdir -p "$CK_MNT/sf/out" "$CK_REF/sf/out" "$CK_MNT/sf/step-0" "$CK_REF/sf/step-0"
	"$PY" - "$CK_MNT/sf/step-0" "$CK_REF/sf/step-0" <<'PYEOF'
import os, sys
for i in range(50):
    data = b"step-0 %d " % i + os.urandom(4000)
    for top in sys.argv[1:]:
        with open(os.path.join(top, "c%02d" % i), "wb") as f:
            f.write(data)
PYEOF
	setfattr -n user.ckptfs.commit -v 1 "$CK_MNT/sf/step-0"
	gen_expect "$CK_MNT/sf/step-0" state=committed version=1 --wait 3
	# the writer: 4 KiB files into the open step-1; every 5th, one outside
	# generations, logged with its SHA-256 once close() returned; some
	# contents repeat a committed file's, inside and outside generations
	"$PY" - "$CK_MNT/sf" "$CK_TMP/closed" <<'PYEOF' &
import hashlib, os, sys
top, log = sys.argv[1], open(sys.argv[2], "a")
os.makedirs(os.path.join(top, "step-1"), exist_ok=True)
def put(path, data):
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    os.write(fd, data)
    os.close(fd)
outside = []
i = 0
while True:
    data = b"step-1 %d " % i + os.urandom(4086)
    if i % 7 == 3:  # a committed generation's content
        data = open(os.path.join(top, "step-0", "c%02d" % (i % 50)), "rb").read()
    elif i % 7 == 5 and outside:  # a file's outside generations
        data = open(outside[-1], "rb").read()
    put(os.path.join(top, "step-1", "f%06d" % i), data)
    if i % 5 == 0:
        name = os.path.join(top, "out", "o%06d" % i)
        odata = data if i % 10 == 0 else b"out %d " % i + os.urandom(4090)
        put(name, odata)  # i % 10 == 0: a chunk first stored inside the open generation
        outside.append(name)
        log.write("%s %s\n" % (os.path.basename(name), hashlib.sha256(odata).hexdigest()))
        log.flush()
    i += 1
PYEOF
	local wpid=$! n=0 i=0
	while n=$(ls "$CK_MNT/sf/step-1" 2>/dev/null | wc -l) && [ "$n" -lt 1500 ] && [ $i -lt 600 ]; do
		kill -0 "$wpid" 2>/dev/null || ck_fail "the writer died after $n files"
		i=$((i + 1))
		sleep 0.05
	done
	ck_kill9 "$wpid"
	local closed
	closed=$(wc -l <"$CK_TMP/closed")
	ck_log "killed after $n files in the open step-1, $closed closed outside generations"
	[ "$closed" -gt 100 ] || ck_fail "only $closed files closed outside generations before the kill"
	ck_mount "$GEN_OPTS"
	grep -h "lost with the last run" "$CK_DERR" "$CK_DLOG" 2>/dev/null | head -n 1 | sed 's/^/  recovery: /' >&2 || true
	# the open step-1 is held (not listed, kept as its closed files left it)
	assert_not_listed "$CK_MNT/sf" step-1
	assert_cat_gen step-1 4 crash
	gen_expect "$CK_MNT/sf/step-0" state=committed version=1
	same sf/step-0
	local name sum got bad=0
	while read -r name sum; do
		got=$(sha256sum "$CK_MNT/sf/out/$name" 2>/dev/null | cut -d' ' -f1)
		[ "$got" = "$sum" ] || { bad=$((bad + 1)); ck_log "sf/out/$name: ${got:-missing}, closed as $sum"; }
	done <"$CK_TMP/closed"
	assert_eq 0 "$bad" "files closed outside generations before the kill, missing or different"
	"$CKPTFS_ADMIN" check "$CK_MNT" >"$CK_TMP/chk" 2>&1 || ck_fail "ckptfs-admin check: $(head -n 5 "$CK_TMP/chk" | tr '\n' '|')"
	ck_umount
	assert_eq 0 "$(ck_sql 'SELECT count(*) FROM inodes WHERE nlink = 0')" "unlinked inodes left"
	assert_eq 0 "$(ck_sql 'SELECT count(*) FROM chunks WHERE refcount = 0')" "unreferenced chunks left"
	[ ! -e "$CK_CACHE/catalog.db-defer" ] || ck_fail "the intent journal outlived a clean unmount"
	"$CKPTFS_ADMIN" check --cache "$CK_CACHE" >"$CK_TMP/chk" 2>&1 || ck_fail "ckptfs-admin check --cache: $(head -n 5 "$CK_TMP/chk" | tr '\n' '|')"
	ck_objcheck
}

test_torchtitan_purge_thread_races_a_new_save() {
	ck_mount "$GEN_OPTS"
	mkdir "$CK_MNT/tt"
	local s
	for s in 1 2 3 4; do GT dcp "tt/step-$s"; done
	gen_expect "$CK_MNT/tt/step-4" state=committed --wait 3
	# keep_latest_k=2: rank 0's purge thread rmtree()s the oldest while the
	# newest save is being written by the ranks
	GT titan-race tt --purge step-1,step-2 --save step-5
	GT titan-race tt --purge step-3 --save step-6
	GT titan-race tt --purge step-4 --save step-7
	for s in 1 2 3 4; do
		assert_not_exists "$CK_MNT/tt/step-$s"
		assert_cat_gen "step-$s" 3
	done
	for s in 5 6 7; do
		gen_expect "$CK_MNT/tt/step-$s" state=committed rule=dcp-metadata version=1 --wait 3
	done
	assert_eq 7 "$(GT titan-resume tt)" "TorchTitan resume step"
	same tt
	ck_umount
	assert_eq "$(tree_bytes "$CK_REF")" "$(ck_unique_bytes)" "unique chunk bytes vs the bytes of the files left"
}

# ---------------------------------------------------------------- unmount, SIGTERM, crash, abandon

test_clean_unmount_commits_markerless_and_holds_unfinished_dcp() {
	ck_mount "$GEN_OPTS"
	mkdir -p "$CK_MNT/ua/step-7" "$CK_MNT/ub"
	GT put ua/step-7/model.pt
	GT dcp ub/step-8 --phase files
	gen_expect "$CK_MNT/ua/step-7" state=open
	gen_expect "$CK_MNT/ub/step-8" state=open
	ck_umount
	ck_mount "$GEN_OPTS"
	# no marker layout, no writer: the last save of a finished job is kept
	gen_expect "$CK_MNT/ua/step-7" state=committed rule=unmount version=1 files=1
	assert_listed "$CK_MNT/ua" step-7
	same ua
	# .distcp without .metadata: incomplete, held (not listed, kept byte for byte)
	assert_not_listed "$CK_MNT/ub" step-8
	assert_cat_gen step-8 4 unmount
	gen_expect "$CK_MNT/ub/step-8" state=held
	diff -r "$CK_REF/ub/step-8" "$CK_MNT/ub/step-8" >/dev/null || ck_fail "the held ub/step-8 differs from what was written"
	ck_log "DCP without .metadata at unmount: $(cat_gen step-8)"
	ck_umount
}

test_sigterm_with_an_open_writer_holds_its_generation() {
	ck_mount "$GEN_OPTS"
	mkdir -p "$CK_MNT/ua/step-7" "$CK_MNT/uc/step-9"
	GT put ua/step-7/model.pt
	ck_rand "$CK_REF/big" $((300 * KiB))
	ck_bg "$PY" "$CK_HELPERS/holdopen.py" "$CK_REF/big" "$CK_MNT/uc/step-9/model.pt" "$CK_TMP/ready"
	local holder=$CK_BG_PID
	ck_wait_file "$CK_TMP/ready"
	gen_expect "$CK_MNT/uc/step-9" state=open
	ck_term
	kill -9 "$holder" 2>/dev/null || true
	wait "$holder" 2>/dev/null || true
	ck_mount "$GEN_OPTS"
	gen_expect "$CK_MNT/ua/step-7" state=committed rule=unmount version=1
	same ua
	assert_not_listed "$CK_MNT/uc" step-9
	assert_cat_gen step-9 4 unmount
	ck_log "write handle open at SIGTERM: $(cat_gen step-9)"
	ck_umount
}

test_kill9_holds_open_generations_and_keeps_committed_ones() {
	ck_mount "$GEN_OPTS"
	mkdir -p "$CK_MNT/cr" "$CK_MNT/hf" "$CK_MNT/cm/step-3"
	GT dcp cr/step-1
	GT hf hf/checkpoint-10
	gen_expect "$CK_MNT/cr/step-1" state=committed --wait 3
	gen_expect "$CK_MNT/hf/checkpoint-10" state=committed --wait 5
	GT dcp cr/step-2 --phase files
	GT put cm/step-3/model.pt
	GT hf hf/checkpoint-20 --phase files
	gen_expect "$CK_MNT/cr/step-2" state=open
	gen_expect "$CK_MNT/cm/step-3" state=open
	# committed by the .metadata rename, the daemon killed right after it
	mkdir "$CK_MNT/cn"
	GT dcp cn/step-4
	ck_kill9
	ck_mount "$GEN_OPTS"
	local n
	for n in cr/step-2 cm/step-3 hf/checkpoint-20; do
		# held: not listed (resume logic never picks it), kept byte for byte
		assert_not_listed "$CK_MNT/${n%/*}" "${n#*/}"
		assert_cat_gen "${n#*/}" 4 crash
		same "$n"
		rm -rf "${CK_REF:?}/$n"
	done
	gen_expect "$CK_MNT/cr/step-1" state=committed rule=dcp-metadata version=1
	gen_expect "$CK_MNT/hf/checkpoint-10" state=committed rule=hf-trainer-state version=1
	gen_expect "$CK_MNT/cn/step-4" state=committed rule=dcp-metadata version=1
	same cr
	same hf
	same cn
	assert_eq 1 "$(GT titan-resume cr)" "TorchTitan resume step after the crash"
	assert_eq checkpoint-10 "$(GT hf-last hf)" "HF get_last_checkpoint after the crash"
	assert_eq 0 "$(ck_sql "SELECT count(*) FROM generations WHERE state = 0")" "OPEN generations after recovery"
	ck_umount
}

test_abandoned_open_generation_is_held_but_not_while_its_writer_lives() {
	ck_mount "$GEN_OPTS,abandon=1"
	mkdir -p "$CK_MNT/ab" "$CK_MNT/al/step-2" "$CK_MNT/ah/step-3"
	# writers gone, no handle open: held after 1 s
	GT dcp ab/step-1 --phase files
	# a live process that wrote and closed, and one still holding a handle
	ck_bg "$PY" -c 'import os, sys, time
open(sys.argv[1], "wb").write(os.urandom(5000)); open(sys.argv[2], "w").close(); time.sleep(600)' \
		"$CK_MNT/al/step-2/model.pt" "$CK_TMP/ready1"
	local alive=$CK_BG_PID
	ck_rand "$CK_REF/big" 5000
	ck_bg "$PY" "$CK_HELPERS/holdopen.py" "$CK_REF/big" "$CK_MNT/ah/step-3/model.pt" "$CK_TMP/ready2"
	local holder=$CK_BG_PID
	ck_wait_file "$CK_TMP/ready1"
	ck_wait_file "$CK_TMP/ready2"
	local i=0
	while [ "$(cat_gen step-1)" = "0 - 1" ]; do
		i=$((i + 1))
		[ $i -le 100 ] || ck_fail "ab/step-1 (writers exited, idle) still open 10 s after abandon=1: $(gen_line "$CK_MNT/ab/step-1")"
		sleep 0.1
	done
	assert_cat_gen step-1 4 abandoned
	assert_not_listed "$CK_MNT/ab" step-1
	same ab/step-1
	gen_expect "$CK_MNT/al/step-2" state=open
	gen_expect "$CK_MNT/ah/step-3" state=open
	kill -9 "$alive" "$holder" 2>/dev/null || true
	wait "$alive" "$holder" 2>/dev/null || true
	ck_umount
}

# A chmod (chown, touch, cp -p) of a file in a committed save changes its
# attributes in place: the save stays listed and committed at its version
# (it used to be reopened as a rewrite, hidden until `abandon`, then rolled
# back with the chmod undone: a resume meanwhile found no checkpoint), and
# its manifest is written again, so a fresh cache rebuilt from BACKING has
# the new mode. A truncate is still a rewrite.
test_chmod_in_a_committed_save_is_kept_in_place_and_reaches_backing() {
	ck_mount "abandon=2,quiet=0.5"
	mkdir -p "$CK_MNT/out/checkpoint-100"
	echo weights >"$CK_MNT/out/checkpoint-100/model.safetensors"
	echo '{"global_step": 100}' >"$CK_MNT/out/checkpoint-100/trainer_state.json"
	local row="SELECT state || '|' || version FROM generations WHERE name = 'checkpoint-100'" i=0
	until [ "$(ck_sql "$row")" = "1|1" ]; do
		i=$((i + 1))
		[ $i -le 100 ] || ck_fail "checkpoint-100 not committed: $(ck_sql "$row")"
		sleep 0.05
	done
	ck_wait_durable
	chmod 0640 "$CK_MNT/out/checkpoint-100/model.safetensors"
	touch -d 2020-01-02T03:04:05Z "$CK_MNT/out/checkpoint-100/trainer_state.json"
	assert_eq checkpoint-100 "$(ls "$CK_MNT/out")" "listing right after the chmod"
	assert_eq "1|1" "$(ck_sql "$row")" "state|version after the chmod and touch"
	sleep 3 # past abandon
	assert_eq checkpoint-100 "$(ls "$CK_MNT/out")" "listing past abandon"
	assert_eq "1|1" "$(ck_sql "$row")" "state|version past abandon"
	assert_eq 640 "$(stat -c %a "$CK_MNT/out/checkpoint-100/model.safetensors")" "mode past abandon"
	ck_wait_durable
	ck_umount
	CK_CACHE=$CK_TMP/cache2
	ck_mount
	assert_eq checkpoint-100 "$(ls "$CK_MNT/out")" "listing on a fresh cache rebuilt from BACKING"
	assert_eq 640 "$(stat -c %a "$CK_MNT/out/checkpoint-100/model.safetensors")" "mode rebuilt from BACKING"
	assert_eq "2020-01-02 03:04:05" "$(TZ=UTC stat -c %y "$CK_MNT/out/checkpoint-100/trainer_state.json" | cut -c1-19)" \
		"mtime rebuilt from BACKING"
	assert_eq weights "$(cat "$CK_MNT/out/checkpoint-100/model.safetensors")" "bytes rebuilt from BACKING"
	# a truncate is a change of the bytes: a rewrite (version 2 opens)
	truncate -s 3 "$CK_MNT/out/checkpoint-100/model.safetensors"
	assert_eq "0|2" "$(ck_sql "SELECT state || '|' || version FROM generations WHERE name = 'checkpoint-100'")" \
		"state|version after a truncate"
	ck_umount
}

# gen.h invariant 7: a save the catalog lists COMMITTED after a power loss
# is whole. Its files were closed without fsync (torch 1.13's DCP): the
# commit syncs the cache (syncfs) first, then the catalog's WAL, and the
# rename that commits at once returns only after both.
test_a_committed_generation_synced_its_objects_then_the_catalog() {
	local n0 ev cache_line cat_line
	ck_mount_synclog
	mkdir -p "$CK_MNT/ckpt"
	n0=$(ck_synclog_lines)
	ck_rand "$CK_REF/shard" $((3 * MiB))
	"$PY" - "$CK_REF/shard" "$CK_MNT/ckpt/step-100" <<'PYEOF'
import os, sys
d = open(sys.argv[1], "rb").read()
g = sys.argv[2]
os.makedirs(g, exist_ok=True)
with open(g + "/__0_0.distcp", "wb") as f:  # torch 1.13-style: no fsync
    f.write(d)
with open(g + "/.metadata.tmp", "wb") as f:
    f.write(b"meta" * 100)
os.rename(g + "/.metadata.tmp", g + "/.metadata")  # commits at once (dcp-metadata)
PYEOF
	assert_eq 1 "$(ck_sql "SELECT state FROM generations WHERE name = 'step-100'")" "step-100 COMMITTED once the rename returned"
	ev=$(ck_synclog_since "$n0" | sed "s|$CK_TMP/||")
	cache_line=$(echo "$ev" | grep -n "^syncfs cache\$" | tail -n 1 | cut -d: -f1)
	[ -n "$cache_line" ] || ck_fail "step-100 is COMMITTED but the cache was never synced since its files were written (events: $(echo "$ev" | tr '\n' ' ' | cut -c1-600))"
	cat_line=$(echo "$ev" | tail -n +"$cache_line" | grep -n '^sync cache/catalog\.db' | head -n 1 | cut -d: -f1)
	[ -n "$cat_line" ] || ck_fail "step-100 is COMMITTED but the catalog was not fsync'd after its objects were (events: $(echo "$ev" | tr '\n' ' ' | cut -c1-600))"
	assert_file_eq "$CK_REF/shard" "$CK_MNT/ckpt/step-100/__0_0.distcp"
	ck_umount
}

# gen.h invariant 7 (review3 F4): a file created, written and closed
# (no fsync) in a generation while its commit's syncfs runs joins that
# commit only once a later syncfs covered its objects. The synclog shim
# holds the commit's syncfs at a gate while the file is written.
test_a_file_written_during_the_commits_sync_is_synced_before_the_commit() {
	local gate=$CK_TMP/gate ev gate_line cache_line cat_line pid
	SYNCLOG_GATE=$gate ck_mount_synclog
	mkdir -p "$CK_MNT/ckpt/step-200"
	ck_rand "$CK_REF/a" $((2 * MiB))
	ck_rand "$CK_REF/late" $((3 * MiB))
	cp "$CK_REF/a" "$CK_MNT/ckpt/step-200/a"
	: >"$gate.arm"
	# the admin's commit (control channel): a setxattr would hold the
	# directory's lock and keep the file from being created
	ck_bg "$CKPTFS_ADMIN" commit "$CK_MNT" ckpt/step-200
	pid=$CK_BG_PID
	ck_wait_file "$gate.entered" 30
	cp "$CK_REF/late" "$CK_MNT/ckpt/step-200/late" # no fsync
	: >"$gate.go"
	ck_bg_wait "$pid" 60 || ck_fail "ckptfs-admin commit of step-200 failed"
	local i=0
	until [ "$(ck_sql "SELECT state FROM generations WHERE name = 'step-200'")" = 1 ]; do
		i=$((i + 1))
		[ $i -le 200 ] || ck_fail "step-200 never committed after the gate opened"
		sleep 0.05
	done
	ev=$(ck_synclog_since 0 | sed "s|$CK_TMP/||")
	gate_line=$(echo "$ev" | grep -n "^gate " | head -n 1 | cut -d: -f1)
	[ -n "$gate_line" ] || ck_fail "the commit's syncfs never passed the gate (events: $(echo "$ev" | tr '\n' ' ' | cut -c1-600))"
	# after the gated syncfs (which ran before late's objects existed): the
	# catalog's sync that commits must follow another syncfs of the cache
	ev=$(echo "$ev" | tail -n +$((gate_line + 2)))
	cat_line=$(echo "$ev" | grep -n '^sync cache/catalog\.db' | head -n 1 | cut -d: -f1)
	[ -n "$cat_line" ] || ck_fail "no catalog sync after the gate (events: $(echo "$ev" | tr '\n' ' ' | cut -c1-600))"
	cache_line=$(echo "$ev" | head -n "$cat_line" | grep -n "^syncfs cache\$" | head -n 1 | cut -d: -f1)
	[ -n "$cache_line" ] || ck_fail "step-200 committed with late, written during its sync, never synced: a power loss leaves it listed committed but torn (events after the gate: $(echo "$ev" | head -n "$cat_line" | tr '\n' ' ' | cut -c1-600))"
	assert_file_eq "$CK_REF/a" "$CK_MNT/ckpt/step-200/a"
	assert_file_eq "$CK_REF/late" "$CK_MNT/ckpt/step-200/late"
	ck_umount
}

ck_main "$@"
