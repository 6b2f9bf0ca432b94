/* Unit tests for keep-latest-k across nodes: fs/gen.c's keep pass on the
 * shared engine, one node at a time (the cluster duty "keep",
 * cat_duty_take), with two struct cat (two nodes: each its own local
 * SQLite, both on one private PostgreSQL, tests/unit/pgtest.h) and a
 * generation policy with its thread on each.
 *
 * keep=2, steps 1..5 committed alternately by the two nodes: a pinned one
 * stays, a held one goes once 2 newer are committed, and exactly the newest
 * 2 unpinned committed ones remain whichever node committed them. While one
 * node holds the duty the other's pass waits, and runs once it is dropped.
 * The duty itself: one holder at a time, free again once dropped; alone
 * always taken. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog.h"
#include "gen.h"
#include "generation.h"
#include "node.h"
#include "pgtest.h"
#include "support.h"

TestSuite(catshared_keep, .init = pt_start, .fini = pt_stop, .timeout = 90);

struct tck_node {
	struct pt_cat pc;
	struct node_table *nodes;
	struct gen_policy *g;
};

static int tck_no_read(void *arg, uint64_t ino, uint64_t off, size_t len, void *buf)
{
	return -EIO;
}

/* A node with keep=2 and its policy's thread running. */
static void tck_open(struct tck_node *n, const char *name)
{
	pt_cat_open(&n->pc, name, 30000, NULL, NULL);
	struct gen_options o = { .keep = 2, .quiet_s = 60, .abandon_s = 60 };
	OK(node_table_new(n->pc.cat, &n->nodes));
	struct gen_deps d = { .cat = n->pc.cat, .nodes = n->nodes, .read = tck_no_read };
	OK(gen_policy_new(&d, &o, &n->g));
	OK(gen_policy_start(n->g));
}

static void tck_close(struct tck_node *n)
{
	gen_policy_shutdown(n->g);
	gen_policy_free(n->g);
	node_table_free(n->nodes);
	pt_cat_close(&n->pc);
}

static int tck_state(struct tck_node *n, uint64_t id)
{
	struct cat_gen g;
	OK(cat_gen_get_brief(n->pc.cat, id, &g));
	return g.state;
}

/* Polls generation id on n until it is (want) or is not (!want) in state,
 * up to 10 s: the keep passes run on the policies' threads, on a database
 * that a loaded machine makes slow. */
static bool tck_wait(struct tck_node *n, uint64_t id, int state, bool want)
{
	for (int waited = 0; waited <= 10000; waited += 10) {
		if ((tck_state(n, id) == state) == want)
			return true;
		usleep(10 * 1000);
	}
	return false;
}

/* Polls for n to take the keep duty, up to 5 s (well inside the 30 s term a
 * holder that never dropped it would keep it for): a pass changes the
 * generations it removes first and drops the duty when it is done. */
static bool tck_take_duty(struct tck_node *n)
{
	for (int waited = 0; waited <= 5000; waited += 10) {
		bool taken = false;
		OK(cat_duty_take(n->pc.cat, "keep", 30000, &taken));
		if (taken)
			return true;
		usleep(10 * 1000);
	}
	return false;
}

/* step-<step> in series run, made by n with one file in it; committed by
 * n's policy unless hold (then held by n, as an abandoned save would be). */
static uint64_t tck_save(struct tck_node *n, uint64_t run, uint64_t step, bool hold)
{
	char name[32];
	snprintf(name, sizeof(name), "step-%llu", (unsigned long long)step);
	struct cat_gen_spec spec = { name, step };
	struct cat_inode in;
	uint64_t gen = 0, in_gen = 0;
	OK(cat_create_in_gen(n->pc.cat, run, name, S_IFDIR | 0755, 0, 0, 0, NULL, &spec, &in,
			     &gen));
	gen_started(n->g, gen, run, false, getpid());
	struct cat_inode f;
	OK(cat_create_in_gen(n->pc.cat, in.ino, "model.pt", S_IFREG | 0644, 0, 0, 0, NULL, NULL, &f,
			     &in_gen));
	cr_assert_eq(in_gen, gen);
	if (hold) {
		bool held = false;
		OK(cat_gen_hold(n->pc.cat, gen, "abandoned", "abandoned in a test", NULL, NULL,
				&held));
		cr_assert(held);
		return gen;
	}
	OK(gen_commit_explicit(n->g, gen, "explicit"));
	cr_assert(tck_wait(n, gen, GEN_COMMITTED, true), "%s committed", name);
	return gen;
}

