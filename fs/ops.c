/* ops — the FUSE low-level operations. Each one decodes the request, calls the
 * catalog, node, writer or reader module, and replies exactly once, with a
 * negative errno turned into fuse_reply_err.
 *
 * Locking order: node->rw, then the catalog's mutex (inside cat_*). The node
 * table lock is never held across either; the handle registry's lock is a
 * leaf, held only to link or unlink a handle.
 *
 * Invariants:
 *  1. Every handle handed to the kernel (fi->fh) is in fs->handles from
 *     ops_open_node until ops_release unlinks and frees it, or, for those the
 *     kernel never releases (SIGTERM, or a lazy unmount, with a file open),
 *     until ops_handles_free at teardown.
 *  2. At teardown (the session loop has returned, no request runs) a handle
 *     still open is only freed: nothing a close does happens, since the
 *     file was never closed. It still counts as an open writer, so
 *     gen_policy_shutdown aborts an OPEN generation it writes in
 *     (docs/GENERATIONS.md); no commit rule fires; node_table_free ends its
 *     node and writer as it always has.
 *
 *  3. Setuid and setgid are cleared as the kernel clears them on a local
 *     filesystem (FUSE_CAP_HANDLE_KILLPRIV, on by default, leaves it to us):
 *     see ops_killpriv_mode. Only regular files.
 *
 * Commit points of file data: flush (every close), fsync (durable), and the
 * release of the last handle. Locks (flock, fcntl) are the kernel's: ckptfs
 * does not implement getlk/setlk, so they work across the processes of this
 * node, which is what trainers use. */
#define _GNU_SOURCE
#include "ops.h"

#include <assert.h>
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

#include "ckptfs.h"
#include "fuseinit.h"
#include "gen.h"
#include "generation.h"
#include "log.h"
#include "node.h"
#include "reader.h"
#include "uploader.h"
#include "writer.h"

#define OPS_TIMEOUT 1.0
#define OPS_MAX_WRITE (1u << 20)
#define OPS_READAHEAD (1u << 20) /* one FUSE_READ of max_pages (= max_write) */
#define OPS_XATTR_CACHE "user.ckptfs.cache"
#define OPS_XATTR_BACKING "user.ckptfs.backing"
#define OPS_XATTR_GEN "user.ckptfs.generation"
#define OPS_XATTR_COMMIT "user.ckptfs.commit"
#define OPS_XATTR_PIN "user.ckptfs.pin"

/* An open file: its node, and what it means for the file's generation. */
struct ops_handle {
	struct node *n;
	uint64_t gen_id;  /* the generation the file was in when opened (0: none) */
	bool writable;    /* counted among the generation's writers */
	bool wrote;       /* created, wrote or truncated through this handle */
	struct ops_handle *prev, *next; /* in fs->handles (invariant 1) */
};

/* The handles the kernel holds (invariant 1). */
struct ops_handles {
	pthread_mutex_t lock;
	struct ops_handle *head;
	size_t count;
};

static struct ops_handle *ops_h(struct fuse_file_info *fi)
{
	return (struct ops_handle *)(uintptr_t)fi->fh;
}

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

/* How long the kernel may cache a name. Generation roots: not at all, so a
 * generation removed or restored behind the kernel's back (keep-latest-k,
 * abort, crash recovery) is seen at the next path walk, without calling into
 * the kernel (see gen.c, gen_after_removal). */
static double ops_entry_timeout(struct ckptfs *fs, const char *name)
{
	uint64_t step;
	return name && gen_name_matches(fs->gen, name, &step) ? 0.0 : OPS_TIMEOUT;
}

