#!/usr/bin/python3
"""mn_dcp.py — a torch 1.13 Distributed Checkpoint save by several ranks
whose files go through different ckptfs nodes, and a load on another node
with another world size, for tests/multinode/t_multinode.sh. mp.spawn, gloo
on 127.0.0.1 (a free port).

  mn_dcp.py save REF STEP DIR0,DIR1,... [--rows N] [--hang-rank R --ready FILE]
                 [--pause-file FILE]
      one rank per DIR (world = their number): rank r saves into DIRr/step-STEP
      with save_state_dict(FileSystemWriter), so ranks of different nodes write
      one directory of the shared namespace. The state: replicated tensors
      (rank 0 writes them) and a ShardedTensor of N rows (default 8192) by 64
      columns split over every rank (each rank writes its own __r_0.distcp).
      Before saving, each rank torch.saves what it saves into
      REF/step-STEP.rank{r}.pt. Rank 0 writes .metadata (tmp + rename) last
      and then waits (20 s) for user.ckptfs.generation to say state=committed
      and prints it. --hang-rank R: rank R opens its shard file, writes 1 MiB,
      creates FILE and sleeps with the file open until killed. --pause-file:
      every rank creates FILE.r once its tensors are built, then waits while
      FILE exists (a test changes something before the bytes are written).
  mn_dcp.py load REF STEP DIR WORLD
      WORLD ranks load DIR/step-STEP (every rank through DIR) into fresh
      state and compare, bit for bit, the replicated tensors with the saver's
      rank 0 and their own rows of the ShardedTensor with the saver's shards.
      Prints "loaded step-STEP".
Exit 0 = ok; 1 = a check failed (message on stderr)."""
import argparse
import os
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "integration",
                                "helpers"))
import torch_shim  # noqa: F401,E402  (before torch)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

COLS = 64
XATTR = "user.ckptfs.generation"


def fail(msg):
    print("mn_dcp: " + msg, file=sys.stderr, flush=True)
    sys.exit(1)


def dcp():
    import torch.distributed._shard.checkpoint as m
    return m


def sharded_zeros(world, rows):
    from torch.distributed._shard import sharded_tensor
    from torch.distributed._shard.sharding_spec import ChunkShardingSpec
    spec = ChunkShardingSpec(dim=0, placements=["rank:%d/cpu" % r for r in range(world)])
    return sharded_tensor.zeros(spec, rows, COLS)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def init_pg(rank, world, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)


def replicated(step):
    g = torch.Generator().manual_seed(step)
    return {"model.w1": torch.randn(512, 256, generator=g), "model.b1": torch.randn(512, generator=g),
            "model.w2": torch.randn(128, 512, generator=g), "step": torch.tensor([step])}


def wait_committed(path, timeout=20):
    deadline = time.time() + timeout
    raw = ""
    while time.time() < deadline:
        raw = os.getxattr(path, XATTR).decode()
        if "state=committed" in raw.split():
            return raw
        time.sleep(0.02)
    fail("%s not committed %d s after its complete DCP save: %s" % (path, timeout, raw))


def save_rank(rank, port, a, dirs):
    world = len(dirs)
    init_pg(rank, world, port)
    sd = replicated(a.step)
    st = sharded_zeros(world, a.rows)
    shard = st.local_shards()[0]
    g = torch.Generator().manual_seed(1000 * a.step + rank)
    shard.tensor.copy_(torch.randn(shard.tensor.shape, generator=g))
    sd["shard"] = st
    ref = {k: v.clone() for k, v in sd.items() if k != "shard"}
    ref["shard_offset"] = shard.metadata.shard_offsets[0]
    ref["shard"] = shard.tensor.clone()
    torch.save(ref, os.path.join(a.ref, "step-%d.rank%d.pt" % (a.step, rank)))
    if a.pause_file:
        open("%s.%d" % (a.pause_file, rank), "w").close()
        while os.path.exists(a.pause_file):
            time.sleep(0.05)
    path = os.path.join(dirs[rank], "step-%d" % a.step)
    os.makedirs(path, exist_ok=True)
    if rank == a.hang_rank:
        with open(os.path.join(path, "__%d_0.distcp" % rank), "wb") as f:
            f.write(os.urandom(1 << 20))
            f.flush()
            open(a.ready, "w").close()
            time.sleep(3600)
    dcp().save_state_dict(sd, dcp().FileSystemWriter(path))
    dist.barrier()
    if rank == 0:
        print("saved step-%d: %s" % (a.step, wait_committed(path)), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def same(want, got, what):
    if not isinstance(got, torch.Tensor) or want.dtype != got.dtype or want.shape != got.shape \
            or not torch.equal(want, got):
        fail("%s differs after the load" % what)


def load_rank(rank, port, a):
    init_pg(rank, a.world, port)
    path = os.path.join(a.dir, "step-%d" % a.step)
    saved = []
    r = 0
    while os.path.exists(os.path.join(a.ref, "step-%d.rank%d.pt" % (a.step, r))):
        saved.append(torch.load(os.path.join(a.ref, "step-%d.rank%d.pt" % (a.step, r))))
        r += 1
    if not saved:
        fail("no reference for step-%d in %s" % (a.step, a.ref))
    full = torch.cat([s["shard"] for s in sorted(saved, key=lambda s: s["shard_offset"])])
    target = {k: torch.zeros_like(v) for k, v in saved[0].items() if k not in ("shard", "shard_offset")}
    target["shard"] = sharded_zeros(a.world, full.shape[0])
    dcp().load_state_dict(target, dcp().FileSystemReader(path))
    for k, v in saved[0].items():
        if k not in ("shard", "shard_offset"):
            same(v, target[k], "rank %d step-%d %s" % (rank, a.step, k))
    mine = target["shard"].local_shards()[0]
    off = mine.metadata.shard_offsets[0]
    same(full[off:off + mine.tensor.shape[0]], mine.tensor, "rank %d step-%d rows from %d" % (rank, a.step, off))
    dist.barrier()
    if rank == 0:
        print("loaded step-%d" % a.step, flush=True)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("save")
    s.add_argument("ref")
    s.add_argument("step", type=int)
    s.add_argument("dirs")
    s.add_argument("--rows", type=int, default=8192)
    s.add_argument("--hang-rank", type=int, default=-1)
    s.add_argument("--ready", default="")
    s.add_argument("--pause-file", default="")
    ld = sub.add_parser("load")
    ld.add_argument("ref")
    ld.add_argument("step", type=int)
    ld.add_argument("dir")
    ld.add_argument("world", type=int)
    a = ap.parse_args()
    port = free_port()
    if a.cmd == "save":
        dirs = a.dirs.split(",")
        mp.spawn(save_rank, args=(port, a, dirs), nprocs=len(dirs), join=True)
    else:
        mp.spawn(load_rank, args=(port, a), nprocs=a.world, join=True)


if __name__ == "__main__":
    main()