/* The committed generations of series run as n lists them, by step. */
static int tck_add_committed(void *arg, const struct cat_gen *gen)
{
	return gen->state == GEN_COMMITTED ? cat_gen_vec_add(arg, gen) : 0;
}

static void tck_committed_steps(struct tck_node *n, uint64_t run, char *out, size_t size)
{
	struct cat_gen_vec l = { 0 };
	OK(cat_gen_list_brief(n->pc.cat, run, false, tck_add_committed, &l));
	out[0] = '\0';
	for (size_t step = 1; step <= 16; step++)
		for (size_t i = 0; i < l.n; i++)
			if (l.v[i].step == step)
				snprintf(out + strlen(out), size - strlen(out), "%s%zu", out[0] ? " " : "",
					 step);
	cat_gen_vec_free(&l);
}

Test(catshared_keep, two_nodes_saving_alternately_keep_the_newest_two_cluster_wide)
{
	struct tck_node a, b;
	tck_open(&a, "a");
	tck_open(&b, "b");
	struct cat_inode run;
	OK(cat_create(a.pc.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, 0, 0, 0, NULL, &run));

	uint64_t s1 = tck_save(&a, run.ino, 1, false);
	OK(cat_gen_pin(b.pc.cat, s1, true)); /* pinned from the other node */
	uint64_t s2 = tck_save(&b, run.ino, 2, true);
	uint64_t s3 = tck_save(&a, run.ino, 3, false);
	usleep(300 * 1000); /* both passes have run: nothing to do yet */
	cr_assert_eq(tck_state(&b, s2), GEN_HELD, "one newer committed: the held save stays");
	uint64_t s4 = tck_save(&b, run.ino, 4, false);
	cr_assert(tck_wait(&a, s2, GEN_HELD, false), "two newer committed: the held save goes");
	uint64_t s5 = tck_save(&a, run.ino, 5, false);
	cr_assert(tck_wait(&b, s3, GEN_COMMITTED, false), "b's pass or a's removes a's step 3");
	usleep(300 * 1000); /* a second pass, had one been racing, would show here */
	char steps[64];
	tck_committed_steps(&a, run.ino, steps, sizeof(steps));
	cr_assert_str_eq(steps, "1 4 5", "a lists %s", steps);
	tck_committed_steps(&b, run.ino, steps, sizeof(steps));
	cr_assert_str_eq(steps, "1 4 5", "b lists %s", steps);
	cr_assert_eq(tck_state(&b, s1), GEN_COMMITTED, "pinned: kept");
	cr_assert_eq(tck_state(&a, s4), GEN_COMMITTED);
	cr_assert_eq(tck_state(&a, s5), GEN_COMMITTED);
	struct cat_gen g;
	FAILS(cat_gen_find(b.pc.cat, run.ino, "step-3", &g), ENOENT);
	FAILS(cat_gen_find(a.pc.cat, run.ino, "step-2", &g), ENOENT);

	/* b holds the duty (a long pass): a's pass after its commit waits for it */
	cr_assert(tck_take_duty(&b), "a's last pass kept the duty");
	bool taken = false;
	OK(cat_duty_take(a.pc.cat, "keep", 30000, &taken));
	cr_assert(!taken, "one holder at a time");
	uint64_t s6 = tck_save(&a, run.ino, 6, false);
	usleep(500 * 1000); /* a's thread retries each tick, refused each time */
	cr_assert_eq(tck_state(&a, s4), GEN_COMMITTED, "a's pass waits while b holds the duty");
	OK(cat_duty_drop(b.pc.cat, "keep"));
	cr_assert(tck_wait(&a, s4, GEN_COMMITTED, false), "a's pass ran once b dropped the duty");
	tck_committed_steps(&b, run.ino, steps, sizeof(steps));
	cr_assert_str_eq(steps, "1 5 6", "b lists %s", steps);
	cr_assert_eq(tck_state(&b, s6), GEN_COMMITTED);
	cr_assert(tck_take_duty(&b), "a's pass dropped the duty when done");
	OK(cat_duty_drop(b.pc.cat, "keep"));
	OK(cat_check(a.pc.cat));
	tck_close(&a);
	tck_close(&b);
}

/* step-<step> in series run committed by rule (a bare root, uid 0), on
 * the shared engine's catalog directly */
static uint64_t tck_commit_by(struct pt_cat *pc, uint64_t run, uint64_t step, const char *rule)
{
	char name[32];
	snprintf(name, sizeof(name), "step-%llu", (unsigned long long)step);
	struct cat_gen_spec spec = { name, step };
	struct cat_inode in;
	uint64_t gen = 0;
	OK(cat_create_in_gen(pc->cat, run, name, S_IFDIR | 0755, 0, 0, 0, NULL, &spec, &in, &gen));
	OK(cat_gen_commit(pc->cat, gen, rule));
	return gen;
}

