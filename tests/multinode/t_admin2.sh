#!/bin/bash
# t_admin2 — generations across nodes, as an admin and a node's unmount
# see them (issue 18, docs/MULTINODE.md): nodes A, B (and a fresh C) of
# one shared catalog over one BACKING.
#
# `ckptfs-admin rm`, `commit`, `pin` and `list` on one node act on the
# shared generations whichever node wrote them (the daemon names GEN and runs
# the catalog calls, fenced: a swept node refuses with EROFS); a node that
# unmounts leaves open a save another live node still writes; rm -rf of a
# generation's root ends it on every node. `show` and list's ALONE and DEDUP
# on a node come from the shared catalog (the daemon's `show` and `list`),
# as do stats' counts and check; gc leaves BACKING to the reclaim duty.
. "$(dirname "$0")/mn.sh"

# a2_state NAME: the shared row's state (0 open, 1 committed, 3 deleted, 4 held).
a2_state() { mn_psql "SELECT state FROM ns_generations WHERE name = '$1' ORDER BY id DESC LIMIT 1"; }

# a2_list X [--all]: ckptfs-admin list on node X, as "series name step
# state pin" lines (durable shown as committed: the upload may finish
# between two nodes' listings).
a2_list() {
	local v=MN_MNT_$1 out
	out=$("$CKPTFS_ADMIN" list "${!v}" ${2:-}) || ck_fail "ckptfs-admin list on node $1: $out"
	echo "$out" | awk 'NR > 1 { s = $4; if (s == "durable") s = "committed"; print $1, $2, $3, s, $5 }' | sort
}

test_admin_rm_commit_pin_list_act_on_every_node() {
	local out rc
	mn_pg_start
	mn_mount A keep=2
	mn_mount B keep=2
	mkdir "$MN_MNT_A/run"
	mn_see B run
	mn_save A run/step-10 model.bin 200000 s10
	mn_save A run/step-20 model.bin 200000 s20
	assert_eq "run step-10 10 committed -
run step-20 20 committed -" "$(a2_list B)" "list on B: A's saves"
	assert_eq "$(a2_list A)" "$(a2_list B)" "list on A and on B"
	# pin on B keeps A's step-10 through keep-latest-k (keep=2)
	out=$("$CKPTFS_ADMIN" pin "$MN_MNT_B" run/step-10 2>&1) || ck_fail "pin on B: $out"
	assert_eq "t" "$(mn_psql "SELECT pinned FROM ns_generations WHERE name = 'step-10'")" "step-10 pinned"
	mn_save A run/step-30 model.bin 100000 s30
	mn_save A run/step-40 model.bin 100000 s40
	mn_until "SELECT state = 3 FROM ns_generations WHERE name = 'step-20'"
	assert_eq "1" "$(a2_state step-10)" "pinned step-10 kept by keep-latest-k"
	assert_file_eq "$CK_TMP/s10.bin" "$MN_MNT_B/run/step-10/model.bin"
	# rm of a file inside it is refused (admin_gen.c G1): step-10 stays whole
	rc=0 && out=$("$CKPTFS_ADMIN" rm "$MN_MNT_B" "$MN_MNT_B/run/step-10/model.bin" 2>&1) || rc=$?
	assert_eq "7" "$rc" "rm of a file inside a generation ($out)"
	assert_contains "$out" "names a path inside the generation run/step-10, not the generation"
	assert_eq "1" "$(a2_state step-10)" "step-10 after the refused rm"
	# rm on B of what A committed: gone on every node
	out=$("$CKPTFS_ADMIN" rm "$MN_MNT_B" "$MN_MNT_B/run/step-10" 2>&1) || ck_fail "rm on B: $out"
	assert_eq "3" "$(a2_state step-10)" "step-10 deleted"
	assert_not_exists "$MN_MNT_A/run/step-10"
	assert_not_exists "$MN_MNT_B/run/step-10"
	rc=0 && out=$("$CKPTFS_ADMIN" rm "$MN_MNT_B" run/step-10 2>&1) || rc=$?
	assert_eq "6" "$rc" "rm of a deleted generation: no such generation ($out)"
	rc=0 && out=$("$CKPTFS_ADMIN" pin "$MN_MNT_B" run/step-99 2>&1) || rc=$?
	assert_eq "6" "$rc" "pin of no generation ($out)"
	# a save A held at its unmount (a DCP shard, no .metadata: A alone wrote it)
	mkdir "$MN_MNT_A/run/step-50"
	head -c 300000 /dev/urandom >"$CK_TMP/s50.bin"
	cp "$CK_TMP/s50.bin" "$MN_MNT_A/run/step-50/__0_0.distcp"
	mn_umount A
	assert_eq "4" "$(a2_state step-50)" "step-50 held at A's unmount"
	assert_eq "run step-30 30 committed -
run step-40 40 committed -" "$(a2_list B)" "list on B: the held step-50 not shown"
	# commit on B of the held one: listed everywhere
	out=$("$CKPTFS_ADMIN" commit "$MN_MNT_B" run/step-50 2>&1) || ck_fail "commit on B: $out"
	assert_eq "1" "$(a2_state step-50)" "step-50 committed by B's admin"
	mn_until "SELECT state = 3 FROM ns_generations WHERE name = 'step-30'" # keep=2
	mn_mount A keep=2
	mn_mount C
	local want="run step-40 40 committed -
run step-50 50 committed -"
	assert_eq "$want" "$(a2_list B)" "list on B"
	assert_eq "$want" "$(a2_list A)" "list on A (mounted again)"
	assert_eq "$want" "$(a2_list C)" "list on fresh node C"
	assert_eq "$(a2_list B --all)" "$(a2_list C --all)" "list --all on B and C"
	assert_file_eq "$CK_TMP/s50.bin" "$MN_MNT_C/run/step-50/__0_0.distcp"
	mn_umount C
	mn_umount B
	mn_umount A
}
ck_timeout test_admin_rm_commit_pin_list_act_on_every_node 180

