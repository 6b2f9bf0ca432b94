/* Unit tests for the cluster's chunk reclaim (meta/catalog_shared_reclaim.c
 * R1-R4, pgns.h N6, catalog_shared_data.c S7): two struct cat opened with
 * cat_open_shared on one private PostgreSQL (tests/unit/pgtest.h) are nodes
 * A and B over one BACKING directory (fs/lib/backing.h), where each chunk
 * the test "uploads" is an object at its store path.
 *
 * A generation deleted on A has its unique chunks removed from BACKING by
 * the duty's holder, while a chunk a kept generation shares stays; only one
 * node holds the duty; a writer on B that continued a file keeps the file's
 * old chunks through a reclaim (its pins), and without its pins its commit
 * fails with EIO instead of naming a removed object. An upload on A of
 * bytes whose older row B's turn reclaims, in every order of upload, reclaim
 * and commit, is never counted as on BACKING once the reclaim removed it
 * (pgns.h N7, catalog_shared_data.c S8): A puts it again. The turn removes
 * a cache object under the catalog lock, so a local writer of the same bytes
 * keeps its new copy (R6); a fetch of another node's upload leaves a local
 * writer's dirty copy dirty (catalog_shared_data.c S10). */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backing.h"
#include "catalog.h"
#include "catalog_internal.h"
#include "chunkput.h"
#include "generation.h"
#include "pgns.h"
#include "pgtest.h"
#include "store.h"
#include "support.h"
#include "upload.h"
#include "writer.h"

TestSuite(catshared_reclaim, .init = pt_start, .fini = pt_stop, .timeout = 90);

#define TR_LEN 1000
#define TR_STORED 600
#define TR_TERM_MS 30000

struct tr_node {
	struct pt_cat pc;
	int n_cache_removed; /* the cache callback's calls */
};

static int tr_cache_remove(void *arg, const uint8_t hash[CAT_HASH_LEN])
{
	(void)hash;
	((struct tr_node *)arg)->n_cache_removed++;
	return 0;
}

static void tr_open_lease(struct tr_node *n, const char *name, unsigned lease_ms)
{
	memset(n, 0, sizeof(*n));
	pt_cat_open(&n->pc, name, lease_ms, tr_cache_remove, n);
}

static void tr_open(struct tr_node *n, const char *name)
{
	tr_open_lease(n, name, 30000);
}

/* BACKING: a directory the test puts objects in and the duty removes from. */
static void tr_hash(uint8_t out[CAT_HASH_LEN], int seed)
{
	ts_hash(out, 0xe7, seed);
}

/* A writer on ino: chunks seeds[0..n) from offset 0, committed; each chunk
 * the node must store is stored, put on BACKING and its upload done. */
static void tr_write(struct tr_node *n, struct pt_backing *bk, uint64_t ino, const int *seeds,
		     int count)
{
	for (int i = 0; i < count; i++) {
		struct cat_extent e = { .off = (uint64_t)i * TR_LEN, .len = TR_LEN, .chunk_len = TR_LEN };
		tr_hash(e.hash, seeds[i]);
		bool must_store = false;
		OK(cat_pending_add(n->pc.cat, ino, &e, &must_store));
		if (must_store)
			OK(cat_chunk_stored(n->pc.cat, e.hash, 2, TR_STORED));
	}
	OK(cat_file_commit(n->pc.cat, ino, (uint64_t)count * TR_LEN, ts_now_ns(), false));
	struct cat_upload rows[32];
	int got = cat_upload_list(n->pc.cat, 0, rows, 32);
	cr_assert_geq(got, 0);
	for (int i = 0; i < got; i++) {
		if (rows[i].kind != UP_CHUNK)
			continue;
		bool ready = false, stale = false;
		OK(cat_upload_ready(n->pc.cat, &rows[i], &ready, &stale));
		if (ready) {
			char rel[128];
			store_object_relpath(rows[i].hash, rel, sizeof(rel));
			OK(backing_put(bk->b, rel, "x", 1));
		}
		OK(cat_upload_done(n->pc.cat, &rows[i]));
	}
}

static uint64_t tr_file(struct tr_node *n, uint64_t parent, const char *name)
{
	struct cat_inode in;
	OK(cat_create_in_gen(n->pc.cat, parent, name, S_IFREG | 0644, 0, 0, 0, NULL, NULL, &in,
			     NULL));
	return in.ino;
}

/* n's reclaim as the duty makes it (R7 a): a turn that sees what is free,
 * the tree horizon past it, a turn that reclaims; the reports summed. */
static struct cat_reclaim_report tr_turn(struct tr_node *n, struct pt_backing *bk)
{
	struct cat_reclaim_report rep, second;
	OK(cat_reclaim_turn(n->pc.cat, TR_TERM_MS, pt_backing_remove, bk->b, &rep));
	pt_cat_tree_described(&n->pc);
	OK(cat_reclaim_turn(n->pc.cat, TR_TERM_MS, pt_backing_remove, bk->b, &second));
	rep.held = rep.held && second.held;
	rep.chunks += second.chunks;
	rep.removed += second.removed;
	rep.failed += second.failed;
	return rep;
}

