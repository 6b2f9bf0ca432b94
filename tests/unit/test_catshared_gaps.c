/* Unit tests for the semantic gaps of generations across nodes that issue
 * 18 listed (docs/MULTINODE.md "Known gaps"), closed in meta/pggen.c,
 * meta/catalog_shared_gen.c and meta/manifest_shared.c: two or three struct
 * cat opened with cat_open_shared on one private PostgreSQL
 * (tests/unit/pgtest.h) are nodes A, B and C.
 *
 * A generation whose chunks died with their node (lost) is shown as HELD
 * (pggen.h X5): every node's generation policy hides it from its series
 * directory, as a held save on one node, while it stays reachable by name,
 * kept, never committed as it is (not even by an admin), removable, and
 * saved again by a rewrite that replaces every lost chunk (one that leaves
 * one is rolled back to the lost version). A rewrite
 * that a node reopened and then died between files (none open) is rolled
 * back to its previous version by the sweep, as a new save of a dead node
 * is held; one another live node still writes is left to that node. A
 * generation's upload progress in bytes counts every node's chunks, from
 * PostgreSQL. A commit that reached PostgreSQL without its manifest queued
 * gets it queued by a later completion signal (-EALREADY) or by the sweep
 * of its node. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog.h"
#include "catalog_internal.h"
#include "gen.h"
#include "generation.h"
#include "node.h"
#include "pggen.h"
#include "pgtest.h"
#include "support.h"
#include "upload.h"

TestSuite(catshared_gaps, .init = pt_start, .fini = pt_stop, .timeout = 90);

#define ROOT ((uint64_t)CAT_ROOT_INO)
#define GP_LEN 1000

/* A file name in dir on n, written as chunks fill/seed.. and closed (its
 * writing row added and removed, as the daemon does). */
static uint64_t gp_file(struct pt_cat *n, uint64_t dir, const char *name, uint8_t fill, int seed,
			int chunks, ts_chunk_stored_fn *stored, void *arg)
{
	uint64_t f = ts_mk(n->cat, dir, name, S_IFREG | 0644, NULL);
	OK(cat_writing(n->cat, f, true));
	ts_write_chunks(n->cat, f, fill, seed, chunks, GP_LEN, stored, arg);
	OK(cat_writing(n->cat, f, false));
	return f;
}

/* b stops renewing (a test node has no lease thread): its lease and one
 * more of its terms (lease.h L4) run out, then a sweeps it. */
static void gp_lose(struct pt_cat *a, unsigned b_lease_ms)
{
	usleep((b_lease_ms * 2 + 300) * 1000);
	size_t swept = 0;
	OK(cat_lease_sweep(a->cat, &swept));
	cr_assert_eq(swept, 1);
}

/* The daemon's generation policy over n's catalog (no thread started): what
 * fs/ns.c asks before it lists a name. */
struct gp_policy {
	struct node_table *nodes;
	struct gen_policy *g;
};

static int gp_no_read(void *arg, uint64_t ino, uint64_t off, size_t len, void *buf)
{
	return -EIO;
}

static void gp_policy_start(struct gp_policy *p, struct pt_cat *n)
{
	struct gen_options o = { .quiet_s = 60, .abandon_s = 600 };
	OK(node_table_new(n->cat, &p->nodes));
	struct gen_deps d = { .cat = n->cat, .nodes = p->nodes, .read = gp_no_read };
	OK(gen_policy_new(&d, &o, &p->g));
}

static void gp_policy_stop(struct gp_policy *p)
{
	gen_policy_shutdown(p->g);
	gen_policy_free(p->g);
	node_table_free(p->nodes);
}

/* ---- 1. a lost generation's name ---- */

