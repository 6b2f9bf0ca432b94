/* Unit tests for the uploader's batches against the shared catalog (issue 18
 * part 1; meta/pgns.h N7, meta/catalog_shared_data.c S8, S9): a struct cat
 * opened with cat_open_shared on a private PostgreSQL (tests/unit/pgtest.h)
 * is a node whose upload queue the test serves by hand, as fs/uploader.c
 * does.
 *
 * The readiness of a batch of chunk rows, with their upload claims, costs
 * one round trip (pg_get_stats) whatever the batch's size, and so does its
 * marking; a row whose claim is refused, or whose chunk is on BACKING
 * already, is that row's answer alone: the others of the batch are ready,
 * claimed and marked. A file never committed leaves no claim behind once
 * its writer is released; a committed one keeps its claims for its queued
 * uploads, whose markings consume them. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backing.h"
#include "catalog.h"
#include "catalog_internal.h"
#include "pg.h"
#include "pgns.h"
#include "pgtest.h"
#include "hash.h"
#include "store.h"
#include "support.h"
#include "upload.h"
#include "uploader.h"

TestSuite(catshared_batch, .init = pt_start, .fini = pt_stop, .timeout = 90);

#define BT_LEN 1000
#define BT_STORED 600
#define BT_MAX 32

static int bt_cache_remove(void *arg, const uint8_t hash[CAT_HASH_LEN])
{
	(void)arg;
	(void)hash;
	return 0;
}

static void bt_hash(uint8_t out[CAT_HASH_LEN], int seed)
{
	ts_hash(out, 0xb7, seed);
}

static uint64_t bt_round_trips(struct pt_cat *n)
{
	struct pg_stats st;
	pg_get_stats(cat_shared_ns(n->cat)->pg, &st);
	return st.round_trips;
}

static uint64_t bt_file(struct pt_cat *n, const char *name)
{
	struct cat_inode in;
	OK(cat_create(n->cat, CAT_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, NULL, &in));
	return in.ino;
}

/* A writer on ino: chunks seed .. seed + count - 1 from offset 0, each
 * stored (its upload queued) unless the node has it; not committed. */
static void bt_write(struct pt_cat *n, uint64_t ino, int seed, int count)
{
	for (int i = 0; i < count; i++) {
		struct cat_extent e = { .off = (uint64_t)i * BT_LEN, .len = BT_LEN,
					.chunk_len = BT_LEN };
		bt_hash(e.hash, seed + i);
		bool must_store = false;
		OK(cat_pending_add(n->cat, ino, &e, &must_store));
		if (must_store)
			OK(cat_chunk_stored(n->cat, e.hash, 2, BT_STORED));
	}
}

static void bt_commit(struct pt_cat *n, uint64_t ino, int count)
{
	OK(cat_file_commit(n->cat, ino, (uint64_t)count * BT_LEN, ts_now_ns(), false));
}

/* The queued chunk rows, in seq order. */
static int bt_rows(struct pt_cat *n, struct cat_upload *rows)
{
	int got = cat_upload_list(n->cat, 0, rows, BT_MAX);
	cr_assert_geq(got, 0);
	for (int i = 0; i < got; i++)
		cr_assert_eq(rows[i].kind, UP_CHUNK);
	return got;
}

/* The number of a query's one row, on a connection of the test's own. */
static long bt_count(const char *sql)
{
	PGconn *c = PQconnectdb(pt_url);
	cr_assert_eq(PQstatus(c), CONNECTION_OK, "%s", PQerrorMessage(c));
	PGresult *r = PQexec(c, sql);
	cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s", PQerrorMessage(c));
	long v = strtol(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	PQfinish(c);
	return v;
}

static long bt_claims(struct pt_cat *n)
{
	char sql[128];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM ns_upload_claims WHERE node = %llu",
		 (unsigned long long)cat_shared_ns(n->cat)->lease->node_id);
	return bt_count(sql);
}

static void bt_exec(const char *sql)
{
	PGconn *c = PQconnectdb(pt_url);
	cr_assert_eq(PQstatus(c), CONNECTION_OK, "%s", PQerrorMessage(c));
	PGresult *r = PQexec(c, sql);
	cr_assert_eq(PQresultStatus(r), PGRES_COMMAND_OK, "%s", PQerrorMessage(c));
	PQclear(r);
	PQfinish(c);
}

