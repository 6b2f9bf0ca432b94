#!/bin/bash
# t_remote — multi-node cases where the other side is really remote
# (issue 18, part 3): BACKING as nfs:// to a private NFSv3 ganesha
# (tests/nfs/ganesha.sh, 127.0.0.1), and a node in its own network namespace
# reaching PostgreSQL over TCP on a veth pair whose link the case cuts
# (tests/pg/netns.sh), and its BACKING over nfs:// on the same link (ganesha
# then listens on the pair's host end, GANESHA_ADDR), or over a second pair
# that carries NFS alone, so that BACKING's link is cut while PostgreSQL's
# stays up (case 5).
#
# What works here for a node in a namespace: `ip netns exec` runs its
# command in a new mount namespace too (it remounts /sys for the netns), so a
# FUSE mount made by a daemon started that way is not seen from the host's
# mount namespace. `nsenter --net=/run/netns/NAME` enters the network
# namespace only: the daemon's mount is made in the host's mount namespace,
# where the trainers and fusermount3 see it (mn.sh mn_mount_netns,
# helpers/mn_netns_exec.sh). A Unix socket is a file, reachable from any
# network namespace, so the namespaced node is given PostgreSQL's TCP URL
# on the veth address (pgserver.sh PG_ADDR) and the case checks that its
# connections come from the namespace's address.
#
# What a node cut off past its lease does (decided here, documented in
# docs/MULTINODE.md): it keeps its mount. While cut, its calls that need
# PostgreSQL fail with ENOTCONN once meta_timeout_ms is spent (a call may
# make two tries: about twice that here), never hang; the others sweep it
# and hold the save it had a file open in. Once the link is back, its first
# renewal is refused: it logs once that it is read-only, refuses every
# change with EROFS, reads on (names and bytes from PostgreSQL and
# BACKING), and a plain unmount ends it with status 0 (case 2); unmounted
# while still cut off, it exits with status 0 too, its log saying it could
# not release its lease (case 3). It never exits by itself: a mount that
# vanishes under a trainer is worse than one that refuses writes.
. "$(dirname "$0")/mn.sh"

