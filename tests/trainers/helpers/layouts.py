#!/usr/bin/python3
"""layouts.py — real torch state (a small model, Adam, a LR scheduler, the RNG)
saved with the exact write sequences of TorchTitan, Lightning, HF Trainer,
DeepSpeed and Megatron (/work/shared/TRAINERS.md), and resumed by each
trainer's own resume rule, for tests/trainers/t_layouts.sh.

tests/integration/helpers/gen_trainers.py replays the same sequences with
synthetic bytes; this helper writes real torch.save / DCP / safetensors
content, so a resume can be compared tensor by tensor (torch.equal) with what
was saved.

  layouts.py LAYOUT save SERIES REF --steps 10,20,30
      trains one step at a time; at each listed step writes a checkpoint into
      SERIES (a directory on the mount) the way LAYOUT does, and torch.saves
      the canonical state {model, optimizer, scheduler, rng, step} to
      REF/step-N.pt (plain local disk). Prints "saved N" per save.
  layouts.py LAYOUT resume SERIES REF [--rule last|highest] [--expect N]
      finds the checkpoint LAYOUT's resume logic would pick, loads it the way
      that trainer reads it, rebuilds the canonical state, compares it with
      REF/step-N.pt (every tensor torch.equal, every other value ==), loads it
      into a fresh model and optimizer and takes one training step. Prints
      "resumed N".
  layouts.py hf partial SERIES N
      an HF save of checkpoint-N interrupted before trainer_state.json.
LAYOUT: titan | lightning | hf | deepspeed | megatron | torchsave (plain torch.save per rank:
  step-N/rank0.pt, rank1.pt, no marker)
Exit 0 = ok; 1 = a check failed (message on stderr)."""
import argparse
import json
import multiprocessing as mp
import os
import re
import shutil
import struct
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "integration", "helpers"))
import torch_shim  # noqa: F401,E402  (before torch: see torch_shim.py)

import torch  # noqa: E402

A = None


def fail(msg):
    print("layouts: " + msg, file=sys.stderr, flush=True)
    sys.exit(1)


# ---------------------------------------------------------------- training

def build(seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(128, 512), torch.nn.GELU(), torch.nn.Linear(512, 256),
                                torch.nn.GELU(), torch.nn.Linear(256, 64))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=7, gamma=0.9)
    return model, opt, sched


def train_step(model, opt, sched):
    x = torch.randn(32, 128)  # from the global RNG: its state is part of the checkpoint
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()


def canonical(model, opt, sched, step):
    import copy
    return copy.deepcopy({"model": model.state_dict(), "optimizer": opt.state_dict(),
                          "scheduler": sched.state_dict(), "rng": torch.get_rng_state(), "step": step})


def same(want, got, what):
    if isinstance(want, torch.Tensor):
        if not isinstance(got, torch.Tensor) or want.dtype != got.dtype or want.shape != got.shape \
                or not torch.equal(want, got):
            fail("%s differs from what was saved" % what)
    elif isinstance(want, dict):
        if not isinstance(got, dict) or sorted(map(str, want)) != sorted(map(str, got)):
            fail("%s: keys differ: %s vs %s" % (what, sorted(map(str, want)), sorted(map(str, got)) if isinstance(got, dict) else type(got)))
        for k in want:
            same(want[k], got[k], "%s.%s" % (what, k))
    elif isinstance(want, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(want) != len(got):
            fail("%s: length differs" % what)
        for i, (w, g) in enumerate(zip(want, got)):
            same(w, g, "%s[%d]" % (what, i))
    elif want != got:
        fail("%s differs: %r vs %r" % (what, want, got))


def p(*parts):
    return os.path.join(A.series, *parts)


def tsave_path(obj, path):
    """torch.save(obj, path): a zip written in order, no fsync."""
    torch.save(obj, path)


def in_ranks(n, fn):
    """fn(rank) for ranks 1..n-1 in forked processes (other PIDs), rank 0 here."""
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=fn, args=(r,)) for r in range(1, n)]
    for pr in procs:
        pr.start()
    fn(0)
    for pr in procs:
        pr.join(120)
        if pr.exitcode != 0:
            fail("rank process exited %s" % pr.exitcode)


# ---------------------------------------------------------------- TorchTitan (DCP step-N/)

def flat_tensors(c):
    sd = {"model." + k: v for k, v in c["model"].items()}
    for idx, s in c["optimizer"]["state"].items():
        for k, v in s.items():
            sd["optim.%d.%s" % (idx, k)] = v
    sd["rng"] = c["rng"]
    sd["step"] = torch.tensor([c["step"]])
    return sd