static void tr_check(struct tr_node *n)
{
	int violations = -1;
	OK(pgns_check(cat_shared_ns(n->pc.cat), &violations));
	cr_assert_eq(violations, 0);
}

static bool tr_row_exists(struct tr_node *n, const uint8_t hash[CAT_HASH_LEN])
{
	struct pgns_chunk_row row;
	int rc = pgns_chunk_get(cat_shared_ns(n->pc.cat), hash, &row);
	cr_assert(rc == 0 || rc == -ENOENT);
	return rc == 0;
}

Test(catshared_reclaim, a_deleted_generations_unique_chunks_leave_backing_shared_ones_stay)
{
	struct tr_node a, b;
	struct pt_backing bk;
	tr_open(&a, "reclaim-a");
	tr_open(&b, "reclaim-b");
	pt_backing_open(&bk, "reclaim-backing");
	struct cat_inode in;
	OK(cat_create(a.pc.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, 0, 0, 0, NULL, &in));
	uint64_t run = in.ino, r1, r2;
	uint64_t g1 = pt_cat_mkgen(&a.pc, run, "step-1", 1, &r1);
	uint64_t f1 = tr_file(&a, r1, "shard");
	tr_write(&a, &bk, f1, (const int[]){ 1, 2, 3 }, 3); /* 3 is shared with step-2 */
	OK(cat_gen_commit(a.pc.cat, g1, "test"));
	uint64_t g2 = pt_cat_mkgen(&b.pc, run, "step-2", 2, &r2);
	uint64_t f2 = tr_file(&b, r2, "shard");
	tr_write(&b, &bk, f2, (const int[]){ 3, 4 }, 2);
	OK(cat_gen_commit(b.pc.cat, g2, "test"));
	OK(cat_pending_drop(a.pc.cat, f1)); /* the writers closed */
	OK(cat_pending_drop(b.pc.cat, f2));
	uint8_t h[5][CAT_HASH_LEN];
	for (int i = 1; i <= 4; i++) {
		tr_hash(h[i], i);
		cr_assert(pt_on_backing(&bk, h[i]), "chunk %d uploaded", i);
	}

	/* nothing unreferenced yet: a turn removes nothing */
	struct cat_reclaim_report rep = tr_turn(&a, &bk);
	cr_assert(rep.held);
	cr_assert_eq(rep.chunks, 0);

	struct cat_id_vec ids = { 0 };
	OK(cat_gen_delete(a.pc.cat, g1, "trainer", cat_id_vec_add_ino, &ids));
	for (size_t i = 0; i < ids.n; i++)
		OK(cat_inode_release(a.pc.cat, ids.v[i]));
	cat_id_vec_free(&ids);

	/* only one node holds the duty: B's turn does nothing while A's lasts */
	rep = tr_turn(&b, &bk);
	cr_assert_not(rep.held);
	cr_assert(pt_on_backing(&bk, h[1]));
	cr_assert(tr_row_exists(&b, h[1]));

	int cache_before = a.n_cache_removed;
	rep = tr_turn(&a, &bk);
	cr_assert(rep.held);
	cr_assert_eq(rep.chunks, 2);
	cr_assert_eq(rep.removed, 2);
	cr_assert_not(pt_on_backing(&bk, h[1]));
	cr_assert_not(pt_on_backing(&bk, h[2]));
	cr_assert_not(tr_row_exists(&a, h[1]));
	cr_assert_not(tr_row_exists(&a, h[2]));
	cr_assert(pt_on_backing(&bk, h[3]), "a chunk step-2 still names stays");
	cr_assert(pt_on_backing(&bk, h[4]));
	cr_assert_eq(a.n_cache_removed - cache_before, 2, "A's cache copies went too (R4)");
	struct cat_extent got[4];
	cr_assert_eq(cat_extents(a.pc.cat, f2, 0, got, 4), 2);
	tr_check(&a);
	pt_backing_close(&bk);
	pt_cat_close(&a.pc);
	pt_cat_close(&b.pc);
}

/* A writes f with chunks 11, 12 (uploaded); B's writer continues f. */
static uint64_t tr_continued(struct tr_node *a, struct tr_node *b, struct pt_backing *bk)
{
	uint64_t f = tr_file(a, CAT_ROOT_INO, "f");
	tr_write(a, bk, f, (const int[]){ 11, 12 }, 2);
	OK(cat_pending_drop(a->pc.cat, f));
	OK(cat_pending_from_committed(b->pc.cat, f));
	/* A overwrites f meanwhile: the old chunks have no reference left */
	OK(cat_pending_from_committed(a->pc.cat, f));
	OK(cat_pending_truncate(a->pc.cat, f, 0));
	tr_write(a, bk, f, (const int[]){ 13 }, 1);
	OK(cat_pending_drop(a->pc.cat, f));
	return f;
}

