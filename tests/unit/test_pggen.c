/* Unit tests for meta/pggen.c, generations across nodes, against a real
 * PostgreSQL each test starts (tests/unit/pgtest.h); two or three nodes are
 * connections with their own leases.
 *
 * A DCP-style save: node A makes step-100/, A and B each write a shard into
 * it, A's trainer signals completion while B's shard is still open: the
 * commit waits (-EBUSY, 1 writer), and goes through once B closes; no open
 * for writing can slip between a commit's check and its change (X1). A node
 * killed mid-save: its open generation is held cluster-wide once its lease
 * ran out, the others' files stay; chunks it alone held and had not
 * uploaded make the generations naming them lost and hidden, unless a live
 * node that has the bytes adopts them first; a node past its lease commits
 * nothing (X3). */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pggen.h"
#include "pgtest.h"
#include "support.h"

TestSuite(pggen, .init = pt_start, .fini = pt_stop, .timeout = 90);

/* Publishes n chunks ts_hash(fill, 0..n) as file ino's content. */
static void tg_publish(struct pt_node *node, uint64_t ino, uint8_t fill, size_t n)
{
	struct cat_extent ext[8];
	struct pgns_chunk chunks[8];
	cr_assert(n <= 8);
	for (size_t i = 0; i < n; i++) {
		ts_hash(chunks[i].hash, fill, (int)i);
		chunks[i].plain_len = chunks[i].stored_len = 1000;
		chunks[i].codec = 0;
		ext[i] = (struct cat_extent){ .off = i * 1000, .len = 1000, .chunk_len = 1000 };
		memcpy(ext[i].hash, chunks[i].hash, CAT_HASH_LEN);
	}
	OK(pgns_file_commit(&node->ns, ino, n * 1000, 1, ext, n, chunks, n));
}

static uint64_t tg_shard(struct pt_node *node, uint64_t dir, const char *name)
{
	struct cat_inode in;
	OK(pgns_create(&node->ns, dir, name, S_IFREG | 0644, 0, 0, 0, NULL, &in));
	return in.ino;
}

static int tg_state(struct pt_node *node, uint64_t id, bool *lost)
{
	struct cat_gen g;
	OK(pggen_get(&node->ns, id, &g, lost));
	return g.state;
}

struct tg_list {
	uint64_t ids[8];
	int n;
};

static int tg_collect(void *arg, const struct cat_gen *g)
{
	struct tg_list *l = arg;
	if (l->n < 8)
		l->ids[l->n++] = g->id;
	return 0;
}

/* A DCP save of two nodes: step-100/ with one shard per node. */
static uint64_t tg_save(struct pt_node *a, struct pt_node *b, uint64_t run, const char *name,
			uint64_t step, uint64_t *sa, uint64_t *sb)
{
	struct cat_gen_spec spec = { name, step };
	struct cat_inode root;
	uint64_t gen = 0;
	OK(pggen_create_root(&a->ns, run, &spec, S_IFDIR | 0755, 0, 0, &root, &gen));
	*sa = tg_shard(a, root.ino, "__0_0.distcp");
	*sb = tg_shard(b, root.ino, "__1_0.distcp");
	int state = 99;
	OK(pggen_writing(&a->ns, *sa, true, &state));
	cr_assert_eq(state, GEN_OPEN, "a shard made on b is in a's generation");
	OK(pggen_writing(&b->ns, *sb, true, &state));
	cr_assert_eq(state, GEN_OPEN);
	return gen;
}

/* Nodes a (a 30 s lease) and b (b_lease ms) joined, and directory "run"
 * made by a. */
static void tg_nodes(struct pt_node *a, struct pt_node *b, unsigned b_lease,
		     struct cat_inode *run)
{
	pt_join(a, "a", 30000);
	pt_join(b, "b", b_lease);
	OK(pgns_create(&a->ns, CAT_ROOT_INO, "run", S_IFDIR | 0755, 0, 0, 0, NULL, run));
}

/* Nodes a and b joined with a 30 s lease, and directory "run" made by a. */
static void tg_two_nodes(struct pt_node *a, struct pt_node *b, struct cat_inode *run)
{
	tg_nodes(a, b, 30000, run);
}

/* b (tg_nodes with a 2 s lease) stops renewing: once its lease and one
 * more term ran out (lease.h L4), a's sweep expires it and settles it
 * (X2); held and lost (4 each) get what that held and lost. */
static void tg_b_dies(struct pt_node *a, uint64_t *held, size_t *nh, uint64_t *lost, size_t *nl)
{
	usleep(4300 * 1000);
	uint64_t dead[2];
	size_t n = 0;
	OK(lease_sweep(&a->lease, dead, 2, &n));
	cr_assert_eq(n, 1);
	OK(pggen_node_lost(&a->ns, dead[0], held, 4, nh, lost, 4, nl));
}

/* The two shards of a tg_save closed: sa by x, sb by y (their last close). */
static void tg_close_shards(struct pt_node *x, uint64_t sa, struct pt_node *y, uint64_t sb)
{
	OK(pggen_writing(&x->ns, sa, false, NULL));
	OK(pggen_writing(&y->ns, sb, false, NULL));
}

/* A tg_save whose shard on b names 2 chunks (fill) only b holds, a's shard
 * empty, both closed and committed by node by. */
static uint64_t tg_save_on_b(struct pt_node *a, struct pt_node *b, uint64_t run, const char *name,
			     uint64_t step, uint8_t fill, struct pt_node *by)
{
	uint64_t sa, sb;
	uint64_t gen = tg_save(a, b, run, name, step, &sa, &sb);
	tg_publish(b, sb, fill, 2);
	tg_close_shards(a, sa, b, sb);
	OK(pggen_commit(&by->ns, gen, "dcp-metadata", false, NULL));
	return gen;
}

Test(pggen, a_commit_on_one_node_waits_for_the_others_writers)
{
	struct pt_node a, b;
	struct cat_inode run;
	tg_two_nodes(&a, &b, &run);
	uint64_t sa, sb;
	uint64_t gen = tg_save(&a, &b, run.ino, "step-100", 100, &sa, &sb);
	struct cat_gen_spec inner = { "step-7", 7 };
	struct cat_inode x;
	struct cat_inode root;
	OK(pgns_lookup(&a.ns, run.ino, "step-100", &root));
	FAILS(pggen_create_root(&a.ns, root.ino, &inner, S_IFDIR | 0755, 0, 0, &x, NULL), EINVAL);

	tg_publish(&a, sa, 1, 3);
	OK(pggen_writing(&a.ns, sa, false, NULL));
	uint64_t writers = 0;
	FAILS(pggen_commit(&a.ns, gen, "dcp-metadata", false, &writers), EBUSY);
	cr_assert_eq(writers, 1, "b's shard is still open for writing");
	cr_assert_eq(tg_state(&b, gen, NULL), GEN_OPEN);

	tg_publish(&b, sb, 2, 3);
	OK(pggen_writing(&b.ns, sb, false, NULL));
	OK(pggen_commit(&a.ns, gen, "dcp-metadata", false, &writers));
	cr_assert_eq(tg_state(&b, gen, NULL), GEN_COMMITTED);
	struct cat_gen g;
	OK(pggen_get(&b.ns, gen, &g, NULL));
	cr_assert_str_eq(g.rule, "dcp-metadata");
	cr_assert_str_eq(g.name, "step-100");
	cr_assert_eq(g.step, 100);
	FAILS(pggen_commit(&b.ns, gen, "again", false, NULL), EINVAL);
	int state = -2;
	OK(pggen_writing(&b.ns, sb, true, &state));
	cr_assert_eq(state, GEN_COMMITTED, "a write into a committed save: the caller reopens it");
	pt_leave(&a);
	pt_leave(&b);
}

/* X1: opens for writing racing a commit. Whatever the order, a commit that
 * succeeded saw no writer, and every open after it sees COMMITTED. */
struct tg_opener {
	struct pt_node *node;
	uint64_t ino;
	int state;
	int rc;
};

static void *tg_open(void *arg)
{
	struct tg_opener *o = arg;
	o->rc = pggen_writing(&o->node->ns, o->ino, true, &o->state);
	return NULL;
}

static uint64_t tg_round_trips(struct pt_node *n)
{
	struct pg_stats st;
	pg_get_stats(n->pg, &st);
	return st.round_trips;
}

/* pg.h P5: the generation reads a daemon makes per file and per tick (a
 * file's generation, a generation's row) are one round trip each. */
Test(pggen, a_generation_read_is_one_round_trip)
{
	struct pt_node a, b;
	struct cat_inode run;
	tg_two_nodes(&a, &b, &run);
	uint64_t sa, sb, of = 0;
	uint64_t gen = tg_save(&a, &b, run.ino, "step-100", 100, &sa, &sb);
	struct cat_gen g;
	OK(pggen_get(&a.ns, gen, &g, NULL)); /* prepares */
	OK(pggen_gen_of(&a.ns, sa, &of));
	uint64_t t0 = tg_round_trips(&a);
	OK(pggen_gen_of(&a.ns, sa, &of));
	cr_assert_eq(of, gen);
	cr_assert_eq(tg_round_trips(&a) - t0, 1, "gen_of: %llu round trips",
		     (unsigned long long)(tg_round_trips(&a) - t0));
	t0 = tg_round_trips(&a);
	OK(pggen_get(&a.ns, gen, &g, NULL));
	cr_assert_eq(g.id, gen);
	cr_assert_eq(tg_round_trips(&a) - t0, 1, "get: %llu round trips",
		     (unsigned long long)(tg_round_trips(&a) - t0));
	pt_leave(&a);
	pt_leave(&b);
}

/* lease.h L5: a writer's registration (an open for writing, its last
 * close) is one statement with its fence: one round trip (five and six with
 * BEGIN, lease_fence, gen_of, the generation's row and COMMIT); a node swept
 * registers nothing (-ESTALE), so its open cannot hold a commit (X1). */
Test(pggen, a_writer_registration_is_one_fenced_round_trip)
{
	struct pt_node a, b;
	pt_join(&a, "a", 1500);
	pt_join(&b, "b", 30000);
	struct cat_gen_spec spec = { "step-5", 5 };
	struct cat_inode root;
	uint64_t gen = 0;
	OK(pggen_create_root(&b.ns, CAT_ROOT_INO, &spec, S_IFDIR | 0755, 0, 0, &root, &gen));
	uint64_t f = tg_shard(&a, root.ino, "__0_0.distcp");
	int state = 99;
	OK(pggen_writing(&a.ns, f, true, &state)); /* prepares */
	uint64_t t0 = tg_round_trips(&a);
	OK(pggen_writing(&a.ns, f, false, &state));
	cr_assert_eq(tg_round_trips(&a) - t0, 1, "a close: %llu round trips",
		     (unsigned long long)(tg_round_trips(&a) - t0));
	uint64_t writers = 9;
	t0 = tg_round_trips(&a);
	OK(pggen_writing(&a.ns, f, true, &state));
	cr_assert_eq(tg_round_trips(&a) - t0, 1, "an open: %llu round trips",
		     (unsigned long long)(tg_round_trips(&a) - t0));
	cr_assert_eq(state, GEN_OPEN);
	FAILS(pggen_commit(&b.ns, gen, "dcp-metadata", false, &writers), EBUSY); /* X1 */
	cr_assert_eq(writers, 1);
	OK(pggen_writing(&a.ns, f, false, NULL));
	FAILS(pggen_writing(&a.ns, 999999, true, &state), ENOENT);
	cr_assert_eq(state, -1);

	usleep(3300 * 1000); /* a's lease and its grace (L4) run out */
	uint64_t dead[2];
	size_t n = 0;
	OK(lease_sweep(&b.lease, dead, 2, &n));
	cr_assert_eq(n, 1);
	FAILS(pggen_writing(&a.ns, f, true, &state), ESTALE);
	OK(pggen_commit(&b.ns, gen, "dcp-metadata", false, &writers));
	cr_assert_eq(writers, 0, "the swept node's open registered nothing");
	pt_leave(&a);
	pt_leave(&b);
}

