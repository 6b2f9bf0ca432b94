/* Unit tests for meta/pgns.c, the shared namespace in PostgreSQL, against a
 * real server each test starts (tests/unit/pgtest.h). Two nodes are two
 * connections with their own leases.
 *
 * A name made on one node is seen at once on the other; a file's content
 * published by one node is read back extent for extent by the other; chunks
 * two nodes publish are stored once, with one reference per extent (N1),
 * checked by pgns_check after every step; overwrite and unlink+release give
 * the references back, and reclaim takes exactly the chunks at zero; a
 * chunk being reclaimed is never revived by a commit (N3) — the commit fails
 * with -EBUSY, and after the reclaim ends it goes in as a new chunk held by
 * its node; a node past its lease changes nothing (N4); two nodes committing
 * and releasing files over a shared pool of chunks at once keep N1. A fenced
 * change of one statement (an upload marking, an unpin) is one round trip
 * (lease.h L5); a sweep waits for one in flight, and one behind a sweep
 * marks nothing (-ESTALE). */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog_internal.h"
#include "gen.h"
#include "generation.h"
#include "hash.h"
#include "lease.h"
#include "node.h"
#include "ns.h"
#include "pggen.h"
#include "pgns.h"
#include "pgfault.h"
#include "pgtest.h"
#include "support.h"

TestSuite(pgns, .init = pt_start, .fini = pt_stop, .timeout = 90);

/* A file of nchunks extents of 1000 bytes each, on chunks ts_hash(fill, seed + i). */
static void tn_content(uint8_t fill, int seed, size_t nchunks, struct cat_extent *ext,
		       struct pgns_chunk *chunks)
{
	for (size_t i = 0; i < nchunks; i++) {
		ts_hash(chunks[i].hash, fill, seed + (int)i);
		chunks[i].plain_len = 1000;
		chunks[i].stored_len = 600;
		chunks[i].codec = 2;
		ext[i] = (struct cat_extent){ .off = i * 1000, .len = 1000, .chunk_off = 0,
					      .chunk_len = 1000 };
		memcpy(ext[i].hash, chunks[i].hash, CAT_HASH_LEN);
	}
}

static uint64_t tn_file(struct pt_node *n, uint64_t parent, const char *name)
{
	struct cat_inode in;
	OK(pgns_create(&n->ns, parent, name, S_IFREG | 0644, 1000, 1000, 0, NULL, &in));
	return in.ino;
}

static uint64_t tn_refs(struct pt_node *n, const uint8_t hash[CAT_HASH_LEN])
{
	struct pgns_chunk_row row;
	OK(pgns_chunk_get(&n->ns, hash, &row));
	return row.refcount;
}

struct tn_names {
	char names[8][64];
	int n;
};

static int tn_collect(void *arg, const char *name, const struct cat_inode *attr, uint64_t next)
{
	(void)attr;
	(void)next;
	struct tn_names *t = arg;
	if (t->n < 8)
		snprintf(t->names[t->n++], 64, "%s", name);
	return 0;
}

Test(pgns, a_name_made_on_one_node_is_seen_on_the_other)
{
	struct pt_node a, b;
	pt_join(&a, "a", 30000);
	pt_join(&b, "b", 30000);
	struct cat_inode dir, got;
	OK(pgns_create(&a.ns, CAT_ROOT_INO, "run", S_IFDIR | 0755, 1000, 1000, 0, NULL, &dir));
	uint64_t f = tn_file(&a, dir.ino, "step-1.pt");
	OK(pgns_lookup(&b.ns, dir.ino, "step-1.pt", &got));
	cr_assert_eq(got.ino, f);
	cr_assert_eq(got.uid, 1000);
	FAILS(pgns_create(&b.ns, dir.ino, "step-1.pt", S_IFREG | 0644, 0, 0, 0, NULL, &got), EEXIST);
	FAILS(pgns_create(&b.ns, f, "x", S_IFREG | 0644, 0, 0, 0, NULL, &got), ENOTDIR);
	FAILS(pgns_create(&b.ns, 999999, "x", S_IFREG | 0644, 0, 0, 0, NULL, &got), ENOENT);

	struct tn_names t = { 0 };
	OK(pgns_readdir(&b.ns, dir.ino, 0, tn_collect, &t));
	cr_assert_eq(t.n, 3);
	cr_assert_str_eq(t.names[0], ".");
	cr_assert_str_eq(t.names[1], "..");
	cr_assert_str_eq(t.names[2], "step-1.pt");
	OK(pgns_getattr(&b.ns, CAT_ROOT_INO, &got));
	cr_assert_eq(got.nlink, 3, "root has . , .. and run/..");

	uint64_t gone = 0;
	FAILS(pgns_unlink(&b.ns, CAT_ROOT_INO, "run", &gone), EISDIR);
	OK(pgns_unlink(&b.ns, dir.ino, "step-1.pt", &gone));
	cr_assert_eq(gone, f);
	FAILS(pgns_lookup(&a.ns, dir.ino, "step-1.pt", &got), ENOENT);
	OK(pgns_getattr(&a.ns, f, &got));
	cr_assert_eq(got.nlink, 0, "the inode stays until released");
	OK(pgns_inode_release(&a.ns, f));
	FAILS(pgns_getattr(&a.ns, f, &got), ENOENT);
	pt_leave(&a);
	pt_leave(&b);
}

static uint64_t tn_round_trips(struct pt_node *n)
{
	struct pg_stats st;
	pg_get_stats(n->pg, &st);
	return st.round_trips;
}

/* pg.h P5: a read of one statement is one round trip (no BEGIN, no COMMIT);
 * a change stays a transaction. */
Test(pgns, a_one_statement_read_is_one_round_trip)
{
	struct pt_node a;
	pt_join(&a, "a", 30000);
	struct cat_inode dir, got;
	OK(pgns_create(&a.ns, CAT_ROOT_INO, "run", S_IFDIR | 0755, 0, 0, 0, NULL, &dir));
	OK(pgns_getattr(&a.ns, dir.ino, &got)); /* prepares its statement */
	OK(pgns_lookup(&a.ns, CAT_ROOT_INO, "run", &got));
	uint64_t t0 = tn_round_trips(&a);
	OK(pgns_getattr(&a.ns, dir.ino, &got));
	cr_assert_eq(tn_round_trips(&a) - t0, 1, "getattr: %llu round trips",
		     (unsigned long long)(tn_round_trips(&a) - t0));
	t0 = tn_round_trips(&a);
	OK(pgns_lookup(&a.ns, CAT_ROOT_INO, "run", &got));
	cr_assert_eq(got.ino, dir.ino);
	cr_assert_eq(tn_round_trips(&a) - t0, 1, "lookup: %llu round trips",
		     (unsigned long long)(tn_round_trips(&a) - t0));
	FAILS(pgns_lookup(&a.ns, CAT_ROOT_INO, "none", &got), ENOENT);
	OK(pgns_create(&a.ns, dir.ino, "e", S_IFREG | 0644, 0, 0, 0, NULL, &got)); /* prepares */
	t0 = tn_round_trips(&a);
	OK(pgns_create(&a.ns, dir.ino, "f", S_IFREG | 0644, 0, 0, 0, NULL, &got));
	/* N9: one fenced statement (eight before: BEGIN, lease_fence, the parent's
	 * lock, the inode, the entry, the parent's times, getattr, COMMIT) */
	cr_assert_eq(tn_round_trips(&a) - t0, 1, "a create: %llu round trips",
		     (unsigned long long)(tn_round_trips(&a) - t0));
	t0 = tn_round_trips(&a);
	OK(pgns_unlink(&a.ns, dir.ino, "e", NULL));
	cr_assert_geq(tn_round_trips(&a) - t0, 3, "a change of several statements runs inside BEGIN .. COMMIT");
	pt_leave(&a);
}

/* Node n's file "name" on count chunks of fill, published and claimed by n
 * for upload (N7), none of them marked yet; their hashes in hashes. */
static void tn_claimed(struct pt_node *n, const char *name, uint8_t fill, size_t count,
		       uint8_t (*hashes)[CAT_HASH_LEN])
{
	struct cat_extent ext[8];
	struct pgns_chunk chunks[8];
	struct pgns_claim claims[8];
	bool writer[8];
	cr_assert(count <= 8);
	tn_content(fill, 0, count, ext, chunks);
	uint64_t f = tn_file(n, CAT_ROOT_INO, name);
	OK(pgns_file_commit(&n->ns, f, count * 1000, 1, ext, count, chunks, count));
	for (size_t i = 0; i < count; i++) {
		memcpy(hashes[i], chunks[i].hash, CAT_HASH_LEN);
		writer[i] = true;
	}
	OK(pgns_upload_claims(&n->ns, (const uint8_t(*)[CAT_HASH_LEN])hashes, writer, count, claims));
	for (size_t i = 0; i < count; i++)
		cr_assert(claims[i].found && !claims[i].row.uploaded);
}

