/* admin_copy — export GEN DIR and import DIR SERIES: generations to and from
 * plain files.
 *
 * export writes DIR/NAME (a directory tree, or one file for a single-file
 * generation) under a temporary name DIR/.NAME.export-RANDOM and renames it
 * into place when complete. RANDOM is 64 bits from getrandom and every entry is
 * made exclusively, so in a shared (sticky) DIR nothing another user made is
 * written into, and a failed copy removes only what it made (made_top). Mounted, it reads through the mount (the daemon
 * verifies every chunk against its hash and fetches evicted ones from
 * BACKING); offline (--cache) it reads the catalog and the chunk objects
 * itself — the cache's copy, else BACKING's — and verifies each one.
 *
 * import goes through the mount only, the way a trainer saves: it copies DIR
 * into SERIES/.NAME.import-RANDOM (not a generation name), then renames that to
 * SERIES/NAME, which starts the generation and commits it (rule "rename").
 * Everything is checked before the first byte is written, and only as the
 * daemon answers through the mount (never the local catalog: on a node of a
 * shared catalog, -o meta=, the namespace is in PostgreSQL): NAME must be a
 * generation name for this mount (the daemon's gen_pattern), SERIES must not
 * be inside a generation nor make one, SERIES/NAME must not exist. The
 * final rename is RENAME_NOREPLACE, so a generation another node made
 * meanwhile under NAME is never replaced.
 *
 * Invariants (review 40 F1):
 *  C1. The destination is built by fd, never by a path string. The parent
 *      (DIR for export, MOUNT/SERIES for import) is opened once, O_DIRECTORY |
 *      O_NOFOLLOW (SERIES beneath the mount by safe_openat: no component
 *      followed); the top is made beneath that fd (mkdirat, or openat O_EXCL
 *      for a one-file generation), opened O_NOFOLLOW and checked with fstat:
 *      a directory of ours (owner = our euid) that nobody else may write or
 *      enter (no group/other bits), else the copy fails (-EPERM) before a byte
 *      is written. Every entry below is made relative to its parent's fd
 *      (openat O_CREAT|O_EXCL|O_NOFOLLOW, mkdirat + the same open and check,
 *      symlinkat), its mode and times set on its fd (fchmod, futimens) or
 *      with AT_SYMLINK_NOFOLLOW. Whoever can write the parent may rename the
 *      top away and plant a symlink in its place: nothing is then made, and
 *      no mode changed, through that link: it all goes on in the directory
 *      we opened.
 *  C2. The final rename is renameat2(parent fd, top, parent fd, NAME,
 *      RENAME_NOREPLACE), and NAME is then checked to be the top we made
 *      (device and inode); if someone swapped the top for their own entry, the
 *      copy fails saying so (their entry is left where it is).
 *  C3. A failed copy removes only what it made, by fd: the top's tree is
 *      emptied by an unlinkat walk beneath the top's fd (never nftw by path),
 *      and the top itself is unlinked from the parent's fd only while the
 *      name still holds our inode. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "admin.h"
#include "safeopen.h"
#include "store.h"

#define ADMIN_COPY_BUF (1u << 20)

struct admin_copy {
	struct admin *a;
	const char *label; /* for the progress bar */
	uint64_t done, total;
	char *buf;
	int err;              /* first failure, -errno */
	char where[PATH_MAX]; /* where it happened */
	int pfd;              /* the destination's parent, opened once (C1) */
	const char *topname;  /* the temporary name the copy goes to, beneath pfd */
	bool made_top;        /* it was made by this copy: only then is it removed */
	int topfd;            /* the top, if a directory: for the cleanup walk (C3) */
	struct stat topst;    /* the top made (device, inode) */
};

/* Notes that ddir/dname was created by this copy (exclusively: O_EXCL,
 * mkdirat, symlinkat) and, for the top, which inode it is (fd: the entry's
 * fd, or -1 for a symlink); returns 0. */
static int admin_copy_made(struct admin_copy *c, int ddir, const char *dname, int fd)
{
	if (ddir != c->pfd)
		return 0;
	c->made_top = true;
	if (fd >= 0 ? fstat(fd, &c->topst) : fstatat(ddir, dname, &c->topst, AT_SYMLINK_NOFOLLOW))
		c->topst.st_ino = 0;
	if (fd >= 0 && S_ISDIR(c->topst.st_mode))
		c->topfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	return 0;
}

/* "DIR/.NAME.<what>-<16 random hex digits>": a name nobody can guess, so
 * nobody can have made it first in a shared (sticky) directory; and if
 * someone did, the exclusive create fails and nothing of theirs is removed
 * (admin_copy_made). */
