#!/bin/bash
# docker/check.sh [BUILD_DIR] — checks the Docker files as far as a machine
# without a Docker daemon can (`make check-docker`):
#
#   - compose.yaml parses (/usr/bin/python3 + python3-yaml) and has what the
#     tutorial needs (FUSE device, SYS_ADMIN, nfs:// BACKING, health-gated start);
#   - every build context and Dockerfile that compose names exists, and every
#     file a Dockerfile COPYs exists in its context and is not excluded by the
#     Dockerfile's .dockerignore;
#   - the scripts: install-deps.sh and build-deb.sh (the image's build
#     stage) and the entrypoints pass `bash -n` (and ShellCheck),
#     `make install DESTDIR=…` puts ckptfs and ckptfs-admin in
#     /usr/local/bin, trainer_demo.py is valid;
#   - the image's entrypoint, run here with BUILD_DIR on PATH, mounts a local
#     BACKING, runs trainer_demo.py through it and unmounts (needs root + FUSE
#     + torch; skipped otherwise);
#   - docker/Dockerfile is multi-stage: the default target's stages (the
#     runtime image) start FROM a plain debian image, install the .deb that
#     the build stage made and nothing else — no -dev package, compiler,
#     make, criterion, torch or ganesha, no COPY of the sources —, have a
#     HEALTHCHECK, and run as root only with the reason written down; the
#     build stage takes its packages from scripts/debian/control (apt-get
#     build-dep) and builds with scripts/build-deb.sh; torch only in the
#     tutorial stage, which compose.yaml's trainer builds;
#   - the HEALTHCHECK's command, run here against a real mount, succeeds,
#     and fails once unmounted (root + FUSE);
#   - compose.shared.yaml shares the mount: the ckptfs service binds the
#     host directory on MOUNTPOINT with propagation rshared (allow_other,
#     FUSE device, SYS_ADMIN), the consumer binds it rslave/rshared and
#     waits for ckptfs to be healthy;
#   - compose.multinode.yaml runs several nodes over one store: postgres
#     (the official postgres:15 image, a volume, a pg_isready healthcheck),
#     ganesha (compose.yaml's service, extended), and two or more ckptfs
#     nodes of the runtime image, each with BACKING nfs://ganesha/…, -o
#     meta=postgresql://…@postgres…, a node_name, a cache volume and a host
#     mount directory of its own (rshared), FUSE, SYS_ADMIN, waiting for a
#     healthy postgres and ganesha; and each node's options are ones the
#     daemon accepts: BUILD_DIR's ckptfs runs with them (cache= and BACKING
#     moved to a temp dir) and must get as far as connecting to the host
#     postgres, which does not resolve here;
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

