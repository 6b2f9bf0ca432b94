/* ops — the FUSE low-level operations. Each one decodes the request, calls the
 * catalog, node, writer or reader module, and replies exactly once, with a
 * negative errno turned into fuse_reply_err.
 *
 * Locking order: node->rw, then the catalog's mutex (inside cat_*). The node
 * table lock is never held across either.
 *
 * Commit points of file data: flush (every close), fsync (durable), and the
 * release of the last handle. Locks (flock, fcntl) are the kernel's: ckptfs
 * does not implement getlk/setlk, so they work across the processes of this
 * node, which is what trainers use. */
#define _GNU_SOURCE
#include "ops.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "ckptfs.h"
#include "log.h"
#include "node.h"
#include "reader.h"
#include "writer.h"

#define OPS_TIMEOUT 1.0
#define OPS_MAX_WRITE (1u << 20)
#define OPS_XATTR_CACHE "user.ckptfs.cache"
#define OPS_XATTR_BACKING "user.ckptfs.backing"

static struct ckptfs *ops_fs(fuse_req_t req)
{
	return fuse_req_userdata(req);
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

/* The inode's attributes as readers see them: a writer's size and mtime win
 * over the catalog's last committed ones. */
static int ops_attr(struct ckptfs *fs, uint64_t ino, struct cat_inode *out)
{
	int rc = cat_getattr(fs->cat, ino, out);
	if (rc != 0)
		return rc;
	struct node *n = node_peek(fs->nodes, ino);
	if (!n)
		return 0;
	pthread_rwlock_rdlock(&n->rw);
	if (n->writer && S_ISREG(out->mode)) {
		out->size = writer_size(n->writer);
		if (writer_dirty(n->writer))
			out->mtime_ns = out->ctime_ns = writer_mtime_ns(n->writer);
	}
	pthread_rwlock_unlock(&n->rw);
	node_put(fs->nodes, n);
	return 0;
}

static void ops_reply_entry(fuse_req_t req, const struct cat_inode *in)
{
	struct fuse_entry_param e;
	memset(&e, 0, sizeof(e));
	e.ino = in->ino;
	e.attr_timeout = OPS_TIMEOUT;
	e.entry_timeout = OPS_TIMEOUT;
	ops_to_stat(in, &e.attr);
	node_lookup_add(ops_fs(req)->nodes, in->ino);
	fuse_reply_entry(req, &e);
}

static void ops_reply_attr(fuse_req_t req, const struct cat_inode *in)
{
	struct stat st;
	ops_to_stat(in, &st);
	fuse_reply_attr(req, &st, OPS_TIMEOUT);
}

static void ops_name_check_reply(fuse_req_t req, const char *name, int *bad)
{
	*bad = strlen(name) > CAT_NAME_MAX;
	if (*bad)
		fuse_reply_err(req, ENAMETOOLONG);
}

/* ---- lifecycle ---- */

static void ops_init(void *userdata, struct fuse_conn_info *conn)
{
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	/* write order matters to the streaming chunker: no kernel write-back cache */
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	conn->max_write = OPS_MAX_WRITE;
	conn->max_readahead = 1u << 20;
	conn->time_gran = 1;
	log_info("mounted: max_write %u, readahead %u", conn->max_write, conn->max_readahead);
}

/* ---- namespace ---- */

static void ops_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct cat_inode in;
	int rc = cat_lookup(ops_fs(req)->cat, parent, name, &in);
	if (rc == 0)
		rc = ops_attr(ops_fs(req), in.ino, &in);
	if (rc != 0)
		fuse_reply_err(req, -rc);
	else
		ops_reply_entry(req, &in);
}

static void ops_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	node_forget(ops_fs(req)->nodes, ino, nlookup);
	fuse_reply_none(req);
}