static int admin_copy_tmpname(char *buf, size_t size, const char *name, const char *what)
{
	char head[PATH_MAX];
	snprintf(head, sizeof(head), ".%s.%s-", name, what);
	return safe_tmpname(buf, size, head);
}

static int admin_copy_fail(struct admin_copy *c, const char *where, int err)
{
	if (c->err == 0) {
		c->err = err;
		snprintf(c->where, sizeof(c->where), "%s", where);
	}
	return err;
}

/* ---- the destination, by fd (C1) ---- */

/* A new regular file dname beneath ddir (dst names it in messages): its fd
 * or a negative errno (recorded). */
static int admin_dst_file(struct admin_copy *c, int ddir, const char *dname, const char *dst)
{
	int out = openat(ddir, dname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return admin_copy_fail(c, dst, -errno);
	admin_copy_made(c, ddir, dname, out);
	return out;
}

/* A new directory dname beneath ddir, opened and checked to be one of ours
 * that only we may enter (C1): its fd or a negative errno (recorded). */
static int admin_dst_dir(struct admin_copy *c, int ddir, const char *dname, const char *dst)
{
	if (mkdirat(ddir, dname, 0700) != 0)
		return admin_copy_fail(c, dst, -errno);
	int fd = openat(ddir, dname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) { /* swapped for a symlink (ELOOP/ENOTDIR) or removed */
		int e = errno;
		char why[PATH_MAX + 96];
		snprintf(why, sizeof(why), "%s (replaced by another user's entry right after it was made)",
			 dst);
		return admin_copy_fail(c, why, -e);
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 077)) {
		close(fd);
		char why[PATH_MAX + 96];
		snprintf(why, sizeof(why), "%s (replaced by another user's directory after it was made)",
			 dst);
		return admin_copy_fail(c, why, -EPERM);
	}
	admin_copy_made(c, ddir, dname, fd);
	return fd;
}

static int admin_dst_symlink(struct admin_copy *c, const char *target, int ddir, const char *dname,
			     const char *dst)
{
	if (symlinkat(target, ddir, dname) != 0)
		return admin_copy_fail(c, dst, -errno);
	return admin_copy_made(c, ddir, dname, -1);
}

/* C3: empties the directory open as fd, by fd; best effort. */
static int admin_rm_entry(void *arg, const char *name)
{
	int dfd = *(int *)arg;
	if (unlinkat(dfd, name, 0) == 0 || (errno != EISDIR && errno != EPERM))
		return 0;
	int sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sub >= 0) {
		int arg2 = sub; /* valid until safe_dir_each closes it */
		(void)safe_dir_each(sub, admin_rm_entry, &arg2);
	}
	(void)unlinkat(dfd, name, AT_REMOVEDIR);
	return 0;
}

/* C3: removes the top this copy made, by fd, and only while its name still
 * holds our inode. */
