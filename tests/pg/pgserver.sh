#!/usr/bin/env bash
# pgserver.sh — a private PostgreSQL server for the tests (issue 18).
#
#   pgserver.sh start DIR [OWNER_PID]   initdb into DIR (made here, must not exist), start the
#                                       server on a Unix socket in DIR only (no TCP unless
#                                       PG_ADDR, below), print its libpq URL. With
#                                       OWNER_PID, a watchdog stops the server
#                                       and removes DIR once that process is gone, so a test
#                                       that dies on a signal leaves nothing running.
#   pgserver.sh stop DIR                stop the server (immediate) and remove DIR
#   pgserver.sh restart DIR             stop (fast) and start again, same socket and data
#   pgserver.sh kill DIR                stop immediately (as a crash would); keeps DIR
#   pgserver.sh resume DIR              start again after kill
#   pgserver.sh url DIR                 print the URL again
#   pgserver.sh socket-url DIR          print the URL of the socket in DIR (also when
#                                       the server listens on TCP as well)
#
# With PG_ADDR=IP in the environment of start, the server listens on IP (port
# 5432) as well as on the socket: the URL printed is then a TCP one, and the
# socket in DIR stays usable from here for the other "nodes". With
# PG_NETNS_KEY=KEY too (a namespace made by tests/pg/netns.sh up KEY, IP its
# address), the server runs in that namespace; without it, here (IP is then
# an address of this namespace, e.g. netns.sh's host end, which nodes in the
# namespace reach over the veth pair).
#
# As root, the server runs as the postgres user (initdb refuses root). The
# database is "ckptfs", owned by role "ckptfs", with trust authentication on
# the private socket only.
#
# start copies a template rather than running initdb: what initdb and CREATE
# DATABASE make is the same every time, and they took ~1.4 s of every start
# (a unit test of the shared catalog starts a server of its own, and so does
# every multinode case). The template is made once per PostgreSQL version and
# recipe, by the first start that finds none: initdb, CREATE DATABASE ckptfs,
# a clean stop, then renamed into place whole (a start never sees half of
# one; of two made at once, one stays). It is never changed after, and only
# copied; its own server is never started again.
#   PG_TEMPLATE=DIR    where it is (default /tmp/ckptfs-pg-template.VERSION.RECIPE.UID)
#   PG_TEMPLATE=none   initdb every time, as before
#
# The server's data directory (DIR/data) is a symbolic link to a directory
# of its own on a tmpfs (/dev/shm/ckptfs-pgdata.XXXXXX/data) when there is
# one, and stop and the watchdog remove both. On the root file system (ext4
# mounted with discard here) writing the copy's 1 271 files and removing
# them took 2-4 s of every start and stop under load (0.8-0.9 s of system
# time each); on tmpfs 0.1-0.2 s. The data of a test's server is never
# wanted after its test, and a server runs with fsync=off already.
#   PG_DATA_ROOT=DIR   where those directories go (default /dev/shm if it is
#                      a writable tmpfs)
#   PG_DATA_ROOT=none  the data directory in DIR itself, as before
set -euo pipefail

PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$PGBIN" ] || { echo "pgserver.sh: no PostgreSQL server under /usr/lib/postgresql (apt-get install postgresql)" >&2; exit 1; }
PORT=5432 # a socket in a private directory: the number names the socket file only

as_owner() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

net_env() { # DIR: PG_NETNS_KEY ("-" for none) and PG_ADDR as start saved them
	NETNS_KEY="" ADDR=""
	[ -f "$1/net.env" ] && read -r NETNS_KEY ADDR <"$1/net.env"
	[ "$NETNS_KEY" != - ] || NETNS_KEY=""
	return 0
}

pg_start() { # DIR
	net_env "$1"
	local in_ns=()
	[ -n "$NETNS_KEY" ] && in_ns=("$(dirname "$0")/netns.sh" exec "$NETNS_KEY")
	"${in_ns[@]}" $( [ "$(id -u)" -eq 0 ] && echo runuser -u postgres -- ) \
		"$PGBIN/pg_ctl" -D "$1/data" -l "$1/server.log" -w -t 30 \
		-o "-p $PORT -k $1 -c listen_addresses='$ADDR' -c fsync=off -c full_page_writes=off" start >/dev/null
}

initdb_into() { # DIR [INITDB_ARG...]: the cluster in DIR/data (no database ckptfs yet)
	local d=$1
	shift
	as_owner "$PGBIN/initdb" -D "$d/data" -A trust -U ckptfs --no-sync -E UTF8 "$@" >"$d/initdb.log" 2>&1 ||
		{ cat "$d/initdb.log" >&2; return 1; }
}