def titan_save(c, step):
    import torch.distributed._shard.checkpoint as dcp
    d = p("step-%d" % step)
    os.makedirs(d, exist_ok=True)
    dcp.save_state_dict(flat_tensors(c), dcp.FileSystemWriter(d), no_dist=True)


def titan_pick():
    best = None
    for name in os.listdir(A.series):
        m = re.search(r"step-(\d+)", name)
        if m and os.path.exists(p(name, ".metadata")):
            best = int(m.group(1)) if best is None else max(best, int(m.group(1)))
    return best


def titan_load(step, ref):
    import torch.distributed._shard.checkpoint as dcp
    target = {k: torch.zeros_like(v) for k, v in flat_tensors(ref).items()}
    dcp.load_state_dict(target, dcp.FileSystemReader(p("step-%d" % step)), no_dist=True)
    c = {"model": {k[6:]: v for k, v in target.items() if k.startswith("model.")},
         "optimizer": {"state": {}, "param_groups": ref["optimizer"]["param_groups"]},
         "scheduler": ref["scheduler"], "rng": target["rng"], "step": int(target["step"].item())}
    for k, v in target.items():
        m = re.match(r"optim\.(\d+)\.(.+)$", k)
        if m:
            c["optimizer"]["state"].setdefault(int(m.group(1)), {})[m.group(2)] = v
    # param_groups and scheduler are not in this flat DCP layout: compare tensors only
    return c


# ---------------------------------------------------------------- Lightning (single file)