Test(catshared_gaps, a_lost_generation_is_held_hidden_on_every_node_kept_and_removable)
{
	struct pt_cat a, b, c;
	pt_cat_open(&a, "gla", 30000, NULL, NULL);
	pt_cat_open(&b, "glb", 1000, NULL, NULL);
	uint64_t run = ts_mk(a.cat, ROOT, "run", S_IFDIR | 0755, NULL);
	/* step-90 by A, on BACKING; step-100 by B, whose chunks only B has */
	uint64_t r90, r100;
	uint64_t g90 = ts_mkgen(a.cat, run, "step-90", 90, true, &r90);
	gp_file(&a, r90, "__0_0.distcp", 0x51, 0, 2, NULL, NULL);
	cr_assert_eq(pt_cat_upload_chunks(&a, NULL, NULL), 2);
	OK(cat_gen_commit(a.cat, g90, "dcp-metadata"));
	uint64_t g100 = ts_mkgen(b.cat, run, "step-100", 100, true, &r100);
	uint64_t f100 = gp_file(&b, r100, "__0_0.distcp", 0x52, 0, 2, NULL, NULL);
	OK(cat_gen_commit(b.cat, g100, "dcp-metadata"));
	uint64_t r110;
	uint64_t g110 = ts_mkgen(b.cat, run, "step-110", 110, true, &r110);
	gp_file(&b, r110, "__0_0.distcp", 0x55, 0, 1, NULL, NULL);
	OK(cat_gen_commit(b.cat, g110, "dcp-metadata"));
	gp_lose(&a, 1000); /* B dies before its uploader got to its chunks */

	/* what generation.h shows of it, on A and on a node that came later */
	pt_cat_open(&c, "glc", 30000, NULL, NULL);
	struct cat_gen g;
	OK(cat_gen_find(c.cat, run, "step-100", &g));
	cr_assert_eq(g.id, g100);
	cr_assert_eq(g.state, GEN_HELD, "a lost save is not a committed one: %s",
		     cat_gen_state_name(g.state));
	cr_assert_str_eq(g.rule, "node-lost");
	cr_assert(strstr(g.held, "lost"), "reason: %s", g.held);
	OK(cat_gen_get(a.cat, g100, &g));
	cr_assert_eq(g.state, GEN_HELD);
	cr_assert_eq(g.files, 1, "kept byte for byte");
	struct cat_gen_vec all = { 0 };
	OK(cat_gen_list(a.cat, run, true, cat_gen_vec_add, &all));
	cr_assert_eq(all.n, 3);
	cr_assert_eq(all.v[1].id, g100);
	cr_assert_eq(all.v[1].state, GEN_HELD, "--all lists it as held, with why");
	cat_gen_vec_free(&all);
	OK(cat_gen_list(a.cat, run, false, cat_gen_vec_add, &all));
	cr_assert_eq(all.n, 3, "with its tree, as a held one (keep-latest-k ends it as one)");
	cr_assert_eq(all.v[2].state, GEN_HELD);
	cat_gen_vec_free(&all);

	/* the series directory, as the daemon lists it on each node: step-100
	 * hidden (a resume finds step-90), still reachable by name */
	struct gp_policy pa, pc;
	gp_policy_start(&pa, &a);
	gp_policy_start(&pc, &c);
	cr_assert(gen_hidden(pa.g, run, "step-100"), "listed on A");
	cr_assert(gen_hidden(pc.g, run, "step-100"), "listed on C");
	cr_assert(gen_hidden(pc.g, run, "step-110"), "listed on C");
	cr_assert_not(gen_hidden(pc.g, run, "step-90"));
	gp_policy_stop(&pa);
	gp_policy_stop(&pc);
	struct cat_inode in;
	OK(cat_lookup(c.cat, run, "step-100", &in));
	cr_assert_eq(in.ino, r100);
	OK(cat_getattr(c.cat, f100, &in));
	cr_assert_eq(in.size, 2 * GP_LEN);
	FAILS(cat_gen_find_step(c.cat, run, 100, &g), ENOENT);

	/* never saved as it is: not by a decision, nor by a rewrite that
	 * leaves a lost chunk in it (rolled back whole) */
	FAILS(cat_gen_commit(c.cat, g100, "admin"), ENODATA);
	OK(cat_gen_reopen(c.cat, g100)); /* a resumed trainer saves step-100 again */
	gp_file(&c, r100, "extra.json", 0x53, 0, 1, NULL, NULL);
	FAILS(cat_gen_commit(c.cat, g100, "dcp-metadata"), ENODATA);
	bool held = true;
	OK(cat_gen_hold(c.cat, g100, "abandoned", "no writer", NULL, NULL, &held));
	cr_assert_not(held, "the rewrite is rolled back to the lost version");
	OK(cat_gen_get(a.cat, g100, &g));
	cr_assert_eq(g.state, GEN_HELD);
	cr_assert_eq(g.files, 1);
	OK(cat_gen_check(a.cat));
	/* a rewrite of every lost file saves it again (the rollback put back
	 * the backup's inodes: the names are looked up again) */
	OK(cat_gen_reopen(a.cat, g100));
	OK(cat_lookup(a.cat, run, "step-100", &in));
	OK(cat_lookup(a.cat, in.ino, "__0_0.distcp", &in));
	cr_assert_neq(in.ino, f100);
	f100 = in.ino;
	OK(cat_writing(a.cat, f100, true));
	ts_write_chunks(a.cat, f100, 0x54, 0, 2, GP_LEN, NULL, NULL);
	OK(cat_writing(a.cat, f100, false));
	OK(cat_gen_commit(a.cat, g100, "dcp-metadata"));
	OK(cat_gen_find(c.cat, run, "step-100", &g));
	cr_assert_eq(g.state, GEN_COMMITTED);
	cr_assert_eq(g.version, 2);
	OK(cat_gen_find_step(c.cat, run, 100, &g));
	gp_policy_start(&pc, &c);
	cr_assert_not(gen_hidden(pc.g, run, "step-100"), "saved again: listed");
	gp_policy_stop(&pc);
	OK(cat_gen_check(a.cat));
	OK(cat_check(a.cat));
	/* an explicit decision removes a lost one */
	OK(cat_gen_find(a.cat, run, "step-110", &g));
	cr_assert_eq(g.state, GEN_HELD);
	OK(cat_gen_delete(c.cat, g110, "admin", NULL, NULL));
	FAILS(cat_lookup(a.cat, run, "step-110", &in), ENOENT);
	OK(cat_gen_check(a.cat));
	pt_cat_close(&a);
	pt_cat_close(&b);
	pt_cat_close(&c);
}

