"""trainer_demo.py DIR — a stand-in training loop for the ckptfs tutorial.

Every DEMO_INTERVAL seconds (default 1) it saves a checkpoint of a small model
and its optimizer with torch.save the way careful trainers do: into
DIR/step-N.pt.tmp, then a rename onto DIR/step-N.pt, which ckptfs commits as a
generation (rule `rename`). The embedding is frozen, so its bytes repeat in
every checkpoint and ckptfs stores them once. After DEMO_STEPS saves (default
6) it lists DIR (with -o keep=K only the newest K remain), loads the newest
checkpoint back and checks it tensor for tensor, and exits 0 only if it
matches.

Run with /usr/bin/python3 (Debian's python3-torch).
"""
import os
import sys
import time

import torch


def demo_model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Embedding(8192, 256),  # 8 MiB, frozen: identical in every save
        torch.nn.Linear(256, 1024),
        torch.nn.ReLU(),
        torch.nn.Linear(1024, 256),
    )
    model[0].weight.requires_grad_(False)
    return model


def demo_save(obj, path):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)


def demo_same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(demo_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(demo_same(x, y) for x, y in zip(a, b))
    return a == b


def main():
    if len(sys.argv) != 2:
        print("usage: trainer_demo.py DIR", file=sys.stderr)
        return 2
    out = sys.argv[1]
    steps = int(os.environ.get("DEMO_STEPS", "6"))
    interval = float(os.environ.get("DEMO_INTERVAL", "1"))
    os.makedirs(out, exist_ok=True)

    model = demo_model()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    x = torch.randint(0, 8192, (64,))
    last = None
    for i in range(1, steps + 1):
        step = 100 * i
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        state = {"step": step, "model": model.state_dict(), "optimizer": opt.state_dict()}
        path = os.path.join(out, "step-%d.pt" % step)
        t0 = time.monotonic()
        demo_save(state, path)
        print("step %d: saved %s (%.1f MiB) in %.2f s, loss %.4f"
              % (step, path, os.path.getsize(path) / 2**20, time.monotonic() - t0, loss.item()),
              flush=True)
        last = (path, state)
        time.sleep(interval)

    print("in %s now: %s" % (out, " ".join(sorted(os.listdir(out)))), flush=True)
    path, state = last
    loaded = torch.load(path)
    if not demo_same(state, loaded):
        print("FAIL: %s does not load back as saved" % path, file=sys.stderr)
        return 1
    print("OK: %s loads back tensor for tensor" % path, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
