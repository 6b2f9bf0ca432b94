/* Unit tests for meta/catalog_shared_data.c, file contents and local chunk
 * rows in the shared engine (S1–S6): two struct cat opened with
 * cat_open_shared on one private PostgreSQL (tests/unit/pgtest.h), each
 * with its own local SQLite file, are two nodes A and B.
 *
 * A file A writes and commits is seen on B with its size and extents; B's
 * cat_chunk_where of A's chunk is -EAGAIN until A's upload is done, then
 * "on BACKING, not cached", and a copy B fetches gets a local row; B
 * overwriting A's file keeps every count right (pgns_check); a zero-count
 * local row waits for its upload, is never reclaimed afterwards (BACKING is
 * the reclaim duty's) and is dropped without the callback once evicted,
 * while an unpublished chunk's upload is dropped and its object reclaimed
 * from the cache; the same bytes from both nodes are one shared chunk,
 * uploaded once; a read through B's cache of a chunk A has not uploaded
 * waits for its upload up to backing_timeout, then fails with EIO. S11: a
 * cache copy local writers name, evicted, is pinned for them, so a reclaim
 * elsewhere leaves BACKING's object to their commits (a chunk PostgreSQL
 * has committed, or a fresh one it has no row of); one that cannot be
 * pinned stays; a writer naming an evicted chunk stores it anew. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <sched.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backing.h"
#include "cache.h"
#include "catalog.h"
#include "catalog_internal.h"
#include "pg.h"
#include "pgns.h"
#include "pgtest.h"
#include "store.h"
#include "support.h"
#include "upload.h"

TestSuite(catshared_data, .init = pt_start, .fini = pt_stop, .timeout = 90);

#define TD_LEN 1000 /* each chunk's plain length; stored as TD_STORED, codec 2 */
#define TD_STORED 600

/* One node, with the chunks its reclaim callback was given. */
struct td_node {
	struct pt_cat pc;
	uint8_t reclaimed[16][CAT_HASH_LEN];
	int n_reclaimed;
};

static int td_reclaim(void *arg, const uint8_t hash[CAT_HASH_LEN])
{
	struct td_node *n = arg;
	if (n->n_reclaimed < 16)
		memcpy(n->reclaimed[n->n_reclaimed], hash, CAT_HASH_LEN);
	n->n_reclaimed++;
	return 0;
}

static void td_open(struct td_node *n, const char *name)
{
	memset(n, 0, sizeof(*n));
	pt_cat_open(&n->pc, name, 30000, td_reclaim, n);
}

/* The node stops (as a crash would leave its writers' pending rows) and
 * comes back on the same local catalog. */
static void td_reopen(struct td_node *n, const char *name)
{
	pt_cat_reopen(&n->pc, name, 30000, td_reclaim, n);
}

/* pgns_check finds nothing. */
static void td_check(struct td_node *n)
{
	int violations = -1;
	OK(pgns_check(cat_shared_ns(n->pc.cat), &violations));
	cr_assert_eq(violations, 0);
}

static uint64_t td_file(struct td_node *n, const char *name)
{
	struct cat_inode in;
	OK(cat_create(n->pc.cat, CAT_ROOT_INO, name, S_IFREG | 0644, 1000, 1000, 0, NULL, &in));
	return in.ino;
}

static struct cat_extent td_extent(uint64_t off, uint8_t fill, int seed)
{
	struct cat_extent e = { .off = off, .len = TD_LEN, .chunk_off = 0, .chunk_len = TD_LEN };
	ts_hash(e.hash, fill, seed);
	return e;
}

/* A writer on ino adds chunks ts_hash(fill, seed + i) for i < count from
 * offset `at`, storing those it must. */
static void td_add(struct td_node *n, uint64_t ino, uint64_t at, uint8_t fill, int seed, int count)
{
	for (int i = 0; i < count; i++) {
		struct cat_extent e = td_extent(at + (uint64_t)i * TD_LEN, fill, seed + i);
		bool must_store = false;
		OK(cat_pending_add(n->pc.cat, ino, &e, &must_store));
		if (must_store)
			OK(cat_chunk_stored(n->pc.cat, e.hash, 2, TD_STORED));
	}
}

/* ino's pending extents, written and committed at size count * TD_LEN. */
static void td_write(struct td_node *n, uint64_t ino, uint8_t fill, int seed, int count,
		     bool durable)
{
	td_add(n, ino, 0, fill, seed, count);
	OK(cat_file_commit(n->pc.cat, ino, (uint64_t)count * TD_LEN, ts_now_ns(), durable));
}

static struct pgns_chunk_row td_row(struct td_node *n, const uint8_t hash[CAT_HASH_LEN])
{
	struct pgns_chunk_row row;
	OK(pgns_chunk_get(cat_shared_ns(n->pc.cat), hash, &row));
	return row;
}

/* An eviction's removal for tests that keep the object file (they look at rows only). */
static int td_keep_object(void *arg, const uint8_t hash[CAT_HASH_LEN])
{
	(void)arg, (void)hash;
	return 0;
}

static bool td_was_reclaimed(const struct td_node *n, const uint8_t hash[CAT_HASH_LEN])
{
	for (int i = 0; i < n->n_reclaimed && i < 16; i++)
		if (memcmp(n->reclaimed[i], hash, CAT_HASH_LEN) == 0)
			return true;
	return false;
}

