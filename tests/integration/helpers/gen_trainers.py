#!/usr/bin/python3
"""gen_trainers.py [--root MNT] [--ref REF] [--salt S] [--size N] COMMAND ARGS...

Scripted replicas of how trainers write checkpoints (the exact system-call
sequences of /work/shared/TRAINERS.md), for the generation tests
(t_generations.sh, t_keep.sh). Paths of the write commands are relative to
--root (the mount); every byte written there is also written to the same
relative path under --ref (a plain directory), so the test can compare. File
contents are deterministic per (salt, relative path): a different --salt gives
different bytes. Exit 0 = done, 1 = an unexpected error (printed).

Write commands (PHASE: files = all but the completion signal, final = only the
completion signal, all = both; default all):
  dcp DIR [--ranks N] [--phase P]      TorchTitan / DCP: N processes makedirs(exist_ok)
                                       DIR at once, each writes __{rank}_0.distcp ('wb',
                                       sequential, fsync, close); final: rank 0 writes
                                       .metadata.tmp, fsync, unlinks .metadata, renames
  dcp-rank-meta DIR [--ranks N] [--phase P]   use_collectives=False: each rank renames
                                       __{rank}.metadata.tmp -> __{rank}.metadata
  hf DIR [--ranks N] [--phase P]       HF Trainer checkpoint-N: config, model.safetensors
                                       (ftruncate to size first, then written), optimizer.pt,
                                       scheduler.pt, rng_state_0.pth; final: trainer_state.json
                                       then the other ranks' rng_state_{r}.pth
  deepspeed SAVEDIR TAG [--phase P]    global_stepN/ model and zero optim states (no fsync),
                                       zero_to_fp32.py copied into SAVEDIR; final: `latest`
                                       rewritten in place with TAG
  megatron SAVEDIR ITER [--phase P]    iter_{:07d}/mp_rank_00/model_optim_rng.pt; final:
                                       latest_checkpointed_iteration.txt rewritten with ITER
  megatron-dist SAVEDIR ITER [--phase P]  torch_dist: __0_0.distcp (fsync) + common.pt;
                                       final: metadata.json, then the tracker file
  lightning-file DIR NAME              torch.save-like bytes into a mkstemp file in $TMPDIR,
                                       then shutil.move into DIR/NAME (across devices)
  lightning-link DIR NAME TARGET       os.remove(DIR/NAME) if present, os.symlink(TARGET)
  lightning-fsdp DIR [--ranks N] [--phase P]   DCP files + .metadata rename; final: meta.pt
  put FILE [--mode wb|r+b]             write one file (whole content), close
  hold FILE READY GO [--mode r+b]      open FILE without O_TRUNC, write 1000 bytes at 0,
                                       create READY, wait for GO, write 1000 more, close
  titan-race SERIES --purge A,B,.. --save NAME [--ranks N] [--purge-when shards|metadata]
                                       [--ignore-errors]
                                       TorchTitan: a purge thread rmtree()s the named old
                                       steps while a new DCP save NAME is written (while
                                       the shards are written, or while rank 0 commits)
Read commands:
  titan-resume SERIES                  the step TorchTitan resumes from (or "none")
  hf-last OUTDIR                       HF get_last_checkpoint (basename, or "none")
  hf-sorted OUTDIR                     checkpoint-* sorted by directory mtime: "name mtime_ns"
  gen PATH                             the user.ckptfs.generation line, or the errno name
  expect PATH KEY=VAL... [--wait S] [--stable S]
                                       the generation line has every KEY=VAL (waits up to S
                                       seconds for it; --stable: and keeps it S seconds)
  noattr PATH                          PATH exists and has no generation (ENODATA)
"""
import argparse
import errno
import io
import pickle
import multiprocessing as mp
import os
import random
import re
import shutil
import sys
import tempfile
import threading
import time
import zipfile

XATTR = "user.ckptfs.generation"
A = None  # parsed arguments


def fail(msg):
    print("gen_trainers: " + msg, file=sys.stderr)
    sys.exit(1)


# ---------------------------------------------------------------- data

def blob(rel, size=None):
    size = A.size if size is None else size
    return random.Random("%s:%s" % (A.salt, rel)).randbytes(size)