/* The round trips of the readiness of rows[0..n) (all ready, none stale). */
static uint64_t bt_ready_cost(struct pt_cat *n, const struct cat_upload *rows, int count)
{
	bool ready[BT_MAX], stale[BT_MAX];
	uint64_t before = bt_round_trips(n);
	OK(cat_upload_ready_many(n->cat, rows, (size_t)count, ready, stale));
	uint64_t cost = bt_round_trips(n) - before;
	for (int i = 0; i < count; i++) {
		cr_assert(ready[i], "row %d ready", i);
		cr_assert_not(stale[i], "row %d not stale", i);
	}
	return cost;
}

static bool bt_pg_uploaded(struct pt_cat *n, int seed)
{
	uint8_t h[CAT_HASH_LEN];
	bt_hash(h, seed);
	struct pgns_chunk_row row;
	OK(pgns_chunk_get(cat_shared_ns(n->cat), h, &row));
	return row.uploaded;
}

static bool bt_local_uploaded(struct pt_cat *n, int seed)
{
	uint8_t h[CAT_HASH_LEN];
	bt_hash(h, seed);
	struct cat_chunk_where w;
	OK(cat_chunk_where(n->cat, h, &w));
	return w.uploaded;
}

Test(catshared_batch, a_batchs_readiness_and_marking_cost_one_round_trip_whatever_its_size)
{
	struct pt_cat a;
	pt_cat_open(&a, "batch-a", 30000, bt_cache_remove, &a);
	uint64_t small = bt_file(&a, "small"), big = bt_file(&a, "big");
	bt_write(&a, small, 100, 2);
	bt_write(&a, big, 200, 24);
	struct cat_upload rows[BT_MAX];
	cr_assert_eq(bt_rows(&a, rows), 26);

	/* the first call prepares its statement: both sizes after it */
	uint64_t c_small = bt_ready_cost(&a, rows, 2);
	c_small = bt_ready_cost(&a, rows, 2);
	uint64_t c_big = bt_ready_cost(&a, rows + 2, 24);
	cr_assert_eq(c_big, c_small, "24 rows cost %llu round trips, 2 rows %llu",
		     (unsigned long long)c_big, (unsigned long long)c_small);
	cr_assert_leq(c_big, 3, "one statement in its transaction: %llu", (unsigned long long)c_big);
	cr_assert_eq(bt_claims(&a), 26, "every writer's chunk claimed (N7)");

	/* the markings of the uploads done after the commits: one round trip
	 * for the batch (the first prepares) */
	bt_commit(&a, small, 2);
	bt_commit(&a, big, 24);
	OK(cat_upload_done_many(a.cat, rows, 2));
	uint64_t before = bt_round_trips(&a);
	OK(cat_upload_done_many(a.cat, rows + 2, 24));
	uint64_t c_done = bt_round_trips(&a) - before;
	cr_assert_leq(c_done, 4, "24 markings: %llu round trips", (unsigned long long)c_done);
	for (int s = 200; s < 224; s++) {
		cr_assert(bt_pg_uploaded(&a, s), "chunk %d marked in PostgreSQL", s);
		cr_assert(bt_local_uploaded(&a, s));
	}
	cr_assert_eq(bt_claims(&a), 0, "the markings consumed the claims (N7)");
	OK(cat_pending_drop(a.cat, small));
	OK(cat_pending_drop(a.cat, big));
	pt_cat_close(&a);
}