static void admin_rm_top(struct admin_copy *c)
{
	if (c->topfd >= 0) {
		int fd2 = c->topfd; /* safe_dir_each closes it */
		c->topfd = -1;
		(void)safe_dir_each(fd2, admin_rm_entry, &fd2);
	}
	struct stat now;
	if (c->topst.st_ino && fstatat(c->pfd, c->topname, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
	    now.st_dev == c->topst.st_dev && now.st_ino == c->topst.st_ino)
		(void)unlinkat(c->pfd, c->topname, S_ISDIR(now.st_mode) ? AT_REMOVEDIR : 0);
}

/* C2: top → name beneath the parent, never replacing; then name must be
 * the top made. */
static int admin_copy_finish(struct admin_copy *c, const char *name, const char *dst)
{
	struct stat now;
	char why[PATH_MAX + 160];
	if (fstatat(c->pfd, c->topname, &now, AT_SYMLINK_NOFOLLOW) != 0 ||
	    now.st_dev != c->topst.st_dev || now.st_ino != c->topst.st_ino) {
		snprintf(why, sizeof(why), "%s (the temporary copy was replaced by another user's entry "
			 "while it was written; not renamed)", dst);
		return admin_copy_fail(c, why, -EPERM);
	}
	if (renameat2(c->pfd, c->topname, c->pfd, name, RENAME_NOREPLACE) != 0)
		return admin_copy_fail(c, dst, -errno);
	if (fstatat(c->pfd, name, &now, AT_SYMLINK_NOFOLLOW) != 0 || now.st_dev != c->topst.st_dev ||
	    now.st_ino != c->topst.st_ino) {
		snprintf(why, sizeof(why), "%s (the temporary copy was replaced by another user's entry "
			 "just before the rename; theirs is now at that name and was left alone)", dst);
		return admin_copy_fail(c, why, -EPERM);
	}
	return 0;
}

/* ---- plain tree → plain tree (export through the mount, import) ---- */

/* The source side is walked fd by fd (safeopen.h invariant 5): import runs as
 * root over a tree a user may still be changing, and an entry looked at as a
 * regular file but swapped for a symlink to a root-only file before the open
 * must fail the copy, not copy that file into the mount. */
static int admin_copy_file(struct admin_copy *c, int sdir, const char *name, const char *src,
			   int ddir, const char *dname, const char *dst, const struct stat *sb)
{
	int in = safe_open_seen(sdir, name, sb, O_RDONLY);
	if (in < 0)
		return admin_copy_fail(c, src, in);
	int out = admin_dst_file(c, ddir, dname, dst);
	if (out < 0) {
		close(in);
		return out;
	}
	int rc = 0;
	for (;;) {
		ssize_t n = read(in, c->buf, ADMIN_COPY_BUF);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = admin_copy_fail(c, src, -errno);
			break;
		}
		if (n == 0)
			break;
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(out, c->buf + off, (size_t)(n - off));
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				rc = admin_copy_fail(c, dst, w < 0 ? -errno : -EIO);
				break;
			}
			off += w;
		}
		if (rc)
			break;
		c->done += (uint64_t)n;
		admin_progress_bytes(c->label, c->done, c->total);
	}
	if (rc == 0 && fsync(out) != 0)
		rc = admin_copy_fail(c, dst, -errno);
	if (rc == 0) {
		struct timespec ts[2] = { sb->st_atim, sb->st_mtim };
		fchmod(out, sb->st_mode & 07777);
		futimens(out, ts);
	}
	if (close(out) != 0 && rc == 0)
		rc = admin_copy_fail(c, dst, -errno);
	close(in);
	return rc;
}

/* src names sdir/name in messages. */
static int admin_copy_at(struct admin_copy *c, int sdir, const char *name, const char *src,
			 int ddir, const char *dname, const char *dst)
{
	struct stat sb;
	if (fstatat(sdir, name, &sb, AT_SYMLINK_NOFOLLOW) != 0)
		return admin_copy_fail(c, src, -errno);
	if (S_ISREG(sb.st_mode))
		return admin_copy_file(c, sdir, name, src, ddir, dname, dst, &sb);
	if (S_ISLNK(sb.st_mode)) {
		char target[PATH_MAX];
		ssize_t n = readlinkat(sdir, name, target, sizeof(target) - 1);
		if (n < 0)
			return admin_copy_fail(c, src, -errno);
		target[n] = '\0';
		return admin_dst_symlink(c, target, ddir, dname, dst);
	}
	if (!S_ISDIR(sb.st_mode)) {
		fprintf(stderr, "ckptfs-admin: %s: skipped (not a file, directory or symlink)\n", src);
		return 0;
	}
	int dfd = safe_open_seen(sdir, name, &sb, O_RDONLY | O_DIRECTORY);
	if (dfd < 0)
		return admin_copy_fail(c, src, dfd);
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return admin_copy_fail(c, src, -errno);
	}
	int out = admin_dst_dir(c, ddir, dname, dst);
	if (out < 0) {
		closedir(d);
		return out;
	}
	struct dirent *de;
	int rc = 0;
	while (rc == 0 && (de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		char s[PATH_MAX], t[PATH_MAX];
		if (snprintf(s, sizeof(s), "%s/%s", src, de->d_name) >= (int)sizeof(s) ||
		    snprintf(t, sizeof(t), "%s/%s", dst, de->d_name) >= (int)sizeof(t))
			rc = admin_copy_fail(c, src, -ENAMETOOLONG);
		else
			rc = admin_copy_at(c, dirfd(d), de->d_name, s, out, de->d_name, t);
	}
	closedir(d);
	if (rc == 0) {
		struct timespec ts[2] = { sb.st_atim, sb.st_mtim };
		fchmod(out, sb.st_mode & 07777);
		futimens(out, ts);
	}
	close(out);
	return rc;
}

/* The top is the path the invoker gave, symlinks in it followed (realpath);
 * below it nothing is followed. */