test_a_fenced_node_refuses_admin_changes() {
	local out rc
	mn_pg_start
	mn_mount A
	mn_mount B
	mkdir "$MN_MNT_A/run"
	mn_save A run/step-1 model.bin 100000 s1
	mn_see B run/step-1/model.bin
	# B stops past its lease: A sweeps it; B, running again, is fenced
	kill -STOP "$MN_PID_B"
	mn_until "SELECT state = 'expired' FROM ckpt_nodes WHERE name LIKE '%node-B%'"
	kill -CONT "$MN_PID_B"
	rc=0 && out=$("$CKPTFS_ADMIN" rm "$MN_MNT_B" run/step-1 2>&1) || rc=$?
	assert_ne "0" "$rc" "rm on the fenced node B ($out)"
	case $out in *fenced*) ;; *) ck_fail "rm on fenced B does not say fenced: $out" ;; esac
	out=$("$CKPTFS_ADMIN" pin "$MN_MNT_B" run/step-1 2>&1) || true
	case $out in *fenced*) ;; *) ck_fail "pin on fenced B does not say fenced: $out" ;; esac
	assert_eq "1 false" "$(mn_psql "SELECT state || ' ' || pinned FROM ns_generations WHERE name = 'step-1'")" \
		"step-1 untouched"
	out=$("$CKPTFS_ADMIN" pin "$MN_MNT_A" run/step-1 2>&1) || ck_fail "pin on live A: $out"
	mn_umount B
	mn_umount A
}
ck_timeout test_a_fenced_node_refuses_admin_changes 120