static void ops_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		node_forget(ops_fs(req)->nodes, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void ops_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct cat_inode in;
	int rc = ops_attr(ops_fs(req), ino, &in);
	if (rc != 0)
		fuse_reply_err(req, -rc);
	else
		ops_reply_attr(req, &in);
}

/* Size changes go through the writer when the file is being written, else
 * straight to the catalog. */
static int ops_truncate(struct ckptfs *fs, uint64_t ino, uint64_t size)
{
	struct node *n = node_get(fs->nodes, ino);
	if (!n)
		return -ENOMEM;
	pthread_rwlock_wrlock(&n->rw);
	int rc = n->writer ? writer_truncate(n->writer, size) : cat_file_truncate(fs->cat, ino, size);
	pthread_rwlock_unlock(&n->rw);
	node_put(fs->nodes, n);
	return rc;
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

static void ops_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
			struct fuse_file_info *fi)
{
	struct ckptfs *fs = ops_fs(req);
	struct cat_inode in, out;
	int rc = cat_getattr(fs->cat, ino, &in);
	if (rc == 0 && (to_set & FUSE_SET_ATTR_SIZE)) {
		if (S_ISDIR(in.mode))
			rc = -EISDIR;
		else if (!S_ISREG(in.mode))
			rc = -EINVAL;
		else
			rc = ops_truncate(fs, ino, (uint64_t)attr->st_size);
	}
	unsigned what = 0;
	memset(&in, 0, sizeof(in));
	if (to_set & FUSE_SET_ATTR_MODE) {
		what |= CAT_SET_MODE;
		in.mode = attr->st_mode;
	}
	if (to_set & FUSE_SET_ATTR_UID) {
		what |= CAT_SET_UID;
		in.uid = attr->st_uid;
	}
	if (to_set & FUSE_SET_ATTR_GID) {
		what |= CAT_SET_GID;
		in.gid = attr->st_gid;
	}
	if (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_ATIME_NOW)) {
		struct timespec now = { 0, UTIME_NOW };
		what |= CAT_SET_ATIME;
		in.atime_ns = ops_ts_ns(to_set & FUSE_SET_ATTR_ATIME_NOW ? &now : &attr->st_atim);
	}
	if (to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW)) {
		struct timespec now = { 0, UTIME_NOW };
		what |= CAT_SET_MTIME;
		in.mtime_ns = ops_ts_ns(to_set & FUSE_SET_ATTR_MTIME_NOW ? &now : &attr->st_mtim);
	}
	if (rc == 0 && what)
		rc = cat_setattr(fs->cat, ino, what, &in, &out);
	if (rc == 0 && (what & CAT_SET_MTIME)) {
		/* an explicit mtime outlives the writer's own clock */
		struct node *n = node_peek(fs->nodes, ino);
		if (n) {
			pthread_rwlock_wrlock(&n->rw);
			if (n->writer)
				writer_set_mtime_ns(n->writer, in.mtime_ns);
			pthread_rwlock_unlock(&n->rw);
			node_put(fs->nodes, n);
		}
	}
	if (rc == 0)
		rc = ops_attr(fs, ino, &out);
	if (rc != 0)
		fuse_reply_err(req, -rc);
	else
		ops_reply_attr(req, &out);
}

static void ops_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char buf[PATH_MAX + 1];
	int rc = cat_readlink(ops_fs(req)->cat, ino, buf, sizeof(buf));
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_readlink(req, buf);
}

/* Creates an entry with the caller's owner; a set-group-ID directory passes
 * its group (and, to subdirectories, the bit) on, as in ext4. */
static int ops_make(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		    dev_t rdev, const char *target, struct cat_inode *out)
{
	struct ckptfs *fs = ops_fs(req);
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	if (strlen(name) > CAT_NAME_MAX)
		return -ENAMETOOLONG;
	uint32_t gid = ctx->gid;
	struct cat_inode dir;
	int rc = cat_getattr(fs->cat, parent, &dir);
	if (rc != 0)
		return rc;
	if (dir.mode & S_ISGID) {
		gid = dir.gid;
		if (S_ISDIR(mode))
			mode |= S_ISGID;
	}
	return cat_create(fs->cat, parent, name, mode, ctx->uid, gid, rdev, target, out);
}