static int admin_copy_tree(struct admin_copy *c, const char *src, const char *dst)
{
	char abs[PATH_MAX];
	if (!realpath(src, abs))
		return admin_copy_fail(c, src, -errno);
	char *slash = strrchr(abs, '/');
	if (!slash[1]) /* "/" itself */
		return admin_copy_fail(c, src, -EISDIR);
	*slash = '\0';
	int pfd = open(abs[0] ? abs : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0)
		return admin_copy_fail(c, src, -errno);
	int rc = admin_copy_at(c, pfd, slash + 1, src, c->pfd, c->topname, dst);
	close(pfd);
	return rc;
}

static uint64_t admin_sum_bytes; /* nftw has no argument for its callback */

static int admin_sum_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	if (flag == FTW_F && S_ISREG(sb->st_mode))
		admin_sum_bytes += (uint64_t)sb->st_size;
	return 0;
}

/* ---- catalog + store → plain tree (export offline) ---- */

struct admin_entry {
	char name[CAT_NAME_MAX + 1];
	uint64_t ino;
};
struct admin_entries {
	struct admin_entry *v;
	size_t n, cap;
};

static int admin_entry_add(void *arg, const char *name, const struct cat_inode *attr,
			   uint64_t next_cookie)
{
	struct admin_entries *l = arg;
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return 0;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 32;
		struct admin_entry *p = realloc(l->v, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		l->v = p;
		l->cap = cap;
	}
	snprintf(l->v[l->n].name, sizeof(l->v[l->n].name), "%s", name);
	l->v[l->n++].ino = attr->ino;
	return 0;
}

/* Reads one copy of ext's chunk into chunk and checks it, its length too:
 * 0, -ENOENT (no such copy), -EBADMSG with *why (damaged), or another
 * -errno with *why NULL (not read: no verdict, bkobj.h B1). */
static int admin_export_copy(struct admin *a, enum admin_where where, const struct cat_extent *x,
			     char *chunk, size_t cap, const char **why)
{
	size_t got = 0;
	int rc = admin_chunk_read(a, where, x->hash, chunk, cap, &got, why);
	if (rc == 0 && (got != x->chunk_len || x->chunk_off + x->len > got)) {
		*why = "wrong length";
		rc = -EBADMSG;
	}
	if (rc != -EBADMSG)
		*why = rc == 0 || rc == -ENOENT ? NULL : strerror(-rc);
	return rc;
}

/* One extent of a file: the cache's copy of its chunk, else BACKING's (the
 * cache's missing: silently; damaged or unreadable: one line saying so,
 * then BACKING's). Only bytes that passed their check are written; both
 * copies bad fails the export naming the chunk and both reasons. */
static int admin_export_chunk(struct admin_copy *c, const struct cat_extent *x, char *chunk,
			      size_t cap, int out, const char *dst)
{
	struct admin *a = c->a;
	char hex[HASH_HEX_LEN + 1], where[PATH_MAX + 512];
	const char *why_cache = NULL, *why_bk = NULL;
	hash_to_hex(x->hash, hex);
	int rc_cache = admin_export_copy(a, ADMIN_IN_CACHE, x, chunk, cap, &why_cache), rc = rc_cache;
	if (rc_cache == -ENOMEM)
		return admin_copy_fail(c, dst, rc_cache);
	if (rc_cache != 0) {
		if (rc_cache != -ENOENT) {
			admin_progress_end();
			admin_err("export: chunk %s: the cache's copy is %s (%s); reading BACKING's", hex,
				  rc_cache == -EBADMSG ? "damaged" : "unreadable", why_cache);
		}
		rc = admin_export_copy(a, ADMIN_ON_BACKING, x, chunk, cap, &why_bk);
	}
	if (rc == 0) {
		ssize_t w = pwrite(out, chunk + x->chunk_off, x->len, (off_t)x->off);
		return w == (ssize_t)x->len ? 0 : admin_copy_fail(c, dst, w < 0 ? -errno : -EIO);
	}
	if (rc_cache == -ENOENT && rc == -EBADMSG) /* the cache had none */
		snprintf(where, sizeof(where), "%s (chunk %s: BACKING's copy damaged: %s)", dst, hex,
			 why_bk);
	else if (rc_cache == -ENOENT)
		snprintf(where, sizeof(where), "%s (chunk %s)", dst, hex);
	else /* both bad: both reasons */
		snprintf(where, sizeof(where), "%s (chunk %s: the cache's copy %s: %s; BACKING's copy %s%s)",
			 dst, hex, rc_cache == -EBADMSG ? "damaged" : "unreadable", why_cache,
			 rc == -EBADMSG ? "damaged: " : rc == -ENOENT ? "missing" : "unreadable: ",
			 rc == -ENOENT ? "" : why_bk);
	return admin_copy_fail(c, where, rc == -EBADMSG ? -EIO : rc);
}