Test(catshared_batch, a_chunk_on_backing_already_is_stale_alone_the_rest_of_its_batch_is_claimed)
{
	struct pt_cat a;
	pt_cat_open(&a, "batch-a", 30000, bt_cache_remove, &a);
	uint64_t f = bt_file(&a, "f");
	bt_write(&a, f, 300, 3);
	bt_commit(&a, f, 3);
	OK(cat_pending_drop(a.cat, f)); /* no writer names them: S4 asks PostgreSQL */
	uint8_t h[CAT_HASH_LEN];
	bt_hash(h, 301);
	OK(pgns_chunk_uploaded(cat_shared_ns(a.cat), h)); /* another node put it */
	struct cat_upload rows[BT_MAX];
	cr_assert_eq(bt_rows(&a, rows), 3);
	bool ready[3], stale[3];
	OK(cat_upload_ready_many(a.cat, rows, 3, ready, stale));
	cr_assert(ready[0] && !stale[0]);
	cr_assert(!ready[1] && stale[1], "on BACKING already: moot");
	cr_assert(ready[2] && !stale[2]);
	cr_assert_eq(bt_claims(&a), 2, "the two to put are claimed, the moot one is not");
	/* it ends marking nothing in PostgreSQL, and its local row uploaded, as
	 * PostgreSQL says (upload.h U7): not left dirty with no upload queued */
	cr_assert_not(bt_local_uploaded(&a, 301));
	OK(cat_upload_moot_many(a.cat, &rows[1], 1));
	cr_assert(bt_local_uploaded(&a, 301));
	cr_assert_eq(bt_rows(&a, rows), 2);
	pt_cat_close(&a);
}

Test(catshared_batch, a_refused_marking_requeues_its_row_alone)
{
	struct pt_cat a;
	pt_cat_open(&a, "batch-a", 30000, bt_cache_remove, &a);
	uint64_t f = bt_file(&a, "f");
	bt_write(&a, f, 400, 3);
	bt_commit(&a, f, 3);
	struct cat_upload rows[BT_MAX];
	cr_assert_eq(bt_rows(&a, rows), 3);
	bt_ready_cost(&a, rows, 3);
	cr_assert_eq(bt_claims(&a), 3);
	/* what a reclaim's end does to the claims of a hash it removed (R5):
	 * chunk 401's object may be gone, so its marking must be refused */
	uint8_t h[CAT_HASH_LEN];
	char hex[2 * CAT_HASH_LEN + 1], sql[256];
	bt_hash(h, 401);
	cat_hex(h, hex);
	snprintf(sql, sizeof(sql), "DELETE FROM ns_upload_claims WHERE hash = decode('%s', 'hex')",
		 hex);
	bt_exec(sql);
	OK(cat_upload_done_many(a.cat, rows, 3));
	cr_assert(bt_pg_uploaded(&a, 400));
	cr_assert_not(bt_pg_uploaded(&a, 401), "marked without its claim (N7)");
	cr_assert(bt_pg_uploaded(&a, 402));
	cr_assert(bt_local_uploaded(&a, 400));
	cr_assert_not(bt_local_uploaded(&a, 401), "not on BACKING here either (S8)");
	cr_assert(bt_local_uploaded(&a, 402));
	struct cat_upload again[BT_MAX];
	cr_assert_eq(bt_rows(&a, again), 1, "only the refused chunk is queued again");
	cr_assert_eq(memcmp(again[0].hash, h, CAT_HASH_LEN), 0);
	/* its next readiness claims anew, and its marking then counts */
	bt_ready_cost(&a, again, 1);
	OK(cat_upload_done_many(a.cat, again, 1));
	cr_assert(bt_pg_uploaded(&a, 401));
	cr_assert_eq(bt_claims(&a), 0);
	OK(cat_pending_drop(a.cat, f));
	pt_cat_close(&a);
}

Test(catshared_batch, a_file_never_committed_leaves_no_claim_behind)
{
	struct pt_cat a;
	pt_cat_open(&a, "batch-a", 30000, bt_cache_remove, &a);
	uint64_t f = bt_file(&a, "abandoned");
	bt_write(&a, f, 500, 4);
	struct cat_upload rows[BT_MAX];
	cr_assert_eq(bt_rows(&a, rows), 4);
	bt_ready_cost(&a, rows, 4);
	OK(cat_upload_done_many(a.cat, rows, 4)); /* PostgreSQL has no row: nothing marked */
	cr_assert_eq(bt_claims(&a), 4, "the claims wait for the commit's marking");
	OK(cat_pending_drop(a.cat, f)); /* the writer gives up */
	cr_assert_eq(bt_claims(&a), 0, "no commit can use them any more (S9)");
	pt_cat_close(&a);
}

