#!/usr/bin/python3
"""torch_ckpt.py COMMAND DIR — PyTorch checkpoint round trips for t_torch.sh.
Run with /usr/bin/python3 (Debian's python3-torch 1.13). Exit 0 = ok,
77 = not supported by this torch (message on stderr), else a failure.

  save DIR           torch.save model + optimizer state (after an Adam step)
  load DIR           torch.load it back and compare with the same seeded state
  load-mmap DIR      torch.load(mmap=True) (torch >= 2.1), compare
  storage-mmap DIR   raw tensor bytes read by torch.from_file / FloatStorage.from_file (mmap)
  dcp-save DIR       DCP (1.13: torch.distributed._shard.checkpoint) save_state_dict, no_dist
  dcp-load DIR       DCP load_state_dict and compare
  dcp-spawn DIR      2 ranks (mp.spawn, gloo on 127.0.0.1) save one DCP checkpoint together
  two-names DIR      the same state_dict saved as a.pt and a much longer name
  lightning DIR      torch.save into $TMPDIR, shutil.move into DIR, load, compare
  many-save DIR      1000 small tensors and 2 of 8 MiB in one file (> 8 MiB: read
                     with direct_io), and the same small ones alone (< 8 MiB)
  many-load DIR      torch.load both: by path, through an unbuffered file (every
                     record a read() of its own) and through a 4 KiB buffer; compare
"""
import inspect
import os
import shutil
import sys
import tempfile

import torch_shim  # noqa: F401,E402  (before torch: see torch_shim.py)

import torch  # noqa: E402


def fail(msg):
    print("torch_ckpt: " + msg, file=sys.stderr)
    sys.exit(1)


def unsupported(msg):
    print("torch_ckpt: " + msg, file=sys.stderr)
    sys.exit(77)


def make_state(seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256),
                                torch.nn.LayerNorm(256))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss = model(torch.randn(8, 512)).pow(2).mean()
    loss.backward()
    opt.step()
    return {"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 3, "step": 1234,
            "bf16": torch.randn(300, 300).to(torch.bfloat16)}


def same(a, b, path="state"):
    if isinstance(a, torch.Tensor):
        if not isinstance(b, torch.Tensor) or a.dtype != b.dtype or a.shape != b.shape or not torch.equal(a, b):
            fail("%s differs" % path)
    elif isinstance(a, dict):
        if not isinstance(b, dict) or set(a) != set(b):
            fail("%s: keys %s vs %s" % (path, sorted(map(str, a)), sorted(map(str, b)) if isinstance(b, dict) else b))
        for k in a:
            same(a[k], b[k], "%s[%r]" % (path, k))
    elif isinstance(a, (list, tuple)):
        if len(a) != len(b):
            fail("%s: length %d vs %d" % (path, len(a), len(b)))
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, "%s[%d]" % (path, i))
    elif a != b:
        fail("%s: %r vs %r" % (path, a, b))


def dcp():
    import torch.distributed._shard.checkpoint as dcp_mod
    return dcp_mod