static int admin_export_file_cat(struct admin_copy *c, const struct cat_inode *in, int ddir,
				 const char *dname, const char *dst)
{
	struct admin *a = c->a;
	int out = admin_dst_file(c, ddir, dname, dst);
	if (out < 0)
		return out;
	char *chunk = malloc(16u << 20); /* the chunker's maximum is 4 MiB; room to spare */
	int rc = chunk ? 0 : -ENOMEM;
	struct cat_extent ext[64];
	uint64_t off = 0;
	while (rc == 0) {
		int n = cat_extents(a->cat, in->ino, off, ext, 64);
		if (n <= 0) {
			rc = n;
			break;
		}
		for (int i = 0; i < n && rc == 0; i++)
			if ((rc = admin_export_chunk(c, &ext[i], chunk, 16u << 20, out, dst)) == 0) {
				off = ext[i].off + ext[i].len;
				c->done += ext[i].len;
				admin_progress_bytes(c->label, c->done, c->total);
			}
	}
	if (rc == 0 && (ftruncate(out, (off_t)in->size) != 0 || fsync(out) != 0))
		rc = admin_copy_fail(c, dst, -errno);
	if (rc == 0) {
		struct timespec ts[2] = { { in->atime_ns / 1000000000, in->atime_ns % 1000000000 },
					  { in->mtime_ns / 1000000000, in->mtime_ns % 1000000000 } };
		fchmod(out, in->mode & 07777);
		futimens(out, ts);
	}
	free(chunk);
	close(out);
	return rc ? admin_copy_fail(c, dst, rc) : 0;
}

static int admin_export_cat(struct admin_copy *c, uint64_t ino, int ddir, const char *dname,
			    const char *dst)
{
	struct admin *a = c->a;
	struct cat_inode in;
	int rc = cat_getattr(a->cat, ino, &in);
	if (rc != 0)
		return admin_copy_fail(c, dst, rc);
	if (S_ISREG(in.mode))
		return admin_export_file_cat(c, &in, ddir, dname, dst);
	if (S_ISLNK(in.mode)) {
		char target[PATH_MAX];
		rc = cat_readlink(a->cat, ino, target, sizeof(target));
		if (rc < 0)
			return admin_copy_fail(c, dst, rc);
		return admin_dst_symlink(c, target, ddir, dname, dst);
	}
	if (!S_ISDIR(in.mode))
		return 0;
	int out = admin_dst_dir(c, ddir, dname, dst);
	if (out < 0)
		return out;
	struct admin_entries l = { 0 };
	rc = cat_readdir(a->cat, ino, 0, admin_entry_add, &l);
	for (size_t i = 0; i < l.n && rc == 0; i++) {
		char t[PATH_MAX];
		if (snprintf(t, sizeof(t), "%s/%s", dst, l.v[i].name) >= (int)sizeof(t))
			rc = admin_copy_fail(c, dst, -ENAMETOOLONG);
		else
			rc = admin_export_cat(c, l.v[i].ino, out, l.v[i].name, t);
	}
	free(l.v);
	if (rc == 0) {
		struct timespec ts[2] = { { in.atime_ns / 1000000000, in.atime_ns % 1000000000 },
					  { in.mtime_ns / 1000000000, in.mtime_ns % 1000000000 } };
		fchmod(out, in.mode & 07777);
		futimens(out, ts);
	}
	close(out);
	return rc ? admin_copy_fail(c, dst, rc) : 0;
}

/* ---- export ---- */