test_a_node_unmounting_leaves_open_a_save_another_node_completes() {
	mn_pg_start
	mn_mount A
	mn_mount B
	mkdir -p "$MN_MNT_A/run/step-5" # A opens the save (a DCP layout: .metadata ends it)
	mn_see B run/step-5
	head -c 300000 /dev/urandom >"$CK_TMP/r1.bin"
	cp "$CK_TMP/r1.bin" "$MN_MNT_B/run/step-5/__1_0.distcp"
	mn_umount B # its marker never came on B: it is A's to decide
	assert_eq "0" "$(a2_state step-5)" "step-5 left open by B's unmount"
	head -c 300000 /dev/urandom >"$CK_TMP/r0.bin"
	cp "$CK_TMP/r0.bin" "$MN_MNT_A/run/step-5/__0_0.distcp"
	echo metadata >"$MN_MNT_A/run/step-5/.metadata.tmp"
	mv "$MN_MNT_A/run/step-5/.metadata.tmp" "$MN_MNT_A/run/step-5/.metadata"
	mn_until "SELECT state = 1 AND rule = 'dcp-metadata' FROM ns_generations WHERE name = 'step-5'"
	mn_mount C
	assert_eq "run step-5 5 committed -" "$(a2_list A)" "list on A"
	assert_eq "run step-5 5 committed -" "$(a2_list C)" "list on fresh node C"
	assert_file_eq "$CK_TMP/r1.bin" "$MN_MNT_C/run/step-5/__1_0.distcp"
	assert_file_eq "$CK_TMP/r0.bin" "$MN_MNT_C/run/step-5/__0_0.distcp"
	mn_umount C
	mn_umount A
}
ck_timeout test_a_node_unmounting_leaves_open_a_save_another_node_completes 120

test_a_node_alone_in_a_save_still_holds_it_at_unmount() {
	mn_pg_start
	mn_mount A
	mn_mount B
	mkdir -p "$MN_MNT_B/run/step-6" # B opens it and writes alone
	head -c 100000 /dev/urandom >"$MN_MNT_B/run/step-6/__0_0.distcp"
	mn_see A run
	mn_umount B
	assert_eq "4" "$(a2_state step-6)" "step-6 held by B's unmount: nobody else took part"
	mn_umount A
}
ck_timeout test_a_node_alone_in_a_save_still_holds_it_at_unmount 120

test_rm_rf_of_a_save_ends_it_on_every_node() {
	local out
	mn_pg_start
	mn_mount A keep=2
	mn_mount B keep=2
	mkdir "$MN_MNT_A/run"
	mn_save A run/step-1 model.bin 100000 s1
	mn_save A run/step-2 model.bin 100000 s2
	mn_see B run/step-2/model.bin
	rm -rf "$MN_MNT_B/run/step-2"
	assert_eq "3 trainer" "$(mn_psql "SELECT state || ' ' || rule FROM ns_generations WHERE name = 'step-2'")" \
		"step-2 ended by rm -rf on B"
	assert_eq "run step-1 1 committed -" "$(a2_list A)" "list on A"
	assert_eq "run step-1 1 committed -
run step-2 2 deleted -" "$(a2_list A --all)" "list --all on A"
	assert_eq "$(a2_list A --all)" "$(a2_list B --all)" "list --all on B"
	# the name is free again, and keep-latest-k counts step-1 and the new one
	mn_save B run/step-2 model.bin 100000 s2b
	mn_save B run/step-3 model.bin 100000 s3
	mn_until "SELECT state = 3 FROM ns_generations WHERE name = 'step-1'"
	assert_file_eq "$CK_TMP/s2b.bin" "$MN_MNT_A/run/step-2/model.bin"
	out=$("$CKPTFS_ADMIN" check "$MN_MNT_A" 2>&1) || ck_fail "ckptfs-admin check: $(echo "$out" | head -n 8 | tr '\n' '|')"
	mn_umount B
	mn_umount A
}
ck_timeout test_rm_rf_of_a_save_ends_it_on_every_node 120

# a2_json_check FILE PYTHON: runs the python assertions on the JSON in FILE
# (bound to j), failing the case with their message.
a2_json_check() {
	local out
	out=$("$PY" -c "import json, sys
j = json.load(open(sys.argv[1]))
$2" "$1" 2>&1) || ck_fail "$(echo "$out" | tail -n 3 | tr '\n' '|')"
}

# a2_show_files OUT: "SIZE PATH" of each file row of a show's text.
a2_show_files() {
	echo "$1" | awk '$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && $3 ~ /^[0-9]+$/ && $4 ~ /^\// {
		p = $4; for (i = 5; i <= NF; i++) p = p " " $i; print $1, p }'
}

# a2_norm FILE: a show --json without what may differ between two nodes'
# reading moments (durable: an upload may finish in between).
a2_norm() {
	"$PY" -c 'import json, sys
j = json.load(open(sys.argv[1]))
for k in ("state", "durable"):
    j["generation"].pop(k)
print(json.dumps(j, sort_keys=True))' "$1"
}

