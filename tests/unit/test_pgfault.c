/* Unit tests of the shared catalog's calls whose answer is lost (pg.h P2),
 * with faults injected into a node's FUSE connection (meta/pg.c P7,
 * tests/unit/pgfault.h), on the private PostgreSQL of tests/unit/pgtest.h.
 *
 * "lose X down" runs X on the server and loses its answer with the
 * database unreachable for the rest of the call: -ENOTCONN, the outcome
 * unknown, the change made. "drop X down" loses it before the server has
 * it: -ENOTCONN, nothing changed. Without "down", P2 asks on a new
 * connection and the call ends as if nothing was lost. For each: no
 * complete save is lost, no manifest is left unqueued (a save whose
 * BACKING manifest is stale, or never written, would keep `ckptfs-admin
 * wait` waiting forever), and the catalog checks clean.
 *
 *  - a directory rename with saves under it (catalog_shared_gen.c S8, F2):
 *    applied and unknown, the next sweep queues the moved saves'
 *    manifests, which name the new path on BACKING; not applied, nothing
 *    moved and nothing lost; lost and asked, the rename queues them itself.
 *  - a generation's commit (S6): the same three.
 *  - a file's publication (catalog_shared_data.c S12): applied and
 *    unknown, the uploads that end after it mark their chunks in
 *    PostgreSQL, so the save committed on the file becomes durable; not
 *    applied, nothing is published.
 *  - an upload's marking (S5): lost before or after the server ran it, the
 *    upload stays queued and its next end marks it.
 *  - a create (pgns.h N9, a token in one statement, pg.h P5): its lost
 *    answer's re-run finds its token and answers the inode it made.
 *  - a file's publication alone (pgns.h N8, its token): its lost answer's
 *    re-run, after another node rewrote the file, finds its token and
 *    leaves the other node's content.
 *  - a reclaim turn (catalog_shared_reclaim.c R3): its batch's answer or
 *    its end's lost, the next turn takes this node's 'reclaiming' rows
 *    again and ends them; the chunks a save names stay on BACKING.
 *  - the injection point's own input: a bad spec is refused. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backing.h"
#include "catalog.h"
#include "catalog_internal.h"
#include "generation.h"
#include "manifest.h"
#include "pg.h"
#include "pgfault.h"
#include "pgns.h"
#include "pgtest.h"
#include "store.h"
#include "support.h"
#include "upload.h"

#define ROOT ((uint64_t)CAT_ROOT_INO)
#define PF_LEN 1000

TestSuite(pgfault, .init = pt_start, .fini = pt_stop, .timeout = 120);

/* n's FUSE connection: the one its namespace and generation calls use. */
static struct pg *pf_pg(struct pt_cat *n)
{
	return cat_shared_ns(n->cat)->pg;
}

static uint64_t pf_reconnects(struct pt_cat *n)
{
	struct pg_stats st;
	pg_get_stats(pf_pg(n), &st);
	return st.reconnects;
}

/* Arms "HOW WHAT down" on n's FUSE connection (pgfault.h). */
static void pf_arm_down(struct pt_cat *n, const char *how, const char *what)
{
	char spec[64];
	snprintf(spec, sizeof(spec), "%s %s down", how, what);
	OK(pg_fault_arm(pf_pg(n), spec));
}

/* How many uploads of kind n has queued; their generations in ids. */
static int pf_rows(struct pt_cat *n, int kind, uint64_t *ids, int max)
{
	struct cat_upload rows[64];
	int got = cat_upload_list(n->cat, 0, rows, 64), k = 0;
	cr_assert_geq(got, 0);
	for (int i = 0; i < got; i++)
		if (rows[i].kind == kind) {
			if (k < max)
				ids[k] = rows[i].gen;
			k++;
		}
	return k;
}

/* How many generation manifests n has queued. */
static int pf_queued(struct pt_cat *n)
{
	return pf_rows(n, UP_GEN_MANIFEST, NULL, 0);
}

static bool pf_queued_has(struct pt_cat *n, uint64_t gen)
{
	uint64_t ids[16];
	int k = pf_rows(n, UP_GEN_MANIFEST, ids, 16);
	for (int i = 0; i < k && i < 16; i++)
		if (ids[i] == gen)
			return true;
	return false;
}

/* What `ckptfs-admin wait` asks the daemon of each generation. */
static bool pf_durable(struct pt_cat *n, uint64_t gen)
{
	bool d = false;
	OK(cat_gen_durable(n->cat, gen, &d));
	return d;
}

/* BACKING's manifest of gen (its committed version) names series, and the
 * file rank0.pt with its two chunks of fill. */
