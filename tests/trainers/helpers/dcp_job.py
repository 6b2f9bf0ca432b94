#!/usr/bin/python3
"""dcp_job.py — a resumable two-rank training job that checkpoints with
PyTorch Distributed Checkpoint (Debian's torch 1.13: the prototype
torch.distributed._shard.checkpoint), for tests/trainers/t_dcp_job.sh.

Unlike tests/integration/helpers/dcp_train.py (which only saves, or loads and
compares), this job *resumes training*: on start every rank picks the newest
RUN/step-N with a .metadata (TorchTitan's rule), loads model, Adam state and
its ShardedTensor shard into live objects, and trains on to --steps. Training
is seeded per step and CPU-deterministic, so the final state of an
interrupted-and-resumed job must equal, bit for bit, an uninterrupted one.

  dcp_job.py train RUN OUT --steps N --every K [--stop-at S]
                   [--hang-at S --ready FILE [--hang-secs T]] [--check]
      two processes (torch.multiprocessing.spawn, gloo on 127.0.0.1). Saves
      RUN/step-N every K steps with save_state_dict(FileSystemWriter): rank 0
      writes the replicated tensors, each rank its own shard file; rank 0
      writes .metadata.tmp and renames it onto .metadata. After each save rank
      0 prints "saved step-N"; with --check (RUN on ckptfs) it first waits for
      user.ckptfs.generation to say state=committed rule=dcp-metadata. At the end (step N, or
      --stop-at S: a job that stops early) every rank torch.saves its whole
      state to OUT/final.rank{R}.pt (outside the mount) and rank 0 prints
      "resumed-from step-M" (0: from scratch) and "done step-N".
      --hang-at S: at the save of step S, rank 1 writes its shard file, creates
      FILE, then sleeps T seconds (default 3600) before going on: the trainer is
      "in the middle of a save" (shards on disk, no .metadata) while it sleeps.
  dcp_job.py compare A_DIR B_DIR
      torch.equal for every tensor of final.rank{0,1}.pt in both dirs (same
      keys, dtypes, shapes, bits). Prints "equal (N tensors)".
Exit 0 = ok; 1 = a check failed (message on stderr)."""
import argparse
import os
import re
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "integration", "helpers"))
import torch_shim  # noqa: F401,E402  (before torch: see torch_shim.py)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

WORLD = 2
SHARD_ROWS, SHARD_COLS = 2048, 128
XATTR = "user.ckptfs.generation"
STEP_RE = re.compile(r"step-(\d+)")


def fail(msg):
    print("dcp_job: " + msg, file=sys.stderr, flush=True)
    sys.exit(1)


def dcp():
    import torch.distributed._shard.checkpoint as m
    return m


def build():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 768), torch.nn.ReLU(), torch.nn.Linear(768, 512),
                                torch.nn.ReLU(), torch.nn.Linear(512, 64))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    # Adam's state, created up front (what its first step would create), so a
    # DCP load can fill it in place.
    for p in model.parameters():
        opt.state[p] = {"step": torch.tensor(0.0), "exp_avg": torch.zeros_like(p),
                        "exp_avg_sq": torch.zeros_like(p)}
    return model, opt


def make_shard(rank):
    from torch.distributed._shard import sharded_tensor
    from torch.distributed._shard.sharding_spec import ChunkShardingSpec
    spec = ChunkShardingSpec(dim=0, placements=["rank:%d/cpu" % r for r in range(WORLD)])
    st = sharded_tensor.zeros(spec, SHARD_ROWS, SHARD_COLS)
    local = st.local_shards()[0].tensor
    local.copy_(torch.randn(local.shape, generator=torch.Generator().manual_seed(1000 + rank)))
    return st


def live_state(model, opt, st, step_t):
    """The state dict whose tensors *are* the live training state: a DCP load
    into it restores the job in place."""
    sd = {"model." + k: v for k, v in model.state_dict().items()}
    for i, p in enumerate(model.parameters()):
        for k, v in opt.state[p].items():
            sd["optim.%d.%s" % (i, k)] = v
    sd["shard"] = st
    sd["step"] = step_t
    return sd


def plain(sd):
    return {k: (v.local_shards()[0].tensor if k == "shard" else v).detach().clone() for k, v in sd.items()}