Test(catshared_data, a_file_committed_on_one_node_is_seen_with_its_extents_on_the_other)
{
	struct td_node a, b;
	td_open(&a, "data-a");
	td_open(&b, "data-b");
	uint64_t ino = td_file(&a, "f");
	td_write(&a, ino, 0xd1, 0, 3, true);

	struct cat_inode in;
	OK(cat_getattr(b.pc.cat, ino, &in));
	cr_assert_eq(in.size, 3 * TD_LEN);
	struct cat_extent got[4];
	cr_assert_eq(cat_extents(b.pc.cat, ino, 0, got, 4), 3);
	for (int i = 0; i < 3; i++) {
		struct cat_extent want = td_extent((uint64_t)i * TD_LEN, 0xd1, i);
		cr_assert_eq(got[i].off, want.off);
		cr_assert_eq(got[i].len, want.len);
		cr_assert_eq(got[i].chunk_len, TD_LEN);
		cr_assert_arr_eq(got[i].hash, want.hash, CAT_HASH_LEN);
		struct pgns_chunk_row row = td_row(&b, want.hash);
		cr_assert_eq(row.refcount, 1);
		/* S2: held by the node that stored it */
		cr_assert_eq(row.holder, cat_node_id(a.pc.cat));
		cr_assert_eq(row.stored_len, TD_STORED);
		cr_assert_eq(row.codec, 2);
		cr_assert_not(row.uploaded);
	}
	cr_assert_eq(cat_extents(b.pc.cat, ino, 1500, got, 4), 2); /* from the one holding 1500 */
	/* S2: A's pending stays for its writer; the local namespace stays empty */
	cr_assert_eq(cat_pending_extents(a.pc.cat, ino, 0, got, 4), 3);
	cr_assert_eq(pt_cat_local_rows(&a.pc, "extents", "1"), 0);
	cr_assert_eq(pt_cat_local_rows(&b.pc, "pending", "1"), 0);
	/* a commit naming a chunk never stored is refused (invariant 2) */
	struct cat_extent e = td_extent(3 * TD_LEN, 0xd1, 9);
	bool must_store;
	OK(cat_pending_add(a.pc.cat, ino, &e, &must_store));
	cr_assert(must_store);
	FAILS(cat_file_commit(a.pc.cat, ino, 4 * TD_LEN, ts_now_ns(), false), EIO);
	OK(cat_pending_truncate(a.pc.cat, ino, 3 * TD_LEN));
	/* so is one whose pending extents reach past its size */
	FAILS(cat_file_commit(a.pc.cat, ino, 2 * TD_LEN, ts_now_ns(), false), EINVAL);
	OK(cat_getattr(b.pc.cat, ino, &in));
	cr_assert_eq(in.size, 3 * TD_LEN);
	td_check(&a);
	pt_cat_close(&a.pc);
	pt_cat_close(&b.pc);
}

Test(catshared_data, another_nodes_chunk_is_eagain_until_uploaded_then_on_backing)
{
	struct td_node a, b;
	td_open(&a, "data-a");
	td_open(&b, "data-b");
	uint64_t ino = td_file(&a, "f");
	td_write(&a, ino, 0xd2, 0, 2, false);
	struct cat_extent e0 = td_extent(0, 0xd2, 0);

	struct cat_chunk_where w;
	FAILS(cat_chunk_where(b.pc.cat, e0.hash, &w), EAGAIN); /* S6: only A's cache has it */
	OK(cat_chunk_where(a.pc.cat, e0.hash, &w));
	cr_assert(w.cached);
	cr_assert_not(w.uploaded);
	uint8_t unknown[CAT_HASH_LEN];
	ts_hash(unknown, 0xd2, 99);
	FAILS(cat_chunk_where(b.pc.cat, unknown, &w), ENOENT);

	int stale = 0;
	cr_assert_eq(pt_cat_upload_chunks(&a.pc, e0.hash, &stale), 1); /* S4: a writer references it */
	cr_assert_eq(stale, 0);
	cr_assert(td_row(&b, e0.hash).uploaded); /* S5 */
	OK(cat_chunk_where(a.pc.cat, e0.hash, &w));
	cr_assert(w.uploaded);

	OK(cat_chunk_where(b.pc.cat, e0.hash, &w));
	cr_assert_not(w.cached);
	cr_assert(w.uploaded);
	cr_assert_eq(w.plain_len, TD_LEN);
	cr_assert_eq(w.stored_len, TD_STORED);
	cr_assert_eq(w.codec, 2);
	/* a copy B fetched: its local row is made, cached and on BACKING */
	cr_assert_eq(pt_cat_local_rows(&b.pc, "chunks", "1"), 0);
	OK(cat_chunk_fetched(b.pc.cat, e0.hash));
	OK(cat_chunk_where(b.pc.cat, e0.hash, &w));
	cr_assert(w.cached);
	cr_assert(w.uploaded);
	cr_assert_eq(w.stored_len, TD_STORED);
	cr_assert_eq(pt_cat_local_rows(&b.pc, "chunks", "refcount = 0 AND cached = 1 AND uploaded = 1"), 1);
	/* the second chunk is still A's only */
	struct cat_extent e1 = td_extent(TD_LEN, 0xd2, 1);
	FAILS(cat_chunk_fetched(b.pc.cat, e1.hash), ENOENT);
	FAILS(cat_chunk_where(b.pc.cat, e1.hash, &w), EAGAIN);
	/* B's eviction of its copy: the row goes at the next sweep, and the
	 * chunk is again "on BACKING, not cached" */
	OK(cat_chunk_evict(b.pc.cat, e0.hash, td_keep_object, NULL));
	OK(cat_pending_drop(b.pc.cat, ino)); /* a call that sweeps */
	cr_assert_eq(pt_cat_local_rows(&b.pc, "chunks", "1"), 0);
	cr_assert_eq(b.n_reclaimed, 0);
	OK(cat_chunk_where(b.pc.cat, e0.hash, &w));
	cr_assert_not(w.cached);
	td_check(&b);
	pt_cat_close(&a.pc);
	pt_cat_close(&b.pc);
}

