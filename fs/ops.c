/* ops — the FUSE low-level operations, as libfuse's passthrough_ll shapes
 * them: each one decodes the request, makes one call into the namespace
 * (ns.h), and replies exactly once, with a negative errno turned into
 * fuse_reply_err. What a call means for the catalog, the node table, the
 * file's data and its generation is the namespace's business; what is left
 * here is FUSE: the entry and attribute timeouts, the open flags the kernel
 * gets (direct_io, keep_cache), the buffers of replies, the caller's
 * credentials as a struct ns_cred, and the connection's parameters.
 *
 * Locks (flock, fcntl) are the kernel's: ckptfs does not implement
 * getlk/setlk, so they work across the processes of this node, which is
 * what trainers use. */
#define _GNU_SOURCE
#include "ops.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "claim.h"
#include "fuseinit.h"
#include "leasekeep.h"
#include "log.h"
#include "ns.h"

/* Entry and attribute timeouts. At most 1 s: with a shared catalog
 * (-o meta=) a name or size another node changed is seen within it, the
 * close-to-open bar of NFS with actimeo=1 (docs/MULTINODE.md); generation
 * roots get 0 (ns_entry_timeout) and no open keeps the page cache. */
#define OPS_TIMEOUT 1.0
#define OPS_MAX_WRITE (1u << 20)
#define OPS_READAHEAD (1u << 20) /* one FUSE_READ of max_pages (= max_write) */
#define OPS_XATTR_CACHE "user.ckptfs.cache"
#define OPS_XATTR_BACKING "user.ckptfs.backing"
#define OPS_XATTR_GEN "user.ckptfs.generation"
#define OPS_XATTR_COMMIT "user.ckptfs.commit"
#define OPS_XATTR_PIN "user.ckptfs.pin"

_Static_assert(OPS_TIMEOUT <= 1.0, "close-to-open across nodes: at most 1 s of kernel caching");

static struct ops_context *ops_ctx(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static struct ns *ops_ns(fuse_req_t req)
{
	return ops_ctx(req)->ns;
}

static struct ns_file *ops_file(struct fuse_file_info *fi)
{
	return (struct ns_file *)(uintptr_t)fi->fh;
}

/* Shared catalog: once this node's lease ran out (leasekeep.h), and any
 * catalog once it lost BACKING's claim for good (claim.h invariant 9: not
 * while it is only unsure), every change is refused with EROFS and replied
 * here; true then. */
static bool ops_fenced(fuse_req_t req)
{
	const struct ops_context *ctx = ops_ctx(req);
	if (!leasekeep_fenced(ctx->lease) && !claim_lost(ctx->claim))
		return false;
	fuse_reply_err(req, EROFS);
	return true;
}

static int ops_getgroups(void *arg, int size, gid_t *list)
{
	return fuse_req_getgroups(arg, size, list);
}

/* The caller, as the namespace sees it; its groups are read only if asked. */
static struct ns_cred ops_cred(fuse_req_t req)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	return (struct ns_cred){ .uid = ctx->uid, .gid = ctx->gid, .pid = ctx->pid,
				 .getgroups = ops_getgroups, .arg = req };
}

static void ops_to_stat(const struct cat_inode *in, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = in->ino;
	st->st_mode = in->mode;
	st->st_nlink = in->nlink;
	st->st_uid = in->uid;
	st->st_gid = in->gid;
	st->st_rdev = in->rdev;
	st->st_size = (off_t)in->size;
	st->st_blksize = 1 << 20;
	st->st_blocks = (blkcnt_t)((in->size + 511) / 512);
	st->st_atim.tv_sec = in->atime_ns / 1000000000;
	st->st_atim.tv_nsec = in->atime_ns % 1000000000;
	st->st_mtim.tv_sec = in->mtime_ns / 1000000000;
	st->st_mtim.tv_nsec = in->mtime_ns % 1000000000;
	st->st_ctim.tv_sec = in->ctime_ns / 1000000000;
	st->st_ctim.tv_nsec = in->ctime_ns % 1000000000;
}

static void ops_entry(fuse_req_t req, const char *name, const struct cat_inode *in,
		      struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = in->ino;
	e->attr_timeout = OPS_TIMEOUT;
	e->entry_timeout = ns_entry_timeout(ops_ns(req), name, OPS_TIMEOUT);
	ops_to_stat(in, &e->attr);
}

