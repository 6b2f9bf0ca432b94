#!/usr/bin/python3
"""complete_files.py — real self-delimiting checkpoint files, their truncation
points and per-rank torch.save jobs, for tests/integration/t_complete.sh.

  complete_files.py make KIND PATH
      writes one complete file of KIND at PATH, in place (torch: torch.save(obj,
      PATH) with no temp file; safetensors: written by hand, 8-byte LE header
      length + JSON + data; npy: np.save; npz: np.savez). Deterministic: the
      same KIND and base name give the same bytes. Prints the time of the
      close (time.time()) on stdout.
      KIND: torch | safetensors | npy | npz
  complete_files.py cuts KIND FILE
      prints ten truncation lengths of FILE, "LEN LABEL" per line: spread
      offsets, 1 byte short, inside the central directory (zips), inside the
      last record / tensor.
  complete_files.py job SERIES REF --steps 100,200 [--ranks 2] [--only-rank0 STEP]
                        [--pause S] [--slow-rank1 STEP READY]
      a plain per-rank torch.save job: for each step, SERIES/step-N/rank{r}.pt
      from r processes (rank 1 forked: another PID), the same bytes into
      REF/step-N/rank{r}.pt; --pause seconds of "training" between saves;
      --only-rank0 STEP: at that step rank 1 writes nothing; --slow-rank1
      STEP READY: at that step rank 1 saves a 48 MiB tensor through a file
      object that writes 1 MiB pieces 60 ms apart and creates READY after
      8 MiB (the test SIGKILLs the job then). Exits 0.
  complete_files.py resume SERIES REF [--expect N]
      the resume a per-rank job does: glob SERIES/step-*/rank*.pt, take the
      highest step, torch.load every rank file and compare every tensor with
      REF (torch.equal). Prints "resumed N"."""
import argparse
import glob
import json
import os
import re
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_shim  # noqa: F401,E402

import numpy as np  # noqa: E402
import torch  # noqa: E402


def fail(msg):
    print("complete_files: " + msg, file=sys.stderr, flush=True)
    sys.exit(1)