/* generation.h G6 and pggen.h X12 on the shared engine (review 42 F1, F3):
 * G_KEEP_NEWER counts only strongly committed newer saves, and never
 * expires the owner's most recently committed save. */
Test(catshared_keep, expire_counts_only_strong_commits_and_keeps_the_last_commit)
{
	struct pt_cat a;
	pt_cat_open(&a, "a", 30000, NULL, NULL);
	struct cat_inode run;
	OK(cat_create(a.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, 0, 0, 0, NULL, &run));
	struct cat_gen g;
	uint64_t s1 = tck_commit_by(&a, run.ino, 1, "marker");
	uint64_t s2 = tck_commit_by(&a, run.ino, 2, "unmount");
	uint64_t s3 = tck_commit_by(&a, run.ino, 3, "next-gen");
	FAILS(cat_gen_expire(a.cat, s1, 1, "keep", NULL, NULL), EBUSY);
	FAILS(cat_gen_expire(a.cat, s2, 1, "keep", NULL, NULL), EBUSY);
	uint64_t s4 = tck_commit_by(&a, run.ino, 4, "content");
	OK(cat_gen_expire(a.cat, s1, 1, "keep", NULL, NULL));
	OK(cat_gen_expire(a.cat, s2, 1, "keep", NULL, NULL));
	OK(cat_gen_expire(a.cat, s3, 1, "keep", NULL, NULL));
	OK(cat_gen_get_brief(a.cat, s1, &g));
	cr_assert_eq(g.state, GEN_DELETED);
	/* a rollback: step-3' committed after step-4 stays until the next commit */
	uint64_t s35 = tck_commit_by(&a, run.ino, 3, "marker");
	FAILS(cat_gen_expire(a.cat, s35, 1, "keep", NULL, NULL), EBUSY);
	OK(cat_gen_get_brief(a.cat, s35, &g));
	cr_assert_eq(g.state, GEN_COMMITTED);
	tck_commit_by(&a, run.ino, 5, "marker");
	OK(cat_gen_expire(a.cat, s35, 1, "keep", NULL, NULL));
	OK(cat_gen_get_brief(a.cat, s4, &g));
	cr_assert_eq(g.state, GEN_COMMITTED);
	OK(cat_check(a.cat));
	pt_cat_close(&a);
}

/* A statement on the shared catalog's database. */
static void tck_sql(const char *sql)
{
	PGconn *c = PQconnectdb(pt_url);
	cr_assert_eq(PQstatus(c), CONNECTION_OK, "%s", PQerrorMessage(c));
	PGresult *r = PQexec(c, sql);
	cr_assert_eq(PQresultStatus(r), PGRES_COMMAND_OK, "%s: %s", sql, PQerrorMessage(c));
	PQclear(r);
	PQfinish(c);
}

/* generation.h G6 on the shared engine (review 42, a suspicion): a HELD
 * save whose manifest is on BACKING (a rebuild's conflict:
 * pggen_apply_manifest_held, durable_version = version) is durable, so
 * keep-held ends it only once a newer save of its owner is durable too. */
Test(catshared_keep, expire_keeps_a_durable_held_save_until_a_newer_one_is_durable)
{
	struct pt_cat a;
	char sql[160];
	pt_cat_open(&a, "a", 30000, NULL, NULL);
	struct cat_inode run, in;
	OK(cat_create(a.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, 0, 0, 0, NULL, &run));
	struct cat_gen_spec spec = { "step-1", 1 };
	uint64_t held = 0;
	OK(cat_create_in_gen(a.cat, run.ino, "step-1", S_IFDIR | 0755, 0, 0, 0, NULL, &spec, &in,
			     &held));
	OK(cat_gen_hold(a.cat, held, "rebuild", "rebuild: conflicts", NULL, NULL, NULL));
	snprintf(sql, sizeof(sql), "UPDATE ns_generations SET durable_version = version WHERE id = %llu",
		 (unsigned long long)held);
	tck_sql(sql);
	tck_commit_by(&a, run.ino, 2, "marker");
	uint64_t s3 = tck_commit_by(&a, run.ino, 3, "marker");
	FAILS(cat_gen_expire(a.cat, held, 1, "keep-held", NULL, NULL), EBUSY);
	struct cat_gen g;
	OK(cat_gen_get_brief(a.cat, held, &g));
	cr_assert_eq(g.state, GEN_HELD);
	snprintf(sql, sizeof(sql), "UPDATE ns_generations SET durable_version = version WHERE id = %llu",
		 (unsigned long long)s3);
	tck_sql(sql);
	OK(cat_gen_expire(a.cat, held, 1, "keep-held", NULL, NULL));
	OK(cat_gen_get_brief(a.cat, held, &g));
	cr_assert_eq(g.state, GEN_DELETED);
	OK(cat_check(a.cat));
	pt_cat_close(&a);
}

