/* manifest — catalog state as immutable text on BACKING (manifest.h is the
 * contract, docs/FORMAT.md "Manifests" the format), and its way back in.
 *
 *   catalog ──build (one read txn)──▶ text ──backing_put──▶ BACKING
 *   BACKING ──backing_get──▶ text ──parse+verify──▶ struct manifest
 *                                 ──apply (one write txn)──▶ catalog
 *
 * Building walks a tree with one recursive query over dirents from its root,
 * following only inodes of the tree's generation (gen = id, or gen NULL for
 * the tree outside generations: a generation root is where that walk stops).
 * Inodes get manifest-local ids: 0 for the root, then in inode order. Every
 * manifest built is parsed back before it is returned, so a manifest this
 * code cannot read is never written.
 *
 * Applying parses the whole text first (structure, names, checksum), then
 * works in one BEGIN IMMEDIATE transaction: any failure rolls it back, so a
 * rejected manifest leaves the catalog as it was (M2). The tree is linked in
 * breadth-first order from the root so every parent is placed before its
 * entries; directories that exist already (tree manifests, series) are
 * merged, anything else that exists is a conflict.
 *
 * Invariants (manifest.h M1–M3), and here:
 *  1. The parser accepts exactly what the builder can write: sections in
 *     order (gen, ino, ent, chunk, ext, sum), inode ids 0..n-1 in order, a
 *     directory named by exactly one entry (the root by none), every inode
 *     reachable from the root, chunks sorted by hash and each named by an
 *     extent, extents sorted by (inode, offset), non-overlapping, inside
 *     their chunk.
 *  4. Every number read back is bounded before it is used (DESIGN
 *     invariant 7): the text by MANIFEST_SIZE_MAX, a chunk's plain_len by
 *     the chunker's maximum, its stored_len by codec_bound of it, its codec
 *     a known one, sizes and extent ends by MANIFEST_FILE_SIZE_MAX, their
 *     sum by MANIFEST_BYTES_MAX, a tree's depth by MF_MAX_DEPTH. A value
 *     past its bound is a malformed manifest (M2).
 *  2. New inodes get their final nlink at insert (a directory 2 + its
 *     subdirectories, another inode its number of entries); only directories
 *     that existed before the apply get +1 per new subdirectory.
 *  3. A chunk's refcount rises by exactly the extents the manifest inserts
 *     that name it (catalog invariant 1): its chunk row takes that many
 *     references, with catalog_refs.c's statement (cat_refs_manifest_sql). */
#define _GNU_SOURCE
#include "manifest.h"
#include "catalog_internal.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "chunker.h"
#include "codec.h"
#include "generation.h"
#include "hash.h"
#include "log.h"
#include "manifest_shared.h"

#define MF_MAGIC "ckptfs-manifest"
#define MF_SUM_LINE_LEN (4 + HASH_HEX_LEN + 1) /* "sum " hex "\n" */
#define MF_MAX_DEPTH 4096                      /* a parent walk longer than this is a cycle */
#define MF_TARGET_MAX 4096
#define MF_SERIES_MAX 4096 /* the series path, escaped bytes decoded */

/* ---- small helpers ---- */

