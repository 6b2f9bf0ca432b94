#!/usr/bin/python3
"""torture_writer.py MNT STATEDIR SEED CYCLE KEEP — the trainer of t_torture.sh's crash
loop. Runs until killed (or until the mount goes away), saving checkpoint
generations MNT/run/step-N the way PyTorch DCP does:

  new step    mkdir step-N; 2-4 files __{i}_0.distcp of 0..3 MiB (part of the
              bytes shared with other steps, so chunks dedup), each written in
              pieces, fsync'd, closed; .metadata.tmp written + fsync'd; renamed
              onto .metadata (the commit signal, rule dcp-metadata)
  rewrite     an existing committed step: one .distcp file rewritten (O_TRUNC),
              a new .metadata.tmp, sometimes an unlink of .metadata (newer
              DCP), rename onto .metadata: the generation's next version
  delete      the oldest listed step, shutil.rmtree (TorchTitan's purge)
After each commit the listing must show at most KEEP steps (keep-latest-k).

Everything it knows goes to files OUTSIDE the mount, so it survives the kill:
  STATEDIR/next_step   the next step number (taken before the step starts, so
                       a name is never reused)
  STATEDIR/log         JSON lines, each written with one O_APPEND write():
     {"ev":"begin","op":"new|rewrite|delete","name":..,"cycle":C}
     {"ev":"intent","name":..,"version":V,"files":{name: sha256}}
          written just before the rename onto .metadata: the exact bytes
          this version has if the daemon commits it
     {"ev":"commit","name":..,"version":V,"files":{..},"cycle":C}
          written only once the xattr user.ckptfs.generation said
          state=committed with this version
     {"ev":"kept","listed":N}         after a commit, once at most KEEP are listed
     {"ev":"deleted","name":..}       after rmtree returned
     {"ev":"problem","what":..}       something the daemon did wrong while it
                                      was alive (t_torture fails on these)
An error from the mount while the daemon is alive is a problem; once the mount
answers ENOTCONN/ECONNABORTED (the daemon was killed) the writer exits 0.
"""
import errno
import hashlib
import json
import os
import random
import re
import shutil
import sys
import time
import traceback

MiB = 1 << 20
XATTR = "user.ckptfs.generation"
STEP_RE = re.compile(r"^step-(\d+)$")
DEAD = (errno.ENOTCONN, errno.ECONNABORTED)

mnt, statedir, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
cycle = int(sys.argv[4])
keep = int(sys.argv[5])  # the mount's keep=K: checked after every commit
series = os.path.join(mnt, "run")
rng = random.Random(seed)
logfd = os.open(os.path.join(statedir, "log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

# Shared content: the same 24 blocks of 128 KiB in every step and every cycle
# (a fixed seed), so consecutive checkpoints share most chunks, as real ones do.
_pool_rng = random.Random(1234)
POOL = [_pool_rng.randbytes(128 << 10) for _ in range(24)]


class DaemonGone(Exception):
    pass


def log(**rec):
    line = (json.dumps(rec, sort_keys=True) + "\n").encode()
    os.write(logfd, line)  # one write: a kill -9 of this process never tears a line


def problem(what):
    log(ev="problem", what=what, cycle=cycle, t=time.time())
    print("torture_writer: PROBLEM: " + what, file=sys.stderr)


def sha(b):
    return hashlib.sha256(b).hexdigest()


def daemon_alive():
    try:
        os.statvfs(mnt)
        return True
    except OSError as e:
        if e.errno in DEAD:
            return False
        return True


def make_data():
    size = rng.choice([0, rng.randint(1, 4096), rng.randint(0, 3 * MiB), rng.randint(0, 3 * MiB)])
    parts, n = [], 0
    while n < size:
        if rng.random() < 0.7:
            b = rng.choice(POOL)
            off = rng.choice([0, 0, rng.randint(0, len(b) - 1)])
            piece = b[off:]
        else:
            piece = rng.randbytes(rng.randint(1, 512 << 10))
        parts.append(piece)
        n += len(piece)
    return b"".join(parts)[:size]


def write_file(path, data, trunc=True):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if trunc else 0), 0o644)
    try:
        pos = 0
        while pos < len(data):
            n = rng.choice([4096, 65536, 131072, 1 << 20])
            pos += os.write(fd, data[pos:pos + n])
        os.fsync(fd)
    finally:
        os.close(fd)


def gen_info(path):
    v = os.getxattr(path, XATTR).decode()
    return dict(kv.split("=", 1) for kv in v.split())


def wait_committed(path, name, version):
    """Polls the xattr until the generation is committed at `version`."""
    deadline = time.time() + 15
    last = None
    while time.time() < deadline:
        try:
            info = gen_info(path)
        except OSError as e:
            if e.errno in DEAD or not daemon_alive():
                raise DaemonGone()
            if e.errno == errno.ENOENT and keep and newer_listed(name) >= keep:
                # a rewrite of an old step: it committed, and keep-latest-k
                # deleted it at once, being older than the newest `keep`
                return None
            problem("%s: getxattr after the .metadata rename failed: %s" % (name, e))
            raise DaemonGone()
        last = info
        if info.get("state") == "committed" and int(info.get("version", 0)) == version:
            if info.get("rule") != "dcp-metadata":
                problem("%s v%d committed with rule %s, expected dcp-metadata" % (name, version, info.get("rule")))
            return info
        if info.get("state") not in ("open", "committed"):
            problem("%s v%d: state %s after the .metadata rename (%s)" % (name, version, info.get("state"), info))
            raise DaemonGone()
        time.sleep(0.005)
    problem("%s v%d not committed 15 s after the .metadata rename; last xattr %s" % (name, version, last))
    raise DaemonGone()


