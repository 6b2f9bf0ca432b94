#!/bin/bash
# t_keep2 — keep-latest-k across nodes (-o keep=2 on every node, the
# cluster duty "keep", docs/GENERATIONS.md "Several nodes"): two nodes
# saving steps of one series alternately (scripted DCP saves,
# tests/integration/helpers/gen_trainers.py, each committed by its
# .metadata) end with exactly the newest two listed on both and on a fresh
# third node, bit for bit; the older ones are deleted with rule keep in the
# shared catalog, whichever node saved them.
. "$(dirname "$0")/mn.sh"

K2_OPTS=quiet=0.5,keep=2

# k2_save X STEP: node X saves k/step-STEP and sees it committed.
k2_save() {
	local v=MN_MNT_$1
	"$PY" "$CK_HELPERS/gen_trainers.py" --root "${!v}" --ref "$CK_REF" --salt "s$2" dcp "k/step-$2" ||
		ck_fail "the save of step $2 on node $1 failed"
	local out
	out=$("$PY" "$CK_HELPERS/gen_trainers.py" expect "${!v}/k/step-$2" state=committed \
		rule=dcp-metadata --wait 3 2>&1) || ck_fail "step $2 on node $1: $out"
}

# The entries of a series directory, sorted, on one line.
k2_entries() { ls -A "$1" | sort -V | tr '\n' ' ' | sed 's/ $//'; }

# k2_expect X EXPECTED: node X lists EXPECTED in k within 20 s (keep keeps
# the newest durable generation while newer ones are only in a cache), and
# each entry reads back as the trainer wrote it.
k2_expect() {
	local v=MN_MNT_$1 i=0 s
	while [ "$(k2_entries "${!v}/k")" != "$2" ] && [ $i -lt 200 ]; do
		i=$((i + 1))
		sleep 0.1
	done
	assert_eq "$2" "$(k2_entries "${!v}/k")" "series k on node $1"
	for s in $2; do
		diff -r "$CK_REF/k/$s" "${!v}/k/$s" >/dev/null ||
			ck_fail "k/$s on node $1 differs from what the trainer wrote"
	done
}

test_two_nodes_saving_alternately_keep_the_newest_two() {
	mn_pg_start
	mn_mount A "$K2_OPTS"
	mn_mount B "$K2_OPTS"
	mkdir "$MN_MNT_A/k"
	mn_see B k
	local s
	for s in 1 2 3 4 5 6; do
		if [ $((s % 2)) = 1 ]; then k2_save A $s; else k2_save B $s; fi
	done
	k2_expect A "step-5 step-6"
	k2_expect B "step-5 step-6"
	mn_mount C "$K2_OPTS"
	k2_expect C "step-5 step-6"
	assert_eq "step-5 step-6" \
		"$(mn_psql "SELECT string_agg(name, ' ' ORDER BY step) FROM ns_generations WHERE state = 1")" \
		"committed generations in the shared catalog"
	assert_eq "4" "$(mn_psql "SELECT count(*) FROM ns_generations WHERE state = 3 AND rule = 'keep'")" \
		"steps 1-4 deleted by keep"
	mn_umount C
	mn_umount A
	mn_umount B
}
ck_main "$@"
