/* admin_query — read-only catalog questions of ckptfs-admin (see admin_query.h).
 *
 * Statements are prepared on first use on the catalog's own connection and
 * kept until aq_close. Every call: cat_lock, a read transaction, step rows
 * into a malloc'd array, end, unlock. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "admin_query.h"
#include "backing.h"
#include "claim.h"
#include "storesmall.h"
#include "catalog_internal.h"
#include "log.h"
#include "manifest.h"
#include "pack.h"
#include "safeopen.h"

enum aq_sid {
	AQ_USAGE, AQ_SHARES, AQ_FILES, AQ_GEN_CHUNKS, AQ_CHUNK_USERS, AQ_DIRENT_OF, AQ_CHUNK_KNOWN,
	AQ_PACK_KNOWN,
	AQ_TREE_DIRTY, AQ_COUNT
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
	/* on BACKING an object is also kept while the uploader has work on its hash
	 * or a manifest removal queued (it removes objects itself, in order) */
	[AQ_CHUNK_KNOWN] = "SELECT (SELECT COUNT(*) FROM chunks WHERE hash = ?1)"
			   " + CASE WHEN ?2 THEN (SELECT COUNT(*) FROM uploads WHERE hash = ?1)"
			   " + (SELECT COUNT(*) FROM uploads WHERE kind = 4) ELSE 0 END",
	/* invariant 6: a pack's row, an upload row about it, a manifest removal */
	[AQ_PACK_KNOWN] = "SELECT (SELECT COUNT(*) FROM packs WHERE name = ?1)"
			  " + (SELECT COUNT(*) FROM uploads WHERE hash = ?1)"
			  " + (SELECT COUNT(*) FROM uploads WHERE kind = 4)",
	/* files outside generations (gen NULL, as upload.c's U_TREE_UNUPLOADED)
	 * naming chunks not on BACKING: per file, those chunks and their bytes */
	[AQ_TREE_DIRTY] = "SELECT ino, COUNT(*), COALESCE(SUM(sl), 0) FROM (SELECT DISTINCT i.ino AS ino,"
			  " c.hash AS h, COALESCE(c.stored_len, 0) AS sl FROM inodes i"
			  " JOIN extents e ON e.ino = i.ino JOIN chunks c ON c.hash = e.hash"
			  " WHERE i.gen IS NULL AND c.uploaded = 0) GROUP BY ino ORDER BY ino",
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