/* generation.h G12 on the shared engine (pggen.h X16, review 47 F3): a
 * COMMITTED save naming a chunk its node found lost before its upload is
 * HELD (rule lost-chunk, the chunk and a file named), so keep-latest-k no
 * longer counts it and the older save stays. Not while BACKING has the
 * chunk, nor while another live node holds it (its copy may still go up). */
Test(catshared_keep, a_save_naming_a_lost_chunk_is_held_and_not_counted_by_keep)
{
	struct pt_cat a, b;
	char sql[512];
	pt_cat_open(&a, "a", 30000, NULL, NULL);
	pt_cat_open(&b, "b", 30000, NULL, NULL);
	struct cat_inode run, in, f;
	OK(cat_create(a.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, 0, 0, 0, NULL, &run));
	uint64_t s1 = tck_commit_by(&a, run.ino, 1, "marker");
	struct cat_gen_spec spec = { "step-2", 2 };
	uint64_t s2 = 0, fg = 0;
	OK(cat_create_in_gen(a.cat, run.ino, "step-2", S_IFDIR | 0755, 0, 0, 0, NULL, &spec, &in, &s2));
	OK(cat_create_in_gen(a.cat, in.ino, "model.pt", S_IFREG | 0644, 0, 0, 0, NULL, NULL, &f, &fg));
	uint8_t hash[CAT_HASH_LEN];
	memset(hash, 0xab, sizeof(hash));
	char hex[2 * CAT_HASH_LEN + 1];
	for (size_t i = 0; i < CAT_HASH_LEN; i++)
		snprintf(hex + 2 * i, 3, "%02x", hash[i]);
	snprintf(sql, sizeof(sql), "INSERT INTO ns_chunks(hash, plain_len, codec, stored_len, refcount,"
		 " uploaded, holder) VALUES (decode('%s', 'hex'), 10, 0, 10, 1, true,"
		 " (SELECT id FROM ckpt_nodes WHERE name = 'a' AND state = 'live'));"
		 " INSERT INTO ns_extents(ino, off, len, hash, chunk_off) VALUES (%llu, 0, 10,"
		 " decode('%s', 'hex'), 0)", hex, (unsigned long long)f.ino, hex);
	tck_sql(sql);
	OK(cat_gen_commit(a.cat, s2, "marker"));
	uint64_t s3 = tck_commit_by(&a, run.ino, 3, "marker");
	snprintf(sql, sizeof(sql), "UPDATE ns_generations SET durable_version = version WHERE id IN"
		 " (%llu, %llu)", (unsigned long long)s1, (unsigned long long)s3);
	tck_sql(sql);
	struct cat_gen g;
	/* on BACKING already (another node's upload of the same bytes): not lost */
	cr_assert_eq(cat_gen_hold_lost_chunk(a.cat, hash), 0);
	/* held by another live node, whose copy may still be uploaded */
	snprintf(sql, sizeof(sql), "UPDATE ns_chunks SET uploaded = false, holder = (SELECT id FROM"
		 " ckpt_nodes WHERE name = 'b' AND state = 'live') WHERE hash = decode('%s', 'hex')", hex);
	tck_sql(sql);
	cr_assert_eq(cat_gen_hold_lost_chunk(a.cat, hash), 0);
	OK(cat_gen_get_brief(a.cat, s2, &g));
	cr_assert_eq(g.state, GEN_COMMITTED);
	/* this node's only copy, lost: step-2 held, step-1 no longer expirable */
	snprintf(sql, sizeof(sql), "UPDATE ns_chunks SET holder = (SELECT id FROM ckpt_nodes WHERE"
		 " name = 'a' AND state = 'live') WHERE hash = decode('%s', 'hex')", hex);
	tck_sql(sql);
	cr_assert_eq(cat_gen_hold_lost_chunk(a.cat, hash), 1);
	OK(cat_gen_get(a.cat, s2, &g));
	cr_assert_eq(g.state, GEN_HELD);
	cr_assert_str_eq(g.rule, GEN_LOST_CHUNK_RULE);
	cr_assert(strstr(g.held, hex) && strstr(g.held, GEN_LOST_CHUNK_REASON) &&
		  strstr(g.held, "\"model.pt\""), "held reason: %s", g.held);
	FAILS(cat_gen_expire(a.cat, s1, 2, "keep", NULL, NULL), EBUSY);
	OK(cat_gen_get_brief(b.cat, s1, &g));
	cr_assert_eq(g.state, GEN_COMMITTED);
	/* again: nothing COMMITTED names it any more */
	cr_assert_eq(cat_gen_hold_lost_chunk(b.cat, hash), 0);
	OK(cat_check(a.cat));
	pt_cat_close(&b);
	pt_cat_close(&a);
}