# Dockerfile stages: the runtime image carries the package and its runtime libraries only.
dockerfile_stages() {
	"$PY" - "$here" <<-'EOF'
		import os, re, shlex, sys
		import yaml
		docker = sys.argv[1]
		errors = []
		# logical lines (continuations joined), with the comments kept apart
		lines, comments, cur = [], [], ""
		for raw in open(os.path.join(docker, "Dockerfile")):
		    s = raw.rstrip("\n")
		    if s.lstrip().startswith("#"):
		        comments.append(s)
		        continue
		    if s.endswith("\\"):
		        cur += s[:-1] + " "
		        continue
		    if (cur + s).strip():
		        lines.append((cur + s).strip())
		    cur = ""
		stages = []  # [name, base, [(INSTR, rest)]]
		for l in lines:
		    instr, _, rest = l.partition(" ")
		    instr = instr.upper()
		    if instr == "FROM":
		        w = rest.split()
		        w = [x for x in w if not x.startswith("--")]
		        name = w[2] if len(w) >= 3 and w[1].upper() == "AS" else None
		        stages.append([name, w[0], []])
		    elif stages:
		        stages[-1][2].append((instr, rest))
		byname = {st[0]: st for st in stages if st[0]}
		if len(stages) < 2:
		    errors.append("Dockerfile: not multi-stage (%d FROM)" % len(stages))
		def chain(st):
		    out = []
		    while st is not None and st not in out:
		        out.append(st)
		        st = byname.get(st[1])
		    return out
		runtime = chain(stages[-1]) if stages else []
		base = runtime[-1][1] if runtime else ""
		if not re.fullmatch(r"debian:[\w.-]+", base) or re.search(r"buildpack|sdk|gcc|dev", base):
		    errors.append("runtime: starts FROM %r, not a plain debian image" % base)
		forbidden = re.compile(r"(?<![\w.+-])([\w.+-]+-dev|build-essential|gcc|g\+\+|clang|cc|make|cmake|"
		                       r"pkg-config|debhelper|dpkg-dev|libcriterion[\w.-]*|criterion|python3-torch|torch|"
		                       r"nfs-ganesha[\w.-]*|ganesha|install-deps\.sh|build-dep)(?![\w.+-])")
		health = False
		root_ok = False
		for st in runtime:
		    for instr, rest in st[2]:
		        if instr == "RUN":
		            bad = sorted(set(m.group(1) for m in forbidden.finditer(rest)))
		            if bad:
		                errors.append("runtime stage %s: RUN brings build/test tools: %s" % (st[0], ", ".join(bad)))
		        if instr in ("COPY", "ADD"):
		            w = shlex.split(rest)
		            frm = [x for x in w if x.startswith("--from")]
		            srcs = [x for x in w if not x.startswith("--")][:-1]
		            if frm and not all(x.endswith(".deb") for x in srcs):
		                errors.append("runtime: COPY %s from another stage: only the .deb belongs here" % rest)
		            if not frm and any(x in (".", "./") or x.startswith(("fs", "meta", "tools", "tests")) for x in srcs):
		                errors.append("runtime: COPY %s puts sources in the image" % rest)
		        if instr == "HEALTHCHECK" and not rest.upper().startswith("NONE"):
		            health = True
		        if instr == "USER":
		            root_ok = True
		if not health:
		    errors.append("runtime: no HEALTHCHECK")
		if not any("CAP_SYS_ADMIN" in c for c in comments) and not root_ok:
		    errors.append("runtime: runs as root with no comment saying why (CAP_SYS_ADMIN)")
		if not any(i == "RUN" and re.search(r"apt-get install .*ckptfs_\*\.deb", r) for st in runtime for i, r in st[2]):
		    errors.append("runtime: does not apt-get install the ckptfs .deb")
		b = byname.get("build")
		if not b:
		    errors.append("no stage named build")
		else:
		    runs = " ".join(r for i, r in b[2] if i == "RUN")
		    if "build-dep" not in runs or "scripts/build-deb.sh" not in runs:
		        errors.append("build: not apt-get build-dep + scripts/build-deb.sh")
		t = byname.get("tutorial")
		if not t or "python3-torch" not in " ".join(r for i, r in t[2] if i == "RUN"):
		    errors.append("no tutorial stage installing python3-torch")
		with open(os.path.join(docker, "compose.yaml")) as f:
		    c = yaml.safe_load(f)
		tb = ((c.get("services") or {}).get("trainer") or {}).get("build") or {}
		if not isinstance(tb, dict) or tb.get("target") != "tutorial":
		    errors.append("compose.yaml: trainer does not build target tutorial (the runtime image has no torch)")
		for e in errors:
		    print(e)
		print("%d stages; runtime = %s from %s" % (len(stages), " <- ".join(str(st[0]) for st in runtime), base))
		sys.exit(1 if errors else 0)
	EOF
}

