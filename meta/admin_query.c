/* admin_query — read-only catalog questions of ckptfs-admin (see admin_query.h).
 *
 * Statements are prepared on first use on the catalog's own connection and
 * kept until aq_close. Every call: cat_lock, a read transaction, step rows
 * into a malloc'd array, end, unlock. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "admin_query.h"
#include "catalog_internal.h"
#include "log.h"

enum aq_sid {
	AQ_USAGE, AQ_SHARES, AQ_FILES, AQ_GEN_CHUNKS, AQ_CHUNK_USERS, AQ_DIRENT_OF, AQ_CHUNK_KNOWN,
	AQ_GEN_STATE, AQ_COUNT
};

#define AQ_IS_FILE "(i.mode & 61440) = 32768"
/* (hash) of every extent and pending row of generation ?1's inodes */
#define AQ_REFS                                                                          \
	"SELECT e.hash AS hash FROM inodes i JOIN extents e ON e.ino = i.ino WHERE i.gen = ?1" \
	" UNION ALL SELECT p.hash FROM inodes i JOIN pending p ON p.ino = i.ino WHERE i.gen = ?1"

static const char *const aq_sql[AQ_COUNT] = {
	[AQ_USAGE] = "SELECT COALESCE(SUM(g.n), 0), COUNT(*), COALESCE(SUM(c.plain_len), 0),"
		     " COALESCE(SUM(c.refcount = g.n), 0),"
		     " COALESCE(SUM(CASE WHEN c.refcount = g.n THEN c.plain_len ELSE 0 END), 0),"
		     " COALESCE(SUM(CASE WHEN c.refcount = g.n THEN COALESCE(c.stored_len, 0)"
		     " ELSE 0 END), 0)"
		     " FROM (SELECT hash, COUNT(*) AS n FROM (" AQ_REFS ") GROUP BY hash) g"
		     " JOIN chunks c ON c.hash = g.hash",
	[AQ_SHARES] = "WITH mine AS (SELECT DISTINCT e.hash AS hash FROM inodes i JOIN extents e"
		      " ON e.ino = i.ino WHERE i.gen = ?1),"
		      " pairs AS (SELECT DISTINCT COALESCE(i.gen, 0) AS gen, e.hash AS hash"
		      " FROM extents e JOIN inodes i ON i.ino = e.ino"
		      " WHERE e.hash IN (SELECT hash FROM mine) AND COALESCE(i.gen, 0) <> ?1)"
		      " SELECT p.gen, COUNT(*), COALESCE(SUM(c.plain_len), 0) FROM pairs p"
		      " JOIN chunks c ON c.hash = p.hash GROUP BY p.gen ORDER BY p.gen",
	[AQ_FILES] = "WITH RECURSIVE t(ino) AS (SELECT root FROM generations WHERE id = ?1"
		     " AND root <> 0 UNION SELECT d.ino FROM dirents d JOIN t ON d.parent = t.ino)"
		     " SELECT i.ino, i.size, (SELECT COUNT(*) FROM extents x WHERE x.ino = i.ino),"
		     " (SELECT COUNT(DISTINCT x.hash) FROM extents x WHERE x.ino = i.ino)"
		     " FROM t CROSS JOIN inodes i ON i.ino = t.ino WHERE " AQ_IS_FILE
		     " ORDER BY i.ino",
	[AQ_GEN_CHUNKS] = "SELECT DISTINCT c.hash, c.plain_len, COALESCE(c.stored_len, -1)"
			  " FROM inodes i JOIN extents e ON e.ino = i.ino"
			  " JOIN chunks c ON c.hash = e.hash WHERE i.gen = ?1",
	[AQ_CHUNK_USERS] = "SELECT DISTINCT e.ino, COALESCE(i.gen, 0) FROM extents e"
			   " JOIN inodes i ON i.ino = e.ino WHERE e.hash = ?1 ORDER BY e.ino",
	[AQ_DIRENT_OF] = "SELECT parent, name FROM dirents WHERE ino = ?1 ORDER BY id LIMIT 1",
	[AQ_CHUNK_KNOWN] = "SELECT 1 FROM chunks WHERE hash = ?1",
	[AQ_GEN_STATE] = "SELECT state FROM generations WHERE id = ?1",
};

struct aq {
	struct cat *cat;
	sqlite3_stmt *stmt[AQ_COUNT];
};

int aq_open(struct cat *cat, struct aq **out)
{
	struct aq *q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	q->cat = cat;
	*out = q;
	return 0;
}