def torch_like(rel, size=None):
    """A torch.save-like zip (records stored, top folder = basename), built in
    memory and then written strictly in order like torch's zip writer."""
    size = A.size if size is None else size
    top = os.path.splitext(os.path.basename(rel))[0] or "archive"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        # a real protocol-2 pickle, as torch.save writes (a dict naming no storage)
        z.writestr(top + "/data.pkl", pickle.dumps({"state": rel}, protocol=2))
        z.writestr(top + "/data/0", blob(rel, size))
        z.writestr(top + "/version", b"3\n")
    return buf.getvalue()


def mnt(rel):
    return os.path.join(A.root, rel)


def ref(rel):
    return os.path.join(A.ref, rel)


def ref_put(rel, data):
    if not A.ref:
        return
    p = ref(rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb") as f:
        f.write(data)


def ref_remove(rel):
    if A.ref and os.path.lexists(ref(rel)):
        if os.path.isdir(ref(rel)) and not os.path.islink(ref(rel)):
            shutil.rmtree(ref(rel))
        else:
            os.unlink(ref(rel))


def write_seq(f, data, piece=65536):
    for i in range(0, len(data), piece):
        f.write(data[i:i + piece])


def put(rel, data, fsync=False, mode="wb"):
    """open(mode), write sequentially, [fsync], close — and the same bytes to REF."""
    with open(mnt(rel), mode) as f:
        write_seq(f, data)
        f.flush()
        if fsync:
            os.fsync(f.fileno())
    ref_put(rel, data)


def rename(a, b):
    os.rename(mnt(a), mnt(b))
    if A.ref and os.path.lexists(ref(a)):
        os.makedirs(os.path.dirname(ref(b)), exist_ok=True)
        os.rename(ref(a), ref(b))


def makedirs(rel):
    os.makedirs(mnt(rel), exist_ok=True)
    if A.ref:
        os.makedirs(ref(rel), exist_ok=True)


def phases():
    return {"files": (True, False), "final": (False, True), "all": (True, True)}[A.phase]


# ---------------------------------------------------------------- ranks

def run_ranks(n, fn, *args):
    """fn(rank, barrier, *args) in n forked processes (DCP ranks: other PIDs)."""
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(n)
    procs = [ctx.Process(target=_rank_main, args=(fn, r, barrier) + args) for r in range(n)]
    for p in procs:
        p.start()
    bad = []
    for r, p in enumerate(procs):
        p.join(60)
        if p.is_alive():
            p.kill()
            bad.append("rank %d hung" % r)
        elif p.exitcode != 0:
            bad.append("rank %d exited %s" % (r, p.exitcode))
    if bad:
        fail(", ".join(bad))


def _rank_main(fn, rank, barrier, *args):
    try:
        fn(rank, barrier, *args)
    except BaseException as e:  # noqa: BLE001
        print("gen_trainers: rank %d: %r" % (rank, e), file=sys.stderr)
        sys.stderr.flush()
        os._exit(1)
    sys.stdout.flush()
    os._exit(0)


# ---------------------------------------------------------------- DCP

def _dcp_rank_files(rank, barrier, d):
    barrier.wait()  # every rank mkdir(parents=True, exist_ok=True) at once
    makedirs(d)
    put(os.path.join(d, "__%d_0.distcp" % rank), blob(os.path.join(d, "__%d_0.distcp" % rank)), fsync=True)


def dcp_metadata(d):
    """Rank 0 after gathering: .metadata.tmp, fsync, unlink .metadata, rename."""
    tmp = os.path.join(d, ".metadata.tmp")
    put(tmp, b"\x80\x04DCP-metadata:" + d.encode() + blob(tmp, 512), fsync=True)
    if os.path.exists(mnt(os.path.join(d, ".metadata"))):
        os.unlink(mnt(os.path.join(d, ".metadata")))
        ref_remove(os.path.join(d, ".metadata"))
    rename(tmp, os.path.join(d, ".metadata"))


def cmd_dcp():
    d = A.args[0]
    files, final = phases()
    if files:
        run_ranks(A.ranks, _dcp_rank_files, d)
    if final:
        dcp_metadata(d)


def _dcp_rank_meta(rank, barrier, d):
    tmp = os.path.join(d, "__%d.metadata.tmp" % rank)
    put(tmp, b"rank-metadata" + blob(tmp, 256), fsync=True)
    rename(tmp, os.path.join(d, "__%d.metadata" % rank))


def cmd_dcp_rank_meta():
    d = A.args[0]
    files, final = phases()
    if files:
        run_ranks(A.ranks, _dcp_rank_files, d)
    if final:
        run_ranks(A.ranks, _dcp_rank_meta, d)


def cmd_titan_resume():
    series = mnt(A.args[0])
    best = None
    for name in os.listdir(series):
        m = re.search(r"step-(\d+)", name)
        if m and os.path.exists(os.path.join(series, name, ".metadata")):
            step = int(m.group(1))
            best = step if best is None else max(best, step)
    print("none" if best is None else best)


def cmd_titan_race():
    """--ignore-errors: rmtree(ignore_errors=True) semantics, errors printed
    ("error: ...") but not fatal (a purge racing the daemon's own keep)."""
    series = A.args[0]
    errors = []

    def purge():
        for name in A.purge.split(","):
            try:
                shutil.rmtree(mnt(os.path.join(series, name)))
                ref_remove(os.path.join(series, name))
            except OSError as e:
                errors.append("rmtree %s: %s" % (name, e))

    t = threading.Thread(target=purge)
    if A.purge_when == "shards":
        t.start()  # while the ranks write their shards
    try:
        d = os.path.join(series, A.save)
        run_ranks(A.ranks, _dcp_rank_files, d)
        if A.purge_when == "metadata":
            t.start()  # while rank 0 renames .metadata (the daemon's keep runs then)
        dcp_metadata(d)
    except (OSError, SystemExit) as e:
        errors.append("save %s: %r" % (A.save, e))
    if not t.ident:
        t.start()
    t.join(60)
    if t.is_alive():
        errors.append("purge thread still running after 60 s")
    if errors and A.ignore_errors and not any(e.startswith("save") for e in errors):
        for e in errors:
            print("error: " + e)
    elif errors:
        fail("; ".join(errors))


# ---------------------------------------------------------------- HF Trainer

def _presized(rel, data):
    """safetensors >= 0.8: create, ftruncate to the final size, then write."""
    fd = os.open(mnt(rel), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.ftruncate(fd, len(data))
        pos = 0
        while pos < len(data):
            pos += os.pwrite(fd, data[pos:pos + 65536], pos)
    finally:
        os.close(fd)
    ref_put(rel, data)


def cmd_hf():
    d = A.args[0]
    files, final = phases()
    if files:
        makedirs(d)
        put(os.path.join(d, "config.json"), b'{"model_type": "tiny", "salt": "%s"}\n' % A.salt.encode())
        _presized(os.path.join(d, "model.safetensors"), blob(os.path.join(d, "model.safetensors")))
        put(os.path.join(d, "optimizer.pt"), torch_like(os.path.join(d, "optimizer.pt")))
        put(os.path.join(d, "scheduler.pt"), torch_like(os.path.join(d, "scheduler.pt"), 1000))
        put(os.path.join(d, "rng_state_0.pth"), torch_like(os.path.join(d, "rng_state_0.pth"), 3000))
    if final:
        step = int(re.search(r"(\d+)$", d).group(1))
        put(os.path.join(d, "trainer_state.json"), b'{"global_step": %d, "log_history": []}\n' % step)
        # other ranks' rng files may land after trainer_state.json
        for r in range(1, A.ranks):
            rel = os.path.join(d, "rng_state_%d.pth" % r)
            put(rel, torch_like(rel, 3000))


_re_checkpoint = re.compile(r"^checkpoint\-(\d+)$")


def cmd_hf_last():
    folder = mnt(A.args[0])
    cps = [p for p in os.listdir(folder)
           if _re_checkpoint.search(p) is not None and os.path.isdir(os.path.join(folder, p))]
    print("none" if not cps else max(cps, key=lambda x: int(_re_checkpoint.search(x).groups()[0])))


def cmd_hf_sorted():
    import glob
    folder = mnt(A.args[0])
    paths = [str(x) for x in glob.glob(os.path.join(folder, "checkpoint-*")) if os.path.isdir(x)]
    for p in sorted(paths, key=lambda p: os.stat(p).st_mtime_ns):
        print(os.path.basename(p), os.stat(p).st_mtime_ns)


# ---------------------------------------------------------------- DeepSpeed / Megatron

def cmd_deepspeed():
    save_dir, tag = A.args[0], A.args[1]
    files, final = phases()
    if files:
        d = os.path.join(save_dir, tag)
        makedirs(d)
        put(os.path.join(d, "mp_rank_00_model_states.pt"), torch_like(os.path.join(d, "mp_rank_00_model_states.pt")))
        for dp in range(2):
            rel = os.path.join(d, "zero_pp_rank_%d_mp_rank_00_optim_states.pt" % dp)
            put(rel, torch_like(rel))
        # _copy_recovery_script: copyfile + chmod +x, into save_dir, every save
        script = os.path.join(save_dir, "zero_to_fp32.py")
        src = os.path.join(tempfile.gettempdir(), "zero_to_fp32.src.py")
        with open(src, "wb") as f:
            f.write(b"#!/usr/bin/env python3\n# recovery script\n" + blob("zero_to_fp32.py", 4000))
        shutil.copyfile(src, mnt(script))
        os.chmod(mnt(script), os.stat(mnt(script)).st_mode | 0o111)
        ref_put(script, open(src, "rb").read())
        os.unlink(src)
    if final:
        with open(mnt(os.path.join(save_dir, "latest")), "w") as fd:
            fd.write(tag)
        ref_put(os.path.join(save_dir, "latest"), tag.encode())


def _tracker(save_dir, it):
    rel = os.path.join(save_dir, "latest_checkpointed_iteration.txt")
    with open(mnt(rel), "w") as f:
        f.write(str(it))
    ref_put(rel, str(it).encode())


def cmd_megatron():
    save_dir, it = A.args[0], int(A.args[1])
    files, final = phases()
    d = os.path.join(save_dir, "iter_{:07d}".format(it), "mp_rank_00")
    if files:
        makedirs(d)
        put(os.path.join(d, "model_optim_rng.pt"), torch_like(os.path.join(d, "model_optim_rng.pt")))
    if final:
        _tracker(save_dir, it)


def cmd_megatron_dist():
    save_dir, it = A.args[0], int(A.args[1])
    files, final = phases()
    d = os.path.join(save_dir, "iter_{:07d}".format(it))
    if files:
        makedirs(d)
        put(os.path.join(d, "__0_0.distcp"), blob(os.path.join(d, "__0_0.distcp")), fsync=True)
        put(os.path.join(d, "common.pt"), torch_like(os.path.join(d, "common.pt"), 2000))
    if final:
        put(os.path.join(d, "metadata.json"),
            b'{"sharded_backend": "torch_dist", "sharded_backend_version": 1, '
            b'"common_backend": "torch", "common_backend_version": 1}')
        _tracker(save_dir, it)


# ---------------------------------------------------------------- Lightning

def cmd_lightning_file():
    d, name = A.args[0], A.args[1]
    rel = os.path.join(d, name)
    data = torch_like(rel)
    # fsspec LocalFileOpener(autocommit=False): tempfile.mkstemp() in $TMPDIR,
    # then on commit shutil.move(temp, path): across devices copy2 + unlink
    fd, tmp = tempfile.mkstemp()
    with os.fdopen(fd, "wb") as f:
        write_seq(f, data)
    shutil.move(tmp, mnt(rel))
    if os.path.exists(tmp):
        fail("shutil.move left the temp file %s" % tmp)
    ref_put(rel, data)


def cmd_lightning_link():
    d, name, target = A.args[0], A.args[1], A.args[2]
    p = mnt(os.path.join(d, name))
    if os.path.lexists(p):
        os.remove(p)
    os.symlink(target, p)
    if A.ref:
        ref_remove(os.path.join(d, name))
        os.makedirs(ref(d), exist_ok=True)
        os.symlink(target, ref(os.path.join(d, name)))


def cmd_lightning_fsdp():
    d = A.args[0]
    files, final = phases()
    if files:
        run_ranks(A.ranks, _dcp_rank_files, d)
        dcp_metadata(d)
    if final:
        put(os.path.join(d, "meta.pt"), torch_like(os.path.join(d, "meta.pt"), 1500))


def cmd_hold():
    """hold FILE READY GO: open FILE with --mode (default r+b: no O_TRUNC),
    write 1000 bytes at offset 0, create READY, wait for GO to exist, write
    1000 more bytes at offset 1000, close. REF gets the same changes."""
    rel, ready, go = A.args[0], A.args[1], A.args[2]
    data = blob(rel, 2000)
    mode = A.mode if A.mode != "wb" else "r+b"
    with open(mnt(rel), mode) as f:
        f.write(data[:1000])
        f.flush()
        open(ready, "w").close()
        deadline = time.monotonic() + 60
        while not os.path.exists(go):
            if time.monotonic() > deadline:
                fail("hold: %s never appeared" % go)
            time.sleep(0.05)
        f.write(data[1000:])
        f.flush()
    if A.ref:
        with open(ref(rel), "r+b") as f:
            f.write(data)


def cmd_put():
    rel = A.args[0]
    put(rel, blob(rel), mode=A.mode)


# ---------------------------------------------------------------- observing

def gen_line(path):
    try:
        return os.getxattr(path, XATTR).decode()
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


def cmd_gen():
    print(gen_line(A.args[0]))


def _matches(line, want):
    fields = dict(w.split("=", 1) for w in line.split() if "=" in w and not w.startswith("name=")) \
        if "=" in line else {}
    m = re.search(r"(^|\s)name=(.*?) step=", line)
    if m:
        fields["name"] = m.group(2)
    return all(fields.get(k) == v for k, v in want)


def cmd_expect():
    path = A.args[0]
    want = [a.split("=", 1) for a in A.args[1:]]
    deadline = time.monotonic() + A.wait
    while True:
        line = gen_line(path)
        if _matches(line, want):
            break
        if time.monotonic() >= deadline:
            fail("%s: generation is '%s', expected %s%s" % (
                path, line, " ".join(A.args[1:]), " (waited %gs)" % A.wait if A.wait else ""))
        time.sleep(0.05)
    until = time.monotonic() + A.stable
    while time.monotonic() < until:
        time.sleep(0.05)
        line = gen_line(path)
        if not _matches(line, want):
            fail("%s: generation changed to '%s' within %gs, expected it to stay %s" % (
                path, line, A.stable, " ".join(A.args[1:])))


def cmd_noattr():
    path = A.args[0]
    if not os.path.lexists(path):
        fail("%s does not exist" % path)
    line = gen_line(path)
    if line != "ENODATA":
        fail("%s: expected no generation (ENODATA), got '%s'" % (path, line))


CMDS = {
    "dcp": cmd_dcp, "dcp-rank-meta": cmd_dcp_rank_meta, "titan-resume": cmd_titan_resume,
    "titan-race": cmd_titan_race, "hf": cmd_hf, "hf-last": cmd_hf_last, "hf-sorted": cmd_hf_sorted,
    "deepspeed": cmd_deepspeed, "megatron": cmd_megatron, "megatron-dist": cmd_megatron_dist,
    "lightning-file": cmd_lightning_file, "lightning-link": cmd_lightning_link,
    "lightning-fsdp": cmd_lightning_fsdp, "put": cmd_put, "hold": cmd_hold, "gen": cmd_gen, "expect": cmd_expect,
    "noattr": cmd_noattr,
}


def main():
    global A
    ap = argparse.ArgumentParser(usage=__doc__)
    ap.add_argument("--root", default="/")
    ap.add_argument("--ref", default="")
    ap.add_argument("--salt", default="s0")
    ap.add_argument("--size", type=int, default=96 * 1024)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--phase", default="all", choices=["files", "final", "all"])
    ap.add_argument("--purge", default="")
    ap.add_argument("--save", default="")
    ap.add_argument("--mode", default="wb")
    ap.add_argument("--ignore-errors", action="store_true")
    ap.add_argument("--purge-when", default="shards", choices=["shards", "metadata"])
    ap.add_argument("--wait", type=float, default=0.0)
    ap.add_argument("--stable", type=float, default=0.0)
    ap.add_argument("cmd", choices=sorted(CMDS))
    ap.add_argument("args", nargs="*")
    A = ap.parse_args()
    try:
        CMDS[A.cmd]()
    except OSError as e:
        fail("%s %s: %s" % (A.cmd, " ".join(A.args), e))


main()
