/* manifest_shared — generation manifests from the shared catalog; see
 * manifest_shared.h (D1-D6). */
#define _GNU_SOURCE
#include "manifest_shared.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog_internal.h"
#include "catalog_shared_data.h"
#include "generation.h"
#include "hash.h"
#include "log.h"
#include "manifest.h"
#include "pggen.h"
#include "pgns.h"

/* ---- building (D1) ---- */

/* The rows of a tree turned into manifest.h's parsed form; strings point
 * into the PGresults of t, which outlive it. */
struct msh_build {
	struct cat *cat;
	uint64_t gen;
	const struct pggen_tree *t;
	struct manifest m;
	uint64_t *inos; /* local id → shared inode; [1..n) ascending (the query's order) */
	char *series;
};

static int msh_fail(struct msh_build *b, const char *what)
{
	if (b->gen == 0)
		log_error("catalog %s: manifest of the tree outside generations: %s", b->cat->path,
			  what);
	else
		log_error("catalog %s: manifest of generation %" PRIu64 ": %s", b->cat->path, b->gen,
			  what);
	return -EIO;
}

static int msh_ino_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The local id of shared inode ino; -1 if it is not in the tree. */
static int64_t msh_local(const struct msh_build *b, uint64_t ino)
{
	size_t n = b->m.n_inodes;
	if (n > 0 && ino == b->inos[0])
		return 0;
	if (n < 2)
		return -1;
	const uint64_t *p = bsearch(&ino, b->inos + 1, n - 1, sizeof(uint64_t), msh_ino_cmp);
	return p ? p - b->inos : -1;
}

/* The gen line's fields; -ESTALE unless COMMITTED at exactly version. */
static int msh_gen(struct msh_build *b, uint32_t version)
{
	const PGresult *g = b->t->gen, *p = b->t->path;
	if (pg_int(g, 0, 4) != GEN_COMMITTED || (uint32_t)pg_int(g, 0, 5) != version ||
	    PQgetvalue(g, 0, 10)[0] == 't')
		return -ESTALE;
	struct manifest_gen_row *r = &b->m.gen;
	r->id = b->gen;
	r->version = version;
	r->step = (uint64_t)pg_int(g, 0, 3);
	r->pinned = PQgetvalue(g, 0, 6)[0] == 't';
	r->created_ns = pg_int(g, 0, 7);
	r->committed_ns = pg_int(g, 0, 8);
	r->name = PQgetvalue(g, 0, 2);
	r->rule = PQgetvalue(g, 0, 9);
	/* the series path: its components from the root down, '/'-joined */
	int n = pg_rows(p);
	if (n > 0 && pg_int(p, 0, 1) != CAT_ROOT_INO)
		return msh_fail(b, "its series directory is not reachable from the root");
	size_t len = 1;
	for (int i = 0; i < n; i++)
		len += (size_t)PQgetlength(p, i, 0) + 1;
	b->series = calloc(1, len);
	if (b->series == NULL)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		if (i > 0)
			strcat(b->series, "/");
		strcat(b->series, PQgetvalue(p, i, 0));
	}
	r->series = b->series;
	return 0;
}

static int msh_inodes(struct msh_build *b)
{
	const PGresult *r = b->t->inodes;
	int n = pg_rows(r);
	if (n == 0)
		return msh_fail(b, "its root inode is missing");
	b->m.inodes = calloc((size_t)n, sizeof(*b->m.inodes));
	b->inos = calloc((size_t)n, sizeof(*b->inos));
	if (b->m.inodes == NULL || b->inos == NULL)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		struct manifest_inode *in = &b->m.inodes[i];
		b->inos[i] = (uint64_t)pg_int(r, i, 0);
		if (i > 1 && b->inos[i] <= b->inos[i - 1])
			return msh_fail(b, "its inodes came out of order");
		in->mode = (uint32_t)pg_int(r, i, 1);
		in->uid = (uint32_t)pg_int(r, i, 2);
		in->gid = (uint32_t)pg_int(r, i, 3);
		in->size = (uint64_t)pg_int(r, i, 4);
		in->rdev = (uint64_t)pg_int(r, i, 5);
		in->atime_ns = pg_int(r, i, 6);
		in->mtime_ns = pg_int(r, i, 7);
		in->ctime_ns = pg_int(r, i, 8);
		in->target = PQgetisnull(r, i, 9) ? NULL : PQgetvalue(r, i, 9);
	}
	b->m.n_inodes = (size_t)n;
	return 0;
}