static void ops_reply_entry(fuse_req_t req, const char *name, const struct cat_inode *in)
{
	struct fuse_entry_param e;
	memset(&e, 0, sizeof(e));
	e.ino = in->ino;
	e.attr_timeout = OPS_TIMEOUT;
	e.entry_timeout = ops_entry_timeout(ops_fs(req), name);
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

static uint64_t ops_gen_of(struct ckptfs *fs, uint64_t ino)
{
	uint64_t gen = 0;
	return cat_gen_of(fs->cat, ino, &gen) == 0 ? gen : 0;
}

/* ---- setuid and setgid after a change (invariant 3) ---- */

/* Whether the caller of req is in group gid (its fsgid or a supplementary
 * group). */
static bool ops_in_group(fuse_req_t req, gid_t gid)
{
	if (fuse_req_ctx(req)->gid == gid)
		return true;
	gid_t groups[64];
	int n = fuse_req_getgroups(req, 64, groups);
	for (int i = 0; i < n && i < 64; i++)
		if (groups[i] == gid)
			return true;
	return false;
}

/* The mode of in after a change by req's caller, by the kernel's rules
 * (setattr_should_drop_suidgid, setattr_should_drop_sgid, chown_common):
 *  - a write, a truncate or an O_TRUNC open by a caller without CAP_FSETID
 *    clears setuid, and setgid if group-exec is set or the caller is not in
 *    the file's group (setgid without group-exec is otherwise a locking mark);
 *  - a chown (chown true) clears setuid whoever asks, and setgid by the same
 *    rule, a caller with CAP_FSETID counting as in every group.
 * A caller has CAP_FSETID when its uid is 0 (FUSE does not pass capabilities),
 * unless the kernel asked to kill them anyway (kill: FUSE_SET_ATTR_KILL_*). */
static mode_t ops_killpriv_mode(fuse_req_t req, const struct cat_inode *in, bool chown, bool kill)
{
	bool capable = fuse_req_ctx(req)->uid == 0 && !kill;
	if (!S_ISREG(in->mode) || !(in->mode & (S_ISUID | S_ISGID)) || (capable && !chown))
		return in->mode;
	mode_t drop = S_ISUID;
	if ((in->mode & S_ISGID) &&
	    ((in->mode & S_IXGRP) || (!capable && !ops_in_group(req, in->gid))))
		drop |= S_ISGID;
	return in->mode & ~drop;
}

/* After a write or truncate of ino by req's caller: clears the bits in the
 * catalog if the rules say so; *still* tells whether any is left. */
static int ops_killpriv(fuse_req_t req, uint64_t ino, bool *still)
{
	struct ckptfs *fs = ops_fs(req);
	struct cat_inode in, set;
	int rc = cat_getattr(fs->cat, ino, &in);
	if (rc != 0)
		return rc;
	memset(&set, 0, sizeof(set));
	set.mode = ops_killpriv_mode(req, &in, false, false);
	if (set.mode != in.mode)
		rc = cat_setattr(fs->cat, ino, CAT_SET_MODE, &set, NULL);
	if (rc != 0)
		log_error("inode %llu: clearing setuid/setgid after a write by uid %u"
			  " (mode %o to %o) failed: %s", (unsigned long long)ino,
			  (unsigned)fuse_req_ctx(req)->uid, (unsigned)(in.mode & 07777),
			  (unsigned)(set.mode & 07777), strerror(-rc));
	if (still)
		__atomic_store_n(still, (set.mode & (S_ISUID | S_ISGID)) != 0, __ATOMIC_RELAXED);
	return rc;
}

/* Before a change to ino (or an entry of the directory ino): a committed
 * generation is reopened as a new version. Returns its generation. */
static int ops_gen_change(fuse_req_t req, uint64_t ino, uint64_t *gen_id)
{
	struct ckptfs *fs = ops_fs(req);
	*gen_id = ops_gen_of(fs, ino);
	int rc = gen_before_change(fs->gen, *gen_id);
	if (rc == 0)
		gen_activity(fs->gen, *gen_id, fuse_req_ctx(req)->pid);
	return rc;
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

/* ---- namespace ---- */

static void ops_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct cat_inode in;
	int rc = cat_lookup(ops_fs(req)->cat, parent, name, &in);
	if (rc == 0)
		rc = ops_attr(ops_fs(req), in.ino, &in);
	if (rc != 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	/* before the reply: it frees req */
	if (gen_is_trigger_name(name))
		node_note_name(ops_fs(req)->nodes, in.ino, parent, name);
	ops_reply_entry(req, name, &in);
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
	struct cat_inode in, set, out;
	uint64_t gen_id;
	int rc = ops_gen_change(req, ino, &gen_id);
	if (rc == 0)
		rc = cat_getattr(fs->cat, ino, &in);
	if (rc == 0 && fi && (to_set & FUSE_SET_ATTR_SIZE))
		((struct ops_handle *)(uintptr_t)fi->fh)->wrote = true;
	if (rc == 0 && (to_set & FUSE_SET_ATTR_SIZE)) {
		if (S_ISDIR(in.mode))
			rc = -EISDIR;
		else if (!S_ISREG(in.mode))
			rc = -EINVAL;
		else
			rc = ops_truncate(fs, ino, (uint64_t)attr->st_size);
	}
	unsigned what = 0;
	memset(&set, 0, sizeof(set));
	if (to_set & FUSE_SET_ATTR_MODE) {
		what |= CAT_SET_MODE;
		set.mode = attr->st_mode;
	}
	if (to_set & FUSE_SET_ATTR_UID) {
		what |= CAT_SET_UID;
		set.uid = attr->st_uid;
	}
	if (to_set & FUSE_SET_ATTR_GID) {
		what |= CAT_SET_GID;
		set.gid = attr->st_gid;
	}
	if (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_ATIME_NOW)) {
		struct timespec now = { 0, UTIME_NOW };
		what |= CAT_SET_ATIME;
		set.atime_ns = ops_ts_ns(to_set & FUSE_SET_ATTR_ATIME_NOW ? &now : &attr->st_atim);
	}
	if (to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW)) {
		struct timespec now = { 0, UTIME_NOW };
		what |= CAT_SET_MTIME;
		set.mtime_ns = ops_ts_ns(to_set & FUSE_SET_ATTR_MTIME_NOW ? &now : &attr->st_mtim);
	}
	/* invariant 3: a chown or truncate clears setuid/setgid in the same change */
	bool chown = to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID);
	bool kill = to_set & (FUSE_SET_ATTR_KILL_SUID | FUSE_SET_ATTR_KILL_SGID);
	if (rc == 0 && !(what & CAT_SET_MODE) && (chown || kill || (to_set & FUSE_SET_ATTR_SIZE))) {
		mode_t mode = ops_killpriv_mode(req, &in, chown, kill);
		if (mode != in.mode) {
			what |= CAT_SET_MODE;
			set.mode = mode;
		}
	}
	if (rc == 0 && what)
		rc = cat_setattr(fs->cat, ino, what, &set, &out);
	if (rc == 0 && (what & (CAT_SET_MTIME | CAT_SET_MODE))) {
		struct node *n = node_peek(fs->nodes, ino);
		if (n && (what & CAT_SET_MODE))
			__atomic_store_n(&n->setid, (out.mode & (S_ISUID | S_ISGID)) != 0,
					 __ATOMIC_RELAXED);
		if (n && (what & CAT_SET_MTIME)) {
			/* an explicit mtime outlives the writer's own clock */
			pthread_rwlock_wrlock(&n->rw);
			if (n->writer)
				writer_set_mtime_ns(n->writer, set.mtime_ns);
			pthread_rwlock_unlock(&n->rw);
		}
		if (n)
			node_put(fs->nodes, n);
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
	uint64_t parent_gen, gen_id = 0;
	int rc = ops_gen_change(req, parent, &parent_gen);
	if (rc == 0)
		rc = cat_getattr(fs->cat, parent, &dir);
	if (rc != 0)
		return rc;
	if (dir.mode & S_ISGID) {
		gid = dir.gid;
		if (S_ISDIR(mode))
			mode |= S_ISGID;
	}
	struct cat_gen_spec spec_buf;
	const struct cat_gen_spec *spec =
		parent_gen ? NULL : gen_spec_for(fs->gen, parent, name, &spec_buf);
	rc = cat_create_in_gen(fs->cat, parent, name, mode, ctx->uid, gid, rdev, target, spec, out,
			       &gen_id);
	if (rc != 0)
		return rc;
	if (spec)
		gen_started(fs->gen, gen_id, parent, false, ctx->pid);
	else
		gen_file_created(fs->gen, gen_id, name);
	return 0;
}