# compose.shared.yaml: one ckptfs container, its mount used by another.
compose_shared() {
	"$PY" - "$here" <<-'EOF'
		import os, sys
		import yaml
		docker = sys.argv[1]
		errors = []
		with open(os.path.join(docker, "compose.shared.yaml")) as f:
		    c = yaml.safe_load(f)
		svcs = c.get("services") or {}
		fs = svcs.get("ckptfs") or {}
		env = fs.get("environment") or {}
		if isinstance(env, list):
		    env = dict(e.split("=", 1) for e in env)
		mnt = env.get("MOUNTPOINT", "/mnt/ckpt")
		if "/dev/fuse" not in [str(d).split(":")[0] for d in fs.get("devices", [])]:
		    errors.append("ckptfs: no /dev/fuse device")
		if "SYS_ADMIN" not in fs.get("cap_add", []):
		    errors.append("ckptfs: no SYS_ADMIN capability")
		if "allow_other" not in str(env.get("CKPTFS_OPTIONS", "")).split(","):
		    errors.append("ckptfs: CKPTFS_OPTIONS lacks allow_other (other containers' users)")
		if (fs.get("healthcheck") or {}).get("disable"):
		    errors.append("ckptfs: healthcheck disabled")
		def binds(svc):
		    for v in svc.get("volumes", []):
		        if isinstance(v, dict) and v.get("type") == "bind":
		            yield v.get("source"), v.get("target"), (v.get("bind") or {}).get("propagation")
		        elif isinstance(v, str) and v.count(":") >= 2:
		            src, tgt, opts = v.split(":", 2)
		            prop = next((o for o in opts.split(",") if o.endswith(("shared", "slave", "private"))), None)
		            yield src, tgt, prop
		shared = [(s, p) for s, t, p in binds(fs) if t == mnt]
		if not shared or shared[0][1] != "rshared":
		    errors.append("ckptfs: MOUNTPOINT %s is not a bind with propagation rshared: %r" % (mnt, shared))
		src = shared[0][0] if shared else None
		users = [n for n, s in svcs.items() if n != "ckptfs"
		         and any(b[0] == src and b[2] in ("rslave", "rshared") for b in binds(s))]
		if not users:
		    errors.append("no other service binds %r with propagation rslave or rshared" % src)
		for n in users:
		    dep = svcs[n].get("depends_on") or {}
		    if not (isinstance(dep, dict) and (dep.get("ckptfs") or {}).get("condition") == "service_healthy"):
		        errors.append("%s: does not wait for a healthy ckptfs" % n)
		for e in errors:
		    print(e)
		print("shared %s -> %s, used by %s" % (src, mnt, ", ".join(users)))
		sys.exit(1 if errors else 0)
	EOF
}

