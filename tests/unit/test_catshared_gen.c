/* Unit tests for meta/catalog_shared_gen.c: generation.h's calls on the
 * shared engine, through the catalog interface, with two struct cat (two
 * nodes: each its own local SQLite, both on one private PostgreSQL,
 * tests/unit/pgtest.h).
 *
 * A generation made on A gets files from B; A's commit waits (-EBUSY) while
 * B writes, then commits with both; hold, abort, delete, expire and pin from
 * either node; a root renamed away ends its generation, a rename with a
 * spec starts one, find_step finds it; a node lost mid-save holds its
 * generation, which only an admin's commit ends; a rewrite made on one node
 * is rolled back by a hold on the other. The
 * generation policy (fs/gen.c) on A: a completion signal while B writes
 * returns at once and commits once B closes, or holds the generation once
 * the abandon bound passes with B's file still open. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
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

TestSuite(catshared_gen, .init = pt_start, .fini = pt_stop, .timeout = 90);

static uint64_t tcg_mk(struct pt_cat *n, uint64_t parent, const char *name, uint32_t mode,
		       uint64_t *gen)
{
	struct cat_inode in;
	OK(cat_create_in_gen(n->cat, parent, name, mode, 0, 0, 0, NULL, NULL, &in, gen));
	return in.ino;
}

static int tcg_state(struct pt_cat *n, uint64_t id)
{
	struct cat_gen g;
	OK(cat_gen_get_brief(n->cat, id, &g));
	return g.state;
}

/* A DCP-like save of two nodes: A made step-N/, each node a shard in it,
 * both open for writing. */
static uint64_t tcg_save(struct pt_cat *a, struct pt_cat *b, uint64_t run, const char *name,
			 uint64_t step, uint64_t *sa, uint64_t *sb)
{
	uint64_t root, in_gen = 0;
	uint64_t gen = pt_cat_mkgen(a, run, name, step, &root);
	*sa = tcg_mk(a, root, "__0_0.distcp", S_IFREG | 0644, &in_gen);
	cr_assert_eq(in_gen, gen);
	*sb = tcg_mk(b, root, "__1_0.distcp", S_IFREG | 0644, &in_gen);
	cr_assert_eq(in_gen, gen, "a file b makes in a's generation is in it");
	OK(cat_writing(a->cat, *sa, true));
	OK(cat_writing(b->cat, *sb, true));
	return gen;
}