/* ---- 2. a rewrite whose node died between files ---- */

Test(catshared_gaps, a_rewrite_its_dead_node_reopened_with_no_file_open_is_rolled_back)
{
	struct pt_cat a, b;
	pt_cat_open(&a, "gra", 30000, NULL, NULL);
	pt_cat_open(&b, "grb", 1000, NULL, NULL);
	uint64_t run = ts_mk(a.cat, ROOT, "run", S_IFDIR | 0755, NULL);
	uint64_t r1, r2;
	uint64_t g1 = ts_mkgen(a.cat, run, "step-1", 1, true, &r1);
	gp_file(&a, r1, "model.pt", 0x61, 0, 1, NULL, NULL);
	OK(cat_gen_commit(a.cat, g1, "dcp-metadata"));
	uint64_t g2 = ts_mkgen(a.cat, run, "step-2", 2, true, &r2);
	gp_file(&a, r2, "model.pt", 0x62, 0, 1, NULL, NULL);
	OK(cat_gen_commit(a.cat, g2, "dcp-metadata"));

	/* B rewrites step-1 (Megatron saving a step again): one file closed,
	 * then it dies before the next one */
	OK(cat_gen_reopen(b.cat, g1));
	gp_file(&b, r1, "extra.pt", 0x63, 0, 1, NULL, NULL);
	/* B also rewrites step-2, where A still has a file open */
	OK(cat_gen_reopen(b.cat, g2));
	uint64_t fa = ts_mk(a.cat, r2, "rank1.pt", S_IFREG | 0644, NULL);
	OK(cat_writing(a.cat, fa, true));
	gp_lose(&a, 1000);

	struct cat_gen g;
	OK(cat_gen_get(a.cat, g1, &g));
	cr_assert_eq(g.state, GEN_COMMITTED, "left %s by the sweep", cat_gen_state_name(g.state));
	cr_assert_eq(g.version, 1);
	cr_assert_str_eq(g.rule, "node-lost-restored");
	cr_assert_eq(g.files, 1, "the previous version, whole");
	struct cat_inode in;
	OK(cat_lookup(a.cat, run, "step-1", &in));
	FAILS(cat_lookup(a.cat, in.ino, "extra.pt", &in), ENOENT);
	OK(cat_gen_get_brief(a.cat, g2, &g));
	cr_assert_eq(g.state, GEN_OPEN, "A's writer keeps step-2's rewrite to A's policy");
	cr_assert_eq(g.version, 2);
	OK(cat_writing(a.cat, fa, false));
	OK(cat_gen_commit(a.cat, g2, "dcp-metadata"));
	OK(cat_gen_check(a.cat));
	OK(cat_check(a.cat));
	pt_cat_close(&a);
	pt_cat_close(&b);
}

/* ---- 3. upload progress in bytes ---- */

static void gp_sum_stored(void *arg, const uint8_t hash[CAT_HASH_LEN], uint64_t stored_len)
{
	(void)hash;
	*(uint64_t *)arg += stored_len;
}

Test(catshared_gaps, a_generations_upload_bytes_count_every_nodes_chunks)
{
	struct pt_cat a, b;
	pt_cat_open(&a, "gua", 30000, NULL, NULL);
	pt_cat_open(&b, "gub", 30000, NULL, NULL);
	uint64_t run = ts_mk(a.cat, ROOT, "run", S_IFDIR | 0755, NULL);
	uint64_t root;
	uint64_t gen = ts_mkgen(a.cat, run, "step-3", 3, true, &root);
	uint64_t on_a = 0, on_b = 0;
	gp_file(&a, root, "__0_0.distcp", 0x71, 0, 2, gp_sum_stored, &on_a);
	gp_file(&b, root, "__1_0.distcp", 0x72, 0, 3, gp_sum_stored, &on_b);
	cr_assert(on_a > 0 && on_b > 0);
	OK(cat_gen_commit(a.cat, gen, "dcp-metadata"));
	uint64_t total = 0, left = 0;
	OK(cat_gen_upload_bytes(a.cat, gen, &total, &left));
	cr_assert_eq(total, on_a + on_b, "every node's chunks: %lu", (unsigned long)total);
	cr_assert_eq(left, on_a + on_b);
	cr_assert_eq(pt_cat_upload_chunks(&a, NULL, NULL), 2);
	OK(cat_gen_upload_bytes(b.cat, gen, &total, &left));
	cr_assert_eq(total, on_a + on_b);
	cr_assert_eq(left, on_b, "B's chunks are not on BACKING yet");
	cr_assert_eq(pt_cat_upload_chunks(&b, NULL, NULL), 3);
	OK(cat_gen_upload_bytes(a.cat, gen, &total, &left));
	cr_assert_eq(left, 0);
	OK(cat_gen_upload_bytes(a.cat, 999999, &total, &left));
	cr_assert_eq(total + left, 0, "no such generation: nothing to upload");
	pt_cat_close(&a);
	pt_cat_close(&b);
}