static void mf_err(char *err, size_t errsz, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void mf_err(char *err, size_t errsz, const char *fmt, ...)
{
	if (err == NULL || errsz == 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errsz, fmt, ap);
	va_end(ap);
}

void manifest_gen_path(uint64_t gen_id, uint32_t version, char *buf, size_t size)
{
	snprintf(buf, size, "manifests/gen/%" PRIu64 ".%" PRIu32 ".ckm", gen_id, version);
}

void manifest_tree_path(uint64_t seq, char *buf, size_t size)
{
	snprintf(buf, size, "manifests/tree/%020" PRIu64 ".ckm", seq);
}

/* Decimal digits only, no sign, no overflow; *end set past them. */
static int mf_digits(const char *s, const char **end, uint64_t *out)
{
	uint64_t v = 0;
	const char *p = s;
	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return -EINVAL;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	*end = p;
	*out = v;
	return 0;
}

int manifest_gen_name_parse(const char *name, uint64_t *gen_id, uint32_t *version)
{
	const char *p;
	uint64_t id = 0, v = 0;
	if (mf_digits(name, &p, &id) != 0 || *p != '.' || mf_digits(p + 1, &p, &v) != 0 ||
	    strcmp(p, ".ckm") != 0 || id == 0 || id > INT64_MAX || v == 0 || v > UINT32_MAX)
		return -EINVAL;
	*gen_id = id;
	*version = (uint32_t)v;
	return 0;
}

int manifest_tree_name_parse(const char *name, uint64_t *seq)
{
	const char *p;
	uint64_t v = 0;
	if (strlen(name) != 24 || mf_digits(name, &p, &v) != 0 || p != name + 20 ||
	    strcmp(p, ".ckm") != 0)
		return -EINVAL;
	*seq = v;
	return 0;
}

/* ---- the text buffer of a manifest being built ---- */

struct mf_buf {
	char *p;
	size_t len, cap;
	bool oom;
};

static void mf_reserve(struct mf_buf *b, size_t more)
{
	if (b->oom || b->len + more + 1 <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 4096;
	while (cap < b->len + more + 1)
		cap *= 2;
	char *p = realloc(b->p, cap);
	if (p == NULL) {
		b->oom = true;
		return;
	}
	b->p = p;
	b->cap = cap;
}

static void mf_add(struct mf_buf *b, const void *data, size_t n)
{
	mf_reserve(b, n);
	if (b->oom)
		return;
	memcpy(b->p + b->len, data, n);
	b->len += n;
	b->p[b->len] = 0;
}

static void mf_printf(struct mf_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void mf_printf(struct mf_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->oom = true;
		return;
	}
	mf_reserve(b, (size_t)n);
	if (b->oom)
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

/* The bytes of a field, percent-escaped: every byte that is not printable
 * ASCII, space and '%' become %XX; the empty string is "-", and "-" itself is
 * "%2D" (FORMAT.md). */
static void mf_escaped(struct mf_buf *b, const char *s, size_t n)
{
	static const char digits[] = "0123456789ABCDEF";
	if (n == 0) {
		mf_add(b, "-", 1);
		return;
	}
	if (n == 1 && s[0] == '-') {
		mf_add(b, "%2D", 3);
		return;
	}
	mf_reserve(b, 3 * n);
	if (b->oom)
		return;
	char *o = b->p + b->len;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c <= 0x20 || c >= 0x7f || c == '%') {
			*o++ = '%';
			*o++ = digits[c >> 4];
			*o++ = digits[c & 15];
		} else {
			*o++ = (char)c;
		}
	}
	*o = 0;
	b->len = (size_t)(o - b->p);
}

static void mf_field(struct mf_buf *b, const char *s, size_t n)
{
	mf_add(b, " ", 1);
	mf_escaped(b, s, n);
}

/* ---- building ---- */

/* The walk of a tree: from ?1, following entries to inodes whose gen IS ?2
 * (NULL: the tree outside generations). UNION lists a hard-linked inode
 * once. */
#define MF_TREE                                                                    \
	"WITH RECURSIVE t(ino) AS (SELECT ?1 UNION SELECT d.ino FROM t"            \
	" CROSS JOIN dirents d ON d.parent = t.ino CROSS JOIN inodes c ON c.ino = d.ino" \
	" WHERE c.gen IS ?2) "

static const char mf_sql_inodes[] =
	MF_TREE "SELECT i.ino, i.mode, i.uid, i.gid, i.size, i.rdev, i.atime_ns, i.mtime_ns,"
	" i.ctime_ns, i.target FROM t CROSS JOIN inodes i ON i.ino = t.ino"
	" ORDER BY i.ino != ?1, i.ino";
static const char mf_sql_entries[] =
	MF_TREE "SELECT d.parent, d.ino, d.name FROM t CROSS JOIN dirents d ON d.parent = t.ino"
	" CROSS JOIN inodes c ON c.ino = d.ino WHERE c.gen IS ?2 ORDER BY d.parent != ?1,"
	" d.parent, d.id";
static const char mf_sql_chunks[] =
	MF_TREE "SELECT c.hash, c.plain_len, c.codec, c.stored_len FROM chunks c WHERE c.hash IN"
	" (SELECT e.hash FROM t CROSS JOIN extents e ON e.ino = t.ino) ORDER BY c.hash";
static const char mf_sql_extents[] =
	MF_TREE "SELECT e.ino, e.off, e.len, e.chunk_off, e.hash FROM t CROSS JOIN extents e"
	" ON e.ino = t.ino ORDER BY e.ino != ?1, e.ino, e.off";
static const char mf_sql_gen[] =
	"SELECT series, root, name, step, state, version, pinned, created_ns, committed_ns, rule"
	" FROM generations WHERE id = ?1";
static const char mf_sql_parent[] = "SELECT parent, name FROM dirents WHERE ino = ?1 LIMIT 1";

struct mf_build {
	struct cat *cat;
	struct mf_buf b;
	uint64_t root, gen; /* gen 0: outside generations */
	uint64_t *inos;     /* local id → catalog inode; [1..n) ascending */
	size_t n_inos;
};

static int mf_sql_fail(struct cat *cat, const char *what, sqlite3_stmt *st, int src)
{
	log_error("catalog %s: manifest: cannot %s: %s (sqlite %d)", cat->path, what,
		  sqlite3_errmsg(cat->db), src);
	(void)st;
	return -EIO;
}

/* Prepares sql and binds ?1 = root, ?2 = gen (NULL for 0) when it has them. */
static int mf_prepare(struct cat *cat, const char *what, const char *sql, sqlite3_stmt **st)
{
	int src = sqlite3_prepare_v2(cat->db, sql, -1, st, NULL);
	if (src != SQLITE_OK) {
		*st = NULL;
		return mf_sql_fail(cat, what, NULL, src);
	}
	return 0;
}

static int mf_prepare_tree(struct mf_build *mb, const char *what, const char *sql,
			   sqlite3_stmt **st)
{
	int rc = mf_prepare(mb->cat, what, sql, st);
	if (rc == 0) {
		sqlite3_bind_int64(*st, 1, (int64_t)mb->root);
		if (mb->gen != 0)
			sqlite3_bind_int64(*st, 2, (int64_t)mb->gen);
		else
			sqlite3_bind_null(*st, 2);
	}
	return rc;
}

static int mf_local_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The local id of catalog inode ino; -1 if it is not in the tree. */
static int64_t mf_local(const struct mf_build *mb, uint64_t ino)
{
	if (ino == mb->root)
		return 0;
	if (mb->n_inos < 2)
		return -1;
	const uint64_t *p = bsearch(&ino, mb->inos + 1, mb->n_inos - 1, sizeof(uint64_t),
				    mf_local_cmp);
	return p ? p - mb->inos : -1;
}

static int mf_write_inodes(struct mf_build *mb)
{
	sqlite3_stmt *st;
	size_t cap = 0;
	int src, rc = mf_prepare_tree(mb, "list a tree's inodes", mf_sql_inodes, &st);
	while (rc == 0 && (src = sqlite3_step(st)) == SQLITE_ROW) {
		if (mb->n_inos == cap) {
			cap = cap ? 2 * cap : 256;
			uint64_t *p = realloc(mb->inos, cap * sizeof(*p));
			if (p == NULL) {
				rc = -ENOMEM;
				break;
			}
			mb->inos = p;
		}
		uint64_t ino = (uint64_t)sqlite3_column_int64(st, 0);
		mb->inos[mb->n_inos] = ino;
		assert(mb->n_inos > 0 || ino == mb->root);
		assert(mb->n_inos < 2 || ino > mb->inos[mb->n_inos - 1]);
		mf_printf(&mb->b, "ino %zu %llo %lld %lld %lld %lld %lld %lld %lld", mb->n_inos,
			  (unsigned long long)sqlite3_column_int64(st, 1),
			  (long long)sqlite3_column_int64(st, 2), (long long)sqlite3_column_int64(st, 3),
			  (long long)sqlite3_column_int64(st, 4), (long long)sqlite3_column_int64(st, 5),
			  (long long)sqlite3_column_int64(st, 6), (long long)sqlite3_column_int64(st, 7),
			  (long long)sqlite3_column_int64(st, 8));
		if (sqlite3_column_type(st, 9) == SQLITE_NULL)
			mf_add(&mb->b, " -", 2);
		else
			mf_field(&mb->b, (const char *)sqlite3_column_text(st, 9),
				 (size_t)sqlite3_column_bytes(st, 9));
		mf_add(&mb->b, "\n", 1);
		mb->n_inos++;
	}
	if (rc == 0 && src != SQLITE_DONE)
		rc = mf_sql_fail(mb->cat, "list a tree's inodes", st, src);
	sqlite3_finalize(st);
	if (rc == 0 && mb->n_inos == 0) {
		log_error("catalog %s: manifest: the root inode %" PRIu64 " of the tree is missing",
			  mb->cat->path, mb->root);
		rc = -EIO;
	}
	return rc;
}

static int mf_write_entries(struct mf_build *mb)
{
	sqlite3_stmt *st;
	int src, rc = mf_prepare_tree(mb, "list a tree's entries", mf_sql_entries, &st);
	while (rc == 0 && (src = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t parent = mf_local(mb, (uint64_t)sqlite3_column_int64(st, 0));
		int64_t child = mf_local(mb, (uint64_t)sqlite3_column_int64(st, 1));
		if (parent < 0 || child <= 0) {
			log_error("catalog %s: manifest: entry %lld/%s → inode %lld is outside the"
				  " tree of inode %" PRIu64, mb->cat->path,
				  (long long)sqlite3_column_int64(st, 0), sqlite3_column_text(st, 2),
				  (long long)sqlite3_column_int64(st, 1), mb->root);
			rc = -EIO;
			break;
		}
		mf_printf(&mb->b, "ent %lld %lld", (long long)parent, (long long)child);
		mf_field(&mb->b, (const char *)sqlite3_column_text(st, 2),
			 (size_t)sqlite3_column_bytes(st, 2));
		mf_add(&mb->b, "\n", 1);
	}
	if (rc == 0 && src != SQLITE_DONE)
		rc = mf_sql_fail(mb->cat, "list a tree's entries", st, src);
	sqlite3_finalize(st);
	return rc;
}

static int mf_hash_col(struct cat *cat, sqlite3_stmt *st, int col, char hex[HASH_HEX_LEN + 1])
{
	const void *h = sqlite3_column_blob(st, col);
	if (h == NULL || sqlite3_column_bytes(st, col) != HASH_LEN) {
		log_error("catalog %s: manifest: corrupt: a chunk hash of %d bytes", cat->path,
			  sqlite3_column_bytes(st, col));
		return -EIO;
	}
	hash_to_hex(h, hex);
	return 0;
}

static int mf_write_chunks(struct mf_build *mb)
{
	sqlite3_stmt *st;
	char hex[HASH_HEX_LEN + 1];
	int src, rc = mf_prepare_tree(mb, "list a tree's chunks", mf_sql_chunks, &st);
	while (rc == 0 && (src = sqlite3_step(st)) == SQLITE_ROW) {
		rc = mf_hash_col(mb->cat, st, 0, hex);
		if (rc == 0 && sqlite3_column_type(st, 3) == SQLITE_NULL) {
			log_error("catalog %s: manifest: chunk %s is named by a committed extent of"
				  " the tree of inode %" PRIu64 " but has no stored object",
				  mb->cat->path, hex, mb->root);
			rc = -EIO;
		}
		if (rc == 0)
			mf_printf(&mb->b, "chunk %s %lld %d %lld\n", hex,
				  (long long)sqlite3_column_int64(st, 1), sqlite3_column_int(st, 2),
				  (long long)sqlite3_column_int64(st, 3));
	}
	if (rc == 0 && src != SQLITE_DONE)
		rc = mf_sql_fail(mb->cat, "list a tree's chunks", st, src);
	sqlite3_finalize(st);
	return rc;
}

static int mf_write_extents(struct mf_build *mb)
{
	sqlite3_stmt *st;
	char hex[HASH_HEX_LEN + 1];
	int src, rc = mf_prepare_tree(mb, "list a tree's extents", mf_sql_extents, &st);
	while (rc == 0 && (src = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t local = mf_local(mb, (uint64_t)sqlite3_column_int64(st, 0));
		assert(local >= 0);
		rc = mf_hash_col(mb->cat, st, 4, hex);
		if (rc == 0)
			mf_printf(&mb->b, "ext %lld %lld %lld %lld %s\n", (long long)local,
				  (long long)sqlite3_column_int64(st, 1),
				  (long long)sqlite3_column_int64(st, 2),
				  (long long)sqlite3_column_int64(st, 3), hex);
	}
	if (rc == 0 && src != SQLITE_DONE)
		rc = mf_sql_fail(mb->cat, "list a tree's extents", st, src);
	sqlite3_finalize(st);
	return rc;
}

/* Appends the path of directory dir from the mount root ("" for the root),
 * walking up its entries. */
static int mf_write_path(struct mf_build *mb, uint64_t dir)
{
	char *names[MF_MAX_DEPTH];
	int depth = 0, src = SQLITE_DONE, rc;
	sqlite3_stmt *st;
	rc = mf_prepare(mb->cat, "walk up a series' path", mf_sql_parent, &st);
	while (rc == 0 && dir != CAT_ROOT_INO) {
		if (depth == MF_MAX_DEPTH) {
			log_error("catalog %s: manifest: the path of inode %" PRIu64
				  " is deeper than %d (a cycle?)", mb->cat->path, dir, MF_MAX_DEPTH);
			rc = -EIO;
			break;
		}
		sqlite3_bind_int64(st, 1, (int64_t)dir);
		src = sqlite3_step(st);
		if (src != SQLITE_ROW) {
			if (src == SQLITE_DONE)
				log_error("catalog %s: manifest: directory %" PRIu64 " has no entry",
					  mb->cat->path, dir);
			rc = src == SQLITE_DONE ? -EIO : mf_sql_fail(mb->cat, "walk up", st, src);
			break;
		}
		dir = (uint64_t)sqlite3_column_int64(st, 0);
		names[depth] = strndup((const char *)sqlite3_column_text(st, 1),
				       (size_t)sqlite3_column_bytes(st, 1));
		if (names[depth] == NULL)
			rc = -ENOMEM;
		else
			depth++;
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	/* One field: the components escaped, joined by '/' (never escaped). */
	if (rc == 0) {
		mf_add(&mb->b, " ", 1);
		if (depth == 0)
			mf_add(&mb->b, "-", 1);
		for (int i = depth - 1; i >= 0; i--) {
			mf_escaped(&mb->b, names[i], strlen(names[i]));
			if (i > 0)
				mf_add(&mb->b, "/", 1);
		}
	}
	for (int i = 0; i < depth; i++)
		free(names[i]);
	return rc;
}

/* The gen line; *root gets the generation's root. */
static int mf_write_gen(struct mf_build *mb, uint32_t version)
{
	sqlite3_stmt *st;
	int src, rc = mf_prepare(mb->cat, "read a generation", mf_sql_gen, &st);
	if (rc != 0)
		return rc;
	sqlite3_bind_int64(st, 1, (int64_t)mb->gen);
	src = sqlite3_step(st);
	if (src == SQLITE_DONE) {
		rc = -ENOENT;
	} else if (src != SQLITE_ROW) {
		rc = mf_sql_fail(mb->cat, "read a generation", st, src);
	} else if (sqlite3_column_int(st, 4) != GEN_COMMITTED ||
		   (uint32_t)sqlite3_column_int64(st, 5) != version) {
		log_debug("catalog %s: manifest of generation %" PRIu64 " version %" PRIu32
			  ": stale (state %d, version %lld)", mb->cat->path, mb->gen, version,
			  sqlite3_column_int(st, 4), (long long)sqlite3_column_int64(st, 5));
		rc = -ESTALE;
	} else {
		uint64_t series = (uint64_t)sqlite3_column_int64(st, 0);
		mb->root = (uint64_t)sqlite3_column_int64(st, 1);
		mf_printf(&mb->b, "gen %" PRIu64 " %" PRIu32 " %lld %d %lld %lld", mb->gen, version,
			  (long long)sqlite3_column_int64(st, 3), sqlite3_column_int(st, 6) != 0,
			  (long long)sqlite3_column_int64(st, 7),
			  (long long)sqlite3_column_int64(st, 8));
		rc = mf_write_path(mb, series);
		mf_field(&mb->b, (const char *)sqlite3_column_text(st, 2),
			 (size_t)sqlite3_column_bytes(st, 2));
		mf_field(&mb->b, (const char *)sqlite3_column_text(st, 9),
			 (size_t)sqlite3_column_bytes(st, 9));
		mf_add(&mb->b, "\n", 1);
	}
	sqlite3_finalize(st);
	return rc;
}

/* fp: the tree's fingerprint is read in the build's transaction, and a
 * chunk of it not on BACKING answers -EAGAIN (manifest_tree_build_uploaded). */
static int mf_build(struct cat *cat, uint64_t gen, uint32_t version, char **out, size_t *len,
		    char *fp, size_t fp_size)
{
	struct mf_build mb = { .cat = cat, .gen = gen, .root = CAT_ROOT_INO };
	char err[MANIFEST_ERR_MAX];
	char what[64];
	if (gen != 0)
		snprintf(what, sizeof(what), "generation %" PRIu64 " version %" PRIu32, gen, version);
	else
		snprintf(what, sizeof(what), "the tree outside generations");

	mf_printf(&mb.b, MF_MAGIC " %d %s\n", MANIFEST_FORMAT_VERSION, gen ? "gen" : "tree");
	cat_lock(cat);
	int rc = cat_begin_read(cat);
	if (rc == 0 && fp != NULL) { /* M1: the check and the build see one state */
		bool all_uploaded = false;
		rc = cat_tree_fingerprint_txn(cat, fp, fp_size, &all_uploaded);
		if (rc == 0 && !all_uploaded)
			rc = -EAGAIN; /* upload.h U5: a chunk it would name is not on BACKING */
	}
	if (rc == 0 && gen != 0)
		rc = mf_write_gen(&mb, version);
	if (rc == 0)
		rc = mf_write_inodes(&mb);
	if (rc == 0)
		rc = mf_write_entries(&mb);
	if (rc == 0)
		rc = mf_write_chunks(&mb);
	if (rc == 0)
		rc = mf_write_extents(&mb);
	rc = cat_end(cat, rc);
	cat_unlock(cat);
	free(mb.inos);

	if (rc == 0 && !mb.b.oom) {
		uint8_t sum[HASH_LEN];
		char hex[HASH_HEX_LEN + 1];
		hash_sha256(mb.b.p, mb.b.len, sum);
		hash_to_hex(sum, hex);
		mf_printf(&mb.b, "sum %s\n", hex);
	}
	if (rc == 0 && mb.b.oom)
		rc = -ENOMEM;
	if (rc == 0) {
		/* Never hand out a manifest that cannot be read back. */
		struct manifest *m = NULL;
		rc = manifest_parse(mb.b.p, mb.b.len, &m, err, sizeof(err));
		if (rc != 0) {
			log_error("catalog %s: manifest of %s does not read back (%s); not written",
				  cat->path, what, err);
			rc = -EIO;
		}
		manifest_free(m);
	}
	if (rc != 0 && rc != -ESTALE && rc != -ENOENT && rc != -EAGAIN)
		log_error("catalog %s: cannot build the manifest of %s: %s", cat->path, what,
			  strerror(-rc));
	if (rc != 0) {
		free(mb.b.p);
		return rc;
	}
	*out = mb.b.p;
	*len = mb.b.len;
	return 0;
}

int manifest_gen_build(struct cat *cat, uint64_t gen_id, uint32_t version, char **out,
		       size_t *len)
{
	if (gen_id == 0 || gen_id > INT64_MAX || version == 0)
		return -EINVAL;
	if (cat->shared) return manifest_shared_gen_build(cat, gen_id, version, out, len);
	return mf_build(cat, gen_id, version, out, len, NULL, 0);
}

int manifest_tree_build(struct cat *cat, char **out, size_t *len)
{
	return mf_build(cat, 0, 0, out, len, NULL, 0);
}

int manifest_tree_build_uploaded(struct cat *cat, char **out, size_t *len, char *fp,
				 size_t fp_size)
{
	if (cat->shared)
		return -EOPNOTSUPP;
	return mf_build(cat, 0, 0, out, len, fp, fp_size);
}

/* ---- the text of a manifest given as rows (meta/manifest_shared.c) ---- */

/* The series path: each '/'-separated component escaped on its own, as
 * mf_write_path writes it, so that both builders give the same bytes. */
static void mf_format_series(struct mf_buf *b, const char *series)
{
	mf_add(b, " ", 1);
	if (series[0] == 0) {
		mf_add(b, "-", 1);
		return;
	}
	for (const char *s = series; *s;) {
		size_t n = strcspn(s, "/");
		mf_escaped(b, s, n);
		s += n;
		if (*s == '/') {
			mf_add(b, "/", 1);
			s++;
		}
	}
}

static void mf_format_body(struct mf_buf *b, const struct manifest *m)
{
	char hex[HASH_HEX_LEN + 1];
	mf_printf(b, MF_MAGIC " %d %s\n", MANIFEST_FORMAT_VERSION,
		  m->kind == MANIFEST_GEN ? "gen" : "tree");
	if (m->kind == MANIFEST_GEN) {
		const struct manifest_gen_row *g = &m->gen;
		mf_printf(b, "gen %" PRIu64 " %" PRIu32 " %lld %d %lld %lld", g->id, g->version,
			  (long long)g->step, g->pinned ? 1 : 0, (long long)g->created_ns,
			  (long long)g->committed_ns);
		mf_format_series(b, g->series);
		mf_field(b, g->name, strlen(g->name));
		mf_field(b, g->rule, strlen(g->rule));
		mf_add(b, "\n", 1);
	}
	for (size_t i = 0; i < m->n_inodes; i++) {
		const struct manifest_inode *in = &m->inodes[i];
		mf_printf(b, "ino %zu %llo %lld %lld %lld %lld %lld %lld %lld", i,
			  (unsigned long long)in->mode, (long long)in->uid, (long long)in->gid,
			  (long long)in->size, (long long)in->rdev, (long long)in->atime_ns,
			  (long long)in->mtime_ns, (long long)in->ctime_ns);
		if (in->target == NULL)
			mf_add(b, " -", 2);
		else
			mf_field(b, in->target, strlen(in->target));
		mf_add(b, "\n", 1);
	}
	for (size_t i = 0; i < m->n_entries; i++) {
		const struct manifest_entry *e = &m->entries[i];
		mf_printf(b, "ent %lld %lld", (long long)e->parent, (long long)e->child);
		mf_field(b, e->name, strlen(e->name));
		mf_add(b, "\n", 1);
	}
	for (size_t i = 0; i < m->n_chunks; i++) {
		const struct manifest_chunk *c = &m->chunks[i];
		hash_to_hex(c->hash, hex);
		mf_printf(b, "chunk %s %lld %d %lld\n", hex, (long long)c->plain_len, c->codec,
			  (long long)c->stored_len);
	}
	for (size_t i = 0; i < m->n_extents; i++) {
		const struct manifest_extent *x = &m->extents[i];
		hash_to_hex(m->chunks[x->chunk].hash, hex);
		mf_printf(b, "ext %lld %lld %lld %lld %s\n", (long long)x->inode, (long long)x->off,
			  (long long)x->len, (long long)x->chunk_off, hex);
	}
}

int manifest_format(const struct manifest *m, char **out, size_t *len)
{
	struct mf_buf b = { 0 };
	char err[MANIFEST_ERR_MAX];
	mf_format_body(&b, m);
	if (!b.oom) {
		uint8_t sum[HASH_LEN];
		hash_sha256(b.p, b.len, sum);
		hash_to_hex(sum, err);
		mf_printf(&b, "sum %s\n", err);
	}
	int rc = b.oom ? -ENOMEM : 0;
	if (rc == 0) {
		/* as mf_build: never hand out a manifest that cannot be read back */
		struct manifest *back = NULL;
		rc = manifest_parse(b.p, b.len, &back, err, sizeof(err));
		if (rc != 0) {
			log_error("manifest of generation %" PRIu64 " does not read back (%s);"
				  " not written", m->gen.id, err);
			rc = -EIO;
		}
		manifest_free(back);
	}
	if (rc != 0) {
		free(b.p);
		return rc;
	}
	*out = b.p;
	*len = b.len;
	return 0;
}

/* ---- parsing ---- */

enum mf_section { SEC_HEADER, SEC_GEN, SEC_INO, SEC_ENT, SEC_CHUNK, SEC_EXT };

struct mf_parse {
	struct manifest *m;
	char *err;
	size_t errsz;
	uint32_t line;
	size_t cap_inodes, cap_entries, cap_chunks, cap_extents;
	int section;
	char *fields[12];
	int n_fields;
};

static int mf_bad(struct mf_parse *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int mf_bad(struct mf_parse *p, const char *fmt, ...)
{
	char why[MANIFEST_ERR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	mf_err(p->err, p->errsz, "line %" PRIu32 ": %s", p->line, why);
	return -EINVAL;
}

static int mf_hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Decodes field i in place: "-" is the empty string, %XX a byte. A raw byte
 * that should have been escaped, a bad escape or %00 is an error. */
static int mf_unescape(struct mf_parse *p, int i, const char *what)
{
	char *s = p->fields[i], *o = s;
	if (strcmp(s, "-") == 0) {
		s[0] = 0;
		return 0;
	}
	for (const char *c = s; *c; c++) {
		unsigned char u = (unsigned char)*c;
		if (u <= 0x20 || u >= 0x7f)
			return mf_bad(p, "%s: byte 0x%02x must be percent-escaped", what, u);
		if (u != '%') {
			*o++ = *c;
			continue;
		}
		int hi = mf_hexval(c[1]), lo = hi < 0 ? -1 : mf_hexval(c[2]);
		if (hi < 0 || lo < 0)
			return mf_bad(p, "%s: a bad percent escape", what);
		if (hi == 0 && lo == 0)
			return mf_bad(p, "%s: a NUL byte (%%00)", what);
		*o++ = (char)(hi * 16 + lo);
		c += 2;
	}
	*o = 0;
	return 0;
}

static int mf_u64(struct mf_parse *p, int i, const char *what, uint64_t max, uint64_t *out)
{
	const char *end;
	uint64_t v = 0;
	if (mf_digits(p->fields[i], &end, &v) != 0 || *end != 0 || v > max)
		return mf_bad(p, "%s: \"%.40s\" is not a number from 0 to %" PRIu64, what,
			      p->fields[i], max);
	*out = v;
	return 0;
}

static int mf_i64(struct mf_parse *p, int i, const char *what, int64_t *out)
{
	const char *s = p->fields[i], *end;
	bool neg = s[0] == '-';
	uint64_t v = 0;
	if (mf_digits(s + neg, &end, &v) != 0 || *end != 0 || v > (uint64_t)INT64_MAX + neg)
		return mf_bad(p, "%s: \"%.40s\" is not a 64-bit number", what, s);
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	return 0;
}

static int mf_mode(struct mf_parse *p, int i, uint32_t *out)
{
	const char *s = p->fields[i];
	uint32_t v = 0;
	if (*s == 0)
		return mf_bad(p, "mode: empty");
	for (; *s; s++) {
		if (*s < '0' || *s > '7' || v > 0177777 / 8)
			return mf_bad(p, "mode: \"%.40s\" is not an octal st_mode", p->fields[i]);
		v = v * 8 + (uint32_t)(*s - '0');
	}
	switch (v & S_IFMT) {
	case S_IFREG: case S_IFDIR: case S_IFLNK: case S_IFIFO: case S_IFSOCK: case S_IFCHR:
	case S_IFBLK:
		break;
	default:
		return mf_bad(p, "mode: %o is not a file type", v);
	}
	*out = v;
	return 0;
}

static int mf_name(struct mf_parse *p, int i, const char *what)
{
	int rc = mf_unescape(p, i, what);
	if (rc != 0)
		return rc;
	const char *s = p->fields[i];
	if (s[0] == 0 || strcmp(s, ".") == 0 || strcmp(s, "..") == 0 || strchr(s, '/') != NULL)
		return mf_bad(p, "%s: \"%.80s\" is not a file name (empty, \".\", \"..\" or with '/')",
			      what, s);
	if (strlen(s) > CAT_NAME_MAX)
		return mf_bad(p, "%s: longer than %d bytes", what, CAT_NAME_MAX);
	return 0;
}

static int mf_grow(struct mf_parse *p, void **arr, size_t *cap, size_t n, size_t size)
{
	if (n < *cap)
		return 0;
	size_t c = *cap ? 2 * *cap : 64;
	void *a = realloc(*arr, c * size);
	if (a == NULL) {
		mf_err(p->err, p->errsz, "out of memory");
		return -ENOMEM;
	}
	*arr = a;
	*cap = c;
	return 0;
}

static int mf_fields(struct mf_parse *p, int want, const char *tag)
{
	if (p->n_fields != want)
		return mf_bad(p, "%s: %d fields, expected %d", tag, p->n_fields, want);
	return 0;
}

/* Sections come in order; returns non-zero if this line goes back. */
static int mf_section(struct mf_parse *p, int section, const char *tag)
{
	if (section < p->section)
		return mf_bad(p, "a \"%s\" line out of order", tag);
	if (section == SEC_GEN && (p->section == SEC_GEN || p->m->kind != MANIFEST_GEN))
		return mf_bad(p, "a \"gen\" line where none may be");
	if (section > SEC_GEN && p->m->kind == MANIFEST_GEN && p->section < SEC_GEN)
		return mf_bad(p, "a generation manifest starts with its \"gen\" line");
	if (section > SEC_INO && p->m->n_inodes == 0)
		return mf_bad(p, "a \"%s\" line before any inode", tag);
	p->section = section;
	return 0;
}

static int mf_parse_gen(struct mf_parse *p)
{
	struct manifest_gen_row *g = &p->m->gen;
	uint64_t v = 0;
	int rc = mf_fields(p, 10, "gen");
	if (rc == 0)
		rc = mf_u64(p, 1, "generation id", INT64_MAX, &g->id);
	if (rc == 0 && g->id == 0)
		rc = mf_bad(p, "generation id 0");
	if (rc == 0)
		rc = mf_u64(p, 2, "version", UINT32_MAX, &v);
	if (rc == 0 && v == 0)
		rc = mf_bad(p, "version 0");
	g->version = (uint32_t)v;
	if (rc == 0)
		rc = mf_u64(p, 3, "step", INT64_MAX, &g->step);
	if (rc == 0)
		rc = mf_u64(p, 4, "pinned", 1, &v);
	g->pinned = v != 0;
	if (rc == 0)
		rc = mf_i64(p, 5, "created_ns", &g->created_ns);
	if (rc == 0)
		rc = mf_i64(p, 6, "committed_ns", &g->committed_ns);
	if (rc == 0)
		rc = mf_unescape(p, 7, "series");
	if (rc == 0 && strlen(p->fields[7]) >= MF_SERIES_MAX)
		rc = mf_bad(p, "series: longer than %d bytes", MF_SERIES_MAX - 1);
	if (rc == 0) {
		/* components: names, '/'-separated */
		const char *s = p->fields[7];
		while (rc == 0 && *s) {
			size_t n = strcspn(s, "/");
			if (n == 0 || n > CAT_NAME_MAX || (n == 1 && s[0] == '.') ||
			    (n == 2 && s[0] == '.' && s[1] == '.'))
				rc = mf_bad(p, "series: \"%.80s\" is not a relative path of names",
					    p->fields[7]);
			s += n;
			if (*s == '/' && s[1] == 0)
				rc = mf_bad(p, "series: a trailing '/'");
			s += *s == '/';
		}
		g->series = p->fields[7];
	}
	if (rc == 0)
		rc = mf_name(p, 8, "generation name");
	g->name = p->fields[8];
	if (rc == 0)
		rc = mf_unescape(p, 9, "rule");
	if (rc == 0 && strlen(p->fields[9]) >= GEN_RULE_MAX)
		rc = mf_bad(p, "rule: longer than %d bytes", GEN_RULE_MAX - 1);
	g->rule = p->fields[9];
	return rc;
}

static int mf_parse_ino(struct mf_parse *p)
{
	struct manifest *m = p->m;
	uint64_t id = 0, v = 0;
	int rc = mf_fields(p, 11, "ino");
	if (rc == 0)
		rc = mf_u64(p, 1, "inode id", UINT64_MAX, &id);
	if (rc == 0 && id != m->n_inodes)
		rc = mf_bad(p, "inode id %" PRIu64 ", expected %zu (ids count up from 0)", id,
			    m->n_inodes);
	if (rc == 0)
		rc = mf_grow(p, (void **)&m->inodes, &p->cap_inodes, m->n_inodes, sizeof(*m->inodes));
	if (rc != 0)
		return rc;
	struct manifest_inode *in = &m->inodes[m->n_inodes];
	memset(in, 0, sizeof(*in));
	rc = mf_mode(p, 2, &in->mode);
	if (rc == 0)
		rc = mf_u64(p, 3, "uid", UINT32_MAX, &v);
	in->uid = (uint32_t)v;
	if (rc == 0)
		rc = mf_u64(p, 4, "gid", UINT32_MAX, &v);
	in->gid = (uint32_t)v;
	if (rc == 0)
		rc = mf_u64(p, 5, "size", MANIFEST_FILE_SIZE_MAX, &in->size);
	if (rc == 0)
		rc = mf_u64(p, 6, "rdev", INT64_MAX, &in->rdev);
	if (rc == 0)
		rc = mf_i64(p, 7, "atime_ns", &in->atime_ns);
	if (rc == 0)
		rc = mf_i64(p, 8, "mtime_ns", &in->mtime_ns);
	if (rc == 0)
		rc = mf_i64(p, 9, "ctime_ns", &in->ctime_ns);
	if (rc == 0)
		rc = mf_unescape(p, 10, "symlink target");
	if (rc != 0)
		return rc;
	const char *target = p->fields[10];
	if (S_ISLNK(in->mode)) {
		if (target[0] == 0)
			return mf_bad(p, "a symlink without a target");
		if (strlen(target) >= MF_TARGET_MAX)
			return mf_bad(p, "a symlink target of %zu bytes", strlen(target));
		in->target = target;
	} else if (target[0] != 0) {
		return mf_bad(p, "a target on an inode that is not a symlink");
	}
	if (m->n_inodes == 0 && m->kind == MANIFEST_TREE && !S_ISDIR(in->mode))
		return mf_bad(p, "the root of a tree manifest is not a directory");
	if (m->n_inodes == 0 && m->kind == MANIFEST_GEN && !S_ISDIR(in->mode) &&
	    !S_ISREG(in->mode))
		return mf_bad(p, "a generation's root is a directory or a regular file");
	if (S_ISREG(in->mode)) {
		if (in->size > MANIFEST_BYTES_MAX - m->bytes)
			return mf_bad(p, "its files add up to more than %" PRIu64 " bytes",
				      MANIFEST_BYTES_MAX);
		m->files++;
		m->bytes += in->size;
	}
	m->n_inodes++;
	return 0;
}

static int mf_parse_ent(struct mf_parse *p)
{
	struct manifest *m = p->m;
	uint64_t parent, child;
	int rc = mf_fields(p, 4, "ent");
	if (rc == 0)
		rc = mf_u64(p, 1, "parent id", m->n_inodes - 1, &parent);
	if (rc == 0)
		rc = mf_u64(p, 2, "child id", m->n_inodes - 1, &child);
	if (rc == 0 && child == 0)
		rc = mf_bad(p, "an entry naming the root");
	if (rc == 0 && !S_ISDIR(m->inodes[parent].mode))
		rc = mf_bad(p, "an entry in inode %" PRIu64 ", which is not a directory", parent);
	if (rc == 0)
		rc = mf_name(p, 3, "entry name");
	if (rc == 0)
		rc = mf_grow(p, (void **)&m->entries, &p->cap_entries, m->n_entries,
			     sizeof(*m->entries));
	if (rc != 0)
		return rc;
	struct manifest_inode *in = &m->inodes[child];
	if (S_ISDIR(in->mode) && in->links > 0)
		return mf_bad(p, "a second entry for directory %" PRIu64, child);
	if (in->links == UINT32_MAX)
		return mf_bad(p, "too many links");
	if (in->links++ == 0) {
		in->parent = parent;
		in->name = p->fields[3];
	}
	m->entries[m->n_entries++] =
		(struct manifest_entry){ .parent = parent, .child = child, .name = p->fields[3],
					 .line = p->line };
	return 0;
}

static int mf_parse_chunk(struct mf_parse *p)
{
	struct manifest *m = p->m;
	struct manifest_chunk c = { 0 };
	uint64_t v = 0;
	int rc = mf_fields(p, 5, "chunk");
	if (rc == 0 && hash_from_hex(p->fields[1], c.hash) != 0)
		rc = mf_bad(p, "chunk: \"%.70s\" is not 64 hex digits", p->fields[1]);
	if (rc == 0)
		rc = mf_u64(p, 2, "plain length", chunker_default_params.max_size, &c.plain_len);
	if (rc == 0 && c.plain_len == 0)
		rc = mf_bad(p, "chunk: plain length 0");
	if (rc == 0)
		rc = mf_u64(p, 3, "codec", 255, &v);
	c.codec = (uint8_t)v;
	if (rc == 0 && !codec_known(c.codec))
		rc = mf_bad(p, "chunk: codec %u is not one this ckptfs knows", c.codec);
	if (rc == 0)
		rc = mf_u64(p, 4, "stored length", codec_bound((size_t)c.plain_len), &c.stored_len);
	if (rc == 0 && m->n_chunks > 0 &&
	    memcmp(m->chunks[m->n_chunks - 1].hash, c.hash, CAT_HASH_LEN) >= 0)
		rc = mf_bad(p, "chunk %.16s…: chunks are listed once each, in hash order",
			    p->fields[1]);
	if (rc == 0)
		rc = mf_grow(p, (void **)&m->chunks, &p->cap_chunks, m->n_chunks, sizeof(*m->chunks));
	if (rc == 0)
		m->chunks[m->n_chunks++] = c;
	return rc;
}

static int mf_chunk_cmp(const void *key, const void *elem)
{
	return memcmp(key, ((const struct manifest_chunk *)elem)->hash, CAT_HASH_LEN);
}

static int mf_parse_ext(struct mf_parse *p)
{
	struct manifest *m = p->m;
	struct manifest_extent x = { 0 };
	uint8_t hash[CAT_HASH_LEN];
	int rc = mf_fields(p, 6, "ext");
	if (rc == 0)
		rc = mf_u64(p, 1, "inode id", m->n_inodes - 1, &x.inode);
	if (rc == 0 && !S_ISREG(m->inodes[x.inode].mode))
		rc = mf_bad(p, "an extent of inode %" PRIu64 ", which is not a regular file", x.inode);
	if (rc == 0)
		rc = mf_u64(p, 2, "offset", MANIFEST_FILE_SIZE_MAX, &x.off);
	if (rc == 0)
		rc = mf_u64(p, 3, "length", chunker_default_params.max_size, &x.len);
	if (rc == 0 && (x.len == 0 || x.off + x.len > MANIFEST_FILE_SIZE_MAX))
		rc = mf_bad(p, "an extent of length %" PRIu64 " at %" PRIu64, x.len, x.off);
	if (rc == 0)
		rc = mf_u64(p, 4, "chunk offset", INT64_MAX, &x.chunk_off);
	if (rc == 0 && hash_from_hex(p->fields[5], hash) != 0)
		rc = mf_bad(p, "ext: \"%.70s\" is not 64 hex digits", p->fields[5]);
	if (rc != 0)
		return rc;
	const struct manifest_chunk *c =
		m->n_chunks == 0 ? NULL /* bsearch's array may not be NULL */
				 : bsearch(hash, m->chunks, m->n_chunks, sizeof(*m->chunks),
					   mf_chunk_cmp);
	if (c == NULL)
		return mf_bad(p, "ext: chunk %.16s… is not listed", p->fields[5]);
	if (x.chunk_off > c->plain_len || x.len > c->plain_len - x.chunk_off)
		return mf_bad(p, "ext: bytes [%" PRIu64 ", +%" PRIu64 ") of a chunk of %" PRIu64,
			      x.chunk_off, x.len, c->plain_len);
	x.chunk = (uint32_t)(c - m->chunks);
	if (m->n_extents > 0) {
		const struct manifest_extent *prev = &m->extents[m->n_extents - 1];
		if (prev->inode > x.inode || (prev->inode == x.inode && prev->off + prev->len > x.off))
			return mf_bad(p, "ext: extents must be in (inode, offset) order and must not"
				      " overlap");
	}
	rc = mf_grow(p, (void **)&m->extents, &p->cap_extents, m->n_extents, sizeof(*m->extents));
	if (rc != 0)
		return rc;
	m->chunks[x.chunk].refs++;
	m->extents[m->n_extents++] = x;
	return 0;
}

/* Checks the header line; -EPROTONOSUPPORT for another format version. */
static int mf_header(struct mf_parse *p, const char *buf, size_t len)
{
	const char *nl = memchr(buf, '\n', len);
	size_t n = nl ? (size_t)(nl - buf) : len;
	char line[64];
	p->line = 1;
	/* n first: a buffer shorter than the magic is not read past its end */
	if (n >= sizeof(line) || n < strlen(MF_MAGIC) + 1 ||
	    memcmp(buf, MF_MAGIC " ", strlen(MF_MAGIC) + 1) != 0 || memchr(buf, 0, n) != NULL)
		return mf_bad(p, "not a ckptfs manifest (no \"" MF_MAGIC "\" header)");
	memcpy(line, buf, n);
	line[n] = 0;
	const char *s = line + strlen(MF_MAGIC) + 1, *end;
	uint64_t version;
	if (mf_digits(s, &end, &version) != 0 || *end != ' ')
		return mf_bad(p, "a header without a format version");
	if (version != MANIFEST_FORMAT_VERSION) {
		mf_bad(p, "format version %" PRIu64 ": this ckptfs reads version %d", version,
		       MANIFEST_FORMAT_VERSION);
		return -EPROTONOSUPPORT;
	}
	if (strcmp(end + 1, "gen") == 0)
		p->m->kind = MANIFEST_GEN;
	else if (strcmp(end + 1, "tree") == 0)
		p->m->kind = MANIFEST_TREE;
	else
		return mf_bad(p, "kind \"%.20s\": expected gen or tree", end + 1);
	if (nl == NULL)
		return mf_bad(p, "the manifest ends after its header (truncated)");
	return 0;
}

/* The last line is "sum <SHA-256 of all bytes before it>". */
static int mf_checksum(struct mf_parse *p, const char *buf, size_t len, size_t *body)
{
	uint8_t want[HASH_LEN], got[HASH_LEN];
	size_t start = len >= MF_SUM_LINE_LEN ? len - MF_SUM_LINE_LEN : 0;
	p->line = 0;
	for (size_t i = 0; i < start; i++)
		p->line += buf[i] == '\n';
	p->line++;
	if (len < MF_SUM_LINE_LEN || buf[len - 1] != '\n' || (start > 0 && buf[start - 1] != '\n') ||
	    memcmp(buf + start, "sum ", 4) != 0) {
		mf_err(p->err, p->errsz, "no \"sum\" line at the end (truncated?)");
		return -EBADMSG;
	}
	char hex[HASH_HEX_LEN + 1];
	memcpy(hex, buf + start + 4, HASH_HEX_LEN);
	hex[HASH_HEX_LEN] = 0;
	if (hash_from_hex(hex, want) != 0)
		return mf_bad(p, "sum: not 64 hex digits");
	hash_sha256(buf, start, got);
	if (memcmp(want, got, HASH_LEN) != 0) {
		mf_err(p->err, p->errsz, "line %" PRIu32 ": checksum mismatch: the manifest is"
		       " corrupt", p->line);
		return -EBADMSG;
	}
	*body = start;
	return 0;
}

/* Every inode reachable from the root, each directory named once; fills
 * subdirectory counts. Breadth-first over entries grouped by parent. */
static int mf_reachable(struct mf_parse *p)
{
	struct manifest *m = p->m;
	for (size_t i = 1; i < m->n_inodes; i++)
		if (m->inodes[i].links == 0) {
			mf_err(p->err, p->errsz, "inode %zu: no entry names it", i);
			return -EINVAL;
		}
	/* Directories have exactly one entry, so walking up from each inode
	 * ends at the root unless there is a cycle. Each walk stops at an inode
	 * whose depth is known, so the whole check is linear; one longer than
	 * MF_MAX_DEPTH is a cycle or a tree too deep to be a real one. */
	uint32_t *depth = calloc(m->n_inodes, sizeof(*depth)); /* 0: not known yet */
	uint64_t *walk = malloc((MF_MAX_DEPTH + 1) * sizeof(*walk));
	int rc = depth && walk ? 0 : -ENOMEM;
	for (size_t i = 1; i < m->n_inodes && rc == 0; i++) {
		size_t n = 0;
		uint64_t at = i;
		while (at != 0 && depth[at] == 0 && n <= MF_MAX_DEPTH) {
			walk[n++] = at;
			at = m->inodes[at].parent;
		}
		uint32_t d = at == 0 ? 0 : depth[at];
		if (n > MF_MAX_DEPTH || d + n > MF_MAX_DEPTH) {
			mf_err(p->err, p->errsz, "inode %zu: its entries form a cycle unreachable"
			       " from the root, or a tree deeper than %d", i, MF_MAX_DEPTH);
			rc = -EINVAL;
			break;
		}
		while (n > 0)
			depth[walk[--n]] = ++d;
	}
	free(depth);
	free(walk);
	if (rc != 0)
		return rc;
	for (size_t i = 0; i < m->n_chunks; i++)
		if (m->chunks[i].refs == 0) {
			char hex[HASH_HEX_LEN + 1];
			hash_to_hex(m->chunks[i].hash, hex);
			mf_err(p->err, p->errsz, "chunk %s: listed but named by no extent", hex);
			return -EINVAL;
		}
	return 0;
}

static int mf_ent_cmp(const void *a, const void *b)
{
	const struct manifest_entry *x = *(const struct manifest_entry *const *)a;
	const struct manifest_entry *y = *(const struct manifest_entry *const *)b;
	if (x->parent != y->parent)
		return x->parent < y->parent ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int mf_unique_names(struct mf_parse *p)
{
	struct manifest *m = p->m;
	if (m->n_entries < 2)
		return 0;
	const struct manifest_entry **by = malloc(m->n_entries * sizeof(*by));
	if (by == NULL) {
		mf_err(p->err, p->errsz, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->n_entries; i++)
		by[i] = &m->entries[i];
	qsort(by, m->n_entries, sizeof(*by), mf_ent_cmp);
	int rc = 0;
	for (size_t i = 1; i < m->n_entries && rc == 0; i++)
		if (mf_ent_cmp(&by[i - 1], &by[i]) == 0) {
			p->line = by[i]->line > by[i - 1]->line ? by[i]->line : by[i - 1]->line;
			rc = mf_bad(p, "a second entry named \"%.80s\" in directory %" PRIu64,
				    by[i]->name, by[i]->parent);
		}
	free(by);
	return rc;
}

static const struct {
	const char *tag;
	int section;
	int (*parse)(struct mf_parse *p);
} mf_records[] = {
	{ "gen", SEC_GEN, mf_parse_gen },       { "ino", SEC_INO, mf_parse_ino },
	{ "ent", SEC_ENT, mf_parse_ent },       { "chunk", SEC_CHUNK, mf_parse_chunk },
	{ "ext", SEC_EXT, mf_parse_ext },
};
#define MF_RECORDS (sizeof(mf_records) / sizeof(mf_records[0]))

void manifest_free(struct manifest *m)
{
	if (m == NULL)
		return;
	free(m->inodes);
	free(m->entries);
	free(m->chunks);
	free(m->extents);
	free(m->text);
	free(m);
}

int manifest_parse(const char *buf, size_t len, struct manifest **out, char *err, size_t errsz)
{
	struct manifest *m = calloc(1, sizeof(*m));
	struct mf_parse p = { .m = m, .err = err, .errsz = errsz };
	size_t body = 0;
	int rc = m ? 0 : -ENOMEM;
	if (errsz > 0)
		err[0] = 0;
	*out = NULL;
	if (rc == 0 && len > MANIFEST_SIZE_MAX) {
		mf_err(err, errsz, "%zu bytes, more than a manifest may have (%zu)", len,
		       MANIFEST_SIZE_MAX);
		rc = -EFBIG;
	}
	if (rc == 0)
		rc = mf_header(&p, buf, len);
	if (rc == 0)
		rc = mf_checksum(&p, buf, len, &body);
	if (rc == 0 && memchr(buf, 0, body) != NULL) {
		mf_err(err, errsz, "a NUL byte in the manifest");
		rc = -EINVAL;
	}
	if (rc == 0) {
		m->text = malloc(body + 1);
		rc = m->text ? 0 : -ENOMEM;
	}
	if (rc == 0) {
		memcpy(m->text, buf, body);
		m->text[body] = 0;
	}
	char *line = m && m->text ? strchr(m->text, '\n') + 1 : NULL; /* after the header */
	p.line = 1;
	while (rc == 0 && *line) {
		char *nl = strchr(line, '\n');
		assert(nl != NULL); /* the body ends where the sum line starts */
		*nl = 0;
		p.line++;
		p.n_fields = 0;
		for (char *f = line;; f++) {
			if (p.n_fields == (int)(sizeof(p.fields) / sizeof(p.fields[0]))) {
				rc = mf_bad(&p, "too many fields");
				break;
			}
			p.fields[p.n_fields++] = f;
			f = strchr(f, ' ');
			if (f == NULL)
				break;
			*f = 0;
		}
		for (int i = 0; i < p.n_fields && rc == 0; i++)
			if (p.fields[i][0] == 0)
				rc = mf_bad(&p, "an empty field (two spaces, or one at an end)");
		size_t r = 0;
		while (rc == 0 && r < MF_RECORDS && strcmp(p.fields[0], mf_records[r].tag) != 0)
			r++;
		if (rc == 0 && r == MF_RECORDS)
			rc = mf_bad(&p, "an unknown record \"%.20s\"", p.fields[0]);
		if (rc == 0)
			rc = mf_section(&p, mf_records[r].section, mf_records[r].tag);
		if (rc == 0)
			rc = mf_records[r].parse(&p);
		line = nl + 1;
	}
	if (rc == 0 && m->kind == MANIFEST_GEN && m->gen.id == 0)
		rc = mf_bad(&p, "a generation manifest without its \"gen\" line");
	if (rc == 0 && m->n_inodes == 0)
		rc = mf_bad(&p, "no inodes");
	if (rc == 0)
		rc = mf_reachable(&p);
	if (rc == 0)
		rc = mf_unique_names(&p);
	if (rc == -ENOMEM)
		mf_err(err, errsz, "out of memory");
	if (rc != 0) {
		manifest_free(m);
		return rc;
	}
	*out = m;
	return 0;
}

void manifest_inode_path(const struct manifest *m, uint64_t id, char *buf, size_t size)
{
	const char *names[MF_MAX_DEPTH];
	int depth = 0;
	while (id != 0 && id < m->n_inodes && depth < MF_MAX_DEPTH) {
		names[depth++] = m->inodes[id].name;
		id = m->inodes[id].parent;
	}
	size_t at = 0;
	if (size == 0)
		return;
	buf[0] = 0;
	for (int i = depth - 1; i >= 0 && at < size; i--) {
		int n = snprintf(buf + at, size - at, "%s%s", i == depth - 1 ? "" : "/", names[i]);
		if (n < 0)
			break;
		at += (size_t)n;
	}
}

/* ---- applying ---- */

enum mf_stmt {
	A_LOOKUP, A_INODE_INSERT, A_INODE_ATTR, A_NLINK_ADD, A_DIRENT_INSERT, A_GEN_EXISTS,
	A_GEN_INSERT, A_CHUNK_UPSERT, A_EXTENT_INSERT, A_COUNT
};

static const char *const mf_apply_sql[A_COUNT] = {
	[A_LOOKUP] = "SELECT d.ino, i.mode, i.gen FROM dirents d JOIN inodes i ON i.ino = d.ino"
		     " WHERE d.parent = ?1 AND d.name = ?2",
	[A_INODE_INSERT] = "INSERT INTO inodes(mode, uid, gid, nlink, size, rdev, atime_ns,"
			   " mtime_ns, ctime_ns, target, gen) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7,"
			   " ?8, ?9, ?10, ?11)",
	[A_INODE_ATTR] = "UPDATE inodes SET mode = ?2, uid = ?3, gid = ?4, atime_ns = ?5,"
			 " mtime_ns = ?6, ctime_ns = ?7 WHERE ino = ?1",
	[A_NLINK_ADD] = "UPDATE inodes SET nlink = nlink + 1 WHERE ino = ?1",
	[A_DIRENT_INSERT] = "INSERT INTO dirents(parent, name, ino) VALUES(?1, ?2, ?3)",
	[A_GEN_EXISTS] = "SELECT state FROM generations WHERE id = ?1",
	[A_GEN_INSERT] = "INSERT INTO generations(id, series, root, name, step, state, version,"
			 " pinned, created_ns, committed_ns, ended_ns, rule, backup_root)"
			 " VALUES(?1, ?2, ?3, ?4, ?5, 1, ?6, ?7, ?8, ?9, 0, ?10, 0)",
	[A_CHUNK_UPSERT] = NULL, /* cat_refs_manifest_sql: it takes references */
	[A_EXTENT_INSERT] = "INSERT INTO extents(ino, off, len, hash, chunk_off)"
			    " VALUES(?1, ?2, ?3, ?4, ?5)",
};

/* Schema 3 (upload.h): objects named by a manifest are on BACKING; one that
 * had no object here is not in the cache. */
static const char mf_gen_insert_v3[] =
	"INSERT INTO generations(id, series, root, name, step, state, version, pinned,"
	" created_ns, committed_ns, ended_ns, rule, backup_root, durable_version)"
	" VALUES(?1, ?2, ?3, ?4, ?5, 1, ?6, ?7, ?8, ?9, 0, ?10, 0, ?6)";

/* manifest_apply_held (schema 5, M4): HELD with its reason in ?11. Its
 * manifest is on BACKING (durable_version = version, as above): a rebuild
 * read it there. */
static const char mf_gen_insert_held[] =
	"INSERT INTO generations(id, series, root, name, step, state, version, pinned,"
	" created_ns, committed_ns, ended_ns, rule, backup_root, durable_version, held)"
	" VALUES(?1, ?2, ?3, ?4, ?5, 4, ?6, ?7, ?8, ?9, 0, ?10, 0, ?6, ?11)";

struct mf_apply {
	struct cat *cat;
	const struct manifest *m;
	char *err;
	size_t errsz;
	sqlite3_stmt *st[A_COUNT];
	uint64_t *map;   /* local id → catalog inode, 0 while unplaced */
	bool *existing;  /* the catalog inode was there before (merged directory) */
	uint64_t gen;    /* 0 for a tree manifest */
	const char *held; /* manifest_apply_held: the reason (M4), else NULL */
	char held_name[CAT_NAME_MAX + 1]; /* M4: the root's name */
	char *where;      /* M4: the path it was linked at, if not NULL */
	size_t wheresz;
};

void manifest_path_add(char *path, size_t size, const char *name)
{
	if (path == NULL || size == 0)
		return;
	size_t at = strlen(path);
	if (at + 1 < size)
		snprintf(path + at, size - at, "%s%s", at ? "/" : "", name);
}

/* M4: appends "/" (unless first) and name to a->where. */
static void mf_where_add(struct mf_apply *a, const char *name)
{
	manifest_path_add(a->where, a->wheresz, name);
}

void manifest_held_name(const char *base, uint64_t gen_id, char out[CAT_NAME_MAX + 1])
{
	cat_gen_suffixed_name(base, MANIFEST_HELD_SUFFIX, gen_id, out);
}

static void mf_held_name(const struct mf_apply *a, const char *base, char out[CAT_NAME_MAX + 1])
{
	manifest_held_name(base, a->m->gen.id, out);
}

static int mf_step(struct mf_apply *a, enum mf_stmt id, bool row_wanted)
{
	int src = sqlite3_step(a->st[id]);
	if (src == SQLITE_ROW && row_wanted)
		return 1;
	if (src == SQLITE_DONE) {
		sqlite3_reset(a->st[id]);
		return 0;
	}
	mf_err(a->err, a->errsz, "catalog: %s", sqlite3_errmsg(a->cat->db));
	int rc = mf_sql_fail(a->cat, "apply a manifest", a->st[id], src);
	sqlite3_reset(a->st[id]);
	return rc;
}

static void mf_bind_text(sqlite3_stmt *st, int i, const char *s)
{
	if (s)
		sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, i);
}

/* Looks up parent/name: 0 if absent, 1 if present (*ino, *mode, *gen). */
static int mf_lookup(struct mf_apply *a, uint64_t parent, const char *name, uint64_t *ino,
		     uint32_t *mode, uint64_t *gen)
{
	sqlite3_stmt *st = a->st[A_LOOKUP];
	sqlite3_bind_int64(st, 1, (int64_t)parent);
	mf_bind_text(st, 2, name);
	int rc = mf_step(a, A_LOOKUP, true);
	if (rc == 1) {
		*ino = (uint64_t)sqlite3_column_int64(st, 0);
		*mode = (uint32_t)sqlite3_column_int64(st, 1);
		*gen = (uint64_t)sqlite3_column_int64(st, 2);
		sqlite3_reset(st);
	}
	return rc;
}

static int mf_insert_inode(struct mf_apply *a, const struct manifest_inode *in, uint32_t nlink,
			   uint64_t *ino)
{
	sqlite3_stmt *st = a->st[A_INODE_INSERT];
	sqlite3_bind_int64(st, 1, in->mode);
	sqlite3_bind_int64(st, 2, in->uid);
	sqlite3_bind_int64(st, 3, in->gid);
	sqlite3_bind_int64(st, 4, nlink);
	sqlite3_bind_int64(st, 5, (int64_t)in->size);
	sqlite3_bind_int64(st, 6, (int64_t)in->rdev);
	sqlite3_bind_int64(st, 7, in->atime_ns);
	sqlite3_bind_int64(st, 8, in->mtime_ns);
	sqlite3_bind_int64(st, 9, in->ctime_ns);
	mf_bind_text(st, 10, in->target);
	if (a->gen)
		sqlite3_bind_int64(st, 11, (int64_t)a->gen);
	else
		sqlite3_bind_null(st, 11);
	int rc = mf_step(a, A_INODE_INSERT, false);
	if (rc == 0)
		*ino = (uint64_t)sqlite3_last_insert_rowid(a->cat->db);
	return rc;
}

static int mf_set_attr(struct mf_apply *a, uint64_t ino, const struct manifest_inode *in)
{
	sqlite3_stmt *st = a->st[A_INODE_ATTR];
	sqlite3_bind_int64(st, 1, (int64_t)ino);
	sqlite3_bind_int64(st, 2, in->mode);
	sqlite3_bind_int64(st, 3, in->uid);
	sqlite3_bind_int64(st, 4, in->gid);
	sqlite3_bind_int64(st, 5, in->atime_ns);
	sqlite3_bind_int64(st, 6, in->mtime_ns);
	sqlite3_bind_int64(st, 7, in->ctime_ns);
	return mf_step(a, A_INODE_ATTR, false);
}

static int mf_nlink_add(struct mf_apply *a, uint64_t ino)
{
	sqlite3_bind_int64(a->st[A_NLINK_ADD], 1, (int64_t)ino);
	return mf_step(a, A_NLINK_ADD, false);
}

static int mf_dirent(struct mf_apply *a, uint64_t parent, const char *name, uint64_t ino)
{
	sqlite3_stmt *st = a->st[A_DIRENT_INSERT];
	sqlite3_bind_int64(st, 1, (int64_t)parent);
	mf_bind_text(st, 2, name);
	sqlite3_bind_int64(st, 3, (int64_t)ino);
	return mf_step(a, A_DIRENT_INSERT, false);
}

/* The final nlink of a new inode (invariant 2). */
static uint32_t mf_nlink(const struct manifest *m, const uint32_t *subdirs, size_t id)
{
	return S_ISDIR(m->inodes[id].mode) ? 2 + subdirs[id] : m->inodes[id].links;
}

/* Places the entry e (its parent placed already): a new inode, another link
 * to one placed before, or a merge with an existing directory. */
static int mf_place(struct mf_apply *a, const struct manifest_entry *e, const uint32_t *subdirs)
{
	const struct manifest *m = a->m;
	const struct manifest_inode *in = &m->inodes[e->child];
	uint64_t parent = a->map[e->parent];
	int rc;
	assert(parent != 0);
	if (a->existing[e->parent]) {
		uint64_t ino, gen;
		uint32_t mode;
		rc = mf_lookup(a, parent, e->name, &ino, &mode, &gen);
		if (rc < 0)
			return rc;
		if (rc == 1) {
			char path[512];
			manifest_inode_path(m, e->child, path, sizeof(path));
			if (S_ISDIR(in->mode) && S_ISDIR(mode) && gen == 0 && a->map[e->child] == 0) {
				a->map[e->child] = ino;
				a->existing[e->child] = true;
				return mf_set_attr(a, ino, in);
			}
			mf_err(a->err, a->errsz, "line %" PRIu32 ": \"%s\" exists in the catalog as"
			       " inode %" PRIu64 " (mode %o%s)", e->line, path, ino, mode,
			       gen ? ", in a generation" : "");
			return -EEXIST;
		}
	}
	if (a->map[e->child] == 0) {
		rc = mf_insert_inode(a, in, mf_nlink(m, subdirs, e->child), &a->map[e->child]);
		if (rc == 0 && S_ISDIR(in->mode) && a->existing[e->parent])
			rc = mf_nlink_add(a, parent);
		if (rc != 0)
			return rc;
	}
	return mf_dirent(a, parent, e->name, a->map[e->child]);
}

/* Places every entry, parents first: breadth-first from the root over the
 * entries grouped by parent. */
static int mf_place_tree(struct mf_apply *a, const uint32_t *subdirs)
{
	const struct manifest *m = a->m;
	size_t n = m->n_inodes;
	size_t *first = calloc(n + 1, sizeof(*first));
	size_t *by_parent = malloc((m->n_entries + 1) * sizeof(*by_parent));
	size_t *queue = malloc(n * sizeof(*queue));
	int rc = first && by_parent && queue ? 0 : -ENOMEM;
	if (rc == 0) {
		for (size_t i = 0; i < m->n_entries; i++)
			first[m->entries[i].parent + 1]++;
		for (size_t i = 0; i < n; i++)
			first[i + 1] += first[i];
		size_t *fill = calloc(n, sizeof(*fill));
		rc = fill ? 0 : -ENOMEM;
		for (size_t i = 0; rc == 0 && i < m->n_entries; i++) {
			uint64_t p = m->entries[i].parent;
			by_parent[first[p] + fill[p]++] = i; /* stable: manifest order */
		}
		free(fill);
	}
	size_t head = 0, tail = 0;
	if (rc == 0)
		queue[tail++] = 0;
	while (rc == 0 && head < tail) {
		size_t dir = queue[head++];
		for (size_t k = first[dir]; k < first[dir + 1] && rc == 0; k++) {
			const struct manifest_entry *e = &m->entries[by_parent[k]];
			rc = mf_place(a, e, subdirs);
			if (rc == 0 && S_ISDIR(m->inodes[e->child].mode)) {
				assert(tail < n);
				queue[tail++] = e->child;
			}
		}
	}
	free(first);
	free(by_parent);
	free(queue);
	return rc;
}

static int mf_chunks_extents(struct mf_apply *a)
{
	const struct manifest *m = a->m;
	int rc = 0;
	for (size_t i = 0; i < m->n_chunks && rc == 0; i++) {
		const struct manifest_chunk *c = &m->chunks[i];
		sqlite3_stmt *st = a->st[A_CHUNK_UPSERT];
		sqlite3_bind_blob(st, 1, c->hash, CAT_HASH_LEN, SQLITE_STATIC);
		sqlite3_bind_int64(st, 2, (int64_t)c->plain_len);
		sqlite3_bind_int64(st, 3, c->codec);
		sqlite3_bind_int64(st, 4, (int64_t)c->stored_len);
		sqlite3_bind_int64(st, 5, (int64_t)c->refs);
		rc = mf_step(a, A_CHUNK_UPSERT, true);
		if (rc == 1) {
			uint64_t plain = (uint64_t)sqlite3_column_int64(st, 0);
			rc = sqlite3_step(st) == SQLITE_DONE ? 0 : -EIO;
			sqlite3_reset(st);
			if (rc == 0 && plain != c->plain_len) {
				char hex[HASH_HEX_LEN + 1];
				hash_to_hex(c->hash, hex);
				mf_err(a->err, a->errsz, "chunk %s: plain length %" PRIu64 " in the"
				       " manifest, %" PRIu64 " in the catalog", hex, c->plain_len, plain);
				rc = -EIO;
			}
		}
	}
	for (size_t i = 0; i < m->n_extents && rc == 0; i++) {
		const struct manifest_extent *x = &m->extents[i];
		sqlite3_stmt *st = a->st[A_EXTENT_INSERT];
		assert(a->map[x->inode] != 0 && !a->existing[x->inode]);
		sqlite3_bind_int64(st, 1, (int64_t)a->map[x->inode]);
		sqlite3_bind_int64(st, 2, (int64_t)x->off);
		sqlite3_bind_int64(st, 3, (int64_t)x->len);
		sqlite3_bind_blob(st, 4, m->chunks[x->chunk].hash, CAT_HASH_LEN, SQLITE_STATIC);
		sqlite3_bind_int64(st, 5, (int64_t)x->chunk_off);
		rc = mf_step(a, A_EXTENT_INSERT, false);
	}
	return rc;
}

/* mkdir -p of the series path; *series gets its inode. */
static int mf_series(struct mf_apply *a, uint64_t *series)
{
	const struct manifest *m = a->m;
	char comp[CAT_NAME_MAX + 1];
	const char *s = m->gen.series;
	uint64_t dir = CAT_ROOT_INO;
	int rc = 0;
	while (rc == 0 && *s) {
		size_t n = strcspn(s, "/");
		memcpy(comp, s, n);
		comp[n] = 0;
		s += n + (s[n] == '/');
		uint64_t ino, gen;
		uint32_t mode;
		rc = mf_lookup(a, dir, comp, &ino, &mode, &gen);
		if (rc == 1 && (!S_ISDIR(mode) || gen != 0) && a->held) {
			/* M4: a component taken by something else: its renamed twin */
			char held[CAT_NAME_MAX + 1];
			mf_held_name(a, comp, held);
			memcpy(comp, held, sizeof(held));
			rc = mf_lookup(a, dir, comp, &ino, &mode, &gen);
		}
		mf_where_add(a, comp);
		if (rc == 1) {
			if (!S_ISDIR(mode) || gen != 0) {
				mf_err(a->err, a->errsz, "line 2: series \"%s\": \"%s\" exists as inode"
				       " %" PRIu64 " (mode %o%s), not a directory outside generations",
				       m->gen.series, comp, ino, mode, gen ? ", in a generation" : "");
				return -EEXIST;
			}
			dir = ino;
			rc = 0;
			continue;
		}
		if (rc != 0)
			break;
		struct manifest_inode d = { .mode = S_IFDIR | 0755, .uid = m->inodes[0].uid,
					    .gid = m->inodes[0].gid, .atime_ns = m->gen.committed_ns,
					    .mtime_ns = m->gen.committed_ns,
					    .ctime_ns = m->gen.committed_ns };
		uint64_t gen_saved = a->gen;
		a->gen = 0; /* series are outside generations */
		rc = mf_insert_inode(a, &d, 2, &ino);
		a->gen = gen_saved;
		if (rc == 0)
			rc = mf_dirent(a, dir, comp, ino);
		if (rc == 0)
			rc = mf_nlink_add(a, dir);
		dir = ino;
	}
	*series = dir;
	return rc;
}

static int mf_apply_gen(struct mf_apply *a, const uint32_t *subdirs)
{
	const struct manifest *m = a->m;
	const struct manifest_gen_row *g = &m->gen;
	uint64_t series = 0, ino, gen;
	uint32_t mode;
	sqlite3_bind_int64(a->st[A_GEN_EXISTS], 1, (int64_t)g->id);
	int rc = mf_step(a, A_GEN_EXISTS, true);
	if (rc == 1) {
		mf_err(a->err, a->errsz, "line 2: generation %" PRIu64 " is in the catalog already"
		       " (state %d)", g->id, sqlite3_column_int(a->st[A_GEN_EXISTS], 0));
		sqlite3_reset(a->st[A_GEN_EXISTS]);
		return -EEXIST;
	}
	if (rc == 0)
		rc = mf_series(a, &series);
	const char *name = a->held ? a->held_name : g->name;
	mf_where_add(a, name);
	if (rc == 0) {
		rc = mf_lookup(a, series, name, &ino, &mode, &gen);
		if (rc == 1) {
			mf_err(a->err, a->errsz, "line 2: \"%s%s%s\" exists in the catalog as inode"
			       " %" PRIu64, g->series, g->series[0] ? "/" : "", name, ino);
			rc = -EEXIST;
		}
	}
	if (rc == 0)
		rc = mf_insert_inode(a, &m->inodes[0], mf_nlink(m, subdirs, 0) +
				     !S_ISDIR(m->inodes[0].mode), &a->map[0]);
	if (rc == 0)
		rc = mf_dirent(a, series, name, a->map[0]);
	if (rc == 0 && S_ISDIR(m->inodes[0].mode))
		rc = mf_nlink_add(a, series);
	if (rc == 0) {
		sqlite3_stmt *st = a->st[A_GEN_INSERT];
		sqlite3_bind_int64(st, 1, (int64_t)g->id);
		sqlite3_bind_int64(st, 2, (int64_t)series);
		sqlite3_bind_int64(st, 3, (int64_t)a->map[0]);
		mf_bind_text(st, 4, name);
		sqlite3_bind_int64(st, 5, (int64_t)g->step);
		sqlite3_bind_int64(st, 6, g->version);
		sqlite3_bind_int64(st, 7, g->pinned);
		sqlite3_bind_int64(st, 8, g->created_ns);
		sqlite3_bind_int64(st, 9, g->committed_ns);
		mf_bind_text(st, 10, a->held ? MANIFEST_HELD_RULE : g->rule);
		if (a->held)
			mf_bind_text(st, 11, a->held);
		rc = mf_step(a, A_GEN_INSERT, false);
	}
	return rc;
}

static int mf_apply_run(struct cat *cat, const struct manifest *m, const char *held, char *where,
			size_t wheresz, char *err, size_t errsz)
{
	struct mf_apply a = { .cat = cat, .m = m, .err = err, .errsz = errsz, .held = held,
			      .where = where, .wheresz = wheresz };
	if (where && wheresz > 0)
		where[0] = '\0';
	uint32_t *subdirs = calloc(m->n_inodes, sizeof(*subdirs));
	int rc = 0;
	if (errsz > 0)
		err[0] = 0;
	if (held)
		mf_held_name(&a, m->gen.name, a.held_name);
	a.map = calloc(m->n_inodes, sizeof(*a.map));
	a.existing = calloc(m->n_inodes, sizeof(*a.existing));
	if (subdirs == NULL || a.map == NULL || a.existing == NULL)
		rc = -ENOMEM;
	for (size_t i = 0; rc == 0 && i < m->n_entries; i++)
		if (S_ISDIR(m->inodes[m->entries[i].child].mode))
			subdirs[m->entries[i].parent]++;

	cat_lock(cat);
	bool v3 = cat->schema_version >= 3;
	for (int i = 0; i < A_COUNT && rc == 0; i++) {
		const char *sql = mf_apply_sql[i];
		if (v3 && i == A_GEN_INSERT)
			sql = held ? mf_gen_insert_held : mf_gen_insert_v3;
		if (i == A_CHUNK_UPSERT)
			sql = cat_refs_manifest_sql(cat->schema_version);
		rc = mf_prepare(cat, "prepare a manifest statement", sql, &a.st[i]);
	}
	if (rc == 0)
		rc = cat_begin(cat);
	if (rc == 0 && m->kind == MANIFEST_GEN) {
		a.gen = m->gen.id;
		rc = mf_apply_gen(&a, subdirs);
	} else if (rc == 0) {
		a.map[0] = CAT_ROOT_INO;
		a.existing[0] = true;
		rc = mf_set_attr(&a, CAT_ROOT_INO, &m->inodes[0]);
	}
	if (rc == 0)
		rc = mf_place_tree(&a, subdirs);
	if (rc == 0)
		rc = mf_chunks_extents(&a);
	rc = cat_end(cat, rc);
	for (int i = 0; i < A_COUNT; i++)
		sqlite3_finalize(a.st[i]);
	cat_unlock(cat);

	if (rc != 0 && where && wheresz > 0)
		where[0] = '\0'; /* linked nowhere */
	if (rc == -ENOMEM)
		mf_err(err, errsz, "out of memory");
	else if (rc != 0 && errsz > 0 && err[0] == 0)
		mf_err(err, errsz, "catalog: %s", strerror(-rc));
	if (rc == 0 && m->kind == MANIFEST_GEN)
		log_info("catalog %s: applied the manifest of generation %" PRIu64 " version %" PRIu32
			 " (%s%s%s: %zu inodes, %" PRIu64 " files, %" PRIu64 " bytes, %zu chunks)%s%s%s",
			 cat->path, m->gen.id, m->gen.version, m->gen.series,
			 m->gen.series[0] ? "/" : "", m->gen.name, m->n_inodes, m->files, m->bytes,
			 m->n_chunks, held ? " HELD as " : "", held && where ? where : "",
			 held ? " (M4)" : "");
	else if (rc == 0)
		log_info("catalog %s: applied the manifest of the tree outside generations (%zu"
			 " inodes, %" PRIu64 " files, %" PRIu64 " bytes, %zu chunks)", cat->path,
			 m->n_inodes, m->files, m->bytes, m->n_chunks);
	free(subdirs);
	free(a.map);
	free(a.existing);
	return rc;
}

int manifest_apply_parsed(struct cat *cat, const struct manifest *m, char *err, size_t errsz)
{
	if (cat->shared) return manifest_shared_apply(cat, m, err, errsz);
	return mf_apply_run(cat, m, NULL, NULL, 0, err, errsz);
}

int manifest_apply_held(struct cat *cat, const struct manifest *m, const char *reason, char *where,
			size_t wheresz, char *err, size_t errsz)
{
	if (where && wheresz > 0)
		where[0] = '\0';
	if (errsz > 0)
		err[0] = 0;
	if (m->kind != MANIFEST_GEN || reason == NULL || reason[0] == '\0' ||
	    strlen(reason) >= GEN_HELD_MAX) {
		mf_err(err, errsz, "only a generation manifest is applied held, with a reason of 1 to"
		       " %d bytes", GEN_HELD_MAX - 1);
		return -EINVAL;
	}
	if (cat->shared)
		return manifest_shared_apply_held(cat, m, reason, where, wheresz, err, errsz);
	if (cat->schema_version < 5) { /* schema 5 has `held` */
		mf_err(err, errsz, "a catalog of schema version < 5 cannot apply a manifest held");
		return -EOPNOTSUPP;
	}
	return mf_apply_run(cat, m, reason, where, wheresz, err, errsz);
}

int manifest_apply(struct cat *cat, const char *buf, size_t len, char *err, size_t errsz)
{
	struct manifest *m;
	int rc = manifest_parse(buf, len, &m, err, errsz);
	if (rc != 0)
		return rc;
	rc = manifest_apply_parsed(cat, m, err, errsz);
	manifest_free(m);
	return rc;
}