static bool tn_uploaded(struct pt_node *n, const uint8_t hash[CAT_HASH_LEN])
{
	struct pgns_chunk_row row;
	OK(pgns_chunk_get(&n->ns, hash, &row));
	return row.uploaded;
}

/* lease.h L5: a fenced change of one statement carries its fence: one round
 * trip (four with BEGIN, lease_fence and COMMIT). */
Test(pgns, a_fenced_one_statement_change_is_one_round_trip)
{
	struct pt_node a;
	pt_join(&a, "a", 30000);
	uint8_t h[4][CAT_HASH_LEN];
	tn_claimed(&a, "f", 21, 4, h);
	bool marked[4] = { false }, refused[4] = { false };
	OK(pgns_chunks_uploaded(&a.ns, (const uint8_t(*)[CAT_HASH_LEN])h, 1, marked, refused));
	cr_assert(marked[0], "the first marking (it prepares its statement)");
	uint64_t t0 = tn_round_trips(&a);
	OK(pgns_chunks_uploaded(&a.ns, (const uint8_t(*)[CAT_HASH_LEN])h + 1, 3, marked, refused));
	cr_assert_eq(tn_round_trips(&a) - t0, 1, "a batch's marking: %llu round trips",
		     (unsigned long long)(tn_round_trips(&a) - t0));
	for (int i = 0; i < 3; i++)
		cr_assert(marked[i] && !refused[i] && tn_uploaded(&a, h[1 + i]), "chunk %d marked", i);
	OK(pgns_unpin(&a.ns, 12345)); /* prepares */
	t0 = tn_round_trips(&a);
	OK(pgns_unpin(&a.ns, 12345));
	cr_assert_eq(tn_round_trips(&a) - t0, 1, "an unpin: %llu round trips",
		     (unsigned long long)(tn_round_trips(&a) - t0));
	pt_check(&a);
	pt_leave(&a);
}

/* A raw connection of the test's own, playing another node's transaction. */
static PGconn *tn_raw(void)
{
	PGconn *c = PQconnectdb(pt_url);
	cr_assert(c && PQstatus(c) == CONNECTION_OK, "connect: %s", c ? PQerrorMessage(c) : "");
	return c;
}

static void tn_raw_sql(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	ExecStatusType st = PQresultStatus(r);
	cr_assert(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK, "%s: %s", sql,
		  PQresultErrorMessage(r));
	PQclear(r);
}

struct tn_marking {
	struct pt_node *node;
	const uint8_t (*hashes)[CAT_HASH_LEN];
	size_t n;
	bool marked[8];
	int rc;
	int64_t end_ns;
};

static void *tn_mark_thread(void *arg)
{
	struct tn_marking *m = arg;
	m->rc = pgns_chunks_uploaded(&m->node->ns, m->hashes, m->n, m->marked, NULL);
	m->end_ns = ts_now_ns();
	return NULL;
}

struct tn_sweeping {
	struct pt_node *node;
	size_t n;
	int rc;
	int64_t end_ns;
};

static void *tn_sweep_thread(void *arg)
{
	struct tn_sweeping *s = arg;
	uint64_t ids[4];
	s->rc = lease_sweep(&s->node->lease, ids, 4, &s->n);
	s->end_ns = ts_now_ns();
	return NULL;
}

/* The race of L2 through L5 both in-flight tests set up: a transaction of
 * the test's own locks chunk row hash; fn(arg), node a's fenced change, runs
 * in a thread and waits for that row (*op_end_ns stays 0) while a's lease
 * and its grace run out; b's sweep (*s), started then, waits for a's row;
 * then the row is let go. Returns when it was let go (both threads joined). */
static int64_t tn_race_a_sweep(const uint8_t hash[CAT_HASH_LEN], void *(*fn)(void *), void *arg,
			       const int64_t *op_end_ns, const char *what, struct tn_sweeping *s)
{
	PGconn *raw = tn_raw();
	char sql[256], hex[HASH_HEX_LEN + 1];
	hash_to_hex(hash, hex);
	snprintf(sql, sizeof(sql), "SELECT 1 FROM ns_chunks WHERE hash = decode('%s', 'hex') FOR UPDATE",
		 hex);
	tn_raw_sql(raw, "BEGIN");
	tn_raw_sql(raw, sql);
	pthread_t to, ts;
	cr_assert_eq(pthread_create(&to, NULL, fn, arg), 0);
	usleep(3300 * 1000); /* a's lease and its grace (L4) ran out; its change waits */
	cr_assert_eq(*op_end_ns, 0, "the %s waits for the chunk row", what);
	cr_assert_eq(pthread_create(&ts, NULL, tn_sweep_thread, s), 0);
	usleep(500 * 1000);
	cr_assert_eq(s->end_ns, 0, "the sweep waits for a's %s", what);
	int64_t released_ns = ts_now_ns();
	tn_raw_sql(raw, "COMMIT");
	pthread_join(to, NULL);
	pthread_join(ts, NULL);
	PQfinish(raw);
	return released_ns;
}

/* L2 through L5: a's marking holds a's row while it waits (here for a chunk
 * row another transaction has locked); b's sweep, started meanwhile after
 * a's lease ran out, waits for the marking, which lands while a is live. */
Test(pgns, a_sweep_waits_for_a_fenced_marking_in_flight)
{
	struct pt_node a, b;
	pt_join(&a, "a", 1500);
	pt_join(&b, "b", 30000);
	uint8_t h[2][CAT_HASH_LEN];
	tn_claimed(&a, "f", 22, 2, h);
	struct tn_marking m = { &a, (const uint8_t(*)[CAT_HASH_LEN])h, 2, { false }, 1, 0 };
	struct tn_sweeping s = { &b, 0, 1, 0 };
	int64_t released_ns = tn_race_a_sweep(h[1], tn_mark_thread, &m, &m.end_ns, "marking", &s);
	OK(m.rc);
	cr_assert(m.marked[0] && m.marked[1], "the marking landed while a was live");
	cr_assert(tn_uploaded(&b, h[0]) && tn_uploaded(&b, h[1]));
	OK(s.rc);
	cr_assert_eq(s.n, 1, "then a was swept");
	/* both were let go by the COMMIT above; which thread returns first
	 * after that is the scheduler's (the marking landed while a was live,
	 * and a was swept, is the order) */
	cr_assert(m.end_ns >= released_ns && s.end_ns >= released_ns,
		  "the sweep returned %.0f ms before the row was let go",
		  (double)(released_ns - s.end_ns) / 1e6);
	pt_leave(&a);
	pt_leave(&b);
}

/* L2 through L5, the other order: a sweep expiring a (here a transaction
 * of the test's own) holds a's row; a's marking waits for it, finds a
 * expired and marks nothing (-ESTALE). */
Test(pgns, a_fenced_marking_behind_a_sweep_marks_nothing)
{
	struct pt_node a, b;
	pt_join(&a, "a", 30000);
	pt_join(&b, "b", 30000);
	uint8_t h[2][CAT_HASH_LEN];
	tn_claimed(&a, "f", 23, 2, h);
	PGconn *raw = tn_raw();
	char sql[160];
	snprintf(sql, sizeof(sql), "UPDATE ckpt_nodes SET state = 'expired' WHERE id = %" PRIu64,
		 a.lease.node_id);
	tn_raw_sql(raw, "BEGIN");
	tn_raw_sql(raw, sql);
	struct tn_marking m = { &a, (const uint8_t(*)[CAT_HASH_LEN])h, 2, { false }, 1, 0 };
	pthread_t tm;
	cr_assert_eq(pthread_create(&tm, NULL, tn_mark_thread, &m), 0);
	usleep(500 * 1000);
	cr_assert_eq(m.end_ns, 0, "the marking waits for the sweep");
	tn_raw_sql(raw, "COMMIT");
	pthread_join(tm, NULL);
	PQfinish(raw);
	cr_assert_eq(m.rc, -ESTALE, "a swept node's marking: %d", m.rc);
	cr_assert(!m.marked[0] && !m.marked[1]);
	cr_assert(!tn_uploaded(&b, h[0]) && !tn_uploaded(&b, h[1]), "nothing was marked");
	pt_leave(&a);
	pt_leave(&b);
}

/* N8: a file's commit is one statement, one round trip (ten before: BEGIN,
 * lease_fence, six statements, COMMIT); with chunks its node put on BACKING
 * before the commit, four (BEGIN, the publish, their marking, COMMIT). */
