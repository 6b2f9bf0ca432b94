#!/usr/bin/python3
"""torture_check.py MNT CATALOG STATEDIR KEEP CYCLE — after a kill -9 of the
daemon and a remount, checks the generations of MNT/run against the catalog
and against what torture_writer.py logged in STATEDIR/log (see there):

 (a) no generation is OPEN in the catalog; the series listing holds exactly the
     COMMITTED generations (xattr state=committed for each), and no aborted or
     deleted name is reachable by lookup (nothing hidden but present); a save
     open at the kill is HELD (rule crash): not listed, reachable by name, its
     files readable (kept, never deleted by the crash);
 (b) every COMMITTED generation at catalog version V holds exactly the files
     and bytes (sha256) the writer logged for V — its confirmed commit, or the
     intent logged just before a rename that the daemon committed but the
     writer had no time to confirm; a rewrite cut by the kill therefore shows
     the previous committed version. Every generation the writer saw
     committed is still COMMITTED, or DELETED by keep or by the writer's own
     delete — never aborted, never lost;
 (c) keep=K: at most K committed, plus the commits whose keep pass the kill may
     have cut; keep never deleted one with fewer than K newer committed
     generations around (torture_writer checks K after each commit, live);
 rules: committed by dcp-metadata or crash-restored, held only by crash,
 deleted by keep (or keep-held: a held one with K newer committed) or the
 writer.
Prints one summary line; problems one per line; exit 1 if any."""
import collections
import errno
import hashlib
import json
import os
import sqlite3
import sys
import time

mnt, catalog, statedir, keep, cycle = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
series = os.path.join(mnt, "run")
XATTR = "user.ckptfs.generation"
problems = []
STATES = {0: "open", 1: "committed", 2: "aborted", 3: "deleted", 4: "held"}
LIVE = (0, 1, 4)  # the states with a tree
COMMIT_RULES = {"dcp-metadata", "crash-restored"}
ABORT_RULES = set()  # nothing is aborted here: a crash holds
HOLD_RULES = {"crash"}
# keep-latest-k, and the rmtree of a generation root by the writer.
DELETE_RULES_KEEP = {"keep", "keep-held"}


def bad(msg):
    problems.append(msg)


def sha_file(p):
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


# ---- the writer's log
log = []
with open(os.path.join(statedir, "log")) as f:
    for i, line in enumerate(f):
        if not line.endswith("\n"):
            bad("log line %d is torn: %r" % (i + 1, line[:80]))
            continue
        log.append(json.loads(line))
for r in log:
    if r["ev"] == "problem":
        bad("writer (cycle %s) saw: %s" % (r.get("cycle"), r["what"]))
# expected[(name, version)] = files of the last intent/commit record of that version
expected = {}
confirmed = {}  # name -> last confirmed version
deleted_by_writer = set()
for r in log:
    if r["ev"] in ("intent", "commit"):
        expected[(r["name"], r["version"])] = r["files"]
    if r["ev"] == "commit":
        confirmed[r["name"]] = r["version"]
    if r["ev"] == "begin" and r["op"] == "delete":
        deleted_by_writer.add(r["name"])

# ---- the catalog (read-only; the daemon is running)
db = sqlite3.connect("file:%s?mode=ro" % catalog, uri=True)
db.row_factory = sqlite3.Row
# keep-latest-k finishes at start, in the background, what the kill cut
# short: wait until the committed set has been still for 1 s (10 s at most),
# so that a generation its pass deletes is not read as lost half-way through
# the checks below. What keep deleted is then checked as a deletion (c).
QUERY_COMMITTED = "SELECT id FROM generations WHERE state = 1 ORDER BY id"
last, still = None, 0
for _ in range(100):
    now = [r[0] for r in db.execute(QUERY_COMMITTED)]
    still = still + 1 if now == last else 0
    if still >= 10:
        break
    last = now
    time.sleep(0.1)
sid = db.execute("SELECT d.ino FROM dirents d WHERE d.parent = 1 AND d.name = 'run'").fetchone()
rows = [dict(r) for r in db.execute("SELECT * FROM generations ORDER BY id")]
if sid is None:
    if rows:
        bad("no series directory 'run' in the catalog but %d generations" % len(rows))
    print("cycle %d: no series yet" % cycle)
    sys.exit(1 if problems else 0)