struct tg_committer {
	struct pt_node *node;
	uint64_t gen;
	int rc;
	uint64_t writers;
};

static void *tg_commit_thread(void *arg)
{
	struct tg_committer *c = arg;
	c->rc = pggen_commit(&c->node->ns, c->gen, "dcp-metadata", false, &c->writers);
	return NULL;
}

/* X9: a generation's commit is four round trips (six before: BEGIN,
 * lease_fence, the row, the writers, the change, COMMIT) and says the
 * version it committed; one refused for a writer is four too. */
Test(pggen, a_commit_is_four_round_trips_and_gives_its_version)
{
	struct pt_node a, b;
	struct cat_inode run;
	tg_two_nodes(&a, &b, &run);
	uint64_t sa, sb, sa2, sb2;
	uint64_t g1 = tg_save(&a, &b, run.ino, "step-1", 1, &sa, &sb);
	uint64_t g2 = tg_save(&a, &b, run.ino, "step-2", 2, &sa2, &sb2);
	tg_close_shards(&a, sa, &b, sb);
	OK(pggen_writing(&a.ns, sa2, false, NULL));
	uint64_t writers = 9;
	FAILS(pggen_commit(&a.ns, g2, "dcp-metadata", false, &writers), EBUSY); /* prepares */
	uint64_t t0 = tg_round_trips(&a);
	FAILS(pggen_commit(&a.ns, g2, "dcp-metadata", false, &writers), EBUSY);
	cr_assert_eq(writers, 1);
	cr_assert_eq(tg_round_trips(&a) - t0, 4, "a commit refused: %llu round trips",
		     (unsigned long long)(tg_round_trips(&a) - t0));
	uint32_t version = 0;
	t0 = tg_round_trips(&a);
	OK(pggen_commit_at(&a.ns, g1, "dcp-metadata", false, &writers, &version));
	cr_assert_eq(tg_round_trips(&a) - t0, 4, "a commit: %llu round trips",
		     (unsigned long long)(tg_round_trips(&a) - t0));
	cr_assert_eq(writers, 0);
	struct cat_gen g;
	OK(pggen_get(&b.ns, g1, &g, NULL));
	cr_assert_eq(g.state, GEN_COMMITTED);
	cr_assert_eq(version, g.version);
	cr_assert_eq(tg_state(&b, g2, NULL), GEN_OPEN);
	FAILS(pggen_commit_at(&a.ns, g1, "again", false, NULL, &version), EINVAL);
	cr_assert_eq(version, 0);
	/* its manifest on BACKING: one statement (pg.h P5; three before) */
	OK(pggen_durable_set(&a.ns, g2, 1)); /* prepares; g2 is not committed: no change */
	t0 = tg_round_trips(&a);
	OK(pggen_durable_set(&a.ns, g1, g.version));
	cr_assert_eq(tg_round_trips(&a) - t0, 1, "durable_set: %llu round trips",
		     (unsigned long long)(tg_round_trips(&a) - t0));
	uint64_t left = 9;
	OK(pggen_not_durable(&b.ns, g1, &left));
	cr_assert_eq(left, 0, "durable at its version");
	pt_leave(&a);
	pt_leave(&b);
}

/* X1 with X9: a registration that holds the generation's row (here a
 * transaction of the test's own, as G_WRITING does in its statement) while
 * the commit waits for the row: the commit's count, a statement after the
 * lock, sees that writer (-EBUSY); a one-statement commit, whose snapshot
 * would predate the lock, would not. */
Test(pggen, a_commit_waiting_for_a_registration_counts_it)
{
	struct pt_node a, b;
	struct cat_inode run;
	tg_two_nodes(&a, &b, &run);
	uint64_t sa, sb;
	uint64_t gen = tg_save(&a, &b, run.ino, "step-1", 1, &sa, &sb);
	tg_close_shards(&a, sa, &b, sb);
	PGconn *raw = PQconnectdb(pt_url);
	cr_assert(raw && PQstatus(raw) == CONNECTION_OK);
	char sql[256];
	const char *steps[3] = { "BEGIN", sql, NULL };
	snprintf(sql, sizeof(sql), "SELECT 1 FROM ns_generations WHERE id = %" PRIu64 " FOR SHARE", gen);
	for (int i = 0; steps[i]; i++) {
		PGresult *r = PQexec(raw, steps[i]);
		cr_assert(PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK,
			  "%s: %s", steps[i], PQresultErrorMessage(r));
		PQclear(r);
	}
	struct tg_committer c = { &a, gen, 1, 9 };
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, tg_commit_thread, &c), 0);
	usleep(500 * 1000);
	snprintf(sql, sizeof(sql), "INSERT INTO ns_writing(node, ino) VALUES (%" PRIu64 ", %" PRIu64 ")",
		 b.lease.node_id, sb);
	const char *more[3] = { sql, "COMMIT", NULL };
	for (int i = 0; more[i]; i++) {
		PGresult *r = PQexec(raw, more[i]);
		cr_assert(PQresultStatus(r) == PGRES_COMMAND_OK, "%s: %s", more[i],
			  PQresultErrorMessage(r));
		PQclear(r);
	}
	pthread_join(t, NULL);
	PQfinish(raw);
	cr_assert_eq(c.rc, -EBUSY, "the commit missed the registration: %d", c.rc);
	cr_assert_eq(c.writers, 1);
	cr_assert_eq(tg_state(&b, gen, NULL), GEN_OPEN);
	pt_leave(&a);
	pt_leave(&b);
}

/* L6: a swept node's commit (its fence on the first statement) changes
 * nothing: -ESTALE, the generation stays OPEN. */
Test(pggen, a_swept_nodes_commit_changes_nothing)
{
	struct pt_node a, b;
	pt_join(&a, "a", 1500);
	pt_join(&b, "b", 30000);
	struct cat_inode run;
	OK(pgns_create(&b.ns, CAT_ROOT_INO, "run", S_IFDIR | 0755, 0, 0, 0, NULL, &run));
	uint64_t sa, sb;
	uint64_t gen = tg_save(&b, &b, run.ino, "step-1", 1, &sa, &sb);
	tg_close_shards(&b, sa, &b, sb);
	usleep(3300 * 1000); /* a's lease and its grace (L4) run out */
	uint64_t dead[2];
	size_t n = 0;
	OK(lease_sweep(&b.lease, dead, 2, &n));
	cr_assert_eq(n, 1);
	uint32_t version = 9;
	FAILS(pggen_commit_at(&a.ns, gen, "dcp-metadata", false, NULL, &version), ESTALE);
	cr_assert_eq(version, 0);
	cr_assert_eq(tg_state(&b, gen, NULL), GEN_OPEN);
	OK(pggen_commit(&b.ns, gen, "dcp-metadata", false, NULL));
	pt_leave(&a);
	pt_leave(&b);
}

Test(pggen, no_open_slips_between_a_commits_check_and_its_change)
{
	struct pt_node a, b;
	pt_join(&a, "a", 30000);
	pt_join(&b, "b", 30000);
	for (int round = 0; round < 10; round++) {
		char name[32];
		snprintf(name, sizeof(name), "step-%d", round);
		struct cat_gen_spec spec = { name, (uint64_t)round };
		struct cat_inode root;
		uint64_t gen;
		OK(pggen_create_root(&a.ns, CAT_ROOT_INO, &spec, S_IFDIR | 0755, 0, 0, &root, &gen));
		struct tg_opener o = { &b, tg_shard(&b, root.ino, "late"), -1, 0 };
		pthread_t t;
		cr_assert_eq(pthread_create(&t, NULL, tg_open, &o), 0);
		uint64_t writers = 0;
		int rc = pggen_commit(&a.ns, gen, "trigger", false, &writers);
		pthread_join(t, NULL);
		OK(o.rc);
		if (rc == 0)
			cr_assert_eq(o.state, GEN_COMMITTED,
				     "round %d: an open saw %d after a commit that saw no writer", round,
				     o.state);
		else
			cr_assert(rc == -EBUSY && writers == 1 && o.state == GEN_OPEN,
				  "round %d: rc %d writers %" PRIu64 " state %d", round, rc, writers,
				  o.state);
	}
	pt_leave(&a);
	pt_leave(&b);
}

