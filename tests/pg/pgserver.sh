#!/usr/bin/env bash
# pgserver.sh — a private PostgreSQL server for the tests (issue 18).
#
#   pgserver.sh start DIR [OWNER_PID]   initdb into DIR (made here, must not exist), start the
#                                       server on a Unix socket in DIR only (no TCP), print its
#                                       libpq URL. With OWNER_PID, a watchdog stops the server
#                                       and removes DIR once that process is gone, so a test
#                                       that dies on a signal leaves nothing running.
#   pgserver.sh stop DIR                stop the server (immediate) and remove DIR
#   pgserver.sh restart DIR             stop (fast) and start again, same socket and data
#   pgserver.sh kill DIR                stop immediately (as a crash would); keeps DIR
#   pgserver.sh resume DIR              start again after kill
#   pgserver.sh url DIR                 print the URL again
#
# As root, the server runs as the postgres user (initdb refuses root). The
# database is "ckptfs", owned by role "ckptfs", with trust authentication on
# the private socket only.
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

pg_start() { # DIR
	as_owner "$PGBIN/pg_ctl" -D "$1/data" -l "$1/server.log" -w -t 30 \
		-o "-p $PORT -k $1 -c listen_addresses='' -c fsync=off -c full_page_writes=off" start >/dev/null
}

url() { echo "postgresql://ckptfs@/ckptfs?host=$1&port=$PORT"; }

cmd=${1:-} dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: pgserver.sh start|stop|restart|kill|resume|url DIR [OWNER_PID]" >&2; exit 2; }
case "$cmd" in
start)
	mkdir "$dir" # fails if it exists: never start over someone's data
	[ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
	chmod 0700 "$dir"
	as_owner "$PGBIN/initdb" -D "$dir/data" -A trust -U ckptfs --no-sync -E UTF8 >"$dir/initdb.log" 2>&1 ||
		{ cat "$dir/initdb.log" >&2; exit 1; }
	pg_start "$dir"
	as_owner "$PGBIN/psql" -h "$dir" -p $PORT -U ckptfs -d postgres -qAt -c "CREATE DATABASE ckptfs" >/dev/null
	if [ -n "${3:-}" ]; then
		owner=$3
		( trap '' HUP INT TERM
		  while kill -0 "$owner" 2>/dev/null && [ -d "$dir/data" ]; do sleep 0.5; done
		  if [ -d "$dir/data" ]; then
			as_owner "$PGBIN/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
			rm -rf "$dir"
		  fi ) </dev/null >/dev/null 2>&1 &
		disown
	fi
	url "$dir"
	;;
stop)
	[ -d "$dir/data" ] || exit 0
	as_owner "$PGBIN/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
	rm -rf "$dir"
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
*) echo "pgserver.sh: unknown command $cmd" >&2; exit 2 ;;
esac