/* The namespace counted the kernel's lookup of in already. */
static void ops_reply_entry(fuse_req_t req, int rc, const char *name, const struct cat_inode *in)
{
	struct fuse_entry_param e;
	if (rc != 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	ops_entry(req, name, in, &e);
	fuse_reply_entry(req, &e);
}

static void ops_reply_attr(fuse_req_t req, int rc, const struct cat_inode *in)
{
	struct stat st;
	if (rc != 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	ops_to_stat(in, &st);
	fuse_reply_attr(req, &st, OPS_TIMEOUT);
}

/* ---- lifecycle ---- */

static void ops_init(void *userdata, struct fuse_conn_info *conn)
{
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	/* write order matters to the streaming chunker: no kernel write-back cache */
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	conn->max_write = OPS_MAX_WRITE;
	conn->max_readahead = OPS_READAHEAD;
	conn->time_gran = 1;
	log_info("mounted: max_write %u, readahead %u", conn->max_write, conn->max_readahead);
}

/* mountinfo escapes blanks and backslashes in paths as \ooo (octal). */
static void ops_mountinfo_unescape(char *s)
{
	char *out = s;
	for (; *s; s++, out++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '7' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*out = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*out = *s;
		}
	}
	*out = '\0';
}

/* The device number ("major:minor") of the newest mount at mountpoint. */
static int ops_mount_dev(const char *mountpoint, char *dev, size_t size)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -errno;
	char line[2 * PATH_MAX + 512], id[64], path[PATH_MAX + 1];
	int rc = -ENOENT;
	while (fgets(line, sizeof(line), f)) {
		/* "36 35 0:44 / /mnt/ckpt rw,... - fuse.ckptfs ..." */
		if (sscanf(line, "%*s %*s %63s %*s %4096s", id, path) != 2)
			continue;
		ops_mountinfo_unescape(path);
		if (strcmp(path, mountpoint) == 0) {
			snprintf(dev, size, "%s", id);
			rc = 0;
		}
	}
	fclose(f);
	return rc;
}

void ops_tune_readahead(const char *mountpoint)
{
	char dev[64], sysfs[128];
	int rc = ops_mount_dev(mountpoint, dev, sizeof(dev));
	if (rc != 0) {
		log_warn("mount %s: not found in /proc/self/mountinfo (%s): readahead stays at the "
			 "kernel's default", mountpoint, strerror(-rc));
		return;
	}
	snprintf(sysfs, sizeof(sysfs), "/sys/class/bdi/%s/read_ahead_kb", dev);
	FILE *f = fopen(sysfs, "we");
	bool ok = f && fprintf(f, "%u\n", OPS_READAHEAD >> 10) > 0;
	int err = errno;
	if (f && fclose(f) != 0 && ok) {
		ok = false;
		err = errno;
	}
	if (ok)
		log_info("mount %s: readahead %u KiB (%s)", mountpoint, OPS_READAHEAD >> 10, sysfs);
	else
		log_info("mount %s: readahead stays at the kernel's default: %s: %s", mountpoint,
			 sysfs, strerror(err));
}

/* ---- names ---- */

static void ops_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct cat_inode in;
	ops_reply_entry(req, ns_lookup(ops_ns(req), parent, name, &in), name, &in);
}

static void ops_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	ns_forget(ops_ns(req), ino, nlookup);
	fuse_reply_none(req);
}

static void ops_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		ns_forget(ops_ns(req), forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void ops_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct cat_inode in;
	ops_reply_attr(req, ns_getattr(ops_ns(req), ino, &in), &in);
}

static int64_t ops_ts_ns(const struct timespec *ts)
{
	struct timespec now;
	if (ts->tv_nsec == UTIME_NOW) {
		clock_gettime(CLOCK_REALTIME, &now);
		ts = &now;
	}
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

/* FUSE's to_set and attr as the namespace's change. */
static void ops_decode_setattr(const struct stat *attr, int to_set, struct ns_setattr *s)
{
	struct timespec now = { 0, UTIME_NOW };
	memset(s, 0, sizeof(*s));
	if (to_set & FUSE_SET_ATTR_MODE) {
		s->what |= CAT_SET_MODE;
		s->val.mode = attr->st_mode;
	}
	if (to_set & FUSE_SET_ATTR_UID) {
		s->what |= CAT_SET_UID;
		s->val.uid = attr->st_uid;
	}
	if (to_set & FUSE_SET_ATTR_GID) {
		s->what |= CAT_SET_GID;
		s->val.gid = attr->st_gid;
	}
	if (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_ATIME_NOW)) {
		s->what |= CAT_SET_ATIME;
		s->val.atime_ns = ops_ts_ns(to_set & FUSE_SET_ATTR_ATIME_NOW ? &now : &attr->st_atim);
	}
	if (to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW)) {
		s->what |= CAT_SET_MTIME;
		s->val.mtime_ns = ops_ts_ns(to_set & FUSE_SET_ATTR_MTIME_NOW ? &now : &attr->st_mtim);
	}
	s->size_set = (to_set & FUSE_SET_ATTR_SIZE) != 0;
	s->size = (uint64_t)attr->st_size;
	s->kill_setid = (to_set & (FUSE_SET_ATTR_KILL_SUID | FUSE_SET_ATTR_KILL_SGID)) != 0;
}