Test(pggen, a_node_killed_mid_save_is_held_and_its_unuploaded_chunks_lose_generations)
{
	struct pt_node a, b, c;
	pt_join(&a, "a", 30000);
	pt_join(&b, "b", 2000);
	pt_join(&c, "c", 30000);

	/* step-1: committed, b's shard on chunks only b holds, none uploaded */
	uint64_t sa, sb;
	uint64_t g1 = tg_save(&a, &b, CAT_ROOT_INO, "step-1", 1, &sa, &sb);
	tg_publish(&a, sa, 1, 2);
	tg_publish(&b, sb, 2, 2);
	tg_close_shards(&a, sa, &b, sb);
	OK(pggen_commit(&a.ns, g1, "dcp-metadata", false, NULL));
	/* step-0: committed, b's chunks uploaded: survives b */
	uint64_t g0 = tg_save(&a, &b, CAT_ROOT_INO, "step-0", 0, &sa, &sb);
	tg_publish(&b, sb, 3, 2);
	for (int i = 0; i < 2; i++) {
		uint8_t h[CAT_HASH_LEN];
		ts_hash(h, 3, i);
		OK(pgns_chunk_uploaded(&b.ns, h));
	}
	tg_close_shards(&a, sa, &b, sb);
	OK(pggen_commit(&b.ns, g0, "dcp-metadata", false, NULL));
	/* step-2: open; b dies with its shard open */
	uint64_t g2 = tg_save(&a, &b, CAT_ROOT_INO, "step-2", 2, &sa, &sb);
	tg_publish(&a, sa, 4, 2);
	OK(pggen_writing(&a.ns, sa, false, NULL));

	usleep(4300 * 1000); /* b's lease runs out, and one more term (lease.h L4) */
	/* a's trainer signals completion: b's unfinished shard holds it (X1) */
	uint64_t writers = 0;
	FAILS(pggen_commit(&a.ns, g2, "dcp-metadata", false, &writers), EBUSY);
	cr_assert_eq(writers, 1, "a node past its lease still holds the commit until handled");
	uint64_t dead[2];
	size_t n = 0;
	OK(lease_sweep(&c.lease, dead, 2, &n));
	cr_assert_eq(n, 1);
	cr_assert_eq(dead[0], b.lease.node_id);
	FAILS(pggen_commit(&b.ns, g2, "dcp-metadata", false, NULL), ESTALE); /* X3 */

	/* c has one of b's step-1 chunks in its cache (it read it): it adopts it */
	uint8_t have[1][CAT_HASH_LEN];
	ts_hash(have[0], 2, 0);
	size_t adopted = 0;
	OK(pggen_adopt(&c.ns, dead[0], (const uint8_t(*)[CAT_HASH_LEN])have, 1, &adopted));
	cr_assert_eq(adopted, 1);

	uint64_t held[4], lost[4];
	size_t nh = 0, nl = 0;
	OK(pggen_node_lost(&c.ns, dead[0], held, 4, &nh, lost, 4, &nl));
	cr_assert_eq(nh, 1);
	cr_assert_eq(held[0], g2, "the save b died in is held, with a's shard kept");
	cr_assert_eq(nl, 1, "step-1 names a chunk only b had (chunk 1; c adopted chunk 0)");
	cr_assert_eq(lost[0], g1);
	FAILS(pggen_commit(&a.ns, g2, "dcp-metadata", false, &writers), EINVAL);
	bool is_lost = false;
	cr_assert_eq(tg_state(&a, g1, &is_lost), GEN_COMMITTED);
	cr_assert(is_lost);
	FAILS(pggen_commit(&a.ns, g1, "admin", true, NULL), EINVAL);
	tg_state(&a, g0, &is_lost);
	cr_assert(!is_lost, "step-0's chunks are on BACKING");
	struct pgns_chunk_row row;
	OK(pgns_chunk_get(&a.ns, have[0], &row));
	cr_assert_eq(row.holder, c.lease.node_id);

	/* resume finds the newest complete one: step-0 */
	struct tg_list l = { .n = 0 };
	OK(pggen_list(&a.ns, CAT_ROOT_INO, tg_collect, &l));
	cr_assert_eq(l.n, 1, "lost step-1 and held step-2 are not listed");
	cr_assert_eq(l.ids[0], g0);
	pt_leave(&a);
	pt_leave(&b);
	pt_leave(&c);
}

Test(pggen, an_open_save_of_a_dead_node_is_held_cluster_wide)
{
	struct pt_node a, b;
	pt_join(&a, "a", 30000);
	pt_join(&b, "b", 2000);
	uint64_t sa, sb;
	uint64_t gen = tg_save(&a, &b, CAT_ROOT_INO, "step-5", 5, &sa, &sb);
	tg_publish(&a, sa, 5, 2);
	OK(pggen_writing(&a.ns, sa, false, NULL));
	tg_publish(&b, sb, 6, 2); /* b closed a first version, reopened, then died */
	for (int i = 0; i < 2; i++) {
		uint8_t h[CAT_HASH_LEN];
		ts_hash(h, 6, i);
		OK(pgns_chunk_uploaded(&b.ns, h));
	}
	usleep(4300 * 1000);
	uint64_t dead[2];
	size_t n = 0;
	OK(lease_sweep(&a.lease, dead, 2, &n));
	cr_assert_eq(n, 1);
	uint64_t held[4], lost[4];
	size_t nh = 0, nl = 0;
	OK(pggen_node_lost(&a.ns, dead[0], held, 4, &nh, lost, 4, &nl));
	cr_assert_eq(nh, 1);
	cr_assert_eq(held[0], gen);
	cr_assert_eq(nl, 0, "b's chunks are on BACKING");
	struct cat_gen g;
	bool is_lost;
	OK(pggen_get(&a.ns, gen, &g, &is_lost));
	cr_assert_eq(g.state, GEN_HELD);
	cr_assert(strstr(g.held, "lost its lease"), "reason: %s", g.held);
	cr_assert_str_eq(g.rule, "node-lost");
	struct cat_inode in;
	OK(pgns_getattr(&a.ns, sa, &in)); /* kept byte for byte */
	cr_assert_eq(in.size, 2000);
	OK(pggen_node_lost(&a.ns, dead[0], held, 4, &nh, lost, 4, &nl));
	cr_assert_eq(nh + nl, 0, "handled once");
	FAILS(pggen_hold(&a.ns, gen, "x", "y"), EALREADY);
	FAILS(pggen_commit(&a.ns, gen, "dcp-metadata", false, NULL), EINVAL);
	OK(pggen_commit(&a.ns, gen, "admin", true, NULL)); /* an explicit decision ends it */
	pt_leave(&a);
	pt_leave(&b);
}

/* A save whose node died between its files (none open) before its
 * completion signal: no live node's policy tracks it, so the sweep holds it;
 * one that another live node still writes is left to that node. */
Test(pggen, a_save_its_dead_node_opened_with_no_file_open_is_held)
{
	struct pt_node a, b;
	pt_join(&a, "a", 30000);
	pt_join(&b, "b", 2000);
	struct cat_gen_spec s1 = { "step-7", 7 }, s2 = { "step-8", 8 };
	struct cat_inode r1, r2;
	uint64_t g1 = 0, g2 = 0;
	OK(pggen_create_root(&b.ns, CAT_ROOT_INO, &s1, S_IFDIR | 0755, 0, 0, &r1, &g1));
	uint64_t f1 = tg_shard(&b, r1.ino, "__0_0.distcp");
	OK(pggen_writing(&b.ns, f1, true, NULL));
	tg_publish(&b, f1, 7, 1);
	OK(pggen_writing(&b.ns, f1, false, NULL)); /* closed: b dies before the .metadata */
	OK(pggen_create_root(&b.ns, CAT_ROOT_INO, &s2, S_IFDIR | 0755, 0, 0, &r2, &g2));
	uint64_t f2 = tg_shard(&a, r2.ino, "__1_0.distcp");
	OK(pggen_writing(&a.ns, f2, true, NULL)); /* a still writes step-8 */
	uint64_t held[4], lost[4];
	size_t nh = 0, nl = 0;
	tg_b_dies(&a, held, &nh, lost, &nl);
	cr_assert_eq(nh, 1);
	cr_assert_eq(held[0], g1);
	cr_assert_eq(tg_state(&a, g1, NULL), GEN_HELD, "no node would ever decide it otherwise");
	cr_assert_eq(tg_state(&a, g2, NULL), GEN_OPEN, "a's writer keeps it to a's policy");
	OK(pggen_writing(&a.ns, f2, false, NULL));
	pt_leave(&a);
	pt_leave(&b);
}

/* ---- generation.h's calls over PostgreSQL (pggen_rename, _end, _pin, ...) ---- */

static void tg_checked(struct pt_node *n)
{
	int violations = 0;
	OK(pggen_check(&n->ns, &violations));
	cr_assert_eq(violations, 0, "pggen_check found %d violations", violations);
}

static uint64_t tg_gen_of(struct pt_node *n, uint64_t ino)
{
	uint64_t gen = 99;
	OK(pggen_gen_of(&n->ns, ino, &gen));
	return gen;
}

Test(pggen, a_rename_carries_generations_across_nodes)
{
	struct pt_node a, b;
	pt_join(&a, "a", 30000);
	pt_join(&b, "b", 30000);
	struct cat_inode run, tmp, sub, other, x;
	OK(pgns_create(&a.ns, CAT_ROOT_INO, "run", S_IFDIR | 0755, 0, 0, 0, NULL, &run));
	/* a temp dir written by both nodes, renamed to its step name by a */
	OK(pgns_create(&a.ns, run.ino, "step-200.tmp", S_IFDIR | 0755, 0, 0, 0, NULL, &tmp));
	OK(pgns_create(&b.ns, tmp.ino, "sub", S_IFDIR | 0755, 0, 0, 0, NULL, &sub));
	uint64_t shard = tg_shard(&b, sub.ino, "__1_0.distcp");
	cr_assert_eq(tg_gen_of(&a, shard), 0);
	struct cat_gen_spec spec = { "step-200", 200 };
	uint64_t gen = 0, replaced = 9;
	OK(pggen_rename(&a.ns, run.ino, "step-200.tmp", run.ino, "step-200", 0, &spec, &replaced,
			&gen, NULL));
	cr_assert(gen != 0);
	cr_assert_eq(replaced, 0);
	cr_assert_eq(tg_gen_of(&b, shard), gen, "b's shard is in the generation a's rename made");
	cr_assert_eq(tg_gen_of(&b, sub.ino), gen);
	struct cat_gen g;
	OK(pggen_get_sized(&b.ns, gen, &g));
	cr_assert_eq(g.state, GEN_OPEN);
	cr_assert_eq(g.root, tmp.ino);
	cr_assert_eq(g.series, run.ino);
	cr_assert_eq(g.files, 1);
	tg_checked(&a);

	/* a name renamed onto itself changes nothing */
	OK(pggen_rename(&a.ns, run.ino, "step-200", run.ino, "step-200", 0, NULL, NULL, NULL, NULL));
	cr_assert_eq(tg_state(&a, gen, NULL), GEN_OPEN);
	/* a hard link out of the tree would cross a generation boundary */
	OK(pgns_link(&a.ns, shard, sub.ino, "again", &x));
	FAILS(pggen_rename(&a.ns, sub.ino, "again", run.ino, "again", 0, NULL, NULL, NULL, NULL), EXDEV);
	/* a series inside a generation is refused */
	struct cat_gen_spec inner = { "step-1", 1 };
	OK(pgns_create(&a.ns, run.ino, "step-1.tmp", S_IFDIR | 0755, 0, 0, 0, NULL, &other));
	FAILS(pggen_rename(&a.ns, run.ino, "step-1.tmp", sub.ino, "step-1", 0, &inner, NULL, NULL, NULL),
	      EINVAL);

	/* a root renamed away: its generation ends, its tree leaves it */
	OK(pggen_rename(&b.ns, run.ino, "step-200", CAT_ROOT_INO, "elsewhere", 0, NULL, NULL,
			NULL, NULL));
	OK(pggen_get(&a.ns, gen, &g, NULL));
	cr_assert_eq(g.state, GEN_DELETED);
	cr_assert_str_eq(g.rule, "renamed");
	cr_assert_eq(g.root, 0);
	cr_assert_eq(tg_gen_of(&a, tmp.ino), 0);
	cr_assert_eq(tg_gen_of(&a, shard), 0);

	/* a generation renamed over by a new one: the replaced one ends */
	struct cat_gen_spec file = { "model-5.pt", 5 };
	struct cat_inode old_root;
	uint64_t gold = 0, gnew = 0;
	OK(pggen_create_root(&a.ns, run.ino, &file, S_IFREG | 0644, 0, 0, &old_root, &gold));
	uint64_t fresh = tg_shard(&b, run.ino, "model-5.pt.tmp");
	OK(pggen_rename(&b.ns, run.ino, "model-5.pt.tmp", run.ino, "model-5.pt", 0, &file,
			&replaced, &gnew, NULL));
	cr_assert_eq(replaced, old_root.ino);
	OK(pggen_get(&a.ns, gold, &g, NULL));
	cr_assert_eq(g.state, GEN_DELETED);
	cr_assert_str_eq(g.rule, "replaced");
	cr_assert_eq(tg_gen_of(&a, old_root.ino), 0, "the replaced root left its generation");
	OK(pggen_get(&a.ns, gnew, &g, NULL));
	cr_assert_eq(g.state, GEN_OPEN);
	cr_assert_eq(g.root, fresh);
	cr_assert_eq(tg_gen_of(&a, fresh), gnew);
	tg_checked(&b);
	/* a series moved into a generation: the generations in it end */
	struct cat_inode series, inner_root;
	uint64_t gin = 0, gout = 0;
	OK(pgns_create(&a.ns, CAT_ROOT_INO, "series", S_IFDIR | 0755, 0, 0, 0, NULL, &series));
	OK(pggen_create_root(&a.ns, series.ino, &inner, S_IFDIR | 0755, 0, 0, &inner_root, &gin));
	struct cat_gen_spec outer = { "step-9", 9 };
	struct cat_inode outer_root;
	OK(pggen_create_root(&b.ns, run.ino, &outer, S_IFDIR | 0755, 0, 0, &outer_root, &gout));
	OK(pggen_rename(&a.ns, CAT_ROOT_INO, "series", outer_root.ino, "series", 0, NULL, NULL,
			NULL, NULL));
	cr_assert_eq(tg_state(&a, gin, NULL), GEN_DELETED);
	cr_assert_eq(tg_gen_of(&a, inner_root.ino), gout);
	cr_assert_eq(tg_gen_of(&a, series.ino), gout);
	tg_checked(&a);
	tg_checked(&b);
	pt_leave(&a);
	pt_leave(&b);
}