Test(pgns, a_files_commit_is_one_round_trip)
{
	struct pt_node a;
	pt_join(&a, "a", 30000);
	struct cat_extent ext[4];
	struct pgns_chunk chunks[4];
	tn_content(31, 0, 4, ext, chunks);
	uint64_t f = tn_file(&a, CAT_ROOT_INO, "f"), g = tn_file(&a, CAT_ROOT_INO, "g");
	OK(pgns_file_commit(&a.ns, f, 4000, 1, ext, 4, chunks, 4)); /* prepares */
	uint64_t t0 = tn_round_trips(&a);
	OK(pgns_file_commit(&a.ns, g, 4000, 2, ext, 4, chunks, 4));
	cr_assert_eq(tn_round_trips(&a) - t0, 1, "a commit: %llu round trips",
		     (unsigned long long)(tn_round_trips(&a) - t0));
	/* an overwrite: two chunks stay, two go, two come */
	struct cat_extent ext2[4];
	struct pgns_chunk chunks2[4];
	tn_content(31, 2, 4, ext2, chunks2);
	t0 = tn_round_trips(&a);
	OK(pgns_file_commit(&a.ns, g, 3000, 3, ext2, 3, chunks2, 4));
	cr_assert_eq(tn_round_trips(&a) - t0, 1, "an overwrite: %llu round trips",
		     (unsigned long long)(tn_round_trips(&a) - t0));
	cr_assert_eq(tn_refs(&a, chunks[0].hash), 1);
	cr_assert_eq(tn_refs(&a, chunks[2].hash), 2);
	cr_assert_eq(tn_refs(&a, chunks2[2].hash), 1);
	cr_assert_eq(tn_refs(&a, chunks2[3].hash), 0, "described, not named: a row at zero");
	struct cat_extent got[4];
	cr_assert_eq(pgns_extents(&a.ns, g, 0, got, 4), 3);
	for (int i = 0; i < 3; i++)
		cr_assert(got[i].off == ext2[i].off && !memcmp(got[i].hash, ext2[i].hash, CAT_HASH_LEN));
	struct cat_inode in;
	OK(pgns_getattr(&a.ns, g, &in));
	cr_assert_eq(in.size, 3000);
	cr_assert_eq(in.mtime_ns, 3);
	pt_check(&a);

	/* with uploads of its own before the commit (N7: claimed first) */
	uint64_t h = tn_file(&a, CAT_ROOT_INO, "h");
	struct cat_extent ext3[2];
	struct pgns_chunk chunks3[2];
	tn_content(32, 0, 2, ext3, chunks3);
	uint8_t up[2][CAT_HASH_LEN];
	bool writer[2] = { true, true }, refused[2] = { true, true };
	struct pgns_claim claims[2];
	for (int i = 0; i < 2; i++)
		memcpy(up[i], chunks3[i].hash, CAT_HASH_LEN);
	OK(pgns_upload_claims(&a.ns, (const uint8_t(*)[CAT_HASH_LEN])up, writer, 2, claims));
	OK(pgns_file_publish(&a.ns, f, 1000, 4, ext3, 1, chunks3, 1,
			     (const uint8_t(*)[CAT_HASH_LEN])up, 1, refused)); /* prepares */
	t0 = tn_round_trips(&a);
	OK(pgns_file_publish(&a.ns, h, 2000, 4, ext3, 2, chunks3, 2,
			     (const uint8_t(*)[CAT_HASH_LEN])up, 2, refused));
	cr_assert_eq(tn_round_trips(&a) - t0, 4, "a commit with markings: %llu round trips",
		     (unsigned long long)(tn_round_trips(&a) - t0));
	cr_assert(!refused[0] && !refused[1]);
	cr_assert(tn_uploaded(&a, up[0]) && tn_uploaded(&a, up[1]));
	pt_check(&a);
	pt_leave(&a);
}

struct tn_committing {
	struct pt_node *node;
	uint64_t ino;
	struct cat_extent ext[2];
	struct pgns_chunk chunks[2];
	int rc;
	int64_t end_ns;
};

static void *tn_commit_thread(void *arg)
{
	struct tn_committing *c = arg;
	c->rc = pgns_file_commit(&c->node->ns, c->ino, 2000, 7, c->ext, 2, c->chunks, 2);
	c->end_ns = ts_now_ns();
	return NULL;
}

/* N8 with L2 through L5: a's commit (one statement) holds a's row while it
 * waits for a chunk row another transaction has locked; b's sweep, started
 * after a's lease ran out, waits for the commit, which lands while a is live. */
Test(pgns, a_sweep_waits_for_a_commit_in_flight)
{
	struct pt_node a, b;
	pt_join(&a, "a", 1500);
	pt_join(&b, "b", 30000);
	struct tn_committing c = { .node = &a, .rc = 1 };
	tn_content(33, 0, 2, c.ext, c.chunks);
	uint64_t f = tn_file(&b, CAT_ROOT_INO, "f");
	OK(pgns_file_commit(&b.ns, f, 2000, 1, c.ext, 2, c.chunks, 2)); /* the rows exist */
	c.ino = tn_file(&a, CAT_ROOT_INO, "g");
	struct tn_sweeping s = { &b, 0, 1, 0 };
	int64_t released_ns = tn_race_a_sweep(c.chunks[1].hash, tn_commit_thread, &c, &c.end_ns,
					       "commit", &s);
	OK(c.rc);
	struct cat_extent got[2];
	cr_assert_eq(pgns_extents(&b.ns, c.ino, 0, got, 2), 2, "the commit landed while a was live");
	cr_assert_eq(tn_refs(&b, c.chunks[1].hash), 2);
	OK(s.rc);
	cr_assert_eq(s.n, 1, "then a was swept");
	cr_assert(c.end_ns >= released_ns && s.end_ns >= released_ns,
		  "the sweep returned %.0f ms before the row was let go",
		  (double)(released_ns - s.end_ns) / 1e6);
	pt_check(&b);
	pt_leave(&a);
	pt_leave(&b);
}

/* The other order: a sweep expiring a (a transaction of the test's own) holds
 * a's row; a's commit waits for it, finds a expired and publishes nothing
 * (-ESTALE, as a swept node's commit always did): no chunk row, no extent,
 * no size. */
Test(pgns, a_commit_behind_a_sweep_publishes_nothing)
{
	struct pt_node a, b;
	pt_join(&a, "a", 30000);
	pt_join(&b, "b", 30000);
	struct tn_committing c = { .node = &a, .rc = 1 };
	tn_content(34, 0, 2, c.ext, c.chunks);
	c.ino = tn_file(&a, CAT_ROOT_INO, "g");
	OK(pgns_file_commit(&a.ns, tn_file(&a, CAT_ROOT_INO, "f"), 0, 0, NULL, 0, NULL, 0));
	PGconn *raw = tn_raw();
	char sql[160];
	snprintf(sql, sizeof(sql), "UPDATE ckpt_nodes SET state = 'expired' WHERE id = %" PRIu64,
		 a.lease.node_id);
	tn_raw_sql(raw, "BEGIN");
	tn_raw_sql(raw, sql);
	pthread_t tc;
	cr_assert_eq(pthread_create(&tc, NULL, tn_commit_thread, &c), 0);
	usleep(500 * 1000);
	cr_assert_eq(c.end_ns, 0, "the commit waits for the sweep");
	tn_raw_sql(raw, "COMMIT");
	pthread_join(tc, NULL);
	PQfinish(raw);
	cr_assert_eq(c.rc, -ESTALE, "a swept node's commit: %d", c.rc);
	struct pgns_chunk_row row;
	FAILS(pgns_chunk_get(&b.ns, c.chunks[0].hash, &row), ENOENT);
	struct cat_extent got[2];
	cr_assert_eq(pgns_extents(&b.ns, c.ino, 0, got, 2), 0, "nothing was published");
	struct cat_inode in;
	OK(pgns_getattr(&b.ns, c.ino, &in));
	cr_assert_eq(in.size, 0);
	pt_check(&b);
	pt_leave(&a);
	pt_leave(&b);
}

/* N3 and pg.h P6: a chunk row that appears after the commit's statement began
 * (here inserted by a transaction of the test's own, already reclaiming, as
 * another node's commit and a reclaim could leave it) is not revived; the
 * statement's insert finds it and the whole commit undoes itself (-EBUSY). */
Test(pgns, a_commit_that_meets_a_reclaiming_row_late_changes_nothing)
{
	struct pt_node a;
	pt_join(&a, "a", 30000);
	struct tn_committing c = { .node = &a, .rc = 1 };
	tn_content(35, 0, 2, c.ext, c.chunks);
	c.ino = tn_file(&a, CAT_ROOT_INO, "g");
	OK(pgns_file_commit(&a.ns, tn_file(&a, CAT_ROOT_INO, "f"), 0, 0, NULL, 0, NULL, 0));
	PGconn *raw = tn_raw();
	char sql[320], hex[HASH_HEX_LEN + 1];
	hash_to_hex(c.chunks[1].hash, hex);
	snprintf(sql, sizeof(sql),
		 "INSERT INTO ns_chunks(hash, plain_len, codec, stored_len, refcount, state, reclaimer)"
		 " VALUES (decode('%s', 'hex'), 1000, 2, 600, 0, 'reclaiming', 999)", hex);
	tn_raw_sql(raw, "BEGIN");
	tn_raw_sql(raw, sql);
	pthread_t tc;
	cr_assert_eq(pthread_create(&tc, NULL, tn_commit_thread, &c), 0);
	usleep(500 * 1000);
	cr_assert_eq(c.end_ns, 0, "the commit's insert waits for the row's transaction");
	tn_raw_sql(raw, "COMMIT");
	pthread_join(tc, NULL);
	PQfinish(raw);
	cr_assert_eq(c.rc, -EBUSY, "a commit naming a reclaiming chunk: %d", c.rc);
	struct pgns_chunk_row row;
	FAILS(pgns_chunk_get(&a.ns, c.chunks[0].hash, &row), ENOENT);
	OK(pgns_chunk_get(&a.ns, c.chunks[1].hash, &row));
	cr_assert_str_eq(row.state, "reclaiming");
	cr_assert_eq(row.refcount, 0, "not revived");
	struct cat_extent got[2];
	cr_assert_eq(pgns_extents(&a.ns, c.ino, 0, got, 2), 0, "nothing was published");
	pt_leave(&a);
}

