#!/bin/bash
# docker/check.sh [BUILD_DIR] — checks the Docker files as far as a machine
# without a Docker daemon can (`make check-docker`):
#
#   - compose.yaml parses (/usr/bin/python3 + python3-yaml) and has what the
#     tutorial needs (FUSE device, SYS_ADMIN, nfs:// BACKING, health-gated start);
#   - every build context and Dockerfile that compose names exists, and every
#     file a Dockerfile COPYs exists in its context and is not excluded by the
#     Dockerfile's .dockerignore;
#   - the image's build steps: scripts/install-deps.sh passes `bash -n` (and
#     ShellCheck), `make install DESTDIR=…` puts ckptfs and ckptfs-admin in
#     /usr/local/bin, the scripts and trainer_demo.py are valid;
#   - the image's entrypoint, run here with BUILD_DIR on PATH, mounts a local
#     BACKING, runs trainer_demo.py through it and unmounts (needs root + FUSE
#     + torch; skipped otherwise);
#   - hadolint and `docker compose config`, when available (skipped, and said
#     so, when not).
# Prints PASS/FAIL/SKIP per check, then "N passed, N failed"; exits non-zero
# on any failure.
set -u

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
build=${1:-build}
case $build in /*) ;; *) build=$repo/$build ;; esac
PY=/usr/bin/python3
passed=0 failed=0 skipped=0
T=$(mktemp -d /tmp/ckptfs-docker-check.XXXXXX)
demo_mnt=
cleanup() {
	if [ -n "$demo_mnt" ] && awk -v m="$demo_mnt" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; then
		fusermount3 -u -z "$demo_mnt" 2>/dev/null
	fi
	rm -rf "$T"
}
trap cleanup EXIT

pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1${2:+: $2}"; failed=$((failed + 1)); }
skip() { echo "SKIP $1: $2"; skipped=$((skipped + 1)); }
# check NAME COMMAND... — runs COMMAND, PASS if it succeeds, else FAIL with its output.
check() {
	local name=$1 out
	shift
	if out=$("$@" 2>&1); then pass "$name"; else fail "$name" "$(printf '%s' "$out" | tail -n 8)"; fi
}

# ---------------------------------------------------------------- compose + Dockerfiles

compose_and_copies() {
	"$PY" - "$here" <<-'EOF'
		import fnmatch, os, shlex, sys
		import yaml
		docker = sys.argv[1]
		errors = []
		with open(os.path.join(docker, "compose.yaml")) as f:
		    compose = yaml.safe_load(f)
		svcs = compose.get("services") or {}
		for name in ("ganesha", "trainer"):
		    if name not in svcs:
		        errors.append("compose: no service %r" % name)
		t = svcs.get("trainer", {})
		env = t.get("environment", {})
		if isinstance(env, list):
		    env = dict(e.split("=", 1) for e in env)
		if not str(env.get("BACKING", "")).startswith("nfs://ganesha/"):
		    errors.append("trainer: BACKING is not nfs://ganesha/...: %r" % env.get("BACKING"))
		if "/dev/fuse" not in [str(d).split(":")[0] for d in t.get("devices", [])]:
		    errors.append("trainer: no /dev/fuse device")
		if "SYS_ADMIN" not in t.get("cap_add", []):
		    errors.append("trainer: no SYS_ADMIN capability")
		dep = t.get("depends_on", {})
		if not (isinstance(dep, dict) and dep.get("ganesha", {}).get("condition") == "service_healthy"):
		    errors.append("trainer: does not wait for a healthy ganesha")
		# docker stop sends SIGTERM, then SIGKILL after the grace period
		# (10 s by default): the daemon's drain of its uploads must fit in it
		import re
		g = str(t.get("stop_grace_period", ""))
		m = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", g)
		secs = (int(m.group(1) or 0) * 3600 + int(m.group(2) or 0) * 60 + int(m.group(3) or 0)) if m and g else 0
		if secs < 300:
		    errors.append("trainer: stop_grace_period %r does not cover an upload drain (want >= 5m)" % g)
		if "healthcheck" not in svcs.get("ganesha", {}):
		    errors.append("ganesha: no healthcheck")

		def ignored(patterns, rel):
		    hit = False
		    for p in patterns:
		        neg = p.startswith("!")
		        p = p.lstrip("!").rstrip("/")
		        parts = rel.split("/")
		        prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
		        if any(fnmatch.fnmatch(x, p) or fnmatch.fnmatch(x, p.replace("**/", "")) for x in prefixes):
		            hit = not neg
		    return hit

		def copies(dockerfile):
		    lines, cur = [], ""
		    for raw in open(dockerfile):
		        s = raw.rstrip("\n")
		        if s.lstrip().startswith("#"):
		            continue
		        if s.endswith("\\"):
		            cur += s[:-1] + " "
		            continue
		        lines.append(cur + s)
		        cur = ""
		    for l in lines:
		        w = shlex.split(l)
		        if w and w[0].upper() in ("COPY", "ADD"):
		            args = [a for a in w[1:] if not a.startswith("--")]
		            if any(a.startswith("--from") for a in w[1:]):
		                continue
		            yield from args[:-1]

		checked = 0
		for name, svc in svcs.items():
		    b = svc.get("build")
		    if not b:
		        continue
		    if isinstance(b, str):
		        b = {"context": b}
		    ctx = os.path.normpath(os.path.join(docker, b.get("context", ".")))
		    dfile = os.path.join(ctx, b.get("dockerfile", "Dockerfile"))
		    if not os.path.isdir(ctx):
		        errors.append("%s: build context %s missing" % (name, ctx)); continue
		    if not os.path.isfile(dfile):
		        errors.append("%s: Dockerfile %s missing" % (name, dfile)); continue
		    patterns = []
		    for ign in (dfile + ".dockerignore", os.path.join(ctx, ".dockerignore")):
		        if os.path.isfile(ign):
		            patterns = [l.strip() for l in open(ign) if l.strip() and not l.startswith("#")]
		            break
		    for src in copies(dfile):
		        checked += 1
		        rel = os.path.normpath(src)
		        if not os.path.exists(os.path.join(ctx, rel)):
		            errors.append("%s: COPY %s: not in context %s" % (name, src, ctx))
		        elif rel != "." and ignored(patterns, rel):
		            errors.append("%s: COPY %s: excluded by the .dockerignore" % (name, src))
		        elif rel.endswith(".sh") and not os.access(os.path.join(ctx, rel), os.X_OK):
		            errors.append("%s: COPY %s: not executable" % (name, src))
		for e in errors:
		    print(e)
		print("%d services, %d COPY sources checked" % (len(svcs), checked))
		sys.exit(1 if errors else 0)
	EOF
}

