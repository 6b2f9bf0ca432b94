# mn.sh — what the multi-node groups (tests/multinode/t_*.sh) add to
# tests/integration/lib.sh: a private PostgreSQL 15 for the case
# (tests/pg/pgserver.sh) and several ckptfs daemons on this machine as
# nodes A, B, C of one shared catalog (-o meta=), each with its own cache
# and mountpoint, over the case's one BACKING.
#
#   mn_pg_start            starts the server; MN_URL is its libpq URL (its socket);
#                          with MN_PG_ADDR=IP it listens on IP too, MN_URL_NET
#                          is then the TCP URL (for nodes in a namespace)
#   mn_pg restart|kill|resume   what pgserver.sh does to it
#   mn_mount X [OPTS]      mounts node X (A, B, C) at $CK_TMP/mnt_X, cache
#                          $CK_TMP/cache_X; MN_MNT_X and MN_PID_X name them
#   mn_umount X            unmounts it; the daemon must exit with status 0
#   mn_kill9 X             SIGKILL of node X's daemon, its mount cleared
#   mn_psql SQL            one query on the shared catalog, unaligned
#   mn_see X PATH [S]      polls up to S seconds (default 1) until PATH, as
#                          node X's mount sees it, exists; fails otherwise
#   mn_poll SQL WANT S WHAT, mn_until SQL   poll the shared catalog
#   mn_save X DIR FILE BYTES SEED   a save of one file, committed explicitly
#   mn_gen_state MNT PATH, mn_entries DIR   what a mount shows
#   mn_ganesha_start       a private NFSv3 ganesha (tests/nfs/ganesha.sh):
#                          CK_BACKING becomes its nfs:// URL, MN_EXPORT the
#                          exported directory; mn_ganesha_stop stops it
#   mn_netns_up            a network namespace joined to this one by a veth
#                          pair (tests/pg/netns.sh): MN_NETNS_KEY, MN_HOST_IP
#                          (this end), MN_NS_IP; mn_netns cut|heal|down
#   mn_netns_up2           a second veth pair into that namespace, for
#                          NFS alone: MN_HOST_IP2, MN_NS_IP2; mn_netns cut2|heal2
#   mn_mount_netns X [OPTS]  as mn_mount, with node X's daemon in that
#                          namespace (nsenter --net: the mount namespace is
#                          this one's, so the mount is seen here), reaching
#                          PostgreSQL at MN_URL_NET over the veth pair
#
# Stopping everything on every path: lib.sh's EXIT trap unmounts and kills
# every daemon the case started (each is a ck_mount), and pgserver.sh's
# watchdog stops the server and removes its directory once the case's
# process is gone, which is after the daemons (they still need it to stop).
# ganesha and the namespace have watchdogs of the same kind (the
# namespace's also kills -9 whatever still runs in it).
. "$(dirname "$0")/../integration/lib.sh"

MN_PGSERVER=$CK_REPO/tests/pg/pgserver.sh
MN_LEASE_MS=${MN_LEASE_MS:-3000}
MN_META_TIMEOUT_MS=${MN_META_TIMEOUT_MS:-20000}

mn_pg_start() {
	[ -x "$MN_PGSERVER" ] || ck_fail "$MN_PGSERVER is missing"
	ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1 || ck_skip "no PostgreSQL server (apt-get install postgresql)"
	MN_PGDIR=$(mktemp -u /tmp/ckptfs-mn-pg.XXXXXX)
	MN_URL_NET=$(PG_ADDR=${MN_PG_ADDR:-} "$MN_PGSERVER" start "$MN_PGDIR" $$) ||
		ck_fail "could not start PostgreSQL in $MN_PGDIR"
	_ck_state "pgdir $MN_PGDIR"
	MN_URL=$("$MN_PGSERVER" socket-url "$MN_PGDIR")
	ck_log "PostgreSQL: $MN_URL${MN_PG_ADDR:+ and $MN_URL_NET}"
}

mn_pg() { "$MN_PGSERVER" "$1" "$MN_PGDIR" >/dev/null || ck_fail "pgserver.sh $1 failed"; }

mn_psql() {
	local bin
	bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
	runuser -u postgres -- "$bin/psql" -h "$MN_PGDIR" -p 5432 -U ckptfs -d ckptfs -qAt -c "$1"
}

