#!/usr/bin/env bash
# Installs the Debian packages ckptfs needs to build, test, demo and bench.
# Quiet and quick when everything is already there; needs root otherwise.
set -euo pipefail

need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for p in build-essential pkg-config libfuse3-dev fuse3 libsqlite3-dev sqlite3 liblz4-dev \
	 libssl-dev libcriterion-dev stress-ng python3-torch python3-numpy attr \
	 libnfs-dev libnfs-utils nfs-ganesha nfs-ganesha-vfs rpcbind libmicrohttpd-dev libblosc-dev libzstd-dev curl \
	 libpq-dev postgresql iproute2; do
	have_pkg "$p" || need+=("$p")
done
# make fuzz / fuzz-quick: clang with libFuzzer (its runtime is libclang-rt-14-dev).
for p in clang libclang-rt-14-dev; do
	have_pkg "$p" || need+=("$p")
done
# make check-docker parses docker/compose.yaml with /usr/bin/python3.
have_pkg python3-yaml || need+=(python3-yaml)
[ ${#need[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "ckptfs: missing packages: ${need[*]} (run as root, or: sudo apt-get install ${need[*]})" >&2
	exit 1
fi
echo "ckptfs: installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