Test(catshared_data, an_overwrite_on_the_other_node_keeps_every_count)
{
	struct td_node a, b;
	td_open(&a, "data-a");
	td_open(&b, "data-b");
	uint64_t ino = td_file(&a, "f");
	td_write(&a, ino, 0xd3, 0, 3, false);
	int stale;
	cr_assert_eq(pt_cat_upload_chunks(&a.pc, NULL, &stale), 3);
	OK(cat_pending_drop(a.pc.cat, ino)); /* A's writer is gone */

	/* B starts a writer on the file: pending is A's committed extents,
	 * its chunks described from PostgreSQL */
	OK(cat_pending_from_committed(b.pc.cat, ino));
	struct cat_extent got[4];
	cr_assert_eq(cat_pending_extents(b.pc.cat, ino, 0, got, 4), 3);
	for (int i = 0; i < 3; i++) {
		struct cat_extent want = td_extent((uint64_t)i * TD_LEN, 0xd3, i);
		cr_assert_arr_eq(got[i].hash, want.hash, CAT_HASH_LEN);
		cr_assert_eq(got[i].chunk_len, TD_LEN);
	}
	cr_assert_eq(pt_cat_local_rows(&b.pc, "chunks", "refcount = 1 AND cached = 0 AND uploaded = 1"
				   " AND stored_len = 600 AND codec = 2"), 3);
	cr_assert_eq(pt_cat_local_rows(&b.pc, "uploads", "1"), 0); /* nothing for B to upload */

	/* keeps the first chunk, replaces the rest by one new chunk */
	OK(cat_pending_truncate(b.pc.cat, ino, TD_LEN));
	td_add(&b, ino, TD_LEN, 0xd3, 10, 1);
	OK(cat_file_commit(b.pc.cat, ino, 2 * TD_LEN, ts_now_ns(), true));
	td_check(&b);
	struct cat_extent c0 = td_extent(0, 0xd3, 0), c1 = td_extent(0, 0xd3, 1),
			  c2 = td_extent(0, 0xd3, 2), c3 = td_extent(0, 0xd3, 10);
	cr_assert_eq(td_row(&a, c0.hash).refcount, 1);
	cr_assert_eq(td_row(&a, c1.hash).refcount, 0);
	cr_assert_eq(td_row(&a, c2.hash).refcount, 0);
	cr_assert_eq(td_row(&a, c3.hash).refcount, 1);
	cr_assert_eq(td_row(&a, c3.hash).holder, cat_node_id(b.pc.cat));
	struct cat_inode in;
	OK(cat_getattr(a.pc.cat, ino, &in));
	cr_assert_eq(in.size, 2 * TD_LEN);
	cr_assert_eq(cat_extents(a.pc.cat, ino, 0, got, 4), 2);
	cr_assert_arr_eq(got[1].hash, c3.hash, CAT_HASH_LEN);

	/* truncation of a file with no writer goes to PostgreSQL */
	OK(cat_pending_drop(b.pc.cat, ino));
	OK(cat_file_truncate(a.pc.cat, ino, 500));
	td_check(&a);
	cr_assert_eq(td_row(&a, c3.hash).refcount, 0);
	cr_assert_eq(cat_extents(b.pc.cat, ino, 0, got, 4), 1);
	cr_assert_eq(got[0].len, 500);
	/* S3: B's rows of A's chunks (on BACKING, not cached) went without the
	 * callback; its own chunk waits for its upload */
	cr_assert_eq(b.n_reclaimed, 0);
	cr_assert_eq(pt_cat_local_rows(&b.pc, "chunks", "1"), 1);
	cr_assert_eq(pt_cat_local_rows(&b.pc, "chunks", "refcount = 0 AND cached = 1 AND uploaded = 0"), 1);
	pt_cat_close(&a.pc);
	pt_cat_close(&b.pc);
}

Test(catshared_data, a_zero_count_row_waits_for_its_upload_and_is_never_reclaimed_from_backing)
{
	struct td_node a;
	td_open(&a, "data-a");
	uint64_t ino = td_file(&a, "f");
	td_write(&a, ino, 0xd4, 0, 2, false);
	/* an unpublished chunk: stored by a writer that then dropped it */
	uint64_t other = td_file(&a, "g");
	td_add(&a, other, 0, 0xd4, 50, 1);
	OK(cat_pending_drop(a.pc.cat, other));
	OK(cat_pending_drop(a.pc.cat, ino)); /* counts 0; both sweeps ran */
	struct cat_extent c0 = td_extent(0, 0xd4, 0), lone = td_extent(0, 0xd4, 50);

	/* S3: rows waiting for their upload survive the sweep */
	cr_assert_eq(a.n_reclaimed, 0);
	cr_assert_eq(pt_cat_local_rows(&a.pc, "chunks", "refcount = 0 AND cached = 1 AND uploaded = 0"), 3);
	struct cat_chunk_where w;
	OK(cat_chunk_where(a.pc.cat, c0.hash, &w));
	cr_assert(w.cached);

	/* S4: the published ones are uploaded, the unpublished one is dropped */
	int stale = 0;
	cr_assert_eq(pt_cat_upload_chunks(&a.pc, NULL, &stale), 2);
	cr_assert_eq(stale, 1);
	cr_assert(td_row(&a, c0.hash).uploaded);
	FAILS(pgns_chunk_get(cat_shared_ns(a.pc.cat), lone.hash, &(struct pgns_chunk_row){ 0 }),
	      ENOENT);
	cr_assert_eq(pt_cat_local_rows(&a.pc, "chunks", "uploaded = 1"), 2); /* S5: lone not marked */

	/* the next sweep takes the unpublished one from the cache only; the
	 * uploaded ones are cache copies: no callback, no removal queued */
	OK(cat_pending_drop(a.pc.cat, ino));
	cr_assert_eq(a.n_reclaimed, 1);
	cr_assert(td_was_reclaimed(&a, lone.hash));
	cr_assert_eq(pt_cat_local_rows(&a.pc, "chunks", "refcount = 0 AND cached = 1 AND uploaded = 1"), 2);
	cr_assert_eq(pt_cat_local_rows(&a.pc, "uploads", "1"), 0);
	/* evicted: the row goes, still without the callback or a removal */
	OK(cat_chunk_evict(a.pc.cat, c0.hash, td_keep_object, NULL));
	OK(cat_pending_drop(a.pc.cat, ino));
	cr_assert_eq(a.n_reclaimed, 1);
	cr_assert_eq(pt_cat_local_rows(&a.pc, "chunks", "1"), 1);
	cr_assert_eq(pt_cat_local_rows(&a.pc, "uploads", "1"), 0);
	OK(cat_chunk_where(a.pc.cat, c0.hash, &w)); /* PostgreSQL: on BACKING */
	cr_assert_not(w.cached);
	cr_assert(w.uploaded);
	bool up = false;
	OK(cat_file_uploaded(a.pc.cat, ino, &up));
	cr_assert(up);
	td_check(&a);
	pt_cat_close(&a.pc);
}