test_show_and_list_usage_on_a_node_come_from_the_shared_catalog() {
	local out rc before
	mn_pg_start
	mn_mount A
	mn_mount B
	mkdir "$MN_MNT_A/run"
	mn_see B run
	# step-1: written through A and B (a file in a directory B made, a name with a space)
	mkdir "$MN_MNT_A/run/step-1"
	mn_see B run/step-1
	head -c 300000 /dev/urandom >"$CK_TMP/a.bin"
	head -c 120000 /dev/urandom >"$CK_TMP/b.bin"
	head -c 1000 /dev/urandom >"$CK_TMP/w.bin"
	cp "$CK_TMP/a.bin" "$MN_MNT_A/run/step-1/a.bin"
	mkdir "$MN_MNT_B/run/step-1/sub"
	cp "$CK_TMP/b.bin" "$MN_MNT_B/run/step-1/sub/b.bin"
	cp "$CK_TMP/w.bin" "$MN_MNT_A/run/step-1/two words.bin"
	setfattr -n user.ckptfs.commit -v 1 "$MN_MNT_A/run/step-1" || ck_fail "commit of step-1"
	# step-2 on B: a copy of a.bin (shared with step-1) and a new file
	mkdir "$MN_MNT_B/run/step-2"
	cp "$CK_TMP/a.bin" "$MN_MNT_B/run/step-2/a.bin"
	head -c 200000 /dev/urandom >"$CK_TMP/c.bin"
	cp "$CK_TMP/c.bin" "$MN_MNT_B/run/step-2/c.bin"
	setfattr -n user.ckptfs.commit -v 1 "$MN_MNT_B/run/step-2" || ck_fail "commit of step-2"
	# step-3 on A: one file twice (dedup 2x within it)
	mkdir "$MN_MNT_A/run/step-3"
	head -c 200000 /dev/urandom >"$CK_TMP/x.bin"
	cp "$CK_TMP/x.bin" "$MN_MNT_A/run/step-3/x.bin"
	cp "$CK_TMP/x.bin" "$MN_MNT_A/run/step-3/y.bin"
	setfattr -n user.ckptfs.commit -v 1 "$MN_MNT_A/run/step-3" || ck_fail "commit of step-3"

	# show on B of step-1: every file of both nodes with its size
	out=$("$CKPTFS_ADMIN" show "$MN_MNT_B" run/step-1 2>&1) || ck_fail "show on B: $out"
	echo "$out" | grep -q '^  3 files, ' || ck_fail "show on B: not 3 files: $out"
	assert_eq "1000 /run/step-1/two words.bin
120000 /run/step-1/sub/b.bin
300000 /run/step-1/a.bin" "$(a2_show_files "$out" | sort -n)" "show on B: files and sizes"
	echo "$out" | grep -q 'chunks .* run/step-2$' || ck_fail "show on B: no share with run/step-2: $out"
	"$CKPTFS_ADMIN" --json show "$MN_MNT_B" run/step-1 >"$CK_TMP/show.json" ||
		ck_fail "show --json on B"
	a2_json_check "$CK_TMP/show.json" '
files = sorted((f["path"], f["size"]) for f in j["files"])
assert files == [("/run/step-1/a.bin", 300000), ("/run/step-1/sub/b.bin", 120000),
                 ("/run/step-1/two words.bin", 1000)], files
g = j["generation"]
assert g["files"] == 3 and g["logical_bytes"] == 421000, g
assert g["unique_bytes"] == 421000 and g["exclusive_bytes"] == 121000, g
assert g["version"] == 1 and g["created_ns"] > 0, g
assert [(s["generation"], s["bytes"]) for s in j["shares"]] == [("run/step-2", 300000)], j["shares"]'
	"$CKPTFS_ADMIN" --json show "$MN_MNT_A" run/step-1 >"$CK_TMP/showa.json" ||
		ck_fail "show --json on A"
	assert_eq "$(a2_norm "$CK_TMP/show.json")" "$(a2_norm "$CK_TMP/showa.json")" "show --json on A and on B"

	# list on B: ALONE and DEDUP as worked out from what was written (random
	# bytes are stored raw: ALONE is the plain bytes alone plus the headers)
	"$CKPTFS_ADMIN" --json list "$MN_MNT_B" run >"$CK_TMP/list.json" || ck_fail "list --json on B"
	a2_json_check "$CK_TMP/list.json" '
g = {x["name"]: x for x in j}
want = {"step-1": (421000, 421000, 121000), "step-2": (500000, 500000, 200000),
        "step-3": (400000, 200000, 200000)}
for name, (logical, unique, alone) in want.items():
    x = g[name]
    assert (x["logical_bytes"], x["unique_bytes"], x["exclusive_bytes"]) == (logical, unique, alone), x
    assert alone <= x["stored_bytes"] <= alone + 64 * x["chunks"], x
    assert abs(x["dedup_ratio"] - logical / unique) < 0.001, x'
	out=$("$CKPTFS_ADMIN" list "$MN_MNT_B" run) || ck_fail "list on B: $out"
	# columns: SERIES NAME STEP STATE PIN FILES LOGICAL(2) ALONE(2) DEDUP ...
	echo "$out" | awk 'NR > 1 && $9 == "-" { bad = 1 } END { exit bad }' || ck_fail "ALONE shown as - on B: $out"
	assert_eq "step-1 1.00x
step-2 1.00x
step-3 2.00x" "$(echo "$out" | awk 'NR > 1 { print $2, $11 }' | sort)" "DEDUP on B ($out)"
	assert_eq "$(echo "$out" | awk 'NR > 1 { print $2, $9, $10, $11 }')" \
		"$("$CKPTFS_ADMIN" list "$MN_MNT_A" run | awk 'NR > 1 { print $2, $9, $10, $11 }')" "ALONE on A and on B"

	# stats: the shared catalog's counts; check runs on the daemon
	out=$("$CKPTFS_ADMIN" --json stats "$MN_MNT_B") || ck_fail "stats on B: $out"
	echo "$out" >"$CK_TMP/stats.json"
	a2_json_check "$CK_TMP/stats.json" '
assert j["files"] == 7, j
assert j["logical_bytes"] == 421000 + 500000 + 400000, j'
	out=$("$CKPTFS_ADMIN" check "$MN_MNT_B" 2>&1) || ck_fail "check on B: $out"
	# verify checks the objects B holds (its rows count no references there)
	out=$("$CKPTFS_ADMIN" --json verify "$MN_MNT_B" 2>&1) || ck_fail "verify on B: $out"
	echo "$out" >"$CK_TMP/verify.json"
	a2_json_check "$CK_TMP/verify.json" '
assert j["chunks_bad"] == 0 and j["chunks_ok"] >= 2 and j["cache_copies_ok"] >= 2, j'
	# verify GEN refuses, naming why
	rc=0 && out=$("$CKPTFS_ADMIN" verify "$MN_MNT_B" run/step-1 2>&1) || rc=$?
	assert_eq "10" "$rc" "verify GEN on a node ($out)"
	case $out in *"shared catalog"*) ;; *) ck_fail "verify GEN does not say why: $out" ;; esac
	# gc on B leaves BACKING's objects (the cluster's) alone
	before=$(mn_objects)
	out=$("$CKPTFS_ADMIN" gc --delete "$MN_MNT_B" 2>&1) || ck_fail "gc on B: $out"
	case $out in *"BACKING"*"skipped"*) ;; *) ck_fail "gc on B does not skip BACKING: $out" ;; esac
	assert_eq "$before" "$(mn_objects)" "objects on BACKING after gc on B"
	assert_file_eq "$CK_TMP/b.bin" "$MN_MNT_A/run/step-1/sub/b.bin"
	mn_umount B
	mn_umount A
}
ck_timeout test_show_and_list_usage_on_a_node_come_from_the_shared_catalog 180