static bool tg_named(struct pt_node *n, uint64_t dir, const char *name)
{
	struct cat_inode in;
	int rc = pgns_lookup(&n->ns, dir, name, &in);
	cr_assert(rc == 0 || rc == -ENOENT);
	return rc == 0;
}

Test(pggen, abort_delete_expire_pin_and_hold_from_either_node)
{
	struct pt_node a, b;
	struct cat_inode run;
	tg_two_nodes(&a, &b, &run);
	uint64_t sa, sb, ga, gc;
	struct cat_inode before, after;
	OK(pgns_getattr(&a.ns, run.ino, &before));

	/* abort: the tree goes (nlink 0, for the caller to release), the row stays */
	ga = tg_save(&a, &b, run.ino, "step-1", 1, &sa, &sb);
	struct cat_id_vec ids = { 0 };
	OK(pggen_end(&b.ns, ga, PGGEN_ABORT, "admin-abort", &ids));
	cr_assert_eq(ids.n, 3, "root and two shards");
	cr_assert(!tg_named(&a, run.ino, "step-1"));
	struct cat_inode in;
	OK(pgns_getattr(&a.ns, sa, &in));
	cr_assert_eq(in.nlink, 0);
	cr_assert_eq(tg_gen_of(&a, sa), 0);
	OK(pgns_getattr(&a.ns, run.ino, &after));
	cr_assert_eq(after.nlink, before.nlink, "the root directory's link to its series is gone");
	cr_assert_eq(tg_state(&a, ga, NULL), GEN_ABORTED);
	FAILS(pggen_end(&a.ns, ga, PGGEN_ABORT, "again", NULL), EALREADY);
	FAILS(pggen_end(&a.ns, ga, PGGEN_DELETE, "again", NULL), ENOENT);
	for (size_t i = 0; i < ids.n; i++)
		OK(pgns_inode_release(&a.ns, ids.v[i]));
	cat_id_vec_free(&ids);

	/* a committed one: abort refuses, pin makes expire refuse, delete does not */
	gc = tg_save(&a, &b, run.ino, "step-2", 2, &sa, &sb);
	tg_close_shards(&a, sa, &b, sb);
	FAILS(pggen_end(&a.ns, gc, PGGEN_EXPIRE, "keep", NULL), EBUSY); /* still OPEN */
	OK(pggen_commit(&a.ns, gc, "dcp-metadata", false, NULL));
	FAILS(pggen_end(&a.ns, gc, PGGEN_ABORT, "admin-abort", NULL), EINVAL);
	OK(pggen_pin(&b.ns, gc, true));
	struct cat_gen g;
	OK(pggen_get(&a.ns, gc, &g, NULL));
	cr_assert(g.pinned);
	FAILS(pggen_end(&a.ns, gc, PGGEN_EXPIRE, "keep", NULL), EBUSY);
	cr_assert(tg_named(&a, run.ino, "step-2"));
	OK(pggen_pin(&a.ns, gc, false));
	OK(pggen_end(&a.ns, gc, PGGEN_EXPIRE, "keep", NULL));
	OK(pggen_get(&b.ns, gc, &g, NULL));
	cr_assert_eq(g.state, GEN_DELETED);
	cr_assert_str_eq(g.rule, "keep");
	cr_assert(!tg_named(&b, run.ino, "step-2"));
	FAILS(pggen_pin(&a.ns, 999999, true), ENOENT);

	/* held: expire takes it (keep-latest-k once K newer are committed) */
	uint64_t gh = tg_save(&a, &b, run.ino, "step-3", 3, &sa, &sb);
	OK(pggen_hold(&b.ns, gh, "abandoned", "abandoned after 1 s"));
	OK(pggen_end(&a.ns, gh, PGGEN_EXPIRE, "keep", NULL));
	cr_assert_eq(tg_state(&a, gh, NULL), GEN_DELETED);
	tg_checked(&a);
	pt_leave(&a);
	pt_leave(&b);
}

Test(pggen, find_and_list_hide_what_a_resume_must_not_see)
{
	struct pt_node a, b;
	struct cat_inode run;
	tg_nodes(&a, &b, 2000, &run);
	uint64_t sa, sb;
	uint64_t g1 = tg_save(&a, &b, run.ino, "step-10", 10, &sa, &sb);
	tg_publish(&a, sa, 7, 2);
	tg_publish(&b, sb, 8, 2); /* only b has these, not uploaded */
	tg_close_shards(&a, sa, &b, sb);
	OK(pggen_commit(&a.ns, g1, "dcp-metadata", false, NULL));
	uint64_t g2 = tg_save(&a, &b, run.ino, "step-20", 20, &sa, &sb);
	OK(pggen_writing(&b.ns, sb, false, NULL));
	tg_publish(&a, sa, 9, 1);

	struct cat_gen g;
	OK(pggen_find_step(&a.ns, run.ino, 20, &g));
	cr_assert_eq(g.id, g2);
	OK(pggen_find(&b.ns, run.ino, "step-10", &g));
	cr_assert_eq(g.id, g1);
	FAILS(pggen_find(&b.ns, run.ino, "step-30", &g), ENOENT);
	FAILS(pggen_find_step(&b.ns, run.ino, UINT64_MAX, &g), ENOENT);
	struct cat_gen_vec l = { 0 };
	OK(pggen_list_all(&a.ns, run.ino, false, cat_gen_vec_add, &l));
	cr_assert_eq(l.n, 2);
	cr_assert_eq(l.v[0].id, g1);
	cr_assert_eq(l.v[0].files, 2);
	cr_assert_eq(l.v[0].logical_bytes, 4000);
	cr_assert_eq(l.v[0].exclusive_bytes, 0, "not computed in shared mode");
	cr_assert_eq(l.v[1].logical_bytes, 1000);
	cat_gen_vec_free(&l);

	uint64_t held[4], lost[4];
	size_t nh = 0, nl = 0;
	tg_b_dies(&a, held, &nh, lost, &nl); /* step-10 names chunks only b had */
	cr_assert_eq(nl, 1);
	FAILS(pggen_find_step(&a.ns, run.ino, 10, &g), ENOENT);
	OK(pggen_find(&a.ns, run.ino, "step-10", &g)); /* by name: still there to remove */
	OK(pggen_list_all(&a.ns, 0, false, cat_gen_vec_add, &l));
	cr_assert_eq(l.n, 2, "lost step-10 is listed as held (pggen.h X5), which listings hide");
	cr_assert_eq(l.v[0].id, g1);
	cr_assert_eq(l.v[0].state, GEN_HELD);
	cr_assert_eq(l.v[1].id, g2);
	cat_gen_vec_free(&l);
	OK(pggen_list_all(&a.ns, run.ino, true, cat_gen_vec_add, &l));
	cr_assert_eq(l.n, 2, "--all lists it");
	cat_gen_vec_free(&l);
	OK(pggen_end(&a.ns, g1, PGGEN_DELETE, "admin", NULL));
	tg_checked(&a);
	pt_leave(&a);
	pt_leave(&b);
}

/* ---- versions: rewriting a committed generation (pggen_reopen) ---- */

static uint64_t tg_refs(struct pt_node *n, uint8_t fill, int seed)
{
	uint8_t h[CAT_HASH_LEN];
	struct pgns_chunk_row row;
	ts_hash(h, fill, seed);
	OK(pgns_chunk_get(&n->ns, h, &row));
	return row.refcount;
}

/* The first extent's chunk of name under the generation's root is
 * ts_hash(fill, 0): which version a reader sees. */
static void tg_sees(struct pt_node *n, uint64_t gen, const char *name, uint8_t fill)
{
	struct cat_gen g;
	struct cat_inode root, file;
	struct cat_extent e;
	uint8_t want[CAT_HASH_LEN];
	OK(pggen_get(&n->ns, gen, &g, NULL));
	OK(pgns_lookup(&n->ns, g.series, g.name, &root));
	cr_assert_eq(root.ino, g.root);
	OK(pgns_lookup(&n->ns, root.ino, name, &file));
	cr_assert_eq(pgns_extents(&n->ns, file.ino, 0, &e, 1), 1);
	ts_hash(want, fill, 0);
	cr_assert(memcmp(e.hash, want, CAT_HASH_LEN) == 0, "%s is not the version of fill %d",
		  name, fill);
}

/* G10: the newest HELD generation kept as "<name>.rewrite-<id>" (into arg) */
static int tg_kept_fn(void *arg, const struct cat_gen *g)
{
	struct cat_gen *out = arg;
	if (g->state == GEN_HELD && strstr(g->name, GEN_REWRITE_SUFFIX) && g->id > out->id)
		*out = *g;
	return 0;
}

static struct cat_gen tg_kept(struct pt_node *x, uint64_t series)
{
	struct cat_gen kept = { 0 };
	OK(pggen_list_all(&x->ns, series, false, tg_kept_fn, &kept));
	cr_assert_neq(kept.id, 0, "a rolled-back version is kept (G10)");
	return kept;
}