int admin_cmd_export(struct admin *a)
{
	if (a->npos != 2) {
		admin_err("export: expected GEN DIR (see ckptfs-admin export --help)");
		return ADMIN_USAGE;
	}
	struct cat_gen g;
	if (!a->mount[0] && admin_shared(a)) {
		admin_err("export: %s is the cache of a node of a shared catalog: the generation's"
			  " files are in PostgreSQL, not in this cache's catalog file; export through"
			  " the mount (MOUNTPOINT instead of --cache)", a->cache);
		return ADMIN_UNSUPPORTED;
	}
	int rc = admin_resolve_gen(a, a->pos[0], &g);
	if (rc != ADMIN_OK)
		return rc;
	char label[PATH_MAX + CAT_NAME_MAX + 2];
	admin_gen_label(a, &g, label, sizeof(label));
	if (g.state == GEN_OPEN && !a->force) {
		admin_err("export %s: it is open (still being written): its files may be incomplete; "
			  "add --force to export it anyway", label);
		return ADMIN_BUSY;
	}
	if (g.state != GEN_OPEN && g.state != GEN_COMMITTED && g.state != GEN_HELD) {
		admin_err("export %s: it is %s: nothing left to export", label, cat_gen_state_name(g.state));
		return ADMIN_NO_GEN;
	}
	const char *dir = a->pos[1];
	if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
		admin_err("export: DIR %s: cannot create: %s", dir, strerror(errno));
		return admin_exit_for(errno);
	}
	char dst[PATH_MAX], tmpname[PATH_MAX], tmp[PATH_MAX * 2];
	snprintf(dst, sizeof(dst), "%s/%s", dir, g.name);
	if (admin_copy_tmpname(tmpname, sizeof(tmpname), g.name, "export") != 0) {
		admin_err("export: DIR %s: no random bytes for a temporary name", dir);
		return ADMIN_PROBLEM;
	}
	snprintf(tmp, sizeof(tmp), "%s/%s", dir, tmpname);
	/* C1: DIR opened once; everything below is made beneath this fd */
	int pfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (pfd < 0) {
		int e = errno;
		admin_err("export: DIR %s: cannot open: %s", dir,
			  e == ELOOP || e == ENOTDIR ? "it is a symbolic link or not a directory (give "
						       "the directory itself)"
						     : strerror(e));
		return admin_exit_for(e);
	}
	struct stat sb;
	if (fstatat(pfd, g.name, &sb, AT_SYMLINK_NOFOLLOW) == 0) {
		admin_err("export: %s already exists: remove it or choose another DIR", dst);
		close(pfd);
		return ADMIN_BUSY;
	}
	if (!a->mount[0] && (rc = admin_need_objects(a)) != ADMIN_OK) {
		close(pfd);
		return rc;
	}
	struct admin_copy c = { .a = a, .label = "export", .total = g.logical_bytes,
				.pfd = pfd, .topname = tmpname, .topfd = -1 };
	c.buf = malloc(ADMIN_COPY_BUF);
	if (!c.buf) {
		close(pfd);
		return ADMIN_PROBLEM;
	}
	if (a->mount[0]) {
		char src[PATH_MAX * 2];
		snprintf(src, sizeof(src), "%s/%s", a->mount, label);
		rc = admin_copy_tree(&c, src, tmp);
	} else {
		rc = admin_export_cat(&c, g.root, pfd, tmpname, tmp);
	}
	if (rc == 0)
		rc = admin_copy_finish(&c, g.name, dst);
	admin_progress_end();
	free(c.buf);
	if (rc != 0 && c.made_top) /* never what another user made under that name */
		admin_rm_top(&c);
	if (c.topfd >= 0)
		close(c.topfd);
	close(pfd);
	if (rc != 0) {
		admin_err("export %s: %s: %s; nothing left in %s", label, c.where, strerror(-c.err), dir);
		return c.err == -EEXIST ? ADMIN_BUSY : ADMIN_PROBLEM;
	}
	if (a->json) {
		printf("{\"generation\": ");
		admin_json_str(stdout, label);
		printf(", \"path\": ");
		admin_json_str(stdout, dst);
		printf(", \"bytes\": %" PRIu64 ", \"files\": %" PRIu64 ", \"mode\": \"%s\"}\n", c.done,
		       g.files, a->mount[0] ? "mounted" : "offline");
	} else {
		char s[32];
		printf("exported %s to %s (%" PRIu64 " files, %s)%s\n", label, dst, g.files,
		       admin_size(g.logical_bytes, s), a->mount[0] ? "" : " [offline]");
	}
	return ADMIN_OK;
}

/* ---- import ---- */

static void admin_pattern_data(void *arg, const char *key, const char *value)
{
	if (strcmp(key, "gen_pattern") == 0)
		snprintf(arg, 1024, "%s", value);
}

/* The generation line of a path (user.ckptfs.generation): state=...; "" if none. */
static void admin_gen_xattr(const char *path, char *buf, size_t size)
{
	ssize_t n = getxattr(path, "user.ckptfs.generation", buf, size - 1);
	buf[n > 0 ? n : 0] = '\0';
}

/* The deepest existing part of SERIES, as the daemon answers for it. */
static int admin_import_series_outside(const char *series, const char *deepest)
{
	char line[512];
	if (getxattr(deepest, "user.ckptfs.generation", line, sizeof(line)) >= 0 || errno == ERANGE) {
		admin_err("import: SERIES '%s' is inside a generation: a series is a directory outside "
			  "generations", series);
		return ADMIN_BAD_NAME;
	}
	if (errno != ENODATA) {
		admin_err("import: SERIES '%s': cannot tell whether it is inside a generation: %s",
			  series, strerror(errno));
		return admin_exit_for(errno);
	}
	return ADMIN_OK;
}