# (1) Two nodes over an nfs:// BACKING: a 4-rank DCP save, ranks 0-1
# through A and 2-3 through B, durable once `ckptfs-admin wait` returns; a
# replica written by both nodes is one chunk set on the export; a fresh node
# C with an empty cache loads the save bit for bit, its chunks read from the
# export alone (A and B are gone, ganesha is the only copy). B, which wrote
# shards of the save A committed, runs past its abandon bound and unmounts
# without an error (it once tried to hold the committed save at every tick
# and at unmount: fs/gen.c gen_hold).
test_dcp_over_nfs_backing_loads_on_a_fresh_node() {
	mn_ganesha_start
	mn_pg_start
	mn_mount A
	mn_mount B abandon=4
	mkdir -p "$MN_MNT_A/run" "$MN_MNT_A/rep" "$CK_REF/ref"
	local out
	out=$(mn_dcp save "$CK_REF/ref" 100 "$MN_MNT_A/run,$MN_MNT_A/run,$MN_MNT_B/run,$MN_MNT_B/run" 2>&1) ||
		ck_fail "the 4-rank DCP save over two nodes on nfs:// failed: $(echo "$out" | tail -n 5 | tr '\n' '|')"
	assert_contains "$out" "state=committed" "rank 0's view of step-100"
	assert_eq committed "$(mn_gen_state "$MN_MNT_B" run/step-100)" "step-100 as node B sees it"
	local saved=$SECONDS
	# replicas: the same bytes through both nodes at once
	ck_rand "$CK_REF/shard.bin" 12000000
	cp "$CK_REF/shard.bin" "$MN_MNT_A/rep/a.bin" &
	local cpa=$!
	cp "$CK_REF/shard.bin" "$MN_MNT_B/rep/b.bin"
	wait $cpa || ck_fail "the replica's copy through node A failed"
	out=$("$CKPTFS_ADMIN" wait "$MN_MNT_B" --timeout 120 2>&1) || ck_fail "ckptfs-admin wait on node B failed: $out"
	assert_contains "$out" "1 generation durable on BACKING" "wait on node B"
	local gen version
	gen=$(mn_psql "SELECT id FROM ns_generations WHERE name = 'step-100' AND state = 1")
	version=$(mn_psql "SELECT version FROM ns_generations WHERE id = $gen AND durable_version = version")
	[ -n "$version" ] || ck_fail "step-100 not durable in PostgreSQL once wait returned"
	[ -s "$MN_EXPORT/manifests/gen/$gen.$version.ckm" ] || ck_fail "no manifest of step-100 in the NFS export"
	[ $((SECONDS - saved)) -ge 6 ] || sleep $((6 - (SECONDS - saved)))
	mn_umount A # the replicas' uploads drain at unmount
	mn_umount B
	assert_eq 0 "$(grep -c ' error: ' "$MN_DLOG_B")" "error lines of node B: $(grep -m 2 ' error: ' "$MN_DLOG_B" | tr '\n' '|')"
	local chunks objects
	chunks=$(mn_psql "SELECT count(*) FROM ns_chunks")
	objects=$(mn_objects)
	ck_log "$chunks chunks in the shared catalog, $objects objects in the NFS export"
	[ "$chunks" -gt 0 ] || ck_fail "no chunk in the shared catalog"
	assert_eq "$chunks" "$objects" "chunk objects in the export (one per chunk of the shared catalog)"
	assert_eq 0 "$(mn_psql "SELECT count(*) FROM ns_chunks WHERE NOT uploaded")" "chunks not uploaded after both unmounts"
	# the replica: both copies name the same chunks, each stored once
	local ia ib ha hb
	ia=$(mn_psql "SELECT ino FROM ns_dirents WHERE name = 'a.bin'")
	ib=$(mn_psql "SELECT ino FROM ns_dirents WHERE name = 'b.bin'")
	ha=$(mn_psql "SELECT string_agg(encode(hash, 'hex'), ',' ORDER BY off) FROM ns_extents WHERE ino = $ia")
	hb=$(mn_psql "SELECT string_agg(encode(hash, 'hex'), ',' ORDER BY off) FROM ns_extents WHERE ino = $ib")
	[ -n "$ha" ] || ck_fail "no extents of rep/a.bin in the shared catalog"
	assert_eq "$ha" "$hb" "chunks of the replica written through A and through B"
	assert_eq 12000000 "$(mn_psql "SELECT sum(plain_len) FROM ns_chunks WHERE refcount >= 2 AND hash IN (SELECT hash FROM ns_extents WHERE ino = $ia)")" \
		"bytes of the replica's chunks, each referenced by both copies"
	mn_mount C
	assert_eq 0 "$(find "$CK_TMP/cache_C" -type f -path '*chunks*' | wc -l)" "chunk files in C's fresh cache"
	out=$(mn_dcp load "$CK_REF/ref" 100 "$MN_MNT_C/run" 2 2>&1) ||
		ck_fail "the 2-rank load on fresh node C over nfs:// failed: $(echo "$out" | tail -n 5 | tr '\n' '|')"
	assert_contains "$out" "loaded step-100" "load on node C"
	assert_file_eq "$CK_REF/shard.bin" "$MN_MNT_C/rep/a.bin"
	assert_file_eq "$CK_REF/shard.bin" "$MN_MNT_C/rep/b.bin"
	mn_umount C
	mn_ganesha_stop
}
ck_timeout test_dcp_over_nfs_backing_loads_on_a_fresh_node 240