Test(pgns, content_from_two_nodes_is_stored_once_and_counted_per_extent)
{
	struct pt_node a, b;
	pt_join(&a, "a", 30000);
	pt_join(&b, "b", 30000);
	struct cat_extent ext[6], got[8];
	struct pgns_chunk chunks[6];
	/* HSDP-style replicas: both nodes write the same shard */
	tn_content(7, 0, 6, ext, chunks);
	uint64_t fa = tn_file(&a, CAT_ROOT_INO, "shard-a"), fb = tn_file(&b, CAT_ROOT_INO, "shard-b");
	OK(pgns_file_commit(&a.ns, fa, 6000, 123, ext, 6, chunks, 6));
	OK(pgns_file_commit(&b.ns, fb, 6000, 456, ext, 6, chunks, 6));
	pt_check(&a);
	for (int i = 0; i < 6; i++)
		cr_assert_eq(tn_refs(&a, chunks[i].hash), 2);
	struct pgns_chunk_row row;
	OK(pgns_chunk_get(&b.ns, chunks[0].hash, &row));
	cr_assert_eq(row.holder, a.lease.node_id, "the first node to publish holds the chunk");
	cr_assert(!row.uploaded);
	OK(pgns_chunk_uploaded(&a.ns, chunks[0].hash));
	OK(pgns_chunk_get(&b.ns, chunks[0].hash, &row));
	cr_assert(row.uploaded);

	/* the other node reads what a published, extent for extent */
	int n = pgns_extents(&b.ns, fa, 0, got, 8);
	cr_assert_eq(n, 6);
	for (int i = 0; i < 6; i++) {
		cr_assert_eq(got[i].off, ext[i].off);
		cr_assert_eq(got[i].len, 1000);
		cr_assert_eq(got[i].chunk_len, 1000);
		cr_assert_arr_eq(got[i].hash, ext[i].hash, CAT_HASH_LEN);
	}
	cr_assert_eq(pgns_extents(&b.ns, fa, 4500, got, 8), 2, "extents ending after 4500");
	struct cat_inode in;
	OK(pgns_getattr(&b.ns, fa, &in));
	cr_assert_eq(in.size, 6000);
	cr_assert_eq(in.mtime_ns, 123);

	/* overwrite: the last 3 chunks change; the old ones drop to one reference */
	struct cat_extent ext2[6];
	struct pgns_chunk chunks2[6];
	tn_content(7, 0, 6, ext2, chunks2);
	tn_content(8, 0, 3, ext2 + 3, chunks2 + 3);
	for (int i = 3; i < 6; i++)
		ext2[i].off = (uint64_t)i * 1000;
	OK(pgns_file_commit(&a.ns, fa, 6000, 124, ext2, 6, chunks2, 6));
	pt_check(&b);
	cr_assert_eq(tn_refs(&a, chunks[0].hash), 2);
	cr_assert_eq(tn_refs(&a, chunks[5].hash), 1);
	cr_assert_eq(tn_refs(&a, chunks2[5].hash), 1);

	/* a description missing for a hash the extents name is refused */
	FAILS(pgns_file_commit(&a.ns, fa, 6000, 125, ext2, 6, chunks2, 5), EINVAL);
	FAILS(pgns_file_commit(&a.ns, CAT_ROOT_INO, 0, 0, NULL, 0, NULL, 0), EISDIR);
	pt_leave(&a);
	pt_leave(&b);
}

/* Chunks nobody references any more: a file on them is published, unlinked
 * and released by n. */
static void tn_orphans(struct pt_node *n, uint8_t fill, size_t count, struct cat_extent *ext,
		       struct pgns_chunk *chunks)
{
	tn_content(fill, 0, count, ext, chunks);
	uint64_t f = tn_file(n, CAT_ROOT_INO, "orphan");
	OK(pgns_file_commit(&n->ns, f, count * 1000, 1, ext, count, chunks, count));
	OK(pgns_unlink(&n->ns, CAT_ROOT_INO, "orphan", NULL));
	OK(pgns_inode_release(&n->ns, f));
}

/* A reclaim's begin on n as the duty makes it: the free chunks stamped
 * (N12), then a batch with every stamp before the horizon. */
static int tn_reclaim_begin(struct pt_node *n, struct pgns_reclaim *rec, size_t max, size_t *got)
{
	int64_t horizon = 0;
	struct pgns_ended_gen gens[1];
	size_t ngens = 0;
	int rc = pgns_reclaim_stamp(&n->ns, &horizon, gens, 1, &ngens);
	return rc ? rc : pgns_reclaim_begin(&n->ns, INT64_MAX, rec, max, got);
}

Test(pgns, reclaim_takes_the_chunks_at_zero_and_never_revives_one)
{
	struct pt_node a, b;
	pt_join(&a, "a", 30000);
	pt_join(&b, "b", 30000);
	struct cat_extent ext[4];
	struct pgns_chunk chunks[4];
	tn_orphans(&a, 9, 4, ext, chunks);
	pt_check(&a);
	cr_assert_eq(tn_refs(&a, chunks[0].hash), 0);

	struct pgns_reclaim rec[8];
	size_t n = 0;
	OK(tn_reclaim_begin(&a, rec, 8, &n));
	cr_assert_eq(n, 4);
	struct pgns_chunk_row row;
	OK(pgns_chunk_get(&b.ns, chunks[2].hash, &row));
	cr_assert_str_eq(row.state, "reclaiming");

	/* b writes the same bytes while a removes the objects: no revival (N3) */
	uint64_t g = tn_file(&b, CAT_ROOT_INO, "new");
	FAILS(pgns_file_commit(&b.ns, g, 4000, 2, ext, 4, chunks, 4), EBUSY);
	cr_assert_eq(pgns_extents(&b.ns, g, 0, ext, 4), 0, "the failed commit changed nothing");
	tn_content(9, 0, 4, ext, chunks);
	pt_check(&b);

	OK(pgns_reclaim_end(&a.ns, rec, n));
	FAILS(pgns_chunk_get(&b.ns, chunks[2].hash, &row), ENOENT);
	OK(pgns_file_commit(&b.ns, g, 4000, 2, ext, 4, chunks, 4));
	OK(pgns_chunk_get(&a.ns, chunks[2].hash, &row));
	cr_assert_str_eq(row.state, "live");
	cr_assert_eq(row.holder, b.lease.node_id, "a new chunk, held by the node that wrote it");
	cr_assert(!row.uploaded, "its node uploads its own copy");
	cr_assert_eq(row.refcount, 1);
	OK(tn_reclaim_begin(&a, rec, 8, &n));
	cr_assert_eq(n, 0, "nothing at zero any more");
	pt_check(&a);
	pt_leave(&a);
	pt_leave(&b);
}

Test(pgns, a_reclaim_left_by_a_node_that_died_is_finished_by_the_next)
{
	struct pt_node a, b;
	pt_join(&a, "a", 1500);
	pt_join(&b, "b", 30000);
	struct cat_extent ext[2];
	struct pgns_chunk chunks[2];
	tn_orphans(&b, 10, 2, ext, chunks);
	struct pgns_reclaim rec[4];
	size_t n = 0;
	OK(tn_reclaim_begin(&a, rec, 4, &n));
	cr_assert_eq(n, 2);
	OK(tn_reclaim_begin(&b, rec, 4, &n));
	cr_assert_eq(n, 0, "a live reclaimer's chunks are its own");
	usleep(3300 * 1000); /* a dies mid-reclaim: its lease runs out, and its grace (L4) */
	uint64_t ids[2];
	OK(lease_sweep(&b.lease, ids, 2, &n));
	cr_assert_eq(n, 1);
	OK(tn_reclaim_begin(&b, rec, 4, &n));
	cr_assert_eq(n, 0, "swept, but its lease ran out less than two terms ago (lease.h L8)");
	usleep(1500 * 1000);
	OK(tn_reclaim_begin(&b, rec, 4, &n));
	cr_assert_eq(n, 2, "the next reclaimer takes over what a left");
	FAILS(pgns_reclaim_end(&a.ns, rec, n), ESTALE);
	OK(pgns_reclaim_end(&b.ns, rec, n));
	struct pgns_chunk_row row;
	FAILS(pgns_chunk_get(&b.ns, chunks[0].hash, &row), ENOENT);
	pt_leave(&a);
	pt_leave(&b);
}