static void pf_backing_manifest(struct pt_cat *n, struct pt_backing *bk, uint64_t gen,
				const char *series, uint8_t fill)
{
	struct cat_gen g;
	OK(cat_gen_get(n->cat, gen, &g));
	char path[MANIFEST_PATH_MAX];
	manifest_gen_path(gen, g.version, path, sizeof(path));
	size_t cap = 1 << 20, len = 0;
	char *text = malloc(cap);
	cr_assert_not_null(text);
	OK(backing_get(bk->b, path, text, cap, &len));
	struct manifest *m = NULL;
	char err[MANIFEST_ERR_MAX] = "";
	cr_assert_eq(manifest_parse(text, len, &m, err, sizeof(err)), 0, "%s: %s", path, err);
	cr_assert_str_eq(m->gen.series, series, "%s names %s", path, m->gen.series);
	int found = -1;
	char buf[256];
	for (size_t i = 1; i < m->n_inodes; i++) {
		manifest_inode_path(m, i, buf, sizeof(buf));
		if (strcmp(buf, "rank0.pt") == 0)
			found = (int)i;
	}
	cr_assert_geq(found, 1, "%s names no rank0.pt", path);
	int k = 0;
	for (size_t i = 0; i < m->n_extents; i++) {
		if (m->extents[i].inode != (uint64_t)found)
			continue;
		uint8_t want[CAT_HASH_LEN];
		ts_hash(want, fill, k);
		cr_assert_lt(k, 2);
		cr_assert_eq(memcmp(m->chunks[m->extents[i].chunk].hash, want, CAT_HASH_LEN), 0,
			     "%s: chunk %d of rank0.pt is not the one written", path, k);
		k++;
	}
	cr_assert_eq(k, 2, "%s: rank0.pt has %d extents", path, k);
	manifest_free(m);
	free(text);
}

/* A save series/name at step: one file of two chunks of fill, uploaded;
 * committed (and made durable) when commit is true. */
static uint64_t pf_save(struct pt_cat *n, struct pt_backing *bk, uint64_t series,
			const char *name, uint64_t step, uint8_t fill, bool commit)
{
	uint64_t root;
	uint64_t gen = ts_mkgen(n->cat, series, name, step, true, &root);
	uint64_t f = ts_mk(n->cat, root, "rank0.pt", S_IFREG | 0644, NULL);
	ts_write_chunks(n->cat, f, fill, 0, 2, PF_LEN, NULL, NULL);
	cr_assert_eq(pt_cat_upload_chunks(n, NULL, NULL), 2);
	if (commit) {
		OK(cat_gen_commit(n->cat, gen, "dcp-metadata"));
		cr_assert_geq(pt_cat_put_manifests(n, bk), 1);
		cr_assert(pf_durable(n, gen));
	}
	return gen;
}

/* The whole catalog checks clean: the local file, the namespace, the
 * generations. */
static void pf_check(struct pt_cat *n)
{
	OK(cat_check(n->cat));
	OK(cat_gen_check(n->cat));
}

/* gen (run/ckpt/step-1, its rank0.pt two chunks of fill) durable, and
 * BACKING's manifest of it whole; then a checked and closed, bk closed. */
static void pf_durable_end(struct pt_cat *a, struct pt_backing *bk, uint64_t gen, uint8_t fill)
{
	cr_assert(pf_durable(a, gen));
	pf_backing_manifest(a, bk, gen, "run/ckpt", fill);
	pf_check(a);
	pt_cat_close(a);
	pt_backing_close(bk);
}

/* ---- a directory rename (catalog_shared_gen.c S8) ---- */

struct pf_run {
	struct pt_backing bk;
	struct pt_cat a;
	uint64_t series, gen[2];
};

/* run/ckpt with two durable saves on node a. */
static void pf_run_make(struct pf_run *r, const char *tag)
{
	pt_backing_open(&r->bk, tag);
	pt_cat_open(&r->a, tag, 30000, NULL, NULL);
	uint64_t run = ts_mk(r->a.cat, ROOT, "run", S_IFDIR | 0755, NULL);
	r->series = ts_mk(r->a.cat, run, "ckpt", S_IFDIR | 0755, NULL);
	r->gen[0] = pf_save(&r->a, &r->bk, r->series, "step-1", 1, 0x51, true);
	r->gen[1] = pf_save(&r->a, &r->bk, r->series, "step-2", 2, 0x52, true);
	cr_assert_eq(pf_queued(&r->a), 0);
}

static void pf_run_done(struct pf_run *r)
{
	pf_check(&r->a);
	pt_cat_close(&r->a);
	pt_backing_close(&r->bk);
}

/* Both saves queued, put, durable, and BACKING's manifests name dir/ckpt. */
static void pf_run_saved_under(struct pf_run *r, const char *dir)
{
	char series[64];
	snprintf(series, sizeof(series), "%s/ckpt", dir);
	for (int i = 0; i < 2; i++)
		cr_assert(pf_queued_has(&r->a, r->gen[i]), "step-%d's manifest is not queued", i + 1);
	cr_assert_eq(pt_cat_put_manifests(&r->a, &r->bk), 2);
	for (int i = 0; i < 2; i++) {
		cr_assert(pf_durable(&r->a, r->gen[i]), "step-%d is not durable", i + 1);
		pf_backing_manifest(&r->a, &r->bk, r->gen[i], series, (uint8_t)(0x51 + i));
	}
	cr_assert_eq(pf_queued(&r->a), 0);
}

/* The rename's COMMIT lost past the timeout, after (how "lose") or before
 * ("drop") the server ran it: the caller gets -ENOTCONN.
 * F2, applied: the saves' durable marks went with the rename (pgns.h N13),
 * their BACKING manifests naming run/ckpt, and the next sweep queues them
 * (cat_shared_requeue_later); without it no node ever would, and `wait`
 * would wait for them forever.
 * Not applied: nothing moved, the saves stay durable under run, the sweep
 * queues nothing; the rename run again queues them as always. */
