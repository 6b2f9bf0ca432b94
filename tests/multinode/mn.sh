# mn.sh — what the multi-node groups (tests/multinode/t_*.sh) add to
# tests/integration/lib.sh: a private PostgreSQL 15 for the case
# (tests/pg/pgserver.sh) and several ckptfs daemons on this machine as
# nodes A, B, C of one shared catalog (-o meta=), each with its own cache
# and mountpoint, over the case's one BACKING.
#
#   mn_pg_start            starts the server; MN_URL is its libpq URL
#   mn_pg restart|kill|resume   what pgserver.sh does to it
#   mn_mount X [OPTS]      mounts node X (A, B, C) at $CK_TMP/mnt_X, cache
#                          $CK_TMP/cache_X; MN_MNT_X and MN_PID_X name them
#   mn_umount X            unmounts it; the daemon must exit with status 0
#   mn_kill9 X             SIGKILL of node X's daemon, its mount cleared
#   mn_psql SQL            one query on the shared catalog, unaligned
#   mn_see X PATH [S]      polls up to S seconds (default 1) until PATH, as
#                          node X's mount sees it, exists; fails otherwise
#
# Stopping everything on every path: lib.sh's EXIT trap unmounts and kills
# every daemon the case started (each is a ck_mount), and pgserver.sh's
# watchdog stops the server and removes its directory once the case's
# process is gone, which is after the daemons (they still need it to stop).
. "$(dirname "$0")/../integration/lib.sh"

MN_PGSERVER=$CK_REPO/tests/pg/pgserver.sh
MN_LEASE_MS=${MN_LEASE_MS:-3000}
MN_META_TIMEOUT_MS=${MN_META_TIMEOUT_MS:-20000}

mn_pg_start() {
	[ -x "$MN_PGSERVER" ] || ck_fail "$MN_PGSERVER is missing"
	ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1 || ck_skip "no PostgreSQL server (apt-get install postgresql)"
	MN_PGDIR=$(mktemp -u /tmp/ckptfs-mn-pg.XXXXXX)
	MN_URL=$("$MN_PGSERVER" start "$MN_PGDIR" $$) || ck_fail "could not start PostgreSQL in $MN_PGDIR"
	_ck_state "pgdir $MN_PGDIR"
	ck_log "PostgreSQL: $MN_URL"
}

mn_pg() { "$MN_PGSERVER" "$1" "$MN_PGDIR" >/dev/null || ck_fail "pgserver.sh $1 failed"; }

mn_psql() {
	local bin
	bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
	runuser -u postgres -- "$bin/psql" -h "$MN_PGDIR" -p 5432 -U ckptfs -d ckptfs -qAt -c "$1"
}

# mn_mount X [OPTS]: a node of the shared catalog MN_URL.
mn_mount() {
	local x=$1 extra=${2:-}
	mkdir -p "$CK_TMP/mnt_$x" "$CK_TMP/cache_$x"
	chmod 755 "$CK_TMP/mnt_$x"
	CK_MNT=$CK_TMP/mnt_$x CK_CACHE=$CK_TMP/cache_$x
	ck_mount "meta=$MN_URL,node_name=node-$x,lease_ms=$MN_LEASE_MS,meta_timeout_ms=$MN_META_TIMEOUT_MS${extra:+,$extra}"
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

# mn_objects: chunk objects on BACKING.
mn_objects() { find "$CK_BACKING/chunks" -type f 2>/dev/null | wc -l; }