Test(pgns, a_swept_node_changes_nothing)
{
	struct pt_node a, b;
	pt_join(&a, "a", 1500);
	pt_join(&b, "b", 30000);
	uint64_t f = tn_file(&a, CAT_ROOT_INO, "f");
	uint8_t h[1][CAT_HASH_LEN];
	tn_claimed(&a, "claimed", 24, 1, h);
	usleep(1800 * 1000);
	struct cat_inode in;
	/* ran out but not swept: nothing was decided about a yet (lease.h L1) */
	OK(pgns_create(&a.ns, CAT_ROOT_INO, "g0", S_IFREG | 0644, 0, 0, 0, NULL, &in));
	usleep(1500 * 1000);
	uint64_t ids[2];
	size_t n = 0;
	OK(lease_sweep(&b.lease, ids, 2, &n));
	cr_assert_eq(n, 1);
	struct cat_extent ext[1];
	struct pgns_chunk chunks[1];
	tn_content(11, 0, 1, ext, chunks);
	FAILS(pgns_create(&a.ns, CAT_ROOT_INO, "g", S_IFREG | 0644, 0, 0, 0, NULL, &in), ESTALE);
	FAILS(pgns_file_commit(&a.ns, f, 1000, 1, ext, 1, chunks, 1), ESTALE);
	FAILS(pgns_unlink(&a.ns, CAT_ROOT_INO, "f", NULL), ESTALE);
	/* the one-statement changes that carry their fence (lease.h L5) */
	bool marked = true;
	FAILS(pgns_chunks_uploaded(&a.ns, (const uint8_t(*)[CAT_HASH_LEN])h, 1, &marked, NULL), ESTALE);
	cr_assert(!marked && !tn_uploaded(&b, h[0]), "a swept node marks nothing");
	FAILS(pgns_chunk_uploaded(&a.ns, h[0]), ESTALE);
	cr_assert(!tn_uploaded(&b, h[0]));
	FAILS(pgns_unpin(&a.ns, f), ESTALE);
	FAILS(pgns_unpin_lost(&a.ns), ESTALE);
	size_t nrec = 9;
	struct pgns_reclaim rec[2];
	FAILS(pgns_reclaim_begin(&a.ns, INT64_MAX, rec, 2, &nrec), ESTALE);
	cr_assert_eq(nrec, 0);
	OK(pgns_lookup(&a.ns, CAT_ROOT_INO, "f", &in)); /* reading is still allowed */
	cr_assert_eq(in.size, 0);
	pt_leave(&a);
	pt_leave(&b);
}

/* ---- two nodes at once ---- */

struct tn_worker {
	struct pt_node *node;
	int id;
	int rc;
};

static void *tn_work(void *arg)
{
	struct tn_worker *w = arg;
	struct pgns *ns = &w->node->ns;
	for (int i = 0; i < 40 && w->rc == 0; i++) {
		char name[32];
		snprintf(name, sizeof(name), "w%d-%d", w->id, i);
		struct cat_inode in;
		w->rc = pgns_create(ns, CAT_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, NULL, &in);
		/* 8 chunks from a pool of 12 shared by both workers, in an order that differs */
		struct cat_extent ext[8];
		struct pgns_chunk chunks[8];
		for (int k = 0; k < 8; k++) {
			int pick = (i * 5 + k * (w->id ? 7 : 5)) % 12;
			ts_hash(chunks[k].hash, 12, pick);
			chunks[k].plain_len = 1000;
			chunks[k].stored_len = 500;
			chunks[k].codec = 2;
			ext[k] = (struct cat_extent){ .off = (uint64_t)k * 1000, .len = 1000,
						      .chunk_len = 1000 };
			memcpy(ext[k].hash, chunks[k].hash, CAT_HASH_LEN);
		}
		/* the same hash may come twice in a file: describe each once */
		struct pgns_chunk uniq[8];
		size_t nu = 0;
		for (int k = 0; k < 8; k++) {
			bool seen = false;
			for (size_t j = 0; j < nu && !seen; j++)
				seen = !memcmp(uniq[j].hash, chunks[k].hash, CAT_HASH_LEN);
			if (!seen)
				uniq[nu++] = chunks[k];
		}
		if (w->rc == 0)
			w->rc = pgns_file_commit(ns, in.ino, 8000, i, ext, 8, uniq, nu);
		if (w->rc == 0 && i % 3 == 0) {
			w->rc = pgns_unlink(ns, CAT_ROOT_INO, name, NULL);
			if (w->rc == 0)
				w->rc = pgns_inode_release(ns, in.ino);
		}
	}
	return NULL;
}

Test(pgns, two_nodes_at_once_keep_the_counts)
{
	struct pt_node a, b;
	pt_join(&a, "a", 30000);
	pt_join(&b, "b", 30000);
	struct tn_worker wa = { &a, 0, 0 }, wb = { &b, 1, 0 };
	pthread_t ta, tb;
	cr_assert_eq(pthread_create(&ta, NULL, tn_work, &wa), 0);
	cr_assert_eq(pthread_create(&tb, NULL, tn_work, &wb), 0);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	cr_assert_eq(wa.rc, 0, "node a: %s", strerror(-wa.rc));
	cr_assert_eq(wb.rc, 0, "node b: %s", strerror(-wb.rc));
	pt_check(&a);
	struct pg_stats st;
	pg_get_stats(a.pg, &st);
	cr_log_info("node a: %" PRIu64 " transactions, %" PRIu64 " retried, %" PRIu64 " round trips",
		    st.txns, st.retries, st.round_trips);
	pt_leave(&a);
	pt_leave(&b);
}

/* ---- rename, rmdir, link, setattr, symlinks, truncate ---- */

static uint64_t tn_dir(struct pt_node *n, uint64_t parent, const char *name)
{
	struct cat_inode in;
	OK(pgns_create(&n->ns, parent, name, S_IFDIR | 0755, 0, 0, 0, NULL, &in));
	return in.ino;
}

static uint32_t tn_nlink(struct pt_node *n, uint64_t ino)
{
	struct cat_inode in;
	OK(pgns_getattr(&n->ns, ino, &in));
	return in.nlink;
}

Test(pgns, rename_follows_posix)
{
	struct pt_node a, b;
	pt_join(&a, "a", 30000);
	pt_join(&b, "b", 30000);
	uint64_t d1 = tn_dir(&a, CAT_ROOT_INO, "d1"), d2 = tn_dir(&a, CAT_ROOT_INO, "d2");
	uint64_t sub = tn_dir(&a, d1, "sub");
	uint64_t f = tn_file(&a, d1, "f"), g = tn_file(&a, d2, "g");
	uint64_t replaced = 99;
	struct cat_inode in;

	/* a file over a file, across directories, seen by the other node */
	OK(pgns_rename(&b.ns, d1, "f", d2, "g", 0, &replaced));
	cr_assert_eq(replaced, g);
	OK(pgns_lookup(&a.ns, d2, "g", &in));
	cr_assert_eq(in.ino, f);
	FAILS(pgns_lookup(&a.ns, d1, "f", &in), ENOENT);
	cr_assert_eq(tn_nlink(&a, g), 0, "the replaced file is unlinked");

	/* a directory never into its own subtree; moving it fixes the parents' nlink */
	FAILS(pgns_rename(&a.ns, CAT_ROOT_INO, "d1", sub, "x", 0, NULL), EINVAL);
	FAILS(pgns_rename(&a.ns, CAT_ROOT_INO, "d1", d1, "x", 0, NULL), EINVAL);
	cr_assert_eq(tn_nlink(&a, d1), 3);
	OK(pgns_rename(&a.ns, d1, "sub", d2, "sub2", 0, NULL));
	cr_assert_eq(tn_nlink(&a, d1), 2);
	cr_assert_eq(tn_nlink(&a, d2), 3);

	/* type mismatches, a non-empty target, NOREPLACE, EXCHANGE */
	tn_file(&a, d1, "h");
	FAILS(pgns_rename(&a.ns, d1, "h", d2, "sub2", 0, NULL), EISDIR);
	FAILS(pgns_rename(&a.ns, d2, "sub2", d1, "h", 0, NULL), ENOTDIR);
	tn_file(&a, sub, "inside");
	uint64_t empty = tn_dir(&a, d1, "empty");
	FAILS(pgns_rename(&a.ns, d1, "empty", d2, "sub2", 0, NULL), ENOTEMPTY);
	FAILS(pgns_rename(&a.ns, d1, "h", d2, "g", CAT_RENAME_NOREPLACE, NULL), EEXIST);
	OK(pgns_rename(&a.ns, d1, "h", d2, "sub2", CAT_RENAME_EXCHANGE, NULL));
	OK(pgns_lookup(&b.ns, d1, "h", &in));
	cr_assert_eq(in.ino, sub, "exchanged");
	cr_assert_eq(tn_nlink(&a, d1), 4, "d1 gained a directory (sub) next to empty");
	cr_assert_eq(tn_nlink(&a, d2), 2);
	FAILS(pgns_rename(&a.ns, d1, "nope", d2, "g", CAT_RENAME_EXCHANGE, NULL), ENOENT);
	FAILS(pgns_rename(&a.ns, d1, "h", d2, "g", CAT_RENAME_EXCHANGE | CAT_RENAME_NOREPLACE, NULL),
	      EINVAL);

	/* rmdir */
	FAILS(pgns_rmdir(&a.ns, d1, "h", NULL), ENOTEMPTY);
	FAILS(pgns_rmdir(&a.ns, d2, "g", NULL), ENOTDIR);
	uint64_t gone = 0;
	OK(pgns_rmdir(&b.ns, d1, "empty", &gone));
	cr_assert_eq(gone, empty);
	cr_assert_eq(tn_nlink(&a, empty), 0);
	cr_assert_eq(tn_nlink(&a, d1), 3);
	pt_leave(&a);
	pt_leave(&b);
}