def main():
    cmd, d = sys.argv[1], sys.argv[2]
    path = os.path.join(d, "epoch=3-step=1234.ckpt")
    if cmd == "save":
        torch.save(make_state(), path)
    elif cmd == "load":
        same(make_state(), torch.load(path))
    elif cmd == "load-mmap":
        if "mmap" not in inspect.signature(torch.load).parameters:
            unsupported("torch %s has no torch.load(mmap=...) (added in torch 2.1)" % torch.__version__)
        same(make_state(), torch.load(path, mmap=True))
    elif cmd == "storage-mmap":
        torch.manual_seed(1)
        t = torch.randn(3 << 20)  # 12 MiB of fp32
        raw = os.path.join(d, "weights.bin")
        t.numpy().tofile(raw)
        n = t.numel()
        got = torch.from_file(raw, shared=False, size=n, dtype=torch.float32)  # MAP_PRIVATE
        if got.numel() != n or not torch.equal(got, t):
            fail("tensor read through torch.from_file (mmap, private) differs")
        shared = torch.FloatTensor(torch.FloatStorage.from_file(raw, True, n))  # MAP_SHARED
        if not torch.equal(shared, t):
            fail("tensor read through a shared Storage.from_file (mmap) differs")
    elif cmd == "dcp-save":
        sd = {"w": make_state()["model"]["0.weight"].clone(), "b": torch.arange(1000), "x": torch.randn(4096, 256)}
        torch.manual_seed(5)
        dcp().save_state_dict(sd, dcp().FileSystemWriter(d), no_dist=True)
        # the reference goes beside the generation, not into it: a file added
        # to a committed step would open a rewrite of it
        torch.save(sd, os.path.join(os.path.dirname(d.rstrip("/")), "expected.pt"))
    elif cmd == "dcp-load":
        want = torch.load(os.path.join(os.path.dirname(d.rstrip("/")), "expected.pt"))
        got = {k: torch.zeros_like(v) for k, v in want.items()}
        dcp().load_state_dict(got, dcp().FileSystemReader(d), no_dist=True)
        same(want, got, "dcp state")
    elif cmd == "dcp-spawn":
        import torch.multiprocessing as mp
        port = 20000 + os.getpid() % 20000
        mp.spawn(_rank_main, args=(2, d, port), nprocs=2, join=True)
        names = sorted(os.listdir(d))
        if ".metadata" not in names or not any(n.endswith(".distcp") for n in names):
            fail("DCP directory after a 2-rank save: %s" % names)
        want = _rank_state(0)
        got = {k: torch.zeros_like(v) for k, v in want.items()}
        dcp().load_state_dict(got, dcp().FileSystemReader(d), no_dist=True)
        same(want, got, "2-rank dcp state")
    elif cmd == "two-names":
        torch.manual_seed(2)
        # 4 tensors of 16 MiB: each record header (whose name differs) costs
        # about one ~1 MiB chunk of its own; the tensor bytes are shared.
        sd = {"layer%d.weight" % i: torch.randn(4096, 1024) for i in range(4)}  # 64 MiB
        torch.save(sd, os.path.join(d, "a.pt"))
        torch.save(sd, os.path.join(d, "checkpoint-with-a-much-longer-name-epoch=12-step=34567.ckpt"))
        for n in ("a.pt", "checkpoint-with-a-much-longer-name-epoch=12-step=34567.ckpt"):
            same(sd, torch.load(os.path.join(d, n)), n)
    elif cmd == "many-save":
        big, small = _many_state()
        torch.save(big, os.path.join(d, "many-big.pt"))
        torch.save(small, os.path.join(d, "many-small.pt"))
    elif cmd == "many-load":
        import io
        for name, want in zip(("many-big.pt", "many-small.pt"), _many_state()):
            p = os.path.join(d, name)
            same(want, torch.load(p), name)
            with open(p, "rb", buffering=0) as f:
                same(want, torch.load(f), name + " (unbuffered)")
            with io.BufferedReader(open(p, "rb", buffering=0), buffer_size=4096) as f:
                same(want, torch.load(f), name + " (4 KiB buffer)")
    elif cmd == "lightning":
        fd, tmp = tempfile.mkstemp(suffix=".ckpt")  # in $TMPDIR, outside the mount
        os.close(fd)
        torch.save(make_state(), tmp)
        dst = os.path.join(d, "epoch=0-step=10.ckpt")
        shutil.move(tmp, dst)
        same(make_state(), torch.load(dst))
    else:
        fail("unknown command " + cmd)


def _many_state():
    torch.manual_seed(3)
    small = {"layer%d.%s" % (i, "weight" if i % 2 else "bias"): torch.randn(1 + (i * 37) % 700)
             for i in range(1000)}
    big = dict(small)
    big.update({"embed": torch.randn(2 << 20), "head": torch.randn(2 << 20).to(torch.float64)[:1 << 20]})
    return big, small


def _rank_state(rank):
    torch.manual_seed(7)
    return {"replicated": torch.randn(2048, 512), "step": torch.tensor([42])}


def _rank_main(rank, world, d, port):
    import torch.distributed as dist
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    # Every rank creates the directory at once, as DCP callers do.
    os.makedirs(d, exist_ok=True)
    dcp().save_state_dict(_rank_state(rank), dcp().FileSystemWriter(d))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