if [ -x "$PY" ] && "$PY" -c 'import yaml' 2>/dev/null; then
	check "compose.yaml parses; services, FUSE, nfs:// BACKING; every COPY source exists" compose_and_copies
else
	fail "compose.yaml" "/usr/bin/python3 with yaml is missing (make deps installs python3-yaml)"
fi

ganesha_conf() {
	local f=$here/ganesha/ganesha.conf
	[ "$(tr -cd '{' <"$f" | wc -c)" = "$(tr -cd '}' <"$f" | wc -c)" ] || { echo "unbalanced braces"; return 1; }
	grep -Eq '^\s*Path = /export;' "$f" || { echo "no Path = /export"; return 1; }
	grep -Eq '^\s*Protocols = 3;' "$f" || { echo "NFSv3 not enabled"; return 1; }
	grep -Eq '^\s*Name = VFS;' "$f" || { echo "no FSAL VFS"; return 1; }
}
check "ganesha.conf: balanced blocks, /export over NFSv3 with FSAL VFS" ganesha_conf

# ---------------------------------------------------------------- build steps

for s in "$repo/scripts/install-deps.sh" "$here/entrypoint.sh" "$here/ganesha/entrypoint.sh" "$here/check.sh"; do
	name=${s#"$repo"/}
	check "$name: bash -n" bash -n "$s"
	if command -v shellcheck >/dev/null; then
		check "$name: shellcheck" shellcheck "$s"
	else
		skip "$name: shellcheck" "shellcheck is not installed"
	fi
done
check "docker/trainer_demo.py compiles" "$PY" -c 'import ast, sys; ast.parse(open(sys.argv[1]).read())' "$here/trainer_demo.py"

make_install() {
	if [ ! -x "$build/ckptfs" ] || [ ! -x "$build/ckptfs-admin" ]; then
		echo "$build/ckptfs not built (make all)"
		return 1
	fi
	make -s -C "$repo" BUILD="$build" install DESTDIR="$T/root" PREFIX=/usr/local >/dev/null || return 1
	if [ ! -x "$T/root/usr/local/bin/ckptfs" ] || [ ! -x "$T/root/usr/local/bin/ckptfs-admin" ]; then
		echo "make install did not put ckptfs and ckptfs-admin in /usr/local/bin: $(find "$T/root" -type f)"
		return 1
	fi
}
check "make install DESTDIR=… puts ckptfs, ckptfs-admin in /usr/local/bin (the entrypoint's PATH)" make_install

# ---------------------------------------------------------------- entrypoint, for real

entrypoint_demo() {
	demo_mnt=$T/mnt
	PATH=$build:$PATH BACKING=$T/backing MOUNTPOINT=$demo_mnt CKPTFS_OPTIONS="cache=$T/cache,keep=3" \
		DEMO_STEPS=4 DEMO_INTERVAL=0.2 timeout 300 "$here/entrypoint.sh" "$PY" "$here/trainer_demo.py" "$demo_mnt/run-1" \
		>"$T/demo.log" 2>&1 || { tail -n 8 "$T/demo.log"; return 1; }
	grep -q '^OK: ' "$T/demo.log" || { echo "no OK line"; tail -n 8 "$T/demo.log"; return 1; }
	grep -q 'unmounted; command status 0, ckptfs status 0' "$T/demo.log" || { echo "no clean unmount"; return 1; }
	[ -n "$(find "$T/backing" -type f | head -n 1)" ] || { echo "nothing stored on BACKING"; return 1; }
}
if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	skip "entrypoint.sh runs trainer_demo.py through a real mount" "needs root and /dev/fuse"
elif ! "$PY" -c 'import torch' 2>/dev/null; then
	skip "entrypoint.sh runs trainer_demo.py through a real mount" "/usr/bin/python3 cannot import torch (python3-torch)"
elif [ ! -x "$build/ckptfs" ]; then
	fail "entrypoint.sh runs trainer_demo.py through a real mount" "$build/ckptfs not built"
else
	check "entrypoint.sh runs trainer_demo.py through a real mount (local BACKING)" entrypoint_demo
fi

# ---------------------------------------------------------------- optional linters

if command -v hadolint >/dev/null; then
	check "hadolint docker/Dockerfile docker/ganesha/Dockerfile" hadolint "$here/Dockerfile" "$here/ganesha/Dockerfile"
else
	skip "hadolint" "not installed (not packaged in Debian 12); Dockerfiles not linted"
fi
if command -v docker >/dev/null && docker compose version >/dev/null 2>&1; then
	check "docker compose config" docker compose -f "$here/compose.yaml" config -q
else
	skip "docker compose config" "no docker compose plugin here; compose.yaml checked by the parser above only"
fi

echo "$skipped skipped"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
