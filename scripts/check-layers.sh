#!/usr/bin/env bash
# check-layers — the include directions of docs/DESIGN.md "Layers", checked.
#
#   fs/lib/  (library)  may include fs/lib/ only
#   meta/    (catalog)  may include meta/, fs/lib/
#   tools/   (admin)    may include tools/, meta/, fs/lib/ and the headers of
#                       the daemon modules ckptfs-admin links (SHARED below)
#   fs/      (daemon)   may include anything but tools/
#
# A quoted include is resolved as the compiler does with the Makefile's
# CFLAGS: the including file's own folder first, then -I. -Ifs/lib -Ifs -Imeta.
# Prints each include that breaks a rule; exits 1 if there is one.
set -euo pipefail
cd "$(dirname "$0")/.."

# fs/ modules built into ckptfs-admin too (Makefile SHARED_SRC), whose headers tools/ may use.
SHARED="fs/rebuild.h fs/statset.h"

resolve() { # FILE INCLUDE -> the path it names, or nothing if none is in the tree
	local d
	for d in "$(dirname "$1")" . fs/lib fs meta; do
		if [ -f "$d/$2" ]; then
			realpath --relative-to=. "$d/$2"
			return
		fi
	done
}

allowed() { # FROM TO
	case "$1" in
	fs/lib/*) case "$2" in fs/lib/*) return 0 ;; esac ;;
	meta/*) case "$2" in meta/* | fs/lib/*) return 0 ;; esac ;;
	tools/*)
		case "$2" in tools/* | meta/* | fs/lib/*) return 0 ;; esac
		case " $SHARED " in *" $2 "*) return 0 ;; esac
		;;
	fs/*) case "$2" in tools/*) return 1 ;; *) return 0 ;; esac ;;
	esac
	return 1
}

bad=0
while IFS= read -r file; do
	while IFS= read -r inc; do
		to=$(resolve "$file" "$inc")
		[ -n "$to" ] || continue
		if ! allowed "$file" "$to"; then
			echo "check-layers: $file includes $to: not allowed (docs/DESIGN.md \"Layers\")" >&2
			bad=1
		fi
	done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file")
done < <(find fs meta tools -name '*.[ch]' | sort)
exit $bad