Test(pggen, a_rewrite_keeps_a_backup_until_its_commit_and_every_rollback_restores_it)
{
	struct pt_node a, b, c;
	pt_join(&a, "a", 30000);
	pt_join(&b, "b", 30000);
	pt_join(&c, "c", 2000);
	uint64_t sa, sb;
	uint64_t gen = tg_save(&a, &b, CAT_ROOT_INO, "step-1", 1, &sa, &sb);
	tg_publish(&a, sa, 11, 2);
	tg_publish(&b, sb, 12, 2);
	tg_close_shards(&a, sa, &b, sb);
	OK(pggen_commit(&a.ns, gen, "dcp-metadata", false, NULL));
	cr_assert_eq(tg_refs(&a, 11, 0), 1);

	/* version 2 on b: a backup shares the chunks (counts up, no bytes) */
	OK(pggen_reopen(&b.ns, gen));
	FAILS(pggen_reopen(&a.ns, gen), EALREADY);
	struct cat_gen g;
	OK(pggen_get_sized(&a.ns, gen, &g));
	cr_assert_eq(g.state, GEN_OPEN);
	cr_assert_eq(g.version, 2);
	cr_assert(g.backup_root != 0 && g.backup_root != g.root);
	cr_assert_eq(g.files, 2, "the backup's files are not the generation's");
	cr_assert_eq(tg_refs(&a, 11, 0), 2);
	tg_checked(&a);
	tg_publish(&b, sb, 13, 1); /* b rewrites its shard */
	cr_assert_eq(tg_refs(&a, 12, 0), 1, "only the backup names the old shard");
	OK(pggen_commit(&a.ns, gen, "dcp-metadata", false, NULL));
	OK(pggen_get(&a.ns, gen, &g, NULL));
	cr_assert_eq(g.version, 2);
	cr_assert_eq(g.backup_root, 0);
	cr_assert_eq(tg_refs(&a, 12, 0), 0, "the backup dropped with the commit");
	cr_assert_eq(tg_refs(&a, 11, 0), 1);
	tg_sees(&b, gen, "__1_0.distcp", 13);
	tg_checked(&a);

	/* version 3, aborted: version 2 is back under the name, whole */
	uint64_t root2 = g.root;
	OK(pggen_reopen(&a.ns, gen));
	tg_publish(&a, sa, 14, 1);
	tg_sees(&b, gen, "__0_0.distcp", 14);
	struct cat_id_vec ids = { 0 };
	OK(pggen_end(&b.ns, gen, PGGEN_ABORT, "admin-abort", &ids));
	cr_assert_eq(ids.n, 3);
	cat_id_vec_free(&ids);
	OK(pggen_get(&a.ns, gen, &g, NULL));
	cr_assert_eq(g.state, GEN_COMMITTED);
	cr_assert_eq(g.version, 2);
	cr_assert_str_eq(g.rule, "admin-abort-restored");
	cr_assert(g.root != root2, "the backup's root is the generation's now");
	tg_sees(&b, gen, "__0_0.distcp", 11);
	tg_sees(&b, gen, "__1_0.distcp", 13);
	tg_checked(&b);

	/* version 3 again, held: rolled back as well, and kept HELD beside it
	 * as a generation of its own (G10) until rm */
	OK(pggen_reopen(&a.ns, gen));
	struct cat_inode shard;
	OK(pggen_get(&a.ns, gen, &g, NULL));
	OK(pgns_lookup(&a.ns, g.root, "__0_0.distcp", &shard));
	tg_publish(&a, shard.ino, 16, 1);
	bool held = true;
	OK(pggen_hold_ids(&a.ns, gen, "unmount", "open at unmount", NULL, &held));
	cr_assert(!held);
	cr_assert_eq(tg_state(&a, gen, NULL), GEN_COMMITTED);
	struct cat_gen kept = tg_kept(&a, CAT_ROOT_INO);
	char want[CAT_NAME_MAX + 1];
	cat_gen_suffixed_name("step-1", GEN_REWRITE_SUFFIX, kept.id, want);
	cr_assert_str_eq(kept.name, want);
	cr_assert_eq(kept.step, 1);
	cr_assert_str_eq(kept.rule, "unmount");
	cr_assert(strstr(kept.held, "version 3 of step-1, rolled back (open at unmount)") == kept.held,
		  "%s", kept.held);
	tg_sees(&b, kept.id, "__0_0.distcp", 16);
	tg_sees(&b, gen, "__0_0.distcp", 11);
	cr_assert_eq(tg_refs(&a, 16, 0), 1, "the kept version names its chunk");
	tg_checked(&a);
	OK(pggen_end(&b.ns, kept.id, PGGEN_DELETE, "admin", NULL));
	cr_assert_eq(tg_state(&a, kept.id, NULL), GEN_DELETED, "rm decides against it");
	tg_sees(&b, gen, "__0_0.distcp", 11);

	/* version 3 by c, which dies with a file of it open: rolled back too */
	OK(pggen_reopen(&c.ns, gen));
	OK(pggen_get(&c.ns, gen, &g, NULL));
	struct cat_inode f;
	OK(pgns_lookup(&c.ns, g.root, "__0_0.distcp", &f));
	OK(pggen_writing(&c.ns, f.ino, true, NULL));
	tg_publish(&c, f.ino, 15, 1);
	usleep(4300 * 1000);
	uint64_t dead[2], hl[4], lost[4];
	size_t n = 0, nh = 0, nl = 0;
	OK(lease_sweep(&a.lease, dead, 2, &n));
	cr_assert_eq(n, 1);
	OK(pggen_node_lost(&a.ns, dead[0], hl, 4, &nh, lost, 4, &nl));
	cr_assert_eq(nh, 0, "a new version is rolled back, not held");
	OK(pggen_get(&a.ns, gen, &g, NULL));
	cr_assert_eq(g.state, GEN_COMMITTED);
	cr_assert_eq(g.version, 2);
	cr_assert_str_eq(g.rule, "node-lost-restored");
	tg_sees(&a, gen, "__0_0.distcp", 11);
	/* G10: the rolled-back version 3 is kept HELD, its file with it */
	kept = tg_kept(&a, CAT_ROOT_INO);
	cr_assert_str_eq(kept.rule, "node-lost");
	OK(pgns_getattr(&a.ns, f.ino, &f));
	cr_assert_eq(tg_refs(&a, 15, 0), 1, "the kept version names its chunk");
	tg_sees(&a, kept.id, "__0_0.distcp", 15);
	tg_checked(&a);

	/* ended while rewritten: the backup goes with it */
	OK(pggen_reopen(&b.ns, gen));
	uint64_t before = tg_refs(&a, 11, 0); /* live, backup, unreleased rolled-back trees */
	OK(pggen_end(&a.ns, gen, PGGEN_DELETE, "admin", NULL));
	cr_assert_eq(tg_refs(&a, 11, 0), before - 1, "the backup's reference went with it");
	OK(pggen_get(&a.ns, gen, &g, NULL));
	cr_assert_eq(g.backup_root, 0);
	tg_checked(&a);
	pt_leave(&a);
	pt_leave(&b);
	pt_leave(&c);
}

/* X10: lost is a verdict re-checked. b dies with step-1 (COMMITTED) and
 * step-2 (OPEN, b's shard closed) naming chunks only b had: both lost, a
 * commit of step-2 refused. Another node then puts the same bytes on
 * BACKING (an HSDP replica's upload): both read as whole again at once,
 * step-2 commits, and the re-check clears step-1's mark, so its manifest
 * is written. */
Test(pggen, lost_is_a_verdict_rechecked_once_the_chunks_are_on_backing_again)
{
	struct pt_node a, b;
	struct cat_inode run;
	tg_nodes(&a, &b, 2000, &run);
	uint64_t sa, sb;
	uint64_t g1 = tg_save_on_b(&a, &b, run.ino, "step-1", 1, 0x77, &a);
	uint64_t g2 = tg_save(&a, &b, run.ino, "step-2", 2, &sa, &sb);
	tg_publish(&b, sb, 0x77, 2);
	tg_close_shards(&a, sa, &b, sb);

	uint64_t held[4], lost[4];
	size_t nh = 0, nl = 0;
	tg_b_dies(&a, held, &nh, lost, &nl);
	cr_assert_eq(nl, 2, "step-1 and step-2 name b's chunks");
	bool is_lost = false;
	cr_assert_eq(tg_state(&a, g1, &is_lost), GEN_COMMITTED);
	cr_assert(is_lost);
	FAILS(pggen_commit(&a.ns, g2, "dcp-metadata", false, NULL), ENODATA);
	uint64_t after = 0, undurable = 9;
	size_t checked = 0, cleared = 9;
	OK(pggen_lost_recheck(&a.ns, &after, 8, &checked, &cleared));
	cr_assert_eq(checked, 2);
	cr_assert_eq(cleared, 0, "nothing of them came back yet");

	for (int i = 0; i < 2; i++) { /* the same bytes put on BACKING by a */
		uint8_t h[CAT_HASH_LEN];
		ts_hash(h, 0x77, i);
		OK(pgns_chunk_uploaded(&a.ns, h));
	}
	cr_assert_eq(tg_state(&a, g1, &is_lost), GEN_COMMITTED);
	cr_assert(!is_lost, "every chunk of step-1 is on BACKING: read as whole at once");
	struct tg_list l = { .n = 0 };
	OK(pggen_list(&a.ns, run.ino, tg_collect, &l));
	cr_assert_eq(l.n, 2, "both listed for a resume again");
	uint64_t ids[4];
	uint32_t versions[4];
	size_t nu = 9;
	OK(pggen_undurable(&a.ns, ids, versions, 4, &nu));
	for (size_t i = 0; i < nu; i++)
		cr_assert_neq(ids[i], g1, "the mark stands until the re-check: step-1's manifest"
			      " is not to be written yet");
	OK(pggen_not_durable(&a.ns, g1, &undurable));
	cr_assert_eq(undurable, 1, "marked lost: not durable (review 33 F4)");
	OK(pggen_commit(&a.ns, g2, "dcp-metadata", false, NULL)); /* its commit re-checks */
	after = 0;
	OK(pggen_lost_recheck(&a.ns, &after, 8, &checked, &cleared));
	cr_assert_eq(checked, 1, "step-2's commit cleared its own mark");
	cr_assert_eq(cleared, 1);
	cr_assert_eq(after, 0, "a short batch: the next starts over");
	OK(pggen_not_durable(&a.ns, g1, &undurable));
	cr_assert_eq(undurable, 1, "step-1's manifest is to be written now");
	OK(pggen_undurable(&a.ns, ids, versions, 4, &nu));
	bool listed = false;
	for (size_t i = 0; i < nu; i++)
		listed = listed || ids[i] == g1;
	cr_assert(listed, "step-1's manifest is not to be written");
	pt_leave(&a);
	pt_leave(&b);
}

/* ---- a COMMIT whose answer is lost (pg.h P2) ----
 *
 * PQexec is interposed in the unit binary (here, once): a pass-through,
 * except that while tg_lose_commits > 0 a query ending in COMMIT is cut
 * off as by a PostgreSQL failover or a cut link: with tg_lose_before, the
 * socket is shut before it is sent (the server never commits); otherwise
 * the server commits and its answer is dropped. Either way pg.c sees a
 * broken connection after a COMMIT it sent. */
static int tg_lose_commits;
static bool tg_lose_before;