Test(catshared_reclaim, a_writer_that_continued_a_file_keeps_its_chunks_through_a_reclaim)
{
	struct tr_node a, b;
	struct pt_backing bk;
	tr_open(&a, "reclaim-a");
	tr_open(&b, "reclaim-b");
	pt_backing_open(&bk, "reclaim-backing");
	uint64_t f = tr_continued(&a, &b, &bk);
	uint8_t h11[CAT_HASH_LEN], h12[CAT_HASH_LEN];
	tr_hash(h11, 11);
	tr_hash(h12, 12);

	struct cat_reclaim_report rep = tr_turn(&a, &bk);
	cr_assert(rep.held);
	cr_assert_eq(rep.chunks, 0, "B's pins keep 11 and 12 (N6)");
	cr_assert(pt_on_backing(&bk, h11));
	cr_assert(pt_on_backing(&bk, h12));

	/* B's commit names them again; its release drops the pins */
	OK(cat_file_commit(b.pc.cat, f, 2 * TR_LEN, ts_now_ns(), false));
	OK(cat_pending_drop(b.pc.cat, f));
	struct cat_extent got[4];
	cr_assert_eq(cat_extents(a.pc.cat, f, 0, got, 4), 2);
	cr_assert_arr_eq(got[0].hash, h11, CAT_HASH_LEN);
	tr_check(&a);
	rep = tr_turn(&a, &bk);
	cr_assert_eq(rep.chunks, 1, "only chunk 13, which B's commit replaced");
	cr_assert(pt_on_backing(&bk, h11));
	pt_backing_close(&bk);
	pt_cat_close(&a.pc);
	pt_cat_close(&b.pc);
}

Test(catshared_reclaim, without_its_pins_a_continued_writers_commit_fails_with_eio)
{
	struct tr_node a, b;
	struct pt_backing bk;
	tr_open(&a, "reclaim-a");
	tr_open(&b, "reclaim-b");
	pt_backing_open(&bk, "reclaim-backing");
	uint64_t f = tr_continued(&a, &b, &bk);
	OK(pgns_unpin(cat_shared_ns(b.pc.cat), f)); /* as if B never pinned */
	struct cat_reclaim_report rep = tr_turn(&a, &bk);
	cr_assert_eq(rep.removed, 2);
	FAILS(cat_file_commit(b.pc.cat, f, 2 * TR_LEN, ts_now_ns(), false), EIO); /* S7 */
	OK(cat_pending_drop(b.pc.cat, f));
	struct cat_extent got[4];
	cr_assert_eq(cat_extents(a.pc.cat, f, 0, got, 4), 1, "f is A's overwrite");
	tr_check(&a);
	pt_backing_close(&bk);
	pt_cat_close(&a.pc);
	pt_cat_close(&b.pc);
}

Test(catshared_reclaim, the_pins_of_a_node_no_longer_live_go_at_the_next_turn)
{
	struct tr_node a, b;
	struct pt_backing bk;
	tr_open(&a, "reclaim-a");
	tr_open(&b, "reclaim-b");
	pt_backing_open(&bk, "reclaim-backing");
	(void)tr_continued(&a, &b, &bk);
	cat_close(b.pc.cat); /* a clean unmount: its node row is gone, its pins are left */
	b.pc.cat = NULL;
	struct cat_reclaim_report rep = tr_turn(&a, &bk);
	cr_assert_eq(rep.removed, 2);
	tr_check(&a);
	pt_backing_close(&bk);
	pt_cat_close(&a.pc);
	ts_tmpdir_remove(b.pc.dir);
}

Test(catshared_reclaim, a_node_past_its_lease_removes_nothing_a_live_one_does)
{
	struct tr_node a, b;
	struct pt_backing bk;
	tr_open_lease(&a, "reclaim-a", 1000);
	tr_open(&b, "reclaim-b");
	pt_backing_open(&bk, "reclaim-backing");
	uint64_t f = tr_file(&b, CAT_ROOT_INO, "f");
	tr_write(&b, &bk, f, (const int[]){ 21 }, 1);
	OK(cat_pending_drop(b.pc.cat, f));
	uint64_t ino;
	OK(cat_unlink(b.pc.cat, CAT_ROOT_INO, "f", &ino));
	OK(cat_inode_release(b.pc.cat, ino));
	uint8_t h[CAT_HASH_LEN];
	tr_hash(h, 21);
	usleep(1500 * 1000); /* A's lease runs out unrenewed */
	struct cat_reclaim_report rep;
	int rc = cat_reclaim_turn(a.pc.cat, TR_TERM_MS, pt_backing_remove, bk.b, &rep);
	cr_assert(rc == 0 || rc == -ESTALE, "rc %d", rc);
	cr_assert_not(rep.held);
	cr_assert_eq(rep.removed, 0);
	cr_assert(pt_on_backing(&bk, h), "a node past its lease removed an object (R1)");
	rep = tr_turn(&b, &bk);
	cr_assert(rep.held);
	cr_assert_eq(rep.removed, 1);
	cr_assert_not(pt_on_backing(&bk, h));
	pt_backing_close(&bk);
	pt_cat_close(&a.pc);
	pt_cat_close(&b.pc);
}