# a2_tree DIR: "SIZE SHA256 PATH" of every file under DIR, sorted.
a2_tree() { (cd "$1" && find . -type f -printf '%s %p\n' | sort -k2 | while read -r n f; do
	echo "$n $(sha256sum <"$f" | cut -c1-64) $f"; done); }

test_import_on_a_node_checks_the_shared_namespace() {
	local out rc
	mn_pg_start
	mn_mount A
	mn_mount B
	mkdir "$MN_MNT_A/run"
	mn_save A run/step-10 model.bin 300000 s10
	mn_see B run/step-10/model.bin
	# what B would import: other bytes under A's names
	mkdir -p "$CK_TMP/in/step-10/sub"
	head -c 200000 /dev/urandom >"$CK_TMP/in/step-10/model.bin"
	head -c 5000 /dev/urandom >"$CK_TMP/in/step-10/sub/extra.bin"
	# NAME A committed: refused, nothing of A's changed
	rc=0 && out=$("$CKPTFS_ADMIN" import "$MN_MNT_B" "$CK_TMP/in/step-10" run 2>&1) || rc=$?
	assert_eq "8" "$rc" "import on B of A's step-10 ($out)"
	assert_contains "$out" "exists" "import on B of A's step-10 says why"
	# SERIES inside A's generation: refused before anything is written into it
	rc=0 && out=$("$CKPTFS_ADMIN" import --name step-11 "$MN_MNT_B" "$CK_TMP/in/step-10" run/step-10 2>&1) || rc=$?
	assert_eq "7" "$rc" "import on B into a series inside A's step-10 ($out)"
	assert_contains "$out" "inside a generation" "import into A's step-10 says why"
	rc=0 && out=$("$CKPTFS_ADMIN" import --name step-11 "$MN_MNT_B" "$CK_TMP/in/step-10" run/step-10/deeper 2>&1) || rc=$?
	assert_eq "7" "$rc" "import on B into a series below A's step-10 ($out)"
	# a SERIES whose mkdir would start a generation (step-30 matches gen_pattern)
	rc=0 && out=$("$CKPTFS_ADMIN" import --name step-11 "$MN_MNT_B" "$CK_TMP/in/step-10" run/step-30 2>&1) || rc=$?
	assert_eq "7" "$rc" "import on B into a series that would be a generation ($out)"
	assert_not_exists "$MN_MNT_A/run/step-30"
	assert_eq "1 1 committed" "$(mn_psql "SELECT count(*) || ' ' || max(version) || ' ' || CASE max(state) WHEN 1 THEN 'committed' ELSE max(state)::text END FROM ns_generations WHERE name = 'step-10'")" \
		"A's step-10: one generation, version 1, committed"
	assert_eq "model.bin" "$(mn_entries "$MN_MNT_A/run/step-10")" "A's step-10 entries on A"
	assert_eq "model.bin" "$(mn_entries "$MN_MNT_B/run/step-10")" "A's step-10 entries on B"
	assert_file_eq "$CK_TMP/s10.bin" "$MN_MNT_A/run/step-10/model.bin"
	assert_file_eq "$CK_TMP/s10.bin" "$MN_MNT_B/run/step-10/model.bin"
	assert_eq "step-10" "$(mn_entries "$MN_MNT_A/run")" "nothing left in run by the refusals"
	# a new NAME: imported on B, committed, the same bytes on A and a fresh C
	out=$("$CKPTFS_ADMIN" import --name step-20 "$MN_MNT_B" "$CK_TMP/in/step-10" run 2>&1) ||
		ck_fail "import on B into run/step-20: $out"
	assert_eq "1 rename" "$(mn_psql "SELECT state || ' ' || rule FROM ns_generations WHERE name = 'step-20'")" \
		"step-20 committed by the rename"
	mn_mount C
	mn_see A run/step-20/sub/extra.bin
	assert_eq "$(a2_tree "$CK_TMP/in/step-10")" "$(a2_tree "$MN_MNT_A/run/step-20")" "step-20 on A"
	assert_eq "$(a2_tree "$CK_TMP/in/step-10")" "$(a2_tree "$MN_MNT_C/run/step-20")" "step-20 on C"
	assert_file_eq "$CK_TMP/s10.bin" "$MN_MNT_C/run/step-10/model.bin"
	assert_eq "run step-10 10 committed -
run step-20 20 committed -" "$(a2_list C)" "list on C"
	mn_umount C
	mn_umount B
	mn_umount A
}
ck_timeout test_import_on_a_node_checks_the_shared_namespace 150