Test(pgns, link_setattr_symlink_truncate)
{
	struct pt_node a;
	pt_join(&a, "a", 30000);
	uint64_t d = tn_dir(&a, CAT_ROOT_INO, "d");
	uint64_t f = tn_file(&a, CAT_ROOT_INO, "f");
	struct cat_inode in;
	OK(pgns_link(&a.ns, f, d, "f2", &in));
	cr_assert_eq(in.nlink, 2);
	FAILS(pgns_link(&a.ns, d, CAT_ROOT_INO, "d2", &in), EPERM);
	FAILS(pgns_link(&a.ns, f, d, "f2", &in), EEXIST);

	struct cat_inode want = { .mode = S_IFDIR | 04711, .uid = 7, .mtime_ns = 42 };
	OK(pgns_setattr(&a.ns, f, CAT_SET_MODE | CAT_SET_UID | CAT_SET_MTIME, &want, &in));
	cr_assert_eq(in.mode, S_IFREG | 04711, "the type bits stay");
	cr_assert_eq(in.uid, 7);
	cr_assert_eq(in.mtime_ns, 42);
	cr_assert(in.ctime_ns > 42);

	OK(pgns_create(&a.ns, CAT_ROOT_INO, "l", S_IFLNK | 0777, 0, 0, 0, "../target/x", &in));
	cr_assert_eq(in.size, 11);
	char buf[64];
	OK(pgns_readlink(&a.ns, in.ino, buf, sizeof(buf)));
	cr_assert_str_eq(buf, "../target/x");
	FAILS(pgns_readlink(&a.ns, f, buf, sizeof(buf)), EINVAL);

	/* truncate drops the references of what it cuts off, keeps a straddling one */
	struct cat_extent ext[4];
	struct pgns_chunk chunks[4];
	tn_content(13, 0, 4, ext, chunks);
	OK(pgns_file_commit(&a.ns, f, 4000, 1, ext, 4, chunks, 4));
	OK(pgns_file_truncate(&a.ns, f, 1500));
	struct cat_extent got[4];
	cr_assert_eq(pgns_extents(&a.ns, f, 0, got, 4), 2);
	cr_assert_eq(got[1].len, 500);
	cr_assert_eq(tn_refs(&a, chunks[1].hash), 1);
	cr_assert_eq(tn_refs(&a, chunks[2].hash), 0);
	OK(pgns_getattr(&a.ns, f, &in));
	cr_assert_eq(in.size, 1500);
	FAILS(pgns_file_truncate(&a.ns, d, 0), EISDIR);
	pt_check(&a);
	pt_leave(&a);
}

/* Renames between two directories in both directions from two nodes at once:
 * the directories are locked in inode order, so neither waits on the other
 * for ever, and every file ends in exactly one of them. */
struct tn_mover {
	struct pt_node *node;
	uint64_t from, to;
	int rc;
};

static void *tn_move(void *arg)
{
	struct tn_mover *m = arg;
	for (int i = 0; i < 30 && m->rc == 0; i++) {
		char name[32];
		snprintf(name, sizeof(name), "m%lu-%d", (unsigned long)m->from, i);
		m->rc = pgns_rename(&m->node->ns, m->from, name, m->to, name, 0, NULL);
	}
	return NULL;
}

Test(pgns, crossing_renames_from_two_nodes)
{
	struct pt_node a, b;
	pt_join(&a, "a", 30000);
	pt_join(&b, "b", 30000);
	uint64_t x = tn_dir(&a, CAT_ROOT_INO, "x"), y = tn_dir(&a, CAT_ROOT_INO, "y");
	for (int i = 0; i < 30; i++) {
		char name[32];
		snprintf(name, sizeof(name), "m%lu-%d", (unsigned long)x, i);
		tn_file(&a, x, name);
		snprintf(name, sizeof(name), "m%lu-%d", (unsigned long)y, i);
		tn_file(&a, y, name);
	}
	struct tn_mover ma = { &a, x, y, 0 }, mb = { &b, y, x, 0 };
	pthread_t ta, tb;
	cr_assert_eq(pthread_create(&ta, NULL, tn_move, &ma), 0);
	cr_assert_eq(pthread_create(&tb, NULL, tn_move, &mb), 0);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	cr_assert_eq(ma.rc, 0, "a: %s", strerror(-ma.rc));
	cr_assert_eq(mb.rc, 0, "b: %s", strerror(-mb.rc));
	int in_x = 0, in_y = 0;
	for (int i = 0; i < 30; i++) {
		char name[32];
		struct cat_inode in;
		snprintf(name, sizeof(name), "m%lu-%d", (unsigned long)y, i);
		in_x += pgns_lookup(&a.ns, x, name, &in) == 0;
		snprintf(name, sizeof(name), "m%lu-%d", (unsigned long)x, i);
		in_y += pgns_lookup(&a.ns, y, name, &in) == 0;
	}
	cr_assert_eq(in_x, 30);
	cr_assert_eq(in_y, 30);
	pt_leave(&a);
	pt_leave(&b);
}

/* ---- the reads per FUSE call (pgns.h N11, ns.h invariant 5) ---- */

/* pgns.h N11: a lookup is one round trip, a hit or any miss (a miss was
 * two: the entry, then the parent to tell -ENOTDIR and -ENOENT apart);
 * getattr with the generation is one, and so is a create that says which
 * generation the new inode is in. */
Test(pgns, a_lookup_hit_or_miss_is_one_round_trip)
{
	struct pt_node a;
	pt_join(&a, "a", 30000);
	struct cat_inode dir, gone, got;
	OK(pgns_create(&a.ns, CAT_ROOT_INO, "run", S_IFDIR | 0755, 0, 0, 0, NULL, &dir));
	OK(pgns_create(&a.ns, CAT_ROOT_INO, "old", S_IFDIR | 0755, 0, 0, 0, NULL, &gone));
	uint64_t f = tn_file(&a, dir.ino, "f");
	uint64_t removed = 0;
	OK(pgns_rmdir(&a.ns, CAT_ROOT_INO, "old", &removed));
	cr_assert_eq(removed, gone.ino);
	OK(pgns_lookup(&a.ns, dir.ino, "f", &got)); /* prepares */
	struct {
		uint64_t parent;
		const char *name;
		int rc;
	} cases[] = {
		{ dir.ino, "f", 0 },         /* a hit, with the file's attributes */
		{ dir.ino, "none", -ENOENT }, /* no such name */
		{ f, "x", -ENOTDIR },          /* the parent is a file */
		{ 999999, "x", -ENOENT },      /* no such parent */
		{ gone.ino, "x", -ENOENT },    /* a directory removed */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t t0 = tn_round_trips(&a);
		memset(&got, 0, sizeof(got));
		int rc = pgns_lookup(&a.ns, cases[i].parent, cases[i].name, &got);
		cr_assert_eq(rc, cases[i].rc, "lookup %zu: %d, not %d", i, rc, cases[i].rc);
		cr_assert_eq(tn_round_trips(&a) - t0, 1, "lookup %zu: %llu round trips", i,
			     (unsigned long long)(tn_round_trips(&a) - t0));
	}
	OK(pgns_lookup(&a.ns, dir.ino, "f", &got));
	cr_assert_eq(got.ino, f);
	cr_assert(S_ISREG(got.mode) && got.nlink == 1 && got.uid == 1000);

	/* a generation root, a file made in it: its generation with its create
	 * and with its attributes, one round trip each */
	struct cat_gen_spec spec = { "step-1", 1 };
	struct cat_inode root;
	uint64_t gen = 0, got_gen = 7;
	OK(pggen_create_root(&a.ns, dir.ino, &spec, S_IFDIR | 0755, 0, 0, &root, &gen));
	cr_assert_gt(gen, 0);
	OK(pgns_getattr_gen(&a.ns, dir.ino, &got, &got_gen)); /* prepares */
	cr_assert_eq(got_gen, 0, "run/ is in no generation");
	uint64_t t0 = tn_round_trips(&a);
	OK(pgns_getattr_gen(&a.ns, root.ino, &got, &got_gen));
	cr_assert_eq(tn_round_trips(&a) - t0, 1);
	cr_assert_eq(got_gen, gen);
	cr_assert_eq(got.ino, root.ino);
	cr_assert(S_ISDIR(got.mode));
	FAILS(pgns_getattr_gen(&a.ns, 999999, &got, &got_gen), ENOENT);
	cr_assert_eq(got_gen, 0);
	OK(pgns_create_gen(&a.ns, dir.ino, "g", S_IFREG | 0644, 0, 0, 0, NULL, &got, &got_gen));
	cr_assert_eq(got_gen, 0);
	t0 = tn_round_trips(&a);
	OK(pgns_create_gen(&a.ns, root.ino, "shard0", S_IFREG | 0644, 0, 0, 0, NULL, &got,
			   &got_gen));
	cr_assert_eq(tn_round_trips(&a) - t0, 1, "a create with its generation: %llu round trips",
		     (unsigned long long)(tn_round_trips(&a) - t0));
	cr_assert_eq(got_gen, gen, "the new file inherits its parent's generation");
	uint64_t of = 0;
	OK(pggen_gen_of(&a.ns, got.ino, &of));
	cr_assert_eq(of, gen);
	pt_check(&a);
	pt_leave(&a);
}

