/* Unit tests for meta/catalog_shared_data.c S14 and S15, two nodes A and B
 * (two struct cat opened with cat_open_shared on one private PostgreSQL,
 * tests/unit/pgtest.h).
 *
 * S14, cat_chunk_lost (fs/writer.c writer_sync_gone asks it when a chunk's
 * object is gone from the cache): A's committed chunk, not uploaded, is
 * lost to A (its holder) and not to B (A's cache holds it); uploaded, to
 * neither; a chunk only a writer of A names (no PostgreSQL row) is lost to
 * A; one nothing names any more (A's writer released, B's overwrite
 * dropped the last committed reference) is not; a hash nobody has is not;
 * one whose holder is no longer live (A before its restart) is lost to
 * both.
 *
 * S15 (catalog.c invariant 12): an eviction after the shared engine marked
 * a chunk uploaded locally removes the object only after a WAL sync. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "catalog.h"
#include "catalog_internal.h"
#include "pgns.h"
#include "pgtest.h"
#include "support.h"
#include "upload.h"

TestSuite(catshared_lost, .init = pt_start, .fini = pt_stop, .timeout = 90);

#define TL_LEN 1000 /* each chunk's plain length; stored as TL_STORED, codec 2 */
#define TL_STORED 600

static uint64_t tl_file(struct pt_cat *n, const char *name)
{
	struct cat_inode in;
	OK(cat_create(n->cat, CAT_ROOT_INO, name, S_IFREG | 0644, 1000, 1000, 0, NULL, &in));
	return in.ino;
}

static struct cat_extent tl_extent(uint64_t off, uint8_t fill, int seed)
{
	struct cat_extent e = { .off = off, .len = TL_LEN, .chunk_off = 0, .chunk_len = TL_LEN };
	ts_hash(e.hash, fill, seed);
	return e;
}

/* A writer on ino names chunks ts_hash(fill, seed + i), i < count, from 0,
 * storing those it must; commit: then committed at size count * TL_LEN. */
static void tl_write(struct pt_cat *n, uint64_t ino, uint8_t fill, int seed, int count,
		     bool commit)
{
	for (int i = 0; i < count; i++) {
		struct cat_extent e = tl_extent((uint64_t)i * TL_LEN, fill, seed + i);
		bool must_store = false;
		OK(cat_pending_add(n->cat, ino, &e, &must_store));
		if (must_store)
			OK(cat_chunk_stored(n->cat, e.hash, 2, TL_STORED));
	}
	if (commit)
		OK(cat_file_commit(n->cat, ino, (uint64_t)count * TL_LEN, ts_now_ns(), false));
}

/* Nodes A and B; A's file f, count chunks of fill written and committed. */
static uint64_t tl_two_nodes(struct pt_cat *a, struct pt_cat *b, uint8_t fill, int count)
{
	*a = (struct pt_cat){ 0 };
	*b = (struct pt_cat){ 0 };
	pt_cat_open(a, "lost-a", 30000, NULL, NULL);
	pt_cat_open(b, "lost-b", 30000, NULL, NULL);
	uint64_t f = tl_file(a, "f");
	tl_write(a, f, fill, 0, count, true);
	return f;
}

Test(catshared_lost, a_chunk_is_lost_only_where_something_names_it_and_nothing_has_its_bytes)
{
	struct pt_cat a, b;
	uint64_t f = tl_two_nodes(&a, &b, 0xe1, 2);
	struct cat_extent e0 = tl_extent(0, 0xe1, 0), e1 = tl_extent(TL_LEN, 0xe1, 1);

	/* committed, held by A, not uploaded: A's cache is its only place */
	cr_assert_eq(cat_chunk_lost(a.cat, e0.hash), 1);
	cr_assert_eq(cat_chunk_lost(b.cat, e0.hash), 0, "A's cache holds it: A's to upload");
	uint8_t unknown[CAT_HASH_LEN];
	ts_hash(unknown, 0xe1, 99);
	cr_assert_eq(cat_chunk_lost(a.cat, unknown), 0);
	cr_assert_eq(cat_chunk_lost(b.cat, unknown), 0);

	/* uploaded: on BACKING, for both */
	int stale = 0;
	cr_assert_eq(pt_cat_upload_chunks(&a, e0.hash, &stale), 1);
	cr_assert_eq(cat_chunk_lost(a.cat, e0.hash), 0);
	cr_assert_eq(cat_chunk_lost(b.cat, e0.hash), 0);

	/* named by a writer of A only (never published): no PostgreSQL row */
	uint64_t g = tl_file(&a, "g");
	tl_write(&a, g, 0xe2, 0, 1, false);
	struct cat_extent x = tl_extent(0, 0xe2, 0);
	cr_assert_eq(cat_chunk_lost(a.cat, x.hash), 1);
	cr_assert_eq(cat_chunk_lost(b.cat, x.hash), 0);

	/* e1: A's writer released, the file's committed extents still name it */
	OK(cat_pending_drop(a.cat, f));
	cr_assert_eq(cat_chunk_lost(a.cat, e1.hash), 1);
	/* B overwrites the file: nothing names e1 any more (reclaimed, as far
	 * as the file's bytes go) */
	tl_write(&b, f, 0xe3, 0, 1, true);
	OK(cat_pending_drop(b.cat, f));
	struct pgns_chunk_row row;
	OK(pgns_chunk_get(cat_shared_ns(a.cat), e1.hash, &row));
	cr_assert_eq(row.refcount, 0);
	cr_assert_eq(cat_chunk_lost(a.cat, e1.hash), 0);
	OK(cat_pending_drop(a.cat, g));
	pt_cat_close(&a);
	pt_cat_close(&b);
}