# a node's cache with no daemon: every verb but umount refuses in one line,
# even once BACKING's claim went stale (every node stopped long ago), when
# an offline change could take BACKING over as if this cache's catalog were
# all of it (gc --delete would remove every object it does not name)
test_a_nodes_cache_offline_is_refused_and_loses_nothing() {
	local out rc before verb
	mn_pg_start
	mn_mount A
	mn_mount B
	mkdir "$MN_MNT_A/run"
	mn_save A run/step-1 model.bin 300000 s1
	mn_save B run/step-2 model.bin 300000 s2
	mn_umount B
	mn_umount A
	ck_claim | grep -qx "mode shared" || ck_fail "no shared claim on BACKING"
	ck_claim | sed 's/^renewed .*/renewed 1000/' | ck_claim_plant >/dev/null # stale: nobody renews it
	before=$(mn_objects)
	assert_ne "0" "$before" "objects on BACKING"
	for verb in "gc --delete" "rm run/step-1" "pin run/step-1" "commit run/step-2" "list" \
		"show run/step-1" "check" "stats" "wait" "verify" "export run/step-1 $CK_TMP/out" "rebuild"; do
		set -- $verb
		rc=0 && out=$("$CKPTFS_ADMIN" "$1" --cache "$CK_TMP/cache_B" "${@:2}" 2>&1) || rc=$?
		assert_eq "10" "$rc" "$verb --cache of node B's cache ($out)"
		assert_eq "1" "$(echo "$out" | wc -l)" "$verb: one line ($out)"
		assert_contains "$out" "shared catalog" "$verb says why"
	done
	assert_eq "$before" "$(mn_objects)" "objects on BACKING after the refusals"
	ck_claim | grep -qx "mode shared" || ck_fail "BACKING's claim is no longer the shared catalog's"
	assert_not_exists "$CK_TMP/out"
	mn_mount C
	assert_file_eq "$CK_TMP/s1.bin" "$MN_MNT_C/run/step-1/model.bin"
	assert_file_eq "$CK_TMP/s2.bin" "$MN_MNT_C/run/step-2/model.bin"
	assert_eq "run step-1 1 committed -
run step-2 2 committed -" "$(a2_list C)" "list on C"
	mn_umount C
}
ck_timeout test_a_nodes_cache_offline_is_refused_and_loses_nothing 120