PGresult *PQexec(PGconn *conn, const char *query)
{
	static PGresult *(*real)(PGconn *, const char *);
	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "PQexec");
	size_t n = query ? strlen(query) : 0;
	bool commit = n >= 6 && strcmp(query + n - 6, "COMMIT") == 0;
	if (commit && tg_lose_before && __atomic_load_n(&tg_lose_commits, __ATOMIC_ACQUIRE) > 0) {
		__atomic_sub_fetch(&tg_lose_commits, 1, __ATOMIC_ACQ_REL);
		shutdown(PQsocket(conn), SHUT_RDWR);
		return real(conn, query); /* fails: the connection is gone */
	}
	PGresult *r = real(conn, query);
	if (commit && PQresultStatus(r) == PGRES_COMMAND_OK &&
	    __atomic_load_n(&tg_lose_commits, __ATOMIC_ACQUIRE) > 0) {
		__atomic_sub_fetch(&tg_lose_commits, 1, __ATOMIC_ACQ_REL);
		PQclear(r);
		shutdown(PQsocket(conn), SHUT_RDWR);
		return NULL;
	}
	return r;
}

static void tg_lose_next_commit(bool before)
{
	tg_lose_before = before;
	__atomic_store_n(&tg_lose_commits, 1, __ATOMIC_RELEASE);
}

static void tg_lost_one(struct pt_node *n, const struct pg_stats *before)
{
	struct pg_stats after;
	pg_get_stats(n->pg, &after);
	cr_assert_eq(__atomic_load_n(&tg_lose_commits, __ATOMIC_ACQUIRE), 0, "a COMMIT was cut off");
	cr_assert_eq(after.reconnects, before->reconnects + 1);
}

/* Files x and y under the root, each published with one chunk ts_hash(fill, 0). */
static void tg_two_files(struct pt_node *a, uint64_t *x, uint64_t *y)
{
	*x = tg_shard(a, CAT_ROOT_INO, "x");
	*y = tg_shard(a, CAT_ROOT_INO, "y");
	tg_publish(a, *x, 21, 1);
	tg_publish(a, *y, 22, 1);
}

static void tg_names(struct pt_node *a, uint64_t x_ino, uint64_t y_ino)
{
	struct cat_inode in;
	OK(pgns_lookup(&a->ns, CAT_ROOT_INO, "x", &in));
	cr_assert_eq(in.ino, x_ino, "x is inode %" PRIu64 ", not %" PRIu64, in.ino, x_ino);
	OK(pgns_lookup(&a->ns, CAT_ROOT_INO, "y", &in));
	cr_assert_eq(in.ino, y_ino, "y is inode %" PRIu64 ", not %" PRIu64, in.ino, y_ino);
}

/* Run again, an exchange swaps the names back and reports success: x and y
 * would serve each other's bytes. */
Test(pggen, an_exchange_whose_commit_answer_was_lost_is_done_once)
{
	struct pt_node a;
	pt_join(&a, "a", 30000);
	uint64_t x, y;
	tg_two_files(&a, &x, &y);
	struct pg_stats before;
	pg_get_stats(a.pg, &before);
	tg_lose_next_commit(false);
	OK(pggen_rename(&a.ns, CAT_ROOT_INO, "x", CAT_ROOT_INO, "y", CAT_RENAME_EXCHANGE, NULL,
			NULL, NULL, NULL));
	tg_lost_one(&a, &before);
	tg_names(&a, y, x);
	tg_checked(&a);
	pt_leave(&a);
}

/* A COMMIT that never reached the server: the question finds it did not
 * commit, and the exchange runs again, once. */
Test(pggen, an_exchange_whose_commit_never_arrived_runs_again)
{
	struct pt_node a;
	pt_join(&a, "a", 30000);
	uint64_t x, y;
	tg_two_files(&a, &x, &y);
	struct pg_stats before;
	pg_get_stats(a.pg, &before);
	tg_lose_next_commit(true);
	OK(pggen_rename(&a.ns, CAT_ROOT_INO, "x", CAT_ROOT_INO, "y", CAT_RENAME_EXCHANGE, NULL,
			NULL, NULL, NULL));
	tg_lost_one(&a, &before);
	tg_names(&a, y, x);
	/* and the next transaction goes on with the connection's next token */
	OK(pggen_rename(&a.ns, CAT_ROOT_INO, "x", CAT_ROOT_INO, "y", CAT_RENAME_EXCHANGE, NULL,
			NULL, NULL, NULL));
	tg_names(&a, x, y);
	tg_checked(&a);
	pt_leave(&a);
}

/* A reference count raised by a transaction (a rewrite's backup counts each
 * chunk once more, N1) is raised once, though the COMMIT's answer was lost:
 * run again, the reopen would find its generation open already. */
Test(pggen, a_reopen_whose_commit_answer_was_lost_counts_its_backup_once)
{
	struct pt_node a, b;
	pt_join(&a, "a", 30000);
	pt_join(&b, "b", 30000);
	uint64_t sa, sb;
	uint64_t gen = tg_save(&a, &b, CAT_ROOT_INO, "step-1", 1, &sa, &sb);
	tg_publish(&a, sa, 11, 2);
	tg_publish(&b, sb, 12, 2);
	tg_close_shards(&a, sa, &b, sb);
	OK(pggen_commit(&a.ns, gen, "dcp-metadata", false, NULL));
	cr_assert_eq(tg_refs(&a, 11, 0), 1);

	struct pg_stats before;
	pg_get_stats(b.pg, &before);
	tg_lose_next_commit(false);
	OK(pggen_reopen(&b.ns, gen));
	tg_lost_one(&b, &before);
	struct cat_gen g;
	OK(pggen_get_sized(&a.ns, gen, &g));
	cr_assert_eq(g.state, GEN_OPEN);
	cr_assert_eq(g.version, 2);
	cr_assert_eq(tg_refs(&a, 11, 0), 2, "one backup names the chunk, not two");
	cr_assert_eq(tg_refs(&a, 12, 1), 2);
	tg_checked(&a);
	pt_leave(&a);
	pt_leave(&b);
}

/* A sweep run again after its committed COMMIT's answer was lost finds the
 * node expired already and returns nobody: its generations would never be
 * settled. Asked instead, it returns the node it expired. */
Test(pggen, a_sweep_whose_commit_answer_was_lost_returns_the_node_it_expired)
{
	struct pt_node a, b;
	pt_join(&a, "a", 30000);
	pt_join(&b, "b", 1000);
	usleep(2300 * 1000); /* b's lease ran out, and its grace (lease.h L4) */
	struct pg_stats before;
	pg_get_stats(a.pg, &before);
	tg_lose_next_commit(false);
	uint64_t ids[2];
	size_t n = 0;
	OK(lease_sweep(&a.lease, ids, 2, &n));
	tg_lost_one(&a, &before);
	cr_assert_eq(n, 1, "the sweep that expired b returns it");
	cr_assert_eq(ids[0], b.lease.node_id);
	pt_leave(&a);
	pt_leave(&b);
}

/* pg.h P5: a generation's row with its files and bytes (what the rules read
 * per create, open for writing and rename inside a generation, and per
 * state= xattr) is one round trip, one snapshot: two before (gen_get, then
 * gen_stats). */
Test(pggen, a_sized_generation_read_is_one_round_trip)
{
	struct pt_node a, b;
	struct cat_inode run;
	tg_two_nodes(&a, &b, &run);
	uint64_t sa, sb;
	uint64_t gen = tg_save(&a, &b, run.ino, "step-100", 100, &sa, &sb);
	tg_publish(&a, sa, 0x31, 3);
	tg_publish(&b, sb, 0x32, 2);
	struct cat_gen g;
	OK(pggen_get_sized(&a.ns, gen, &g)); /* prepares */
	uint64_t t0 = tg_round_trips(&a);
	OK(pggen_get_sized(&a.ns, gen, &g));
	cr_assert_eq(tg_round_trips(&a) - t0, 1, "get_sized: %llu round trips",
		     (unsigned long long)(tg_round_trips(&a) - t0));
	cr_assert_eq(g.id, gen);
	cr_assert_eq(g.state, GEN_OPEN);
	cr_assert_eq(g.files, 2);
	cr_assert_eq(g.logical_bytes, 5000);
	FAILS(pggen_get_sized(&a.ns, gen + 1000, &g), ENOENT);
	pt_leave(&a);
	pt_leave(&b);
}

/* generation.h G6 on the shared engine: keep-latest-k (keep 2) listed
 * step-1..3 and chose step-1; then step-3 is lost with node b (its chunks
 * were on b only). The expire re-counts in its transaction and keeps
 * step-1; once step-3 is whole again (X10) it goes. A newer one removed
 * since the listing keeps an older one the same way. */
Test(pggen, an_expire_from_a_stale_listing_keeps_a_save_whose_newer_one_was_lost)
{
	struct pt_node a, b;
	struct cat_inode run;
	tg_nodes(&a, &b, 2000, &run);
	uint64_t sa, sb, g[3];
	for (int i = 0; i < 3; i++) {
		char name[16];
		snprintf(name, sizeof(name), "step-%d", i + 1);
		g[i] = tg_save(&a, &b, run.ino, name, (uint64_t)i + 1, &sa, &sb);
		tg_publish(i == 2 ? &b : &a, i == 2 ? sb : sa, (uint8_t)(0x60 + i), 2);
		tg_close_shards(&a, sa, &b, sb);
		OK(pggen_commit(&a.ns, g[i], "dcp-metadata", false, NULL));
	}
	struct tg_list l = { .n = 0 };
	OK(pggen_list(&a.ns, run.ino, tg_collect, &l));
	cr_assert_eq(l.n, 3, "the listing keep-latest-k decides from");

	uint64_t held[4], lost[4];
	size_t nh = 0, nl = 0;
	tg_b_dies(&a, held, &nh, lost, &nl);
	cr_assert_eq(nl, 1);
	cr_assert_eq(lost[0], g[2]);
	FAILS(pggen_expire(&a.ns, g[0], 2, "keep", NULL), EBUSY);
	bool is_lost = true;
	cr_assert_eq(tg_state(&a, g[0], &is_lost), GEN_COMMITTED);
	cr_assert(!is_lost);

	for (int i = 0; i < 2; i++) { /* step-3's bytes put on BACKING by a */
		uint8_t h[CAT_HASH_LEN];
		ts_hash(h, 0x62, i);
		OK(pgns_chunk_uploaded(&a.ns, h));
	}
	OK(pggen_expire(&a.ns, g[0], 2, "keep", NULL));
	cr_assert_eq(tg_state(&a, g[0], NULL), GEN_DELETED);

	/* keep 1 chose step-2; step-3 is removed (an admin's rm) before it runs */
	OK(pggen_end(&a.ns, g[2], PGGEN_DELETE, "admin", NULL));
	FAILS(pggen_expire(&a.ns, g[1], 1, "keep", NULL), EBUSY);
	cr_assert_eq(tg_state(&a, g[1], NULL), GEN_COMMITTED);
	int violations = 0;
	OK(pggen_check(&a.ns, &violations));
	cr_assert_eq(violations, 0);
	pt_leave(&a);
	pt_leave(&b);
}