Test(catshared_data, the_same_bytes_from_two_nodes_are_one_shared_chunk_uploaded_once)
{
	struct td_node a, b;
	td_open(&a, "data-a");
	td_open(&b, "data-b");
	uint64_t fa = td_file(&a, "replica-a"), fb = td_file(&b, "replica-b");
	td_write(&a, fa, 0xd5, 0, 2, false);
	td_write(&b, fb, 0xd5, 0, 2, false);
	td_check(&a);
	struct cat_extent c0 = td_extent(0, 0xd5, 0), c1 = td_extent(0, 0xd5, 1);
	cr_assert_eq(td_row(&a, c0.hash).refcount, 2);
	cr_assert_eq(td_row(&a, c0.hash).holder, cat_node_id(a.pc.cat)); /* the first to publish */
	cr_assert_eq(td_row(&a, c1.hash).refcount, 2);
	bool up = true;
	OK(cat_file_uploaded(b.pc.cat, fb, &up));
	cr_assert_not(up);

	/* A uploads; B's writer is gone, so B's copies are moot, not uploaded again */
	int stale = 0;
	cr_assert_eq(pt_cat_upload_chunks(&a.pc, NULL, &stale), 2);
	OK(cat_pending_drop(a.pc.cat, fa));
	OK(cat_pending_drop(b.pc.cat, fb));
	cr_assert_eq(pt_cat_upload_chunks(&b.pc, NULL, &stale), 0);
	cr_assert_eq(stale, 2);
	cr_assert_eq(pt_cat_local_rows(&b.pc, "chunks", "refcount = 0 AND cached = 1 AND uploaded = 1"), 2);
	OK(cat_file_uploaded(b.pc.cat, fb, &up));
	cr_assert(up);

	/* a chunk uploaded while its writer is open, before any commit names
	 * it: the commit marks it uploaded (S5) */
	uint64_t fc = td_file(&b, "early");
	td_add(&b, fc, 0, 0xd5, 20, 1);
	struct cat_extent c20 = td_extent(0, 0xd5, 20);
	cr_assert_eq(pt_cat_upload_chunks(&b.pc, c20.hash, &stale), 1);
	OK(cat_file_commit(b.pc.cat, fc, TD_LEN, ts_now_ns(), false));
	cr_assert(td_row(&a, c20.hash).uploaded);
	struct cat_chunk_where w;
	OK(cat_chunk_where(a.pc.cat, c20.hash, &w));
	cr_assert(w.uploaded);
	td_check(&a);
	pt_cat_close(&a.pc);
	pt_cat_close(&b.pc);
}

/* ---- a read through the cache (fs/cache.c) of another node's chunk ---- */

#define TD_READ_LEN (16u << 10)
#define TD_READ_SEED 7
#define TD_TIMEOUT_MS 1500

struct td_reader {
	struct td_node a, b;
	char backing[64];
	struct store *sa, *sb;
	struct backing *ba, *bb;
	struct cache *c;
	uint8_t hash[CAT_HASH_LEN];
	unsigned upload_after_ms;
};

static void td_note(void *arg, int k, const uint8_t hash[CAT_HASH_LEN])
{
	(void)k;
	memcpy(arg, hash, CAT_HASH_LEN);
}

static double td_mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* What A's uploader does, after a while: the object to BACKING, the queue
 * row ended (PostgreSQL marks it uploaded). */
static void *td_upload_later(void *arg)
{
	struct td_reader *r = arg;
	usleep(r->upload_after_ms * 1000);
	static uint8_t obj[STORE_HEADER_LEN + TD_READ_LEN + 4096];
	size_t len = 0;
	char rel[128];
	OK(store_read_object(r->sa, r->hash, obj, sizeof(obj), &len));
	store_object_relpath(r->hash, rel, sizeof(rel));
	OK(backing_put(r->ba, rel, obj, len));
	int stale = 0;
	cr_assert_eq(pt_cat_upload_chunks(&r->a.pc, r->hash, &stale), 1);
	return NULL;
}

/* A writes a one-chunk file (its row waits for its upload); B's cache runs. */
static void td_reader_open(struct td_reader *r)
{
	memset(r, 0, sizeof(*r));
	td_open(&r->a, "data-a");
	td_open(&r->b, "data-b");
	ts_tmpdir_make(r->backing, sizeof(r->backing), "data-backing");
	OK(store_open(r->a.pc.dir, &r->sa));
	OK(store_open(r->b.pc.dir, &r->sb));
	OK(backing_open(r->backing, TD_TIMEOUT_MS, &r->ba));
	OK(backing_open(r->backing, TD_TIMEOUT_MS, &r->bb));
	uint64_t ino = td_file(&r->a, "f");
	ts_store_file(r->a.pc.cat, r->sa, ino, TD_READ_SEED, 1, TD_READ_LEN, td_note, r->hash);
	struct cache_config cfg = { .cache_size = 64u << 20, .dirty_max = 32u << 20,
				    .backing_timeout_ms = TD_TIMEOUT_MS, .chunk_max = 256u << 10 };
	snprintf(cfg.dir, sizeof(cfg.dir), "%s", r->b.pc.dir);
	struct cache_hooks hooks = { 0 };
	OK(cache_start(&cfg, r->b.pc.cat, r->sb, r->bb, &hooks, &r->c));
}

static void td_reader_close(struct td_reader *r)
{
	cache_stop(r->c);
	backing_close(r->ba);
	backing_close(r->bb);
	store_close(r->sa);
	store_close(r->sb);
	pt_cat_close(&r->a.pc);
	pt_cat_close(&r->b.pc);
	ts_tmpdir_remove(r->backing);
}

Test(catshared_data, a_read_of_a_chunk_its_node_has_not_uploaded_waits_for_the_upload)
{
	struct td_reader r;
	td_reader_open(&r);
	r.upload_after_ms = 400;
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, td_upload_later, &r), 0);
	double t0 = td_mono_s();
	struct store_chunk out = { 0 };
	OK(cache_load(r.c, r.hash, 256u << 10, &out));
	double waited = td_mono_s() - t0;
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_assert_geq(waited, 0.35, "read after %.3f s, before the upload", waited);
	cr_assert_lt(waited, TD_TIMEOUT_MS / 1000.0);
	uint8_t want[TD_READ_LEN];
	ts_fill(want, sizeof(want), TD_READ_SEED);
	cr_assert_eq(out.len, TD_READ_LEN);
	cr_assert_arr_eq(out.plain, want, TD_READ_LEN);
	store_chunk_free(&out);
	struct cat_chunk_where w; /* the copy B kept has its local row (S6) */
	OK(cat_chunk_where(r.b.pc.cat, r.hash, &w));
	cr_assert(w.cached);
	cr_assert(w.uploaded);
	td_reader_close(&r);
}