# (2) Node B in its own network namespace, PostgreSQL reached over TCP on
# the veth pair; A on the host. Close-to-open both ways and a 4-rank save
# over both commit. Then B's link is cut while rank 2 has its shard open on
# B: A sweeps B, holds that save (never committed, never listed) and
# commits a later save of its own; once the link is back B finds itself
# swept, refuses changes with EROFS, still reads (it loads A's save bit for
# bit), the held save stays held after its writer is gone, and B unmounts
# with status 0.
test_node_in_a_netns_cut_off_mid_save_is_fenced_and_unmounts() {
	MN_LEASE_MS=2000 MN_META_TIMEOUT_MS=5000
	mn_netns_up
	mn_pg_start
	mn_mount A
	mn_mount_netns B
	assert_ne 0 "$(mn_psql "SELECT count(*) FROM pg_stat_activity WHERE client_addr = '$MN_NS_IP'")" \
		"PostgreSQL connections from the namespace's address $MN_NS_IP"
	# close-to-open, both ways
	ck_rand "$CK_REF/f.bin" 3000000
	mkdir "$MN_MNT_A/d"
	cp "$CK_REF/f.bin" "$MN_MNT_A/d/f.bin"
	mn_see B d/f.bin
	assert_file_eq "$CK_REF/f.bin" "$MN_MNT_B/d/f.bin"
	ck_rand "$CK_REF/g.bin" 700000
	cp "$CK_REF/g.bin" "$MN_MNT_B/d/g.bin"
	mn_see A d/g.bin
	assert_file_eq "$CK_REF/g.bin" "$MN_MNT_A/d/g.bin"
	# a save across both nodes commits
	mkdir -p "$MN_MNT_A/run" "$CK_REF/ref"
	local out
	out=$(mn_dcp save "$CK_REF/ref" 100 "$MN_MNT_A/run,$MN_MNT_A/run,$MN_MNT_B/run,$MN_MNT_B/run" 2>&1) ||
		ck_fail "the 4-rank DCP save over A and the namespaced B failed: $(echo "$out" | tail -n 5 | tr '\n' '|')"
	assert_contains "$out" "state=committed" "rank 0's view of step-100"
	assert_eq committed "$(mn_gen_state "$MN_MNT_B" run/step-100)" "step-100 as node B sees it"
	# the next save: rank 2 holds its shard open on B when B's link is cut
	ck_bg setsid "$PY" "$CK_LIB_DIR/../multinode/helpers/mn_dcp.py" save "$CK_REF/ref" 200 \
		"$MN_MNT_A/run,$MN_MNT_A/run,$MN_MNT_B/run,$MN_MNT_B/run" --hang-rank 2 --ready "$CK_TMP/hang"
	local trainer=$CK_BG_PID
	ck_wait_file "$CK_TMP/hang" 120
	mn_netns cut
	mn_poll "SELECT state FROM ckpt_nodes WHERE name = 'node-B' ORDER BY id DESC LIMIT 1" expired 20 \
		"node B's state after its link was cut (lease $MN_LEASE_MS ms)"
	assert_eq 4 "$(mn_psql "SELECT state FROM ns_generations WHERE name = 'step-200'")" \
		"state of step-200 (4 = HELD) once B, which had a shard of it open, was swept"
	assert_not_contains " $(ls "$MN_MNT_A/run" | tr '\n' ' ') " " step-200 " "listing of run on A"
	# A goes on: a later save of its own commits
	out=$(mn_dcp save "$CK_REF/ref" 300 "$MN_MNT_A/run,$MN_MNT_A/run" 2>&1) ||
		ck_fail "node A's save while B is cut off failed: $(echo "$out" | tail -n 5 | tr '\n' '|')"
	assert_contains "$out" "state=committed" "step-300 on A"
	mn_netns heal
	ck_wait_log "$MN_DLOG_B" "the mount is read-only from now on" 30 ||
		ck_fail "node B did not find itself swept within 30 s of the heal"
	local err
	err=$(touch "$MN_MNT_B/d/new" 2>&1) && ck_fail "a create on the swept node B succeeded"
	assert_contains "$err" "Read-only file system" "create on the swept node"
	err=$(sh -c "echo x >>'$MN_MNT_B/d/f.bin'" 2>&1) && ck_fail "an append on the swept node B succeeded"
	assert_contains "$err" "Read-only file system" "append on the swept node"
	assert_file_eq "$CK_REF/f.bin" "$MN_MNT_B/d/f.bin"
	out=$(mn_dcp load "$CK_REF/ref" 300 "$MN_MNT_B/run" 2 2>&1) ||
		ck_fail "loading A's step-300 on the swept node B failed: $(echo "$out" | tail -n 5 | tr '\n' '|')"
	assert_contains "$out" "loaded step-300" "load on node B"
	# the writer of the held save goes away: its close on B commits nothing
	kill -9 -- -"$trainer" 2>/dev/null || true
	wait "$trainer" 2>/dev/null || true
	sleep 1
	assert_eq 4 "$(mn_psql "SELECT state FROM ns_generations WHERE name = 'step-200'")" \
		"state of step-200 after its writer on B was killed"
	assert_not_contains " $(ls "$MN_MNT_B/run" | tr '\n' ' ') " " step-200 " "listing of run on B"
	assert_eq 1 "$(grep -c "the mount is read-only from now on" "$MN_DLOG_B")" "lines B logged about being swept"
	mn_umount B
	mn_umount A
	mn_netns down
}
ck_timeout test_node_in_a_netns_cut_off_mid_save_is_fenced_and_unmounts 240