static void pf_rename_lost(const char *tag, const char *how)
{
	struct pf_run r;
	pf_run_make(&r, tag);
	bool applied = strcmp(how, "lose") == 0;
	pf_arm_down(&r.a, how, "COMMIT");
	cr_assert_eq(cat_rename(r.a.cat, ROOT, "run", ROOT, "run-new", 0, NULL), -ENOTCONN);

	struct cat_inode in;
	OK(cat_lookup(r.a.cat, ROOT, applied ? "run-new" : "run", &in));
	cr_assert_eq(cat_lookup(r.a.cat, ROOT, applied ? "run" : "run-new", &in), -ENOENT);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(pf_durable(&r.a, r.gen[i]), !applied, "durable: BACKING names run/ckpt");
		pf_backing_manifest(&r.a, &r.bk, r.gen[i], "run/ckpt", (uint8_t)(0x51 + i));
	}
	cr_assert_eq(pf_queued(&r.a), 0);
	size_t swept = 0;
	OK(cat_lease_sweep(r.a.cat, &swept));
	cr_assert_eq(swept, 0);
	if (!applied) {
		cr_assert_eq(pf_queued(&r.a), 0, "a rename that did not happen queued saves");
		pf_check(&r.a);
		OK(cat_rename(r.a.cat, ROOT, "run", ROOT, "run-new", 0, NULL));
	}
	pf_run_saved_under(&r, "run-new");
	pf_run_done(&r);
}

Test(pgfault, a_rename_whose_commit_answer_is_lost_has_the_next_sweep_queue_the_moved_saves)
{
	pf_rename_lost("pfr", "lose");
}

Test(pgfault, a_rename_lost_before_its_commit_reached_the_server_changes_nothing)
{
	pf_rename_lost("pfn", "drop");
}

/* The COMMIT's answer lost with the database still there: P2 asks, finds
 * it committed, and the call returns 0 with what the committed run found
 * (the moved saves), which it queues at once. Running the rename again
 * instead would answer -ENOENT for a rename that happened. */
Test(pgfault, a_rename_whose_commit_answer_is_lost_and_asked_queues_the_moved_saves_itself)
{
	struct pf_run r;
	pf_run_make(&r, "pfq");
	uint64_t before = pf_reconnects(&r.a);
	OK(pg_fault_arm(pf_pg(&r.a), "lose COMMIT"));
	OK(cat_rename(r.a.cat, ROOT, "run", ROOT, "run-new", 0, NULL));
	cr_assert_eq(pf_reconnects(&r.a), before + 1, "the fault did not fire");
	pf_run_saved_under(&r, "run-new");
	pf_run_done(&r);
}

/* ---- a generation's commit (catalog_shared_gen.c S6) ---- */

/* step-1 of run/ckpt on a new node, its file uploaded, not committed. */
static uint64_t pf_open_save(struct pt_cat *a, struct pt_backing *bk, const char *tag)
{
	pt_backing_open(bk, tag);
	pt_cat_open(a, tag, 30000, NULL, NULL);
	uint64_t run = ts_mk(a->cat, ROOT, "run", S_IFDIR | 0755, NULL);
	uint64_t series = ts_mk(a->cat, run, "ckpt", S_IFDIR | 0755, NULL);
	return pf_save(a, bk, series, "step-1", 1, 0x61, false);
}

/* gen committed on a, its manifest queued, put, and durable. */
static void pf_gen_saved(struct pt_cat *a, struct pt_backing *bk, uint64_t gen)
{
	struct cat_gen g;
	OK(cat_gen_get(a->cat, gen, &g));
	cr_assert_eq(g.state, GEN_COMMITTED);
	cr_assert(pf_queued_has(a, gen), "its manifest is not queued");
	cr_assert_eq(pt_cat_put_manifests(a, bk), 1);
	pf_durable_end(a, bk, gen, 0x61);
}

/* The commit lost past the timeout, after (how "lose") or before ("drop")
 * the server ran it: -ENOTCONN, and the generation policy (fs/gen.c) does
 * not try that commit again. Applied, the generation is COMMITTED with no
 * manifest queued, and the next sweep queues it: before, no node ever
 * did, and `wait` waited for it forever. Not applied, it is still open,
 * the sweep queues nothing, and the commit run again commits and queues as
 * always. */
static void pf_commit_lost(const char *tag, const char *how)
{
	struct pt_backing bk;
	struct pt_cat a;
	uint64_t gen = pf_open_save(&a, &bk, tag);
	bool applied = strcmp(how, "lose") == 0;
	pf_arm_down(&a, how, "COMMIT");
	cr_assert_eq(cat_gen_commit(a.cat, gen, "dcp-metadata"), -ENOTCONN);
	struct cat_gen g;
	OK(cat_gen_get(a.cat, gen, &g));
	cr_assert_eq(g.state, applied ? GEN_COMMITTED : GEN_OPEN);
	cr_assert_not(pf_durable(&a, gen));
	cr_assert_eq(pf_queued(&a), 0);
	OK(cat_lease_sweep(a.cat, NULL));
	if (!applied) {
		cr_assert_eq(pf_queued(&a), 0);
		OK(cat_gen_commit(a.cat, gen, "dcp-metadata"));
	}
	pf_gen_saved(&a, &bk, gen);
}

Test(pgfault, a_commit_whose_answer_is_lost_has_the_next_sweep_queue_its_manifest)
{
	pf_commit_lost("pfc", "lose");
}

Test(pgfault, a_commit_lost_before_it_reached_the_server_leaves_the_save_open)
{
	pf_commit_lost("pfo", "drop");
}

/* Lost and asked (P2): committed, so the call returns 0 with the version
 * the committed run wrote (pggen.h X9), whose manifest it queues. */