# mn_mount X [OPTS]: a node of the shared catalog MN_URL (_MN_NODE_URL
# when set: mn_mount_netns).
mn_mount() {
	local x=$1 extra=${2:-}
	mkdir -p "$CK_TMP/mnt_$x" "$CK_TMP/cache_$x"
	chmod 755 "$CK_TMP/mnt_$x"
	CK_MNT=$CK_TMP/mnt_$x CK_CACHE=$CK_TMP/cache_$x
	ck_mount "meta=${_MN_NODE_URL:-$MN_URL},node_name=node-$x,lease_ms=$MN_LEASE_MS,meta_timeout_ms=$MN_META_TIMEOUT_MS${extra:+,$extra}"
	printf -v "MN_MNT_$x" '%s' "$CK_MNT"
	printf -v "MN_PID_$x" '%s' "$CK_PID"
	printf -v "MN_DERR_$x" '%s' "$CK_DERR"
	printf -v "MN_DLOG_$x" '%s' "$CK_DLOG"
}

# Makes node X the one ck_umount / ck_kill9 act on.
_mn_select() {
	local v
	v=MN_PID_$1 && CK_PID=${!v}
	v=MN_MNT_$1 && CK_MNT=${!v}
	v=MN_DERR_$1 && CK_DERR=${!v}
	v=MN_DLOG_$1 && CK_DLOG=${!v}
	CK_CACHE=$CK_TMP/cache_$1
}

mn_umount() { _mn_select "$1" && ck_umount; }
mn_kill9() { local x=$1 && shift && _mn_select "$x" && ck_kill9 "$@"; }

mn_see() {
	local x=$1 path=$2 t=${3:-1} v i=0
	v=MN_MNT_$x
	while [ ! -e "${!v}/$path" ]; do
		i=$((i + 1))
		[ $i -le $((t * 50)) ] || ck_fail "node $x does not see $path within ${t}s"
		sleep 0.02
	done
}

# mn_poll SQL WANT S WHAT: polls the shared catalog every 0.1 s until SQL
# prints WANT, for up to S seconds; fails naming WHAT otherwise.
mn_poll() {
	local sql=$1 want=$2 t=$3 what=$4 i=0 got
	until got=$(mn_psql "$sql") && [ "$got" = "$want" ]; do
		i=$((i + 1))
		[ $i -le $((t * 10)) ] || ck_fail "$what: expected '$want' within ${t}s, got '$got'"
		sleep 0.1
	done
}

# mn_until SQL: polls up to 30 s until SQL (on the shared catalog) says t.
mn_until() { mn_poll "$1" t 30 "$1"; }

# mn_gen_state MNT PATH: state= of PATH's user.ckptfs.generation, "" if none.
mn_gen_state() {
	getfattr --only-values -n user.ckptfs.generation "$1/$2" 2>/dev/null | tr ' ' '\n' | sed -n 's/^state=//p'
}

# mn_entries DIR: its entries, sorted, on one line.
mn_entries() { ls -A "$1" | sort -V | tr '\n' ' ' | sed 's/ $//'; }

# mn_dcp ARGS: the DCP helper, helpers/mn_dcp.py, under $PY (lib.sh).
mn_dcp() { "$PY" "$CK_LIB_DIR/../multinode/helpers/mn_dcp.py" "$@"; }

# mn_save X DIR FILE BYTES SEED: node X writes DIR/FILE (BYTES random bytes,
# kept as $CK_TMP/SEED.bin) in a new directory DIR and commits it explicitly.
mn_save() {
	local v=MN_MNT_$1
	mkdir -p "${!v}/$2"
	head -c "$4" /dev/urandom >"$CK_TMP/$5.bin"
	cp "$CK_TMP/$5.bin" "${!v}/$2/$3"
	setfattr -n user.ckptfs.commit -v 1 "${!v}/$2" || ck_fail "commit of $2 on node $1"
}

# mn_objects: chunk objects on BACKING (the export's directory for nfs://).
mn_objects() { find "${MN_EXPORT:-$CK_BACKING}/chunks" -type f 2>/dev/null | wc -l; }

# ---- BACKING over nfs:// (tests/nfs/ganesha.sh)

MN_GANESHA=$CK_REPO/tests/nfs/ganesha.sh

