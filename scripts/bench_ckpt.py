#!/usr/bin/python3
"""bench_ckpt — a real mixed-precision checkpoint for scripts/bench.sh (BENCH_ONLY=codec).

  train OUTDIR [STEPS] [HIDDEN]
        trains a small character-level MLP language model (on the text of
        Python's own standard library sources, so the weights are trained on
        something real) with Adam for STEPS steps (default 300), then saves
        what a mixed-precision trainer saves: bf16 weights, fp32 master
        weights and the fp32 Adam states (exp_avg, exp_avg_sq), twice:
          OUTDIR/ckpt.pt           torch.save of {model, master, optimizer}
          OUTDIR/ckpt.safetensors  the same tensors as safetensors, written by
                                   hand (8-byte header length, JSON header,
                                   data; no safetensors package needed)
        Prints bytes_pt= bytes_st= params= loss0= loss= seconds= on one line.
"""
import glob
import json
import os
import struct
import sys
import time

import torch


def corpus(limit=4 << 20):
    out = bytearray()
    for path in sorted(glob.glob("/usr/lib/python3*/**/*.py", recursive=True)):
        try:
            with open(path, "rb") as f:
                out += f.read()
        except OSError:
            continue
        if len(out) >= limit:
            break
    if len(out) < 1 << 16:
        out += bytes(range(256)) * 256
    return torch.tensor(list(out[:limit]), dtype=torch.long)


class CharMLP(torch.nn.Module):
    def __init__(self, ctx, emb, hidden):
        super().__init__()
        self.ctx = ctx
        self.emb = torch.nn.Embedding(256, emb)
        self.fc1 = torch.nn.Linear(ctx * emb, hidden)
        self.fc2 = torch.nn.Linear(hidden, hidden)
        self.norm = torch.nn.LayerNorm(hidden)
        self.out = torch.nn.Linear(hidden, 256)

    def forward(self, x):
        h = self.emb(x).flatten(1)
        h = torch.nn.functional.gelu(self.fc1(h))
        h = h + torch.nn.functional.gelu(self.fc2(self.norm(h)))
        return self.out(h)


def st_dtype(t):
    return {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16",
            torch.int64: "I64"}[t.dtype]


def st_bytes(t):
    t = t.contiguous().cpu()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def save_safetensors(path, tensors):
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors.items():
        b = st_bytes(t)
        header[name] = {"dtype": st_dtype(t), "shape": list(t.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def train(outdir, steps=300, hidden=1536):
    t0 = time.monotonic()
    torch.manual_seed(20)
    torch.set_num_threads(1)
    data = corpus()
    ctx, batch = 16, 128
    model = CharMLP(ctx, 64, hidden)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss0 = loss = None
    for step in range(steps):
        idx = torch.randint(0, len(data) - ctx - 1, (batch,))
        x = torch.stack([data[i:i + ctx] for i in idx.tolist()])
        y = data[idx + ctx]
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if loss0 is None:
            loss0 = loss.item()
    master = {k: v.detach().clone() for k, v in model.state_dict().items()}
    weights = {k: v.to(torch.bfloat16) for k, v in master.items()}
    ckpt = {"model": weights, "master": master, "optimizer": opt.state_dict()}
    os.makedirs(outdir, exist_ok=True)
    torch.save(ckpt, os.path.join(outdir, "ckpt.pt"))
    flat = {}
    for k, v in weights.items():
        flat["model." + k] = v
    for k, v in master.items():
        flat["master." + k] = v
    names = [k for k, _ in model.named_parameters()]
    for i, st in opt.state_dict()["state"].items():
        for key in ("exp_avg", "exp_avg_sq"):
            flat["optimizer.%s.%s" % (names[i], key)] = st[key]
    save_safetensors(os.path.join(outdir, "ckpt.safetensors"), flat)
    params = sum(p.numel() for p in model.parameters())
    print("bytes_pt=%d bytes_st=%d params=%d loss0=%.3f loss=%.3f seconds=%.1f" % (
        os.path.getsize(os.path.join(outdir, "ckpt.pt")),
        os.path.getsize(os.path.join(outdir, "ckpt.safetensors")),
        params, loss0, loss.item(), time.monotonic() - t0))


def main(argv):
    if len(argv) >= 2 and argv[0] == "train":
        train(argv[1], int(argv[2]) if len(argv) > 2 else 300,
              int(argv[3]) if len(argv) > 3 else 1536)
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