/* ---- R5 / S8: an upload on one node, a reclaim of the same bytes on another ---- */

/* The queued UP_CHUNK row of hash on n (cr_assert if none). */
static struct cat_upload tr_queued(struct tr_node *n, const uint8_t hash[CAT_HASH_LEN])
{
	struct cat_upload rows[32];
	int got = cat_upload_list(n->pc.cat, 0, rows, 32);
	for (int i = 0; i < got; i++)
		if (rows[i].kind == UP_CHUNK && memcmp(rows[i].hash, hash, CAT_HASH_LEN) == 0)
			return rows[i];
	cr_assert_fail("no upload queued for the chunk");
	return rows[0];
}

/* B committed chunk seed 50 and put it on BACKING, then deleted its file:
 * PostgreSQL has the chunk live, uploaded, with no reference. */
static void tr_stale_setup(struct tr_node *a, struct tr_node *b, struct pt_backing *bk,
			   uint8_t h[CAT_HASH_LEN], uint64_t *fa)
{
	tr_open(a, "stale-a");
	tr_open(b, "stale-b");
	pt_backing_open(bk, "reclaim-backing");
	uint64_t fb = tr_file(b, CAT_ROOT_INO, "old");
	tr_write(b, bk, fb, (const int[]){ 50 }, 1);
	uint64_t ino;
	OK(cat_unlink(b->pc.cat, CAT_ROOT_INO, "old", &ino));
	OK(cat_inode_release(b->pc.cat, ino));
	tr_hash(h, 50);
	cr_assert(pt_on_backing(bk, h));
	*fa = tr_file(a, CAT_ROOT_INO, "new");
	struct cat_extent e = { .off = 0, .len = TR_LEN, .chunk_len = TR_LEN };
	memcpy(e.hash, h, CAT_HASH_LEN);
	bool must_store = false;
	OK(cat_pending_add(a->pc.cat, *fa, &e, &must_store));
	cr_assert(must_store);
	OK(cat_chunk_stored(a->pc.cat, h, 2, TR_STORED));
}

/* After A's commit: PostgreSQL never says the chunk is on BACKING while it
 * is not; A's uploader puts it there again and then it does. */
static void tr_stale_check(struct tr_node *a, struct tr_node *b, struct pt_backing *bk,
			   const uint8_t h[CAT_HASH_LEN])
{
	struct pgns_chunk_row row;
	OK(pgns_chunk_get(cat_shared_ns(a->pc.cat), h, &row));
	cr_assert_eq(row.refcount, 1);
	cr_assert(!row.uploaded || pt_on_backing(bk, h),
		  "PostgreSQL says the chunk is uploaded but BACKING lacks it");
	cr_assert(!row.uploaded, "the removed upload is not counted");
	struct cat_upload u = tr_queued(a, h);
	bool ready = false, stale = false;
	OK(cat_upload_ready(a->pc.cat, &u, &ready, &stale));
	cr_assert(ready && !stale);
	char rel[128];
	store_object_relpath(h, rel, sizeof(rel));
	OK(backing_put(bk->b, rel, "x", 1));
	OK(cat_upload_done(a->pc.cat, &u));
	OK(pgns_chunk_get(cat_shared_ns(a->pc.cat), h, &row));
	cr_assert(row.uploaded && pt_on_backing(bk, h));
	struct cat_chunk_where w;
	OK(cat_chunk_where(b->pc.cat, h, &w));
	tr_check(a);
}

Test(catshared_reclaim, an_upload_done_before_a_reclaim_elsewhere_is_not_published_as_on_backing)
{
	struct tr_node a, b;
	struct pt_backing bk;
	uint8_t h[CAT_HASH_LEN];
	uint64_t fa;
	tr_stale_setup(&a, &b, &bk, h, &fa);
	/* A's uploader puts the object and is done, before A's commit */
	struct cat_upload u = tr_queued(&a, h);
	bool ready = false, stale = false;
	OK(cat_upload_ready(a.pc.cat, &u, &ready, &stale));
	cr_assert(ready);
	char rel[128];
	store_object_relpath(h, rel, sizeof(rel));
	OK(backing_put(bk.b, rel, "x", 1));
	OK(cat_upload_done(a.pc.cat, &u));
	/* B's turn removes the old row's object: the one A just put */
	struct cat_reclaim_report rep = tr_turn(&b, &bk);
	cr_assert_eq(rep.removed, 1);
	cr_assert(!pt_on_backing(&bk, h));
	OK(cat_file_commit(a.pc.cat, fa, TR_LEN, ts_now_ns(), false));
	tr_stale_check(&a, &b, &bk, h);
	pt_cat_close(&a.pc);
	pt_cat_close(&b.pc);
	pt_backing_close(&bk);
}

