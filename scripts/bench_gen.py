#!/usr/bin/python3
"""bench_gen — the generation workloads of scripts/bench.sh (BENCH_ONLY=gen).

Each command does its work, times it from the inside (time.monotonic_ns) and
prints its results as KEY=VALUE words on one line of stdout; bench.sh parses
them. Anything unexpected (a generation that does not commit, a tree that is
still there) is an error: a line on stderr and exit status 1.

  mkfiles DIR N SIZE NSUB SYNCDIR [NPROC]
        create N files in DIR (in NSUB subdirectories d00.. of DIR, or directly
        in DIR if NSUB is 0): for each, open(O_CREAT|O_EXCL|O_WRONLY), one
        write() of SIZE bytes, close(). Every file's content differs (random
        bytes with the file's number in front), so that ckptfs cannot
        deduplicate them. With NPROC > 1, that many processes share the
        files (for untimed set-up). Prints seconds= (the creates), and
        syncfs_seconds= (then syncfs() on the filesystem holding SYNCDIR;
        '-' skips it).
  meta N SIZE BLOCKS DAEMONPID FIRST PLAINDIR CKPTDIR SYNCDIR [CATALOG]
        the same as mkfiles (flat, no subdirectories) into PLAINDIR and into
        CKPTDIR, interleaved so that both sides see the same background load:
        the N files of each side are made in BLOCKS blocks, in the order
        A B B A A B ... (A = FIRST, plain or ckptfs), each block followed by a
        syncfs() of SYNCDIR's filesystem. Prints plain_s= ckptfs_s= (the
        creates), plain_syncfs_s= ckptfs_syncfs_s= (the syncfs after each of
        that side's blocks), cpu_s= sys_s= (CPU time of process DAEMONPID
        during the ckptfs blocks, and the kernel part of it). With CATALOG
        (the daemon's catalog.db), then waits until it queues no upload and
        prints ckptfs_drain_s= (from the end of the last ckptfs block: the
        uploads of the files' objects to BACKING, which may run behind the
        creates, catalog_defer.c D9), and cpu_all_s= (the daemon's CPU time
        from the first block until then: both sides' blocks and the wait).
  dcpprep GENDIR SIZE
        a DCP save's data without its commit: GENDIR/__0_0.distcp of SIZE
        bytes and .metadata.tmp, each written, fsync'd, closed.
  dcpcommit GENDIR
        rename GENDIR/.metadata.tmp onto .metadata, then wait until
        user.ckptfs.generation says state=committed. Prints rename_ms=,
        commit_ms= (both from the start of the rename). On the mount only.
  saves SERIES N SIZE SEED
        N DCP-style saves SERIES/step-1..N: __0_0.distcp and __1_0.distcp of
        SIZE fresh random bytes each (numpy SFC64, generated before the save),
        each written in 1 MiB writes, fsync'd, closed; then .metadata.tmp
        written, fsync'd, closed and renamed onto .metadata. From the start of
        the rename, user.ckptfs.generation on step-K is read in a loop until it
        says state=committed (before the rename it must say state=open).
        Prints one line per save (save= write_s= fsync_s= rename_ms=
        commit_ms= polls=).
  keepwait SERIES OLD NEW
        rename SERIES/NEW/.metadata.tmp onto .metadata (commits NEW, which on a
        keep=1 mount deletes OLD), then wait until OLD is gone: stat() of
        SERIES/OLD fails with ENOENT and OLD is not in os.listdir(SERIES).
        Prints rename_ms=, new_committed_ms= (first read of NEW's state that
        says committed), gone_ms=, and the first times stat() failed
        (stat_enoent_ms=) and OLD was not listed (unlisted_ms=), all from the
        start of the rename.
  rmrf PATH
        /bin/rm -rf PATH, timed (fork and exec included). Prints seconds=.

Exit status: 0 ok, 1 an error (with a line on stderr), 2 bad usage.
"""
import ctypes
import errno
import os
import sqlite3
import sys
import time