static void ops_reply_made(fuse_req_t req, int rc, const char *name, const struct cat_inode *in)
{
	if (rc != 0)
		fuse_reply_err(req, -rc);
	else
		ops_reply_entry(req, name, in);
}

static void ops_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	struct cat_inode in;
	ops_reply_made(req, ops_make(req, parent, name, mode, rdev, NULL, &in), name, &in);
}

static void ops_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct cat_inode in;
	ops_reply_made(req, ops_make(req, parent, name, S_IFDIR | (mode & 07777), 0, NULL, &in), name, &in);
}

static void ops_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	struct cat_inode in;
	int rc = strlen(link) > PATH_MAX ? -ENAMETOOLONG
					 : ops_make(req, parent, name, S_IFLNK | 0777, 0, link, &in);
	ops_reply_made(req, rc, name, &in);
}

static void ops_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct cat_inode in;
	int bad;
	ops_name_check_reply(req, newname, &bad);
	if (bad)
		return;
	uint64_t gen_id;
	int rc = ops_gen_change(req, newparent, &gen_id);
	if (rc == 0)
		rc = cat_link(ops_fs(req)->cat, ino, newparent, newname, &in);
	if (rc == 0)
		rc = ops_attr(ops_fs(req), ino, &in);
	ops_reply_made(req, rc, newname, &in);
}