Test(catshared_reclaim, a_reclaim_between_an_objects_write_and_its_upload_done_is_caught)
{
	struct tr_node a, b;
	struct pt_backing bk;
	uint8_t h[CAT_HASH_LEN];
	uint64_t fa;
	tr_stale_setup(&a, &b, &bk, h, &fa);
	struct cat_upload u = tr_queued(&a, h);
	bool ready = false, stale = false;
	OK(cat_upload_ready(a.pc.cat, &u, &ready, &stale));
	cr_assert(ready);
	char rel[128];
	store_object_relpath(h, rel, sizeof(rel));
	OK(backing_put(bk.b, rel, "x", 1));
	struct cat_reclaim_report rep = tr_turn(&b, &bk); /* between the write and the done */
	cr_assert_eq(rep.removed, 1);
	OK(cat_upload_done(a.pc.cat, &u));
	OK(cat_file_commit(a.pc.cat, fa, TR_LEN, ts_now_ns(), false));
	tr_stale_check(&a, &b, &bk, h);
	pt_cat_close(&a.pc);
	pt_cat_close(&b.pc);
	pt_backing_close(&bk);
}

Test(catshared_reclaim, an_upload_done_after_the_commit_that_a_reclaim_preceded_is_put_again)
{
	struct tr_node a, b;
	struct pt_backing bk;
	uint8_t h[CAT_HASH_LEN];
	uint64_t fa;
	tr_stale_setup(&a, &b, &bk, h, &fa);
	struct cat_upload u = tr_queued(&a, h);
	bool ready = false, stale = false;
	OK(cat_upload_ready(a.pc.cat, &u, &ready, &stale));
	cr_assert(ready);
	char rel[128];
	store_object_relpath(h, rel, sizeof(rel));
	OK(backing_put(bk.b, rel, "x", 1));
	struct cat_reclaim_report rep = tr_turn(&b, &bk);
	cr_assert_eq(rep.removed, 1);
	OK(cat_file_commit(a.pc.cat, fa, TR_LEN, ts_now_ns(), false)); /* before the done */
	OK(cat_upload_done(a.pc.cat, &u));
	tr_stale_check(&a, &b, &bk, h);
	pt_cat_close(&a.pc);
	pt_cat_close(&b.pc);
	pt_backing_close(&bk);
}

/* Whether ns_upload_claims holds exactly `count` rows (asked through n). */
static bool tr_claims_are(struct tr_node *n, int count)
{
	char sql[256];
	snprintf(sql, sizeof(sql), "DO $$ BEGIN IF (SELECT count(*) FROM ns_upload_claims) <> %d"
		 " THEN RAISE EXCEPTION 'claims'; END IF; END $$", count);
	return pg_exec_plain(cat_shared_ns(n->pc.cat)->pg, sql) == 0;
}

Test(catshared_reclaim, claims_are_consumed_by_the_marking_and_a_gone_nodes_go_at_the_next_turn)
{
	struct tr_node a, c;
	struct pt_backing bk;
	tr_open(&a, "claims-a");
	tr_open(&c, "claims-c");
	pt_backing_open(&bk, "reclaim-backing");
	uint64_t fa = tr_file(&a, CAT_ROOT_INO, "done");
	tr_write(&a, &bk, fa, (const int[]){ 60, 61 }, 2); /* claimed, uploaded, marked */
	cr_assert(tr_claims_are(&a, 0), "a marking consumes its claim");
	/* C's writer stores a chunk and its uploader claims it, then C unmounts */
	uint64_t fc = tr_file(&c, CAT_ROOT_INO, "open");
	struct cat_extent e = { .off = 0, .len = TR_LEN, .chunk_len = TR_LEN };
	tr_hash(e.hash, 62);
	bool must_store = false;
	OK(cat_pending_add(c.pc.cat, fc, &e, &must_store));
	OK(cat_chunk_stored(c.pc.cat, e.hash, 2, TR_STORED));
	struct cat_upload u = tr_queued(&c, e.hash);
	bool ready = false, stale = false;
	OK(cat_upload_ready(c.pc.cat, &u, &ready, &stale));
	cr_assert(ready && tr_claims_are(&a, 1));
	cat_close(c.pc.cat);
	c.pc.cat = NULL;
	(void)tr_turn(&a, &bk);
	cr_assert(tr_claims_are(&a, 0), "a node no longer live keeps no claim");
	pt_backing_close(&bk);
	pt_cat_close(&a.pc);
	ts_tmpdir_remove(c.pc.dir);
}

/* A node whose cache is modelled: one object, present or not, for the one
 * hash a writer on it may store while the turn runs (R6). */
struct tr_cache_node {
	struct tr_node node;
	uint64_t writer_ino;  /* a file a local writer writes the reclaimed bytes to */
	bool object;          /* the cache object of the hash exists */
	int removals;         /* the cache callback's calls */
	int removals_unlocked; /* ... made without the catalog lock held */
};

/* The cache callback. Made without the catalog lock, its window is open:
 * the local writer writes the same bytes there (a row, told to store, the
 * object written, recorded stored) before the removal lands. */