# (3) The other way out: node B, in its namespace, is unmounted while its
# link is still cut and after A swept it. Its calls meanwhile fail (ENOTCONN
# once meta_timeout_ms is spent, never a hang); the unmount ends the daemon
# with status 0 within seconds, its log saying it could not release its
# lease; A goes on writing, and what B wrote and uploaded before the cut
# reads back on A.
test_node_in_a_netns_unmounted_while_cut_off_exits_cleanly() {
	MN_LEASE_MS=2000 MN_META_TIMEOUT_MS=3000
	mn_netns_up
	mn_pg_start
	mn_mount A
	mn_mount_netns B
	ck_rand "$CK_REF/f.bin" 2000000
	mkdir "$MN_MNT_B/d"
	cp "$CK_REF/f.bin" "$MN_MNT_B/d/f.bin"
	mn_see A d/f.bin
	mn_poll "SELECT count(*) FROM ns_chunks WHERE NOT uploaded" 0 30 "chunks of B's file not yet on BACKING"
	mn_netns cut
	local t0=$SECONDS err
	err=$(touch "$MN_MNT_B/d/new" 2>&1) && ck_fail "a create on node B succeeded with its link cut"
	assert_le $((SECONDS - t0)) 40 "seconds a create on the cut-off node B took to fail"
	ck_log "a create on the cut-off node B: $err, after $((SECONDS - t0)) s"
	mn_poll "SELECT state FROM ckpt_nodes WHERE name = 'node-B'" expired 20 \
		"node B's state after its link was cut (lease $MN_LEASE_MS ms)"
	t0=$SECONDS
	mn_umount B
	# a hang detector, not a speed target: each PostgreSQL call of the
	# cut-off node waits its meta_timeout (3 s) before it gives up, and
	# the unmount makes about a dozen (35-42 s at load 10-13, old and new
	# builds alike; under 30 s on a quiet machine)
	assert_le $((SECONDS - t0)) 90 "seconds node B took to unmount with its link cut"
	assert_contains "$(cat "$MN_DLOG_B")" "could not release its lease" "node B's log"
	cp "$CK_REF/f.bin" "$MN_MNT_A/d/g.bin"
	assert_file_eq "$CK_REF/f.bin" "$MN_MNT_A/d/f.bin"
	assert_file_eq "$CK_REF/f.bin" "$MN_MNT_A/d/g.bin"
	assert_not_exists "$MN_MNT_A/d/new"
	mn_umount A
	mn_netns down
}
ck_timeout test_node_in_a_netns_unmounted_while_cut_off_exits_cleanly 180