XATTR = "user.ckptfs.generation"
IO = 1 << 20
TIMEOUT_S = 120  # waiting for a commit or a deletion longer than this fails


class BenchError(Exception):
    pass


def now():
    return time.monotonic_ns()


def ms(ns):
    return f"{ns / 1e6:.3f}"


def write_all(fd, buf):
    view = memoryview(buf)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def gen_state(path):
    """The state word of user.ckptfs.generation at path ('open', 'committed',
    ...), or None if the path has none."""
    try:
        v = os.getxattr(path, XATTR).decode()
    except OSError as e:
        if e.errno in (errno.ENODATA, errno.ENOENT):
            return None
        raise
    for w in v.split():
        if w.startswith("state="):
            return w[6:]
    return None


def wait_committed(path, t0):
    """Reads the state in a loop until committed; returns (ns since t0, polls)."""
    polls = 0
    while True:
        st = gen_state(path)
        polls += 1
        t = now()
        if st == "committed":
            return t - t0, polls
        if st not in ("open", None) or t - t0 > TIMEOUT_S * 1e9:
            raise BenchError(f"{path}: state={st} {((t - t0) / 1e9):.1f} s after the rename, waiting for committed")


def libc_syncfs(path):
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if libc.syncfs(fd) != 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e), path)
    finally:
        os.close(fd)


def contents(n, size, seed):
    """n distinct byte strings of `size` bytes: random bytes, each with its
    own number (and the seed) in front. Made before the timing starts."""
    base = os.urandom(size)
    return [(seed * (1 << 32) + i).to_bytes(16, "little")[:size] + base[16:] for i in range(n)]


def cmd_mkfiles(d, n, size, nsub, syncdir, nproc="1"):
    n, size, nsub, nproc = int(n), int(size), int(nsub), int(nproc)
    datas = contents(n, size, 1)
    dirs = [os.path.join(d, f"d{i:02d}") for i in range(nsub)] if nsub else [d]
    os.makedirs(d, exist_ok=True)
    for x in dirs:
        os.makedirs(x, exist_ok=True)
    paths = [os.path.join(dirs[i % len(dirs)], f"f{i:06d}") for i in range(n)]
    flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY
    t0 = now()
    if nproc <= 1:
        for p, data in zip(paths, datas):
            fd = os.open(p, flags, 0o644)
            write_all(fd, data)
            os.close(fd)
    else:
        kids = []
        for w in range(nproc):
            pid = os.fork()
            if pid == 0:
                code = 0
                try:
                    for i in range(w, n, nproc):
                        fd = os.open(paths[i], flags, 0o644)
                        write_all(fd, datas[i])
                        os.close(fd)
                except OSError as e:
                    print(f"bench_gen: mkfiles: {e}", file=sys.stderr)
                    code = 1
                os._exit(code)
            kids.append(pid)
        bad = [pid for pid in kids if os.waitpid(pid, 0)[1] != 0]
        if bad:
            raise BenchError(f"{len(bad)} of {nproc} processes failed")
    t1 = now()
    out = f"seconds={(t1 - t0) / 1e9:.4f}"
    if syncdir != "-":
        libc_syncfs(syncdir)
        out += f" syncfs_seconds={(now() - t1) / 1e9:.4f}"
    print(out)
    return 0