# compose.multinode.yaml: postgres, ganesha and two ckptfs nodes of one
# shared catalog. Prints one "NODE<TAB>CKPTFS_OPTIONS" line per node (the
# ${VAR:-default} in them resolved to the default) for multinode_options.
compose_multinode() {
	"$PY" - "$here" <<-'EOF'
		import os, re, sys
		import yaml
		docker = sys.argv[1]
		errors = []
		def subst(v):
		    return re.sub(r"\$\{[A-Za-z_][A-Za-z0-9_]*(?::?-([^}]*))?\}", lambda m: m.group(1) or "", str(v))
		def envof(svc):
		    env = svc.get("environment") or {}
		    if isinstance(env, list):
		        env = dict(e.split("=", 1) for e in env)
		    return {k: subst(v) for k, v in env.items()}
		with open(os.path.join(docker, "compose.multinode.yaml")) as f:
		    c = yaml.safe_load(f)
		with open(os.path.join(docker, "compose.yaml")) as f:
		    tutorial = (yaml.safe_load(f).get("services") or {})
		svcs = c.get("services") or {}
		vols = c.get("volumes") or {}
		def healthy_deps(svc):
		    dep = svc.get("depends_on") or {}
		    return {n for n, d in dep.items() if (d or {}).get("condition") == "service_healthy"} if isinstance(dep, dict) else set()
		def volumes(svc):
		    for v in svc.get("volumes", []):
		        if isinstance(v, dict):
		            yield v.get("type"), subst(v.get("source")), v.get("target"), (v.get("bind") or {}).get("propagation")
		        else:
		            parts = str(v).split(":")
		            kind = "bind" if parts[0].startswith(("/", ".", "$")) else "volume"
		            prop = next((o for o in (parts[2].split(",") if len(parts) > 2 else []) if o.endswith(("shared", "slave", "private"))), None)
		            yield kind, subst(parts[0]), parts[1] if len(parts) > 1 else None, prop
		pg = svcs.get("postgres")
		if not pg:
		    errors.append("no service postgres")
		else:
		    if not re.fullmatch(r"(docker\.io/(library/)?)?postgres:15([.\w-]*)", str(pg.get("image", ""))):
		        errors.append("postgres: image %r is not the official postgres:15" % pg.get("image"))
		    if not any(k == "volume" and s in vols and t == "/var/lib/postgresql/data" for k, s, t, _ in volumes(pg)):
		        errors.append("postgres: /var/lib/postgresql/data is not a named volume")
		    test = (pg.get("healthcheck") or {}).get("test")
		    if "pg_isready" not in " ".join(test if isinstance(test, list) else [str(test)]):
		        errors.append("postgres: healthcheck does not run pg_isready")
		    pgenv = envof(pg)
		g = svcs.get("ganesha") or {}
		ext = g.get("extends") or {}
		if not (ext.get("file") == "compose.yaml" and ext.get("service") == "ganesha" and "ganesha" in tutorial):
		    errors.append("ganesha: does not extend compose.yaml's ganesha service")
		else:
		    for v in tutorial["ganesha"].get("volumes", []):
		        src = str(v).split(":")[0]
		        if not src.startswith(("/", ".")) and src not in vols:
		            errors.append("ganesha: compose.yaml's volume %r is not declared here" % src)
		nodes = {n: s for n, s in svcs.items() if "meta=" in envof(s).get("CKPTFS_OPTIONS", "")}
		if len(nodes) < 2:
		    errors.append("fewer than two ckptfs nodes with -o meta=: %s" % ", ".join(nodes))
		seen = {"cache": {}, "mnt": {}, "name": {}}
		for n, s in nodes.items():
		    env = envof(s)
		    opts = dict((o.split("=", 1) + [""])[:2] for o in env["CKPTFS_OPTIONS"].split(","))
		    b = s.get("build") or {}
		    if not (isinstance(b, dict) and b.get("dockerfile") == "docker/Dockerfile" and b.get("target") in (None, "runtime")):
		        errors.append("%s: not built from docker/Dockerfile's runtime image: %r" % (n, b))
		    if not env.get("BACKING", "").startswith("nfs://ganesha/"):
		        errors.append("%s: BACKING is not nfs://ganesha/...: %r" % (n, env.get("BACKING")))
		    m = re.fullmatch(r"postgres(?:ql)?://([^:@/]+)(?::([^@/]*))?@postgres(?::5432)?/([^?]+)", opts.get("meta", ""))
		    if not m:
		        errors.append("%s: meta=%r is not postgresql://USER[:PASSWORD]@postgres/DB" % (n, opts.get("meta")))
		    elif pg and (m.group(1), m.group(3)) != (pgenv.get("POSTGRES_USER", "postgres"), pgenv.get("POSTGRES_DB", pgenv.get("POSTGRES_USER", "postgres"))):
		        errors.append("%s: meta= names user %s, database %s; postgres makes %s, %s" % (n, m.group(1), m.group(3), pgenv.get("POSTGRES_USER"), pgenv.get("POSTGRES_DB")))
		    elif pg and (m.group(2) or "") != pgenv.get("POSTGRES_PASSWORD", ""):
		        errors.append("%s: meta='s password is not postgres's POSTGRES_PASSWORD" % n)
		    if "/dev/fuse" not in [str(d).split(":")[0] for d in s.get("devices", [])]:
		        errors.append("%s: no /dev/fuse device" % n)
		    if "SYS_ADMIN" not in s.get("cap_add", []):
		        errors.append("%s: no SYS_ADMIN capability" % n)
		    if healthy_deps(s) < {"postgres", "ganesha"}:
		        errors.append("%s: does not wait for a healthy postgres and ganesha" % n)
		    cache = opts.get("cache", "")
		    cvol = [src for k, src, t, _ in volumes(s) if k == "volume" and t and cache.startswith(t.rstrip("/") + "/")]
		    if not cvol or cvol[0] not in vols:
		        errors.append("%s: cache=%s is not in a declared volume" % (n, cache))
		    mnt = env.get("MOUNTPOINT", "/mnt/ckpt")
		    host = [(src, p) for k, src, t, p in volumes(s) if k == "bind" and t == mnt]
		    if not host or host[0][1] != "rshared":
		        errors.append("%s: MOUNTPOINT %s is not a host bind with propagation rshared: %r" % (n, mnt, host))
		    for what, v in (("cache", cvol[0] if cvol else None), ("mnt", host[0][0] if host else None), ("name", opts.get("node_name"))):
		        if not v:
		            errors.append("%s: no %s" % (n, {"cache": "cache volume", "mnt": "host mount directory", "name": "node_name="}[what]))
		        elif v in seen[what]:
		            errors.append("%s and %s share the %s %s" % (seen[what][v], n, what, v))
		        else:
		            seen[what][v] = n
		    print("%s\t%s" % (n, env["CKPTFS_OPTIONS"]))
		for e in errors:
		    print(e, file=sys.stderr)
		print("postgres, ganesha, nodes %s" % ", ".join(nodes), file=sys.stderr)
		sys.exit(1 if errors else 0)
	EOF
}