int aq_tree_dirty(struct aq *q, struct aq_tree_dirty *out)
{
	int rc;
	memset(out, 0, sizeof(*out));
	sqlite3_stmt *st = aq_start(q, AQ_TREE_DIRTY, &rc);
	if (!st)
		return rc;
	while ((rc = aq_step(q, AQ_TREE_DIRTY)) == 1) {
		if (out->files < AQ_TREE_DIRTY_NAMED)
			out->ino[out->files] = aq_u64(st, 0);
		out->files++;
		out->chunks += aq_u64(st, 1);
		out->bytes += aq_u64(st, 2);
	}
	return aq_finish(q, AQ_TREE_DIRTY, rc);
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

/* Invariants 2 and 6: statement id (?1 the hash or pack name, ?2 on_backing)
 * says nothing knows it: *orphan, and remove runs under the same lock. */
static int aq_known_check(struct aq *q, enum aq_sid id, const uint8_t hash[CAT_HASH_LEN],
			  bool on_backing, bool dry_run, aq_remove_fn remove, void *arg,
			  bool *orphan)
{
	int rc;
	*orphan = false;
	sqlite3_stmt *st = aq_start(q, id, &rc);
	if (!st)
		return rc;
	sqlite3_bind_blob(st, 1, hash, CAT_HASH_LEN, SQLITE_STATIC);
	if (id == AQ_CHUNK_KNOWN)
		sqlite3_bind_int(st, 2, on_backing);
	rc = aq_step(q, id);
	if (rc == 1) {
		rc = 0;
		if (sqlite3_column_int64(st, 0) == 0) {
			*orphan = true;
			if (!dry_run)
				rc = remove(arg, hash); /* still under the lock: invariant 2 */
		}
	} else if (rc == 0) {
		rc = -EIO;
	}
	return aq_finish(q, id, rc);
}

int aq_gc_check(struct aq *q, const uint8_t hash[CAT_HASH_LEN], bool on_backing, bool dry_run,
		aq_remove_fn remove, void *arg, bool *orphan)
{
	return aq_known_check(q, AQ_CHUNK_KNOWN, hash, on_backing, dry_run, remove, arg, orphan);
}


/* ---- the chunks the manifests on BACKING name (invariant 3) ---- */

struct aq_named {
	uint8_t (*hash)[CAT_HASH_LEN];
	uint8_t *used;
	size_t cap, n; /* cap: a power of two, at most half full */
	uint64_t manifests;
};

/* The slot of hash: its own, or the empty one where it would go. */
static size_t aq_named_slot(const struct aq_named *s, const uint8_t hash[CAT_HASH_LEN])
{
	uint64_t h;
	memcpy(&h, hash, sizeof(h)); /* a SHA-256 is uniform */
	size_t i = (size_t)(h & (s->cap - 1));
	while (s->used[i] && memcmp(s->hash[i], hash, CAT_HASH_LEN) != 0)
		i = (i + 1) & (s->cap - 1);
	return i;
}

static int aq_named_add(struct aq_named *s, const uint8_t hash[CAT_HASH_LEN])
{
	if ((s->n + 1) * 2 > s->cap) {
		struct aq_named t = { .cap = s->cap ? 2 * s->cap : 4096 };
		t.hash = malloc(t.cap * sizeof(*t.hash));
		t.used = calloc(t.cap, 1);
		if (!t.hash || !t.used) {
			free(t.hash);
			free(t.used);
			return -ENOMEM;
		}
		for (size_t i = 0; i < s->cap; i++)
			if (s->used[i]) {
				size_t j = aq_named_slot(&t, s->hash[i]);
				memcpy(t.hash[j], s->hash[i], CAT_HASH_LEN);
				t.used[j] = 1;
			}
		free(s->hash);
		free(s->used);
		s->hash = t.hash;
		s->used = t.used;
		s->cap = t.cap;
	}
	size_t i = aq_named_slot(s, hash);
	if (!s->used[i]) {
		memcpy(s->hash[i], hash, CAT_HASH_LEN);
		s->used[i] = 1;
		s->n++;
	}
	return 0;
}

bool aq_named_has(const struct aq_named *s, const uint8_t hash[CAT_HASH_LEN])
{
	return s->cap && s->used[aq_named_slot(s, hash)];
}

uint64_t aq_named_manifests(const struct aq_named *s)
{
	return s->manifests;
}

void aq_named_free(struct aq_named *s)
{
	if (!s)
		return;
	free(s->hash);
	free(s->used);
	free(s);
}

/* The manifest names of a listing of manifests/gen or manifests/tree
 * (anything else there is no manifest: rebuild ignores it too). */
struct aq_mnames {
	char (*v)[MANIFEST_PATH_MAX];
	size_t n, cap;
	const char *dir;
	bool gen;
};

static int aq_mnames_add(void *arg, const char *name)
{
	struct aq_mnames *l = arg;
	uint64_t id;
	uint32_t version;
	if ((l->gen ? manifest_gen_name_parse(name, &id, &version)
		    : manifest_tree_name_parse(name, &id)) != 0)
		return 0;
	if (aq_grow((void **)&l->v, l->n, &l->cap, sizeof(*l->v)) != 0)
		return -ENOMEM;
	snprintf(l->v[l->n++], sizeof(*l->v), "%s/%s", l->dir, name);
	return 0;
}

/* Adds the chunks of the manifest at path to s; a manifest removed since
 * the listing names nothing any more. */
static int aq_named_read(struct backing *b, const char *path, struct aq_named *s, char *err,
			 size_t errsz)
{
	uint64_t size;
	size_t len = 0;
	char why[MANIFEST_ERR_MAX] = "";
	int rc = backing_stat(b, path, &size);
	if (rc == 0 && size > MANIFEST_SIZE_MAX) { /* never read (DESIGN invariant 7) */
		snprintf(why, sizeof(why), "%" PRIu64 " bytes, more than a manifest may have (%zu)",
			 size, MANIFEST_SIZE_MAX);
		rc = -EFBIG;
	}
	char *buf = rc == 0 ? malloc(size + 1) : NULL;
	if (rc == 0 && !buf)
		rc = -ENOMEM;
	if (rc == 0)
		rc = backing_get(b, path, buf, size + 1, &len); /* +1: a grown file shows */
	if (rc == 0 && len > size) {
		snprintf(why, sizeof(why), "it changed size while read (a manifest is immutable)");
		rc = -EBADMSG;
	}
	struct manifest *m = NULL;
	if (rc == 0 && (rc = manifest_parse(buf, len, &m, why, sizeof(why))) != 0 && rc != -ENOMEM)
		rc = -EBADMSG; /* a parse's -EINVAL is no usage error */
	free(buf);
	for (size_t i = 0; rc == 0 && i < m->n_chunks; i++)
		rc = aq_named_add(s, m->chunks[i].hash);
	manifest_free(m);
	if (rc == -ENOENT)
		return 0;
	if (rc == 0)
		s->manifests++;
	else
		snprintf(err, errsz, "BACKING %s: %s cannot be %s: %s", backing_spec(b), path,
			 why[0] ? "parsed" : "read", why[0] ? why : strerror(-rc));
	return rc;
}

int aq_named_load(struct backing *b, struct aq_named **out, char *err, size_t errsz)
{
	static const char *const dirs[2] = { "manifests/gen", "manifests/tree" };
	*out = NULL;
	struct aq_named *s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errsz, "out of memory");
		return -ENOMEM;
	}
	int rc = 0;
	for (int d = 0; d < 2 && rc == 0; d++) {
		struct aq_mnames l = { .dir = dirs[d], .gen = d == 0 };
		rc = backing_list(b, dirs[d], aq_mnames_add, &l);
		if (rc == -ENOENT)
			rc = 0;
		else if (rc != 0)
			snprintf(err, errsz, "BACKING %s: %s cannot be listed: %s", backing_spec(b),
				 dirs[d], strerror(-rc));
		for (size_t i = 0; i < l.n && rc == 0; i++)
			rc = aq_named_read(b, l.v[i], s, err, errsz);
		free(l.v);
	}
	if (rc != 0) {
		aq_named_free(s);
		return rc;
	}
	*out = s;
	return 0;
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