static void ops_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
			struct fuse_file_info *fi)
{
	if (ops_fenced(req))
		return;
	struct ns_setattr s;
	struct cat_inode out;
	struct ns_cred c = ops_cred(req);
	ops_decode_setattr(attr, to_set, &s);
	int rc = ns_setattr(ops_ns(req), &c, ino, &s, fi ? ops_file(fi) : NULL, &out);
	ops_reply_attr(req, rc, &out);
}

static void ops_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char buf[PATH_MAX + 1];
	int rc = ns_readlink(ops_ns(req), ino, buf, sizeof(buf));
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_readlink(req, buf);
}

static void ops_make(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev,
		     const char *target)
{
	if (ops_fenced(req))
		return;
	struct cat_inode in;
	struct ns_cred c = ops_cred(req);
	ops_reply_entry(req, ns_make(ops_ns(req), &c, parent, name, mode, rdev, target, &in), name, &in);
}

static void ops_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	ops_make(req, parent, name, mode, rdev, NULL);
}

static void ops_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	ops_make(req, parent, name, S_IFDIR | (mode & 07777), 0, NULL);
}

static void ops_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	ops_make(req, parent, name, S_IFLNK | 0777, 0, link);
}

static void ops_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	if (ops_fenced(req))
		return;
	struct cat_inode in;
	struct ns_cred c = ops_cred(req);
	ops_reply_entry(req, ns_link(ops_ns(req), &c, ino, newparent, newname, &in), newname, &in);
}

static void ops_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	if (ops_fenced(req))
		return;
	struct ns_cred c = ops_cred(req);
	fuse_reply_err(req, -ns_remove(ops_ns(req), &c, parent, name, false));
}

static void ops_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	if (ops_fenced(req))
		return;
	struct ns_cred c = ops_cred(req);
	fuse_reply_err(req, -ns_remove(ops_ns(req), &c, parent, name, true));
}

static void ops_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		       const char *newname, unsigned int flags)
{
	if (ops_fenced(req))
		return;
	if (strlen(newname) > CAT_NAME_MAX) {
		fuse_reply_err(req, ENAMETOOLONG);
		return;
	}
	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	struct ns_cred c = ops_cred(req);
	unsigned cflags = (flags & RENAME_NOREPLACE ? CAT_RENAME_NOREPLACE : 0) |
			  (flags & RENAME_EXCHANGE ? CAT_RENAME_EXCHANGE : 0);
	fuse_reply_err(req, -ns_rename(ops_ns(req), &c, parent, name, newparent, newname, cflags));
}

/* ---- directories ---- */

struct ops_dirbuf {
	fuse_req_t req;
	uint64_t dir; /* the directory listed */
	char *buf;
	size_t size, used;
	int plus;
};

static int ops_dirent_add(void *arg, const char *name, const struct cat_inode *attr,
			  uint64_t next_cookie)
{
	struct ops_dirbuf *d = arg;
	size_t need;
	if (d->plus) {
		struct fuse_entry_param e;
		int dot = strcmp(name, ".") == 0 || strcmp(name, "..") == 0;
		ops_entry(d->req, name, attr, &e);
		if (dot) /* no entry: the kernel looks these up itself */
			e.ino = 0, e.attr_timeout = e.entry_timeout = 0;
		need = fuse_add_direntry_plus(d->req, d->buf + d->used, d->size - d->used, name, &e,
					      (off_t)next_cookie);
		if (need > d->size - d->used)
			return 1;
		if (!dot)
			ns_readdirplus_add(ops_ns(d->req), d->dir, name, attr->ino);
	} else {
		struct stat st;
		ops_to_stat(attr, &st);
		need = fuse_add_direntry(d->req, d->buf + d->used, d->size - d->used, name, &st,
					 (off_t)next_cookie);
		if (need > d->size - d->used)
			return 1;
	}
	d->used += need;
	return 0;
}