# A fresh node C, its cache empty, loads step-100 bit for bit with 2 ranks
# (from the export alone once A and B are gone).
tr_load_on_fresh_c() {
	local out
	mn_mount C
	out=$(mn_dcp load "$CK_REF/ref" 100 "$MN_MNT_C/run" 2 2>&1) ||
		ck_fail "the 2-rank load on fresh node C failed: $(echo "$out" | tail -n 5 | tr '\n' '|')"
	assert_contains "$out" "loaded step-100" "load on node C"
	mn_umount C
}

# (4) Node B in its namespace over an nfs:// BACKING too: ganesha listens on
# the veth pair's host end (GANESHA_ADDR), which A on the host reaches
# locally and B over the link. A 4-rank save over A and B commits and is
# durable; B's NFS connection comes from the namespace's address; with A and
# B gone, a fresh node C with an empty cache loads the save bit for bit from
# the export alone, so B's shards (chunks only B held) went over the link.
test_node_in_a_netns_over_nfs_backing_saves_and_a_fresh_node_loads() {
	MN_LEASE_MS=2000
	mn_netns_up
	GANESHA_ADDR=$MN_HOST_IP mn_ganesha_start
	case $CK_BACKING in "nfs://$MN_HOST_IP:"*) ;; *) ck_fail "BACKING $CK_BACKING is not on $MN_HOST_IP" ;; esac
	mn_pg_start
	mn_mount A
	mn_mount_netns B
	mkdir -p "$MN_MNT_A/run" "$CK_REF/ref"
	local out port conns
	out=$(mn_dcp save "$CK_REF/ref" 100 "$MN_MNT_A/run,$MN_MNT_A/run,$MN_MNT_B/run,$MN_MNT_B/run" 2>&1) ||
		ck_fail "the 4-rank DCP save over A and the namespaced B on nfs:// failed: $(echo "$out" | tail -n 5 | tr '\n' '|')"
	assert_contains "$out" "state=committed" "rank 0's view of step-100"
	assert_eq committed "$(mn_gen_state "$MN_MNT_B" run/step-100)" "step-100 as node B sees it"
	out=$("$CKPTFS_ADMIN" wait "$MN_MNT_B" --timeout 120 2>&1) || ck_fail "ckptfs-admin wait on node B failed: $out"
	port=$(cat "$MN_NFSDIR/nfs.port")
	conns=$(nsenter --net="/run/netns/ckns-$MN_NETNS_KEY" ss -Htn state established "( dport = :$port )" | grep -c "$MN_NS_IP" || true)
	assert_ne 0 "$conns" "NFS connections from the namespace's address $MN_NS_IP to $MN_HOST_IP:$port"
	mn_umount B
	mn_umount A
	assert_eq 0 "$(mn_psql "SELECT count(*) FROM ns_chunks WHERE NOT uploaded")" "chunks not uploaded after both unmounts"
	assert_eq "$(mn_psql "SELECT count(*) FROM ns_chunks")" "$(mn_objects)" "chunk objects in the export"
	tr_load_on_fresh_c
	mn_ganesha_stop
	mn_netns down
}
ck_timeout test_node_in_a_netns_over_nfs_backing_saves_and_a_fresh_node_loads 240