Test(catshared_data, a_read_of_a_chunk_never_uploaded_fails_after_backing_timeout)
{
	struct td_reader r;
	td_reader_open(&r);
	double t0 = td_mono_s();
	struct store_chunk out = { 0 };
	FAILS(cache_load(r.c, r.hash, 256u << 10, &out), EIO);
	double waited = td_mono_s() - t0;
	cr_assert_geq(waited, TD_TIMEOUT_MS / 1000.0 * 0.9, "gave up after %.3f s", waited);
	cr_assert_lt(waited, TD_TIMEOUT_MS / 1000.0 + 5);
	td_reader_close(&r);
}

Test(catshared_data, an_upload_found_moot_while_a_writer_stores_the_chunk_anew_marks_nothing)
{
	struct td_node a;
	td_open(&a, "data-a");
	uint64_t f = td_file(&a, "f"), g = td_file(&a, "g");
	td_write(&a, f, 0xd6, 0, 1, false);
	OK(cat_pending_drop(a.pc.cat, f)); /* zero count, waiting for its upload */
	struct cat_upload first[4];
	cr_assert_eq(cat_upload_list(a.pc.cat, 0, first, 4), 1);
	/* a new writer names the same bytes: the zero-count row's object is
	 * written anew (catalog_refs.c invariant 2) */
	struct cat_extent e = td_extent(0, 0xd6, 0);
	bool must_store = false;
	OK(cat_pending_add(a.pc.cat, g, &e, &must_store));
	cr_assert(must_store);
	struct cat_chunk_where w;
	FAILS(cat_chunk_where(a.pc.cat, e.hash, &w), ENOENT); /* as alone: moot, not -EAGAIN */
	OK(cat_upload_moot_many(a.pc.cat, &first[0], 1)); /* what the uploader does with a moot row */
	cr_assert_not(td_row(&a, e.hash).uploaded);
	OK(cat_chunk_stored(a.pc.cat, e.hash, 2, TD_STORED));
	int stale = 0;
	cr_assert_eq(pt_cat_upload_chunks(&a.pc, e.hash, &stale), 1);
	cr_assert(td_row(&a, e.hash).uploaded);
	td_check(&a);
	pt_cat_close(&a.pc);
}

/* upload.h U7 (review s30 F1): the same, with the writer's object stored
 * before the moot row ends: the row marks nothing, the new row's own
 * upload puts it. */
Test(catshared_data, an_upload_found_moot_ending_after_the_chunk_is_stored_anew_marks_nothing)
{
	struct td_node a;
	td_open(&a, "data-a");
	uint64_t f = td_file(&a, "f"), g = td_file(&a, "g");
	td_write(&a, f, 0xd8, 0, 1, false);
	OK(cat_pending_drop(a.pc.cat, f));
	struct cat_upload first[4];
	cr_assert_eq(cat_upload_list(a.pc.cat, 0, first, 4), 1);
	struct cat_extent e = td_extent(0, 0xd8, 0);
	bool must_store = false;
	OK(cat_pending_add(a.pc.cat, g, &e, &must_store));
	cr_assert(must_store);
	struct cat_chunk_where w;
	FAILS(cat_chunk_where(a.pc.cat, e.hash, &w), ENOENT); /* the uploader: moot */
	OK(cat_chunk_stored(a.pc.cat, e.hash, 2, TD_STORED)); /* dirty, its upload queued */
	OK(cat_upload_moot_many(a.pc.cat, &first[0], 1)); /* the moot row ends */
	cr_assert_not(td_row(&a, e.hash).uploaded, "marked uploaded, nothing was put");
	struct cat_upload left[4];
	cr_assert_eq(cat_upload_list(a.pc.cat, 0, left, 4), 1, "the new row's upload stays queued");
	cr_assert_neq(left[0].seq, first[0].seq);
	int stale = 0;
	cr_assert_eq(pt_cat_upload_chunks(&a.pc, e.hash, &stale), 1);
	cr_assert(td_row(&a, e.hash).uploaded);
	td_check(&a);
	pt_cat_close(&a.pc);
}

Test(catshared_data, a_node_stopped_with_its_writer_open_keeps_the_file_and_uploads_it_after)
{
	struct td_node a, b;
	td_open(&a, "data-a");
	td_open(&b, "data-b");
	uint64_t ino = td_file(&a, "f");
	td_write(&a, ino, 0xd7, 0, 2, true); /* closed by the trainer; the writer not yet gone */
	td_reopen(&a, "data-a");
	/* invariant 4 dropped the pending rows; PostgreSQL has the file */
	cr_assert_eq(pt_cat_local_rows(&a.pc, "pending", "1"), 0);
	struct cat_inode in;
	OK(cat_getattr(b.pc.cat, ino, &in));
	cr_assert_eq(in.size, 2 * TD_LEN);
	/* the chunks wait for their upload, their objects kept (S3) */
	OK(cat_pending_drop(a.pc.cat, ino)); /* a call that sweeps */
	cr_assert_eq(a.n_reclaimed, 0);
	cr_assert_eq(pt_cat_local_rows(&a.pc, "chunks", "refcount = 0 AND cached = 1 AND uploaded = 0"), 2);
	int stale = 0;
	cr_assert_eq(pt_cat_upload_chunks(&a.pc, NULL, &stale), 2);
	cr_assert_eq(stale, 0);
	bool up = false;
	OK(cat_file_uploaded(b.pc.cat, ino, &up));
	cr_assert(up);
	td_check(&b);
	pt_cat_close(&a.pc);
	pt_cat_close(&b.pc);
}

/* ---- S11: a local writer's reference to an evicted copy ---- */

/* The reclaim duty's removals from BACKING (the test has no BACKING: the
 * hashes removed are what it looks at). */
struct td_removed {
	char path[16][128];
	int n;
};

static int td_backing_remove(void *arg, const char *path)
{
	struct td_removed *r = arg;
	if (r->n < 16)
		snprintf(r->path[r->n], sizeof(r->path[r->n]), "%s", path);
	r->n++;
	return 0;
}

