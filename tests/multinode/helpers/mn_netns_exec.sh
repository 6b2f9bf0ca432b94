#!/bin/bash
# mn_netns_exec.sh ARGS... — runs the daemon MN_NETNS_BIN with ARGS in the
# network namespace MN_NETNS_PATH (/run/netns/NAME) and in this mount
# namespace (nsenter --net only), in place of this process: its PID is the
# daemon's. mn.sh's mn_mount_netns sets both variables.
set -eu
exec nsenter --net="${MN_NETNS_PATH:?}" -- "${MN_NETNS_BIN:?}" "$@"
