#!/usr/bin/python3
"""bench_wb — helpers of the write-back phases of scripts/bench.sh.

  durable CATALOG TIMEOUT_S   wait until the catalog (read-only) says that
                              nothing is queued for upload and every committed
                              generation is durable (durable_version = version,
                              at least one committed); polls every 50 ms.
                              Prints waited_s=SECONDS polls=N.

Exit status: 0 ok, 1 timeout or error (with a line on stderr).
"""
import sqlite3
import sys
import time

QUERY = ("SELECT (SELECT COUNT(*) FROM uploads),"
         " (SELECT COUNT(*) FROM generations WHERE state = 1),"
         " (SELECT COUNT(*) FROM generations WHERE state = 1 AND durable_version != version)")


def cmd_durable(catalog, timeout_s):
    t0 = time.monotonic()
    deadline = t0 + float(timeout_s)
    db = sqlite3.connect(f"file:{catalog}?mode=ro", uri=True, timeout=5)
    polls = 0
    last = None
    while True:
        polls += 1
        try:
            last = db.execute(QUERY).fetchone()
        except sqlite3.OperationalError as e:  # busy: try again
            last = str(e)
        if isinstance(last, tuple) and last[0] == 0 and last[1] > 0 and last[2] == 0:
            break
        if time.monotonic() > deadline:
            print(f"bench_wb: {catalog}: not durable after {timeout_s} s "
                  f"(uploads, committed, not durable: {last})", file=sys.stderr)
            return 1
        time.sleep(0.05)
    print(f"waited_s={time.monotonic() - t0:.3f} polls={polls}")
    return 0


def main(argv):
    cmds = {"durable": (cmd_durable, 2)}
    if len(argv) < 2 or argv[1] not in cmds or len(argv) - 2 != cmds[argv[1]][1]:
        print(__doc__, file=sys.stderr)
        return 2
    fn, _ = cmds[argv[1]]
    return fn(*argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
