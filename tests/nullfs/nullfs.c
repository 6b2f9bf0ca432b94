/*
 * nullfs — a FUSE filesystem that stores nothing, for the benchmark's floor.
 *
 *   nullfs [-f] [-o FUSEOPTS] MOUNTPOINT
 *
 * Names, modes and sizes live in memory; written bytes are dropped and reads
 * return zeros. What a workload costs on nullfs is what the kernel's FUSE
 * path costs on this machine — request round trips, copies through
 * /dev/fuse, the FUSE file's page cache — with no daemon work behind it.
 * scripts/bench.sh runs the same workloads on it as on ckptfs and the plain
 * directory, so the bench can say how close a target is to what any FUSE
 * filesystem can reach here (docs/BENCH.md, "The FUSE floor").
 *
 * It talks to the kernel the way ckptfs does (fs/ops.c), so that the floor
 * is ckptfs's: the low-level API, up to 16 worker threads, max_write and
 * max_readahead of 1 MiB, no kernel write-back cache, atomic O_TRUNC,
 * attribute and entry timeouts of 1 s, ENOENT (uncached) for a missing name,
 * write-only opens with direct_io, read opens through the page cache. The
 * bench mounts it with default_permissions, as ckptfs always is.
 *
 * Invariants:
 *   1. A node lives while it has a name or the kernel holds a lookup on it;
 *      inode numbers are never reused within a mount.
 *   2. Every request gets exactly one reply (or none for forget).
 *   3. One mutex guards the node table; no reply is sent while it is held
 *      except by the read path, which holds nothing.
 */
#define FUSE_USE_VERSION 314
#define _GNU_SOURCE
#include <fuse_lowlevel.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NULL_TIMEOUT 1.0
#define NULL_MAX_IO (1u << 20)
#define NULL_NAME_MAX 255

struct null_node {
	fuse_ino_t ino, parent;
	char *name;        /* NULL once unlinked */
	mode_t mode;
	uid_t uid;
	gid_t gid;
	uint64_t size, nlookup;
	struct timespec mtime;
	struct null_node *next; /* hash chain by (parent, name) */
	bool live;
};

struct null_fs {
	pthread_mutex_t lock;
	struct null_node **byino; /* index: ino */
	size_t cap, next_ino;
	struct null_node **buckets;
	size_t nbuckets;
};

static const char null_zeros[NULL_MAX_IO];

static struct null_fs *null_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* ---- the node table (lock held) ---- */

static size_t null_bucket(const struct null_fs *nf, fuse_ino_t parent, const char *name)
{
	uint64_t h = 1469598103934665603ull ^ parent;
	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 1099511628211ull;
	return (size_t)(h & (nf->nbuckets - 1));
}

static struct null_node *null_find(struct null_fs *nf, fuse_ino_t parent, const char *name)
{
	for (struct null_node *n = nf->buckets[null_bucket(nf, parent, name)]; n; n = n->next)
		if (n->parent == parent && n->name && strcmp(n->name, name) == 0)
			return n;
	return NULL;
}

static struct null_node *null_get(struct null_fs *nf, fuse_ino_t ino)
{
	return ino < nf->next_ino && nf->byino[ino] && nf->byino[ino]->live ? nf->byino[ino] : NULL;
}

static void null_unhash(struct null_fs *nf, struct null_node *n)
{
	struct null_node **pp = &nf->buckets[null_bucket(nf, n->parent, n->name)];
	while (*pp && *pp != n)
		pp = &(*pp)->next;
	if (*pp)
		*pp = n->next;
	free(n->name);
	n->name = NULL;
	n->next = NULL;
}

/* Frees a node that has neither a name nor a kernel lookup (invariant 1). */
static void null_maybe_free(struct null_fs *nf, struct null_node *n)
{
	if (n->name || n->nlookup || n->ino == FUSE_ROOT_ID)
		return;
	nf->byino[n->ino] = NULL;
	free(n);
}

static int null_grow(struct null_fs *nf)
{
	if (nf->next_ino < nf->cap)
		return 0;
	size_t cap = nf->cap ? nf->cap * 2 : 1024;
	struct null_node **b = realloc(nf->byino, cap * sizeof(*b));
	if (!b)
		return -ENOMEM;
	memset(b + nf->cap, 0, (cap - nf->cap) * sizeof(*b));
	nf->byino = b;
	nf->cap = cap;
	return 0;
}