/* pggen.h X16/X17: node a finds a chunk of an OPEN save lost before its
 * upload; node b's commit of that save (by any rule but the admin's) is
 * refused in its own transaction, and the hold's reason names the chunk,
 * the file and node a. Once BACKING has the chunk the rule commits it. */
Test(catshared_keep, a_chunk_one_node_found_lost_refuses_another_nodes_commit)
{
	struct pt_cat a, b;
	char sql[512];
	pt_cat_open(&a, "a", 30000, NULL, NULL);
	pt_cat_open(&b, "b", 30000, NULL, NULL);
	struct cat_inode run, in, f;
	OK(cat_create(a.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, 0, 0, 0, NULL, &run));
	struct cat_gen_spec spec = { "step-2", 2 };
	uint64_t s2 = 0, fg = 0;
	OK(cat_create_in_gen(a.cat, run.ino, "step-2", S_IFDIR | 0755, 0, 0, 0, NULL, &spec, &in, &s2));
	OK(cat_create_in_gen(a.cat, in.ino, "model.pt", S_IFREG | 0644, 0, 0, 0, NULL, NULL, &f, &fg));
	uint8_t hash[CAT_HASH_LEN];
	memset(hash, 0xcd, sizeof(hash));
	char hex[2 * CAT_HASH_LEN + 1];
	for (size_t i = 0; i < CAT_HASH_LEN; i++)
		snprintf(hex + 2 * i, 3, "%02x", hash[i]);
	snprintf(sql, sizeof(sql), "INSERT INTO ns_chunks(hash, plain_len, codec, stored_len, refcount,"
		 " uploaded, holder) VALUES (decode('%s', 'hex'), 10, 0, 10, 1, false,"
		 " (SELECT id FROM ckpt_nodes WHERE name = 'a' AND state = 'live'));"
		 " INSERT INTO ns_extents(ino, off, len, hash, chunk_off) VALUES (%llu, 0, 10,"
		 " decode('%s', 'hex'), 0)", hex, (unsigned long long)f.ino, hex);
	tck_sql(sql);
	/* a's finding: nothing COMMITTED to hold yet, the chunk's row marked */
	cr_assert_eq(cat_gen_hold_lost_chunk(a.cat, hash), 0);
	FAILS(cat_gen_commit(b.cat, s2, "marker"), ENOTRECOVERABLE);
	struct cat_gen g;
	OK(cat_gen_get_brief(b.cat, s2, &g));
	cr_assert_eq(g.state, GEN_OPEN, "refused, not committed");
	char why[GEN_HELD_MAX];
	OK(cat_gen_unsettled(b.cat, s2, why, sizeof(why)));
	cr_assert(strstr(why, hex) && strstr(why, "\"model.pt\""), "reason: %s", why);
	/* BACKING got the chunk after all (another node's upload of the bytes) */
	snprintf(sql, sizeof(sql), "UPDATE ns_chunks SET uploaded = true WHERE hash ="
		 " decode('%s', 'hex')", hex);
	tck_sql(sql);
	OK(cat_gen_unsettled(b.cat, s2, why, sizeof(why)));
	cr_assert_str_eq(why, "");
	OK(cat_gen_commit(b.cat, s2, "marker"));
	OK(cat_gen_get_brief(a.cat, s2, &g));
	cr_assert_eq(g.state, GEN_COMMITTED);
	OK(cat_check(a.cat));
	pt_cat_close(&b);
	pt_cat_close(&a);
}

Test(catshared_keep, alone_the_duty_is_always_taken)
{
	char dir[64], path[128];
	struct cat *cat;
	ts_tmpdir_make(dir, sizeof(dir), "alone");
	ts_cat_open_in(dir, "catalog.db", path, sizeof(path), &cat);
	bool taken = false;
	OK(cat_duty_take(cat, "keep", 1000, &taken));
	cr_assert(taken);
	OK(cat_duty_take(cat, "keep", 1000, &taken));
	cr_assert(taken, "a lone node is the whole cluster");
	OK(cat_duty_drop(cat, "keep"));
	ts_cat_close_checked(&cat);
	ts_tmpdir_remove(dir);
}