static void ops_readdir_common(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, int plus)
{
	struct ops_dirbuf d = { .req = req, .dir = ino, .size = size, .plus = plus };
	d.buf = malloc(size);
	if (!d.buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	int rc = ns_readdir(ops_ns(req), ino, (uint64_t)off, ops_dirent_add, &d);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_buf(req, d.buf, d.used);
	free(d.buf);
}

static void ops_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			struct fuse_file_info *fi)
{
	ops_readdir_common(req, ino, size, off, 0);
}

static void ops_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			    struct fuse_file_info *fi)
{
	ops_readdir_common(req, ino, size, off, 1);
}

static void ops_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	fuse_reply_err(req, -ns_sync(ops_ns(req)));
}

/* ---- files ---- */

/* Write-only handles bypass the page cache: writes arrive as they were
 * issued (up to max_write), not split at every partly covered page, and are
 * not copied into pages nobody reads. Read-only handles of big files bypass
 * it too, once the kernel allows MAP_SHARED mmaps of such handles
 * (fuseinit.h): a read's bytes then go from the chunk cache straight into the
 * reader's buffer, not first into fresh FUSE page-cache pages (mmaps still
 * use the page cache). Read-write handles keep the page cache (shared
 * writable mmaps). Pages are dropped at each open (no keep_cache), so a
 * reader never sees bytes older than a write. */
static void ops_set_open_flags(fuse_req_t req, struct fuse_file_info *fi, struct ns_file *f,
			       bool big)
{
	struct ops_context *ctx = ops_ctx(req);
	int acc = fi->flags & O_ACCMODE;
	fi->direct_io = acc == O_WRONLY ||
			(acc == O_RDONLY && big && !ctx->read_cache && fuseinit_granted(ctx->fuse_init));
	fi->keep_cache = 0;
	fi->fh = (uint64_t)(uintptr_t)f;
}

static void ops_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if ((fi->flags & O_ACCMODE) != O_RDONLY && ops_fenced(req))
		return;
	struct cat_inode in;
	struct ns_file *f;
	struct ns_cred c = ops_cred(req);
	int rc = ns_open(ops_ns(req), &c, ino, fi->flags, &f, &in);
	if (rc != 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	ops_set_open_flags(req, fi, f, in.size >= OPS_DIRECT_READ_MIN);
	fuse_reply_open(req, fi);
}

static void ops_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		       struct fuse_file_info *fi)
{
	if (ops_fenced(req))
		return;
	struct cat_inode in;
	struct ns_file *f;
	struct ns_cred c = ops_cred(req);
	/* without O_EXCL, a name another node made meanwhile is opened (ns.h) */
	int rc = ns_create(ops_ns(req), &c, parent, name, mode, fi->flags, &f, &in);
	if (rc != 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	fi->flags &= ~O_TRUNC; /* it is new, or was emptied by ns_create */
	ops_set_open_flags(req, fi, f, false);
	struct fuse_entry_param e;
	ops_entry(req, name, &in, &e);
	fuse_reply_create(req, &e, fi);
}

static void ops_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct ns *ns = ops_ns(req); /* the reply frees req */
	struct ns_read_out o;
	int rc = ns_read(ns, ops_file(fi), size, (uint64_t)off, &o);
	if (rc != 0)
		fuse_reply_err(req, -rc);
	else if (o.buf || o.got == 0)
		fuse_reply_buf(req, o.buf, o.got);
	else
		fuse_reply_iov(req, o.m.iov, o.m.n);
	ns_read_done(ns, &o); /* after the reply, written from the pinned chunks */
}

static void ops_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		      struct fuse_file_info *fi)
{
	if (ops_fenced(req))
		return;
	struct ns_cred c = ops_cred(req);
	int rc = ns_write(ops_ns(req), &c, ops_file(fi), buf, size, (uint64_t)off,
			  (fi->flags & O_APPEND) != 0, fi->writepage);
	if (rc != 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_write(req, size);
}

static void ops_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fuse_reply_err(req, -ns_flush(ops_ns(req), ops_file(fi)));
}

static void ops_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ns *ns = ops_ns(req); /* the reply frees req */
	struct ns_file *f = ops_file(fi);
	int rc = ns_release(ns, f);
	fuse_reply_err(req, -rc);
	ns_release_done(ns, f, rc); /* a commit it triggers must not delay the close */
}

static void ops_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	fuse_reply_err(req, -ns_fsync(ops_ns(req), ops_file(fi)));
}