/* The parts of SERIES from first on are made by mkdir -p: none may be a
 * generation name, whose mkdir would start a generation to import into. */
static int admin_import_series_new(const char *series, char *first, char **save,
				   const regex_t *gen_re, const char *deepest)
{
	for (char *t = first; t; t = strtok_r(NULL, "/", save)) {
		if (gen_re && regexec(gen_re, t, 0, NULL, 0) == 0) {
			admin_err("import: SERIES '%s': '%s' is a generation name: a series is a "
				  "directory outside generations", series, t);
			return ADMIN_BAD_NAME;
		}
	}
	return admin_import_series_outside(series, deepest);
}

/* SERIES must be outside generations: its deepest existing part decides,
 * as the daemon sees it (through the mount, not the local catalog: on a node
 * of a shared catalog that holds no namespace, and another node's
 * generation must be found as surely as this one's). Entries under a
 * generation root are looked up afresh (ns_entry_timeout 0), and a part
 * inside a generation answers user.ckptfs.generation, one outside ENODATA. */
static int admin_import_series_ok(struct admin *a, const char *series, const regex_t *gen_re)
{
	char walk[PATH_MAX * 2], *save = NULL;
	char deepest[PATH_MAX * 2];
	snprintf(walk, sizeof(walk), "%s", series);
	snprintf(deepest, sizeof(deepest), "%s", a->mount);
	size_t len = strlen(deepest);
	for (char *t = strtok_r(walk, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
		struct stat sb;
		int n = snprintf(deepest + len, sizeof(deepest) - len, "/%s", t);
		if (n < 0 || (size_t)n >= sizeof(deepest) - len) {
			admin_err("import: SERIES '%s': too long", series);
			return ADMIN_BAD_NAME;
		}
		if (lstat(deepest, &sb) != 0) {
			if (errno != ENOENT) {
				admin_err("import: SERIES '%s': %s: %s", series, t, strerror(errno));
				return admin_exit_for(errno);
			}
			deepest[len] = '\0';
			return admin_import_series_new(series, t, &save, gen_re, deepest);
		}
		if (!S_ISDIR(sb.st_mode)) {
			admin_err("import: SERIES '%s': '%s' is not a directory", series, t);
			return ADMIN_BAD_NAME;
		}
		len += (size_t)n;
	}
	return admin_import_series_outside(series, deepest);
}

int admin_cmd_import(struct admin *a)
{
	if (a->npos != 2) {
		admin_err("import: expected DIR SERIES (see ckptfs-admin import --help)");
		return ADMIN_USAGE;
	}
	if (!a->mount[0]) {
		admin_err("import: works only through the mounted file system: give MOUNTPOINT, "
			  "not --cache");
		return ADMIN_USAGE;
	}
	const char *src = a->pos[0], *series = a->pos[1];
	struct stat sb;
	if (lstat(src, &sb) != 0 || (!S_ISDIR(sb.st_mode) && !S_ISREG(sb.st_mode))) {
		admin_err("import: DIR %s: %s", src,
			  errno && lstat(src, &sb) != 0 ? strerror(errno) : "not a directory or a file");
		return ADMIN_USAGE;
	}
	/* NAME: --name, or the last part of DIR */
	char base[PATH_MAX];
	snprintf(base, sizeof(base), "%s", src);
	size_t bl = strlen(base);
	while (bl > 1 && base[bl - 1] == '/')
		base[--bl] = '\0';
	const char *name = a->name ? a->name : (strrchr(base, '/') ? strrchr(base, '/') + 1 : base);
	if (!*name || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0 ||
	    strlen(name) > CAT_NAME_MAX) {
		admin_err("import: NAME '%s': a generation name is one part: no '/', not '.' or '..'",
			  name);
		return ADMIN_BAD_NAME;
	}
	int rc = admin_check_relpath("SERIES", series);
	if (rc != ADMIN_OK)
		return rc;
	/* the daemon's naming rule: refuse a name that would not be a generation */
	char pattern[1024] = "", msg[512];
	int err = admin_ctl(a, "hello", admin_pattern_data, pattern, msg, sizeof(msg));
	if (err != 0) {
		admin_err("import: the daemon did not answer: %s", msg);
		return err < 0 ? ADMIN_NO_DAEMON : admin_exit_for(err);
	}
	regex_t re;
	bool have_re = pattern[0] && regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB) == 0;
	if (have_re && regexec(&re, name, 0, NULL, 0) != 0) {
		admin_err("import: NAME '%s' is not a generation name on this mount (pattern %s): "
			  "give --name NAME", name, pattern);
		rc = ADMIN_BAD_NAME;
	}
	if (rc == ADMIN_OK)
		rc = admin_import_series_ok(a, series, have_re ? &re : NULL);
	if (have_re)
		regfree(&re);
	if (rc != ADMIN_OK)
		return rc;
	char sdir[PATH_MAX * 2], dst[PATH_MAX * 3], tmpname[PATH_MAX], tmp[PATH_MAX * 4];
	snprintf(sdir, sizeof(sdir), "%s/%s", a->mount, series);
	snprintf(dst, sizeof(dst), "%s/%s", sdir, name);
	if (admin_copy_tmpname(tmpname, sizeof(tmpname), name, "import") != 0) {
		admin_err("import: no random bytes for a temporary name in %s", series);
		return ADMIN_PROBLEM;
	}
	snprintf(tmp, sizeof(tmp), "%s/%s", sdir, tmpname);
	/* C1: mkdir -p SERIES beneath the mount's fd, then SERIES opened once,
	 * no component followed */
	int mfd = open(a->mount, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (mfd < 0) {
		admin_err("import: MOUNTPOINT %s: cannot open: %s", a->mount, strerror(errno));
		return admin_exit_for(errno);
	}
	char walk[PATH_MAX * 2];
	snprintf(walk, sizeof(walk), "%s", series);
	for (char *p = walk;; p++) {
		if (*p == '/' || *p == '\0') {
			char ch = *p;
			*p = '\0';
			int e = p > walk ? safe_mkdirat(mfd, walk, 0755) : 0;
			if (e != 0) {
				admin_err("import: cannot create %s/%s: %s", a->mount, walk,
					  e == -ELOOP ? "a part of it is a symbolic link" : strerror(-e));
				close(mfd);
				return admin_exit_for(-e);
			}
			*p = ch;
			if (!ch)
				break;
		}
	}
	int pfd = safe_openat(mfd, series, O_RDONLY | O_DIRECTORY, 0);
	close(mfd);
	if (pfd < 0) {
		admin_err("import: SERIES %s: cannot open: %s", series,
			  pfd == -ELOOP ? "a part of it is a symbolic link" : strerror(-pfd));
		return admin_exit_for(-pfd);
	}
	if (fstatat(pfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0) {
		admin_err("import: %s/%s already exists", series, name);
		close(pfd);
		return ADMIN_BUSY;
	}
	admin_sum_bytes = 0;
	nftw(src, admin_sum_one, 16, FTW_PHYS);
	struct admin_copy c = { .a = a, .label = "import", .total = admin_sum_bytes,
				.pfd = pfd, .topname = tmpname, .topfd = -1 };
	c.buf = malloc(ADMIN_COPY_BUF);
	if (!c.buf) {
		close(pfd);
		return ADMIN_PROBLEM;
	}
	rc = admin_copy_tree(&c, src, tmp);
	if (rc == 0)
		rc = admin_copy_finish(&c, name, dst);
	admin_progress_end();
	free(c.buf);
	if (rc != 0 && c.made_top) /* never what another user made under that name */
		admin_rm_top(&c);
	if (c.topfd >= 0)
		close(c.topfd);
	close(pfd);
	if (rc != 0) {
		admin_err("import %s: %s: %s; nothing imported", src, c.where, strerror(-c.err));
		return c.err == -EEXIST ? ADMIN_BUSY : admin_exit_for(c.err);
	}
	/* the rename commits it (rule "rename") once no write handle is open */
	char line[512] = "";
	for (int i = 0; i < 200; i++) {
		admin_gen_xattr(dst, line, sizeof(line));
		if (strstr(line, "state=committed"))
			break;
		struct timespec ts = { 0, 50 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	bool committed = strstr(line, "state=committed") != NULL;
	if (a->json) {
		printf("{\"generation\": ");
		char label[PATH_MAX * 2];
		snprintf(label, sizeof(label), "%s/%s", series, name);
		admin_json_str(stdout, label);
		printf(", \"bytes\": %" PRIu64 ", \"state\": \"%s\"}\n", c.done,
		       committed ? "committed" : "open");
	} else {
		char s[32];
		printf("imported %s as %s/%s (%s, %s)\n", src, series, name, admin_size(c.done, s),
		       committed ? "committed" : "not committed yet");
	}
	if (!committed) {
		admin_err("import: %s/%s did not commit within 10 s (%s)", series, name,
			  line[0] ? line : "no generation line");
		return ADMIN_PROBLEM;
	}
	return ADMIN_OK;
}
