#!/usr/bin/env bash
# make demo — mount ckptfs over a local directory, save a few checkpoint steps
# the way trainers do, show what was stored and how much dedup saved, unmount.
set -euo pipefail
BUILD=${1:-build}
BIN=$(cd "$BUILD" && pwd)
PY=/usr/bin/python3

work=$(mktemp -d /tmp/ckptfs-demo.XXXXXX)
mnt=$work/mnt backing=$work/backing cache=$work/cache
mkdir -p "$mnt" "$backing" "$cache"
pid=
cleanup() {
	if mountpoint -q "$mnt" 2>/dev/null; then fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt"; fi
	if [ -n "$pid" ]; then wait "$pid" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "mount: ckptfs $backing $mnt -o cache=$cache"
"$BIN/ckptfs" -f -o cache="$cache" "$backing" "$mnt" 2>"$work/daemon.log" &
pid=$!
for _ in $(seq 100); do mountpoint -q "$mnt" && break; sleep 0.05; done
mountpoint -q "$mnt" || { cat "$work/daemon.log"; echo "demo: mount failed" >&2; exit 1; }

say "train: 3 checkpoint steps of a small model, each saved by 2 'ranks' (replicated state)"
CKPT_DIR=$mnt "$PY" - <<'PY'
import os, time, torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
root = os.environ["CKPT_DIR"]
for step in (100, 200, 300):
    for _ in range(3):
        opt.zero_grad(); model(torch.randn(8, 1024)).sum().backward(); opt.step()
    d = os.path.join(root, f"step-{step}")
    os.makedirs(d, exist_ok=True)
    t = time.time()
    for rank in range(2):  # data-parallel replicas hold identical state
        torch.save({"model": model.state_dict(), "optim": opt.state_dict(), "step": step},
                   os.path.join(d, f"rank{rank}.pt"))
    # a frozen embedding table that never changes between steps
    torch.manual_seed(1)
    torch.save({"embedding": torch.randn(2048, 512)}, os.path.join(d, "frozen_embedding.pt"))
    print(f"  saved {d} in {time.time()-t:.2f}s")
with open(os.path.join(root, "latest"), "w") as f:
    f.write("step-300\n")
PY

say "what the trainer sees"
ls -la "$mnt" "$mnt/step-300"
du -sh --apparent-size "$mnt"

say "resume check: torch.load from the mount"
CKPT_DIR=$mnt "$PY" -c '
import os, torch
s = torch.load(os.path.join(os.environ["CKPT_DIR"], "step-300", "rank1.pt"))
print("  loaded step", s["step"], "with", sum(v.numel() for v in s["model"].values()), "parameters")'

say "uploads to BACKING run behind the saves; wait until every generation is durable"
"$BIN/ckptfs-admin" wait "$mnt" --timeout 120
"$BIN/ckptfs-admin" list "$mnt"

say "what ckptfs stored (ckptfs-admin stats)"
"$BIN/ckptfs-admin" stats "$mnt"
logical=$("$BIN/ckptfs-admin" stats "$mnt" | awk '$1=="referenced_bytes"{print $2}')
stored=$(du -sb "$backing" | cut -f1)
echo
echo "  trainer wrote $((logical / 1048576)) MiB; BACKING holds $((stored / 1048576)) MiB" \
     "($(awk -v a="$logical" -v b="$stored" 'BEGIN{printf "%.1f", a/b}')x less)"

say "unmount"
fusermount3 -u "$mnt"
wait "$pid"; pid=
echo "  done. (the demo's files were under $work, now removed)"