def lightning_name(step):
    return "epoch=%d-step=%d.ckpt" % (step // 20, step)


def lightning_atomic_save(obj, path):
    """fsspec LocalFileOpener(autocommit=False): torch.save into a mkstemp file
    in $TMPDIR, then shutil.move (across devices: copy2 + unlink)."""
    fd, tmp = tempfile.mkstemp()
    with os.fdopen(fd, "wb") as f:
        torch.save(obj, f)
    shutil.move(tmp, path)
    if os.path.exists(tmp):
        fail("shutil.move left %s" % tmp)


def lightning_ckpt(c):
    return {"epoch": c["step"] // 20, "global_step": c["step"], "pytorch-lightning_version": "2.1.0",
            "state_dict": c["model"], "optimizer_states": [c["optimizer"]], "lr_schedulers": [c["scheduler"]],
            "rng": c["rng"]}


def lightning_save(c, step):
    os.makedirs(A.series, exist_ok=True)
    ck = lightning_ckpt(c)
    lightning_atomic_save(ck, p(lightning_name(step)))  # the top-k checkpoint
    lightning_atomic_save(ck, p("last.ckpt"))  # save_last=True: a full copy, the same way


def lightning_pick():
    if A.rule == "last" and os.path.exists(p("last.ckpt")):
        return torch.load(p("last.ckpt"))["global_step"], "last.ckpt"
    best = None
    for name in os.listdir(A.series):
        m = re.match(r"^epoch=(\d+)-step=(\d+)\.ckpt$", name)
        if m and (best is None or int(m.group(2)) > best[0]):
            best = (int(m.group(2)), name)
    return best if best else (None, None)


def lightning_load(name):
    ck = torch.load(p(name))
    return {"model": ck["state_dict"], "optimizer": ck["optimizer_states"][0], "scheduler": ck["lr_schedulers"][0],
            "rng": ck["rng"], "step": ck["global_step"]}


# ---------------------------------------------------------------- HF Trainer (checkpoint-N/)

def safetensors_bytes(tensors):
    header, blobs, off = {}, [], 0
    for k in sorted(tensors):
        t = tensors[k].contiguous()
        b = t.numpy().tobytes()
        header[k] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def safetensors_load(path):
    import numpy as np
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for k, v in header.items():
        a, b = v["data_offsets"]
        out[k] = torch.from_numpy(np.frombuffer(data[base + a:base + b], dtype=np.float32).copy()).reshape(v["shape"])
    return out


def hf_files(c, d):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        f.write('{"model_type": "tiny-mlp", "hidden": 512}\n')
    blob = safetensors_bytes(c["model"])
    # safetensors >= 0.8: create, ftruncate to the final size, then write
    fd = os.open(os.path.join(d, "model.safetensors"), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.ftruncate(fd, len(blob))
    pos = 0
    while pos < len(blob):
        pos += os.pwrite(fd, blob[pos:pos + 1 << 20], pos)
    os.close(fd)
    tsave_path(c["optimizer"], os.path.join(d, "optimizer.pt"))
    tsave_path(c["scheduler"], os.path.join(d, "scheduler.pt"))
    tsave_path({"cpu": c["rng"]}, os.path.join(d, "rng_state_0.pth"))


def hf_save(c, step):
    d = p("checkpoint-%d" % step)
    hf_files(c, d)
    with open(os.path.join(d, "trainer_state.json"), "w") as f:
        json.dump({"global_step": step, "log_history": []}, f)
    # other ranks' rng files may land after trainer_state.json (rank 1: another process)
    in_ranks(2, lambda r: r and (tsave_path({"cpu": c["rng"]}, os.path.join(d, "rng_state_%d.pth" % r)) or os._exit(0)))


def hf_pick():
    rx = re.compile(r"^checkpoint\-(\d+)$")
    cps = [x for x in os.listdir(A.series) if rx.search(x) and os.path.isdir(p(x))]
    return max((int(rx.search(x).group(1)) for x in cps), default=None)


def hf_load(step):
    d = p("checkpoint-%d" % step)
    st = json.load(open(os.path.join(d, "trainer_state.json")))
    rng = torch.load(os.path.join(d, "rng_state_0.pth"))["cpu"]
    if not torch.equal(rng, torch.load(os.path.join(d, "rng_state_1.pth"))["cpu"]):
        fail("rng_state_1.pth differs from rng_state_0.pth")
    return {"model": safetensors_load(os.path.join(d, "model.safetensors")),
            "optimizer": torch.load(os.path.join(d, "optimizer.pt")),
            "scheduler": torch.load(os.path.join(d, "scheduler.pt")), "rng": rng, "step": st["global_step"]}


# ---------------------------------------------------------------- DeepSpeed (global_stepN/ + latest)

def ds_save(c, step):
    tag = "global_step%d" % step
    d = p(tag)
    os.makedirs(d, exist_ok=True)
    osd = c["optimizer"]

    def rank(r):
        if r == 0:
            tsave_path({"module": c["model"], "lr_scheduler": c["scheduler"], "global_steps": step,
                        "rng": c["rng"], "dp_world_size": 2}, os.path.join(d, "mp_rank_00_model_states.pt"))
        # ZeRO: each DP rank saves its partition of the optimizer state
        part = {"state": {i: s for i, s in osd["state"].items() if i % 2 == r}, "param_groups": osd["param_groups"]}
        tsave_path({"optimizer_state_dict": part, "ds_version": "0.14.0"},
                   os.path.join(d, "zero_pp_rank_%d_mp_rank_00_optim_states.pt" % r))
        if r:
            os._exit(0)

    in_ranks(2, rank)
    # _copy_recovery_script: copyfile + chmod +x into save_dir, every save
    src = os.path.join(tempfile.gettempdir(), "zero_to_fp32.py")
    with open(src, "w") as f:
        f.write("#!/usr/bin/env python3\n# DeepSpeed recovery script\n")
    shutil.copyfile(src, p("zero_to_fp32.py"))
    os.chmod(p("zero_to_fp32.py"), 0o755)
    # after a barrier, rank 0 rewrites `latest` in place
    with open(p("latest"), "w") as f:
        f.write(tag)


def ds_pick():
    if not os.path.exists(p("latest")):
        return None
    return int(re.match(r"global_step(\d+)$", open(p("latest")).read().strip()).group(1))


def ds_load(step):
    d = p("global_step%d" % step)
    m = torch.load(os.path.join(d, "mp_rank_00_model_states.pt"))
    state, groups = {}, None
    for r in range(2):
        o = torch.load(os.path.join(d, "zero_pp_rank_%d_mp_rank_00_optim_states.pt" % r))["optimizer_state_dict"]
        state.update(o["state"])
        groups = o["param_groups"]
    return {"model": m["module"], "optimizer": {"state": dict(sorted(state.items())), "param_groups": groups},
            "scheduler": m["lr_scheduler"], "rng": m["rng"], "step": m["global_steps"]}


# ---------------------------------------------------------------- Megatron legacy (iter_N/ + tracker)

def mg_save(c, step):
    d = p("iter_{:07d}".format(step), "mp_rank_00")
    os.makedirs(d, exist_ok=True)
    tsave_path({"iteration": step, "model": c["model"], "optimizer": c["optimizer"],
                "opt_param_scheduler": c["scheduler"], "rng_state": [{"torch_rng_state": c["rng"]}],
                "checkpoint_version": 3.0}, os.path.join(d, "model_optim_rng.pt"))
    with open(p("latest_checkpointed_iteration.txt"), "w") as f:
        f.write(str(step))


def mg_pick():
    if not os.path.exists(p("latest_checkpointed_iteration.txt")):
        return None
    return int(open(p("latest_checkpointed_iteration.txt")).read().strip())


def mg_load(step):
    ck = torch.load(p("iter_{:07d}".format(step), "mp_rank_00", "model_optim_rng.pt"))
    return {"model": ck["model"], "optimizer": ck["optimizer"], "scheduler": ck["opt_param_scheduler"],
            "rng": ck["rng_state"][0]["torch_rng_state"], "step": ck["iteration"]}


# ---------------------------------------------------------------- plain torch.save per rank (step-N/rankR.pt)

def ts_save(c, step):
    """A script with no framework: every rank torch.saves its part in place
    into step-N/rank{r}.pt (rank 1 another process), no marker, no fsync."""
    d = p("step-%d" % step)
    os.makedirs(d, exist_ok=True)

    def rank(r):
        if r == 0:
            tsave_path({"model": c["model"], "scheduler": c["scheduler"], "rng": c["rng"], "step": step},
                       os.path.join(d, "rank0.pt"))
        else:
            tsave_path({"optimizer": c["optimizer"]}, os.path.join(d, "rank1.pt"))
            os._exit(0)

    in_ranks(2, rank)


def ts_pick():
    """The script's resume: the highest step-N holding rank files."""
    best = None
    for name in os.listdir(A.series):
        m = re.match(r"^step-(\d+)$", name)
        if m and os.path.exists(p(name, "rank0.pt")):
            best = int(m.group(1)) if best is None else max(best, int(m.group(1)))
    return best


def ts_load(step):
    d = p("step-%d" % step)
    r0 = torch.load(os.path.join(d, "rank0.pt"))
    r1 = torch.load(os.path.join(d, "rank1.pt"))
    return {"model": r0["model"], "optimizer": r1["optimizer"], "scheduler": r0["scheduler"], "rng": r0["rng"],
            "step": r0["step"]}


# ---------------------------------------------------------------- commands

SAVE = {"titan": titan_save, "torchsave": ts_save, "lightning": lightning_save, "hf": hf_save, "deepspeed": ds_save, "megatron": mg_save}


def cmd_save():
    steps = [int(s) for s in A.steps.split(",")]
    model, opt, sched = build()
    os.makedirs(A.ref, exist_ok=True)
    for step in range(1, max(steps) + 1):
        train_step(model, opt, sched)
        if step in steps:
            c = canonical(model, opt, sched, step)
            torch.save(c, os.path.join(A.ref, "step-%d.pt" % step))
            SAVE[A.layout](c, step)
            print("saved %d" % step, flush=True)


def cmd_resume():
    if A.layout == "lightning":
        step, name = lightning_pick()
    else:
        step = {"titan": titan_pick, "torchsave": ts_pick, "hf": hf_pick, "deepspeed": ds_pick, "megatron": mg_pick}[A.layout]()
    if step is None:
        fail("no checkpoint to resume from in %s: %s" % (A.series, sorted(os.listdir(A.series))))
    if A.expect is not None and step != A.expect:
        fail("%s resume picks step %d, expected %d (listing %s)" % (A.layout, step, A.expect, sorted(os.listdir(A.series))))
    ref = torch.load(os.path.join(A.ref, "step-%d.pt" % step))
    if A.layout == "titan":
        got = titan_load(step, ref)
    elif A.layout == "lightning":
        got = lightning_load(name)
    else:
        got = {"hf": hf_load, "deepspeed": ds_load, "megatron": mg_load, "torchsave": ts_load}[A.layout](step)
    same(ref, got, "%s step %d" % (A.layout, step))
    # and it trains on from there
    model, opt, sched = build(seed=99)
    model.load_state_dict(got["model"])
    opt.load_state_dict(got["optimizer"])
    sched.load_state_dict(got["scheduler"])
    torch.set_rng_state(got["rng"])
    train_step(model, opt, sched)
    print("resumed %d" % step, flush=True)


def cmd_partial():
    """hf partial SERIES N: every file of checkpoint-N but trainer_state.json
    (the trainer died there)."""
    model, opt, sched = build()
    train_step(model, opt, sched)
    hf_files(canonical(model, opt, sched, A.n), p("checkpoint-%d" % A.n))


def main():
    global A
    ap = argparse.ArgumentParser(usage=__doc__)
    ap.add_argument("layout", choices=sorted(SAVE))
    ap.add_argument("cmd", choices=["save", "resume", "partial"])
    ap.add_argument("series")
    ap.add_argument("ref", nargs="?", default="")
    ap.add_argument("--steps", default="10,20,30,40,50")
    ap.add_argument("--rule", default="last", choices=["last", "highest"])
    ap.add_argument("--expect", type=int)
    ap.add_argument("--n", type=int, default=0)
    A = ap.parse_args()
    {"save": cmd_save, "resume": cmd_resume, "partial": cmd_partial}[A.cmd]()


if __name__ == "__main__":
    main()