Test(pgfault, a_commit_whose_answer_is_lost_and_asked_queues_its_manifest_itself)
{
	struct pt_backing bk;
	struct pt_cat a;
	uint64_t gen = pf_open_save(&a, &bk, "pfk");
	uint64_t before = pf_reconnects(&a);
	OK(pg_fault_arm(pf_pg(&a), "lose COMMIT"));
	OK(cat_gen_commit(a.cat, gen, "dcp-metadata"));
	cr_assert_eq(pf_reconnects(&a), before + 1, "the fault did not fire");
	pf_gen_saved(&a, &bk, gen);
}

/* ---- a file's publication (catalog_shared_data.c S2, S12) ---- */

/* run/ckpt/step-1/rank0.pt on a new node, as a writer leaves it before its
 * close: two chunks of 0x71 pending and stored, their uploads claimed
 * (cat_upload_ready, before PostgreSQL has a row of them) but not ended.
 * w holds the generation, the file and the two uploads. */
struct pf_writer {
	struct pt_backing bk;
	struct pt_cat a;
	uint64_t gen, f;
	struct cat_upload rows[2];
};

static void pf_writing(struct pf_writer *w, const char *tag)
{
	struct pt_backing *bk = &w->bk;
	struct pt_cat *a = &w->a;
	uint64_t *f = &w->f;
	struct cat_upload *rows = w->rows;
	pt_backing_open(bk, tag);
	pt_cat_open(a, tag, 30000, NULL, NULL);
	uint64_t run = ts_mk(a->cat, ROOT, "run", S_IFDIR | 0755, NULL);
	uint64_t series = ts_mk(a->cat, run, "ckpt", S_IFDIR | 0755, NULL);
	uint64_t root;
	w->gen = ts_mkgen(a->cat, series, "step-1", 1, true, &root);
	*f = ts_mk(a->cat, root, "rank0.pt", S_IFREG | 0644, NULL);
	for (int i = 0; i < 2; i++) {
		struct cat_extent e = { .off = (uint64_t)i * PF_LEN, .len = PF_LEN,
					.chunk_len = PF_LEN };
		bool must = false;
		ts_hash(e.hash, 0x71, i);
		OK(cat_pending_add(a->cat, *f, &e, &must));
		cr_assert(must);
		OK(cat_chunk_stored(a->cat, e.hash, 1, PF_LEN / 2 + 1));
	}
	struct cat_upload all[64];
	int got = cat_upload_list(a->cat, 0, all, 64), k = 0;
	for (int i = 0; i < got; i++)
		if (all[i].kind == UP_CHUNK) {
			cr_assert_lt(k, 2);
			rows[k++] = all[i];
		}
	cr_assert_eq(k, 2);
	for (int i = 0; i < 2; i++) {
		bool ready = false, moot = false;
		OK(cat_upload_ready(a->cat, &rows[i], &ready, &moot));
		cr_assert(ready && !moot);
	}
}

/* The publication lost past the timeout, after (how "lose") or before
 * ("drop") the server ran it: -ENOTCONN, and the writer fails for good
 * (fs/writer.c), so no later publication of the file tells PostgreSQL
 * about its chunks. Applied, the uploads that end after it must mark them
 * in PostgreSQL (S12): before, they were marked locally alone, as if this
 * node's commit were still to publish them, and the save committed on the
 * published file never became durable. Not applied, the file stays empty
 * (the close failed: the save is not complete) and nothing is marked for
 * it. */
static void pf_publication_lost(const char *tag, const char *how)
{
	struct pf_writer w;
	pf_writing(&w, tag);
	bool applied = strcmp(how, "lose") == 0;
	pf_arm_down(&w.a, how, "ns_publish");
	cr_assert_eq(cat_file_commit(w.a.cat, w.f, 2 * PF_LEN, ts_now_ns(), false), -ENOTCONN);
	struct cat_inode in;
	OK(cat_getattr(w.a.cat, w.f, &in));
	cr_assert_eq(in.size, applied ? 2 * PF_LEN : 0);
	for (int i = 0; i < 2; i++) /* the uploads end */
		OK(cat_upload_done(w.a.cat, &w.rows[i]));
	OK(cat_pending_drop(w.a.cat, w.f)); /* the failed writer's release */

	OK(cat_gen_commit(w.a.cat, w.gen, "dcp-metadata"));
	cr_assert_eq(pt_cat_put_manifests(&w.a, &w.bk), 1, "the manifest is not ready: the published"
		     " file's chunks are not uploaded in PostgreSQL, `wait` waits forever");
	if (applied) {
		pf_durable_end(&w.a, &w.bk, w.gen, 0x71);
		return;
	}
	cr_assert(pf_durable(&w.a, w.gen));
	pf_check(&w.a);
	pt_cat_close(&w.a);
	pt_backing_close(&w.bk);
}

Test(pgfault, a_publication_whose_answer_is_lost_leaves_its_later_uploads_marked_in_the_store)
{
	pf_publication_lost("pfp", "lose");
}

Test(pgfault, a_publication_lost_before_it_reached_the_server_publishes_nothing)
{
	pf_publication_lost("pfd", "drop");
}

/* ---- a publication's refused markings, its outcome unknown (S16) ---- */

static int pf_count_removed(void *arg, const uint8_t hash[CAT_HASH_LEN])
{
	(void)hash;
	(*(int *)arg)++;
	return 0;
}

/* Nodes a and b on one BACKING; chunk h of fill 0xa1 on a's writer of fa. */
struct pf_refusal {
	struct pt_backing bk;
	struct pt_cat a, b;
	uint8_t h[CAT_HASH_LEN];
	uint64_t fa;
};