/* generation.h G6, its durable part, on the shared engine: keep 1 listed
 * step-20 and chose step-10, the owner's newest durable save, while step-20
 * is not on BACKING yet, or was rewritten (v2, its new chunks only in a
 * node's cache) after its v1 was. The expire keeps step-10 in its
 * transaction until a newer save is durable; a save not durable goes as
 * before. */
Test(pggen, an_expire_keeps_the_owners_newest_durable_save_until_a_newer_one_is_durable)
{
	struct pt_node a, b;
	struct cat_inode run;
	tg_two_nodes(&a, &b, &run);
	uint64_t sa, sb, g[3];
	const uint64_t steps[3] = { 5, 10, 20 };
	for (int i = 0; i < 3; i++) {
		char name[16];
		snprintf(name, sizeof(name), "step-%llu", (unsigned long long)steps[i]);
		g[i] = tg_save(&a, &b, run.ino, name, steps[i], &sa, &sb);
		tg_publish(&a, sa, (uint8_t)(0x70 + i), 1);
		tg_publish(&b, sb, (uint8_t)(0x78 + i), 1);
		tg_close_shards(&a, sa, &b, sb);
		OK(pggen_commit(&a.ns, g[i], "dcp-metadata", false, NULL));
	}
	uint64_t undurable = 9;
	OK(pggen_durable_set(&a.ns, g[1], 1));
	OK(pggen_not_durable(&a.ns, g[1], &undurable));
	cr_assert_eq(undurable, 0);
	FAILS(pggen_expire(&a.ns, g[1], 1, "keep", NULL), EBUSY);
	cr_assert_eq(tg_state(&a, g[1], NULL), GEN_COMMITTED);
	OK(pggen_expire(&b.ns, g[0], 1, "keep", NULL)); /* step-5 was never durable */
	cr_assert_eq(tg_state(&a, g[0], NULL), GEN_DELETED);

	/* step-20 durable at v1, then rewritten on b: v2 is not durable */
	OK(pggen_durable_set(&b.ns, g[2], 1));
	OK(pggen_reopen(&b.ns, g[2]));
	tg_publish(&b, sb, 0x7f, 1);
	OK(pggen_commit(&b.ns, g[2], "dcp-metadata", false, NULL));
	struct cat_gen gen;
	OK(pggen_get(&a.ns, g[2], &gen, NULL));
	cr_assert_eq(gen.version, 2);
	OK(pggen_not_durable(&a.ns, g[2], &undurable));
	cr_assert_eq(undurable, 1, "v2's manifest is not on BACKING");
	FAILS(pggen_expire(&a.ns, g[1], 1, "keep", NULL), EBUSY);
	cr_assert_eq(tg_state(&b, g[1], NULL), GEN_COMMITTED);
	cr_assert(tg_named(&b, run.ino, "step-10"));

	/* v2 on BACKING: the pass its durability asks for deletes step-10 */
	OK(pggen_durable_set(&b.ns, g[2], 2));
	OK(pggen_expire(&a.ns, g[1], 1, "keep", NULL));
	cr_assert_eq(tg_state(&b, g[1], NULL), GEN_DELETED);
	int violations = 0;
	OK(pggen_check(&a.ns, &violations));
	cr_assert_eq(violations, 0);
	pt_leave(&a);
	pt_leave(&b);
}

/* pggen.h X13, on the shared engine: keep 2. b commits step-10 on chunks
 * only its cache has, and dies with step-5 open (its shard not closed); a
 * commits step-20 and step-30, not on BACKING yet. b's settlement marks
 * step-10 lost (shown HELD, X5) and holds step-5 (a first version, lost
 * too). keep-held ends step-5 as before, but not step-10 while none of the
 * newer saves is durable (its bytes may come back with b's cache, X10);
 * once step-20 is durable it goes. */
Test(pggen, keep_held_ends_a_lost_save_only_once_a_newer_save_of_its_owner_is_durable)
{
	struct pt_node a, b;
	struct cat_inode run;
	tg_nodes(&a, &b, 2000, &run);
	uint64_t sa, sb;
	uint64_t g10 = tg_save_on_b(&a, &b, run.ino, "step-10", 10, 0x90, &b);
	uint64_t g5 = tg_save(&a, &b, run.ino, "step-5", 5, &sa, &sb);
	tg_publish(&b, sb, 0x95, 1);
	OK(pggen_writing(&a.ns, sa, false, NULL)); /* b's shard stays open */
	uint64_t newer[2];
	for (int i = 0; i < 2; i++) {
		char name[16];
		snprintf(name, sizeof(name), "step-%d", 20 + 10 * i);
		newer[i] = tg_save(&a, &b, run.ino, name, 20 + 10 * (uint64_t)i, &sa, &sb);
		tg_publish(&a, sa, (uint8_t)(0xa0 + i), 1);
		tg_close_shards(&a, sa, &b, sb);
		OK(pggen_commit(&a.ns, newer[i], "dcp-metadata", false, NULL));
	}

	uint64_t held[4], lost[4];
	size_t nh = 0, nl = 0;
	tg_b_dies(&a, held, &nh, lost, &nl);
	cr_assert_eq(nh, 1);
	cr_assert_eq(held[0], g5);
	cr_assert_eq(nl, 2, "step-10 and step-5 name chunks only b had");
	bool is_lost = false;
	cr_assert_eq(tg_state(&a, g10, &is_lost), GEN_COMMITTED);
	cr_assert(is_lost);
	struct cat_gen shown;
	OK(pggen_get_sized(&a.ns, g10, &shown));
	cr_assert_eq(shown.state, GEN_HELD, "X5: shown as held");
	cr_assert(shown.lost, "and marked as a lost save, for keep-held (X13)");
	OK(pggen_get_sized(&a.ns, g5, &shown));
	cr_assert_eq(shown.state, GEN_HELD);
	cr_assert(!shown.lost, "a first version held node-lost is a held save, not a lost one");

	FAILS(pggen_expire(&a.ns, g10, 2, "keep-held", NULL), EBUSY);
	cr_assert_eq(tg_state(&a, g10, &is_lost), GEN_COMMITTED, "none of 20, 30 is durable");
	cr_assert(is_lost);
	cr_assert(tg_named(&a, run.ino, "step-10"), "kept under its name for b's cache");
	OK(pggen_expire(&a.ns, g5, 2, "keep-held", NULL)); /* a held save: today's rule */
	cr_assert_eq(tg_state(&a, g5, NULL), GEN_DELETED);

	/* step-20 on BACKING: the pass its durability runs ends step-10 */
	uint8_t h[CAT_HASH_LEN];
	ts_hash(h, 0xa0, 0);
	OK(pgns_chunk_uploaded(&a.ns, h));
	OK(pggen_durable_set(&a.ns, newer[0], 1));
	OK(pggen_expire(&a.ns, g10, 2, "keep-held", NULL));
	cr_assert_eq(tg_state(&a, g10, NULL), GEN_DELETED);
	cr_assert(!tg_named(&a, run.ino, "step-10"));
	int violations = 0;
	OK(pggen_check(&a.ns, &violations));
	cr_assert_eq(violations, 0);
	pt_leave(&a);
	pt_leave(&b);
}

/* ---- a single statement's answer lost (pg.h P5) ----
 *
 * PQexecPrepared is interposed too: while tg_lose_stmt names a prepared
 * statement, its next successful answer is dropped after the server ran
 * it (autocommitted, under pg_read), and the socket shut, as by a cut link.
 * pg_read then runs the body again. */
static const char *tg_lose_stmt;

PGresult *PQexecPrepared(PGconn *conn, const char *stmt, int n, const char *const *values,
			 const int *lengths, const int *formats, int result_format)
{
	static PGresult *(*real)(PGconn *, const char *, int, const char *const *, const int *,
				 const int *, int);
	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "PQexecPrepared");
	PGresult *r = real(conn, stmt, n, values, lengths, formats, result_format);
	const char *lose = __atomic_load_n(&tg_lose_stmt, __ATOMIC_ACQUIRE);
	if (lose && strcmp(stmt, lose) == 0 && PQresultStatus(r) == PGRES_TUPLES_OK &&
	    __atomic_compare_exchange_n(&tg_lose_stmt, &lose, NULL, false, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE)) {
		PQclear(r);
		shutdown(PQsocket(conn), SHUT_RDWR);
		return NULL;
	}
	return r;
}

/* pgns.h N9 (pg.h P5): a create whose answer was lost runs again on a new
 * connection; it must answer as its first run would have (the inode it
 * made), not -EEXIST for the name it just created (the trainer's open
 * with O_CREAT fails), and count the parent's link once. A name taken by
 * another call is still -EEXIST. */
Test(pggen, a_create_whose_answer_was_lost_answers_as_its_first_run)
{
	struct pt_node a;
	pt_join(&a, "a", 30000);
	struct cat_inode root0, root1, made, found;
	OK(pgns_getattr(&a.ns, CAT_ROOT_INO, &root0));
	const char *kinds[] = { "run", "x" };
	for (int k = 0; k < 2; k++) {
		uint32_t mode = k == 0 ? S_IFDIR | 0755 : S_IFREG | 0644;
		struct pg_stats before;
		pg_get_stats(a.pg, &before);
		__atomic_store_n(&tg_lose_stmt, "ns_create", __ATOMIC_RELEASE);
		int rc = pgns_create(&a.ns, CAT_ROOT_INO, kinds[k], mode, 1000, 1000, 0, NULL, &made);
		cr_assert_null(__atomic_load_n(&tg_lose_stmt, __ATOMIC_ACQUIRE), "no answer was lost");
		cr_assert_eq(rc, 0, "%s: the create run again answers %d", kinds[k], rc);
		struct pg_stats after;
		pg_get_stats(a.pg, &after);
		cr_assert_eq(after.reconnects, before.reconnects + 1);
		OK(pgns_lookup(&a.ns, CAT_ROOT_INO, kinds[k], &found));
		cr_assert_eq(made.ino, found.ino);
		cr_assert_eq(made.mode, mode);
		cr_assert_eq(made.uid, 1000);
		cr_assert_eq(made.nlink, k == 0 ? 2 : 1);
		FAILS(pgns_create(&a.ns, CAT_ROOT_INO, kinds[k], mode, 1000, 1000, 0, NULL, &made),
		      EEXIST);
	}
	OK(pgns_getattr(&a.ns, CAT_ROOT_INO, &root1));
	cr_assert_eq(root1.nlink, root0.nlink + 1, "the root's links: %u, then %u",
		     (unsigned)root0.nlink, (unsigned)root1.nlink);
	int violations = -1;
	OK(pgns_check(&a.ns, &violations));
	cr_assert_eq(violations, 0);
	tg_checked(&a);
	pt_leave(&a);
}

/* X14 (generation.h G9 on -o meta=): b's last close of its shard fails
 * (pggen_failed, then its ns_writing row goes, as fs/ns.c does): every rule
 * but a decision is refused in the commit's transaction, nothing changed,
 * and pggen_unsettled names the file as one node does; the flag outlives
 * b's lease (its row is in the shared catalog). A reopen for writing clears
 * it (a retry, whose failed close would set it again), so does the file's
 * removal; a decision ("admin") commits and clears it, a rewrite's commit
 * (a backup to drop) is refused the same way. */