/* Names of a listing, collected (the lister's callback must not block). */
/* Names of a listing: a chunk object's (64 hex digits) or a pack's
 * ("<64 hex>.ckp", invariant 6); longer ones are no object's. */
#define AQ_NAME_MAX (2 * CAT_HASH_LEN + sizeof(PACK_SUFFIX) - 1)
struct aq_names {
	char (*v)[AQ_NAME_MAX + 1];
	size_t n, cap;
};

static int aq_names_add(void *arg, const char *name)
{
	struct aq_names *l = arg;
	if (strlen(name) > AQ_NAME_MAX)
		return 0;
	if (aq_grow((void **)&l->v, l->n, &l->cap, sizeof(*l->v)) != 0)
		return -ENOMEM;
	snprintf(l->v[l->n++], sizeof(*l->v), "%s", name);
	return 0;
}

static bool aq_is_hex2(const char *s)
{
	return strlen(s) == 2 && aq_hexval(s[0]) >= 0 && aq_hexval(s[1]) >= 0;
}

struct aq_gc_walk {
	struct aq *q;
	const struct aq_objects *o;
	bool dry_run;
	struct aq_gc_result *out;
};

struct aq_gc_remove {
	const struct aq_objects *o;
	const char *rel;
};

static int aq_gc_remove_rel(void *arg, const uint8_t hash[CAT_HASH_LEN])
{
	struct aq_gc_remove *r = arg;
	if (r->o->on_backing && !claim_may_write(r->o->claim))
		return -EROFS; /* invariant 5: at each removal, under the catalog lock */
	return r->o->remove(r->o->arg, r->rel);
}

/* The names in reldir (none if it is absent). A symlink or a file at its
 * name is no directory the store made or reads (invariant 4): left alone,
 * with a warning. Any other failure is logged, naming the directory, and
 * stops the walk. */