static void ops_reply_made(fuse_req_t req, int rc, const struct cat_inode *in)
{
	if (rc != 0)
		fuse_reply_err(req, -rc);
	else
		ops_reply_entry(req, in);
}

static void ops_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	struct cat_inode in;
	ops_reply_made(req, ops_make(req, parent, name, mode, rdev, NULL, &in), &in);
}

static void ops_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct cat_inode in;
	ops_reply_made(req, ops_make(req, parent, name, S_IFDIR | (mode & 07777), 0, NULL, &in), &in);
}

static void ops_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	struct cat_inode in;
	int rc = strlen(link) > PATH_MAX ? -ENAMETOOLONG
					 : ops_make(req, parent, name, S_IFLNK | 0777, 0, link, &in);
	ops_reply_made(req, rc, &in);
}

static void ops_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct cat_inode in;
	int bad;
	ops_name_check_reply(req, newname, &bad);
	if (bad)
		return;
	int rc = cat_link(ops_fs(req)->cat, ino, newparent, newname, &in);
	if (rc == 0)
		rc = ops_attr(ops_fs(req), ino, &in);
	ops_reply_made(req, rc, &in);
}

static void ops_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	uint64_t ino = 0;
	int rc = cat_unlink(ops_fs(req)->cat, parent, name, &ino);
	if (rc == 0)
		node_unlinked(ops_fs(req)->nodes, ino);
	fuse_reply_err(req, -rc);
}

static void ops_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	uint64_t ino = 0;
	int rc = cat_rmdir(ops_fs(req)->cat, parent, name, &ino);
	if (rc == 0)
		node_unlinked(ops_fs(req)->nodes, ino);
	fuse_reply_err(req, -rc);
}

static void ops_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		       const char *newname, unsigned int flags)
{
	int bad;
	ops_name_check_reply(req, newname, &bad);
	if (bad)
		return;
	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	unsigned cflags = (flags & RENAME_NOREPLACE ? CAT_RENAME_NOREPLACE : 0) |
			  (flags & RENAME_EXCHANGE ? CAT_RENAME_EXCHANGE : 0);
	uint64_t replaced = 0;
	int rc = cat_rename(ops_fs(req)->cat, parent, name, newparent, newname, cflags, &replaced);
	if (rc == 0 && replaced)
		node_unlinked(ops_fs(req)->nodes, replaced);
	fuse_reply_err(req, -rc);
}

/* ---- directories ---- */