Test(pggen, a_failed_close_holds_its_save_from_every_rule_but_a_decision)
{
	struct pt_node a, b;
	struct cat_inode run;
	tg_nodes(&a, &b, 2000, &run);
	uint64_t sa, sb;
	uint64_t gen = tg_save(&a, &b, run.ino, "step-100", 100, &sa, &sb);
	tg_publish(&a, sa, 31, 2);
	tg_publish(&a, sb, 32, 1); /* held by a: b's death loses nothing (X2) */
	OK(pggen_failed(&b.ns, sb)); /* b's write of its second chunk failed */
	tg_close_shards(&a, sa, &b, sb);
	char why[GEN_HELD_MAX];
	static const char *const rules[] = { "dcp-metadata", "hf-trainer-state", "next-gen",
					     "content", "unmount" };
	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
		FAILS(pggen_commit(&a.ns, gen, rules[i], false, NULL), ENOTRECOVERABLE);
	cr_assert_eq(tg_state(&b, gen, NULL), GEN_OPEN, "a refused commit changes nothing");
	OK(pggen_unsettled(&a.ns, gen, why, sizeof(why)));
	cr_assert(strncmp(why, GEN_FAILED_REASON, strlen(GEN_FAILED_REASON)) == 0, "%s", why);
	cr_assert(strstr(why, "\"__1_0.distcp\"") != NULL, "the reason names the file: %s", why);

	/* the hold fs/gen.c makes, then b lost: the flag stays */
	OK(pggen_hold(&a.ns, gen, "dcp-metadata", why));
	uint64_t held[4], lost[4];
	size_t nh = 0, nl = 0;
	tg_b_dies(&a, held, &nh, lost, &nl);
	OK(pggen_unsettled(&a.ns, gen, why, sizeof(why)));
	cr_assert(strstr(why, "\"__1_0.distcp\"") != NULL, "after b was lost: %s", why);
	FAILS(pggen_commit(&a.ns, gen, "dcp-metadata", true, NULL), ENOTRECOVERABLE);
	cr_assert_eq(tg_state(&a, gen, NULL), GEN_HELD);
	/* a decision takes it as it is, and clears the flag */
	OK(pggen_commit(&a.ns, gen, "admin", true, NULL));
	cr_assert_eq(tg_state(&a, gen, NULL), GEN_COMMITTED);
	OK(pggen_unsettled(&a.ns, gen, why, sizeof(why)));
	cr_assert_str_eq(why, "");

	/* a rewrite (version 2) of it with a failed file: refused, then a
	 * retried write of that file clears it and a rule commits */
	OK(pggen_reopen(&a.ns, gen));
	OK(pggen_writing(&a.ns, sa, true, NULL));
	tg_publish(&a, sa, 33, 1);
	OK(pggen_failed(&a.ns, sa));
	OK(pggen_writing(&a.ns, sa, false, NULL));
	FAILS(pggen_commit(&a.ns, gen, "dcp-metadata", false, NULL), ENOTRECOVERABLE);
	struct cat_gen g;
	OK(pggen_get(&a.ns, gen, &g, NULL));
	cr_assert_eq(g.state, GEN_OPEN);
	cr_assert(g.backup_root != 0, "the refused commit kept the backup");
	OK(pggen_writing(&a.ns, sa, true, NULL)); /* the retry */
	OK(pggen_unsettled(&a.ns, gen, why, sizeof(why)));
	cr_assert_str_eq(why, "", "a reopen for writing clears the flag");
	tg_publish(&a, sa, 34, 1);
	OK(pggen_writing(&a.ns, sa, false, NULL));
	OK(pggen_commit(&a.ns, gen, "dcp-metadata", false, NULL));
	OK(pggen_get(&a.ns, gen, &g, NULL));
	cr_assert_eq(g.state, GEN_COMMITTED);
	cr_assert_eq(g.version, 2);

	/* a removed failed file no longer holds its save */
	uint64_t sc, sd;
	uint64_t gen2 = tg_save(&a, &a, run.ino, "step-200", 200, &sc, &sd);
	OK(pggen_failed(&a.ns, sd));
	tg_close_shards(&a, sc, &a, sd);
	FAILS(pggen_commit(&a.ns, gen2, "dcp-metadata", false, NULL), ENOTRECOVERABLE);
	struct cat_inode root2;
	OK(pgns_lookup(&a.ns, run.ino, "step-200", &root2));
	OK(pgns_unlink(&a.ns, root2.ino, "__1_0.distcp", NULL));
	OK(pggen_unsettled(&a.ns, gen2, why, sizeof(why)));
	cr_assert_str_eq(why, "");
	OK(pggen_commit(&a.ns, gen2, "dcp-metadata", false, NULL));
	tg_checked(&a);
	pt_leave(&a);
	pt_leave(&b);
}

/* X15 (fs/ns.h 14): b's row dropped at its shard's flush lets a commit, and
 * comes back with a later write through the handle still open
 * (pggen_writing_resume), which holds the commit again; it leaves the failed
 * flag another close set (X14), which only an open for writing clears. */
Test(pggen, a_resumed_writer_holds_the_commit_and_keeps_the_failed_flag)
{
	struct pt_node a, b;
	struct cat_inode run;
	tg_two_nodes(&a, &b, &run);
	uint64_t sa, sb;
	uint64_t gen = tg_save(&a, &b, run.ino, "step-100", 100, &sa, &sb);
	tg_publish(&b, sb, 41, 1);
	tg_close_shards(&a, sa, &b, sb); /* b's flush parked its row */
	OK(pggen_writing_resume(&b.ns, sb)); /* b writes again through a dup */
	uint64_t writers = 0;
	FAILS(pggen_commit(&a.ns, gen, "dcp-metadata", false, &writers), EBUSY);
	cr_assert_eq(writers, 1, "the resumed row counts: %" PRIu64, writers);
	OK(pggen_writing(&b.ns, sb, false, NULL)); /* its flush again */
	OK(pggen_failed(&a.ns, sa)); /* a's write of its shard failed meanwhile */
	OK(pggen_writing_resume(&a.ns, sa));
	char why[GEN_HELD_MAX];
	OK(pggen_unsettled(&a.ns, gen, why, sizeof(why)));
	cr_assert(strstr(why, "\"__0_0.distcp\"") != NULL, "a resume keeps the flag: %s", why);
	OK(pggen_writing(&a.ns, sa, false, NULL));
	FAILS(pggen_commit(&a.ns, gen, "dcp-metadata", false, NULL), ENOTRECOVERABLE);
	OK(pggen_writing(&a.ns, sa, true, NULL)); /* a new open: the retry */
	OK(pggen_unsettled(&a.ns, gen, why, sizeof(why)));
	cr_assert_str_eq(why, "", "an open for writing clears it");
	OK(pggen_writing(&a.ns, sa, false, NULL));
	OK(pggen_commit(&a.ns, gen, "dcp-metadata", false, NULL));
	cr_assert_eq(tg_state(&a, gen, NULL), GEN_COMMITTED);
	tg_checked(&a);
	pt_leave(&a);
	pt_leave(&b);
}

/* X12, X15 (review of s39's parking, fs/ns.h 14): b's flush parks its row
 * of its shard (pggen_writing_park): the commit no longer waits for it
 * (X1), but keep-latest-k's expire still counts the handle (the ns_open
 * row's parked mark), through a resume and a second parking, until b's last
 * close, whose statement reads the save COMMITTED (fs/gen.h 18: b asks for
 * keep then). A node lost with a parked handle holds nothing (X2), and its
 * mark keeps nothing either. */
Test(pggen, a_parked_write_handle_keeps_its_committed_save_from_keep_only)
{
	struct pt_node a, b;
	struct cat_inode run;
	tg_nodes(&a, &b, 2000, &run);
	uint64_t sa, sb, sa2, sb2;
	uint64_t gen1 = tg_save(&a, &b, run.ino, "step-100", 100, &sa, &sb);
	OK(pggen_writing(&a.ns, sa, false, NULL));
	OK(pggen_writing_park(&b.ns, sb)); /* b's flush: its dup stays open */
	OK(pggen_commit(&a.ns, gen1, "dcp-metadata", false, NULL));
	uint64_t gen2 = tg_save(&a, &b, run.ino, "step-200", 200, &sa2, &sb2);
	tg_close_shards(&a, sa2, &b, sb2);
	OK(pggen_commit(&a.ns, gen2, "dcp-metadata", false, NULL));
	FAILS(pggen_expire(&a.ns, gen1, 1, "keep", NULL), EBUSY);
	cr_assert_eq(tg_state(&a, gen1, NULL), GEN_COMMITTED, "kept for b's parked handle");
	OK(pggen_writing_resume(&b.ns, sb)); /* a write through the dup */
	FAILS(pggen_expire(&a.ns, gen1, 1, "keep", NULL), EBUSY);
	OK(pggen_writing_park(&b.ns, sb)); /* its flush again */
	FAILS(pggen_expire(&a.ns, gen1, 1, "keep", NULL), EBUSY);
	uint64_t of = 0;
	int state = -1;
	OK(pggen_writing_gen(&b.ns, sb, false, &of, &state)); /* b's last close */
	cr_assert_eq(of, gen1);
	cr_assert_eq(state, GEN_COMMITTED, "the close reads the save another node committed");
	OK(pggen_expire(&a.ns, gen1, 1, "keep", NULL));
	cr_assert_eq(tg_state(&a, gen1, NULL), GEN_DELETED);

	/* b lost with a handle parked: nothing held, and keep goes on */
	uint64_t sa3, sb3, sa4, sb4;
	uint64_t gen3 = tg_save(&a, &b, run.ino, "step-300", 300, &sa3, &sb3);
	OK(pggen_writing(&a.ns, sa3, false, NULL));
	OK(pggen_writing_park(&b.ns, sb3));
	OK(pggen_commit(&a.ns, gen3, "dcp-metadata", false, NULL));
	uint64_t gen4 = tg_save(&a, &b, run.ino, "step-400", 400, &sa4, &sb4);
	tg_close_shards(&a, sa4, &b, sb4);
	OK(pggen_commit(&a.ns, gen4, "dcp-metadata", false, NULL));
	FAILS(pggen_expire(&a.ns, gen3, 1, "keep", NULL), EBUSY);
	uint64_t held[4], lost[4];
	size_t nh = 0, nl = 0;
	tg_b_dies(&a, held, &nh, lost, &nl);
	cr_assert_eq(nh, 0, "a parked handle holds nothing");
	cr_assert_eq(nl, 0);
	OK(pggen_expire(&a.ns, gen3, 1, "keep", NULL));
	cr_assert_eq(tg_state(&a, gen3, NULL), GEN_DELETED);
	cr_assert_eq(tg_state(&a, gen4, NULL), GEN_COMMITTED);
	tg_checked(&a);
	pt_leave(&a);
	pt_leave(&b);
}
