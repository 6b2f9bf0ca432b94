#!/usr/bin/python3
"""bench_io — the I/O workers of scripts/bench.sh.

One process per file, so that bench.sh can run several concurrently and time
the group from the outside. A file's content is a "stream": an optional
header that depends on a name, followed by the bytes of a source file that
lives in tmpfs (/dev/shm), so that producing the data costs only a memcpy.

  gen    PATH SIZE SEED            incompressible bytes (numpy SFC64) into PATH
  write  SRC DST HEADER_LEN NAME   stream -> DST in 1 MiB writes, fsync, close
  fill   SRC DST                   SRC -> DST in 1 MiB writes, close (no fsync)
  read   PATH                      read PATH in 1 MiB reads, discard
  verify SRC DST HEADER_LEN NAME   DST must equal the stream, byte for byte

Exit status: 0 ok, 1 mismatch or I/O error (with a line on stderr).
"""
import hashlib
import mmap
import os
import sys

IO = 1 << 20  # bytes per write()/read() call


def header_bytes(length, name):
    """A header of `length` bytes that depends on `name` (like the internal
    paths of a torch.save archive saved under different names)."""
    seed = hashlib.sha256(name.encode()).digest()
    return (seed * (length // len(seed) + 1))[:length]


def open_src(path):
    fd = os.open(path, os.O_RDONLY)
    size = os.fstat(fd).st_size
    mm = mmap.mmap(fd, size, prot=mmap.PROT_READ) if size else b""
    os.close(fd)
    return mm, size


def cmd_gen(path, size, seed):
    import numpy as np

    gen = np.random.Generator(np.random.SFC64(int(seed)))
    size = int(size)
    block = 64 << 20
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(block, left)
            words = gen.integers(0, 2**64 - 1, size=(n + 7) // 8, dtype=np.uint64, endpoint=True)
            f.write(memoryview(words).cast("B")[:n])
            left -= n
    return 0


def write_all(fd, buf):
    view = memoryview(buf)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def cmd_write(src, dst, header_len, name, sync=True):
    mm, size = open_src(src)
    head = header_bytes(int(header_len), name)
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    view = memoryview(mm) if size else memoryview(b"")
    # The first write carries the header, so that every write is IO bytes
    # (the last one excepted) whatever the header length.
    first = min(size, max(0, IO - len(head)))
    write_all(fd, head + bytes(view[:first]))
    off = first
    while off < size:
        write_all(fd, view[off:off + IO])
        off += IO
    if sync:
        os.fsync(fd)
    os.close(fd)
    view.release()
    return 0


def cmd_fill(src, dst):
    return cmd_write(src, dst, 0, "-", sync=False)


def cmd_read(path):
    buf = bytearray(IO)
    total = 0
    with open(path, "rb", buffering=0) as f:
        while True:
            n = f.readinto(buf)
            if not n:
                break
            total += n
    return 0


def cmd_verify(src, dst, header_len, name):
    mm, size = open_src(src)
    head = header_bytes(int(header_len), name)
    want_size = len(head) + size
    got_size = os.stat(dst).st_size
    if got_size != want_size:
        print(f"bench_io: {dst}: size {got_size}, expected {want_size}", file=sys.stderr)
        return 1
    with open(dst, "rb", buffering=0) as f:
        off = 0
        while off < want_size:
            got = f.read(IO)
            if not got:
                print(f"bench_io: {dst}: short read at offset {off}", file=sys.stderr)
                return 1
            end = off + len(got)
            if off < len(head):
                want = head[off:min(end, len(head))] + mm[0:max(0, end - len(head))]
            else:
                want = mm[off - len(head):end - len(head)]
            if got != want:
                bad = next(i for i in range(len(got)) if got[i] != want[i])
                print(f"bench_io: {dst}: data mismatch at offset {off + bad}", file=sys.stderr)
                return 1
            off = end
    return 0


def main(argv):
    cmds = {"gen": (cmd_gen, 3), "write": (cmd_write, 4), "fill": (cmd_fill, 2), "read": (cmd_read, 1),
            "verify": (cmd_verify, 4)}
    if len(argv) < 2 or argv[1] not in cmds or len(argv) - 2 != cmds[argv[1]][1]:
        print(__doc__, file=sys.stderr)
        return 2
    fn, _ = cmds[argv[1]]
    try:
        return fn(*argv[2:])
    except OSError as e:
        print(f"bench_io: {argv[1]} {' '.join(argv[2:])}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