void aq_close(struct aq *q)
{
	if (!q)
		return;
	for (int i = 0; i < AQ_COUNT; i++)
		sqlite3_finalize(q->stmt[i]);
	free(q);
}

/* ---- running a statement: under cat_lock, in a read transaction ---- */

static int aq_fail(struct aq *q, enum aq_sid id, int src)
{
	log_error("catalog %s: admin query %d failed: %s", q->cat->path, (int)id,
		  sqlite3_errstr(src));
	return src == SQLITE_BUSY ? -EBUSY : -EIO;
}

/* Locks, begins, returns the statement ready to bind (or NULL with *rc). */
static sqlite3_stmt *aq_start(struct aq *q, enum aq_sid id, int *rc)
{
	cat_lock(q->cat);
	*rc = cat_begin_read(q->cat);
	if (*rc == 0 && !q->stmt[id]) {
		int src = sqlite3_prepare_v2(q->cat->db, aq_sql[id], -1, &q->stmt[id], NULL);
		if (src != SQLITE_OK) {
			log_error("catalog %s: cannot prepare an admin query: %s", q->cat->path,
				  sqlite3_errmsg(q->cat->db));
			*rc = -EIO;
		}
	}
	if (*rc != 0) {
		cat_end(q->cat, *rc);
		cat_unlock(q->cat);
		return NULL;
	}
	return q->stmt[id];
}

static int aq_finish(struct aq *q, enum aq_sid id, int rc)
{
	sqlite3_reset(q->stmt[id]);
	sqlite3_clear_bindings(q->stmt[id]);
	rc = cat_end(q->cat, rc);
	cat_unlock(q->cat);
	return rc;
}

/* Steps once: 1 for a row, 0 at the end, or -errno. */
static int aq_step(struct aq *q, enum aq_sid id)
{
	int src = sqlite3_step(q->stmt[id]);
	if (src == SQLITE_ROW)
		return 1;
	if (src == SQLITE_DONE)
		return 0;
	return aq_fail(q, id, src);
}

static uint64_t aq_u64(sqlite3_stmt *st, int col)
{
	int64_t v = sqlite3_column_int64(st, col);
	return v < 0 ? 0 : (uint64_t)v;
}