static int aq_gc_list(const struct aq_objects *o, const char *reldir, struct aq_names *l)
{
	int rc = o->list(o->arg, reldir, aq_names_add, l);
	if (rc == 0 || rc == -ENOENT)
		return 0;
	if (rc == -ELOOP || rc == -ENOTDIR) {
		log_warn("gc: %s in the %s is not a directory (%s): left alone", reldir, o->where,
			 strerror(-rc));
		l->n = 0;
		return 0;
	}
	log_error("gc: cannot list %s in the %s: %s", reldir, o->where, strerror(-rc));
	return rc;
}

/* The counts of one object (a chunk's or a pack's) that aq_gc_check or its
 * pack twin judged (orphan, rrc: the check's, or the removal's), and what
 * the walk does next: 0 go on (a removal that failed is counted, logged);
 * the error to stop at (the catalog failed; invariant 5's -EROFS). */
static int aq_gc_counted(struct aq_gc_walk *w, const char *rel, uint64_t size, bool orphan,
			 int rrc)
{
	if (orphan) {
		w->out->orphans++;
		w->out->orphan_bytes += size;
		if (!w->dry_run && rrc == 0) {
			w->out->removed++;
			w->out->freed_bytes += size;
		}
	}
	if (rrc != 0 && !orphan) /* the catalog failed: stop */
		return rrc;
	if (rrc == -EROFS && w->o->on_backing) { /* invariant 5: stop */
		log_error("gc: stopped on BACKING before removing %s: this process %s BACKING's"
			  " claim (claim.h 9); nothing more is removed there", rel,
			  claim_lost(w->o->claim) ? "lost" : "could not renew lately");
		return rrc;
	}
	if (rrc != 0) {
		log_error("gc: cannot remove %s on %s: %s", rel, w->o->where, strerror(-rrc));
		w->out->failed++;
	}
	return 0;
}

/* One leaf directory chunks/ab/cd: a name that does not start with "abcd" is
 * no object the store could read (it is left alone). */
static int aq_gc_leaf(struct aq_gc_walk *w, const char *reldir, const char *prefix)
{
	struct aq_names l = { 0 };
	int rc = aq_gc_list(w->o, reldir, &l);
	for (size_t i = 0; i < l.n && rc == 0; i++) {
		uint8_t hash[CAT_HASH_LEN];
		if (!aq_parse_name(l.v[i], hash) || strncmp(l.v[i], prefix, 4) != 0)
			continue;
		char rel[PATH_MAX];
		snprintf(rel, sizeof(rel), "%s/%s", reldir, l.v[i]);
		w->out->objects++;
		bool orphan;
		struct aq_gc_remove r = { w->o, rel };
		uint64_t size = 0;
		int rrc = aq_gc_check(w->q, hash, w->o->on_backing, true, NULL, NULL, &orphan);
		if (rrc == 0 && orphan && w->o->named && aq_named_has(w->o->named, hash)) {
			w->out->manifest_kept++; /* invariant 3 */
			continue;
		}
		if (rrc == 0 && orphan) {
			w->o->size(w->o->arg, rel, &size);
			/* decided again, and removed, in one hold of the lock */
			rrc = aq_gc_check(w->q, hash, w->o->on_backing, w->dry_run, aq_gc_remove_rel, &r,
					  &orphan);
		}
		rc = aq_gc_counted(w, rel, size, orphan, rrc);
	}
	free(l.v);
	return rc;
}

struct aq_at {
	const struct aq_objects *o;
	const char *rel;
};

static int aq_pack_read(void *arg, uint64_t off, size_t len, void *buf)
{
	const struct aq_at *at = arg;
	return at->o->range(at->o->arg, at->rel, off, len, buf);
}

/* Invariant 6: whether a manifest on BACKING names a member of the pack at
 * rel (*named), from its tail; -EBADMSG (logged) if it is not a whole
 * pack's tail: left alone. */
