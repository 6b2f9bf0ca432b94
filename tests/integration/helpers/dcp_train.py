#!/usr/bin/python3
"""dcp_train.py — a small two-rank trainer that checkpoints with PyTorch
Distributed Checkpoint (Debian's torch 1.13: the prototype
torch.distributed._shard.checkpoint), for t_dcp.sh. Two processes by
torch.multiprocessing.spawn, gloo on 127.0.0.1 (a free port).

  dcp_train.py train RUN REF --steps N --every K [--hang-at S --ready FILE] [--no-check]
      trains N steps (an nn.Linear stack, Adam, gradients all-reduced, plus a
      ShardedTensor whose halves live on rank 0 and rank 1), and every K steps
      saves RUN/step-N with save_state_dict(FileSystemWriter): rank 0 writes
      the replicated tensors and the optimizer's param groups, each rank its
      own shard (__0_*.distcp, __1_0.distcp); rank 0 writes .metadata.tmp and
      renames it onto .metadata. Before each save every rank torch.saves the
      values it is about to save into REF/step-N.rank{R}.pt (outside the mount).
      After each save rank 0 waits for user.ckptfs.generation to say
      state=committed (rule dcp-metadata, version 1) and prints the xattr.
      --hang-at S: at step S rank 1 writes its shard file, then creates FILE
      and sleeps (the save never completes: no .metadata) until killed.
  dcp_train.py resume RUN REF [--expect S]
      a new spawn: every rank picks the newest RUN/step-N that has a .metadata
      (TorchTitan's rule), loads it with load_state_dict(FileSystemReader) into
      freshly initialised state, and compares it with REF/step-N.rank{R}.pt.
      Prints "resumed step-N". --expect: the step it must pick.
Exit 0 = ok; 1 = a check failed (message on stderr)."""
import argparse
import os
import re
import socket
import sys
import time

import torch_shim  # noqa: F401,E402  (before torch: see torch_shim.py)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

WORLD = 2
SHARD_ROWS, SHARD_COLS = 4096, 96
XATTR = "user.ckptfs.generation"
STEP_RE = re.compile(r"^step-(\d+)$")


def fail(msg):
    print("dcp_train: " + msg, file=sys.stderr, flush=True)
    sys.exit(1)


def dcp():
    import torch.distributed._shard.checkpoint as m
    return m


def shard_spec():
    from torch.distributed._shard.sharding_spec import ChunkShardingSpec
    return ChunkShardingSpec(dim=0, placements=["rank:%d/cpu" % r for r in range(WORLD)])


def sharded_zeros():
    from torch.distributed._shard import sharded_tensor
    return sharded_tensor.zeros(shard_spec(), SHARD_ROWS, SHARD_COLS)


def build(seed):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                                torch.nn.ReLU(), torch.nn.Linear(512, 64))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    return model, opt


def state_dict(model, opt, st, step):
    """A flat DCP state dict: replicated tensors (written by rank 0), the
    optimizer's param groups as a pickled object, and the ShardedTensor."""
    sd = {"model." + k: v for k, v in model.state_dict().items()}
    osd = opt.state_dict()
    for idx, s in osd["state"].items():
        for k, v in s.items():
            sd["optim.%d.%s" % (idx, k)] = v if isinstance(v, torch.Tensor) else torch.tensor(v)
    sd["optim.param_groups"] = osd["param_groups"]
    sd["shard"] = st
    sd["step"] = torch.tensor([step])
    return sd


def reference(sd):
    """What a rank can compare after a load: tensors, objects, its own shard."""
    ref = {}
    for k, v in sd.items():
        if k == "shard":
            ref[k] = v.local_shards()[0].tensor.clone()
        elif isinstance(v, torch.Tensor):
            ref[k] = v.detach().clone()
        else:
            ref[k] = v
    return ref


def gen_xattr(path):
    v = os.getxattr(path, XATTR).decode()
    return v, dict(kv.split("=", 1) for kv in v.split())


def wait_committed(path, timeout=20):
    deadline = time.time() + timeout
    while True:
        raw, info = gen_xattr(path)
        if info.get("state") == "committed":
            return raw, info
        if info.get("state") != "open" or time.time() > deadline:
            fail("%s after a complete DCP save: %s (expected state=committed)" % (path, raw))
        time.sleep(0.02)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def init_pg(rank, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)