# Each node's CKPTFS_OPTIONS through BUILD_DIR's ckptfs: its option parser
# must accept them all and libpq the URL, so that the daemon's only failure
# here is that the host postgres does not resolve (cache= and BACKING are
# moved to temp dirs; nothing is mounted).
multinode_options() {
	local lines n opts out rc=0 m=$T/mn-mnt
	lines=$(compose_multinode 2>&1 >/dev/null) || { echo "$lines"; return 1; }
	[ -x "$build/ckptfs" ] || { echo "$build/ckptfs not built (make all)"; return 1; }
	mkdir -p "$m" "$T/mn-backing"
	while IFS=$'\t' read -r n opts; do
		opts=$(printf '%s' "$opts" | sed -E "s#(^|,)cache=[^,]*#\\1cache=$T/mn-cache-$n#")
		out=$(timeout 60 "$build/ckptfs" -f -o "$opts" "$T/mn-backing" "$m" 2>&1) && {
			echo "$n: ckptfs mounted with no postgres to reach?"
			fusermount3 -u "$m" 2>/dev/null
			rc=1
			continue
		}
		if ! printf '%s' "$out" | grep -q 'catalog postgresql://[^ ]*@postgres[:/].*cannot connect'; then
			echo "$n: ckptfs -o $opts: $(printf '%s' "$out" | grep -v ' info: ' | tail -n 3)"
			rc=1
		fi
	done < <(compose_multinode 2>/dev/null)
	echo "nodes checked: $(compose_multinode 2>/dev/null | cut -f1 | tr '\n' ' ')"
	return $rc
}