static bool td_was_removed(const struct td_removed *r, const uint8_t hash[CAT_HASH_LEN])
{
	char rel[128];
	store_object_relpath(hash, rel, sizeof(rel));
	for (int i = 0; i < r->n && i < 16; i++)
		if (strcmp(r->path[i], rel) == 0)
			return true;
	return false;
}

/* n's reclaim turn, every object it removes recorded in r: a turn that sees
 * what is free, the tree horizon past it (R7 a), a turn that reclaims. */
static void td_turn(struct td_node *n, struct td_removed *r)
{
	struct cat_reclaim_report rep;
	OK(cat_reclaim_turn(n->pc.cat, 30000, td_backing_remove, r, &rep));
	cr_assert(rep.held);
	pt_cat_tree_described(&n->pc);
	OK(cat_reclaim_turn(n->pc.cat, 30000, td_backing_remove, r, &rep));
	cr_assert(rep.held);
}

/* B replaces f's content by chunk (fill, 99): f's old chunks lose their
 * last committed reference. */
static void td_overwrite(struct td_node *b, uint64_t f, uint8_t fill)
{
	OK(cat_pending_from_committed(b->pc.cat, f));
	OK(cat_pending_truncate(b->pc.cat, f, 0));
	td_write(b, f, fill, 99, 1, false);
	OK(cat_pending_drop(b->pc.cat, f));
}

/* The brief's race with `writers` local writers of one chunk H that
 * PostgreSQL has committed (f0's): the first stores its bytes anew (its
 * local count was 0, invariant 2) and uploads them, the others dedup on
 * it; the cache, short of room, evicts the copy (an open file's, C2);
 * B overwrites f0 and reclaims. The writers' commits must still find H. */
static void td_evicted_under_writers(int writers)
{
	struct td_node a, b;
	struct td_removed removed = { 0 };
	td_open(&a, "data-a");
	td_open(&b, "data-b");
	uint64_t f0 = td_file(&a, "f0");
	td_write(&a, f0, 0xe1, 0, 1, false);
	int stale = 0;
	cr_assert_eq(pt_cat_upload_chunks(&a.pc, NULL, &stale), 1);
	OK(cat_pending_drop(a.pc.cat, f0));
	struct cat_extent h = td_extent(0, 0xe1, 0);
	cr_assert(td_row(&a, h.hash).uploaded);

	uint64_t w[2] = { td_file(&a, "w1"), td_file(&a, "w2") };
	for (int i = 0; i < writers; i++)
		td_add(&a, w[i], 0, 0xe1, 0, 1);
	cr_assert_eq(pt_cat_upload_chunks(&a.pc, h.hash, &stale), 1); /* W1's copy, now clean */
	cr_assert_eq(pt_cat_local_rows(&a.pc, "chunks", "cached = 1 AND uploaded = 1"), 1);
	OK(cat_chunk_evict(a.pc.cat, h.hash, td_keep_object, NULL)); /* S11: pinned first */
	cr_assert_eq(pt_cat_local_rows(&a.pc, "chunks", "cached = 0"), 1);

	td_overwrite(&b, f0, 0xe2);
	cr_assert_eq(td_row(&b, h.hash).refcount, 0);
	td_turn(&b, &removed);
	cr_expect_not(td_was_removed(&removed, h.hash), "a pinned chunk was reclaimed");
	for (int i = 0; i < writers; i++) {
		OK(cat_file_commit(a.pc.cat, w[i], TD_LEN, ts_now_ns(), false));
		OK(cat_pending_drop(a.pc.cat, w[i]));
	}
	struct pgns_chunk_row row = td_row(&a, h.hash);
	cr_assert_eq(row.refcount, (uint64_t)writers);
	cr_assert_eq(pt_cat_local_rows(&a.pc, "chunks", "refcount > 0"), 0);
	td_check(&a);
	td_turn(&b, &removed);
	cr_assert_not(td_was_removed(&removed, h.hash), "the writers' files name it");
	pt_cat_close(&a.pc);
	pt_cat_close(&b.pc);
}

Test(catshared_data, two_writers_evicted_copy_of_a_committed_chunk_survives_a_reclaim_elsewhere)
{
	td_evicted_under_writers(2);
}

Test(catshared_data, one_writers_evicted_copy_of_a_committed_chunk_survives_a_reclaim_elsewhere)
{
	td_evicted_under_writers(1);
}

/* S11 for a hash PostgreSQL has no row of yet: W1's fresh chunk, uploaded
 * under its claim (N7) and evicted; B publishes a file of the same bytes,
 * uploads them, deletes the file and reclaims. W1's commit must find it. */
Test(catshared_data, a_writers_evicted_fresh_chunk_survives_another_nodes_publish_and_reclaim)
{
	struct td_node a, b;
	struct td_removed removed = { 0 };
	td_open(&a, "data-a");
	td_open(&b, "data-b");
	uint64_t w1 = td_file(&a, "w1");
	td_add(&a, w1, 0, 0xe3, 0, 1);
	struct cat_extent h = td_extent(0, 0xe3, 0);
	int stale = 0;
	cr_assert_eq(pt_cat_upload_chunks(&a.pc, h.hash, &stale), 1);
	OK(cat_chunk_evict(a.pc.cat, h.hash, td_keep_object, NULL)); /* S11 */

	uint64_t g = td_file(&b, "g");
	td_write(&b, g, 0xe3, 0, 1, false);
	(void)pt_cat_upload_chunks(&b.pc, h.hash, &stale);
	OK(cat_pending_drop(b.pc.cat, g));
	uint64_t gone = 0;
	OK(cat_unlink(b.pc.cat, CAT_ROOT_INO, "g", &gone));
	cr_assert_eq(gone, g);
	OK(cat_inodes_release(b.pc.cat, &g, 1));
	td_turn(&b, &removed);
	cr_expect_not(td_was_removed(&removed, h.hash), "a pinned chunk was reclaimed");

	OK(cat_file_commit(a.pc.cat, w1, TD_LEN, ts_now_ns(), false));
	OK(cat_pending_drop(a.pc.cat, w1));
	struct pgns_chunk_row row = td_row(&a, h.hash);
	cr_assert_eq(row.refcount, 1);
	cr_assert(row.uploaded);
	td_check(&a);
	pt_cat_close(&a.pc);
	pt_cat_close(&b.pc);
}