def train_rank(rank, port, a):
    init_pg(rank, port)
    model, opt = build(0)
    st = sharded_zeros()
    local = st.local_shards()[0].tensor
    g = torch.Generator().manual_seed(1000 + rank)
    local.copy_(torch.randn(local.shape, generator=g))
    FSW = dcp().FileSystemWriter

    class HangingWriter(FSW):
        """rank 1 at --hang-at: writes its shard file, then never returns."""

        def write_data(self, plan, planner):
            fut = super().write_data(plan, planner)
            open(a.ready, "w").close()
            time.sleep(3600)
            return fut

    for step in range(1, a.steps + 1):
        torch.manual_seed(step)  # the same batch on every rank (data parallel over one batch)
        x = torch.randn(32, 256)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= WORLD
        opt.step()
        local.add_(0.01 * (rank + 1) * step)
        if step % a.every:
            continue
        path = os.path.join(a.run, "step-%d" % step)
        sd = state_dict(model, opt, st, step)
        torch.save(reference(sd), os.path.join(a.ref, "step-%d.rank%d.pt" % (step, rank)))
        hang = rank == 1 and step == a.hang_at
        os.makedirs(path, exist_ok=True)  # every rank at once, as DCP callers do
        dcp().save_state_dict(sd, (HangingWriter if hang else FSW)(path))
        dist.barrier()
        if rank == 0 and not a.no_check:
            raw, info = wait_committed(path)
            if info.get("rule") != "dcp-metadata" or info.get("version") != a.version:
                fail("%s: %s (expected rule=dcp-metadata version=%s)" % (path, raw, a.version))
            if "step-%d" % step not in os.listdir(a.run):
                fail("%s is committed but not listed in %s" % (path, a.run))
            print("saved step-%d: %s" % (step, raw), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def same(want, got, what):
    if isinstance(want, torch.Tensor):
        if not isinstance(got, torch.Tensor) or want.dtype != got.dtype or want.shape != got.shape \
                or not torch.equal(want, got):
            fail("%s differs after the load" % what)
    elif want != got:
        fail("%s differs after the load: %r vs %r" % (what, want, got))


def newest_complete(run):
    best = None
    for n in os.listdir(run):
        m = STEP_RE.search(n)
        if m and os.path.exists(os.path.join(run, n, ".metadata")):
            if best is None or int(m.group(1)) > best:
                best = int(m.group(1))
    return best


def resume_rank(rank, port, a):
    init_pg(rank, port)
    step = newest_complete(a.run)
    if step is None:
        fail("rank %d: no complete step-N in %s: %s" % (rank, a.run, sorted(os.listdir(a.run))))
    if a.expect is not None and step != a.expect:
        fail("rank %d: the newest complete checkpoint is step-%d, expected step-%d (listing %s)"
             % (rank, step, a.expect, sorted(os.listdir(a.run))))
    ref = torch.load(os.path.join(a.ref, "step-%d.rank%d.pt" % (step, rank)))
    model, opt = build(99)  # different initial weights: everything must come from the load
    target = {}
    for k, v in ref.items():
        if k == "shard":
            target[k] = sharded_zeros()
        elif isinstance(v, torch.Tensor):
            target[k] = torch.zeros_like(v)
        else:
            target[k] = None
    dcp().load_state_dict(target, dcp().FileSystemReader(os.path.join(a.run, "step-%d" % step)))
    for k, v in ref.items():
        got = target[k].local_shards()[0].tensor if k == "shard" else target[k]
        same(v, got, "rank %d step-%d %s" % (rank, step, k))
    # The weights go back into a model that then trains on.
    model.load_state_dict({k[6:]: v for k, v in target.items() if k.startswith("model.")})
    model(torch.randn(4, 256)).sum().backward()
    dist.barrier()
    if rank == 0:
        print("resumed step-%d" % step, flush=True)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["train", "resume"])
    ap.add_argument("run")
    ap.add_argument("ref")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--every", type=int, default=2)
    ap.add_argument("--hang-at", type=int, default=-1)
    ap.add_argument("--ready", default="")
    ap.add_argument("--expect", type=int)
    ap.add_argument("--no-check", action="store_true")
    # the version each save must commit as: 2 for a save over a held one
    ap.add_argument("--version", default="1")
    a = ap.parse_args()
    port = free_port()
    mp.spawn(train_rank if a.cmd == "train" else resume_rank, args=(port, a), nprocs=WORLD, join=True)


if __name__ == "__main__":
    main()