static int aq_pack_named(const struct aq_objects *o, const char *rel, bool *named)
{
	*named = false;
	uint64_t size = 0;
	int rc = o->size(o->arg, rel, &size);
	if (rc != 0)
		return rc;
	uint8_t *tail = NULL;
	struct pack_view v;
	const char *why = NULL;
	struct aq_at at = { o, rel };
	rc = pack_read_tail(aq_pack_read, &at, size, &tail, &v, &why);
	for (uint32_t i = 0; rc == 0 && i < v.n && !*named; i++) {
		struct pack_entry e;
		pack_entry_at(&v, i, &e);
		*named = aq_named_has(o->named, e.hash);
	}
	free(tail);
	if (rc != 0 && rc != -ENOMEM && rc != -EIO && rc != -ETIMEDOUT) {
		log_warn("gc: %s on BACKING is not a whole pack (%s): left alone", rel,
			 rc == -EBADMSG ? why : strerror(-rc));
		rc = -EBADMSG;
	}
	return rc;
}

/* Invariant 6 for one pack file of a shard. */
static int aq_gc_pack(struct aq_gc_walk *w, const char *dir, const char *file)
{
	uint8_t name[CAT_HASH_LEN];
	char rel[PATH_MAX], expect[PACK_RELPATH_LEN];
	snprintf(rel, sizeof(rel), "packs/%s/%s", dir, file);
	if (pack_name_parse(file, name) != 0)
		return 0; /* not a pack's name: left alone */
	pack_relpath(name, expect, sizeof(expect));
	if (strcmp(rel, expect) != 0)
		return 0; /* outside its shard: no reader finds it there */
	w->out->objects++;
	bool orphan = false, named = false;
	int rc = aq_known_check(w->q, AQ_PACK_KNOWN, name, true, true, NULL, NULL, &orphan);
	if (rc != 0 || !orphan)
		return rc;
	rc = aq_pack_named(w->o, rel, &named);
	if (rc == -EBADMSG)
		return 0;
	if (rc != 0)
		return rc;
	if (named) {
		w->out->manifest_kept++; /* invariant 3 */
		return 0;
	}
	uint64_t size = 0;
	w->o->size(w->o->arg, rel, &size);
	struct aq_gc_remove r = { w->o, rel };
	int rrc = aq_known_check(w->q, AQ_PACK_KNOWN, name, true, w->dry_run, aq_gc_remove_rel, &r,
				 &orphan);
	return aq_gc_counted(w, rel, size, orphan, rrc);
}

/* Invariant 6: packs/ on BACKING. */
static int aq_gc_packs(struct aq_gc_walk *w)
{
	struct aq_names outer = { 0 };
	int rc = aq_gc_list(w->o, "packs", &outer);
	for (size_t a = 0; a < outer.n && rc == 0; a++) {
		if (!aq_is_hex2(outer.v[a]))
			continue;
		char rel[64];
		snprintf(rel, sizeof(rel), "packs/%s", outer.v[a]);
		struct aq_names inner = { 0 };
		rc = aq_gc_list(w->o, rel, &inner);
		for (size_t b = 0; b < inner.n && rc == 0; b++)
			rc = aq_gc_pack(w, outer.v[a], inner.v[b]);
		free(inner.v);
	}
	free(outer.v);
	return rc;
}

int aq_gc_walk(struct aq *q, const struct aq_objects *o, bool dry_run, aq_progress_fn progress,
	       void *progress_arg, struct aq_gc_result *out)
{
	memset(out, 0, sizeof(*out));
	if (o->on_backing && !o->named) { /* invariant 3: the manifests are read first */
		log_error("gc: BACKING's walk needs the chunks its manifests name (aq_named_load)");
		return -EINVAL;
	}
	struct aq_gc_walk w = { q, o, dry_run, out };
	struct aq_names outer = { 0 };
	int rc = aq_gc_list(o, "chunks", &outer);
	for (size_t a = 0; a < outer.n && rc == 0; a++) {
		if (!aq_is_hex2(outer.v[a]))
			continue;
		char rel[64];
		snprintf(rel, sizeof(rel), "chunks/%s", outer.v[a]);
		struct aq_names inner = { 0 };
		rc = aq_gc_list(o, rel, &inner);
		for (size_t b = 0; b < inner.n && rc == 0; b++) {
			if (!aq_is_hex2(inner.v[b]))
				continue;
			char leaf[64], prefix[5];
			snprintf(leaf, sizeof(leaf), "%s/%s", rel, inner.v[b]);
			snprintf(prefix, sizeof(prefix), "%s%s", outer.v[a], inner.v[b]);
			rc = aq_gc_leaf(&w, leaf, prefix);
		}
		free(inner.v);
		if (progress)
			progress(progress_arg, (uint64_t)a + 1, outer.n);
	}
	free(outer.v);
	if (rc == 0 && o->on_backing && o->range)
		rc = aq_gc_packs(&w);
	return rc;
}

