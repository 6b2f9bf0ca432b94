#!/usr/bin/python3
"""bench_mn — the cross-node commit latency of scripts/bench.sh's multi-node
phase (BENCH_ONLY=multinode): two ckptfs nodes of one shared catalog mount
the same namespace at A and B.

  saves A_SERIES B_SERIES N SIZE   N DCP-style saves: step-k made on node A,
                                   shard 0 written on A and shard 1 on B
                                   (SIZE bytes each, fsync, close), then the
                                   completion signal on A (.metadata.tmp
                                   written, fsync'd, renamed onto .metadata);
                                   ms from the start of that rename until node
                                   B reads state=committed on step-k
  commit GENDIR OBSERVE_GENDIR     the completion signal in GENDIR, then waits
                                   until OBSERVE_GENDIR (the same directory,
                                   maybe through another node) says committed
  durable ADMIN T0_NS MNT...       save -> durable: polls `ADMIN stats MNT`
                                   of every node until each one's upload queue
                                   (chunks and generation manifests) is empty;
                                   ms from T0_NS (the wall clock, ns, as
                                   `date +%s%N` gave it when the save's commit
                                   was seen) and how many stats calls it made

One "key=value ..." line per save / commit. Exit status 1 on any error.
"""
import errno
import os
import subprocess
import sys
import time

XATTR = "user.ckptfs.generation"
TIMEOUT_S = 60
IO = 1 << 20


def now():
    return time.monotonic_ns()


def state(path):
    """The state word of user.ckptfs.generation at path, or None."""
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
    polls = 0
    while True:
        st = state(path)
        polls += 1
        t = now()
        if st == "committed":
            return t - t0, polls
        if st not in ("open", None) or t - t0 > TIMEOUT_S * 1e9:
            raise RuntimeError(f"{path}: state={st} {(t - t0) / 1e9:.1f} s after the signal")


def write_file(path, buf):
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    view = memoryview(buf)
    for off in range(0, len(view), IO):
        part = view[off:off + IO]
        while part:
            part = part[os.write(fd, part):]
    os.fsync(fd)
    os.close(fd)


def signal(gendir):
    """The completion signal; returns the time its rename started."""
    write_file(os.path.join(gendir, ".metadata.tmp"), (("%s:" % gendir) * 200).encode()[:4096])
    t0 = now()
    os.rename(os.path.join(gendir, ".metadata.tmp"), os.path.join(gendir, ".metadata"))
    return t0


def wait_seen(path):
    """A directory made on the other node: seen here within TIMEOUT_S."""
    t0 = now()
    while not os.path.isdir(path):
        if now() - t0 > TIMEOUT_S * 1e9:
            raise RuntimeError(f"{path}: not seen {TIMEOUT_S} s after it was made on the other node")
        time.sleep(0.001)


def cmd_saves(a_series, b_series, n, size):
    n, size = int(n), int(size)
    os.makedirs(a_series, exist_ok=True)
    for k in range(1, n + 1):
        bufs = [os.urandom(size) for _ in range(2)]
        a_dir, b_dir = (os.path.join(s, f"step-{k}") for s in (a_series, b_series))
        os.mkdir(a_dir)
        wait_seen(b_dir)
        write_file(os.path.join(a_dir, "__0_0.distcp"), bufs[0])
        write_file(os.path.join(b_dir, "__1_0.distcp"), bufs[1])
        t0 = signal(a_dir)
        dt, polls = wait_committed(b_dir, t0)
        print(f"save={k} commit_ms={dt / 1e6:.3f} polls={polls}", flush=True)
    return 0


def cmd_commit(gendir, observe):
    t0 = signal(gendir)
    dt, polls = wait_committed(observe, t0)
    print(f"commit_ms={dt / 1e6:.3f} polls={polls}")
    return 0


def upload_queue(admin, mnt):
    out = subprocess.run([admin, "stats", mnt], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        w = line.split()
        if len(w) >= 2 and w[0] == "upload_queue":
            return int(w[1])
    raise RuntimeError(f"{admin} stats {mnt}: no upload_queue line")


def cmd_durable(admin, t0_ns, *mnts):
    """Every node's queue empty, polled every 10 ms (a stats call costs its
    own PostgreSQL round trips: the caller takes polls of them off)."""
    t0, polls = int(t0_ns), 0
    left = list(mnts)
    while left:
        polls += 1
        if upload_queue(admin, left[0]) == 0:
            left.pop(0)
            continue
        if time.time_ns() - t0 > 120 * 1e9:
            raise RuntimeError(f"{left[0]}: uploads not done 120 s after the save")
        time.sleep(0.01)
    print(f"durable_ms={(time.time_ns() - t0) / 1e6:.1f} polls={polls}")
    return 0


def main(argv):
    cmds = {"saves": (cmd_saves, 4), "commit": (cmd_commit, 2)}
    if len(argv) >= 5 and argv[1] == "durable":
        try:
            return cmd_durable(*argv[2:])
        except (OSError, RuntimeError, subprocess.CalledProcessError) as e:
            print(f"bench_mn: durable: {e}", file=sys.stderr)
            return 1
    if len(argv) < 2 or argv[1] not in cmds or len(argv) - 2 != cmds[argv[1]][1]:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        return cmds[argv[1]][0](*argv[2:])
    except (OSError, RuntimeError) as e:
        print(f"bench_mn: {argv[1]} {' '.join(argv[2:])}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