Test(catshared_batch, a_released_files_queued_uploads_keep_their_claims_for_their_marking)
{
	struct pt_cat a;
	pt_cat_open(&a, "batch-a", 30000, bt_cache_remove, &a);
	uint64_t f = bt_file(&a, "f"), g = bt_file(&a, "g");
	bt_write(&a, f, 600, 3);
	bt_write(&a, g, 601, 1); /* chunk 601 is g's too, and g is still open */
	struct cat_upload rows[BT_MAX];
	cr_assert_eq(bt_rows(&a, rows), 3);
	bt_ready_cost(&a, rows, 3);
	/* chunk 600's upload is done before the commit: its claim is the
	 * commit's to consume; the others' uploads are still queued */
	OK(cat_upload_done_many(a.cat, rows, 1));
	bt_commit(&a, f, 3);
	OK(cat_pending_drop(a.cat, f));
	cr_assert_eq(bt_claims(&a), 2, "the queued uploads of 601 and 602 keep theirs");
	OK(cat_upload_done_many(a.cat, rows + 1, 2));
	for (int s = 600; s < 603; s++)
		cr_assert(bt_pg_uploaded(&a, s), "chunk %d marked, not refused", s);
	cr_assert_eq(bt_claims(&a), 0);
	OK(cat_pending_drop(a.cat, g));
	pt_cat_close(&a);
}

/* ---- where an upload's marking goes in the shared catalog
 * (meta/catalog_shared_data.c S5, S12; meta/pgns.h N7): a struct cat opened
 * with cat_open_shared on a private PostgreSQL (tests/unit/pgtest.h) is a
 * node whose upload queue the test serves by hand, as fs/uploader.c does.
 *
 * A writer's chunk uploaded while its file is open (what a save's uploads
 * are: the uploader keeps up with the writers) has no row in PostgreSQL to
 * mark: its upload's end costs no round trip (two before: the marking, then
 * S5's second telling), and the file's commit marks it. A file committed
 * between the claim and the upload's end is marked by the upload, and a
 * chunk PostgreSQL has a row of at the claim is marked by it, as before. */

TestSuite(catshared_marks, .init = pt_start, .fini = pt_stop, .timeout = 90);

/* The queued chunk rows, in seq order, all ready (claimed, S8). */
static int bt_claimed_rows(struct pt_cat *n, struct cat_upload *rows)
{
	int got = bt_rows(n, rows);
	cr_assert_gt(got, 0);
	bool ready[BT_MAX], stale[BT_MAX];
	OK(cat_upload_ready_many(n->cat, rows, (size_t)got, ready, stale));
	for (int i = 0; i < got; i++) {
		cr_assert_eq(rows[i].kind, UP_CHUNK);
		cr_assert(ready[i], "row %d ready", i);
		cr_assert_not(stale[i], "row %d not stale", i);
	}
	return got;
}

/* The PostgreSQL row of chunk seed: -ENOENT, or 0 with *uploaded. */
static int bt_pg_row(struct pt_cat *n, int seed, bool *uploaded)
{
	uint8_t h[CAT_HASH_LEN];
	bt_hash(h, seed);
	struct pgns_chunk_row row;
	int rc = pgns_chunk_get(cat_shared_ns(n->cat), h, &row);
	*uploaded = rc == 0 && row.uploaded;
	return rc;
}

/* S12: the uploads of an open file end with no round trip; its commit
 * marks them in PostgreSQL, consuming the claims (N7). */