def newer_listed(name):
    """How many listed (committed) steps are newer than `name`."""
    step = int(STEP_RE.match(name).group(1))
    return sum(1 for n in listing() if int(STEP_RE.match(n).group(1)) > step)


def listing():
    names = []
    for n in os.listdir(series):
        m = STEP_RE.match(n)
        if not m:
            problem("unexpected entry %r in the series directory" % n)
            continue
        names.append((int(m.group(1)), n))
    return [n for _, n in sorted(names)]


def metadata_bytes(name, files):
    return json.dumps({"step": name, "files": {k: len(v) for k, v in files.items()},
                       "pad": rng.randbytes(rng.randint(0, 3000)).hex()}).encode()


def commit(d, name, version, files):
    """files: name -> bytes of every data file; writes .metadata.tmp, logs the
    intent, renames onto .metadata, waits for the commit, logs it."""
    meta = metadata_bytes(name, files)
    write_file(os.path.join(d, ".metadata.tmp"), meta)
    hashes = dict(files)
    hashes[".metadata"] = sha(meta)
    log(ev="intent", name=name, version=version, files=hashes, cycle=cycle)
    if version > 1 and rng.random() < 0.5 and os.path.exists(os.path.join(d, ".metadata")):
        os.unlink(os.path.join(d, ".metadata"))  # newer DCP unlinks before the rename
    os.rename(os.path.join(d, ".metadata.tmp"), os.path.join(d, ".metadata"))
    wait_committed(d, name, version)
    log(ev="commit", name=name, version=version, files=hashes, cycle=cycle)
    # keep-latest-k runs right after a commit: the listing shows at most K.
    deadline = time.time() + 5
    while keep:
        n = len(listing())
        if n <= keep:
            log(ev="kept", listed=n, cycle=cycle)
            break
        if time.time() > deadline:
            problem("keep=%d: %d committed generations listed 5 s after %s v%d committed: %s"
                    % (keep, n, name, version, listing()))
            break
        time.sleep(0.01)


def next_step():
    p = os.path.join(statedir, "next_step")
    try:
        n = int(open(p).read())
    except FileNotFoundError:
        n = 1
    with open(p + ".tmp", "w") as f:
        f.write("%d\n" % (n + 1))
        f.flush()
        os.fsync(f.fileno())
    os.rename(p + ".tmp", p)
    return n


def new_step():
    step = next_step()
    name = "step-%d" % step
    log(ev="begin", op="new", name=name, cycle=cycle)
    d = os.path.join(series, name)
    os.makedirs(d, exist_ok=True)  # every rank does this at once in DCP
    files = {}
    for i in range(rng.randint(2, 4)):
        fn = "__%d_0.distcp" % i
        data = make_data()
        write_file(os.path.join(d, fn), data)
        files[fn] = sha(data)
    commit(d, name, 1, files)


def rewrite(name):
    d = os.path.join(series, name)
    info = gen_info(d)
    if info.get("state") != "committed":
        problem("%s is listed but its state is %s" % (name, info))
        return
    version = int(info["version"])
    log(ev="begin", op="rewrite", name=name, version=version + 1, cycle=cycle)
    files = {}
    for fn in sorted(os.listdir(d)):
        with open(os.path.join(d, fn), "rb") as f:
            files[fn] = sha(f.read())
    files.pop(".metadata", None)
    victims = sorted(f for f in files if f.endswith(".distcp"))
    if not victims:
        problem("%s v%d has no .distcp file: %s" % (name, version, sorted(files)))
        return
    fn = rng.choice(victims)
    data = make_data()
    write_file(os.path.join(d, fn), data)
    files[fn] = sha(data)
    commit(d, name, version + 1, files)


def delete(name):
    log(ev="begin", op="delete", name=name, cycle=cycle)
    shutil.rmtree(os.path.join(series, name))
    try:
        os.lstat(os.path.join(series, name))
        problem("%s still exists after rmtree" % name)
    except FileNotFoundError:
        pass
    log(ev="deleted", name=name, cycle=cycle)


def main():
    os.makedirs(series, exist_ok=True)
    while True:
        names = listing()
        r = rng.random()
        if names and r < 0.2:
            rewrite(rng.choice(names))
        elif len(names) >= 2 and r < 0.3:
            delete(names[0])
        else:
            new_step()


try:
    main()
except DaemonGone:
    sys.exit(0)
except OSError as e:
    if e.errno in DEAD or not daemon_alive():
        sys.exit(0)
    problem("error from the mount while the daemon was alive: %s\n%s" % (e, traceback.format_exc()))
    sys.exit(3)