/* Node b committed chunk h and put it on BACKING, then deleted its file;
 * a writer on node a stores the same bytes and its uploader ends (local
 * row uploaded = 1); then b's reclaim removes the object and the row (the
 * review's dedup hit on a chunk the keep-latest-k expire freed). a's
 * publication re-inserts the row live and not uploaded, and PostgreSQL
 * refuses its marking (pgns.h N7, S8). */
static void pf_refusal_make(struct pf_refusal *r, const char *tag)
{
	char name[32];
	pt_backing_open(&r->bk, tag);
	snprintf(name, sizeof(name), "%s-a", tag);
	pt_cat_open(&r->a, name, 30000, NULL, NULL);
	snprintf(name, sizeof(name), "%s-b", tag);
	pt_cat_open(&r->b, name, 30000, NULL, NULL);
	ts_hash(r->h, 0xa1, 0);

	uint64_t fb = ts_mk(r->b.cat, ROOT, "old", S_IFREG | 0644, NULL), gone = 0;
	ts_write_chunks(r->b.cat, fb, 0xa1, 0, 1, PF_LEN, NULL, NULL);
	pt_cat_upload_put(&r->b, &r->bk);
	cr_assert(pt_on_backing(&r->bk, r->h));
	OK(cat_unlink(r->b.cat, ROOT, "old", &gone));
	OK(cat_inode_release(r->b.cat, gone));

	r->fa = ts_mk(r->a.cat, ROOT, "new", S_IFREG | 0644, NULL);
	struct cat_extent e = { .off = 0, .len = PF_LEN, .chunk_len = PF_LEN };
	memcpy(e.hash, r->h, CAT_HASH_LEN);
	bool must = false;
	OK(cat_pending_add(r->a.cat, r->fa, &e, &must));
	cr_assert(must);
	OK(cat_chunk_stored(r->a.cat, r->h, 1, PF_LEN / 2 + 1));
	pt_cat_upload_put(&r->a, &r->bk);
	cr_assert_eq(pt_cat_local_rows(&r->a, "chunks", "uploaded = 1 AND cached = 1"), 1);

	struct cat_reclaim_report rep;
	OK(cat_reclaim_turn(r->b.cat, 30000, pt_backing_remove, r->bk.b, &rep));
	pt_cat_tree_described(&r->b);
	OK(cat_reclaim_turn(r->b.cat, 30000, pt_backing_remove, r->bk.b, &rep));
	cr_assert_eq(rep.removed, 1);
	cr_assert_not(pt_on_backing(&r->bk, r->h));
}

/* After a's commit (published or not as applied) and its writer's release:
 * the evictor leaves h's copy, its row says not on BACKING and it is queued;
 * the upload puts it on BACKING if the publication committed, and drops it
 * as stale if it did not. */
static void pf_refusal_end(struct pf_refusal *r, bool applied)
{
	struct pgns_chunk_row row;
	cr_assert_eq(pgns_chunk_get(cat_shared_ns(r->a.cat), r->h, &row), applied ? 0 : -ENOENT);
	cr_assert(!applied || (row.refcount == 1 && !row.uploaded),
		  "the publication did not re-insert the chunk live and not uploaded");
	OK(cat_pending_drop(r->a.cat, r->fa)); /* the writer's release */

	bool went = true;
	int removed = 0;
	OK(cat_chunks_evict(r->a.cat, (const uint8_t(*)[CAT_HASH_LEN])r->h, 1, pf_count_removed,
			    &removed, &went));
	cr_assert_not(went, "the evictor took the only copy of a chunk the file may name: not on"
		      " BACKING, its marking refused");
	cr_assert_eq(removed, 0);
	cr_assert_eq(pt_cat_local_rows(&r->a, "chunks", "uploaded = 0 AND cached = 1"), 1);
	cr_assert_eq(pf_rows(&r->a, UP_CHUNK, NULL, 0), 1, "the chunk is not queued for upload");

	pt_cat_upload_put(&r->a, &r->bk); /* put again, or dropped as stale */
	cr_assert_eq(pf_rows(&r->a, UP_CHUNK, NULL, 0), 0);
	cr_assert_eq(pt_on_backing(&r->bk, r->h), applied);
	if (applied) {
		OK(pgns_chunk_get(cat_shared_ns(r->a.cat), r->h, &row));
		cr_assert(row.uploaded, "the chunk put again is not marked uploaded");
	}
	pf_check(&r->a);
	pt_cat_close(&r->a);
	pt_cat_close(&r->b);
	pt_backing_close(&r->bk);
}

/* The COMMIT's answer lost past the timeout (how "lose": it committed;
 * "drop": it did not): -ENOTCONN, and the refused marking is never read.
 * Before S16 a's row stayed uploaded = 1, so once the writer released the
 * chunk the evictor dropped the only copy of a chunk the committed file
 * names. */
static void pf_refused_lost(const char *tag, const char *how)
{
	struct pf_refusal r;
	pf_refusal_make(&r, tag);
	pf_arm_down(&r.a, how, "COMMIT");
	cr_assert_eq(cat_file_commit(r.a.cat, r.fa, PF_LEN, ts_now_ns(), false), -ENOTCONN);
	pf_refusal_end(&r, strcmp(how, "lose") == 0);
}

/* Holds the write lock of a node's local catalog file from a connection of
 * the test's own, from the moment a fault fires (pg_fault_then). */
struct pf_locker {
	const char *path;
	sqlite3 *db;
};

