#!/usr/bin/python3
"""CPU of a cold restore's daemon by part and by thread role, from a perf profile.

  perf script -i perf-nc.data -F comm,tid,ip,sym,dso > script.txt
  scripts/restore-profile.py script.txt DAEMON_CPU_S GIB

perf-nc.data: BENCH_PERF=1 BENCH_PERF_KEEP=DIR BENCH_ONLY=restore scripts/bench.sh build.
Each sample goes to one part by its leaf symbol or the syscall on its kernel stack
(user stacks are not unwound: no frame pointers); CPU-s/GiB = the part's share of the
samples x the daemon's CPU (the bench's "daemon CPU") / GiB restored.
"""
import sys, collections
# perf script -F comm,tid,ip,sym,dso output: sample header line then frames (leaf first)
def samples(path):
    cur=None
    for line in open(path, errors='replace'):
        if not line.strip():
            if cur: yield cur
            cur=None; continue
        if not line.startswith('\t') and not line.startswith(' '):
            parts=line.split()
            cur={'comm':parts[0],'tid':parts[1],'frames':[]}
        else:
            s=line.strip().split(None,1)
            if cur is not None and len(s)>1: cur['frames'].append(s[1])
    if cur: yield cur
def cat(fr):
    leaf=fr[0] if fr else ''
    j=' | '.join(fr)
    if 'libcrypto' in leaf: return 'SHA-256 (libcrypto)'
    if 'crc32c' in leaf: return 'CRC-32C'
    if 'libsqlite' in leaf: return 'SQLite (user)'
    if 'memmove' in leaf or 'memcpy' in leaf and 'libc' in leaf: return 'memcpy (user, libc)'
    if 'libnfs' in leaf: return 'libnfs (user)'
    if 'fuse_dev_do_write' in j: return 'FUSE reply (writev /dev/fuse)'
    if 'fuse_dev_do_read' in j: return 'FUSE request read'
    if 'recvfrom' in j or 'sock_recvmsg' in j or 'tcp_recvmsg' in j: return 'TCP receive'
    if 'sendmsg' in j or 'sendto' in j or 'tcp_sendmsg' in j: return 'TCP send'
    if 'futex' in j: return 'futex (locks, condvars)'
    if 'do_sys_poll' in j or 'sys_poll' in j: return 'poll'
    if 'madvise' in j: return 'madvise'
    if 'exc_page_fault' in j: return 'page faults'
    if 'sys_pwrite' in j or 'iomap_dio' in j: return 'cache copy: O_DIRECT pwrite'
    if 'sys_openat' in j or 'do_sys_open' in j: return 'cache copy: open/create'
    if 'rename' in j: return 'cache copy: rename'
    if 'mkdir' in j: return 'cache copy: mkdir'
    if 'sys_close' in j or '__fput' in j: return 'close'
    if 'sys_clone' in j or 'sys_mmap' in j or 'munmap' in j or 'sys_exit' in j or 'mprotect' in j: return 'threads (clone/mmap/exit)'
    if 'fdatasync' in j or 'fsync' in j: return 'fsync'
    if 'sys_pread' in j or 'sys_read' in j: return 'read/pread'
    if 'newfstatat' in j or 'statx' in j or 'fstat' in j: return 'stat'
    if 'schedule' in j or 'finish_task_switch' in j: return 'scheduler (other)'
    if '[kernel' in leaf: return 'kernel (other)'
    if 'ckptfs' in leaf: return 'ckptfs (other)'
    if 'libc' in leaf: return 'libc (other)'
    return 'other'
tot=collections.Counter(); bytid=collections.defaultdict(collections.Counter); n=0
for s in samples(sys.argv[1]):
    c=cat(s['frames']); tot[c]+=1; bytid[s['comm']+'/'+s['tid']][c]+=1; n+=1
cpu=float(sys.argv[2]) if len(sys.argv)>2 else 0; gib=float(sys.argv[3]) if len(sys.argv)>3 else 4
print(f"samples {n}; daemon CPU {cpu} s for {gib} GiB")
for c,k in tot.most_common():
    print(f"  {c:34s} {100*k/n:5.1f} %  {cpu*k/n/gib:5.2f} CPU-s/GiB")
# thread roles: by their dominant category
roles=collections.Counter()
for t,cn in bytid.items():
    tn=sum(cn.values())
    if cn['FUSE reply (writev /dev/fuse)']+cn['FUSE request read']>0.05*tn: r='FUSE worker'
    elif cn['TCP receive']+cn['SHA-256 (libcrypto)']>0.2*tn: r='fetch (job/readahead)'
    else: r=t.split('/')[0]+' (other)'
    roles[r]+=tn
print("by thread role:")
for r,k in roles.most_common(): print(f"  {r:30s} {100*k/n:5.1f} %  {cpu*k/n/gib:5.2f} CPU-s/GiB  ")
print("threads:", len(bytid))
