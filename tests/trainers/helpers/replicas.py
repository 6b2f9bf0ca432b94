#!/usr/bin/python3
"""replicas.py — data-parallel ranks each torch.save the same replicated state
(model + Adam state, seeded: bit-identical in every rank) under their own file
name, as DeepSpeed's mp_rank files or a naive per-rank save do, for
tests/trainers/t_dedup.sh.

  replicas.py save DIR REF --ranks 8 [--via path|fileobj]
      builds the state in every rank (8 processes, forked), each rank
      torch.save(state, DIR/rank{r}_model_states.pt) at once (--via path, the
      default: the zip's records are named after the file, so every record
      header differs between ranks; --via fileobj: torch.save into an open
      file, records named "archive/...", as through fsspec: the files are
      byte-identical). REF/replica.pt: one replica on plain disk (its size).
  replicas.py check DIR REF --ranks 8
      torch.load of every rank's file equals REF/replica.pt (torch.equal)."""
import argparse
import multiprocessing as mp
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "integration", "helpers"))
import torch_shim  # noqa: F401,E402

import torch  # noqa: E402


def fail(msg):
    print("replicas: " + msg, file=sys.stderr, flush=True)
    sys.exit(1)


def state():
    torch.manual_seed(7)
    model = torch.nn.Sequential(torch.nn.Embedding(2048, 256), torch.nn.Linear(256, 1024), torch.nn.GELU(),
                                torch.nn.Linear(1024, 256))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.randint(0, 2048, (16, 8))).sum().backward()
    opt.step()
    return {"model": model.state_dict(), "optimizer": opt.state_dict(), "iteration": 100}


def name(d, r):
    return os.path.join(d, "rank%d_model_states.pt" % r)


def rank_save(r, d, barrier, via):
    st = state()
    barrier.wait()  # every rank saves at once
    if via == "path":
        torch.save(st, name(d, r))  # archive's top folder = the file's basename
    else:
        with open(name(d, r), "wb") as f:
            torch.save(st, f)  # a file object: the top folder is "archive"
    os._exit(0)


def same(a, b, what):
    if isinstance(a, torch.Tensor):
        if not (isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)):
            fail("%s differs" % what)
    elif isinstance(a, dict):
        if sorted(map(str, a)) != sorted(map(str, b)):
            fail("%s: keys differ" % what)
        for k in a:
            same(a[k], b[k], "%s.%s" % (what, k))
    elif isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, "%s[%d]" % (what, i))
    elif a != b:
        fail("%s differs" % what)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["save", "check"])
    ap.add_argument("dir")
    ap.add_argument("ref")
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--via", choices=["path", "fileobj"], default="path")
    a = ap.parse_args()
    if a.cmd == "save":
        os.makedirs(a.dir, exist_ok=True)
        os.makedirs(a.ref, exist_ok=True)
        torch.save(state(), os.path.join(a.ref, "replica.pt"))
        ctx = mp.get_context("fork")
        barrier = ctx.Barrier(a.ranks)
        procs = [ctx.Process(target=rank_save, args=(r, a.dir, barrier, a.via)) for r in range(a.ranks)]
        for p in procs:
            p.start()
        for r, p in enumerate(procs):
            p.join(120)
            if p.exitcode != 0:
                fail("rank %d exited %s" % (r, p.exitcode))
        print("saved %d replicas of %d bytes" % (a.ranks, os.path.getsize(os.path.join(a.ref, "replica.pt"))))
    else:
        ref = torch.load(os.path.join(a.ref, "replica.pt"))
        for r in range(a.ranks):
            same(ref, torch.load(name(a.dir, r)), "rank %d's file" % r)
        print("all %d replicas equal" % a.ranks)


if __name__ == "__main__":
    main()