/* Removes a name: a change inside the parent's generation (which is reopened
 * if committed); a generation root removed ends its generation (catalog). */
static void ops_remove(fuse_req_t req, fuse_ino_t parent, const char *name, bool dir)
{
	struct ckptfs *fs = ops_fs(req);
	uint64_t ino = 0, gen_id;
	int rc = ops_gen_change(req, parent, &gen_id);
	if (rc == 0)
		rc = dir ? cat_rmdir(fs->cat, parent, name, &ino) : cat_unlink(fs->cat, parent, name, &ino);
	if (rc == 0) {
		gen_root_removed(fs->gen, parent, name);
		node_unlinked(fs->nodes, ino);
	}
	fuse_reply_err(req, -rc);
}

static void ops_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	ops_remove(req, parent, name, false);
}

static void ops_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	ops_remove(req, parent, name, true);
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
	struct ckptfs *fs = ops_fs(req);
	unsigned cflags = (flags & RENAME_NOREPLACE ? CAT_RENAME_NOREPLACE : 0) |
			  (flags & RENAME_EXCHANGE ? CAT_RENAME_EXCHANGE : 0);
	uint64_t replaced = 0, new_gen = 0, from_gen = 0, to_gen = 0;
	int rc = ops_gen_change(req, parent, &from_gen);
	if (rc == 0)
		rc = ops_gen_change(req, newparent, &to_gen);
	struct cat_gen_spec spec_buf;
	const struct cat_gen_spec *spec =
		rc == 0 && !to_gen && !(flags & RENAME_EXCHANGE)
			? gen_spec_for(fs->gen, newparent, newname, &spec_buf) : NULL;
	if (rc == 0)
		rc = cat_rename_gen(fs->cat, parent, name, newparent, newname, cflags, spec, &replaced,
				    &new_gen);
	if (rc == 0) {
		gen_root_removed(fs->gen, parent, name);
		if (replaced)
			node_unlinked(fs->nodes, replaced);
		if (new_gen)
			gen_started(fs->gen, new_gen, newparent, true, fuse_req_ctx(req)->pid);
		else
			gen_renamed(fs->gen, to_gen, newparent, newname);
	}
	fuse_reply_err(req, -rc);
}

/* ---- directories ---- */

struct ops_dirbuf {
	fuse_req_t req;
	uint64_t dir;
	char *buf;
	size_t size, used;
	int plus;
};