/* ---- 4. the commit and the queueing of its manifest ---- */

/* How many manifest rows of gen n's upload queue holds; *row gets one. */
static int gp_manifest_rows(struct pt_cat *n, uint64_t gen, struct cat_upload *row)
{
	struct cat_upload rows[64];
	int got = cat_upload_list(n->cat, 0, rows, 64), found = 0;
	cr_assert_geq(got, 0);
	for (int i = 0; i < got; i++)
		if (rows[i].kind == UP_GEN_MANIFEST && rows[i].gen == gen && found++ == 0 && row)
			*row = rows[i];
	return found;
}

static bool gp_durable(struct pt_cat *n, uint64_t gen)
{
	bool d = true;
	OK(cat_gen_durable(n->cat, gen, &d));
	return d;
}

/* A commit that reached PostgreSQL without its manifest queued (its COMMIT's
 * answer lost and run again, or the node gone before its local queue got
 * the row): a later signal queues it; a node that died in between (and came
 * back as a new node) is swept, and the sweeper queues it. */
Test(catshared_gaps, a_commit_whose_manifest_was_not_queued_is_queued_by_a_later_signal_or_the_sweep)
{
	struct pt_cat a, b;
	pt_cat_open(&a, "gma", 1000, NULL, NULL);
	pt_cat_open(&b, "gmb", 30000, NULL, NULL);
	uint64_t run = ts_mk(a.cat, ROOT, "run", S_IFDIR | 0755, NULL);
	uint64_t r1, r2;
	uint64_t g1 = ts_mkgen(a.cat, run, "step-1", 1, true, &r1);
	gp_file(&a, r1, "model.pt", 0x81, 0, 1, NULL, NULL);
	cr_assert_eq(pt_cat_upload_chunks(&a, NULL, NULL), 1);
	/* the commit's transaction only, as pg_txn's second run of it finds it */
	OK(pggen_commit(cat_shared_ns(a.cat), g1, "dcp-metadata", false, NULL));
	cr_assert_eq(gp_manifest_rows(&a, g1, NULL), 0);
	FAILS(cat_gen_commit(a.cat, g1, "dcp-metadata"), EALREADY);
	struct cat_upload row;
	cr_assert_eq(gp_manifest_rows(&a, g1, &row), 1, "the manifest is queued once committed");
	FAILS(cat_gen_commit(a.cat, g1, "dcp-metadata"), EALREADY);
	cr_assert_eq(gp_manifest_rows(&a, g1, NULL), 1, "not twice");
	bool ready = false, stale = true;
	OK(cat_upload_ready(a.cat, &row, &ready, &stale));
	cr_assert(ready && !stale);
	OK(cat_upload_done(a.cat, &row));
	cr_assert(gp_durable(&a, g1));
	FAILS(cat_gen_commit(b.cat, g1, "dcp-metadata"), EALREADY);
	cr_assert_eq(gp_manifest_rows(&b, g1, NULL), 0, "a durable one is not queued again");

	/* A commits step-2 and dies before queueing; the sweep of A queues it */
	uint64_t g2 = ts_mkgen(a.cat, run, "step-2", 2, true, &r2);
	gp_file(&a, r2, "model.pt", 0x82, 0, 1, NULL, NULL);
	cr_assert_eq(pt_cat_upload_chunks(&a, NULL, NULL), 1);
	OK(pggen_commit(cat_shared_ns(a.cat), g2, "dcp-metadata", false, NULL));
	cr_assert_not(gp_durable(&b, g2));
	gp_lose(&b, 1000);
	cr_assert_eq(gp_manifest_rows(&b, g2, &row), 1, "the sweeper queued it");
	OK(cat_upload_ready(b.cat, &row, &ready, &stale));
	cr_assert(ready && !stale);
	OK(cat_upload_done(b.cat, &row));
	cr_assert(gp_durable(&b, g2));
	pt_cat_close(&a);
	pt_cat_close(&b);
}