for r in rows:
    if r["series"] != sid[0]:
        bad("generation %s (id %d) in series inode %d, expected only the series 'run' (inode %d)"
            % (r["name"], r["id"], r["series"], sid[0]))
byname = collections.defaultdict(list)
for r in rows:
    byname[r["name"]].append(r)
committed = {r["name"]: r for r in rows if r["state"] == 1}
for name, rs in byname.items():
    if sum(1 for r in rs if r["state"] in LIVE) > 1:
        bad("%s: %d live (open/committed/held) generation rows" % (name, sum(1 for r in rs if r["state"] in LIVE)))
held = {r["name"]: r for r in rows if r["state"] == 4}

# (a) nothing open, listing == committed, nothing hidden but present
for r in rows:
    st = STATES.get(r["state"], "?%s" % r["state"])
    if r["state"] == 0:
        bad("%s (id %d v%d) is still OPEN after the remount (G4)" % (r["name"], r["id"], r["version"]))
    if r["backup_root"] and r["state"] != 0:
        bad("%s (id %d) is %s but keeps a backup tree %d (G3)" % (r["name"], r["id"], st, r["backup_root"]))
    if r["state"] == 1 and r["rule"] not in COMMIT_RULES:
        bad("%s (id %d v%d) committed by rule %r: only dcp-metadata or crash-restored can commit here"
            % (r["name"], r["id"], r["version"], r["rule"]))
    if r["state"] == 2 and r["rule"] not in ABORT_RULES:
        bad("%s (id %d) aborted by rule %r: nothing aborts here (a crash holds)" % (r["name"], r["id"], r["rule"]))
    if r["state"] == 4 and (r["rule"] not in HOLD_RULES or not r["root"]):
        bad("%s (id %d) held by rule %r, root %d: only crash holds here, in place" % (r["name"], r["id"], r["rule"], r["root"]))
    if r["state"] in (2, 3) and r["root"]:
        bad("%s (id %d) is %s but still has root inode %d (G2)" % (r["name"], r["id"], st, r["root"]))
try:
    listed = set(os.listdir(series))
except OSError as e:
    bad("listing %s: %s" % (series, e))
    listed = set()
for n in sorted(listed - set(committed)):
    states = [STATES.get(r["state"]) for r in byname.get(n, [])]
    bad("%s is listed in the series but is not a committed generation (catalog: %s)" % (n, states or "no row"))
for n in sorted(set(committed) - listed):
    bad("%s is committed in the catalog but missing from the series listing" % n)
for n, rs in sorted(byname.items()):
    if n in committed:
        try:
            v = os.getxattr(os.path.join(series, n), XATTR).decode()
            info = dict(kv.split("=", 1) for kv in v.split())
            if info.get("state") != "committed" or int(info.get("version", -1)) != committed[n]["version"]:
                bad("%s: xattr says %s, catalog state committed version %d" % (n, v, committed[n]["version"]))
        except OSError as e:
            bad("%s: getxattr %s failed: %s" % (n, XATTR, e))
        continue
    if n in held:  # kept: reachable by name, every file readable
        d = os.path.join(series, n)
        try:
            info = dict(kv.split("=", 1) for kv in os.getxattr(d, XATTR).decode().split())
            if info.get("state") != "held":
                bad("%s: xattr says state=%s, the catalog says held" % (n, info.get("state")))
            for fn in os.listdir(d):
                sha_file(os.path.join(d, fn))
        except OSError as e:
            bad("%s (held): its files cannot be read: %s" % (n, e))
        continue
    try:
        os.lstat(os.path.join(series, n))
        bad("%s (%s) is still reachable by name though no generation of that name is committed (hidden but present)"
            % (n, ", ".join("id %d %s rule %s" % (r["id"], STATES.get(r["state"]), r["rule"]) for r in rs)))
    except OSError as e:
        if e.errno != errno.ENOENT:
            bad("%s: lstat: %s" % (n, e))