# Prints the template's directory (header), made first if there is none.
# RECIPE names what initdb_into and the lines below do: change it with them.
# WAL segments of 1 MiB, not 16: a third of what each start copies.
TEMPLATE_RECIPE=r2
template() {
	local tpl=${PG_TEMPLATE:-/tmp/ckptfs-pg-template.$(basename "$(dirname "$PGBIN")").$TEMPLATE_RECIPE.$(id -u)} new
	if [ ! -f "$tpl/ready" ]; then
		new=$(mktemp -d "$tpl.new.XXXXXX")
		[ "$(id -u)" -eq 0 ] && chown postgres: "$new"
		# its server stops with this script, also when that is killed
		trap 'as_owner "$PGBIN/pg_ctl" -D "$new/data" -m immediate stop >/dev/null 2>&1 || true' EXIT
		if ! initdb_into "$new" --wal-segsize=1 ||
			! as_owner "$PGBIN/pg_ctl" -D "$new/data" -l "$new/server.log" -w -t 30 \
				-o "-p $PORT -k $new -c listen_addresses='' -c fsync=off" start >/dev/null ||
			! as_owner "$PGBIN/psql" -h "$new" -p $PORT -U ckptfs -d postgres -qAt -c "CREATE DATABASE ckptfs" >/dev/null ||
			! as_owner "$PGBIN/pg_ctl" -D "$new/data" -m fast -w stop >/dev/null; then
			as_owner "$PGBIN/pg_ctl" -D "$new/data" -m immediate stop >/dev/null 2>&1 || true
			echo "pgserver.sh: could not make the template $tpl (logs in $new)" >&2
			return 1
		fi
		trap - EXIT
		rm -f "$new/server.log" "$new/initdb.log"
		touch "$new/ready"
		# another start made one meanwhile: keep that one
		mv -T "$new" "$tpl" 2>/dev/null || rm -rf "$new"
		[ -f "$tpl/ready" ] || { echo "pgserver.sh: $tpl: not a template (no file ready in it); remove it or set PG_TEMPLATE" >&2; return 1; }
	fi
	echo "$tpl"
}

socket_url() { echo "postgresql://ckptfs@/ckptfs?host=$1&port=$PORT"; }

# Prints where start puts the data directory's own directory (PG_DATA_ROOT
# above); nothing (status 1) when in DIR itself.
data_root() {
	local root=${PG_DATA_ROOT:-/dev/shm}
	[ "$root" != none ] || return 1
	if [ -z "${PG_DATA_ROOT:-}" ]; then
		[ -d "$root" ] && [ -w "$root" ] && [ "$(stat -f -c %T "$root" 2>/dev/null)" = tmpfs ] || return 1
	fi
	echo "$root"
}

# remove_dir DIR: DIR and the directory its data link points into (made by
# start: named ckptfs-pgdata.*, nothing else is removed through the link).
remove_dir() {
	local t
	t=$(readlink "$1/data" 2>/dev/null) || t=""
	case "$t" in
	*/ckptfs-pgdata.*/data) rm -rf "${t%/data}" ;;
	esac
	rm -rf "$1"
}

url() {
	net_env "$1"
	if [ -n "$ADDR" ]; then
		echo "postgresql://ckptfs@$ADDR:$PORT/ckptfs"
	else
		socket_url "$1"
	fi
}

cmd=${1:-} dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: pgserver.sh start|stop|restart|kill|resume|url|socket-url DIR [OWNER_PID]" >&2; exit 2; }
case "$cmd" in
start)
	mkdir "$dir" # fails if it exists: never start over someone's data
	[ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
	chmod 0700 "$dir"
	fresh=1
	home=$dir
	if root=$(data_root); then
		home=$(mktemp -d "$root/ckptfs-pgdata.XXXXXX")
		[ "$(id -u)" -eq 0 ] && chown postgres: "$home"
		chmod 0700 "$home"
		# a start that fails leaves DIR (its logs) but not the data
		trap '[ -d "$dir/data" ] || rm -rf "$home"' EXIT
	fi
	if [ "${PG_TEMPLATE:-}" != none ]; then
		tpl=$(template) || exit 1
		as_owner cp -a "$tpl/data" "$home/data"
		fresh=0
	else
		initdb_into "$home"
	fi
	[ "$home" = "$dir" ] || ln -s "$home/data" "$dir/data"
	trap - EXIT
	if [ -n "${PG_NETNS_KEY:-}" ] || [ -n "${PG_ADDR:-}" ]; then
		echo "${PG_NETNS_KEY:--} ${PG_ADDR:?PG_ADDR with PG_NETNS_KEY}" >"$dir/net.env"
		echo "host all all 0.0.0.0/0 trust" >>"$dir/data/pg_hba.conf"
	fi
	pg_start "$dir"
	[ $fresh = 0 ] || as_owner "$PGBIN/psql" -h "$dir" -p $PORT -U ckptfs -d postgres -qAt -c "CREATE DATABASE ckptfs" >/dev/null
	if [ -n "${3:-}" ]; then
		owner=$3
		( trap '' HUP INT TERM
		  while kill -0 "$owner" 2>/dev/null && [ -d "$dir/data" ]; do sleep 0.5; done
		  if [ -d "$dir/data" ]; then
			as_owner "$PGBIN/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
			remove_dir "$dir"
		  fi ) </dev/null >/dev/null 2>&1 &
		disown
	fi
	url "$dir"
	;;
stop)
	[ -d "$dir/data" ] || exit 0
	as_owner "$PGBIN/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
	remove_dir "$dir"
	;;
restart)
	as_owner "$PGBIN/pg_ctl" -D "$dir/data" -m fast stop >/dev/null
	pg_start "$dir"
	;;
kill)
	as_owner "$PGBIN/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null
	;;
resume)
	pg_start "$dir"
	;;
url) url "$dir" ;;
socket-url) socket_url "$dir" ;;
*) echo "pgserver.sh: unknown command $cmd" >&2; exit 2 ;;
esac