/* S11: a copy the pin cannot cover stays. W1's fresh chunk is uploaded
 * (its claim taken, N7) and marked here only; B publishes the same bytes,
 * deletes them and reclaims, which removes BACKING's object and A's claim
 * with it. A's eviction finds no row and no claim: the copy is the only
 * one, kept, and W1's commit puts it on BACKING again (S8). A writer that
 * names a chunk whose copy went stores its bytes anew. */
Test(catshared_data, a_writers_copy_that_cannot_be_pinned_stays_and_a_new_writer_stores_anew)
{
	struct td_node a, b;
	struct td_removed removed = { 0 };
	td_open(&a, "data-a");
	td_open(&b, "data-b");
	uint64_t w1 = td_file(&a, "w1");
	td_add(&a, w1, 0, 0xe4, 0, 2);
	struct cat_extent h = td_extent(0, 0xe4, 0), h2 = td_extent(TD_LEN, 0xe4, 1);
	int stale = 0;
	cr_assert_eq(pt_cat_upload_chunks(&a.pc, NULL, &stale), 2);

	uint64_t g = td_file(&b, "g");
	td_write(&b, g, 0xe4, 0, 1, false);
	cr_assert_eq(pt_cat_upload_chunks(&b.pc, h.hash, &stale), 1);
	OK(cat_pending_drop(b.pc.cat, g));
	uint64_t gone = 0;
	OK(cat_unlink(b.pc.cat, CAT_ROOT_INO, "g", &gone));
	OK(cat_inodes_release(b.pc.cat, &g, 1));
	td_turn(&b, &removed);
	cr_assert(td_was_removed(&removed, h.hash));

	uint8_t both[2][CAT_HASH_LEN];
	memcpy(both[0], h.hash, CAT_HASH_LEN);
	memcpy(both[1], h2.hash, CAT_HASH_LEN);
	bool went[2] = { true, false };
	OK(cat_chunks_evict(a.pc.cat, (const uint8_t(*)[CAT_HASH_LEN])both, 2, td_keep_object, NULL,
			    went));
	cr_assert_not(went[0], "no row and no claim: the copy may be the only one");
	cr_assert(went[1], "a fresh chunk under its claim: pinned, then evicted");
	FAILS(cat_chunk_evict(a.pc.cat, h.hash, td_keep_object, NULL), EBUSY);
	struct pgns_chunk_row row = td_row(&a, h2.hash);
	cr_assert(row.uploaded);
	cr_assert_eq(row.refcount, 0);

	/* a second writer of the evicted chunk stores it anew, no pin needed */
	uint64_t w3 = td_file(&a, "w3");
	struct cat_extent e = td_extent(0, 0xe4, 1);
	bool must_store = false;
	OK(cat_pending_add(a.pc.cat, w3, &e, &must_store));
	cr_assert(must_store);
	OK(cat_chunk_stored(a.pc.cat, e.hash, 2, TD_STORED));

	OK(cat_file_commit(a.pc.cat, w1, 2 * TD_LEN, ts_now_ns(), false));
	cr_assert_not(td_row(&a, h.hash).uploaded, "S8: refused, put again");
	cr_assert_eq(pt_cat_upload_chunks(&a.pc, h.hash, &stale), 1);
	cr_assert(td_row(&a, h.hash).uploaded);
	OK(cat_file_commit(a.pc.cat, w3, TD_LEN, ts_now_ns(), false));
	OK(cat_pending_drop(a.pc.cat, w1));
	OK(cat_pending_drop(a.pc.cat, w3));
	cr_assert_eq(td_row(&a, h2.hash).refcount, 2);
	td_check(&a);
	pt_cat_close(&a.pc);
	pt_cat_close(&b.pc);
}

static uint64_t td_round_trips(struct td_node *n)
{
	struct pg_stats st;
	pg_get_stats(cat_shared_ns(n->pc.cat)->pg, &st);
	return st.round_trips;
}

/* A query on a connection of the test's own: its result, asserted to be
 * status want. */
static PGresult *td_sql(PGconn *c, const char *sql, ExecStatusType want)
{
	PGresult *r = PQexec(c, sql);
	cr_assert_eq(PQresultStatus(r), want, "%s: %s", sql, PQerrorMessage(c));
	return r;
}

struct td_evict_call {
	struct cat *cat;
	uint8_t hash[CAT_HASH_LEN];
	int rc;
};

static void *td_evict_thread(void *arg)
{
	struct td_evict_call *e = arg;
	e->rc = cat_chunk_evict(e->cat, e->hash, td_keep_object, NULL);
	return NULL;
}

/* S11 at the interleaving that matters: a second writer names the copy
 * after the eviction read its writers and while its pin runs (held here at
 * the chunk's row lock, which the test's own transaction holds); the pin
 * covers only the first writer, so the copy stays. The next eviction pins
 * both, in one round trip; a write and an eviction no writer needs take
 * none. */