static int tr_cache_remove_modelled(void *arg, const uint8_t hash[CAT_HASH_LEN])
{
	struct tr_cache_node *n = arg;
	struct cat *cat = n->node.pc.cat;
	if (pthread_mutex_trylock(&cat->lock) == 0) {
		pthread_mutex_unlock(&cat->lock);
		n->removals_unlocked++;
		struct cat_extent e = { .off = 0, .len = TR_LEN, .chunk_len = TR_LEN };
		memcpy(e.hash, hash, CAT_HASH_LEN);
		bool must_store = false;
		OK(cat_pending_add(cat, n->writer_ino, &e, &must_store));
		if (must_store) {
			n->object = true; /* store_put */
			OK(cat_chunk_stored(cat, e.hash, 2, TR_STORED));
		}
	}
	n->removals++;
	n->object = false;
	return 0;
}

Test(catshared_reclaim, the_turn_removes_a_cache_object_under_the_lock_never_a_writers_new_one)
{
	struct tr_cache_node a;
	struct pt_backing bk;
	memset(&a, 0, sizeof(a));
	pt_cat_open(&a.node.pc, "reclaim-a", 30000, tr_cache_remove_modelled, &a);
	pt_backing_open(&bk, "reclaim-backing");
	struct tr_node *an = &a.node;
	uint64_t f = tr_file(an, CAT_ROOT_INO, "f");
	a.writer_ino = tr_file(an, CAT_ROOT_INO, "g");
	uint8_t h[CAT_HASH_LEN];
	tr_hash(h, 31);
	tr_write(an, &bk, f, (const int[]){ 31 }, 1);
	a.object = true;
	OK(cat_pending_drop(a.node.pc.cat, f));
	/* f overwritten with other bytes: 31 has no reference left */
	OK(cat_pending_from_committed(a.node.pc.cat, f));
	OK(cat_pending_truncate(a.node.pc.cat, f, 0));
	tr_write(an, &bk, f, (const int[]){ 32 }, 1);
	OK(cat_pending_drop(a.node.pc.cat, f));

	struct cat_reclaim_report rep;
	OK(cat_reclaim_turn(a.node.pc.cat, TR_TERM_MS, pt_backing_remove, bk.b, &rep));
	cr_assert_eq(rep.removed, 0, "seen free, not before the tree horizon (R7 a)");
	pt_cat_tree_described(&a.node.pc);
	OK(cat_reclaim_turn(a.node.pc.cat, TR_TERM_MS, pt_backing_remove, bk.b, &rep));
	cr_assert_eq(rep.removed, 1);
	cr_assert_not(pt_on_backing(&bk, h));
	cr_assert_eq(a.removals, 1, "31's cache copy went (R4)");
	cr_expect_eq(a.removals_unlocked, 0, "the cache object is removed under the lock (R6)");
	struct cat_chunk_where w;
	int rc = cat_chunk_where(a.node.pc.cat, h, &w);
	cr_assert(rc == 0 || rc == -ENOENT, "cat_chunk_where: %d", rc);
	cr_assert(rc == -ENOENT || !w.cached || a.object,
		  "a row says cached but its object is gone (uploaded %d)", w.uploaded);
	pt_backing_close(&bk);
	pt_cat_close(&a.node.pc);
}

/* A reader on A fetches from BACKING the bytes B uploaded while A's own
 * writer holds the same bytes dirty (its only copy, its upload queued): the
 * fetch must not call A's copy on BACKING (catalog_shared_data.c S10), or it
 * would be evictable and a reclaim of B's object would leave it nowhere. */
Test(catshared_reclaim, a_fetch_of_another_nodes_upload_leaves_a_local_writers_copy_dirty)
{
	struct tr_node a, b;
	struct pt_backing bk;
	tr_open(&a, "reclaim-a");
	tr_open(&b, "reclaim-b");
	pt_backing_open(&bk, "reclaim-backing");
	uint64_t g = tr_file(&a, CAT_ROOT_INO, "g");
	struct cat_extent e = { .off = 0, .len = TR_LEN, .chunk_len = TR_LEN };
	tr_hash(e.hash, 41);
	bool must_store = false;
	OK(cat_pending_add(a.pc.cat, g, &e, &must_store));
	cr_assert(must_store);
	OK(cat_chunk_stored(a.pc.cat, e.hash, 2, TR_STORED)); /* dirty, its upload queued */
	uint64_t f = tr_file(&b, CAT_ROOT_INO, "f");
	tr_write(&b, &bk, f, (const int[]){ 41 }, 1); /* B's copy is on BACKING */
	cr_assert(pt_on_backing(&bk, e.hash));

	int rc = cat_chunk_fetched(a.pc.cat, e.hash); /* A's reader fetched it */
	cr_assert(rc == 0 || rc == -ENOENT, "cat_chunk_fetched: %d", rc);
	struct cat_chunk_where w;
	OK(cat_chunk_where(a.pc.cat, e.hash, &w));
	cr_assert(w.cached, "A's copy is still there");
	cr_assert_not(w.uploaded, "A's copy is still dirty: its upload has not run");
	struct cat_upload got = tr_queued(&a, e.hash);
	cr_assert_eq(got.kind, UP_CHUNK, "A's upload is still queued");
	pt_backing_close(&bk);
	pt_cat_close(&a.pc);
	pt_cat_close(&b.pc);
}