/* ---- a local directory as an object store (the cache) ---- */

/* Invariant 4: everything beneath root is opened by safeopen.h (no symlink
 * followed on the way) and removed by unlinkat on the directory held. */
static int aq_dir_root(const void *root)
{
	int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd >= 0 ? fd : -errno;
}

int aq_dir_list(void *root, const char *reldir, int (*fn)(void *, const char *), void *arg)
{
	int rfd = aq_dir_root(root);
	if (rfd < 0)
		return rfd;
	int fd = safe_openat(rfd, reldir, O_RDONLY | O_DIRECTORY, 0);
	close(rfd);
	return fd < 0 ? fd : safe_dir_each(fd, fn, arg);
}

/* rel's directory beneath root (safe_parent), *base its last name. */
static int aq_dir_parent(const void *root, const char *rel, const char **base)
{
	int rfd = aq_dir_root(root);
	if (rfd < 0)
		return rfd;
	int pfd = safe_parent(rfd, rel, base);
	close(rfd);
	return pfd;
}

int aq_dir_size(void *root, const char *rel, uint64_t *size)
{
	const char *base;
	int pfd = aq_dir_parent(root, rel, &base);
	if (pfd < 0)
		return pfd;
	struct stat sb;
	int rc = fstatat(pfd, base, &sb, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : -errno;
	close(pfd);
	if (rc == 0)
		*size = (uint64_t)sb.st_size;
	return rc;
}

int aq_dir_remove(void *root, const char *rel)
{
	const char *base;
	int pfd = aq_dir_parent(root, rel, &base);
	if (pfd < 0)
		return pfd == -ENOENT ? 0 : pfd;
	int rc = unlinkat(pfd, base, 0) == 0 || errno == ENOENT ? 0 : -errno;
	close(pfd);
	return rc;
}

struct aq_objects aq_objects_dir(const char *root)
{
	return (struct aq_objects){ aq_dir_list, aq_dir_size, aq_dir_remove, (void *)root, "cache",
				    false, NULL, NULL, NULL };
}

/* small.db's rows (their calls take a struct storesmall *) */
static int aq_small_list(void *ss, const char *reldir, int (*fn)(void *, const char *), void *arg)
{
	return storesmall_list(ss, reldir, fn, arg);
}

static int aq_small_size(void *ss, const char *rel, uint64_t *size)
{
	return storesmall_stat(ss, rel, size);
}

static int aq_small_remove(void *ss, const char *rel)
{
	return storesmall_remove_rel(ss, rel);
}

struct aq_objects aq_objects_small(struct storesmall *ss)
{
	return (struct aq_objects){ aq_small_list, aq_small_size, aq_small_remove, ss,
				    "cache (small.db)", false, NULL, NULL, NULL };
}

/* BACKING (its calls take a struct backing *) */
static int aq_backing_list(void *b, const char *reldir, int (*fn)(void *, const char *), void *arg)
{
	return backing_list(b, reldir, fn, arg);
}

static int aq_backing_size(void *b, const char *rel, uint64_t *size)
{
	return backing_stat(b, rel, size);
}

static int aq_backing_range(void *b, const char *rel, uint64_t off, size_t len, void *buf)
{
	return backing_get_range(b, rel, off, len, buf);
}

static int aq_backing_remove(void *b, const char *rel)
{
	return backing_remove(b, rel);
}

struct aq_objects aq_objects_backing(struct backing *b, const struct aq_named *named,
				     struct claim *claim)
{
	return (struct aq_objects){ aq_backing_list, aq_backing_size, aq_backing_remove, b,
				    "BACKING", true, named, claim, aq_backing_range };
}

void aq_gc_result_add(struct aq_gc_result *into, const struct aq_gc_result *r)
{
	into->objects += r->objects;
	into->orphans += r->orphans;
	into->orphan_bytes += r->orphan_bytes;
	into->removed += r->removed;
	into->freed_bytes += r->freed_bytes;
	into->failed += r->failed;
	into->manifest_kept += r->manifest_kept;
}