static int ops_dirent_add(void *arg, const char *name, const struct cat_inode *attr,
			  uint64_t next_cookie)
{
	struct ops_dirbuf *d = arg;
	size_t need;
	if (gen_hidden(ops_fs(d->req)->gen, d->dir, name))
		return 0; /* an OPEN generation: reachable by name, not listed */
	if (d->plus) {
		struct fuse_entry_param e;
		memset(&e, 0, sizeof(e));
		ops_to_stat(attr, &e.attr);
		int dot = strcmp(name, ".") == 0 || strcmp(name, "..") == 0;
		if (!dot) {
			e.ino = attr->ino;
			e.attr_timeout = OPS_TIMEOUT;
			e.entry_timeout = ops_entry_timeout(ops_fs(d->req), name);
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
	struct ops_dirbuf d = { .req = req, .dir = ino, .size = size, .plus = plus };
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
		int rc = gen_before_change(fs->gen, ops_gen_of(fs, n->ino));
		if (rc == 0)
			rc = cat_getattr(fs->cat, n->ino, &in);
		if (rc == 0)
			rc = writer_new(fs->chunkput, n->ino, in.size, &n->writer);
		if (rc != 0)
			return rc;
	}
	*out = n->writer;
	return 0;
}

/* ---- the registry of open handles (invariant 1) ---- */

int ops_handles_new(struct ops_handles **out)
{
	struct ops_handles *hs = calloc(1, sizeof(*hs));
	if (!hs)
		return -ENOMEM;
	pthread_mutex_init(&hs->lock, NULL);
	*out = hs;
	return 0;
}

static void ops_handles_link(struct ops_handles *hs, struct ops_handle *h)
{
	pthread_mutex_lock(&hs->lock);
	assert(!h->prev && !h->next && hs->head != h);
	h->next = hs->head;
	if (hs->head)
		hs->head->prev = h;
	hs->head = h;
	hs->count++;
	pthread_mutex_unlock(&hs->lock);
}

static void ops_handles_unlink(struct ops_handles *hs, struct ops_handle *h)
{
	pthread_mutex_lock(&hs->lock);
	assert(hs->count > 0);
	if (h->prev)
		h->prev->next = h->next;
	else
		hs->head = h->next;
	if (h->next)
		h->next->prev = h->prev;
	h->prev = h->next = NULL;
	hs->count--;
	pthread_mutex_unlock(&hs->lock);
}

void ops_handles_free(struct ops_handles *hs)
{
	if (!hs)
		return;
	size_t n = 0, writable = 0;
	uint64_t first = 0;
	struct ops_handle *h = hs->head;
	while (h) { /* invariant 2: the handle only; its node and generation end later */
		struct ops_handle *next = h->next;
		if (n++ == 0)
			first = h->n->ino;
		writable += h->writable;
		free(h);
		h = next;
	}
	assert(n == hs->count);
	if (n)
		log_info("%zu file handles (%zu for writing, first inode %llu) still open at unmount,"
			 " never released by the kernel: freed (their files are ended as at any"
			 " unmount with a file open)", n, writable, (unsigned long long)first);
	pthread_mutex_destroy(&hs->lock);
	free(hs);
}

static int ops_open_node(fuse_req_t req, uint64_t ino, struct fuse_file_info *fi, bool big,
			 mode_t mode)
{
	struct ckptfs *fs = ops_fs(req);
	struct ops_handle *h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->writable = (fi->flags & O_ACCMODE) != O_RDONLY;
	h->gen_id = h->writable ? ops_gen_of(fs, ino) : 0;
	int rc = 0;
	if (h->writable && (fi->flags & O_TRUNC))
		rc = gen_before_change(fs->gen, h->gen_id);
	struct node *n = rc == 0 ? node_open(fs->nodes, ino) : NULL;
	if (!n) {
		free(h);
		return rc ? rc : -ENOMEM;
	}
	h->n = n;
	bool setid = (mode & (S_ISUID | S_ISGID)) != 0;
	__atomic_store_n(&n->setid, setid, __ATOMIC_RELAXED);
	if (h->writable && (fi->flags & O_TRUNC)) {
		pthread_rwlock_wrlock(&n->rw);
		rc = n->writer ? writer_truncate(n->writer, 0) : cat_file_truncate(fs->cat, ino, 0);
		if (rc == 0 && setid) /* invariant 3 */
			rc = ops_killpriv(req, ino, &n->setid);
		pthread_rwlock_unlock(&n->rw);
		h->wrote = true;
	}
	if (rc != 0) {
		node_close(fs->nodes, n);
		node_put(fs->nodes, n);
		free(h);
		return rc;
	}
	if (h->writable) {
		node_writers_add(fs->nodes, n, 1);
		gen_writer_opened(fs->gen, h->gen_id);
		gen_activity(fs->gen, h->gen_id, fuse_req_ctx(req)->pid);
	}
	/* Write-only handles bypass the page cache: writes arrive as they were
	 * issued (up to max_write), not split at every partly covered page, and
	 * are not copied into pages nobody reads. Read-only handles of big files
	 * bypass it too, once the kernel allows MAP_SHARED mmaps of such handles
	 * (fuseinit.h): a read's bytes then go from the chunk cache straight into
	 * the reader's buffer, not first into fresh FUSE page-cache pages (mmaps
	 * still use the page cache). Read-write handles keep the page cache
	 * (shared writable mmaps). Pages are dropped at each open (no
	 * keep_cache), so a reader never sees bytes older than a write. */
	int acc = fi->flags & O_ACCMODE;
	fi->direct_io = acc == O_WRONLY || (acc == O_RDONLY && big && !fs->opt.read_cache &&
					    fuseinit_granted(fs->fuse_init));
	fi->keep_cache = 0;
	fi->fh = (uint64_t)(uintptr_t)h;
	ops_handles_link(fs->handles, h);
	return 0;
}

static void ops_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct cat_inode in;
	int rc = cat_getattr(ops_fs(req)->cat, ino, &in);
	if (rc == 0 && S_ISDIR(in.mode))
		rc = -EISDIR;
	if (rc == 0)
		rc = ops_open_node(req, ino, fi, in.size >= OPS_DIRECT_READ_MIN, in.mode);
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
		rc = ops_open_node(req, in.ino, fi, false, in.mode);
		if (rc == 0)
			ops_h(fi)->wrote = true; /* creating is writing (an empty marker counts) */
		if (rc == 0 && gen_is_trigger_name(name))
			node_note_name(ops_fs(req)->nodes, in.ino, parent, name);
	}
	if (rc != 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	struct fuse_entry_param e;
	memset(&e, 0, sizeof(e));
	e.ino = in.ino;
	e.attr_timeout = OPS_TIMEOUT;
	e.entry_timeout = ops_entry_timeout(ops_fs(req), name);
	ops_to_stat(&in, &e.attr);
	node_lookup_add(ops_fs(req)->nodes, in.ino);
	fuse_reply_create(req, &e, fi);
}