static int msh_entries(struct msh_build *b)
{
	const PGresult *r = b->t->entries;
	int n = pg_rows(r);
	b->m.entries = calloc(n ? (size_t)n : 1, sizeof(*b->m.entries));
	if (b->m.entries == NULL)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		int64_t parent = msh_local(b, (uint64_t)pg_int(r, i, 0));
		int64_t child = msh_local(b, (uint64_t)pg_int(r, i, 1));
		if (parent < 0 || child <= 0)
			return msh_fail(b, "an entry of its tree leads outside it");
		b->m.entries[i] = (struct manifest_entry){ (uint64_t)parent, (uint64_t)child,
							   PQgetvalue(r, i, 2), 0 };
	}
	b->m.n_entries = (size_t)n;
	return 0;
}

static int msh_chunks(struct msh_build *b)
{
	const PGresult *r = b->t->chunks;
	int n = pg_rows(r);
	b->m.chunks = calloc(n ? (size_t)n : 1, sizeof(*b->m.chunks));
	if (b->m.chunks == NULL)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		struct manifest_chunk *c = &b->m.chunks[i];
		if (hash_from_hex(PQgetvalue(r, i, 0), c->hash) != 0)
			return msh_fail(b, "a chunk hash is not 32 bytes");
		c->plain_len = (uint64_t)pg_int(r, i, 1);
		c->codec = (uint8_t)pg_int(r, i, 2);
		c->stored_len = (uint64_t)pg_int(r, i, 3);
	}
	b->m.n_chunks = (size_t)n;
	return 0;
}

/* The index of the chunk whose hex hash is hex (chunks come sorted). */
static int64_t msh_chunk_index(const struct msh_build *b, const char *hex)
{
	const PGresult *r = b->t->chunks;
	int lo = 0, hi = pg_rows(r);
	while (lo < hi) {
		int mid = lo + (hi - lo) / 2, c = strcmp(PQgetvalue(r, mid, 0), hex);
		if (c == 0)
			return mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

static int msh_extents(struct msh_build *b)
{
	const PGresult *r = b->t->extents;
	int n = pg_rows(r);
	b->m.extents = calloc(n ? (size_t)n : 1, sizeof(*b->m.extents));
	if (b->m.extents == NULL)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		struct manifest_extent *x = &b->m.extents[i];
		int64_t local = msh_local(b, (uint64_t)pg_int(r, i, 0));
		int64_t chunk = msh_chunk_index(b, PQgetvalue(r, i, 4));
		if (local < 0 || chunk < 0)
			return msh_fail(b, "an extent names an inode or chunk outside its tree");
		x->inode = (uint64_t)local;
		x->off = (uint64_t)pg_int(r, i, 1);
		x->len = (uint64_t)pg_int(r, i, 2);
		x->chunk_off = (uint64_t)pg_int(r, i, 3);
		x->chunk = (uint32_t)chunk;
	}
	b->m.n_extents = (size_t)n;
	return 0;
}

/* Everything after a manifest's header rows, in manifest.c's order, then the
 * text: the same for a generation's tree and the tree outside them. */
static int msh_body(struct msh_build *b, char **out, size_t *len)
{
	int rc = msh_inodes(b);
	if (rc == 0)
		rc = msh_entries(b);
	if (rc == 0)
		rc = msh_chunks(b);
	if (rc == 0)
		rc = msh_extents(b);
	if (rc == 0)
		rc = manifest_format(&b->m, out, len);
	return rc;
}

static void msh_build_free(struct msh_build *b)
{
	free(b->m.inodes);
	free(b->m.entries);
	free(b->m.chunks);
	free(b->m.extents);
	free(b->inos);
	free(b->series); /* NULL for the tree outside generations */
}

int manifest_shared_gen_build(struct cat *cat, uint64_t gen_id, uint32_t version, char **out,
			      size_t *len)
{
	struct pggen_tree t;
	struct msh_build b = { .cat = cat, .gen = gen_id, .t = &t };
	b.m.kind = MANIFEST_GEN;
	int rc = pggen_tree_read(cat_shared_ns(cat), gen_id, &t);
	if (rc == 0)
		rc = msh_gen(&b, version);
	if (rc == 0)
		rc = msh_body(&b, out, len);
	if (rc != 0 && rc != -ESTALE && rc != -ENOENT)
		log_error("catalog %s: cannot build the manifest of generation %" PRIu64
			  " version %" PRIu32 ": %s", cat->path, gen_id, version, strerror(-rc));
	msh_build_free(&b);
	pggen_tree_clear(&t);
	return rc;
}

/* ---- applying (rebuild --meta) ---- */

int manifest_shared_apply(struct cat *cat, const struct manifest *m, char *err, size_t errsz)
{
	return pggen_apply_manifest(cat_shared_ns(cat), m, err, errsz);
}

int manifest_shared_apply_held(struct cat *cat, const struct manifest *m, const char *reason,
			       char *where, size_t wheresz, char *err, size_t errsz)
{
	int rc = pggen_apply_manifest_held(cat_shared_ns(cat), m, reason, where, wheresz, err,
					   errsz);
	if (rc == 0)
		log_info("catalog %s: applied the manifest of generation %" PRIu64 " version %" PRIu32
			 " (%s%s%s: %zu inodes, %" PRIu64 " files, %" PRIu64 " bytes, %zu chunks) HELD"
			 " as %s (M4)", cat->path, m->gen.id, m->gen.version, m->gen.series,
			 m->gen.series[0] ? "/" : "", m->gen.name, m->n_inodes, m->files, m->bytes,
			 m->n_chunks, where ? where : "");
	return rc;
}

int manifest_shared_empty(struct cat *cat, char *why, size_t size)
{
	uint64_t inodes = 0, gens = 0, chunks = 0;
	int rc = pggen_rebuild_counts(cat_shared_ns(cat), &inodes, &gens, &chunks);
	if (rc == 0 && (inodes || gens || chunks)) {
		snprintf(why, size, "it holds %" PRIu64 " inodes besides the root, %" PRIu64
			 " generations and %" PRIu64 " chunks", inodes, gens, chunks);
		rc = -ENOTEMPTY;
	}
	return rc;
}

int manifest_shared_adopt_id(struct cat *cat, const char *catalog_id)
{
	return pggen_rebuild_catalog_id(cat_shared_ns(cat), catalog_id);
}

/* ---- the upload queue's generation rows (D2, D3) ---- */

int catshd_upload_ready(struct cat *cat, const struct cat_upload *u, bool *ready, bool *stale)
{
	assert(u->kind == UP_GEN_MANIFEST);
	return pggen_durable_state(cat_shared_ns(cat), u->gen, u->version, ready, stale);
}

int catshd_upload_done_many(struct cat *cat, const struct cat_upload *rows, size_t n)
{
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < n; i++)
		if (rows[i].kind == UP_GEN_MANIFEST)
			rc = pggen_durable_set(cat_shared_ns(cat), rows[i].gen, rows[i].version);
	return rc == 0 ? catsh_upload_done_many(cat, rows, n) : rc;
}