def state(seed, big=0):
    g = torch.Generator().manual_seed(seed)
    d = {"model": {"w1": torch.randn(256, 300, generator=g), "b1": torch.randn(300, generator=g),
                   "w2": torch.randn(300, 77, generator=g)},
         "optimizer": {"step": seed, "exp_avg": torch.randn(1000, generator=g)},
         "step": seed, "meta": {"name": "run", "lr": 1e-3}}
    if big:
        d["big"] = torch.randn(big // 4, generator=g)
    return d


def safetensors_bytes(seed):
    rng = np.random.default_rng(seed)
    tensors = {"a.weight": rng.standard_normal((128, 96), dtype=np.float32),
               "a.bias": rng.standard_normal(96, dtype=np.float32),
               "b.weight": rng.standard_normal((96, 333), dtype=np.float32)}
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for k in sorted(tensors):
        b = tensors[k].tobytes()
        header[k] = {"dtype": "F32", "shape": list(tensors[k].shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def cmd_make(a):
    seed = 1234
    if a.kind == "torch":
        torch.save(state(seed), a.path)  # in place: the zip is written straight into PATH
    elif a.kind == "safetensors":
        with open(a.path, "wb") as f:
            f.write(safetensors_bytes(seed))
    elif a.kind == "npy":
        with open(a.path, "wb") as f:  # np.save(path) would append .npy to a name without it
            np.save(f, np.random.default_rng(seed).standard_normal((200, 300)))
    elif a.kind == "npz":
        rng = np.random.default_rng(seed)
        with open(a.path, "wb") as f:
            np.savez(f, w=rng.standard_normal((200, 150)), b=rng.standard_normal(150).astype(np.float32),
                     i=np.arange(1000, dtype=np.int64))
    else:
        fail("unknown kind " + a.kind)
    print("%.6f" % time.time(), flush=True)


def zip_cuts(data):
    e = data.rfind(b"PK\x05\x06")
    if e < 0:
        fail("no end of central directory record")
    cd_size, cd_off = struct.unpack("<II", data[e + 12:e + 20])
    if cd_off == 0xFFFFFFFF:  # zip64: the locator points at the zip64 end record
        z = data.rfind(b"PK\x06\x06")
        cd_size, cd_off = struct.unpack("<QQ", data[z + 40:z + 56])
    cd_start = cd_off
    # the local records: the last one's header sits at the last central entry's offset
    offs, p = [], cd_start
    while p < cd_start + cd_size and data[p:p + 4] == b"PK\x01\x02":
        n, m, k = struct.unpack("<HHH", data[p + 28:p + 34])
        lo = struct.unpack("<I", data[p + 42:p + 46])[0]
        if lo == 0xFFFFFFFF:  # zip64 extra
            lo = struct.unpack("<Q", data[p + 46 + n + 4:p + 46 + n + 12])[0]
        offs.append(lo)
        p += 46 + n + m + k
    last = max(offs)
    size = len(data)
    return [(1, "1-byte"), (30, "inside-first-local-header"), (size // 4, "quarter"), (size // 2, "half"),
            ((last + cd_start) // 2, "inside-last-record"), (cd_start, "at-central-directory"),
            (cd_start + cd_size // 2, "inside-central-directory"), (e, "before-end-record"),
            (e + 10, "inside-end-record"), (size - 1, "1-byte-short")]


def cmd_cuts(a):
    data = open(a.file, "rb").read()
    size = len(data)
    if a.kind in ("torch", "npz"):
        cuts = zip_cuts(data)
    elif a.kind == "safetensors":
        n = struct.unpack("<Q", data[:8])[0]
        h = json.loads(data[8:8 + n])
        base = 8 + n
        last = max(v["data_offsets"][0] for k, v in h.items() if k != "__metadata__")
        cuts = [(1, "1-byte"), (7, "inside-header-length"), (8, "header-length-only"), (8 + n // 2, "inside-header"),
                (base, "header-no-data"), (base + 100, "inside-first-tensor"), (size // 2, "half"),
                (base + last + 17, "inside-last-tensor"), (size - 4, "4-bytes-short"), (size - 1, "1-byte-short")]
    elif a.kind == "npy":
        hl = struct.unpack("<H", data[8:10])[0] if data[6] == 1 else struct.unpack("<I", data[8:12])[0]
        hend = (10 if data[6] == 1 else 12) + hl
        cuts = [(1, "1-byte"), (6, "magic-only"), (9, "inside-header-length"), (hend // 2, "inside-header"),
                (hend, "header-no-data"), (hend + 8, "first-item"), (size // 4, "quarter"), (size // 2, "half"),
                (size - 8, "last-item-missing"), (size - 1, "1-byte-short")]
    else:
        fail("unknown kind " + a.kind)
    seen = set()
    for n, label in cuts:
        if not 0 < n < size or n in seen:
            fail("bad cut %d (%s) of a %d-byte file" % (n, label, size))
        seen.add(n)
        print(n, label)


class SlowFile:
    """A file object torch.save writes into: 1 MiB pieces, 60 ms apart."""

    def __init__(self, path, ready):
        self.f = open(path, "wb", buffering=0)
        self.ready, self.n = ready, 0

    def write(self, b):
        b = memoryview(b).cast("B")
        for i in range(0, len(b), 1 << 20):
            self.f.write(b[i:i + (1 << 20)])
            self.n += min(1 << 20, len(b) - i)
            if self.ready and self.n >= 8 << 20:
                open(self.ready, "w").close()
                self.ready = None
            if len(b) >= 1 << 20:
                time.sleep(0.06)
        return len(b)

    def flush(self):
        pass

    def close(self):
        self.f.close()


def rank_obj(step, r, big=0):
    return state(step * 10 + r, big)


def cmd_job(a):
    steps = [int(s) for s in a.steps.split(",")]
    slow_step, ready = (int(a.slow_rank1[0]), a.slow_rank1[1]) if a.slow_rank1 else (None, None)
    for i, step in enumerate(steps):
        if i and a.pause:
            time.sleep(a.pause)  # training between saves
        d = os.path.join(a.series, "step-%d" % step)
        rd = os.path.join(a.ref, "step-%d" % step)
        os.makedirs(d, exist_ok=True)
        os.makedirs(rd, exist_ok=True)
        for r in range(a.ranks):
            if r == 1 and step == a.only_rank0:
                continue
            big = 48 << 20 if (r == 1 and step == slow_step) else 0
            obj = rank_obj(step, r, big)
            if big:  # saved through a file object: the archive is named "archive"
                with open(os.path.join(rd, "rank%d.pt" % r), "wb") as f:
                    torch.save(obj, f)
            else:
                torch.save(obj, os.path.join(rd, "rank%d.pt" % r))  # same base name: same bytes
            if r == 0:
                torch.save(obj, os.path.join(d, "rank0.pt"))
                continue
            pid = os.fork()
            if pid == 0:  # rank r: another process
                try:
                    if big:
                        f = SlowFile(os.path.join(d, "rank%d.pt" % r), ready)
                        torch.save(obj, f)
                        f.close()
                    else:
                        torch.save(obj, os.path.join(d, "rank%d.pt" % r))
                finally:
                    os._exit(0)
            _, st = os.waitpid(pid, 0)
            if st:
                fail("rank %d exited with status %d" % (r, st))
        print("saved %d" % step, flush=True)


def cmd_resume(a):
    best = None
    for d in glob.glob(os.path.join(a.series, "step-*")):
        m = re.search(r"step-(\d+)$", d)
        if m and glob.glob(os.path.join(d, "rank*.pt")):
            best = max(best or 0, int(m.group(1)))
    if best is None:
        fail("nothing to resume from in %s: %s" % (a.series, sorted(os.listdir(a.series))))
    if a.expect is not None and best != a.expect:
        fail("resume picks step %d, expected %d (listing %s)" % (best, a.expect, sorted(os.listdir(a.series))))
    files = sorted(glob.glob(os.path.join(a.series, "step-%d" % best, "rank*.pt")))
    want = sorted(glob.glob(os.path.join(a.ref, "step-%d" % best, "rank*.pt")))
    if [os.path.basename(f) for f in files] != [os.path.basename(f) for f in want]:
        fail("rank files %s, expected %s" % (files, want))
    for f, w in zip(files, want):
        got, exp = torch.load(f), torch.load(w)
        same(exp, got, f)
    print("resumed %d" % best, flush=True)


def same(want, got, what):
    if isinstance(want, torch.Tensor):
        if not isinstance(got, torch.Tensor) or want.dtype != got.dtype or not torch.equal(want, got):
            fail("%s differs from what was saved" % what)
    elif isinstance(want, dict):
        if not isinstance(got, dict) or sorted(want) != sorted(got):
            fail("%s: keys differ" % what)
        for k in want:
            same(want[k], got[k], "%s.%s" % (what, k))
    elif want != got:
        fail("%s differs: %r vs %r" % (what, want, got))


def main():
    ap = argparse.ArgumentParser(usage=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("make")
    p.add_argument("kind")
    p.add_argument("path")
    p = sub.add_parser("cuts")
    p.add_argument("kind")
    p.add_argument("file")
    p = sub.add_parser("job")
    p.add_argument("series")
    p.add_argument("ref")
    p.add_argument("--steps", required=True)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--only-rank0", type=int)
    p.add_argument("--pause", type=float, default=0)
    p.add_argument("--slow-rank1", nargs=2)
    p = sub.add_parser("resume")
    p.add_argument("series")
    p.add_argument("ref")
    p.add_argument("--expect", type=int)
    a = ap.parse_args()
    {"make": cmd_make, "cuts": cmd_cuts, "job": cmd_job, "resume": cmd_resume}[a.cmd](a)


if __name__ == "__main__":
    main()