static struct node *ops_handle(struct fuse_file_info *fi)
{
	return ops_h(fi)->n;
}

/* What a read replies with: pinned pieces of chunks, written into the reply
 * without a copy; or a buffer (a file being written, or a range of more
 * pieces than one map holds). */
struct ops_read_out {
	size_t got;
	char *buf;
	struct reader_map m;
};

/* With n->rw held. */
static int ops_read_fill(struct ckptfs *fs, struct node *n, size_t size, off_t off,
			 struct ops_read_out *o)
{
	if (n->writer) {
		o->buf = malloc(size ? size : 1);
		return o->buf ? writer_read(n->writer, o->buf, size, (uint64_t)off, &o->got) : -ENOMEM;
	}
	struct cat_inode in;
	int rc = cat_getattr(fs->cat, n->ino, &in);
	if (rc != 0 || (uint64_t)off >= in.size)
		return rc;
	o->got = in.size - (uint64_t)off < size ? (size_t)(in.size - (uint64_t)off) : size;
	rc = reader_map(fs->reader, n->ino, READER_COMMITTED, (uint64_t)off, o->got, &o->m);
	if (rc == 0 && o->m.len < o->got) {
		reader_unmap(fs->reader, &o->m);
		o->buf = malloc(o->got);
		rc = o->buf ? reader_read(fs->reader, n->ino, READER_COMMITTED, (uint64_t)off, o->got, o->buf)
			    : -ENOMEM;
	}
	return rc;
}