Test(catshared_gen, a_commit_on_a_waits_for_bs_writer_then_has_both_files)
{
	struct pt_cat a, b;
	pt_cat_open(&a, "a", 30000, NULL, NULL);
	pt_cat_open(&b, "b", 30000, NULL, NULL);
	uint64_t run = tcg_mk(&a, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	uint64_t sa, sb;
	uint64_t gen = tcg_save(&a, &b, run, "step-100", 100, &sa, &sb);
	uint64_t of = 0;
	OK(cat_gen_of(a.cat, sb, &of));
	cr_assert_eq(of, gen);

	OK(cat_writing(a.cat, sa, false));
	FAILS(cat_gen_commit(a.cat, gen, "dcp-metadata"), EBUSY); /* b's shard is open */
	cr_assert_eq(tcg_state(&b, gen), GEN_OPEN);
	OK(cat_writing(b.cat, sb, false));
	OK(cat_gen_commit(a.cat, gen, "dcp-metadata"));
	struct cat_gen g;
	OK(cat_gen_get(b.cat, gen, &g));
	cr_assert_eq(g.state, GEN_COMMITTED);
	cr_assert_eq(g.files, 2, "both nodes' shards");
	cr_assert_eq(g.exclusive_bytes, 0);
	cr_assert_str_eq(g.rule, "dcp-metadata");
	FAILS(cat_gen_commit(b.cat, gen, "again"), EALREADY);
	/* a rewrite on b, rolled back by a hold on a: version 1 is back */
	OK(cat_gen_reopen(b.cat, gen));
	OK(cat_gen_get_brief(a.cat, gen, &g));
	cr_assert_eq(g.state, GEN_OPEN);
	cr_assert_eq(g.version, 2);
	cr_assert(g.backup_root != 0);
	FAILS(cat_gen_reopen(a.cat, gen), EALREADY);
	OK(cat_gen_check(a.cat));
	struct cat_id_vec ids = { 0 };
	bool held = true;
	OK(cat_gen_hold(a.cat, gen, "unmount", "a file open at unmount", cat_id_vec_add_ino, &ids,
			&held));
	cr_assert(!held, "a new version is rolled back, not held");
	cr_assert_eq(ids.n, 3, "the new version's tree");
	cat_id_vec_free(&ids);
	OK(cat_gen_get(b.cat, gen, &g));
	cr_assert_eq(g.state, GEN_COMMITTED);
	cr_assert_eq(g.version, 1);
	cr_assert_eq(g.backup_root, 0);
	cr_assert_eq(g.files, 2);
	cr_assert_str_eq(g.rule, "unmount-restored");
	struct cat_inode root;
	OK(cat_lookup(b.cat, run, "step-100", &root));
	cr_assert_eq(root.ino, g.root, "the backup is linked under the name");

	struct cat_gen_vec l = { 0 };
	OK(cat_gen_list_brief(b.cat, run, false, cat_gen_vec_add, &l));
	cr_assert_eq(l.n, 1);
	cr_assert_eq(l.v[0].id, gen);
	cat_gen_vec_free(&l);
	OK(cat_gen_check(a.cat));
	pt_cat_close(&a);
	pt_cat_close(&b);
}

Test(catshared_gen, hold_abort_delete_expire_and_pin_from_either_node)
{
	struct pt_cat a, b;
	pt_cat_open(&a, "a", 30000, NULL, NULL);
	pt_cat_open(&b, "b", 30000, NULL, NULL);
	uint64_t run = tcg_mk(&a, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	uint64_t sa, sb;

	/* abort on b: the tree goes, its inodes come back for release */
	uint64_t g1 = tcg_save(&a, &b, run, "step-1", 1, &sa, &sb);
	struct cat_id_vec ids = { 0 };
	OK(cat_gen_abort(b.cat, g1, "admin-abort", cat_id_vec_add_ino, &ids));
	cr_assert_eq(ids.n, 3);
	struct cat_inode in;
	FAILS(cat_lookup(a.cat, run, "step-1", &in), ENOENT);
	OK(cat_writing(a.cat, sa, false));
	OK(cat_writing(b.cat, sb, false));
	for (size_t i = 0; i < ids.n; i++)
		OK(cat_inode_release(a.cat, ids.v[i]));
	cat_id_vec_free(&ids);
	cr_assert_eq(tcg_state(&a, g1), GEN_ABORTED);
	FAILS(cat_gen_abort(a.cat, g1, "admin-abort", NULL, NULL), EALREADY);

	/* hold on a, then a late marker on b commits it (not a node-lost hold) */
	uint64_t g2 = tcg_save(&a, &b, run, "step-2", 2, &sa, &sb);
	OK(cat_writing(a.cat, sa, false));
	OK(cat_writing(b.cat, sb, false));
	bool held = false;
	OK(cat_gen_hold(a.cat, g2, "abandoned", "abandoned after 1 s", NULL, NULL, &held));
	cr_assert(held);
	FAILS(cat_gen_hold(b.cat, g2, "abandoned", "again", NULL, NULL, NULL), EALREADY);
	struct cat_gen g;
	OK(cat_gen_get_brief(b.cat, g2, &g));
	cr_assert_eq(g.state, GEN_HELD);
	cr_assert_str_eq(g.held, "abandoned after 1 s");
	OK(cat_gen_commit(b.cat, g2, "dcp-metadata"));

	/* pinned: keep-latest-k's expire refuses; unpinned it goes */
	OK(cat_gen_pin(b.cat, g2, true));
	FAILS(cat_gen_expire(a.cat, g2, 0, "keep", NULL, NULL), EBUSY);
	OK(cat_gen_pin(a.cat, g2, false));
	OK(cat_gen_expire(a.cat, g2, 0, "keep", cat_id_vec_add_ino, &ids));
	cr_assert_eq(ids.n, 3);
	cat_id_vec_free(&ids);
	cr_assert_eq(tcg_state(&b, g2), GEN_DELETED);
	FAILS(cat_lookup(b.cat, run, "step-2", &in), ENOENT);

	/* delete takes an open one too */
	uint64_t g3 = tcg_save(&a, &b, run, "step-3", 3, &sa, &sb);
	OK(cat_gen_delete(b.cat, g3, "trainer", NULL, NULL));
	OK(cat_gen_get_brief(a.cat, g3, &g));
	cr_assert_eq(g.state, GEN_DELETED);
	cr_assert_str_eq(g.rule, "trainer");
	FAILS(cat_gen_delete(a.cat, g3, "trainer", NULL, NULL), ENOENT);
	OK(cat_writing(a.cat, sa, false));
	OK(cat_writing(b.cat, sb, false));
	OK(cat_gen_check(b.cat));
	pt_cat_close(&a);
	pt_cat_close(&b);
}

/* Review 41 F5: on the shared engine too, cat_rename_gen reports the inode
 * its transaction moved (the moved one, not the one it replaced): B renames
 * its temporary over A's `latest` and is told its own file. */
Test(catshared_gen, a_rename_reports_the_inode_it_moved)
{
	struct pt_cat a, b;
	pt_cat_open(&a, "a", 30000, NULL, NULL);
	pt_cat_open(&b, "b", 30000, NULL, NULL);
	uint64_t run = tcg_mk(&a, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	uint64_t old = tcg_mk(&a, run, "latest", S_IFREG | 0644, NULL);
	uint64_t tmp = tcg_mk(&b, run, "latest.tmp", S_IFREG | 0644, NULL);
	uint64_t replaced = 0, moved = 0;
	OK(cat_rename_gen(b.cat, run, "latest.tmp", run, "latest", 0, NULL, &replaced, NULL,
			  &moved));
	cr_assert_eq(moved, tmp, "moved %llu, not b's %llu", (unsigned long long)moved,
		     (unsigned long long)tmp);
	cr_assert_eq(replaced, old);
	/* an exchange: the inode that was at name */
	uint64_t other = tcg_mk(&a, run, "other", S_IFREG | 0644, NULL);
	OK(cat_rename_gen(a.cat, run, "other", run, "latest", CAT_RENAME_EXCHANGE, NULL, NULL,
			  NULL, &moved));
	cr_assert_eq(moved, other);
	/* a name renamed onto its own inode: newname's inode */
	OK(cat_rename_gen(a.cat, run, "latest", run, "latest", 0, NULL, NULL, NULL, &moved));
	cr_assert_eq(moved, other);
	moved = 7;
	FAILS(cat_rename_gen(b.cat, run, "absent", run, "latest", 0, NULL, NULL, NULL, &moved),
	      ENOENT);
	cr_assert_eq(moved, 0, "a failed rename reports none");
	OK(cat_gen_check(a.cat));
	pt_cat_close(&a);
	pt_cat_close(&b);
}

Test(catshared_gen, renames_start_and_end_generations_and_find_step_finds_them)
{
	struct pt_cat a, b;
	pt_cat_open(&a, "a", 30000, NULL, NULL);
	pt_cat_open(&b, "b", 30000, NULL, NULL);
	uint64_t run = tcg_mk(&a, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	uint64_t tmp = tcg_mk(&b, run, "step-7.tmp", S_IFDIR | 0755, NULL);
	uint64_t shard = tcg_mk(&a, tmp, "shard", S_IFREG | 0644, NULL);
	struct cat_gen_spec spec = { "step-7", 7 };
	uint64_t gen = 0, replaced = 1;
	OK(cat_rename_gen(b.cat, run, "step-7.tmp", run, "step-7", 0, &spec, &replaced, &gen, NULL));
	cr_assert(gen != 0);
	cr_assert_eq(replaced, 0);
	uint64_t of = 0;
	OK(cat_gen_of(a.cat, shard, &of));
	cr_assert_eq(of, gen);
	struct cat_gen g;
	OK(cat_gen_find_step(a.cat, run, 7, &g));
	cr_assert_eq(g.id, gen);
	OK(cat_gen_find(a.cat, run, "step-7", &g));
	cr_assert_eq(g.id, gen);
	FAILS(cat_gen_find_step(a.cat, run, 8, &g), ENOENT);

	/* a root renamed away (plain cat_rename): its generation ends */
	OK(cat_rename(a.cat, run, "step-7", CAT_ROOT_INO, "old-7", 0, NULL));
	OK(cat_gen_get_brief(b.cat, gen, &g));
	cr_assert_eq(g.state, GEN_DELETED);
	cr_assert_str_eq(g.rule, "renamed");
	OK(cat_gen_of(b.cat, shard, &of));
	cr_assert_eq(of, 0, "its tree left it");
	FAILS(cat_gen_find_step(a.cat, run, 7, &g), ENOENT);
	OK(cat_gen_check(a.cat));
	OK(cat_gen_check(b.cat));
	pt_cat_close(&a);
	pt_cat_close(&b);
}

Test(catshared_gen, a_node_lost_mid_save_holds_its_generation_until_a_decision)
{
	struct pt_cat a, b;
	pt_cat_open(&a, "a", 30000, NULL, NULL);
	pt_cat_open(&b, "b", 1500, NULL, NULL);
	uint64_t run = tcg_mk(&a, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	uint64_t sa, sb;
	uint64_t gen = tcg_save(&a, &b, run, "step-50", 50, &sa, &sb);
	OK(cat_writing(a.cat, sa, false));
	FAILS(cat_gen_commit(a.cat, gen, "dcp-metadata"), EBUSY);
	usleep(3300 * 1000); /* b stops renewing: its lease runs out, and its grace (L4) */
	FAILS(cat_gen_commit(a.cat, gen, "dcp-metadata"), EBUSY); /* until a sweep handles b */
	size_t swept = 0;
	OK(cat_lease_sweep(a.cat, &swept));
	cr_assert_eq(swept, 1);
	struct cat_gen g;
	OK(cat_gen_get_brief(a.cat, gen, &g));
	cr_assert_eq(g.state, GEN_HELD);
	cr_assert_str_eq(g.rule, "node-lost");
	cr_assert(g.held[0]);
	struct cat_gen_vec l = { 0 };
	OK(cat_gen_list(a.cat, run, false, cat_gen_vec_add, &l));
	cr_assert_eq(l.n, 1, "held generations are listed (the daemon hides them)");
	cat_gen_vec_free(&l);
	/* a late completion signal is no decision: b's shard is unfinished */
	FAILS(cat_gen_commit(a.cat, gen, "dcp-metadata"), EINVAL);
	OK(cat_gen_commit(a.cat, gen, "admin"));
	cr_assert_eq(tcg_state(&a, gen), GEN_COMMITTED);
	OK(cat_gen_check(a.cat));
	pt_cat_close(&a);
	pt_cat_close(&b);
}

/* ---- the generation policy's commit across nodes (fs/gen.c) ---- */

static int tcg_no_read(void *arg, uint64_t ino, uint64_t off, size_t len, void *buf)
{
	return -EIO;
}

struct tcg_policy {
	struct node_table *nodes;
	struct gen_policy *g;
};

static void tcg_policy_start(struct tcg_policy *p, struct pt_cat *n, double abandon_s)
{
	struct gen_options o = { .quiet_s = 60, .abandon_s = abandon_s };
	OK(node_table_new(n->cat, &p->nodes));
	struct gen_deps d = { .cat = n->cat, .nodes = p->nodes, .read = tcg_no_read };
	OK(gen_policy_new(&d, &o, &p->g));
}

static void tcg_policy_stop(struct tcg_policy *p)
{
	gen_policy_shutdown(p->g);
	gen_policy_free(p->g);
	node_table_free(p->nodes);
}

/* Polls generation id on n until it is in state, up to ms. */
static bool tcg_wait_state(struct pt_cat *n, uint64_t id, int state, int ms)
{
	for (int waited = 0; waited <= ms; waited += 10) {
		if (tcg_state(n, id) == state)
			return true;
		usleep(10 * 1000);
	}
	return false;
}

Test(catshared_gen, the_policy_retries_a_commit_until_the_other_nodes_writer_closes)
{
	struct pt_cat a, b;
	pt_cat_open(&a, "a", 30000, NULL, NULL);
	pt_cat_open(&b, "b", 30000, NULL, NULL);
	struct tcg_policy p;
	tcg_policy_start(&p, &a, 30);
	uint64_t run = tcg_mk(&a, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	uint64_t sa, sb;
	uint64_t gen = tcg_save(&a, &b, run, "step-100", 100, &sa, &sb);
	gen_started(p.g, gen, run, false, getpid());
	OK(cat_writing(a.cat, sa, false));
	OK(gen_policy_start(p.g));

	/* the trainer's completion signal, in a FUSE request: it returns at once */
	int64_t t0 = ts_now_ns();
	OK(gen_commit_explicit(p.g, gen, "dcp-metadata"));
	int64_t took_ms = (ts_now_ns() - t0) / 1000000;
	cr_assert(took_ms < 500, "the signal took %lld ms", (long long)took_ms);
	usleep(400 * 1000); /* several retries, all refused while b writes */
	cr_assert_eq(tcg_state(&a, gen), GEN_OPEN);
	OK(cat_writing(b.cat, sb, false));
	t0 = ts_now_ns();
	cr_assert(tcg_wait_state(&b, gen, GEN_COMMITTED, 2000), "committed once b closed");
	took_ms = (ts_now_ns() - t0) / 1000000;
	cr_assert(took_ms < 1000, "the retry came %lld ms after b closed", (long long)took_ms);
	struct cat_gen g;
	OK(cat_gen_get_brief(a.cat, gen, &g));
	cr_assert_str_eq(g.rule, "dcp-metadata");
	tcg_policy_stop(&p);
	pt_cat_close(&a);
	pt_cat_close(&b);
}

Test(catshared_gen, a_commit_waiting_past_abandon_for_another_nodes_writer_is_held)
{
	struct pt_cat a, b;
	pt_cat_open(&a, "a", 30000, NULL, NULL);
	pt_cat_open(&b, "b", 30000, NULL, NULL);
	struct tcg_policy p;
	tcg_policy_start(&p, &a, 1);
	uint64_t run = tcg_mk(&a, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	uint64_t sa, sb;
	uint64_t gen = tcg_save(&a, &b, run, "step-200", 200, &sa, &sb);
	gen_started(p.g, gen, run, false, getpid());
	OK(cat_writing(a.cat, sa, false));
	OK(gen_policy_start(p.g));
	OK(gen_commit_explicit(p.g, gen, "dcp-metadata"));
	cr_assert(tcg_wait_state(&a, gen, GEN_HELD, 3000), "held once the bound passed");
	struct cat_gen g;
	OK(cat_gen_get_brief(b.cat, gen, &g));
	cr_assert_str_eq(g.rule, "abandoned");
	cr_assert(strstr(g.held, "other nodes kept open for writing"), "reason: %s", g.held);
	cr_assert(strstr(g.held, "dcp-metadata"), "reason: %s", g.held);
	char names[64];
	snprintf(names, sizeof(names), "open for writing: inode %llu on b", (unsigned long long)sb);
	cr_assert(strstr(g.held, names), "the reason names b's open file: %s", g.held);
	OK(cat_writing(b.cat, sb, false));
	tcg_policy_stop(&p);
	pt_cat_close(&a);
	pt_cat_close(&b);
}
