#!/usr/bin/env bash
# scripts/build-deb.sh [OUT_DIR] — builds the Debian package (`make deb`).
#
# The repository keeps its top-level layout (fs/ meta/ tools/ tests/ docker/
# docs/ scripts/ Makefile README.md), so the packaging lives in
# scripts/debian/. This copies the sources the package is built from into
# OUT_DIR/ckptfs-VERSION/, puts scripts/debian/ there as debian/, and runs
# dpkg-buildpackage (binary only, unsigned). The results land in OUT_DIR
# (default build/deb): ckptfs_VERSION_ARCH.deb, its -dbgsym .deb, .buildinfo
# and .changes, then runs lintian on the .deb (errors fail). The version is the one in fs/lib/version.h (CKPTFS_VERSION),
# which must match the top entry of scripts/debian/changelog.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-build/deb}
case $out in /*) ;; *) out=$repo/$out ;; esac

version=$(sed -n 's/^#define CKPTFS_VERSION "\(.*\)"$/\1/p' "$repo/fs/lib/version.h")
[ -n "$version" ] || { echo "build-deb: no CKPTFS_VERSION in fs/lib/version.h" >&2; exit 1; }
chver=$(dpkg-parsechangelog -l "$repo/scripts/debian/changelog" -S Version)
if [ "$chver" != "$version" ]; then
	echo "build-deb: scripts/debian/changelog is at $chver, fs/lib/version.h at $version: add a changelog entry (dch -v $version)" >&2
	exit 1
fi

rm -rf "$out"
tree=$out/ckptfs-$version
mkdir -p "$tree"
# what the build and `make install` read; not tests/, docker/ or build trees
cp -a "$repo/Makefile" "$repo/README.md" "$repo/fs" "$repo/meta" "$repo/tools" "$repo/docs" "$tree/"
mkdir -p "$tree/scripts"
cp -a "$repo/scripts/mount.ckptfs" "$tree/scripts/"
cp -a "$repo/scripts/debian" "$tree/debian"

cd "$tree"
# -b: binary only (a native source tarball is not wanted here); -us -uc: unsigned
nice dpkg-buildpackage -b -us -uc -j"$(nproc)" >"$out/build.log" 2>&1 || {
	tail -n 40 "$out/build.log" >&2
	echo "build-deb: dpkg-buildpackage failed (full log: $out/build.log)" >&2
	exit 1
}
cd "$out"
rm -rf "$tree"
deb=$(ls "$out"/ckptfs_"$version"_*.deb)
echo "$deb"
# lintian: errors fail `make deb`; warnings and info are shown
if command -v lintian >/dev/null; then
	lintian --fail-on error --display-info "$deb" 2> >(grep -v 'running with root privileges' >&2) || {
		echo "build-deb: lintian reports errors for $deb" >&2
		exit 1
	}
	echo "lintian: no errors"
else
	echo "build-deb: lintian is not installed; $deb not checked (scripts/install-pkg-deps.sh)" >&2
fi