static void pf_lock_local(void *arg)
{
	struct pf_locker *l = arg;
	cr_assert_eq(sqlite3_open(l->path, &l->db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(l->db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
}

Test(pgfault, a_publication_whose_answer_is_lost_keeps_the_chunks_whose_marking_it_may_have_refused)
{
	pf_refused_lost("pfx", "lose");
}

Test(pgfault, a_publication_lost_before_the_server_had_it_keeps_the_chunks_it_tried_to_mark)
{
	pf_refused_lost("pfy", "drop");
}

/* The double fault: the COMMIT's answer lost and asked (P2: committed, the
 * refusal read), then the local mark of the refused chunk fails (another
 * connection holds the local catalog's write lock for the catalog's busy
 * timeout). The commit fails, and the chunk's copy stays until a later
 * eviction writes the mark: before, its row kept uploaded = 1 and the next
 * eviction took the only copy. */
Test(pgfault, a_refused_marking_whose_local_mark_fails_keeps_the_copy_until_it_is_written)
{
	struct pf_refusal r;
	pf_refusal_make(&r, "pfw");
	struct pf_locker l = { .path = r.a.path };
	OK(pg_fault_arm(pf_pg(&r.a), "lose COMMIT"));
	pg_fault_then(pf_pg(&r.a), pf_lock_local, &l);
	int rc = cat_file_commit(r.a.cat, r.fa, PF_LEN, ts_now_ns(), false);
	cr_assert_not_null(l.db, "the fault did not fire");
	OK(sqlite3_exec(l.db, "ROLLBACK", NULL, NULL, NULL));
	sqlite3_close(l.db);
	cr_assert_neq(rc, 0, "the local mark did not fail");
	cr_assert_eq(pt_cat_local_rows(&r.a, "chunks", "uploaded = 1"), 1);
	pf_refusal_end(&r, true);
}

/* ---- an upload's marking (catalog_shared_data.c S5) ---- */

/* The marking in PostgreSQL lost past the timeout, before (how "drop") or
 * after (how "lose") the server ran it: the upload fails and stays queued,
 * and its next end marks it; the save becomes durable. Until then it is
 * durable only if the marking was applied. */
static void pf_marking_lost(const char *tag, const char *how)
{
	struct pf_writer w;
	pf_writing(&w, tag);
	OK(cat_file_commit(w.a.cat, w.f, 2 * PF_LEN, ts_now_ns(), false));
	OK(cat_pending_drop(w.a.cat, w.f));
	pf_arm_down(&w.a, how, "ns_uploaded_many");
	cr_assert_eq(cat_upload_done(w.a.cat, &w.rows[0]), -ENOTCONN);
	OK(cat_upload_done(w.a.cat, &w.rows[1]));
	OK(cat_gen_commit(w.a.cat, w.gen, "dcp-metadata"));
	bool applied = strcmp(how, "lose") == 0;
	cr_assert_eq(pt_cat_put_manifests(&w.a, &w.bk), applied ? 1 : 0);
	cr_assert_eq(pf_durable(&w.a, w.gen), applied);
	cr_assert_eq(pf_rows(&w.a, UP_CHUNK, NULL, 0), 1, "the failed upload is not queued");
	int moot = 0; /* applied: PostgreSQL has it on BACKING already (S4) */
	cr_assert_eq(pt_cat_upload_chunks(&w.a, NULL, &moot), applied ? 0 : 1);
	cr_assert_eq(moot, applied ? 1 : 0);
	cr_assert_eq(pf_rows(&w.a, UP_CHUNK, NULL, 0), 0);
	cr_assert_eq(pt_cat_put_manifests(&w.a, &w.bk), applied ? 0 : 1);
	pf_durable_end(&w.a, &w.bk, w.gen, 0x71);
}

Test(pgfault, an_upload_whose_marking_is_lost_before_the_server_ran_it_is_marked_again)
{
	pf_marking_lost("pfu", "drop");
}

Test(pgfault, an_upload_whose_marking_answer_is_lost_is_marked_again)
{
	pf_marking_lost("pfv", "lose");
}

/* ---- a create (pgns.h N9: one statement with its token, pg.h P5) ---- */

/* Its answer lost, the statement runs again and finds its token: the
 * inode its first run made, not -EEXIST for its own name. */
Test(pgfault, a_create_whose_answer_is_lost_answers_the_inode_it_made)
{
	struct pt_cat a;
	pt_cat_open(&a, "pfe", 30000, NULL, NULL);
	uint64_t before = pf_reconnects(&a);
	OK(pg_fault_arm(pf_pg(&a), "lose ns_create"));
	struct cat_inode made, found;
	OK(cat_create(a.cat, ROOT, "f", S_IFREG | 0644, 0, 0, 0, NULL, &made));
	cr_assert_eq(pf_reconnects(&a), before + 1, "the fault did not fire");
	OK(cat_lookup(a.cat, ROOT, "f", &found));
	cr_assert_eq(found.ino, made.ino);
	cr_assert_eq(found.nlink, 1);
	pf_check(&a);
	pt_cat_close(&a);
}

/* ---- a publication run again (pgns.h N8: its token, pg.h P5) ---- */

/* A file of n extents of 1000 bytes on chunks ts_hash(fill, 0..n). */
static void pf_content(uint8_t fill, size_t n, struct cat_extent *ext, struct pgns_chunk *chunks)
{
	for (size_t i = 0; i < n; i++) {
		ts_hash(chunks[i].hash, fill, (int)i);
		chunks[i].plain_len = 1000;
		chunks[i].stored_len = 600;
		chunks[i].codec = 2;
		ext[i] = (struct cat_extent){ .off = i * 1000, .len = 1000, .chunk_len = 1000 };
		memcpy(ext[i].hash, chunks[i].hash, CAT_HASH_LEN);
	}
}

struct pf_rewrite {
	struct pt_node *b;
	uint64_t ino;
	int rc;
};

/* Node B rewrites the file: three extents of fill 0x93. */
static void pf_rewrite_on_b(void *arg)
{
	struct pf_rewrite *r = arg;
	struct cat_extent ext[3];
	struct pgns_chunk chunks[3];
	pf_content(0x93, 3, ext, chunks);
	r->rc = pgns_file_commit(&r->b->ns, r->ino, 3000, 2, ext, 3, chunks, 3);
}

/* A's publication commits on the server, its answer is lost, and before
 * A's connection is made anew node B rewrites the file. The run again
 * finds its token (N8) and changes nothing: the file is B's, as the order
 * of the two commits says; before, the run again put A's extents back
 * over B's (a lost update) and answered 0. */
Test(pgfault, a_publication_whose_answer_is_lost_is_not_applied_again_over_a_later_change)
{
	struct pt_node a, b;
	pt_join(&a, "a", 30000);
	pt_join(&b, "b", 30000);
	struct cat_inode in;
	OK(pgns_create(&a.ns, ROOT, "f", S_IFREG | 0644, 0, 0, 0, NULL, &in));
	struct cat_extent ea[2];
	struct pgns_chunk ca[2];
	pf_content(0x91, 2, ea, ca);
	OK(pgns_file_commit(&a.ns, in.ino, 2000, 1, ea, 2, ca, 2)); /* prepared on A */
	struct pf_rewrite r = { .b = &b, .ino = in.ino, .rc = 1 };
	struct pg_stats st0, st1;
	pg_get_stats(a.pg, &st0);
	OK(pg_fault_arm(a.pg, "lose ns_publish"));
	pg_fault_then(a.pg, pf_rewrite_on_b, &r);
	pf_content(0x92, 2, ea, ca);
	OK(pgns_file_commit(&a.ns, in.ino, 2000, 3, ea, 2, ca, 2));
	pg_get_stats(a.pg, &st1);
	cr_assert_eq(st1.reconnects, st0.reconnects + 1, "the fault did not fire");
	OK(r.rc);
	struct cat_extent got[4], want[3];
	struct pgns_chunk wc[3];
	pf_content(0x93, 3, want, wc);
	cr_assert_eq(pgns_extents(&a.ns, in.ino, 0, got, 4), 3, "the file is not B's rewrite");
	for (int i = 0; i < 3; i++)
		cr_assert(got[i].off == want[i].off && !memcmp(got[i].hash, want[i].hash, CAT_HASH_LEN),
			  "extent %d is not B's", i);
	OK(pgns_getattr(&a.ns, in.ino, &in));
	cr_assert_eq(in.size, 3000);
	cr_assert_eq(in.mtime_ns, 2);
	for (int i = 0; i < 2; i++) { /* A's publication's chunks: named by nothing now */
		struct pgns_chunk_row row;
		OK(pgns_chunk_get(&a.ns, ca[i].hash, &row));
		cr_assert_eq(row.refcount, 0);
	}
	pt_check(&a);
	pt_leave(&b);
	pt_leave(&a);
}

/* ---- the reclaim duty (catalog_shared_reclaim.c R3) ---- */

/* ino's two chunks of fill from seed, uploaded: their objects put on bk. */
static void pf_write_up(struct pt_cat *n, struct pt_backing *bk, uint64_t ino, int seed)
{
	ts_write_chunks(n->cat, ino, 0x81, seed, 2, PF_LEN, NULL, NULL);
	pt_cat_upload_put(n, bk);
}

static bool pf_row(struct pt_cat *n, int seed, char *state)
{
	uint8_t h[CAT_HASH_LEN];
	ts_hash(h, 0x81, seed);
	struct pgns_chunk_row row;
	int rc = pgns_chunk_get(cat_shared_ns(n->cat), h, &row);
	cr_assert(rc == 0 || rc == -ENOENT);
	if (rc == 0 && state)
		snprintf(state, 16, "%s", row.state);
	return rc == 0;
}

static bool pf_on_backing(struct pt_backing *bk, int seed)
{
	uint8_t h[CAT_HASH_LEN];
	ts_hash(h, 0x81, seed);
	return pt_on_backing(bk, h);
}

/* step-1 (chunks 0, 1) deleted, step-2 (chunks 1, 2) kept, and a first
 * reclaim turn with the tree described after it: the next turn takes
 * chunk 0. Returns step-2. */
static uint64_t pf_freed(struct pt_cat *a, struct pt_backing *bk, const char *tag)
{
	pt_backing_open(bk, tag);
	pt_cat_open(a, tag, 30000, NULL, NULL);
	uint64_t run = ts_mk(a->cat, ROOT, "run", S_IFDIR | 0755, NULL), r1, r2;
	uint64_t g1 = pt_cat_mkgen(a, run, "step-1", 1, &r1);
	pf_write_up(a, bk, ts_mk(a->cat, r1, "rank0.pt", S_IFREG | 0644, NULL), 0);
	OK(cat_gen_commit(a->cat, g1, "test"));
	uint64_t g2 = pt_cat_mkgen(a, run, "step-2", 2, &r2);
	pf_write_up(a, bk, ts_mk(a->cat, r2, "rank0.pt", S_IFREG | 0644, NULL), 1);
	OK(cat_gen_commit(a->cat, g2, "test"));
	struct cat_id_vec ids = { 0 };
	OK(cat_gen_delete(a->cat, g1, "trainer", cat_id_vec_add_ino, &ids));
	for (size_t i = 0; i < ids.n; i++)
		OK(cat_inode_release(a->cat, ids.v[i]));
	cat_id_vec_free(&ids);
	struct cat_reclaim_report rep;
	OK(cat_reclaim_turn(a->cat, 30000, pt_backing_remove, bk->b, &rep));
	cr_assert_eq(rep.chunks, 0);
	pt_cat_tree_described(a);
	for (int s = 0; s < 3; s++)
		cr_assert(pf_on_backing(bk, s));
	return g2;
}

/* After the turn that finishes: chunk 0 gone from BACKING and PostgreSQL,
 * step-2's chunks on BACKING, live, read back by its file. */
static void pf_reclaimed(struct pt_cat *a, struct pt_backing *bk, uint64_t g2)
{
	struct cat_reclaim_report rep;
	OK(cat_reclaim_turn(a->cat, 30000, pt_backing_remove, bk->b, &rep));
	cr_assert_not(pf_on_backing(bk, 0));
	cr_assert_not(pf_row(a, 0, NULL));
	for (int s = 1; s < 3; s++) {
		char state[16] = "";
		cr_assert(pf_on_backing(bk, s), "chunk %d, named by step-2, left BACKING", s);
		cr_assert(pf_row(a, s, state));
		cr_assert_str_eq(state, "live");
	}
	struct cat_gen g;
	OK(cat_gen_get(a->cat, g2, &g));
	struct cat_inode in;
	OK(cat_lookup(a->cat, g.root, "rank0.pt", &in));
	struct cat_extent x[4];
	cr_assert_eq(cat_extents(a->cat, in.ino, 0, x, 4), 2);
	for (int k = 0; k < 2; k++) {
		uint8_t want[CAT_HASH_LEN];
		ts_hash(want, 0x81, 1 + k);
		cr_assert_eq(memcmp(x[k].hash, want, CAT_HASH_LEN), 0);
	}
	pf_check(a);
	pt_cat_close(a);
	pt_backing_close(bk);
}

/* The next reclaim turn's statement which (ns_reclaim_begin: the batch
 * taken, before the objects' removal; ns_reclaim_end: after it) lost past
 * the timeout, as how says: the turn fails and chunk 0's row stays
 * 'reclaiming' for this node (no commit names it meanwhile, pgns.h N3),
 * its object on BACKING or not as removed; the next turn takes this node's
 * 'reclaiming' row again, finds the object there or absent (a removal's
 * success) and ends it. */
static void pf_reclaim_lost(const char *tag, const char *spec, bool removed)
{
	struct pt_backing bk;
	struct pt_cat a;
	uint64_t g2 = pf_freed(&a, &bk, tag);
	OK(pg_fault_arm(pf_pg(&a), spec));
	struct cat_reclaim_report rep;
	cr_assert_eq(cat_reclaim_turn(a.cat, 30000, pt_backing_remove, bk.b, &rep), -ENOTCONN);
	char state[16] = "";
	cr_assert(pf_row(&a, 0, state));
	cr_assert_str_eq(state, "reclaiming");
	cr_assert_eq(pf_on_backing(&bk, 0), !removed);
	pf_reclaimed(&a, &bk, g2);
}

Test(pgfault, a_reclaim_batch_whose_answer_is_lost_is_taken_again_by_the_next_turn)
{
	pf_reclaim_lost("pfb", "lose ns_reclaim_begin down", false);
}

Test(pgfault, a_reclaim_end_whose_answer_is_lost_is_ended_by_the_next_turn)
{
	pf_reclaim_lost("pfz", "drop ns_reclaim_end down", true);
}

/* ---- the injection point itself (pg.c P7) ---- */

/* A spec that is not one is refused whole and arms nothing; "off" disarms
 * one armed. */
Test(pgfault, a_bad_fault_spec_is_refused_and_off_disarms)
{
	struct pt_cat a;
	pt_cat_open(&a, "pfs", 30000, NULL, NULL);
	struct pg *pg = pf_pg(&a);
	const char *bad[] = { "", "lose", "lost COMMIT", "lose COMMIT up", "drop #0", "drop #x",
			      "lose COMMIT down more", NULL };
	for (int i = 0; bad[i]; i++)
		cr_assert_eq(pg_fault_arm(pg, bad[i]), -EINVAL, "\"%s\" was taken", bad[i]);
	cr_assert_eq(pg_fault_arm(pg, NULL), -EINVAL);
	uint64_t before = pf_reconnects(&a);
	OK(pg_fault_arm(pg, "drop * down"));
	OK(pg_fault_arm(pg, "off"));
	struct cat_inode in;
	OK(cat_create(a.cat, ROOT, "f", S_IFREG | 0644, 0, 0, 0, NULL, &in));
	cr_assert_eq(pf_reconnects(&a), before);
	/* #N: the second COMMIT from now, the first let through */
	OK(pg_fault_arm(pg, "lose COMMIT#2 down"));
	OK(cat_rename(a.cat, ROOT, "f", ROOT, "g", 0, NULL));
	cr_assert_eq(cat_rename(a.cat, ROOT, "g", ROOT, "h", 0, NULL), -ENOTCONN);
	OK(cat_lookup(a.cat, ROOT, "h", &in));
	pf_check(&a);
	pt_cat_close(&a);
}