int catshd_gen_durable(struct cat *cat, uint64_t gen, bool *durable)
{
	uint64_t left = 0;
	int rc = pggen_not_durable(cat_shared_ns(cat), gen, &left);
	if (rc == 0)
		*durable = left == 0;
	return rc;
}

int manifest_shared_gen_fate(struct cat *cat, uint64_t gen, uint32_t version,
			     enum manifest_shared_fate *fate)
{
	struct pgns *ns = cat_shared_ns(cat);
	struct cat_gen g;
	bool lost = false;
	uint64_t left = 1;
	int rc = pggen_get(ns, gen, &g, &lost);
	*fate = MSH_FATE_OTHER;
	if (rc == -ENOENT || (rc == 0 && (g.state == GEN_ABORTED || g.state == GEN_DELETED)))
		*fate = MSH_FATE_ENDED;
	else if (rc == 0 && g.state == GEN_COMMITTED && g.version == version && !lost)
		*fate = MSH_FATE_CURRENT;
	else if (rc == 0 && g.version > version) /* versions only grow: durable is above */
		rc = pggen_not_durable(ns, gen, &left);
	if (rc == 0 && left == 0)
		*fate = MSH_FATE_NEWER_DURABLE;
	return rc == -ENOENT ? 0 : rc;
}

int catshd_gen_upload_bytes(struct cat *cat, uint64_t gen, uint64_t *total, uint64_t *left)
{
	return pggen_upload_bytes(cat_shared_ns(cat), gen, total, left);
}

/* ---- queueing ---- */

/* Whether this node's queue has the manifest row of gen at version (lock held). */
static int msh_queued(struct cat *cat, uint64_t gen, uint32_t version, bool *queued)
{
	sqlite3_stmt *st;
	int src = sqlite3_prepare_v2(cat->db, "SELECT 1 FROM uploads WHERE kind = ?1 AND gen = ?2"
				     " AND version = ?3", -1, &st, NULL);
	if (src != SQLITE_OK) {
		log_error("catalog %s: cannot read the upload queue: %s", cat->path,
			  sqlite3_errmsg(cat->db));
		return -EIO;
	}
	sqlite3_bind_int(st, 1, UP_GEN_MANIFEST);
	sqlite3_bind_int64(st, 2, (int64_t)gen);
	sqlite3_bind_int64(st, 3, version);
	src = sqlite3_step(st);
	*queued = src == SQLITE_ROW;
	sqlite3_finalize(st);
	return src == SQLITE_ROW || src == SQLITE_DONE ? 0 : -EIO;
}