static struct null_node *null_new(struct null_fs *nf, fuse_ino_t parent, const char *name,
				  mode_t mode, const struct fuse_ctx *ctx, int *err)
{
	struct null_node *n = calloc(1, sizeof(*n));
	*err = n ? null_grow(nf) : -ENOMEM;
	if (*err == 0 && name && !(n->name = strdup(name)))
		*err = -ENOMEM;
	if (*err != 0) {
		if (n)
			free(n->name);
		free(n);
		return NULL;
	}
	n->ino = nf->next_ino++;
	n->parent = parent;
	n->mode = mode;
	n->uid = ctx ? ctx->uid : 0;
	n->gid = ctx ? ctx->gid : 0;
	n->live = true;
	clock_gettime(CLOCK_REALTIME, &n->mtime);
	nf->byino[n->ino] = n;
	if (name) {
		size_t b = null_bucket(nf, parent, name);
		n->next = nf->buckets[b];
		nf->buckets[b] = n;
	}
	return n;
}

static void null_stat(const struct null_node *n, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = n->ino;
	st->st_mode = n->mode;
	st->st_nlink = S_ISDIR(n->mode) ? 2 : 1;
	st->st_uid = n->uid;
	st->st_gid = n->gid;
	st->st_size = (off_t)n->size;
	st->st_blksize = NULL_MAX_IO;
	st->st_blocks = (blkcnt_t)((n->size + 511) / 512);
	st->st_mtim = st->st_ctim = st->st_atim = n->mtime;
}

/* Fills e for n and counts the kernel's new lookup on it (lock held). */
static void null_entry(struct null_node *n, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = n->ino;
	e->attr_timeout = e->entry_timeout = NULL_TIMEOUT;
	null_stat(n, &e->attr);
	n->nlookup++;
}

static bool null_has_children(struct null_fs *nf, fuse_ino_t dir)
{
	for (size_t i = 0; i < nf->next_ino; i++)
		if (nf->byino[i] && nf->byino[i]->name && nf->byino[i]->parent == dir)
			return true;
	return false;
}

/* ---- operations ---- */

static void null_init(void *userdata, struct fuse_conn_info *conn)
{
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	conn->max_write = NULL_MAX_IO;
	conn->max_readahead = NULL_MAX_IO;
	conn->time_gran = 1;
}

static void null_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct null_fs *nf = null_of(req);
	struct fuse_entry_param e;
	pthread_mutex_lock(&nf->lock);
	struct null_node *n = null_find(nf, parent, name);
	if (n)
		null_entry(n, &e);
	pthread_mutex_unlock(&nf->lock);
	if (n)
		fuse_reply_entry(req, &e);
	else
		fuse_reply_err(req, ENOENT);
}

static void null_forget_one(struct null_fs *nf, fuse_ino_t ino, uint64_t nlookup)
{
	struct null_node *n = null_get(nf, ino);
	if (!n)
		return;
	n->nlookup = n->nlookup > nlookup ? n->nlookup - nlookup : 0;
	null_maybe_free(nf, n);
}

static void null_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct null_fs *nf = null_of(req);
	pthread_mutex_lock(&nf->lock);
	null_forget_one(nf, ino, nlookup);
	pthread_mutex_unlock(&nf->lock);
	fuse_reply_none(req);
}

static void null_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *f)
{
	struct null_fs *nf = null_of(req);
	pthread_mutex_lock(&nf->lock);
	for (size_t i = 0; i < count; i++)
		null_forget_one(nf, f[i].ino, f[i].nlookup);
	pthread_mutex_unlock(&nf->lock);
	fuse_reply_none(req);
}

/* The attributes of a node found (st), or ENOENT. */
static void null_reply_attr(fuse_req_t req, bool found, const struct stat *st)
{
	if (found)
		fuse_reply_attr(req, st, NULL_TIMEOUT);
	else
		fuse_reply_err(req, ENOENT);
}

static void null_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct null_fs *nf = null_of(req);
	struct stat st;
	pthread_mutex_lock(&nf->lock);
	struct null_node *n = null_get(nf, ino);
	if (n)
		null_stat(n, &st);
	pthread_mutex_unlock(&nf->lock);
	null_reply_attr(req, n != NULL, &st);
}

static void null_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
			 struct fuse_file_info *fi)
{
	struct null_fs *nf = null_of(req);
	struct stat st;
	pthread_mutex_lock(&nf->lock);
	struct null_node *n = null_get(nf, ino);
	if (n) {
		if (to_set & FUSE_SET_ATTR_MODE)
			n->mode = (n->mode & S_IFMT) | (attr->st_mode & 07777);
		if (to_set & FUSE_SET_ATTR_UID)
			n->uid = attr->st_uid;
		if (to_set & FUSE_SET_ATTR_GID)
			n->gid = attr->st_gid;
		if (to_set & FUSE_SET_ATTR_SIZE)
			n->size = (uint64_t)attr->st_size;
		if (to_set & FUSE_SET_ATTR_MTIME)
			n->mtime = attr->st_mtim;
		if (to_set & FUSE_SET_ATTR_MTIME_NOW)
			clock_gettime(CLOCK_REALTIME, &n->mtime);
		null_stat(n, &st);
	}
	pthread_mutex_unlock(&nf->lock);
	null_reply_attr(req, n != NULL, &st);
}