Test(catshared_marks, an_open_files_uploads_end_with_no_round_trip_and_its_commit_marks_them)
{
	struct pt_cat a;
	pt_cat_open(&a, "marks-a", 30000, bt_cache_remove, &a);
	uint64_t f = bt_file(&a, "f");
	bt_write(&a, f, 100, 6);
	struct cat_upload rows[BT_MAX];
	int n = bt_claimed_rows(&a, rows);
	cr_assert_eq(n, 6);
	uint64_t before = bt_round_trips(&a);
	OK(cat_upload_done_many(a.cat, rows, 3));
	OK(cat_upload_done_many(a.cat, rows + 3, 3));
	uint64_t cost = bt_round_trips(&a) - before;
	cr_assert_eq(cost, 0, "two batches of a writer's unpublished chunks: %llu round trips",
		     (unsigned long long)cost);
	bool up;
	for (int s = 100; s < 106; s++) {
		cr_assert(bt_local_uploaded(&a, s), "chunk %d marked locally (S5)", s);
		FAILS(bt_pg_row(&a, s, &up), ENOENT);
	}
	cr_assert_eq(cat_upload_list(a.cat, 0, rows, BT_MAX), 0, "the rows ended");
	cr_assert_eq(bt_claims(&a), 6, "the claims wait for the commit's marking");

	bt_commit(&a, f, 6);
	for (int s = 100; s < 106; s++) {
		OK(bt_pg_row(&a, s, &up));
		cr_assert(up, "chunk %d marked uploaded by the commit (S2)", s);
	}
	cr_assert_eq(bt_claims(&a), 0, "the commit's marking consumed the claims");
	OK(cat_pending_drop(a.cat, f));
	pt_cat_close(&a);
}

/* S12: a commit between the claim and the upload's end published the rows
 * not uploaded (the local rows were not marked yet) and read them before
 * the upload's local mark: the upload marks them in PostgreSQL. */
Test(catshared_marks, a_commit_between_the_claim_and_the_uploads_end_leaves_the_marking_to_it)
{
	struct pt_cat a;
	pt_cat_open(&a, "marks-a", 30000, bt_cache_remove, &a);
	uint64_t f = bt_file(&a, "f");
	bt_write(&a, f, 200, 3);
	struct cat_upload rows[BT_MAX];
	int n = bt_claimed_rows(&a, rows);
	bt_commit(&a, f, 3);
	bool up = true;
	for (int s = 200; s < 203; s++) {
		OK(bt_pg_row(&a, s, &up));
		cr_assert_not(up, "chunk %d published, not on BACKING yet", s);
	}
	uint64_t before = bt_round_trips(&a);
	OK(cat_upload_done_many(a.cat, rows, (size_t)n));
	cr_assert_geq(bt_round_trips(&a) - before, 1, "told to PostgreSQL");
	for (int s = 200; s < 203; s++) {
		OK(bt_pg_row(&a, s, &up));
		cr_assert(up, "chunk %d marked uploaded by its upload", s);
		cr_assert(bt_local_uploaded(&a, s));
	}
	cr_assert_eq(bt_claims(&a), 0);
	OK(cat_pending_drop(a.cat, f));
	pt_cat_close(&a);
}

/* S12 keeps a marking local only for a hash PostgreSQL had no row of at
 * the claim: one another node published first is marked by the upload, in
 * one round trip for the batch, as before. */
Test(catshared_marks, a_chunk_another_node_published_before_the_claim_is_marked_by_the_upload)
{
	struct pt_cat a, b;
	pt_cat_open(&a, "marks-a", 30000, bt_cache_remove, &a);
	pt_cat_open(&b, "marks-b", 30000, bt_cache_remove, &b);
	uint64_t fb = bt_file(&b, "fb");
	bt_write(&b, fb, 300, 2);
	bt_commit(&b, fb, 2); /* b holds them, not uploaded */
	uint64_t fa = bt_file(&a, "fa");
	bt_write(&a, fa, 300, 2);
	struct cat_upload rows[BT_MAX];
	int n = bt_claimed_rows(&a, rows);
	cr_assert_eq(n, 2);
	OK(cat_upload_done_many(a.cat, rows, 1)); /* prepares */
	uint64_t before = bt_round_trips(&a);
	OK(cat_upload_done_many(a.cat, rows + 1, 1));
	cr_assert_eq(bt_round_trips(&a) - before, 1, "one marking");
	bool up = false;
	for (int s = 300; s < 302; s++) {
		OK(bt_pg_row(&a, s, &up));
		cr_assert(up, "chunk %d marked uploaded on the strength of a's upload", s);
	}
	OK(cat_pending_drop(a.cat, fa));
	OK(cat_pending_drop(b.cat, fb));
	pt_cat_close(&a);
	pt_cat_close(&b);
}