struct ops_dirbuf {
	fuse_req_t req;
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
		memset(&e, 0, sizeof(e));
		ops_to_stat(attr, &e.attr);
		int dot = strcmp(name, ".") == 0 || strcmp(name, "..") == 0;
		if (!dot) {
			e.ino = attr->ino;
			e.attr_timeout = e.entry_timeout = OPS_TIMEOUT;
		}
		need = fuse_add_direntry_plus(d->req, d->buf + d->used, d->size - d->used, name, &e,
					      (off_t)next_cookie);
		if (need > d->size - d->used)
			return 1;
		if (!dot)
			node_lookup_add(ops_fs(d->req)->nodes, attr->ino);
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
	struct ops_dirbuf d = { .req = req, .size = size, .plus = plus };
	d.buf = malloc(size);
	if (!d.buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	int rc = cat_readdir(ops_fs(req)->cat, ino, (uint64_t)off, ops_dirent_add, &d);
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
	fuse_reply_err(req, -cat_sync(ops_fs(req)->cat));
}

/* ---- files ---- */

/* The node's writer, created on first need (a write or a size change). */
static int ops_writer(struct ckptfs *fs, struct node *n, struct writer **out)
{
	if (!n->writer) {
		struct cat_inode in;
		int rc = cat_getattr(fs->cat, n->ino, &in);
		if (rc == 0)
			rc = writer_new(fs, n->ino, in.size, &n->writer);
		if (rc != 0)
			return rc;
	}
	*out = n->writer;
	return 0;
}

static int ops_open_node(struct ckptfs *fs, uint64_t ino, struct fuse_file_info *fi)
{
	struct node *n = node_open(fs->nodes, ino);
	if (!n)
		return -ENOMEM;
	int rc = 0;
	if ((fi->flags & O_TRUNC) && (fi->flags & O_ACCMODE) != O_RDONLY) {
		pthread_rwlock_wrlock(&n->rw);
		rc = n->writer ? writer_truncate(n->writer, 0) : cat_file_truncate(fs->cat, ino, 0);
		pthread_rwlock_unlock(&n->rw);
	}
	if (rc != 0) {
		node_close(fs->nodes, n);
		node_put(fs->nodes, n);
		return rc;
	}
	pthread_rwlock_rdlock(&n->rw);
	/* pages cached from an earlier open stay valid unless someone writes */
	fi->keep_cache = !n->writer;
	pthread_rwlock_unlock(&n->rw);
	fi->fh = (uint64_t)(uintptr_t)n;
	return 0;
}

static void ops_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct cat_inode in;
	int rc = cat_getattr(ops_fs(req)->cat, ino, &in);
	if (rc == 0 && S_ISDIR(in.mode))
		rc = -EISDIR;
	if (rc == 0)
		rc = ops_open_node(ops_fs(req), ino, fi);
	if (rc != 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_open(req, fi);
}

static void ops_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		       struct fuse_file_info *fi)
{
	struct cat_inode in;
	int rc = ops_make(req, parent, name, S_IFREG | (mode & 07777), 0, NULL, &in);
	if (rc == 0) {
		fi->flags &= ~O_TRUNC; /* it is new */
		rc = ops_open_node(ops_fs(req), in.ino, fi);
	}
	if (rc != 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	struct fuse_entry_param e;
	memset(&e, 0, sizeof(e));
	e.ino = in.ino;
	e.attr_timeout = e.entry_timeout = OPS_TIMEOUT;
	ops_to_stat(&in, &e.attr);
	node_lookup_add(ops_fs(req)->nodes, in.ino);
	fuse_reply_create(req, &e, fi);
}

static struct node *ops_handle(struct fuse_file_info *fi)
{
	return (struct node *)(uintptr_t)fi->fh;
}

static void ops_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct ckptfs *fs = ops_fs(req);
	struct node *n = ops_handle(fi);
	char *buf = malloc(size ? size : 1);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	size_t got = 0;
	int rc = 0;
	pthread_rwlock_rdlock(&n->rw);
	if (n->writer) {
		rc = writer_read(n->writer, buf, size, (uint64_t)off, &got);
	} else {
		struct cat_inode in;
		rc = cat_getattr(fs->cat, ino, &in);
		if (rc == 0 && (uint64_t)off < in.size) {
			got = in.size - (uint64_t)off < size ? (size_t)(in.size - (uint64_t)off) : size;
			rc = reader_read(fs, ino, READER_COMMITTED, (uint64_t)off, got, buf);
		}
	}
	pthread_rwlock_unlock(&n->rw);
	if (rc != 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_buf(req, buf, got);
	free(buf);
}

static void ops_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		      struct fuse_file_info *fi)
{
	struct ckptfs *fs = ops_fs(req);
	struct node *n = ops_handle(fi);
	pthread_rwlock_wrlock(&n->rw);
	struct writer *w;
	int rc = ops_writer(fs, n, &w);
	if (rc == 0) {
		uint64_t at = (uint64_t)off;
		if (fi->flags & O_APPEND)
			at = writer_size(w);
		rc = writer_write(w, buf, size, at);
	}
	pthread_rwlock_unlock(&n->rw);
	if (rc != 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_write(req, size);
}

/* Commits the file's writer, if any; frees it when no handle is left. */
static int ops_commit(struct ckptfs *fs, struct node *n, bool durable, bool last)
{
	pthread_rwlock_wrlock(&n->rw);
	int rc = 0;
	if (n->writer) {
		rc = writer_commit(n->writer, durable);
		if (last) {
			writer_free(n->writer);
			n->writer = NULL;
		}
	} else if (durable) {
		rc = store_syncfs(fs->store);
		if (rc == 0)
			rc = cat_sync(fs->cat);
	}
	pthread_rwlock_unlock(&n->rw);
	return rc;
}

static void ops_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fuse_reply_err(req, -ops_commit(ops_fs(req), ops_handle(fi), false, false));
}

