#!/bin/bash
# ganesha-entrypoint — starts rpcbind, then nfs-ganesha in the foreground,
# logging to the container's stdout.
set -euo pipefail
mkdir -p /export /run/rpcbind /var/run/ganesha /var/lib/nfs/ganesha
rpcbind -w
exec ganesha.nfsd -F -f /etc/ganesha/ganesha.conf -L /dev/stdout -N NIV_EVENT