def cpu_of(pid):
    """(utime + stime, stime) of a process, in clock ticks."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[0] is field 3 (state): utime is field 14, stime field 15
    return int(fields[11]) + int(fields[12]), int(fields[12])


def uploads_drained(catalog, timeout_s=600):
    """Waits until CATALOG (read-only) queues no upload; the monotonic ns then."""
    deadline = time.monotonic() + timeout_s
    db = sqlite3.connect(f"file:{catalog}?mode=ro", uri=True, timeout=5)
    try:
        while True:
            try:
                if db.execute("SELECT COUNT(*) FROM uploads").fetchone()[0] == 0:
                    return now()
            except sqlite3.OperationalError:  # busy: try again
                pass
            if time.monotonic() > deadline:
                raise BenchError(f"{catalog}: uploads still queued after {timeout_s} s")
            time.sleep(0.02)
    finally:
        db.close()


def cmd_meta(n, size, blocks, pid, first, plaindir, ckptdir, syncdir, catalog=None):
    n, size, blocks = int(n), int(size), int(blocks)
    if first not in ("plain", "ckptfs"):
        raise BenchError("FIRST must be plain or ckptfs")
    second = "ckptfs" if first == "plain" else "plain"
    dirs = {"plain": plaindir, "ckptfs": ckptdir}
    for d in dirs.values():
        os.makedirs(d, exist_ok=True)
    datas = {"plain": contents(n, size, 2), "ckptfs": contents(n, size, 3)}
    flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY
    t = {"plain": 0, "ckptfs": 0}
    ts = {"plain": 0, "ckptfs": 0}
    cpu = sys_ = 0
    bounds = [n * k // blocks for k in range(blocks + 1)]
    c_all = cpu_of(pid)
    for k in range(blocks):
        for side in ((first, second) if k % 2 == 0 else (second, first)):
            todo = [(os.path.join(dirs[side], f"f{i:06d}"), datas[side][i]) for i in range(bounds[k], bounds[k + 1])]
            if side == "ckptfs":
                c0 = cpu_of(pid)
            a = now()
            for path, data in todo:
                fd = os.open(path, flags, 0o644)
                write_all(fd, data)
                os.close(fd)
            b = now()
            if side == "ckptfs":
                ckpt_end = b
                c1 = cpu_of(pid)
                cpu += c1[0] - c0[0]
                sys_ += c1[1] - c0[1]
            libc_syncfs(syncdir)
            t[side] += b - a
            ts[side] += now() - b
    hz = os.sysconf("SC_CLK_TCK")
    drain = ""
    if catalog:
        d = uploads_drained(catalog)
        drain = (f" ckptfs_drain_s={(d - ckpt_end) / 1e9:.4f}"
                 f" cpu_all_s={(cpu_of(pid)[0] - c_all[0]) / hz:.3f}")
    print(f"plain_s={t['plain'] / 1e9:.4f} ckptfs_s={t['ckptfs'] / 1e9:.4f}"
          f" plain_syncfs_s={ts['plain'] / 1e9:.4f} ckptfs_syncfs_s={ts['ckptfs'] / 1e9:.4f}"
          f" cpu_s={cpu / hz:.3f} sys_s={sys_ / hz:.3f}{drain}")
    return 0


def write_file(path, buf, sync=True):
    fd = os.open(path, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o644)
    view = memoryview(buf)
    for off in range(0, len(view), IO):
        write_all(fd, view[off:off + IO])
    if sync:
        os.fsync(fd)
    os.close(fd)


def metadata_bytes(gendir):
    # stands in for DCP's pickled Metadata: a few KiB naming the shards
    return (("%s:" % gendir) * 200).encode()[:4096]


def cmd_dcpprep(gendir, size):
    os.makedirs(gendir, exist_ok=True)
    write_file(os.path.join(gendir, "__0_0.distcp"), os.urandom(int(size)))
    write_file(os.path.join(gendir, ".metadata.tmp"), metadata_bytes(gendir))
    print("ok=1")
    return 0


def cmd_dcpcommit(gendir):
    t0 = now()
    os.rename(os.path.join(gendir, ".metadata.tmp"), os.path.join(gendir, ".metadata"))
    t1 = now()
    dt, polls = wait_committed(gendir, t0)
    print(f"rename_ms={ms(t1 - t0)} commit_ms={ms(dt)} polls={polls}")
    return 0


def cmd_saves(series, n, size, seed):
    import numpy as np

    n, size = int(n), int(size)
    rng = np.random.Generator(np.random.SFC64(int(seed)))
    os.makedirs(series, exist_ok=True)
    for k in range(1, n + 1):
        bufs = [rng.integers(0, 2**64 - 1, size=(size + 7) // 8, dtype=np.uint64, endpoint=True)
                for _ in range(2)]
        bufs = [memoryview(b).cast("B")[:size] for b in bufs]
        gendir = os.path.join(series, f"step-{k}")
        os.mkdir(gendir)
        write_s = fsync_s = 0
        for rank, buf in enumerate(bufs):
            fd = os.open(os.path.join(gendir, f"__{rank}_0.distcp"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            a = now()
            for off in range(0, size, IO):
                write_all(fd, buf[off:off + IO])
            b = now()
            os.fsync(fd)
            c = now()
            os.close(fd)
            write_s += b - a
            fsync_s += c - b
        a = now()
        write_file(os.path.join(gendir, ".metadata.tmp"), metadata_bytes(gendir))
        fsync_s += now() - a
        st = gen_state(gendir)
        if st != "open":
            raise BenchError(f"{gendir}: state={st} before the rename of .metadata.tmp, expected open")
        t0 = now()
        os.rename(os.path.join(gendir, ".metadata.tmp"), os.path.join(gendir, ".metadata"))
        t1 = now()
        dt, polls = wait_committed(gendir, t0)
        print(f"save={k} write_s={write_s / 1e9:.3f} fsync_s={fsync_s / 1e9:.3f} rename_ms={ms(t1 - t0)}"
              f" commit_ms={ms(dt)} polls={polls}", flush=True)
        del bufs
    return 0


def cmd_keepwait(series, old, new):
    oldp, newp = os.path.join(series, old), os.path.join(series, new)
    if gen_state(oldp) != "committed":
        raise BenchError(f"{oldp}: not committed before the test")
    t0 = now()
    os.rename(os.path.join(newp, ".metadata.tmp"), os.path.join(newp, ".metadata"))
    t1 = now()
    committed = gone = no_stat = unlisted = None
    polls = 0
    while committed is None or gone is None:
        polls += 1
        if committed is None and gen_state(newp) == "committed":
            committed = now() - t0
        if gone is None:
            try:
                os.stat(oldp)
                stat_there = True
            except FileNotFoundError:
                stat_there = False
                if no_stat is None:
                    no_stat = now() - t0
            listed = old in os.listdir(series)
            if not listed and unlisted is None:
                unlisted = now() - t0
            if not stat_there and not listed:
                gone = now() - t0
        if now() - t0 > TIMEOUT_S * 1e9:
            raise BenchError(f"{oldp}: still there {TIMEOUT_S} s after {new} committed={committed is not None}")
    print(f"rename_ms={ms(t1 - t0)} new_committed_ms={ms(committed)} gone_ms={ms(gone)}"
          f" stat_enoent_ms={ms(no_stat)} unlisted_ms={ms(unlisted)} polls={polls}")
    return 0


def cmd_rmrf(path):
    import subprocess

    t0 = now()
    subprocess.run(["/bin/rm", "-rf", "--", path], check=True)
    t1 = now()
    if os.path.lexists(path):
        raise BenchError(f"{path}: still there after rm -rf")
    print(f"seconds={(t1 - t0) / 1e9:.3f}")
    return 0


def main(argv):
    cmds = {  # name: (function, fewest arguments, most arguments)
        "mkfiles": (cmd_mkfiles, 5, 6), "meta": (cmd_meta, 8, 9), "dcpprep": (cmd_dcpprep, 2, 2),
        "dcpcommit": (cmd_dcpcommit, 1, 1), "saves": (cmd_saves, 4, 4), "keepwait": (cmd_keepwait, 3, 3),
        "rmrf": (cmd_rmrf, 1, 1)}
    if len(argv) < 2 or argv[1] not in cmds or not cmds[argv[1]][1] <= len(argv) - 2 <= cmds[argv[1]][2]:
        print(__doc__, file=sys.stderr)
        return 2
    fn = cmds[argv[1]][0]
    try:
        return fn(*argv[2:])
    except (OSError, BenchError, ValueError) as e:
        print(f"bench_gen: {argv[1]} {' '.join(argv[2:])}: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # subprocess.CalledProcessError and the like
        print(f"bench_gen: {argv[1]} {' '.join(argv[2:])}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