static int msh_enqueue_locked(struct cat *cat, uint64_t gen, uint32_t version, bool if_absent,
			      bool *added)
{
	bool queued = false;
	int rc = if_absent ? msh_queued(cat, gen, version, &queued) : 0;
	*added = false;
	if (rc != 0 || queued)
		return rc;
	rc = cat_begin(cat);
	if (rc == 0)
		rc = cat_up_gen_committed_txn(cat, gen, version);
	rc = cat_end(cat, rc);
	*added = rc == 0;
	return rc;
}

int catshd_enqueue(struct cat *cat, uint64_t gen, uint32_t version)
{
	bool added;
	cat_lock(cat);
	int rc = msh_enqueue_locked(cat, gen, version, false, &added);
	cat_unlock(cat);
	if (rc != 0)
		log_error("catalog %s: generation %" PRIu64 " is committed but its manifest could not"
			  " be queued: %s", cat->path, gen, strerror(-rc));
	return rc;
}

int catshd_enqueue_missing(struct cat *cat, uint64_t gen)
{
	struct pgns *ns = cat_shared_ns(cat);
	struct cat_gen g;
	bool lost = false, added = false;
	uint64_t left = 0;
	int rc = pggen_get(ns, gen, &g, &lost);
	if (rc != 0 || g.state != GEN_COMMITTED || lost)
		return rc;
	rc = pggen_not_durable(ns, gen, &left);
	if (rc != 0 || left == 0)
		return rc;
	cat_lock(cat);
	rc = msh_enqueue_locked(cat, gen, g.version, true, &added);
	cat_unlock(cat);
	if (added)
		log_info("catalog %s: queued the manifest of generation %" PRIu64 " (%s), committed"
			 " already and not durable", cat->path, gen, g.name);
	return rc;
}

#define MSH_UNDURABLE_BATCH 4096

int catshd_enqueue_undurable(struct cat *cat, size_t *queued)
{
	uint64_t *ids = calloc(MSH_UNDURABLE_BATCH, sizeof(*ids));
	uint32_t *versions = calloc(MSH_UNDURABLE_BATCH, sizeof(*versions));
	size_t n = 0, added = 0;
	int rc = ids && versions ? 0 : -ENOMEM;
	if (rc == 0)
		rc = pggen_undurable(cat_shared_ns(cat), ids, versions, MSH_UNDURABLE_BATCH, &n);
	cat_lock(cat);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		bool one = false;
		rc = msh_enqueue_locked(cat, ids[i], versions[i], true, &one);
		added += one;
	}
	cat_unlock(cat);
	free(ids);
	free(versions);
	if (added > 0)
		log_info("catalog %s: queued the manifests of %zu committed generations not yet"
			 " durable", cat->path, added);
	if (queued)
		*queued = added;
	return rc;
}

/* ---- the tree manifest (D4, D5) ---- */

int manifest_shared_tree_fingerprint(struct cat *cat, char *fp, size_t size, bool *all_uploaded,
				     int64_t *clock_ns)
{
	struct pggen_outside_fp f;
	int rc = pggen_outside_fp(cat_shared_ns(cat), &f);
	if (rc == 0) {
		snprintf(fp, size, "%s", f.text);
		*all_uploaded = f.all_uploaded;
		*clock_ns = f.now_ns;
	}
	return rc;
}

int manifest_shared_tree_described(struct cat *cat, int64_t horizon_ns)
{
	int rc = pgns_tree_horizon_set(cat_shared_ns(cat), horizon_ns);
	if (rc != 0)
		log_warn("catalog %s: cannot record the tree manifest's horizon: %s (reclaims wait"
			 " for the next one)", cat->path, strerror(-rc));
	return rc;
}

int manifest_shared_tree_build(struct cat *cat, char **out, size_t *len, char *fp, size_t fp_size,
			       int64_t *now_ns)
{
	struct pggen_tree t;
	struct pggen_outside_fp f;
	struct msh_build b = { .cat = cat, .gen = 0, .t = &t };
	b.m.kind = MANIFEST_TREE;
	int rc = pggen_outside_read(cat_shared_ns(cat), &f, &t);
	if (rc == 0 && !f.all_uploaded)
		rc = -EAGAIN; /* D4: a chunk it would name is not on BACKING yet */
	if (rc == 0)
		rc = msh_body(&b, out, len);
	if (rc == 0) {
		snprintf(fp, fp_size, "%s", f.text);
		*now_ns = f.now_ns;
	}
	if (rc != 0 && rc != -EAGAIN)
		log_error("catalog %s: cannot build the manifest of the tree outside generations: %s",
			  cat->path, strerror(-rc));
	msh_build_free(&b);
	pggen_tree_clear(&t);
	return rc;
}
