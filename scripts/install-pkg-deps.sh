#!/usr/bin/env bash
# Installs the Debian packages `make deb` and `make test-deb` need on top of
# scripts/install-deps.sh (the build dependencies): dpkg-dev, debhelper and
# fakeroot to build the .deb, lintian to check it, man-db for `man -w`.
# Kept apart so `make`, `make test-unit` & co. do not pull in lintian's Perl
# stack for nothing. Quiet and quick when everything is there; root otherwise.
set -euo pipefail

need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for p in dpkg-dev debhelper fakeroot lintian man-db; do
	have_pkg "$p" || need+=("$p")
done
[ ${#need[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "ckptfs: missing packages for make deb: ${need[*]} (run as root, or: sudo apt-get install ${need[*]})" >&2
	exit 1
fi
echo "ckptfs: installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