static void ops_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			  struct fuse_file_info *fi)
{
	if (ops_fenced(req))
		return;
	/* A content-addressed store cannot reserve blocks; what fallocate shows
	 * (the size) is honoured, punching holes is not offered. */
	int rc = 0;
	if (mode & ~FALLOC_FL_KEEP_SIZE)
		rc = -EOPNOTSUPP;
	else if (!(mode & FALLOC_FL_KEEP_SIZE))
		rc = ns_extend(ops_ns(req), ops_file(fi), (uint64_t)off, (uint64_t)len);
	fuse_reply_err(req, -rc);
}

/* ---- filesystem ---- */

static void ops_statfs(fuse_req_t req, fuse_ino_t ino)
{
	/* the cache's disk: saves land there (BACKING may be a URL, or hung) */
	struct statvfs sv;
	uint64_t inodes;
	if (statvfs(ops_ctx(req)->cache, &sv) != 0) {
		fuse_reply_err(req, errno);
		return;
	}
	if (ns_inode_count(ops_ns(req), &inodes) == 0)
		sv.f_files = inodes + sv.f_ffree;
	sv.f_namemax = CAT_NAME_MAX;
	fuse_reply_statfs(req, &sv);
}

static void ops_reply_xattr(fuse_req_t req, const char *val, size_t len, size_t size)
{
	if (size == 0)
		fuse_reply_xattr(req, len);
	else if (size < len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, val, len);
}

static void ops_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct ops_context *ctx = ops_ctx(req);
	const char *val = NULL;
	char desc[1536]; /* the generation line, a held reason percent-encoded */
	if (ino == CAT_ROOT_INO && strcmp(name, OPS_XATTR_CACHE) == 0)
		val = ctx->cache;
	else if (ino == CAT_ROOT_INO && strcmp(name, OPS_XATTR_BACKING) == 0)
		val = ctx->backing;
	else if (strcmp(name, OPS_XATTR_GEN) == 0) {
		int rc = ns_gen_describe(ctx->ns, ino, desc, sizeof(desc));
		if (rc != 0) {
			fuse_reply_err(req, -rc);
			return;
		}
		val = desc;
	}
	if (!val)
		fuse_reply_err(req, ENODATA);
	else
		ops_reply_xattr(req, val, strlen(val), size);
}

static void ops_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	static const char names[] = OPS_XATTR_CACHE "\0" OPS_XATTR_BACKING;
	static const char gen_names[] = OPS_XATTR_GEN;
	if (ino == CAT_ROOT_INO)
		ops_reply_xattr(req, names, sizeof(names), size);
	else
		ops_reply_xattr(req, gen_names,
				ns_in_generation(ops_ns(req), ino) ? sizeof(gen_names) : 0, size);
}

/* Control of generations for scripts: on any inode of a generation,
 * user.ckptfs.commit (any value) commits it, user.ckptfs.pin = 1 / 0 pins. */
static void ops_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			 size_t size, int flags)
{
	if (ops_fenced(req))
		return;
	struct ns_cred c = ops_cred(req);
	int rc;
	if (strcmp(name, OPS_XATTR_COMMIT) == 0)
		rc = ns_gen_commit(ops_ns(req), &c, ino);
	else if (strcmp(name, OPS_XATTR_PIN) == 0)
		rc = ns_gen_pin(ops_ns(req), &c, ino, size > 0 && value[0] == '1');
	else
		rc = -ENOTSUP;
	fuse_reply_err(req, -rc);
}

static void ops_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	fuse_reply_err(req, ENOTSUP);
}

const struct fuse_lowlevel_ops ckptfs_ops = {
	.init = ops_init,
	.lookup = ops_lookup,
	.forget = ops_forget,
	.forget_multi = ops_forget_multi,
	.getattr = ops_getattr,
	.setattr = ops_setattr,
	.readlink = ops_readlink,
	.mknod = ops_mknod,
	.mkdir = ops_mkdir,
	.unlink = ops_unlink,
	.rmdir = ops_rmdir,
	.symlink = ops_symlink,
	.rename = ops_rename,
	.link = ops_link,
	.open = ops_open,
	.read = ops_read,
	.write = ops_write,
	.flush = ops_flush,
	.release = ops_release,
	.fsync = ops_fsync,
	.readdir = ops_readdir,
	.readdirplus = ops_readdirplus,
	.fsyncdir = ops_fsyncdir,
	.statfs = ops_statfs,
	.setxattr = ops_setxattr,
	.getxattr = ops_getxattr,
	.listxattr = ops_listxattr,
	.removexattr = ops_removexattr,
	.create = ops_create,
	.fallocate = ops_fallocate,
};
