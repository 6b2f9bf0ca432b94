/* Unit tests for where an upload's marking goes in the shared catalog
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
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "catalog.h"
#include "catalog_internal.h"
#include "pg.h"
#include "pgns.h"
#include "pgtest.h"
#include "support.h"
#include "upload.h"

TestSuite(catshared_marks, .init = pt_start, .fini = pt_stop, .timeout = 90);

#define TM_LEN 1000
#define TM_STORED 600
#define TM_MAX 16

static int tm_cache_remove(void *arg, const uint8_t hash[CAT_HASH_LEN])
{
	(void)arg;
	(void)hash;
	return 0;
}

static void tm_hash(uint8_t out[CAT_HASH_LEN], int seed)
{
	ts_hash(out, 0x5c, seed);
}

static uint64_t tm_round_trips(struct pt_cat *n)
{
	struct pg_stats st;
	pg_get_stats(cat_shared_ns(n->cat)->pg, &st);
	return st.round_trips;
}

static uint64_t tm_file(struct pt_cat *n, const char *name)
{
	struct cat_inode in;
	OK(cat_create(n->cat, CAT_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, NULL, &in));
	return in.ino;
}

/* A writer on ino: chunks seed .. seed + count - 1 from offset 0, each
 * stored (its upload queued) unless the node has it; not committed. */
static void tm_write(struct pt_cat *n, uint64_t ino, int seed, int count)
{
	for (int i = 0; i < count; i++) {
		struct cat_extent e = { .off = (uint64_t)i * TM_LEN, .len = TM_LEN,
					.chunk_len = TM_LEN };
		tm_hash(e.hash, seed + i);
		bool must_store = false;
		OK(cat_pending_add(n->cat, ino, &e, &must_store));
		if (must_store)
			OK(cat_chunk_stored(n->cat, e.hash, 2, TM_STORED));
	}
}

static void tm_commit(struct pt_cat *n, uint64_t ino, int count)
{
	OK(cat_file_commit(n->cat, ino, (uint64_t)count * TM_LEN, ts_now_ns(), false));
}

/* The queued chunk rows, in seq order, all ready (claimed, S8). */
static int tm_claimed_rows(struct pt_cat *n, struct cat_upload *rows)
{
	int got = cat_upload_list(n->cat, 0, rows, TM_MAX);
	cr_assert_gt(got, 0);
	bool ready[TM_MAX], stale[TM_MAX];
	OK(cat_upload_ready_many(n->cat, rows, (size_t)got, ready, stale));
	for (int i = 0; i < got; i++) {
		cr_assert_eq(rows[i].kind, UP_CHUNK);
		cr_assert(ready[i], "row %d ready", i);
		cr_assert_not(stale[i], "row %d not stale", i);
	}
	return got;
}

/* The PostgreSQL row of chunk seed: -ENOENT, or 0 with *uploaded. */
static int tm_pg_row(struct pt_cat *n, int seed, bool *uploaded)
{
	uint8_t h[CAT_HASH_LEN];
	tm_hash(h, seed);
	struct pgns_chunk_row row;
	int rc = pgns_chunk_get(cat_shared_ns(n->cat), h, &row);
	*uploaded = rc == 0 && row.uploaded;
	return rc;
}

static bool tm_local_uploaded(struct pt_cat *n, int seed)
{
	uint8_t h[CAT_HASH_LEN];
	tm_hash(h, seed);
	struct cat_chunk_where w;
	OK(cat_chunk_where(n->cat, h, &w));
	return w.uploaded;
}

static long tm_claims(struct pt_cat *n)
{
	char sql[128];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM ns_upload_claims WHERE node = %llu",
		 (unsigned long long)cat_shared_ns(n->cat)->lease->node_id);
	PGconn *c = PQconnectdb(pt_url);
	cr_assert_eq(PQstatus(c), CONNECTION_OK, "%s", PQerrorMessage(c));
	PGresult *r = PQexec(c, sql);
	cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s", PQerrorMessage(c));
	long v = strtol(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	PQfinish(c);
	return v;
}

/* S12: the uploads of an open file end with no round trip; its commit
 * marks them in PostgreSQL, consuming the claims (N7). */