# (5) Only BACKING's link is cut; PostgreSQL stays reachable. Node B, in
# its namespace, reaches PostgreSQL over the first veth pair and the nfs://
# BACKING over a second pair (ganesha listens on that pair's host end); the
# second link alone is cut. A 4-rank save over A and B then still commits
# (the catalog is up) and returns at local speed, but it is not durable:
# B's shards are only in B's cache, so `ckptfs-admin wait` on A times out
# (exit 9), and A reading B's shard gets EIO after backing_timeout, never
# other bytes. B keeps its lease (it is not swept: nothing is held or
# rolled back). Once the link is back B's uploads go on by themselves,
# `wait` exits 0, nothing is left unuploaded, and a fresh node C loads the
# save bit for bit from the export alone.
test_nfs_link_alone_cut_mid_save_delays_durable_and_loses_nothing() {
	MN_LEASE_MS=2000
	mn_netns_up
	mn_netns_up2
	GANESHA_ADDR=$MN_HOST_IP2 mn_ganesha_start
	mn_pg_start
	mn_mount A backing_timeout=4
	mn_mount_netns B backing_timeout=4
	mkdir -p "$MN_MNT_A/run" "$CK_REF/ref"
	mn_netns cut2
	local out t0=$SECONDS rc=0
	out=$(mn_dcp save "$CK_REF/ref" 100 "$MN_MNT_A/run,$MN_MNT_A/run,$MN_MNT_B/run,$MN_MNT_B/run" 2>&1) ||
		ck_fail "the 4-rank DCP save with B's NFS link cut failed: $(echo "$out" | tail -n 5 | tr '\n' '|')"
	assert_contains "$out" "state=committed" "rank 0's view of step-100 with B's NFS link cut"
	ck_log "the save with B's NFS link cut took $((SECONDS - t0)) s"
	assert_ne 0 "$(mn_psql "SELECT count(*) FROM ns_chunks WHERE NOT uploaded")" \
		"chunks not yet on BACKING with B's NFS link cut"
	out=$("$CKPTFS_ADMIN" wait "$MN_MNT_A" --timeout 6 2>&1) || rc=$?
	assert_eq 9 "$rc" "exit of ckptfs-admin wait on A while B's shards cannot reach BACKING ($out)"
	local shard=$MN_MNT_A/run/step-100/__2_0.distcp err
	[ -f "$shard" ] || ck_fail "rank 2's shard $shard is not listed on A"
	t0=$SECONDS
	err=$(cat "$shard" 2>&1 >/dev/null) && ck_fail "reading B's shard on A succeeded while its bytes were only in B's cache"
	assert_contains "$err" "Input/output error" "reading B's shard on A with B's NFS link cut"
	assert_le $((SECONDS - t0)) 30 "seconds A's read of B's shard took to fail (backing_timeout 4)"
	assert_eq live "$(mn_psql "SELECT state FROM ckpt_nodes WHERE name = 'node-B' ORDER BY id DESC LIMIT 1")" \
		"node B's state with its NFS link cut (lease $MN_LEASE_MS ms, PostgreSQL reachable)"
	assert_eq 1 "$(mn_psql "SELECT state FROM ns_generations WHERE name = 'step-100'")" \
		"state of step-100 (1 = COMMITTED) with B's NFS link cut"
	mn_netns heal2
	out=$("$CKPTFS_ADMIN" wait "$MN_MNT_A" --timeout 120 2>&1) ||
		ck_fail "ckptfs-admin wait on A after B's NFS link came back failed: $out"
	assert_eq 0 "$(mn_psql "SELECT count(*) FROM ns_chunks WHERE NOT uploaded")" \
		"chunks not on BACKING after the heal and wait"
	out=$(mn_dcp load "$CK_REF/ref" 100 "$MN_MNT_A/run" 2 2>&1) ||
		ck_fail "the 2-rank load on A after the heal failed: $(echo "$out" | tail -n 5 | tr '\n' '|')"
	assert_contains "$out" "loaded step-100" "load on node A"
	mn_umount B
	mn_umount A
	assert_eq "$(mn_psql "SELECT count(*) FROM ns_chunks")" "$(mn_objects)" "chunk objects in the export"
	tr_load_on_fresh_c
	mn_ganesha_stop
	mn_netns down
}
ck_timeout test_nfs_link_alone_cut_mid_save_delays_durable_and_loses_nothing 300

ck_main "$@"
