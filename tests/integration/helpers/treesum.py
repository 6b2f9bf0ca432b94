#!/usr/bin/python3
"""treesum.py DIR [--no-times] [--no-owner] — a sorted manifest of a tree, one
line per entry: relative path, type, permission bits, uid:gid, size, mtime_ns,
and the SHA-256 of a file or the target of a symlink. Two trees are equal iff
their manifests are. Directory sizes are left out (not meaningful)."""
import hashlib
import os
import stat
import sys

root = sys.argv[1]
times = "--no-times" not in sys.argv
owner = "--no-owner" not in sys.argv
lines = []
for dirpath, dirnames, filenames in os.walk(root):
    for name in dirnames + filenames:
        p = os.path.join(dirpath, name)
        rel = os.path.relpath(p, root)
        st = os.lstat(p)
        fields = [rel]
        if stat.S_ISLNK(st.st_mode):
            fields += ["l", "-", "link->" + os.readlink(p)]
        elif stat.S_ISDIR(st.st_mode):
            fields += ["d", "%o" % stat.S_IMODE(st.st_mode), "-"]
        elif stat.S_ISREG(st.st_mode):
            h = hashlib.sha256()
            with open(p, "rb") as f:
                for b in iter(lambda: f.read(1 << 20), b""):
                    h.update(b)
            fields += ["f", "%o" % stat.S_IMODE(st.st_mode), "%d %s" % (st.st_size, h.hexdigest())]
        else:
            fields += ["o%o" % stat.S_IFMT(st.st_mode), "%o" % stat.S_IMODE(st.st_mode), "-"]
        if owner:
            fields.append("%d:%d" % (st.st_uid, st.st_gid))
        if times and not stat.S_ISLNK(st.st_mode):
            fields.append("mtime=%d" % st.st_mtime_ns)
        lines.append(" ".join(fields))
for l in sorted(lines):
    print(l)