/* Grows a malloc'd array of elem-sized items to hold one more. */
static int aq_grow(void **v, size_t n, size_t *cap, size_t elem)
{
	if (n < *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : 16;
	void *p = realloc(*v, ncap * elem);
	if (!p)
		return -ENOMEM;
	*v = p;
	*cap = ncap;
	return 0;
}

/* ---- queries ---- */

int aq_gen_usage(struct aq *q, uint64_t gen_id, struct aq_gen_usage *out)
{
	int rc;
	memset(out, 0, sizeof(*out));
	sqlite3_stmt *st = aq_start(q, AQ_USAGE, &rc);
	if (!st)
		return rc;
	sqlite3_bind_int64(st, 1, (int64_t)gen_id);
	rc = aq_step(q, AQ_USAGE);
	if (rc == 1) {
		out->extents = aq_u64(st, 0);
		out->chunks = aq_u64(st, 1);
		out->unique_bytes = aq_u64(st, 2);
		out->exclusive_chunks = aq_u64(st, 3);
		out->exclusive_bytes = aq_u64(st, 4);
		out->exclusive_stored = aq_u64(st, 5);
		rc = 0;
	}
	return aq_finish(q, AQ_USAGE, rc);
}

int aq_gen_shares(struct aq *q, uint64_t gen_id, struct aq_share **out, size_t *n)
{
	int rc;
	size_t cap = 0;
	*out = NULL;
	*n = 0;
	sqlite3_stmt *st = aq_start(q, AQ_SHARES, &rc);
	if (!st)
		return rc;
	sqlite3_bind_int64(st, 1, (int64_t)gen_id);
	while ((rc = aq_step(q, AQ_SHARES)) == 1) {
		if ((rc = aq_grow((void **)out, *n, &cap, sizeof(**out))) != 0)
			break;
		(*out)[*n] = (struct aq_share){ aq_u64(st, 0), aq_u64(st, 1), aq_u64(st, 2) };
		(*n)++;
	}
	return aq_finish(q, AQ_SHARES, rc);
}

int aq_gen_files(struct aq *q, uint64_t gen_id, struct aq_file **out, size_t *n)
{
	int rc;
	size_t cap = 0;
	*out = NULL;
	*n = 0;
	sqlite3_stmt *st = aq_start(q, AQ_FILES, &rc);
	if (!st)
		return rc;
	sqlite3_bind_int64(st, 1, (int64_t)gen_id);
	while ((rc = aq_step(q, AQ_FILES)) == 1) {
		if ((rc = aq_grow((void **)out, *n, &cap, sizeof(**out))) != 0)
			break;
		(*out)[*n] = (struct aq_file){ aq_u64(st, 0), aq_u64(st, 1), aq_u64(st, 2),
					       aq_u64(st, 3) };
		(*n)++;
	}
	return aq_finish(q, AQ_FILES, rc);
}

int aq_gen_chunks(struct aq *q, uint64_t gen_id, struct aq_chunk **out, size_t *n)
{
	int rc;
	size_t cap = 0;
	*out = NULL;
	*n = 0;
	sqlite3_stmt *st = aq_start(q, AQ_GEN_CHUNKS, &rc);
	if (!st)
		return rc;
	sqlite3_bind_int64(st, 1, (int64_t)gen_id);
	while ((rc = aq_step(q, AQ_GEN_CHUNKS)) == 1) {
		if (sqlite3_column_bytes(st, 0) != CAT_HASH_LEN)
			continue;
		if ((rc = aq_grow((void **)out, *n, &cap, sizeof(**out))) != 0)
			break;
		struct aq_chunk *c = &(*out)[(*n)++];
		memcpy(c->hash, sqlite3_column_blob(st, 0), CAT_HASH_LEN);
		c->plain_len = aq_u64(st, 1);
		c->stored_len = sqlite3_column_int64(st, 2);
	}
	return aq_finish(q, AQ_GEN_CHUNKS, rc);
}

int aq_chunk_users(struct aq *q, const uint8_t hash[CAT_HASH_LEN], struct aq_user **out,
		   size_t *n)
{
	int rc;
	size_t cap = 0;
	*out = NULL;
	*n = 0;
	sqlite3_stmt *st = aq_start(q, AQ_CHUNK_USERS, &rc);
	if (!st)
		return rc;
	sqlite3_bind_blob(st, 1, hash, CAT_HASH_LEN, SQLITE_STATIC);
	while ((rc = aq_step(q, AQ_CHUNK_USERS)) == 1) {
		if ((rc = aq_grow((void **)out, *n, &cap, sizeof(**out))) != 0)
			break;
		(*out)[*n] = (struct aq_user){ aq_u64(st, 0), aq_u64(st, 1) };
		(*n)++;
	}
	return aq_finish(q, AQ_CHUNK_USERS, rc);
}

int aq_path(struct aq *q, uint64_t ino, char *buf, size_t size)
{
	/* built right to left in tmp, then copied */
	char tmp[4096];
	size_t pos = sizeof(tmp) - 1;
	tmp[pos] = '\0';
	int rc = 0;
	for (int depth = 0; ino != CAT_ROOT_INO && depth < 1024 && rc == 0; depth++) {
		sqlite3_stmt *st = aq_start(q, AQ_DIRENT_OF, &rc);
		if (!st)
			break;
		sqlite3_bind_int64(st, 1, (int64_t)ino);
		rc = aq_step(q, AQ_DIRENT_OF);
		const char *name = "?";
		char namebuf[CAT_NAME_MAX + 1];
		uint64_t parent = CAT_ROOT_INO;
		if (rc == 1) {
			snprintf(namebuf, sizeof(namebuf), "%s",
				 (const char *)sqlite3_column_text(st, 1));
			name = namebuf;
			parent = aq_u64(st, 0);
			rc = 0;
		}
		rc = aq_finish(q, AQ_DIRENT_OF, rc);
		size_t len = strlen(name);
		if (rc != 0 || len + 1 > pos)
			break;
		pos -= len;
		memcpy(tmp + pos, name, len);
		tmp[--pos] = '/';
		ino = parent;
	}
	if (rc != 0)
		return rc;
	snprintf(buf, size, "%s", pos == sizeof(tmp) - 1 ? "/" : tmp + pos);
	return 0;
}

int aq_gc_check(struct aq *q, const uint8_t hash[CAT_HASH_LEN], bool dry_run, aq_remove_fn remove,
		void *arg, bool *orphan)
{
	int rc;
	*orphan = false;
	sqlite3_stmt *st = aq_start(q, AQ_CHUNK_KNOWN, &rc);
	if (!st)
		return rc;
	sqlite3_bind_blob(st, 1, hash, CAT_HASH_LEN, SQLITE_STATIC);
	rc = aq_step(q, AQ_CHUNK_KNOWN);
	if (rc == 0) {
		*orphan = true;
		if (!dry_run)
			rc = remove(arg, hash); /* still under the lock: invariant 2 */
	} else if (rc == 1) {
		rc = 0;
	}
	return aq_finish(q, AQ_CHUNK_KNOWN, rc);
}

int aq_gen_durable(struct aq *q, uint64_t gen_id, bool *durable)
{
	int rc;
	*durable = false;
	sqlite3_stmt *st = aq_start(q, AQ_GEN_STATE, &rc);
	if (!st)
		return rc;
	sqlite3_bind_int64(st, 1, (int64_t)gen_id);
	rc = aq_step(q, AQ_GEN_STATE);
	if (rc == 1) {
		*durable = sqlite3_column_int(st, 0) == GEN_COMMITTED;
		rc = 0;
	} else if (rc == 0) {
		rc = -ENOENT;
	}
	return aq_finish(q, AQ_GEN_STATE, rc);
}

/* ---- garbage collection of chunk objects ---- */

static int aq_hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* A chunk object's name: 64 lowercase hex digits, nothing else. */
static bool aq_parse_name(const char *name, uint8_t hash[CAT_HASH_LEN])
{
	if (strlen(name) != 2 * CAT_HASH_LEN)
		return false;
	for (int i = 0; i < CAT_HASH_LEN; i++) {
		int hi = aq_hexval(name[2 * i]), lo = aq_hexval(name[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return false;
		hash[i] = (uint8_t)(hi << 4 | lo);
	}
	return true;
}

/* One leaf directory chunks/ab/cd: prefix is "abcd"; a name that does not
 * start with it is no object the store could read (it is left alone). */
static int aq_gc_dir(struct aq *q, int dfd, const char *path, const char *prefix, bool dry_run,
		     aq_remove_fn remove, void *remove_arg, struct aq_gc_result *out)
{
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return -errno;
	}
	struct dirent *de;
	int rc = 0;
	while (rc == 0 && (de = readdir(d)) != NULL) {
		uint8_t hash[CAT_HASH_LEN];
		if (!aq_parse_name(de->d_name, hash) || strncmp(de->d_name, prefix, 4) != 0)
			continue;
		struct stat sb;
		if (fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(sb.st_mode))
			continue;
		out->objects++;
		bool orphan;
		int rrc = aq_gc_check(q, hash, dry_run, remove, remove_arg, &orphan);
		if (orphan) {
			out->orphans++;
			out->orphan_bytes += (uint64_t)sb.st_size;
			if (!dry_run && rrc == 0)
				out->removed++;
		}
		if (rrc != 0 && !orphan) { /* the catalog failed: stop */
			rc = rrc;
		} else if (rrc != 0) {
			log_error("gc: cannot remove %s/%s: %s", path, de->d_name, strerror(-rrc));
			out->failed++;
		}
	}
	closedir(d);
	return rc;
}

int aq_gc_walk(struct aq *q, const char *objects_dir, bool dry_run, aq_remove_fn remove,
	       void *remove_arg, aq_progress_fn progress, void *progress_arg,
	       struct aq_gc_result *out)
{
	memset(out, 0, sizeof(*out));
	int root = open(objects_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return errno == ENOENT ? 0 : -errno;
	int rc = 0;
	for (int a = 0; a < 256 && rc == 0; a++) {
		char outer[3], inner[3], path[PATH_MAX];
		snprintf(outer, sizeof(outer), "%02x", a);
		int ofd = openat(root, outer, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (ofd >= 0) {
			for (int b = 0; b < 256 && rc == 0; b++) {
				snprintf(inner, sizeof(inner), "%02x", b);
				int ifd = openat(ofd, inner, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
				if (ifd < 0)
					continue;
				char prefix[5];
				snprintf(path, sizeof(path), "%s/%s/%s", objects_dir, outer, inner);
				snprintf(prefix, sizeof(prefix), "%s%s", outer, inner);
				rc = aq_gc_dir(q, ifd, path, prefix, dry_run, remove, remove_arg, out);
			}
			close(ofd);
		}
		if (progress)
			progress(progress_arg, (uint64_t)a + 1, 256);
	}
	close(root);
	return rc;
}