# Review 47 F6 on a node (-o meta=): small.db is opened before the shared
# catalog; cut to half, the node is refused with the one line that names
# it, how to move it aside and what that costs (the node's local catalog: no
# chunk waits for upload), before PostgreSQL is asked anything; moved aside,
# the node mounts and every file reads right (its small chunks from BACKING).
test_a_nodes_damaged_small_db_is_refused_naming_what_moving_it_aside_costs() {
	local out rc=0 f
	mn_pg_start
	mn_mount A
	mkdir -p "$MN_MNT_A/run/step-1"
	for f in a b c; do
		head -c 3000 /dev/urandom >"$CK_TMP/$f.json"
		cp "$CK_TMP/$f.json" "$MN_MNT_A/run/step-1/$f.json"
	done
	setfattr -n user.ckptfs.commit -v 1 "$MN_MNT_A/run/step-1"
	"$CKPTFS_ADMIN" wait "$MN_MNT_A" --timeout 60 >/dev/null || ck_fail "step-1 did not become durable"
	mn_umount A
	[ -s "$CK_TMP/cache_A/small.db" ] || ck_fail "precondition: no small.db in node A's cache"
	truncate -s $(($(ck_size "$CK_TMP/cache_A/small.db") / 2)) "$CK_TMP/cache_A/small.db"
	out=$("$CKPTFS_BIN" -f -o "cache=$CK_TMP/cache_A,log=$CK_TMP/refused.log,meta=$MN_URL,node_name=node-A,lease_ms=$MN_LEASE_MS,meta_timeout_ms=$MN_META_TIMEOUT_MS" \
		"$CK_BACKING" "$CK_TMP/mnt_A" 2>&1 </dev/null) || rc=$?
	ck_is_mounted "$CK_TMP/mnt_A" && ck_fail "node A mounted with a damaged small.db"
	assert_ne 0 "$rc" "the refused node's exit status"
	assert_eq 1 "$(echo "$out" | wc -l)" "lines on stderr ($out)"
	assert_contains "$out" "cache $CK_TMP/cache_A: small.db is damaged (" "the refusal"
	assert_contains "$out" "no chunk of this cache waits for upload" "the refusal"
	mv "$CK_TMP/cache_A/small.db" "$CK_TMP/cache_A/small.db.damaged"
	rm -f "$CK_TMP/cache_A/small.db-wal" "$CK_TMP/cache_A/small.db-shm"
	mn_mount A
	for f in a b c; do
		assert_file_eq "$CK_TMP/$f.json" "$MN_MNT_A/run/step-1/$f.json"
	done
	mn_umount A
}
ck_timeout test_a_nodes_damaged_small_db_is_refused_naming_what_moving_it_aside_costs 120