/* A namespace (fs/ns.c) over a node's shared catalog, as the daemon builds
 * it, without a writer's chunk put (no file data is written here) and with
 * a reader that reads nothing. */
struct tn_ns {
	struct pt_cat c;
	struct node_table *nodes;
	struct gen_policy *g;
	struct ns *ns;
};

static int tn_map(void *arg, uint64_t ino, uint64_t off, size_t len, struct reader_map *m)
{
	return -EIO;
}

static void tn_unmap(void *arg, struct reader_map *m)
{
}

static int tn_read(void *arg, uint64_t ino, uint64_t off, size_t len, void *buf)
{
	return -EIO;
}

static int tn_proof_read(void *arg, uint64_t ino, uint64_t off, size_t len, void *buf)
{
	return -EIO;
}

static void tn_ns_open(struct tn_ns *t, const char *name)
{
	memset(t, 0, sizeof(*t));
	pt_cat_open(&t->c, name, 30000, NULL, NULL);
	OK(node_table_new(t->c.cat, &t->nodes));
	struct gen_options o = { .quiet_s = 60 }; /* no thread: rules run in the caller */
	struct gen_deps gd = { .cat = t->c.cat, .nodes = t->nodes, .read = tn_proof_read };
	OK(gen_policy_new(&gd, &o, &t->g));
	struct ns_deps d = { .cat = t->c.cat, .nodes = t->nodes, .gen = t->g,
			     .reader = { tn_map, tn_unmap, tn_read, NULL } };
	struct ns_config cfg = { .sync_backing = false };
	OK(ns_new(&d, &cfg, &t->ns));
}

static void tn_ns_close(struct tn_ns *t)
{
	ns_free(t->ns);
	gen_policy_shutdown(t->g);
	gen_policy_free(t->g);
	node_table_free(t->nodes);
	pt_cat_close(&t->c);
}

static uint64_t tn_ns_round_trips(struct tn_ns *t)
{
	struct pg_stats st;
	pg_get_stats(cat_shared_ns(t->c.cat)->pg, &st);
	return st.round_trips;
}

static void tn_ns_close_file(struct tn_ns *t, struct ns_file *f)
{
	int rc = ns_release(t->ns, f);
	OK(rc);
	ns_release_done(t->ns, f, rc);
}

/* ns.h invariant 5, on a node of a shared catalog: the kernel's LOOKUP of a
 * name is one round trip (two before: the entry's attributes were read
 * again); a create of a file opened for writing is three — the parent's
 * attributes with its generation, the create that says the new file's
 * generation, the writer's registration (six before: the parent's
 * generation, its attributes, the create, the new file's generation read
 * after it, and again at its open) — and an open for writing two (three).
 * Outside any generation, so that the generation rules read nothing. */
Test(pgns, the_namespaces_lookup_create_and_open_read_once)
{
	struct tn_ns t;
	tn_ns_open(&t, "a");
	const struct ns_cred cred = { .uid = 0, .gid = 0, .pid = 0 };
	struct cat_inode dir, in, got;
	struct ns_file *f;
	OK(ns_make(t.ns, &cred, CAT_ROOT_INO, "data", S_IFDIR | 0755, 0, NULL, &dir));
	OK(ns_create(t.ns, &cred, dir.ino, "warm", 0644, O_WRONLY | O_CREAT, &f, &in)); /* prepares */
	tn_ns_close_file(&t, f);
	OK(ns_lookup(t.ns, dir.ino, "warm", &got));
	OK(ns_open(t.ns, &cred, in.ino, O_WRONLY, &f, &got));
	tn_ns_close_file(&t, f);
	OK(ns_open(t.ns, &cred, in.ino, O_RDONLY, &f, &got));
	tn_ns_close_file(&t, f);

	uint64_t t0 = tn_ns_round_trips(&t);
	OK(ns_lookup(t.ns, dir.ino, "warm", &got));
	cr_assert_eq(tn_ns_round_trips(&t) - t0, 1, "a lookup: %llu round trips",
		     (unsigned long long)(tn_ns_round_trips(&t) - t0));
	cr_assert_eq(got.ino, in.ino);
	cr_assert(S_ISREG(got.mode));
	t0 = tn_ns_round_trips(&t);
	FAILS(ns_lookup(t.ns, dir.ino, "none", &got), ENOENT);
	cr_assert_eq(tn_ns_round_trips(&t) - t0, 1, "a lookup's miss: %llu round trips",
		     (unsigned long long)(tn_ns_round_trips(&t) - t0));

	t0 = tn_ns_round_trips(&t);
	OK(ns_create(t.ns, &cred, dir.ino, "shard0", 0644, O_WRONLY | O_CREAT, &f, &in));
	cr_assert_eq(tn_ns_round_trips(&t) - t0, 3, "a create opened for writing: %llu round trips",
		     (unsigned long long)(tn_ns_round_trips(&t) - t0));
	tn_ns_close_file(&t, f);

	t0 = tn_ns_round_trips(&t);
	OK(ns_open(t.ns, &cred, in.ino, O_WRONLY, &f, &got));
	cr_assert_eq(tn_ns_round_trips(&t) - t0, 2, "an open for writing: %llu round trips",
		     (unsigned long long)(tn_ns_round_trips(&t) - t0));
	cr_assert_eq(got.ino, in.ino);
	tn_ns_close_file(&t, f);
	t0 = tn_ns_round_trips(&t);
	OK(ns_open(t.ns, &cred, in.ino, O_RDONLY, &f, &got));
	/* its attributes, and (the node's first handle) its ns_open row
	 * (pgns.h N14); a second handle adds none, and the last close is one */
	cr_assert_eq(tn_ns_round_trips(&t) - t0, 2, "an open for reading: %llu round trips",
		     (unsigned long long)(tn_ns_round_trips(&t) - t0));
	struct ns_file *f2;
	t0 = tn_ns_round_trips(&t);
	OK(ns_open(t.ns, &cred, in.ino, O_RDONLY, &f2, &got));
	cr_assert_eq(tn_ns_round_trips(&t) - t0, 1, "a second open for reading: %llu round trips",
		     (unsigned long long)(tn_ns_round_trips(&t) - t0));
	tn_ns_close_file(&t, f2);
	tn_ns_close_file(&t, f);

	/* a chmod: the attributes with the generation, then the change's
	 * transaction (BEGIN, fence, lock, update, the row after, COMMIT), whose
	 * answer is the reply (nine before: the generation, the attributes, the
	 * change, the attributes again) */
	struct ns_setattr set = { .what = CAT_SET_MODE, .val = { .mode = 0600 } };
	OK(ns_setattr(t.ns, &cred, in.ino, &set, NULL, &got)); /* prepares */
	set.val.mode = 0640;
	t0 = tn_ns_round_trips(&t);
	OK(ns_setattr(t.ns, &cred, in.ino, &set, NULL, &got));
	cr_assert_eq(tn_ns_round_trips(&t) - t0, 7, "a chmod: %llu round trips",
		     (unsigned long long)(tn_ns_round_trips(&t) - t0));
	cr_assert_eq(got.mode, S_IFREG | 0640);
	cr_assert_eq(got.ino, in.ino);
	OK(ns_getattr(t.ns, in.ino, &got));
	cr_assert_eq(got.mode, S_IFREG | 0640);
	tn_ns_close(&t);
}

/* The generation a create says is the one its writer counts in: a file
 * made in a generation root opened for writing holds that generation's
 * commit (-EBUSY) until its close, as when the open read it again. */