static void ops_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ckptfs *fs = ops_fs(req);
	struct node *n = ops_handle(fi);
	int rc = ops_commit(fs, n, false, node_close(fs->nodes, n) == 0);
	if (rc != 0)
		log_error("inode %llu: commit at last close failed: %s", (unsigned long long)ino,
			  strerror(-rc));
	node_put(fs->nodes, n);
	fuse_reply_err(req, -rc);
}

static void ops_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	fuse_reply_err(req, -ops_commit(ops_fs(req), ops_handle(fi), true, false));
}

static void ops_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			  struct fuse_file_info *fi)
{
	/* A content-addressed store cannot reserve blocks; what fallocate shows
	 * (the size) is honoured, punching holes is not offered. */
	int rc = 0;
	if (mode & ~FALLOC_FL_KEEP_SIZE) {
		rc = -EOPNOTSUPP;
	} else if (!(mode & FALLOC_FL_KEEP_SIZE)) {
		struct ckptfs *fs = ops_fs(req);
		struct node *n = ops_handle(fi);
		pthread_rwlock_wrlock(&n->rw);
		struct writer *w;
		rc = ops_writer(fs, n, &w);
		if (rc == 0 && (uint64_t)(off + len) > writer_size(w))
			rc = writer_truncate(w, (uint64_t)(off + len));
		pthread_rwlock_unlock(&n->rw);
	}
	fuse_reply_err(req, -rc);
}

/* ---- filesystem ---- */

static void ops_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct ckptfs *fs = ops_fs(req);
	struct statvfs sv;
	if (statvfs(fs->opt.backing, &sv) != 0) {
		fuse_reply_err(req, errno);
		return;
	}
	struct cat_stats cs;
	if (cat_stats(fs->cat, &cs) == 0) {
		sv.f_files = cs.inodes + sv.f_ffree;
	}
	sv.f_namemax = CAT_NAME_MAX;
	fuse_reply_statfs(req, &sv);
}

static void ops_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct ckptfs *fs = ops_fs(req);
	const char *val = NULL;
	if (ino == CAT_ROOT_INO && strcmp(name, OPS_XATTR_CACHE) == 0)
		val = fs->opt.cache;
	else if (ino == CAT_ROOT_INO && strcmp(name, OPS_XATTR_BACKING) == 0)
		val = fs->opt.backing;
	if (!val) {
		fuse_reply_err(req, ENODATA);
		return;
	}
	size_t len = strlen(val);
	if (size == 0)
		fuse_reply_xattr(req, len);
	else if (size < len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, val, len);
}

static void ops_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	static const char names[] = OPS_XATTR_CACHE "\0" OPS_XATTR_BACKING;
	size_t len = ino == CAT_ROOT_INO ? sizeof(names) : 0;
	if (size == 0)
		fuse_reply_xattr(req, len);
	else if (size < len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, names, len);
}

static void ops_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			 size_t size, int flags)
{
	fuse_reply_err(req, ENOTSUP);
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