/* A new name under parent; *e is filled for the reply. 0 or -errno. */
static int null_make(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		     struct fuse_entry_param *e)
{
	struct null_fs *nf = null_of(req);
	if (strlen(name) > NULL_NAME_MAX)
		return -ENAMETOOLONG;
	int rc = 0;
	pthread_mutex_lock(&nf->lock);
	struct null_node *dir = null_get(nf, parent);
	if (!dir || !S_ISDIR(dir->mode))
		rc = -ENOENT;
	else if (null_find(nf, parent, name))
		rc = -EEXIST;
	struct null_node *n = NULL;
	if (rc == 0)
		n = null_new(nf, parent, name, mode, fuse_req_ctx(req), &rc);
	if (n)
		null_entry(n, e);
	pthread_mutex_unlock(&nf->lock);
	return rc;
}

static void null_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct fuse_entry_param e;
	int rc = null_make(req, parent, name, S_IFDIR | (mode & 07777), &e);
	if (rc == 0)
		fuse_reply_entry(req, &e);
	else
		fuse_reply_err(req, -rc);
}

static void null_remove(fuse_req_t req, fuse_ino_t parent, const char *name, bool dir)
{
	struct null_fs *nf = null_of(req);
	int rc = 0;
	pthread_mutex_lock(&nf->lock);
	struct null_node *n = null_find(nf, parent, name);
	if (!n)
		rc = -ENOENT;
	else if (dir && !S_ISDIR(n->mode))
		rc = -ENOTDIR;
	else if (!dir && S_ISDIR(n->mode))
		rc = -EISDIR;
	else if (dir && null_has_children(nf, n->ino))
		rc = -ENOTEMPTY;
	if (rc == 0) {
		null_unhash(nf, n);
		null_maybe_free(nf, n);
	}
	pthread_mutex_unlock(&nf->lock);
	fuse_reply_err(req, -rc);
}

static void null_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	null_remove(req, parent, name, false);
}

static void null_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	null_remove(req, parent, name, true);
}

/* ckptfs's rule (fs/ops.c ops_open_node): write-only handles skip the page cache. */
static void null_open_flags(struct fuse_file_info *fi)
{
	fi->direct_io = (fi->flags & O_ACCMODE) == O_WRONLY;
	fi->keep_cache = 0;
}

static void null_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
			struct fuse_file_info *fi)
{
	struct fuse_entry_param e;
	int rc = null_make(req, parent, name, S_IFREG | (mode & 07777), &e);
	if (rc != 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	null_open_flags(fi);
	fuse_reply_create(req, &e, fi);
}

static void null_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct null_fs *nf = null_of(req);
	int rc = 0;
	pthread_mutex_lock(&nf->lock);
	struct null_node *n = null_get(nf, ino);
	if (!n)
		rc = ENOENT;
	else if (S_ISDIR(n->mode))
		rc = EISDIR;
	else if ((fi->flags & O_TRUNC) && (fi->flags & O_ACCMODE) != O_RDONLY)
		n->size = 0;
	pthread_mutex_unlock(&nf->lock);
	if (rc) {
		fuse_reply_err(req, rc);
		return;
	}
	null_open_flags(fi);
	fuse_reply_open(req, fi);
}

static void null_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		      struct fuse_file_info *fi)
{
	struct null_fs *nf = null_of(req);
	uint64_t fsize = 0;
	pthread_mutex_lock(&nf->lock);
	struct null_node *n = null_get(nf, ino);
	if (n)
		fsize = n->size;
	pthread_mutex_unlock(&nf->lock);
	size_t got = 0;
	if ((uint64_t)off < fsize)
		got = fsize - (uint64_t)off < size ? (size_t)(fsize - (uint64_t)off) : size;
	if (got > sizeof(null_zeros))
		got = sizeof(null_zeros);
	fuse_reply_buf(req, null_zeros, got);
}

static void null_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct null_fs *nf = null_of(req);
	pthread_mutex_lock(&nf->lock);
	struct null_node *n = null_get(nf, ino);
	if (n) {
		uint64_t end = (uint64_t)off + size;
		if (fi->flags & O_APPEND)
			end = n->size + size;
		if (end > n->size)
			n->size = end;
		clock_gettime(CLOCK_REALTIME, &n->mtime);
	}
	pthread_mutex_unlock(&nf->lock);
	if (n)
		fuse_reply_write(req, size);
	else
		fuse_reply_err(req, ENOENT);
}