# Stops ganesha once PID is gone (the case's process, whose EXIT trap has
# unmounted the daemons by then: they need the export to stop).
_mn_ganesha_watchdog() {
	local owner=$1 dir=$2
	( trap '' HUP INT TERM
	  while kill -0 "$owner" 2>/dev/null && [ -d "$dir" ]; do sleep 0.5; done
	  "$MN_GANESHA" stop "$dir" >/dev/null 2>&1
	  rm -rf "$dir" ) </dev/null >/dev/null 2>&1 &
	disown
}

mn_ganesha_start() {
	command -v ganesha.nfsd >/dev/null || ck_skip "nfs-ganesha is not installed (apt-get install nfs-ganesha nfs-ganesha-vfs)"
	MN_NFSDIR=$(mktemp -d /tmp/ckptfs-mn-nfs.XXXXXX)
	_mn_ganesha_watchdog $$ "$MN_NFSDIR"
	CK_BACKING=$("$MN_GANESHA" start "$MN_NFSDIR" 2>"$CK_TMP/ganesha.err") ||
		ck_fail "ganesha did not start: $(tail -n 3 "$CK_TMP/ganesha.err" | tr '\n' '|')"
	MN_EXPORT=$MN_NFSDIR/export
	ck_log "BACKING: $CK_BACKING"
}

mn_ganesha_stop() { "$MN_GANESHA" stop "$MN_NFSDIR" >/dev/null || ck_fail "ganesha.sh stop failed"; }

# ---- a node in its own network namespace (tests/pg/netns.sh)
#
# `ip netns exec` gives the command a mount namespace of its own (it
# remounts /sys), so a FUSE mount its daemon makes is not seen here.
# `nsenter --net=/run/netns/NAME` changes the network namespace only, and
# execs the daemon in place: the mount is in this mount namespace and the
# PID ck_mount records is the daemon's.

MN_NETNS=$CK_REPO/tests/pg/netns.sh

mn_netns_up() {
	command -v nsenter >/dev/null || ck_skip "nsenter is not installed (util-linux)"
	command -v ip >/dev/null || ck_skip "ip is not installed (iproute2)"
	MN_NETNS_KEY=$(($$ % 32768))
	local ips
	# on failure, no down: the namespace may be another test's of the same key
	ips=$("$MN_NETNS" up "$MN_NETNS_KEY" $$ 2>"$CK_TMP/netns.err") ||
		ck_fail "netns.sh up $MN_NETNS_KEY failed: $(tail -n 2 "$CK_TMP/netns.err" | tr '\n' '|')"
	read -r MN_HOST_IP MN_NS_IP <<<"$ips"
	MN_PG_ADDR=$MN_HOST_IP
	ck_log "namespace ckns-$MN_NETNS_KEY: $MN_NS_IP, reached from $MN_HOST_IP"
}

mn_netns() { "$MN_NETNS" "$1" "$MN_NETNS_KEY" || ck_fail "netns.sh $1 $MN_NETNS_KEY failed"; }

mn_netns_up2() {
	local ips
	ips=$("$MN_NETNS" up2 "$MN_NETNS_KEY" 2>"$CK_TMP/netns2.err") ||
		ck_fail "netns.sh up2 $MN_NETNS_KEY failed: $(tail -n 2 "$CK_TMP/netns2.err" | tr '\n' '|')"
	read -r MN_HOST_IP2 MN_NS_IP2 <<<"$ips"
	ck_log "namespace ckns-$MN_NETNS_KEY: also $MN_NS_IP2, reached from $MN_HOST_IP2"
}

# mn_mount_netns X [OPTS] — ck_mount runs CKPTFS_BIN: here a wrapper that
# execs the daemon through nsenter.
mn_mount_netns() {
	[ -n "${MN_URL_NET:-}" ] && [ "$MN_URL_NET" != "$MN_URL" ] || ck_fail "mn_mount_netns: PostgreSQL listens on no TCP address (mn_netns_up before mn_pg_start)"
	local bin=$CKPTFS_BIN
	export MN_NETNS_PATH=/run/netns/ckns-$MN_NETNS_KEY MN_NETNS_BIN=$bin
	CKPTFS_BIN=$CK_LIB_DIR/../multinode/helpers/mn_netns_exec.sh _MN_NODE_URL=$MN_URL_NET
	mn_mount "$@"
	CKPTFS_BIN=$bin _MN_NODE_URL=
	export -n MN_NETNS_PATH MN_NETNS_BIN
}