/* ---- R7: a reclaimer that stalls after its begin ----
 *
 * R, the duty's holder, begins a batch of two chunks and stalls in its first
 * removal (stopped, its VM frozen, cut from PostgreSQL but not from BACKING)
 * for more than three of its terms. Meanwhile A sweeps R, takes R's rows
 * over once R's lease ran out two terms ago (not at the sweep), removes and
 * ends them, and a writer on A stores the second chunk's bytes again and
 * puts them on BACKING. R then goes on: past its local deadline (lease.h L8)
 * it removes nothing more, so the committed file keeps its object. */
struct tr_stall {
	struct tr_node *a;
	struct pt_backing *bk;
	uint8_t h[2][CAT_HASH_LEN]; /* the batch */
	int calls;
	size_t removed_at_sweep; /* A's turn right after the sweep */
	int again;               /* the seed A writes again */
};

static int tr_stalled_remove(void *arg, const char *path)
{
	struct tr_stall *s = arg;
	char first[128];
	store_object_relpath(s->h[0], first, sizeof(first));
	if (s->calls++ == 0) {
		usleep(2300 * 1000); /* R's lease (1 s) ran out, and its grace: swept */
		size_t swept = 0;
		OK(cat_lease_sweep(s->a->pc.cat, &swept));
		cr_assert_eq(swept, 1, "A swept R");
		struct cat_reclaim_report rep = tr_turn(s->a, s->bk);
		cr_assert(rep.held);
		s->removed_at_sweep = rep.removed;
		usleep(1300 * 1000); /* two of R's terms since its lease ran out */
		rep = tr_turn(s->a, s->bk);
		cr_assert(rep.held && rep.removed == 2, "A took R's rows over (%zu)", rep.removed);
		/* the chunk R has not reached yet, stored and uploaded again */
		s->again = strcmp(path, first) == 0 ? 2 : 1;
		uint64_t f = tr_file(s->a, CAT_ROOT_INO, "again");
		tr_write(s->a, s->bk, f, (const int[]){ s->again }, 1);
		cr_assert(pt_on_backing(s->bk, s->h[s->again - 1]));
	}
	return pt_backing_remove(s->bk->b, path); /* R goes on where it stopped */
}

Test(catshared_reclaim, a_reclaimer_stalled_after_its_begin_never_removes_a_new_upload)
{
	struct tr_node a, r;
	struct pt_backing bk;
	tr_open(&a, "stall-a");
	pt_backing_open(&bk, "reclaim-backing");
	uint64_t f = tr_file(&a, CAT_ROOT_INO, "old");
	tr_write(&a, &bk, f, (const int[]){ 1, 2 }, 2);
	OK(cat_pending_drop(a.pc.cat, f));
	uint64_t gone = 0;
	OK(cat_unlink(a.pc.cat, CAT_ROOT_INO, "old", &gone));
	OK(cat_inode_release(a.pc.cat, gone));
	struct tr_stall s = { .a = &a, .bk = &bk };
	tr_hash(s.h[0], 1);
	tr_hash(s.h[1], 2);
	cr_assert(pt_on_backing(&bk, s.h[0]) && pt_on_backing(&bk, s.h[1]));

	tr_open_lease(&r, "stall-r", 1000);
	struct cat_reclaim_report rep;
	OK(cat_reclaim_turn(r.pc.cat, 1000, pt_backing_remove, bk.b, &rep)); /* R7 a: seen free */
	cr_assert_eq(rep.removed, 0);
	pt_cat_tree_described(&r.pc); /* the tree horizon past it */
	int rc = cat_reclaim_turn(r.pc.cat, 1000, tr_stalled_remove, &s, &rep);
	const uint8_t *h = s.h[s.again - 1];
	struct pgns_chunk_row row;
	OK(pgns_chunk_get(cat_shared_ns(a.pc.cat), h, &row));
	cr_assert(row.uploaded && row.refcount == 1);
	cr_assert(pt_on_backing(&bk, h),
		  "R removed the object a writer put again after R's rows were taken over: the "
		  "committed file \"again\" names a chunk BACKING lacks");
	cr_assert_eq(rc, -ESTALE, "R's end is fenced: it was swept");
	cr_assert_eq(s.calls, 1, "R removed nothing past its deadline");
	cr_assert_eq(s.removed_at_sweep, 0, "R's rows were not taken over at its sweep");
	tr_check(&a);
	pt_backing_close(&bk);
	pt_cat_close(&a.pc);
	pt_cat_close(&r.pc);
}

/* ---- a close that meets a reclaim (fs/writer.c writer_commit, pgns.h N3) ---- */

static int tr_no_read(struct reader *r, uint64_t ino, enum reader_source src, uint64_t off,
		      size_t len, char *out)
{
	return -EIO; /* new files from offset 0: nothing is read back */
}

static int tr_no_copy(struct reader *r, uint64_t ino, const struct cat_extent *ext,
		      uint64_t chunk_off, size_t len, char *out)
{
	return -EIO;
}

/* A daemon's chunk put on n's catalog: a store in n's directory, no cache
 * accounting, no queue, no recent chunks. */