static void null_reply_ok(fuse_req_t req)
{
	fuse_reply_err(req, 0);
}

static void null_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	null_reply_ok(req);
}

static void null_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	null_reply_ok(req);
}

static void null_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	null_reply_ok(req);
}

static void null_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			 struct fuse_file_info *fi)
{
	struct null_fs *nf = null_of(req);
	char *buf = malloc(size ? size : 1);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	size_t used = 0;
	pthread_mutex_lock(&nf->lock);
	/* offsets are inode numbers + 1: stable while entries come and go */
	for (size_t i = (size_t)off; i < nf->next_ino; i++) {
		struct null_node *n = nf->byino[i];
		if (!n || !n->name || n->parent != ino || n->ino == ino)
			continue;
		struct stat st;
		null_stat(n, &st);
		size_t len = fuse_add_direntry(req, buf + used, size - used, n->name, &st,
					       (off_t)(i + 1));
		if (len > size - used)
			break;
		used += len;
	}
	pthread_mutex_unlock(&nf->lock);
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void null_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = sv.f_frsize = 4096;
	sv.f_blocks = sv.f_bfree = sv.f_bavail = 1ull << 30;
	sv.f_files = sv.f_ffree = sv.f_favail = 1ull << 30;
	sv.f_namemax = NULL_NAME_MAX;
	fuse_reply_statfs(req, &sv);
}

static const struct fuse_lowlevel_ops null_ops = {
	.init = null_init,
	.lookup = null_lookup,
	.forget = null_forget,
	.forget_multi = null_forget_multi,
	.getattr = null_getattr,
	.setattr = null_setattr,
	.mkdir = null_mkdir,
	.unlink = null_unlink,
	.rmdir = null_rmdir,
	.create = null_create,
	.open = null_open,
	.read = null_read,
	.write = null_write,
	.flush = null_flush,
	.release = null_release,
	.fsync = null_fsync,
	.readdir = null_readdir,
	.statfs = null_statfs,
};

static int null_fs_init(struct null_fs *nf)
{
	memset(nf, 0, sizeof(*nf));
	pthread_mutex_init(&nf->lock, NULL);
	nf->nbuckets = 1u << 16;
	nf->buckets = calloc(nf->nbuckets, sizeof(*nf->buckets));
	nf->next_ino = FUSE_ROOT_ID;
	int rc = nf->buckets ? 0 : -ENOMEM;
	if (rc == 0 && !null_new(nf, 0, NULL, S_IFDIR | 0755, NULL, &rc))
		return rc;
	return rc;
}

static void null_fs_free(struct null_fs *nf)
{
	for (size_t i = 0; i < nf->next_ino; i++) {
		if (nf->byino[i])
			free(nf->byino[i]->name);
		free(nf->byino[i]);
	}
	free(nf->byino);
	free(nf->buckets);
	pthread_mutex_destroy(&nf->lock);
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts opts;
	if (fuse_parse_cmdline(&args, &opts) != 0)
		return 1;
	if (opts.show_help || !opts.mountpoint) {
		fprintf(stderr, "usage: %s [-f] [-o FUSEOPTS] MOUNTPOINT\n", argv[0]);
		fuse_opt_free_args(&args);
		free(opts.mountpoint);
		return opts.show_help ? 0 : 2;
	}
	struct null_fs nf;
	int rc = 1;
	if (null_fs_init(&nf) != 0) {
		fprintf(stderr, "nullfs: out of memory\n");
		goto out;
	}
	struct fuse_session *se = fuse_session_new(&args, &null_ops, sizeof(null_ops), &nf);
	if (!se)
		goto out_fs;
	if (fuse_set_signal_handlers(se) != 0)
		goto out_se;
	if (fuse_session_mount(se, opts.mountpoint) != 0)
		goto out_sig;
	fuse_daemonize(opts.foreground);
	struct fuse_loop_config *cfg = fuse_loop_cfg_create();
	if (cfg) {
		fuse_loop_cfg_set_max_threads(cfg, 16);
		rc = fuse_session_loop_mt(se, cfg) != 0;
		fuse_loop_cfg_destroy(cfg);
	}
	fuse_session_unmount(se);
out_sig:
	fuse_remove_signal_handlers(se);
out_se:
	fuse_session_destroy(se);
out_fs:
	null_fs_free(&nf);
out:
	fuse_opt_free_args(&args);
	free(opts.mountpoint);
	return rc;
}