if [ -x "$PY" ] && "$PY" -c 'import yaml' 2>/dev/null; then
	check "compose.yaml parses; services, FUSE, nfs:// BACKING; every COPY source exists" compose_and_copies
	check "Dockerfile: multi-stage; runtime = debian + the .deb (no -dev, compiler, criterion, torch, ganesha), HEALTHCHECK, root explained; torch in the tutorial stage only" dockerfile_stages
	check "compose.shared.yaml: ckptfs binds MOUNTPOINT rshared (allow_other), another service binds it rslave and waits for healthy" compose_shared
	check "compose.multinode.yaml: postgres:15 (volume, pg_isready), compose.yaml's ganesha, 2 nodes (meta=…@postgres, nfs:// BACKING, own cache volume, node_name and host mount, wait for healthy)" compose_multinode
	if [ -x "$build/ckptfs" ]; then
		check "compose.multinode.yaml: every node's CKPTFS_OPTIONS accepted by $(basename "$build")/ckptfs (it gets as far as connecting to postgres)" multinode_options
	else
		fail "compose.multinode.yaml: node options" "$build/ckptfs not built (make all)"
	fi
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

for s in "$repo/scripts/install-deps.sh" "$repo/scripts/build-deb.sh" "$here/entrypoint.sh" "$here/ganesha/entrypoint.sh" "$here/check.sh"; do
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
check "make install DESTDIR=… puts ckptfs, ckptfs-admin in /usr/local/bin" make_install

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

# ---------------------------------------------------------------- HEALTHCHECK, for real

# The Dockerfile's HEALTHCHECK CMD (shell form), run as Docker would (sh -c,
# the image's ENV), with BUILD_DIR on PATH: 0 while ckptfs serves
# MOUNTPOINT, non-zero once it is unmounted.
health_cmd=$(awk '/^HEALTHCHECK/ { h = 1 } h { line = line $0 } h && !/\\$/ { print line; exit }' "$here/Dockerfile" |
	sed -e 's/\\//g' -e 's/.*[[:space:]]CMD[[:space:]]\+//')
healthcheck_real() {
	local hm=$T/hmnt hb=$T/hbacking hc=$T/hcache rc
	[ -n "$health_cmd" ] || { echo "no HEALTHCHECK CMD in the Dockerfile"; return 1; }
	mkdir -p "$hm" "$hb" "$hc"
	demo_mnt=$hm
	"$build/ckptfs" "$hb" "$hm" -o "cache=$hc" || { echo "ckptfs did not mount"; return 1; }
	rc=0
	PATH=$build:$PATH MOUNTPOINT=$hm timeout 20 sh -c "$health_cmd" || rc=$?
	"$build/ckptfs-admin" umount "$hm" --timeout 60 >/dev/null 2>&1 || fusermount3 -u -z "$hm"
	[ "$rc" = 0 ] || { echo "healthcheck failed on a live mount (status $rc): $health_cmd"; return 1; }
	if PATH=$build:$PATH MOUNTPOINT=$hm timeout 20 sh -c "$health_cmd" 2>/dev/null; then
		echo "healthcheck passes with nothing mounted: $health_cmd"
		return 1
	fi
}
if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	skip "HEALTHCHECK command against a real mount" "needs root and /dev/fuse"
elif [ ! -x "$build/ckptfs" ]; then
	fail "HEALTHCHECK command against a real mount" "$build/ckptfs not built"
else
	check "HEALTHCHECK command ($health_cmd): 0 on a live mount, non-zero when unmounted" healthcheck_real
fi

# ---------------------------------------------------------------- optional linters

if command -v hadolint >/dev/null; then
	check "hadolint docker/Dockerfile docker/ganesha/Dockerfile" hadolint "$here/Dockerfile" "$here/ganesha/Dockerfile"
else
	skip "hadolint" "not installed (not packaged in Debian 12); Dockerfiles not linted"
fi
if command -v docker >/dev/null && docker compose version >/dev/null 2>&1; then
	check "docker compose config" docker compose -f "$here/compose.yaml" config -q
	check "docker compose config (compose.multinode.yaml)" docker compose -f "$here/compose.multinode.yaml" config -q
else
	skip "docker compose config" "no docker compose plugin here; compose.yaml checked by the parser above only"
fi

echo "$skipped skipped"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