static struct chunkput *tr_chunkput(struct tr_node *n, struct store **store)
{
	char path[192], staging[192];
	snprintf(path, sizeof(path), "%s/store", n->pc.dir);
	snprintf(staging, sizeof(staging), "%s/staging", n->pc.dir);
	cr_assert_eq(mkdir(path, 0700), 0);
	cr_assert_eq(mkdir(staging, 0700), 0);
	OK(store_open(path, store));
	struct chunkput_config cfg = {
		.chunking = { .min_size = 64 << 10, .avg_size = 128 << 10, .max_size = 512 << 10 },
		.staging_dir = staging
	};
	struct chunkput_cache cache = { NULL, NULL, NULL, NULL, NULL };
	struct chunkput_kick kick = { NULL, NULL };
	struct chunkput_reader reader = { NULL, tr_no_read, tr_no_copy };
	struct chunkput *cp;
	OK(chunkput_new(&cfg, n->pc.cat, *store, NULL, NULL, &cache, &kick, &reader, &cp));
	return cp;
}

/* A trainer's save: data written to a new file name and closed; the
 * close's commit answer. */
static int tr_save(struct tr_node *n, struct chunkput *cp, const char *name, const char *data,
		   size_t len, uint64_t *ino)
{
	struct writer *w;
	*ino = tr_file(n, CAT_ROOT_INO, name);
	OK(writer_new(cp, *ino, 0, &w));
	OK(writer_write(w, data, len, 0));
	int rc = writer_commit(w, false);
	writer_free(w);
	return rc;
}

struct tr_late_end {
	struct tr_node *r;
	struct pgns_reclaim rec[4];
	size_t n;
	unsigned after_ms;
};

static void *tr_late_end_run(void *arg)
{
	struct tr_late_end *e = arg;
	usleep(e->after_ms * 1000);
	OK(pgns_reclaim_end(cat_shared_ns(e->r->pc.cat), e->rec, e->n));
	return NULL;
}

/* A saves bytes whose old row node R is reclaiming (R removes the object
 * from BACKING): the close waits for R's end, then commits a new row held
 * by A, which uploads its own copy; nothing of the save is lost. */
Test(catshared_reclaim, a_close_that_meets_a_reclaim_of_its_chunk_waits_for_it_and_commits)
{
	struct tr_node a, r;
	tr_open(&a, "close-a");
	tr_open(&r, "close-r");
	struct store *store;
	struct chunkput *cp = tr_chunkput(&a, &store);
	static char data[100 << 10]; /* under the minimum chunk: one chunk */
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (char)(i * 131 + i / 977);
	uint64_t old;
	OK(tr_save(&a, cp, "old", data, sizeof(data), &old));
	struct cat_extent ext[2];
	cr_assert_eq(cat_extents(a.pc.cat, old, 0, ext, 2), 1);
	uint64_t gone = 0;
	OK(cat_unlink(a.pc.cat, CAT_ROOT_INO, "old", &gone));
	OK(cat_inode_release(a.pc.cat, gone));

	struct tr_late_end e = { .r = &r, .after_ms = 400 };
	int64_t horizon = 0;
	struct pgns_ended_gen gens[1];
	size_t ngens = 0;
	OK(pgns_reclaim_stamp(cat_shared_ns(r.pc.cat), &horizon, gens, 1, &ngens));
	OK(pgns_reclaim_begin(cat_shared_ns(r.pc.cat), INT64_MAX, e.rec, 4, &e.n));
	cr_assert_eq(e.n, 1);
	struct pgns_chunk_row row;
	OK(pgns_chunk_get(cat_shared_ns(a.pc.cat), ext[0].hash, &row));
	cr_assert_str_eq(row.state, "reclaiming");

	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, tr_late_end_run, &e), 0);
	int64_t t0 = ts_now_ns();
	uint64_t again;
	int rc = tr_save(&a, cp, "again", data, sizeof(data), &again);
	int64_t waited_ms = (ts_now_ns() - t0) / 1000000;
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_assert_eq(rc, 0, "the close failed (%s) though its chunk was in the local store",
		     strerror(-rc));
	cr_assert_geq(waited_ms, 300, "committed before the reclaim ended (%lld ms)",
		      (long long)waited_ms);
	OK(pgns_chunk_get(cat_shared_ns(a.pc.cat), ext[0].hash, &row));
	cr_assert_str_eq(row.state, "live");
	cr_assert_eq(row.holder, cat_node_id(a.pc.cat), "a new row, held by the node that wrote it");
	cr_assert(!row.uploaded, "A uploads its own copy");
	cr_assert_eq(row.refcount, 1);
	struct cat_extent now[2];
	cr_assert_eq(cat_extents(a.pc.cat, again, 0, now, 2), 1);
	cr_assert_eq(memcmp(now[0].hash, ext[0].hash, CAT_HASH_LEN), 0);
	cr_assert_eq(now[0].len, sizeof(data));
	chunkput_free(cp);
	store_close(store);
	pt_cat_close(&a.pc);
	pt_cat_close(&r.pc);
}