/* S14: a holder no longer live never uploads its chunk (lease.h L1), this
 * node's own row before a restart too: the restarted node (a new node id)
 * whose object is gone has lost the bytes, and so has every other node. */
Test(catshared_lost, a_chunk_held_by_a_node_no_longer_live_is_lost)
{
	struct pt_cat a, b;
	uint64_t f = tl_two_nodes(&a, &b, 0xe5, 1);
	struct cat_extent e = tl_extent(0, 0xe5, 0);
	uint64_t old_id = cat_node_id(a.cat);
	cr_assert_eq(cat_chunk_lost(b.cat, e.hash), 0, "A is live: its cache holds it");
	pt_cat_reopen(&a, "lost-a", 30000, NULL, NULL);
	cr_assert_neq(cat_node_id(a.cat), old_id);
	struct pgns_chunk_row row;
	OK(pgns_chunk_get(cat_shared_ns(a.cat), e.hash, &row));
	cr_assert(!row.uploaded);
	cr_assert_eq(cat_chunk_lost(a.cat, e.hash), 1, "held by node %" PRIu64 " (this node is %"
		     PRIu64 "), which is not live", row.holder, cat_node_id(a.cat));
	if (row.holder == old_id)
		cr_assert_eq(cat_chunk_lost(b.cat, e.hash), 1);
	OK(cat_pending_drop(a.cat, f));
	pt_cat_close(&a);
	pt_cat_close(&b);
}

/* S15: the remove callback runs under the catalog lock, and sees the count
 * of WAL syncs at the removal. */
static struct pt_cat *tl_evicting;
static uint64_t tl_syncs_at_remove;
static int tl_remove_counting_syncs(void *arg, const uint8_t hash[CAT_HASH_LEN])
{
	(void)arg, (void)hash;
	tl_syncs_at_remove = tl_evicting->cat->wal_syncs;
	return 0;
}

Test(catshared_lost, an_eviction_removes_the_object_only_after_the_local_uploaded_mark_is_synced)
{
	struct pt_cat a = { 0 };
	pt_cat_open(&a, "lost-evict", 30000, NULL, NULL);
	uint64_t f = tl_file(&a, "f");
	tl_write(&a, f, 0xe4, 0, 1, true);
	OK(cat_pending_drop(a.cat, f)); /* no writer names it: a plain eviction */
	struct cat_extent e = tl_extent(0, 0xe4, 0);
	int stale = 0;
	cr_assert_eq(pt_cat_upload_chunks(&a, e.hash, &stale), 1);
	cr_assert_eq(pt_cat_local_rows(&a, "chunks", "cached = 1 AND uploaded = 1"), 1);
	tl_evicting = &a;
	uint64_t before = a.cat->wal_syncs;
	tl_syncs_at_remove = before;
	OK(cat_chunk_evict(a.cat, e.hash, tl_remove_counting_syncs, NULL));
	cr_assert_gt(tl_syncs_at_remove, before,
		     "the object was removed before the local catalog's WAL was synced after its"
		     " uploaded mark");
	cr_assert_eq(pt_cat_local_rows(&a, "chunks", "cached = 0 AND uploaded = 1"), 1);
	pt_cat_close(&a);
}
