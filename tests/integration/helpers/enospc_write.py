"""enospc_write.py SRC DST — writes SRC into DST (created, truncated) as a
trainer saving a shard would, on a cache that fills (t_failsave.sh,
tests/multinode/t_failsave2.sh): the first 8 MiB then a mid-save fsync,
the rest 1 MiB a write, then close. Exit 3 if a write or the close failed
with ENOSPC, 4 if with another error, 0 if nothing failed."""
import errno
import os
import sys

src = open(sys.argv[1], "rb").read()
fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, src[:8 << 20])
os.fsync(fd)  # a mid-save fsync
err = None
try:
    off = 8 << 20
    while off < len(src):
        off += os.write(fd, src[off:off + (1 << 20)])
except OSError as e:
    err = e
try:
    os.close(fd)
except OSError as e:
    err = err or e
sys.exit(3 if err and err.errno == errno.ENOSPC else (4 if err else 0))