Test(pgns, a_created_files_writer_counts_in_its_generation)
{
	struct tn_ns t;
	tn_ns_open(&t, "a");
	const struct ns_cred cred = { .uid = 0, .gid = 0, .pid = 0 };
	struct cat_inode run, root, in;
	struct ns_file *f;
	OK(ns_make(t.ns, &cred, CAT_ROOT_INO, "run", S_IFDIR | 0755, 0, NULL, &run));
	OK(ns_make(t.ns, &cred, run.ino, "step-100", S_IFDIR | 0755, 0, NULL, &root));
	uint64_t gen = 0;
	OK(cat_gen_of(t.c.cat, root.ino, &gen));
	cr_assert_gt(gen, 0, "step-100 under run/ starts a generation");
	OK(ns_create(t.ns, &cred, root.ino, "shard0", 0644, O_WRONLY | O_CREAT, &f, &in));
	uint64_t of = 0;
	OK(cat_gen_of(t.c.cat, in.ino, &of));
	cr_assert_eq(of, gen);
	FAILS(cat_gen_commit(t.c.cat, gen, "test"), EBUSY);
	tn_ns_close_file(&t, f);
	OK(gen_commit_explicit(t.g, gen, "explicit"));
	tn_ns_close(&t);
}

/* The rows of ns_open naming ino: how many, and how many marked parked. */
static void tn_open_rows(uint64_t ino, int *rows, int *parked)
{
	PGconn *c = tn_raw();
	char sql[160];
	snprintf(sql, sizeof(sql), "SELECT count(*), count(*) FILTER (WHERE parked) FROM ns_open"
		 " WHERE ino = %" PRIu64, ino);
	PGresult *r = PQexec(c, sql);
	cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s: %s", sql, PQresultErrorMessage(r));
	*rows = atoi(PQgetvalue(r, 0, 0));
	*parked = atoi(PQgetvalue(r, 0, 1));
	PQclear(r);
	PQfinish(c);
}

/* Waits up to ms for ino's parked marks to be want; their count then. */
static int tn_parked_within(uint64_t ino, int want, unsigned ms)
{
	int rows = 0, parked = -1;
	for (unsigned waited = 0;; waited += 100) {
		tn_open_rows(ino, &rows, &parked);
		if (parked == want || waited >= ms)
			return parked;
		usleep(100 * 1000);
	}
}

/* fs/ns.h invariant 15 (review 50 F4): a last close whose statement ending
 * the parked mark fails (PostgreSQL away) leaves the mark, which keep counts
 * (pggen.h X12); the node ends it once the catalog answers (its tick, every
 * second), without dropping the ns_open row a handle still open for reading
 * needs (pgns.h N14). A new open for writing in between ends the old mark
 * in its own statement, and the mark its flush then parks is the handle's:
 * no late end clears it while that handle is open. */
Test(pgns, a_parked_mark_a_failed_last_close_left_is_ended_once_the_catalog_answers)
{
	struct tn_ns t;
	tn_ns_open(&t, "a");
	const struct ns_cred cred = { .uid = 0, .gid = 0, .pid = 0 };
	struct cat_inode run, root, in, got;
	struct ns_file *f, *r;
	OK(ns_make(t.ns, &cred, CAT_ROOT_INO, "run", S_IFDIR | 0755, 0, NULL, &run));
	OK(ns_make(t.ns, &cred, run.ino, "step-100", S_IFDIR | 0755, 0, NULL, &root));
	uint64_t gen = 0;
	OK(cat_gen_of(t.c.cat, root.ino, &gen));
	OK(ns_create(t.ns, &cred, root.ino, "shard0", 0644, O_WRONLY | O_CREAT, &f, &in));
	OK(ns_open(t.ns, &cred, in.ino, O_RDONLY, &r, &got)); /* a reader stays open */
	OK(ns_flush(t.ns, f)); /* its close(2): the row parked (invariant 14) */
	int rows = 0, parked = 0;
	tn_open_rows(in.ino, &rows, &parked);
	cr_assert_eq(parked, 1, "the flush parked the write handle");
	OK(gen_commit_explicit(t.g, gen, "explicit"));

	/* the release's G_WRITING (close) fails, PostgreSQL away for the call */
	OK(pg_fault_arm(cat_shared_ns(t.c.cat)->pg, "drop gen_writing down"));
	int rc = ns_release(t.ns, f);
	OK(rc);
	ns_release_done(t.ns, f, rc);
	tn_open_rows(in.ino, &rows, &parked);
	cr_assert_eq(parked, 1, "the failed close left the mark (what review 50 F4 found)");
	cr_assert_eq(tn_parked_within(in.ino, 0, 5000), 0, "the mark ended once the catalog answers");
	tn_open_rows(in.ino, &rows, &parked);
	cr_assert_eq(rows, 1, "the reader's ns_open row stays (N14)");

	/* again, and a new write handle opened and flushed before the tick */
	OK(ns_open(t.ns, &cred, in.ino, O_WRONLY, &f, &got));
	OK(ns_flush(t.ns, f));
	OK(pg_fault_arm(cat_shared_ns(t.c.cat)->pg, "drop gen_writing down"));
	rc = ns_release(t.ns, f);
	OK(rc);
	ns_release_done(t.ns, f, rc);
	OK(ns_open(t.ns, &cred, in.ino, O_WRONLY, &f, &got)); /* its statement ends the mark */
	OK(ns_flush(t.ns, f));                                 /* and parks this handle */
	usleep(2500 * 1000);                                   /* two ticks at least */
	tn_open_rows(in.ino, &rows, &parked);
	cr_assert_eq(parked, 1, "the open handle's own mark stays: keep must see it");
	rc = ns_release(t.ns, f);
	OK(rc);
	ns_release_done(t.ns, f, rc);
	tn_open_rows(in.ino, &rows, &parked);
	cr_assert_eq(parked, 0, "its last close ended it");
	tn_ns_close_file(&t, r);
	tn_open_rows(in.ino, &rows, &parked);
	cr_assert_eq(rows, 0, "no handle open: no row");
	tn_ns_close(&t);
}

/* N14: an unlinked file that node b has open (ns_open) or open for writing
 * (ns_writing) is neither deleted nor emptied by node a's release; b's last
 * close says it is b's to release; what a release left waits in
 * ns_release_wait for the reclaim duty once no live node has it open. */
Test(pgns, an_unlinked_file_open_on_another_node_is_kept_until_its_last_close)
{
	struct pt_node a, b;
	pt_join(&a, "a", 30000);
	pt_join(&b, "b", 30000);
	struct cat_extent ext[2];
	struct pgns_chunk chunks[2];
	tn_content(21, 0, 2, ext, chunks);
	uint64_t f = tn_file(&a, CAT_ROOT_INO, "f"), g = tn_file(&a, CAT_ROOT_INO, "g");
	OK(pgns_file_commit(&a.ns, f, 2000, 1, ext, 2, chunks, 2));
	bool release = true;
	OK(pgns_opened(&b.ns, f, true, NULL));
	OK(pgns_opened(&b.ns, f, true, NULL)); /* again: one row */
	FAILS(pgns_opened(&b.ns, 999999, true, NULL), ENOENT);
	OK(pgns_unlink(&a.ns, CAT_ROOT_INO, "f", NULL));
	OK(pgns_inode_release(&a.ns, f));
	OK(pgns_inodes_release(&a.ns, &f, 1));
	OK(pgns_inodes_drop_data(&a.ns, &f, 1));
	struct cat_inode in;
	OK(pgns_getattr(&a.ns, f, &in));
	cr_assert_eq(in.size, 2000, "the data of a file open on b");
	struct cat_extent got[4];
	cr_assert_eq(pgns_extents(&a.ns, f, 0, got, 4), 2);
	cr_assert_eq(tn_refs(&a, chunks[0].hash), 1);
	/* b's own release does not wait for b's row (its handles are its own) */
	OK(pgns_opened(&b.ns, f, false, &release));
	cr_assert(release, "b's last close: unlinked and open nowhere else");
	OK(pgns_inodes_drop_data(&b.ns, &f, 1));
	cr_assert_eq(pgns_extents(&a.ns, f, 0, got, 4), 0);
	cr_assert_eq(tn_refs(&a, chunks[0].hash), 0);
	OK(pgns_inode_release(&a.ns, f));
	FAILS(pgns_getattr(&a.ns, f, &in), ENOENT);

	/* a writer's ns_writing row on b holds g the same way; once it is
	 * gone the reclaim duty's pass (pgns_unpin_lost) releases g */
	OK(pggen_writing(&b.ns, g, true, NULL));
	OK(pgns_unlink(&a.ns, CAT_ROOT_INO, "g", NULL));
	OK(pgns_inodes_release(&a.ns, &g, 1));
	OK(pgns_getattr(&a.ns, g, &in));
	OK(pgns_unpin_lost(&a.ns));
	OK(pgns_getattr(&a.ns, g, &in));
	OK(pggen_writing(&b.ns, g, false, NULL));
	OK(pgns_opened(&b.ns, g, false, &release));
	cr_assert(release, "nobody has g open");
	OK(pgns_unpin_lost(&a.ns));
	FAILS(pgns_getattr(&a.ns, g, &in), ENOENT);
	pt_check(&a);
	pt_leave(&a);
	pt_leave(&b);
}