Test(catshared_marks, an_open_files_uploads_end_with_no_round_trip_and_its_commit_marks_them)
{
	struct pt_cat a;
	pt_cat_open(&a, "marks-a", 30000, tm_cache_remove, &a);
	uint64_t f = tm_file(&a, "f");
	tm_write(&a, f, 100, 6);
	struct cat_upload rows[TM_MAX];
	int n = tm_claimed_rows(&a, rows);
	cr_assert_eq(n, 6);
	uint64_t before = tm_round_trips(&a);
	OK(cat_upload_done_many(a.cat, rows, 3));
	OK(cat_upload_done_many(a.cat, rows + 3, 3));
	uint64_t cost = tm_round_trips(&a) - before;
	cr_assert_eq(cost, 0, "two batches of a writer's unpublished chunks: %llu round trips",
		     (unsigned long long)cost);
	bool up;
	for (int s = 100; s < 106; s++) {
		cr_assert(tm_local_uploaded(&a, s), "chunk %d marked locally (S5)", s);
		FAILS(tm_pg_row(&a, s, &up), ENOENT);
	}
	cr_assert_eq(cat_upload_list(a.cat, 0, rows, TM_MAX), 0, "the rows ended");
	cr_assert_eq(tm_claims(&a), 6, "the claims wait for the commit's marking");

	tm_commit(&a, f, 6);
	for (int s = 100; s < 106; s++) {
		OK(tm_pg_row(&a, s, &up));
		cr_assert(up, "chunk %d marked uploaded by the commit (S2)", s);
	}
	cr_assert_eq(tm_claims(&a), 0, "the commit's marking consumed the claims");
	OK(cat_pending_drop(a.cat, f));
	pt_cat_close(&a);
}

/* S12: a commit between the claim and the upload's end published the rows
 * not uploaded (the local rows were not marked yet) and read them before
 * the upload's local mark: the upload marks them in PostgreSQL. */
Test(catshared_marks, a_commit_between_the_claim_and_the_uploads_end_leaves_the_marking_to_it)
{
	struct pt_cat a;
	pt_cat_open(&a, "marks-a", 30000, tm_cache_remove, &a);
	uint64_t f = tm_file(&a, "f");
	tm_write(&a, f, 200, 3);
	struct cat_upload rows[TM_MAX];
	int n = tm_claimed_rows(&a, rows);
	tm_commit(&a, f, 3);
	bool up = true;
	for (int s = 200; s < 203; s++) {
		OK(tm_pg_row(&a, s, &up));
		cr_assert_not(up, "chunk %d published, not on BACKING yet", s);
	}
	uint64_t before = tm_round_trips(&a);
	OK(cat_upload_done_many(a.cat, rows, (size_t)n));
	cr_assert_geq(tm_round_trips(&a) - before, 1, "told to PostgreSQL");
	for (int s = 200; s < 203; s++) {
		OK(tm_pg_row(&a, s, &up));
		cr_assert(up, "chunk %d marked uploaded by its upload", s);
		cr_assert(tm_local_uploaded(&a, s));
	}
	cr_assert_eq(tm_claims(&a), 0);
	OK(cat_pending_drop(a.cat, f));
	pt_cat_close(&a);
}

/* S12 keeps a marking local only for a hash PostgreSQL had no row of at
 * the claim: one another node published first is marked by the upload, in
 * one round trip for the batch, as before. */
Test(catshared_marks, a_chunk_another_node_published_before_the_claim_is_marked_by_the_upload)
{
	struct pt_cat a, b;
	pt_cat_open(&a, "marks-a", 30000, tm_cache_remove, &a);
	pt_cat_open(&b, "marks-b", 30000, tm_cache_remove, &b);
	uint64_t fb = tm_file(&b, "fb");
	tm_write(&b, fb, 300, 2);
	tm_commit(&b, fb, 2); /* b holds them, not uploaded */
	uint64_t fa = tm_file(&a, "fa");
	tm_write(&a, fa, 300, 2);
	struct cat_upload rows[TM_MAX];
	int n = tm_claimed_rows(&a, rows);
	cr_assert_eq(n, 2);
	OK(cat_upload_done_many(a.cat, rows, 1)); /* prepares */
	uint64_t before = tm_round_trips(&a);
	OK(cat_upload_done_many(a.cat, rows + 1, 1));
	cr_assert_eq(tm_round_trips(&a) - before, 1, "one marking");
	bool up = false;
	for (int s = 300; s < 302; s++) {
		OK(tm_pg_row(&a, s, &up));
		cr_assert(up, "chunk %d marked uploaded on the strength of a's upload", s);
	}
	OK(cat_pending_drop(a.cat, fa));
	OK(cat_pending_drop(b.cat, fb));
	pt_cat_close(&a);
	pt_cat_close(&b);
}