def newest_complete(run):
    best = 0
    if os.path.isdir(run):
        for n in os.listdir(run):
            m = STEP_RE.search(n)
            if m and os.path.exists(os.path.join(run, n, ".metadata")):
                best = max(best, int(m.group(1)))
    return best


def wait_committed(path, timeout=30):
    deadline = time.time() + timeout
    while True:
        v = os.getxattr(path, XATTR).decode()
        info = dict(kv.split("=", 1) for kv in v.split() if "=" in kv)
        if info.get("state") == "committed":
            if info.get("rule") != "dcp-metadata":
                fail("%s: %s (expected rule=dcp-metadata)" % (path, v))
            return v
        if info.get("state") != "open" or time.time() > deadline:
            fail("%s after a complete DCP save: %s (expected state=committed)" % (path, v))
        time.sleep(0.02)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def train_rank(rank, port, a):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    torch.set_num_threads(1)
    model, opt = build()
    st = make_shard(rank)
    step_t = torch.tensor([0])
    start = newest_complete(a.run)
    # Every rank must pick the same step (they list the same directory).
    picks = [None] * WORLD
    dist.all_gather_object(picks, start)
    if len(set(picks)) != 1:
        fail("ranks picked different steps to resume from: %s" % picks)
    if start:
        sd = live_state(model, opt, st, step_t)
        dcp().load_state_dict(sd, dcp().FileSystemReader(os.path.join(a.run, "step-%d" % start)))
        if int(step_t.item()) != start:
            fail("rank %d: step-%d holds step %d" % (rank, start, int(step_t.item())))
    FSW = dcp().FileSystemWriter

    class HangingWriter(FSW):
        def write_data(self, plan, planner):
            fut = super().write_data(plan, planner)
            open(a.ready, "w").close()
            time.sleep(a.hang_secs)
            return fut

    check = rank == 0 and a.check
    last = a.stop_at if a.stop_at else a.steps
    for step in range(start + 1, last + 1):
        torch.manual_seed(step)  # the same batch on every rank, from the step alone
        x = torch.randn(64, 256)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= WORLD
        opt.step()
        local = st.local_shards()[0].tensor
        local.mul_(0.999).add_(torch.randn(local.shape, generator=torch.Generator().manual_seed(step * 10 + rank)))
        step_t.fill_(step)
        if step % a.every:
            continue
        path = os.path.join(a.run, "step-%d" % step)
        os.makedirs(path, exist_ok=True)  # every rank at once, as DCP callers do
        hang = rank == 1 and step == a.hang_at
        dcp().save_state_dict(live_state(model, opt, st, step_t), (HangingWriter if hang else FSW)(path))
        dist.barrier()
        if rank == 0:
            info = wait_committed(path) if check else ""
            print("saved step-%d %s" % (step, info), flush=True)
    os.makedirs(a.out, exist_ok=True)
    torch.save(plain(live_state(model, opt, st, step_t)), os.path.join(a.out, "final.rank%d.pt" % rank))
    dist.barrier()
    if rank == 0:
        print("resumed-from step-%d" % start, flush=True)
        print("done step-%d" % last, flush=True)
    dist.destroy_process_group()


def compare(a_dir, b_dir):
    n = 0
    for r in range(WORLD):
        a = torch.load(os.path.join(a_dir, "final.rank%d.pt" % r))
        b = torch.load(os.path.join(b_dir, "final.rank%d.pt" % r))
        if sorted(a) != sorted(b):
            fail("rank %d: keys differ: %s vs %s" % (r, sorted(a), sorted(b)))
        for k in sorted(a):
            x, y = a[k], b[k]
            if x.dtype != y.dtype or x.shape != y.shape or not torch.equal(x, y):
                d = (x.double() - y.double()).abs().max().item() if x.shape == y.shape else "shape"
                fail("rank %d: %s differs (max abs diff %s)" % (r, k, d))
            n += 1
    print("equal (%d tensors)" % n)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["train", "compare"])
    ap.add_argument("run")
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--every", type=int, default=2)
    ap.add_argument("--stop-at", type=int, default=0)
    ap.add_argument("--hang-at", type=int, default=-1)
    ap.add_argument("--hang-secs", type=float, default=3600)
    ap.add_argument("--ready", default="")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    if a.cmd == "compare":
        compare(a.run, a.out)
        return
    mp.spawn(train_rank, args=(free_port(), a), nprocs=WORLD, join=True)


if __name__ == "__main__":
    main()