static void ops_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct ckptfs *fs = ops_fs(req);
	struct node *n = ops_handle(fi);
	struct ops_read_out o = { 0 };
	pthread_rwlock_rdlock(&n->rw);
	int rc = ops_read_fill(fs, n, size, off, &o);
	pthread_rwlock_unlock(&n->rw);
	if (rc != 0)
		fuse_reply_err(req, -rc);
	else if (o.buf || o.got == 0)
		fuse_reply_buf(req, o.buf, o.got);
	else
		fuse_reply_iov(req, o.m.iov, o.m.n);
	reader_unmap(fs->reader, &o.m); /* after the reply, which was written from the pinned chunks */
	free(o.buf);
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
	/* invariant 3; a write from the page cache (writepage) has no caller */
	if (rc == 0 && __atomic_load_n(&n->setid, __ATOMIC_RELAXED) && !fi->writepage &&
	    fuse_req_ctx(req)->uid != 0)
		rc = ops_killpriv(req, ino, &n->setid);
	pthread_rwlock_unlock(&n->rw);
	ops_h(fi)->wrote = true;
	gen_activity(fs->gen, ops_h(fi)->gen_id, fuse_req_ctx(req)->pid);
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
	struct ops_handle *h = ops_h(fi);
	struct node *n = h->n;
	int rc = ops_commit(fs, n, false, node_close(fs->nodes, n) == 0);
	if (rc != 0)
		log_error("inode %llu: commit at last close failed: %s", (unsigned long long)ino,
			  strerror(-rc));
	fuse_reply_err(req, -rc);
	/* after the reply: a commit it triggers must not delay the close */
	uint64_t parent;
	char name[40];
	if (rc == 0 && h->wrote && node_trigger(fs->nodes, n, &parent, name, sizeof(name)))
		gen_file_closed(fs->gen, ino, parent, name, h->gen_id);
	if (h->writable) {
		node_writers_add(fs->nodes, n, -1);
		gen_writer_closed(fs->gen, h->gen_id);
	}
	node_put(fs->nodes, n);
	ops_handles_unlink(fs->handles, h);
	free(h);
}

static void ops_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct ckptfs *fs = ops_fs(req);
	int rc = ops_commit(fs, ops_handle(fi), true, false);
	if (rc == 0 && fs->opt.sync_backing) /* -o sync=backing: on BACKING before we return */
		rc = uploader_wait_file(fs->uploader, ino, fs->opt.backing_timeout_ms);
	fuse_reply_err(req, -rc);
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
		ops_h(fi)->wrote = true;
	}
	fuse_reply_err(req, -rc);
}

/* ---- filesystem ---- */

static void ops_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct ckptfs *fs = ops_fs(req);
	/* the cache's disk: saves land there (BACKING may be a URL, or hung) */
	struct statvfs sv;
	if (statvfs(fs->opt.cache, &sv) != 0) {
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
	char desc[1536]; /* the generation line, a held reason percent-encoded */
	if (ino == CAT_ROOT_INO && strcmp(name, OPS_XATTR_CACHE) == 0)
		val = fs->opt.cache;
	else if (ino == CAT_ROOT_INO && strcmp(name, OPS_XATTR_BACKING) == 0)
		val = fs->opt.backing;
	else if (strcmp(name, OPS_XATTR_GEN) == 0) {
		int rc = gen_describe(fs->gen, ops_gen_of(fs, ino), desc, sizeof(desc));
		if (rc != 0) {
			fuse_reply_err(req, -rc);
			return;
		}
		val = desc;
	}
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
	static const char gen_names[] = OPS_XATTR_GEN;
	const char *list = ino == CAT_ROOT_INO ? names : gen_names;
	size_t len = ino == CAT_ROOT_INO ? sizeof(names) : ops_gen_of(ops_fs(req), ino) ? sizeof(gen_names) : 0;
	if (size == 0)
		fuse_reply_xattr(req, len);
	else if (size < len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, list, len);
}

/* Control of generations for scripts: on any inode of a generation,
 * user.ckptfs.commit (any value) commits it, user.ckptfs.pin = 1 / 0 pins. Only
 * root and the daemon's owner may. */
static void ops_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			 size_t size, int flags)
{
	struct ckptfs *fs = ops_fs(req);
	bool commit = strcmp(name, OPS_XATTR_COMMIT) == 0, pin = strcmp(name, OPS_XATTR_PIN) == 0;
	if (!commit && !pin) {
		fuse_reply_err(req, ENOTSUP);
		return;
	}
	uid_t uid = fuse_req_ctx(req)->uid;
	if (uid != 0 && uid != getuid()) {
		fuse_reply_err(req, EPERM);
		return;
	}
	uint64_t gen_id = ops_gen_of(fs, ino);
	int rc = -EINVAL; /* not in a generation */
	if (gen_id && commit)
		rc = gen_commit_explicit(fs->gen, gen_id, "explicit");
	else if (gen_id && pin)
		rc = gen_pin(fs->gen, gen_id, size > 0 && value[0] == '1');
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