Test(catshared_data, a_writer_naming_the_copy_while_its_eviction_pins_keeps_it_in_the_cache)
{
	struct td_node a, b;
	struct td_removed removed = { 0 };
	td_open(&a, "data-a");
	td_open(&b, "data-b");
	uint64_t f0 = td_file(&a, "f0"), w1 = td_file(&a, "w1"), w2 = td_file(&a, "w2");
	td_write(&a, f0, 0xe5, 0, 2, false);
	int stale = 0;
	cr_assert_eq(pt_cat_upload_chunks(&a.pc, NULL, &stale), 2);
	OK(cat_pending_drop(a.pc.cat, f0));
	struct cat_extent h = td_extent(0, 0xe5, 0), other = td_extent(TD_LEN, 0xe5, 1);
	td_add(&a, w1, 0, 0xe5, 0, 1); /* stored anew (invariant 2), uploaded below */
	cr_assert_eq(pt_cat_upload_chunks(&a.pc, h.hash, &stale), 1);

	char hex[2 * CAT_HASH_LEN + 1], sql[256];
	cat_hex(h.hash, hex);
	PGconn *blk = PQconnectdb(pt_url);
	cr_assert_eq(PQstatus(blk), CONNECTION_OK, "%s", PQerrorMessage(blk));
	PQclear(td_sql(blk, "BEGIN", PGRES_COMMAND_OK));
	snprintf(sql, sizeof(sql), "SELECT 1 FROM ns_chunks WHERE hash = decode('%s', 'hex') FOR UPDATE",
		 hex);
	PQclear(td_sql(blk, sql, PGRES_TUPLES_OK));
	struct td_evict_call ev = { .cat = a.pc.cat, .rc = 1 };
	memcpy(ev.hash, h.hash, CAT_HASH_LEN);
	uint64_t before = td_round_trips(&a); /* not while the pin holds the connection */
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, td_evict_thread, &ev), 0);
	/* the eviction's pin waits for the row: W2 names the copy meanwhile
	 * (watched from outside blk's transaction, whose first look at
	 * pg_stat_activity would be kept for the rest of it) */
	PGconn *mon = PQconnectdb(pt_url);
	cr_assert_eq(PQstatus(mon), CONNECTION_OK, "%s", PQerrorMessage(mon));
	for (int waiting = 0, polls = 0; !waiting; polls++) {
		cr_assert_lt(polls, 100000, "the eviction never waited for the row");
		PGresult *r = td_sql(mon, "SELECT count(*) FROM pg_stat_activity WHERE"
				     " wait_event_type = 'Lock' AND query LIKE '%ns_pins%'",
				     PGRES_TUPLES_OK);
		waiting = atoi(PQgetvalue(r, 0, 0));
		PQclear(r);
		if (!waiting)
			sched_yield();
	}
	PQfinish(mon);
	struct cat_extent e = td_extent(0, 0xe5, 0);
	bool must_store = true;
	OK(cat_pending_add(a.pc.cat, w2, &e, &must_store));
	cr_assert_not(must_store, "a dedup hit on the cached copy");
	PQclear(td_sql(blk, "COMMIT", PGRES_COMMAND_OK));
	PQfinish(blk);
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_assert_eq(ev.rc, -EBUSY, "W2 is not pinned: the copy stays (got %d)", ev.rc);
	uint64_t cost = td_round_trips(&a) - before;
	/* the pin, and its prepare on this connection's first use (pg.h P1) */
	cr_assert_eq(cost, 2, "the pin; the write took none (%" PRIu64 ")", cost);
	cr_assert_eq(pt_cat_local_rows(&a.pc, "chunks", "cached = 1 AND refcount = 2"), 1);

	before = td_round_trips(&a);
	OK(cat_chunk_evict(a.pc.cat, h.hash, td_keep_object, NULL));
	cr_assert_eq(td_round_trips(&a) - before, 1, "one pin for both writers");
	before = td_round_trips(&a);
	OK(cat_chunk_evict(a.pc.cat, other.hash, td_keep_object, NULL));
	cr_assert_eq(td_round_trips(&a) - before, 0, "no writer names it: no pin");

	td_overwrite(&b, f0, 0xe6);
	td_turn(&b, &removed);
	cr_assert_not(td_was_removed(&removed, h.hash), "pinned for W1 and W2");
	cr_assert(td_was_removed(&removed, other.hash), "nothing names it any more");
	OK(cat_file_commit(a.pc.cat, w1, TD_LEN, ts_now_ns(), false));
	OK(cat_pending_drop(a.pc.cat, w1));
	OK(cat_file_commit(a.pc.cat, w2, TD_LEN, ts_now_ns(), false));
	OK(cat_pending_drop(a.pc.cat, w2));
	cr_assert_eq(td_row(&a, h.hash).refcount, 2);
	td_check(&a);
	pt_cat_close(&a.pc);
	pt_cat_close(&b.pc);
}

/* fs/ns.h invariant 13: what a close of a small file outside generations
 * waits for (cat_pending_uploaded): every chunk of its writer's pending
 * extents whose object this node's cache holds is uploaded; a chunk named
 * from another node's content (no copy here) is that node's to upload. */
Test(catshared_data, a_writers_pending_chunks_are_uploaded_only_once_each_cached_one_is)
{
	struct td_node a, b;
	td_open(&a, "data-a");
	td_open(&b, "data-b");
	uint64_t ino = td_file(&a, "latest");
	bool up = true;
	OK(cat_pending_uploaded(a.pc.cat, ino, &up)); /* nothing written: nothing to wait for */
	cr_assert(up);
	td_add(&a, ino, 0, 0xd6, 0, 2);
	OK(cat_pending_uploaded(a.pc.cat, ino, &up));
	cr_assert_not(up);
	struct cat_extent e0 = td_extent(0, 0xd6, 0), e1 = td_extent(TD_LEN, 0xd6, 1);
	int stale = 0;
	cr_assert_eq(pt_cat_upload_chunks(&a.pc, e0.hash, &stale), 1);
	OK(cat_pending_uploaded(a.pc.cat, ino, &up));
	cr_assert_not(up); /* the second chunk is still in A's cache alone */
	cr_assert_eq(pt_cat_upload_chunks(&a.pc, e1.hash, &stale), 1);
	OK(cat_pending_uploaded(a.pc.cat, ino, &up));
	cr_assert(up);
	cr_assert_eq(stale, 0);

	/* another file, committed by A and not uploaded; B writes on top of it */
	uint64_t g = td_file(&a, "tracker");
	td_write(&a, g, 0xd7, 0, 1, false);
	OK(cat_pending_from_committed(b.pc.cat, g));
	OK(cat_pending_uploaded(b.pc.cat, g, &up));
	cr_assert(up); /* A's chunk: no copy in B's cache, not B's to upload */
	td_add(&b, g, TD_LEN, 0xd8, 0, 1);
	OK(cat_pending_uploaded(b.pc.cat, g, &up));
	cr_assert_not(up); /* B's own new chunk */
	struct cat_extent eb = td_extent(TD_LEN, 0xd8, 0);
	cr_assert_eq(pt_cat_upload_chunks(&b.pc, eb.hash, &stale), 1);
	OK(cat_pending_uploaded(b.pc.cat, g, &up));
	cr_assert(up);
	OK(cat_pending_drop(b.pc.cat, g));
	OK(cat_pending_drop(a.pc.cat, ino));
	pt_cat_close(&a.pc);
	pt_cat_close(&b.pc);
}