# (s28 review F12) rebuild --meta never joins a new database to a BACKING a
# running cluster still claims: with node A up on the old database, a fresh
# empty one is refused in one line (exit 8) naming BACKING, the claim's
# catalog and how long ago it was renewed, and stays untouched; once A is
# stopped its claim is still fresh (refused again) unless --force; a claim
# older than 60 s needs no --force. Either way a database that is not empty
# is refused (exit 1), --force or not.
test_rebuild_meta_refuses_a_backing_a_running_cluster_claims() {
	local out rc id now
	mn_pg_start
	mn_mount A
	mn_save A run/step-100 w.bin 300000 f12-save
	out=$("$CKPTFS_ADMIN" wait "$MN_MNT_A" --timeout 60 2>&1) || ck_fail "ckptfs-admin wait on node A failed: $out"
	id=$(ck_claim_field catalog)
	[ -n "$id" ] || ck_fail "no catalog id in BACKING's claim"
	mn_pg_start # a new, empty database while A still runs on the old one
	local tables="SELECT count(*) FROM information_schema.tables WHERE table_name = 'ns_generations'"
	rc=0
	out=$("$CKPTFS_ADMIN" rebuild --meta "$MN_URL" "$CK_BACKING" 2>&1) || rc=$?
	assert_eq 8 "$rc" "exit of rebuild --meta while node A runs: $out"
	assert_eq 1 "$(echo "$out" | wc -l)" "lines of its refusal: $out"
	assert_contains "$out" "BACKING $CK_BACKING" "the refusal names BACKING"
	assert_contains "$out" "shared catalog $id" "the refusal names the claim's catalog"
	assert_contains "$out" " s ago" "the refusal says when the claim was renewed"
	assert_eq 0 "$(mn_psql "$tables")" "tables made in the new database by a refused rebuild"
	mn_umount A
	rc=0
	out=$("$CKPTFS_ADMIN" rebuild --meta "$MN_URL" "$CK_BACKING" 2>&1) || rc=$?
	assert_eq 8 "$rc" "exit of rebuild --meta with A just stopped (its claim fresh), no --force: $out"
	assert_eq 0 "$(mn_psql "$tables")" "tables made in the new database by a refused rebuild"
	out=$("$CKPTFS_ADMIN" rebuild --meta --force "$MN_URL" "$CK_BACKING" 2>&1) ||
		ck_fail "rebuild --meta --force failed: $out"
	assert_contains "$out" "1 generations" "rebuild --meta --force"
	rc=0
	out=$("$CKPTFS_ADMIN" rebuild --meta --force "$MN_URL" "$CK_BACKING" 2>&1) || rc=$?
	assert_eq 1 "$rc" "exit of rebuild --meta --force into a database that is not empty: $out"
	assert_contains "$out" "is not empty" "the refusal"
	# a claim the last node left 2 minutes ago: no --force needed
	mn_pg_start
	now=$(date +%s)
	ck_claim | sed "s/^renewed .*/renewed $((now - 120))/" | ck_claim_plant >/dev/null
	out=$("$CKPTFS_ADMIN" rebuild --meta "$MN_URL" "$CK_BACKING" 2>&1) ||
		ck_fail "rebuild --meta over a claim renewed 120 s ago failed: $out"
	assert_contains "$out" "1 generations" "rebuild --meta over an old claim"
	assert_eq 1 "$(mn_psql "SELECT count(*) FROM ns_generations WHERE name = 'step-100' AND state = 1")" \
		"step-100 committed in the rebuilt database"
}
ck_timeout test_rebuild_meta_refuses_a_backing_a_running_cluster_claims 240

ck_main "$@"