/* ---- the uploader's picks with a shared catalog (fs/uploader.h B1) ---- */

TestSuite(catshared_linger, .init = pt_start, .fini = pt_stop, .timeout = 90);

#define LG_LEN (64u << 10)
#define LG_N 8

static uint64_t lg_claims(struct pt_cat *n)
{
	return __atomic_load_n(&cat_shared_ns(n->cat)->claims, __ATOMIC_RELAXED);
}

/* A writer on ino writes chunk k (LG_LEN bytes of its own) as the daemon's
 * does: its object in the cache's store, its upload queued, the uploader
 * told. */
static void lg_chunk(struct pt_cat *n, struct store *st, struct uploader *u, uint64_t ino, int k,
		     uint8_t hash[CAT_HASH_LEN])
{
	static uint8_t buf[LG_LEN];
	for (size_t i = 0; i < LG_LEN; i++)
		buf[i] = (uint8_t)((i * 2654435761u) >> 13) ^ (uint8_t)(k * 37 + 1);
	struct cat_extent e = { .off = (uint64_t)k * LG_LEN, .len = LG_LEN, .chunk_len = LG_LEN };
	hash_sha256(buf, LG_LEN, e.hash);
	memcpy(hash, e.hash, CAT_HASH_LEN);
	bool must = false;
	OK(cat_pending_add(n->cat, ino, &e, &must));
	cr_assert(must, "chunk %d is new", k);
	struct store_object_info info;
	OK(store_put(st, e.hash, buf, LG_LEN, 0, &info));
	OK(cat_chunk_stored(n->cat, e.hash, info.codec, info.stored_len));
	uploader_kick(u);
}

/* Chunks a writer queues one at a time while the uploader keeps up were
 * each claimed by a pick of their own (a PostgreSQL round trip a chunk or
 * two); they now wait in one linger and are claimed together, before their
 * objects are written (N7), and end on BACKING. */
Test(catshared_linger, chunks_queued_one_at_a_time_are_claimed_together_after_a_linger)
{
	struct pt_cat a;
	struct pt_backing bk;
	struct store *st;
	struct uploader *u;
	pt_cat_open(&a, "linger-a", 30000, bt_cache_remove, &a);
	pt_backing_open(&bk, "linger-backing");
	OK(store_open(a.dir, &st));
	uint64_t f = bt_file(&a, "f");
	/* a linger that only the stop below ends: the count does not depend
	 * on how fast this machine is */
	struct uploader_config cfg = { .threads = 2, .deadline_s = 600, .chunk_max = 256u << 10,
				       .linger_ms = 600000 };
	snprintf(cfg.cache_dir, sizeof(cfg.cache_dir), "%s", a.dir);
	OK(uploader_start(&cfg, a.cat, st, bk.b, NULL, NULL, NULL, &u));
	uint8_t hashes[LG_N][CAT_HASH_LEN];
	uint64_t before = lg_claims(&a);
	for (int k = 0; k < LG_N; k++) {
		lg_chunk(&a, st, u, f, k, hashes[k]);
		usleep(20 * 1000); /* time for a worker to take it alone, as they did */
	}
	uploader_stop(u, true); /* ends the linger: the rows are put and synced */
	uint64_t claims = lg_claims(&a) - before;
	cr_assert_eq(claims, 1, "%d chunks queued one at a time took %llu claims", LG_N,
		     (unsigned long long)claims);
	for (int k = 0; k < LG_N; k++)
		cr_assert(pt_on_backing(&bk, hashes[k]), "chunk %d on BACKING", k);
	cr_assert_eq(bt_claims(&a), LG_N, "claimed before their writes, kept for the commit (N7)");
	OK(cat_file_commit(a.cat, f, (uint64_t)LG_N * LG_LEN, ts_now_ns(), false));
	cr_assert_eq(bt_claims(&a), 0, "the commit's markings consumed the claims (N7)");
	OK(cat_pending_drop(a.cat, f));
	store_close(st);
	pt_backing_close(&bk);
	pt_cat_close(&a);
}
