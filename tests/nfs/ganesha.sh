#!/usr/bin/env bash
# ganesha.sh start|stop|url DIR — a private NFSv3 server for the nfs:// tests.
#
# start: runs nfs-ganesha (FSAL VFS, NFSv3 over TCP only, 127.0.0.1 only) with
#   its own config, pid file, log and recovery directory under DIR, exporting
#   DIR/export (NFSv3 mounts it by that path; subdirectories mount too). Starts rpcbind first if none is running (ganesha
#   registers its programs there) and remembers that it did. Waits until the
#   export answers (nfs-ls) and prints the URL:
#       nfs://127.0.0.1:NFSPORT/DIR/export?mountport=MNTPORT
#   Both ports are given, so a libnfs client needs no portmapper round trip.
#   A restart (stop, then start on the same DIR) keeps the exported files and
#   the ports.
# stop: terminates what start started, by PID (ganesha, and rpcbind only if
#   start started it), waiting for it to exit. Quiet if nothing runs.
# url: prints the URL of a running server.
#
# Environment: GANESHA_WAIT (seconds to wait for the export, default 30);
# GANESHA_ADDR (the one address it listens on and the URL names, default
# 127.0.0.1: a veth pair's host end, for a client in a network namespace).
set -euo pipefail
addr=${GANESHA_ADDR:-127.0.0.1}

usage() { echo "usage: $0 start|stop|url DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
cmd=$1
dir=$2
case "$dir" in /*) ;; *) dir="$PWD/$dir" ;; esac

die() { echo "ganesha.sh: $*" >&2; exit 1; }

pid_alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }

# Picks a TCP port nobody listens on, from the kernel's ephemeral allocator.
free_port() {
	/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("'"$addr"'",0)); print(s.getsockname()[1])'
}

# NFSv3 clients mount the export by its real path (Pseudo is an NFSv4 name).
url_of() { echo "nfs://$addr:$(cat "$dir/nfs.port")$dir/export?mountport=$(cat "$dir/mnt.port")"; }

# Stops one process by PID file: SIGTERM, then SIGKILL after 10 s.
stop_pidfile() {
	local f=$1 what=$2 pid
	[ -f "$f" ] || return 0
	pid=$(cat "$f" 2>/dev/null || true)
	if pid_alive "$pid"; then
		kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq 100); do pid_alive "$pid" || break; sleep 0.1; done
		if pid_alive "$pid"; then
			echo "ganesha.sh: $what (pid $pid) ignored SIGTERM for 10 s; killing it" >&2
			kill -KILL "$pid" 2>/dev/null || true
			for _ in $(seq 50); do pid_alive "$pid" || break; sleep 0.1; done
		fi
	fi
	rm -f "$f"
}

start_rpcbind() {
	if pgrep -x rpcbind >/dev/null 2>&1; then
		return 0
	fi
	command -v rpcbind >/dev/null || [ -x /usr/sbin/rpcbind ] || die "rpcbind is not installed (apt-get install rpcbind)"
	mkdir -p /run/rpcbind
	# -f: foreground, so that $! is rpcbind itself and we can stop it by PID.
	/usr/sbin/rpcbind -f -w >"$dir/rpcbind.log" 2>&1 &
	echo $! >"$dir/rpcbind.pid"
	for _ in $(seq 50); do
		[ -S /run/rpcbind.sock ] && return 0
		pid_alive "$(cat "$dir/rpcbind.pid")" || die "rpcbind exited at start: $(tail -3 "$dir/rpcbind.log")"
		sleep 0.1
	done
	die "rpcbind did not create /run/rpcbind.sock within 5 s"
}

write_config() {
	cat >"$dir/ganesha.conf" <<CONF
# Written by tests/nfs/ganesha.sh — a private NFSv3 server on one address.
NFS_CORE_PARAM {
	Protocols = 3;
	Bind_addr = $addr;
	NFS_Port = $(cat "$dir/nfs.port");
	MNT_Port = $(cat "$dir/mnt.port");
	Enable_NLM = false;
	Enable_RQUOTA = false;
	Enable_UDP = false;
}
NFSV4 {
	Graceless = true;
	RecoveryBackend = fs;
	RecoveryRoot = "$dir/recovery";
}
EXPORT_DEFAULTS {
	Access_Type = RW;
	Squash = No_Root_Squash;
}
EXPORT {
	Export_Id = 77;
	Path = "$dir/export";
	Pseudo = /export;
	Protocols = 3;
	Transports = TCP;
	Access_Type = RW;
	Squash = No_Root_Squash;
	SecType = sys;
	FSAL { Name = VFS; }
}
LOG {
	Default_Log_Level = EVENT;
}
CONF
}

do_start() {
	command -v ganesha.nfsd >/dev/null || die "ganesha.nfsd is not installed (apt-get install nfs-ganesha nfs-ganesha-vfs)"
	command -v nfs-ls >/dev/null || die "nfs-ls is not installed (apt-get install libnfs-utils)"
	mkdir -p "$dir/export" "$dir/recovery"
	if pid_alive "$(cat "$dir/ganesha.pid" 2>/dev/null || true)"; then
		die "a ganesha from $dir already runs (pid $(cat "$dir/ganesha.pid")); stop it first"
	fi
	[ -s "$dir/nfs.port" ] || free_port >"$dir/nfs.port"
	[ -s "$dir/mnt.port" ] || free_port >"$dir/mnt.port"
	start_rpcbind
	write_config
	: >>"$dir/ganesha.log"
	# -F keeps it in the foreground so $! is ganesha's PID; -p keeps its pid
	# file out of /var/run/ganesha, which may not exist.
	ganesha.nfsd -F -f "$dir/ganesha.conf" -L "$dir/ganesha.log" -p "$dir/ganesha.pid.own" -N NIV_EVENT \
		</dev/null >>"$dir/ganesha.out" 2>&1 &
	local pid=$!
	echo "$pid" >"$dir/ganesha.pid"
	local url wait=${GANESHA_WAIT:-30} t0=$SECONDS
	url=$(url_of)
	local lsurl="nfs://$addr$dir/export?nfsport=$(cat "$dir/nfs.port")&mountport=$(cat "$dir/mnt.port")&version=3"
	while :; do
		if ! pid_alive "$pid"; then
			do_stop
			die "ganesha exited at start; last log lines:
$(tail -n 8 "$dir/ganesha.log" "$dir/ganesha.out" 2>/dev/null)"
		fi
		if timeout 5 nfs-ls "$lsurl" >/dev/null 2>&1; then
			break
		fi
		if [ $((SECONDS - t0)) -ge "$wait" ]; then
			do_stop
			die "the export $url did not answer within $wait s; last log lines:
$(tail -n 8 "$dir/ganesha.log" 2>/dev/null)"
		fi
		sleep 0.3
	done
	echo "$url"
}

do_stop() {
	stop_pidfile "$dir/ganesha.pid" ganesha
	rm -f "$dir/ganesha.pid.own"
	stop_pidfile "$dir/rpcbind.pid" rpcbind
}

case "$cmd" in
start) do_start ;;
stop) do_stop ;;
url) pid_alive "$(cat "$dir/ganesha.pid" 2>/dev/null || true)" || die "no ganesha runs from $dir"; url_of ;;
*) usage ;;
esac