# (b) bytes of every committed generation
nfiles = 0
restored = 0
for n, r in sorted(committed.items()):
    if r["rule"] == "crash-restored":
        restored += 1
    want = expected.get((n, r["version"]))
    if want is None:
        bad("%s is committed at version %d (rule %s) but the writer never got that far: no intent was logged "
            "for it (committed before its .metadata rename?)" % (n, r["version"], r["rule"]))
        continue
    d = os.path.join(series, n)
    try:
        have = sorted(os.listdir(d))
    except OSError as e:
        bad("%s: listing: %s" % (n, e))
        continue
    if have != sorted(want):
        bad("%s v%d: files %s, the writer logged %s" % (n, r["version"], have, sorted(want)))
    try:
        info = dict(kv.split("=", 1) for kv in os.getxattr(d, XATTR).decode().split())
        size = sum(os.lstat(os.path.join(d, fn)).st_size for fn in have)
        if int(info.get("files", -1)) != len(have) or int(info.get("bytes", -1)) != size:
            bad("%s: xattr says files=%s bytes=%s, the directory holds %d files of %d bytes"
                % (n, info.get("files"), info.get("bytes"), len(have), size))
    except OSError as e:
        bad("%s: getxattr/lstat: %s" % (n, e))
    for fn in have:
        if fn not in want:
            continue
        try:
            h = sha_file(os.path.join(d, fn))
        except OSError as e:
            bad("%s/%s: read: %s" % (n, fn, e))
            continue
        nfiles += 1
        if h != want[fn]:
            older = [v for (nn, v), f in expected.items() if nn == n and f.get(fn) == h]
            bad("%s/%s (committed version %d, rule %s): sha256 %s differs from the logged %s%s"
                % (n, fn, r["version"], r["rule"], h[:16], want[fn][:16],
                   " (those are the bytes of version %s)" % older if older else ""))
for n, v in sorted(confirmed.items()):
    rs = byname.get(n)
    if not rs:
        bad("%s: the writer saw version %d committed, the catalog has no row for it" % (n, v))
        continue
    r = rs[-1]
    if r["state"] == 1:
        if r["version"] < v:
            bad("%s: the writer saw version %d committed, the catalog is back at version %d" % (n, v, r["version"]))
        continue
    if r["state"] == 3 and (r["rule"] in DELETE_RULES_KEEP or n in deleted_by_writer):
        continue
    bad("%s: the writer saw version %d committed; now %s by rule %r%s"
        % (n, v, STATES.get(r["state"]), r["rule"],
           "" if n in deleted_by_writer else " (the writer never deleted it)"))

# (c) keep-latest-k
if keep:
    # The writer saw at most K listed after its last confirmed commit ("kept");
    # since then each new step may add one committed generation whose keep
    # pass the kill cut.
    last = max([i for i, r in enumerate(log) if r["ev"] == "kept"] or [-1])
    since = sum(1 for r in log[last + 1:] if r["ev"] == "intent" and r["version"] == 1)
    if len(committed) > keep + since:
        bad("%d committed generations with keep=%d, %d new steps since the writer last saw keep applied: %s"
            % (len(committed), keep, since, sorted(committed)))
    for x in rows:
        if x["state"] != 3 or x["rule"] not in DELETE_RULES_KEEP:
            continue
        t = x["ended_ns"]
        newer = [y["name"] for y in rows if y is not x and y["state"] in (1, 3) and y["step"] > x["step"]
                 and y["committed_ns"] and y["created_ns"] <= t and (not y["ended_ns"] or y["ended_ns"] >= t)]
        if len(newer) < keep:
            bad("%s (step %d) was deleted by keep=%d with only %d newer committed generations around: %s"
                % (x["name"], x["step"], keep, len(newer), newer))
    for x in rows:
        if x["state"] == 3 and x["rule"] not in DELETE_RULES_KEEP and x["name"] not in deleted_by_writer:
            bad("%s (id %d) deleted by rule %r, but neither keep nor the writer deleted it"
                % (x["name"], x["id"], x["rule"]))

cnt = collections.Counter(STATES.get(r["state"]) for r in rows)
print("%d committed (%d crash-restored), %d held, %d aborted, %d deleted; %d files verified"
      % (cnt["committed"], restored, cnt["held"], cnt["aborted"], cnt["deleted"], nfiles))
for p in problems[:25]:
    print("PROBLEM: " + p)
sys.exit(1 if problems else 0)
