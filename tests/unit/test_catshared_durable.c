/* Unit tests for meta/manifest_shared.c, durability in the shared engine
 * (D1-D3): two struct cat opened with cat_open_shared on one private
 * PostgreSQL (tests/unit/pgtest.h) are nodes A and B.
 *
 * A generation with files from both nodes, committed on A, is queued on A
 * and becomes durable (on A and on B) only once B's chunk is uploaded too;
 * its manifest, built from PostgreSQL's tree, parses and names every file,
 * entry and extent; a sweep of a lost committing node queues the manifest on
 * the sweeper; that manifest applied to a fresh (emptied) database gives the
 * same tree, bytes' extents and manifest, byte for byte, and a catalog that
 * holds anything is refused. Without PostgreSQL: manifest_format gives back, byte for
 * byte, what the SQLite builder wrote. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <libpq-fe.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backing.h"
#include "catalog.h"
#include "catalog_internal.h"
#include "generation.h"
#include "log.h"
#include "manifest.h"
#include "manifest_shared.h"
#include "pgns.h"
#include "pgtest.h"
#include "rebuild.h"
#include "support.h"
#include "upload.h"

#define ROOT ((uint64_t)CAT_ROOT_INO)
#define DU_LEN 1000

/* The first queued row of kind on n (and how many there are), or false. */
static bool du_row(struct pt_cat *n, int kind, struct cat_upload *out, int *count)
{
	struct cat_upload rows[64];
	int got = cat_upload_list(n->cat, 0, rows, 64), found = 0;
	cr_assert_geq(got, 0);
	for (int i = 0; i < got; i++)
		if (rows[i].kind == kind && found++ == 0)
			*out = rows[i];
	if (count)
		*count = found;
	return found > 0;
}

static bool du_durable(struct pt_cat *n, uint64_t gen)
{
	bool d = true;
	OK(cat_gen_durable(n->cat, gen, &d));
	return d;
}

/* The local id of the inode named path (a/b/c) in m, or -1. */
static int64_t du_find(const struct manifest *m, const char *path)
{
	char buf[256];
	for (size_t i = 1; i < m->n_inodes; i++) {
		manifest_inode_path(m, i, buf, sizeof(buf));
		if (strcmp(buf, path) == 0)
			return (int64_t)i;
	}
	return -1;
}

/* The extents of local inode id in m. */
static size_t du_extents(const struct manifest *m, int64_t id)
{
	size_t n = 0;
	for (size_t i = 0; i < m->n_extents; i++)
		n += m->extents[i].inode == (uint64_t)id;
	return n;
}

/* The shared catalog's tables dropped: a fresh database for the next node. */
static void du_drop_all(void)
{
	PGconn *c = PQconnectdb(pt_url);
	cr_assert_eq(PQstatus(c), CONNECTION_OK, "%s", PQerrorMessage(c));
	PGresult *r = PQexec(c, "SET client_min_messages = warning; DO $$ DECLARE t text; BEGIN FOR t IN SELECT tablename FROM"
			     " pg_tables WHERE schemaname = 'public' LOOP EXECUTE 'DROP TABLE '"
			     " || quote_ident(t) || ' CASCADE'; END LOOP; END $$;"
			     " DROP SEQUENCE IF EXISTS ns_ino_seq;");
	cr_assert_eq(PQresultStatus(r), PGRES_COMMAND_OK, "%s", PQerrorMessage(c));
	PQclear(r);
	PQfinish(c);
}

/* parent/name's inode on n. */
/* Version v of generation gen, built as its manifest would be put, names
 * its series series. */
static void du_assert_series(struct pt_cat *n, uint64_t gen, uint32_t v, const char *series)
{
	char *text = NULL;
	size_t len = 0;
	OK(manifest_gen_build(n->cat, gen, v, &text, &len));
	struct manifest *m = NULL;
	char err[MANIFEST_ERR_MAX] = "";
	cr_assert_eq(manifest_parse(text, len, &m, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(m->gen.series, series);
	manifest_free(m);
	free(text);
}

static struct cat_inode du_lookup(struct pt_cat *n, const char *path)
{
	struct cat_inode in = { .ino = ROOT };
	char buf[256], *save = NULL;
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *t = strtok_r(buf, "/", &save); t; t = strtok_r(NULL, "/", &save))
		OK(cat_lookup(n->cat, in.ino, t, &in));
	return in;
}

TestSuite(catshared_durable, .init = pt_start, .fini = pt_stop, .timeout = 120);

Test(catshared_durable, a_generation_committed_on_a_is_durable_once_b_uploaded_its_chunks)
{
	struct pt_cat a, b;
	pt_cat_open(&a, "dua", 30000, NULL, NULL);
	pt_cat_open(&b, "dub", 30000, NULL, NULL);
	uint64_t run = ts_mk(a.cat, ROOT, "run", S_IFDIR | 0755, NULL);
	uint64_t series = ts_mk(a.cat, run, "ckpt", S_IFDIR | 0700, NULL);
	uint64_t root;
	uint64_t gen = ts_mkgen(a.cat, series, "step-5", 5, true, &root);
	uint64_t fa = ts_mk(a.cat, root, "rank0.pt", S_IFREG | 0644, NULL);
	ts_write_chunks(a.cat, fa, 0x31, 0, 3, DU_LEN, NULL, NULL);
	uint64_t sub = ts_mk(b.cat, root, "model", S_IFDIR | 0755, NULL);
	uint64_t fb = ts_mk(b.cat, sub, "rank1.pt", S_IFREG | 0644, NULL);
	ts_write_chunks(b.cat, fb, 0x32, 0, 2, DU_LEN, NULL, NULL);
	ts_mk(b.cat, root, "latest", S_IFLNK | 0777, "model/rank1.pt");
	ts_mk(a.cat, root, "empty", S_IFREG | 0644, NULL);
	cr_assert_eq(pt_cat_upload_chunks(&a, NULL, NULL), 3);

	struct cat_upload row;
	cr_assert_not(du_row(&a, UP_GEN_MANIFEST, &row, NULL), "queued before its commit");
	OK(cat_gen_commit(a.cat, gen, "dcp-metadata"));
	int count = 0;
	cr_assert(du_row(&a, UP_GEN_MANIFEST, &row, &count), "the commit queued no manifest");
	cr_assert_eq(count, 1);
	cr_assert_eq(row.gen, gen);
	cr_assert_not(du_row(&b, UP_GEN_MANIFEST, &row, NULL) && row.gen == gen);
	cr_assert(du_row(&a, UP_GEN_MANIFEST, &row, NULL));

	/* B's chunks are not on BACKING: not ready, not durable anywhere */
	bool ready = true, stale = true;
	OK(cat_upload_ready(a.cat, &row, &ready, &stale));
	cr_assert_not(stale);
	cr_assert_not(ready, "ready while B still holds chunks not uploaded");
	cr_assert_not(du_durable(&a, gen));
	cr_assert_not(du_durable(&b, gen));
	cr_assert_not(du_durable(&b, 0));

	cr_assert_eq(pt_cat_upload_chunks(&b, NULL, NULL), 2);
	OK(cat_upload_ready(a.cat, &row, &ready, &stale));
	cr_assert(ready && !stale);
	char *text = NULL;
	size_t len = 0;
	OK(manifest_gen_build(a.cat, row.gen, row.version, &text, &len));
	cr_assert_not(du_durable(&b, gen), "durable before its manifest is on BACKING");
	OK(cat_upload_done(a.cat, &row));
	cr_assert(du_durable(&a, gen));
	cr_assert(du_durable(&b, gen));
	cr_assert(du_durable(&b, 0));
	cr_assert_not(du_row(&a, UP_GEN_MANIFEST, &row, NULL));

	/* the manifest names every file, entry and extent of both nodes */
	struct manifest *m = NULL;
	char err[MANIFEST_ERR_MAX] = "";
	cr_assert_eq(manifest_parse(text, len, &m, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(m->kind, MANIFEST_GEN);
	cr_assert_eq(m->gen.id, gen);
	cr_assert_eq(m->gen.step, 5);
	cr_assert_str_eq(m->gen.series, "run/ckpt");
	cr_assert_str_eq(m->gen.name, "step-5");
	cr_assert_str_eq(m->gen.rule, "dcp-metadata");
	cr_assert_eq(m->n_inodes, 6); /* root, rank0.pt, model, rank1.pt, latest, empty */
	cr_assert_eq(m->n_entries, 5);
	cr_assert_eq(m->files, 3);
	cr_assert_eq(m->bytes, 5 * DU_LEN);
	cr_assert_eq(m->n_chunks, 5);
	int64_t ia = du_find(m, "rank0.pt"), ib = du_find(m, "model/rank1.pt");
	int64_t il = du_find(m, "latest");
	cr_assert(ia > 0 && ib > 0 && il > 0 && du_find(m, "empty") > 0);
	cr_assert_eq(du_extents(m, ia), 3);
	cr_assert_eq(du_extents(m, ib), 2);
	cr_assert_eq(m->inodes[ib].size, 2 * DU_LEN);
	cr_assert_str_eq(m->inodes[il].target, "model/rank1.pt");
	/* formatting the parsed form gives back the same bytes */
	char *again = NULL;
	size_t again_len = 0;
	OK(manifest_format(m, &again, &again_len));
	cr_assert_eq(again_len, len);
	cr_assert_eq(memcmp(again, text, len), 0);
	free(again);

	/* the extents of rank1.pt (written by B) before the database is lost */
	struct cat_extent before[8], after[8];
	struct cat_inode f1 = du_lookup(&a, "run/ckpt/step-5/model/rank1.pt");
	int nb = cat_extents(a.cat, f1.ino, 0, before, 8);
	cr_assert_eq(nb, 2);
	struct cat_gen g;
	OK(cat_gen_get(a.cat, gen, &g));
	pt_cat_close(&b);
	pt_cat_close(&a);

	/* the database is lost: a fresh one refilled from the manifest */
	du_drop_all();
	struct pt_cat c;
	pt_cat_open(&c, "duc", 30000, NULL, NULL);
	char why[256];
	OK(manifest_shared_empty(c.cat, why, sizeof(why)));
	cr_assert_eq(manifest_apply_parsed(c.cat, m, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(manifest_shared_empty(c.cat, why, sizeof(why)), -ENOTEMPTY);
	cr_assert_eq(manifest_apply_parsed(c.cat, m, err, sizeof(err)), -EEXIST, "applied twice");
	int violations = -1;
	OK(pgns_check(cat_shared_ns(c.cat), &violations));
	cr_assert_eq(violations, 0);
	OK(cat_gen_check(c.cat));
	struct cat_gen back;
	OK(cat_gen_get(c.cat, gen, &back));
	cr_assert_eq(back.state, GEN_COMMITTED);
	cr_assert_eq(back.version, g.version);
	cr_assert_str_eq(back.name, "step-5");
	cr_assert(du_durable(&c, gen), "a rebuilt generation is durable");
	struct cat_inode r1 = du_lookup(&c, "run/ckpt/step-5/model/rank1.pt");
	cr_assert_eq(r1.size, 2 * DU_LEN);
	cr_assert_eq(cat_extents(c.cat, r1.ino, 0, after, 8), nb);
	for (int i = 0; i < nb; i++) {
		cr_assert_eq(after[i].off, before[i].off);
		cr_assert_eq(after[i].len, before[i].len);
		cr_assert_eq(after[i].chunk_off, before[i].chunk_off);
		cr_assert_eq(memcmp(after[i].hash, before[i].hash, CAT_HASH_LEN), 0);
	}
	cr_assert_eq(du_lookup(&c, "run/ckpt/step-5/rank0.pt").size, 3 * DU_LEN);
	char target[64] = "";
	struct cat_inode l = du_lookup(&c, "run/ckpt/step-5/latest");
	OK(cat_readlink(c.cat, l.ino, target, sizeof(target)));
	cr_assert_str_eq(target, "model/rank1.pt");
	/* and its manifest, built again from the rebuilt tables, is the same bytes */
	char *rebuilt = NULL;
	size_t rebuilt_len = 0;
	OK(manifest_gen_build(c.cat, gen, g.version, &rebuilt, &rebuilt_len));
	cr_assert_eq(rebuilt_len, len);
	cr_assert_eq(memcmp(rebuilt, text, len), 0, "%s\n----\n%s", text, rebuilt);
	free(rebuilt);
	manifest_free(m);
	free(text);
	pt_cat_close(&c);
}

Test(catshared_durable, a_stale_row_and_a_lost_committer_are_handled)
{
	struct pt_cat a, b;
	pt_cat_open(&a, "dsa", 1000, NULL, NULL);
	pt_cat_open(&b, "dsb", 30000, NULL, NULL);
	uint64_t series = ts_mk(a.cat, ROOT, "ckpt", S_IFDIR | 0755, NULL);
	uint64_t root;
	uint64_t gen = ts_mkgen(a.cat, series, "step-1", 1, true, &root);
	uint64_t f = ts_mk(a.cat, root, "w.pt", S_IFREG | 0644, NULL);
	ts_write_chunks(a.cat, f, 0x41, 0, 1, DU_LEN, NULL, NULL);
	cr_assert_eq(pt_cat_upload_chunks(&a, NULL, NULL), 1);
	OK(cat_gen_commit(a.cat, gen, "dcp-metadata"));
	struct cat_upload row;
	cr_assert(du_row(&a, UP_GEN_MANIFEST, &row, NULL));

	/* A is lost before its uploader got to the manifest: B's sweep queues it */
	usleep(2300 * 1000); /* A stops renewing: its lease and its grace (lease.h L4) run out */
	size_t swept = 0;
	OK(cat_lease_sweep(b.cat, &swept));
	cr_assert_eq(swept, 1);
	cr_assert(du_row(&b, UP_GEN_MANIFEST, &row, NULL), "the sweep queued no manifest");
	cr_assert_eq(row.gen, gen);
	bool ready = false, stale = true;
	OK(cat_upload_ready(b.cat, &row, &ready, &stale));
	cr_assert(ready && !stale);
	char *text = NULL;
	size_t len = 0;
	OK(manifest_gen_build(b.cat, row.gen, row.version, &text, &len));
	free(text);
	OK(cat_upload_done(b.cat, &row));
	cr_assert(du_durable(&b, gen));
	cr_assert_not(du_row(&b, UP_GEN_MANIFEST, &row, NULL));

	/* a row whose generation was deleted since is stale, and its build too */
	uint64_t r2;
	uint64_t g2 = ts_mkgen(b.cat, series, "step-2", 2, true, &r2);
	OK(cat_gen_commit(b.cat, g2, "dcp-metadata"));
	cr_assert(du_row(&b, UP_GEN_MANIFEST, &row, NULL));
	OK(cat_gen_delete(b.cat, g2, "admin", NULL, NULL));
	OK(cat_upload_ready(b.cat, &row, &ready, &stale));
	cr_assert(stale);
	FAILS(manifest_gen_build(b.cat, row.gen, row.version, &text, &len), ESTALE);
	OK(cat_upload_done(b.cat, &row));
	cr_assert(du_durable(&b, 0));
	pt_cat_close(&a);
	pt_cat_close(&b);
}

/* ---- without PostgreSQL: the SQLite builder's bytes, formatted again ---- */

Test(manifest_format, gives_back_the_sqlite_builders_bytes)
{
	log_setup(stderr, LOG_LVL_WARN);
	char dir[64], path[128];
	struct cat *cat;
	ts_tmpdir_make(dir, sizeof(dir), "mff");
	ts_cat_open_in(dir, "c.db", path, sizeof(path), &cat);
	uint64_t run = ts_mk(cat, ROOT, "r%un", S_IFDIR | 0755, NULL);
	uint64_t series = ts_mk(cat, run, "-", S_IFDIR | 0700, NULL);
	uint64_t root;
	uint64_t gen = ts_mkgen(cat, series, "step 9", 9, true, &root);
	uint64_t sub = ts_mk(cat, root, "we\tird\xff", S_IFDIR | 0755, NULL);
	uint64_t w = ts_mk(cat, sub, "-", S_IFREG | 0600, NULL);
	ts_write_chunks(cat, w, 0x51, 0, 3, DU_LEN, NULL, NULL);
	struct cat_inode l;
	OK(cat_link(cat, w, root, "hard", &l));
	ts_mk(cat, root, "link", S_IFLNK | 0777, "../%x -");
	ts_mk(cat, root, "null", S_IFCHR | 0666, NULL);
	OK(cat_gen_commit(cat, gen, "dcp-metadata"));
	OK(cat_gen_pin(cat, gen, true));
	struct cat_gen g;
	OK(cat_gen_get(cat, gen, &g));
	char *text, *again;
	size_t len, again_len;
	OK(manifest_gen_build(cat, gen, g.version, &text, &len));
	struct manifest *m = NULL;
	char err[MANIFEST_ERR_MAX] = "";
	cr_assert_eq(manifest_parse(text, len, &m, err, sizeof(err)), 0, "%s", err);
	OK(manifest_format(m, &again, &again_len));
	cr_assert_eq(again_len, len);
	cr_assert_eq(memcmp(again, text, len), 0, "%s\n----\n%s", text, again);
	free(again);
	manifest_free(m);
	free(text);
	ts_cat_close_checked(&cat);
	ts_tmpdir_remove(dir);
}

/* rebuild --meta (rebuild.c invariant 6): a manifest the rebuild could not
 * read (or rejected) stays on BACKING, the only copy of that save; the
 * rebuilt shared catalog's sequence goes past its id, so no new generation
 * writes manifests/gen/ID.1.ckm over it. Before, the sequence stopped at
 * the highest id applied. */
Test(catshared_durable, a_rebuild_never_hands_out_the_id_of_a_manifest_it_left_out)
{
	char dir[64], bdir[128], path[MANIFEST_PATH_MAX];
	ts_tmpdir_make(dir, sizeof(dir), "dur");
	snprintf(bdir, sizeof(bdir), "%s/backing", dir);
	cr_assert_eq(mkdir(bdir, 0755), 0);
	struct backing *bk;
	OK(backing_open(bdir, 5000, &bk));
	struct pt_cat a;
	pt_cat_open(&a, "dra", 30000, NULL, NULL);
	uint64_t series = ts_mk(a.cat, ROOT, "ckpt", S_IFDIR | 0755, NULL);
	uint64_t root;
	uint64_t gen = ts_mkgen(a.cat, series, "step-1", 1, true, &root);
	ts_mk(a.cat, root, ".metadata", S_IFREG | 0644, NULL);
	OK(cat_gen_commit(a.cat, gen, "dcp-metadata"));
	struct cat_gen g;
	OK(cat_gen_get(a.cat, gen, &g));
	char *text = NULL;
	size_t len = 0;
	OK(manifest_gen_build(a.cat, gen, g.version, &text, &len));
	manifest_gen_path(gen, g.version, path, sizeof(path));
	OK(backing_put(bk, path, text, len));
	free(text);
	/* a later save whose only manifest cannot be read */
	uint64_t unread = gen + 40;
	manifest_gen_path(unread, 1, path, sizeof(path));
	OK(backing_put(bk, path, "not a manifest\n", 15));
	pt_cat_close(&a);

	du_drop_all();
	struct pt_cat c;
	pt_cat_open(&c, "drc", 30000, NULL, NULL);
	struct rebuild_report rep;
	OK(rebuild_catalog(bk, c.cat, 0, NULL, NULL, &rep));
	cr_assert_eq(rep.generations, 1);
	cr_assert_eq(rep.generations_lost, 1);
	struct cat_inode s;
	OK(cat_lookup(c.cat, ROOT, "ckpt", &s));
	uint64_t next = ts_mkgen(c.cat, s.ino, "step-2", 2, true, &root);
	cr_assert_gt(next, unread, "new generation %" PRIu64 " after a rebuild that could not read %"
		     PRIu64, next, unread);
	OK(cat_gen_check(c.cat));
	pt_cat_close(&c);
	backing_close(bk);
	ts_tmpdir_remove(dir);
}

/* A rewrite rolled back (an abort of the new version) restores the last
 * version; its manifest on BACKING names the series by the path it had
 * when written, and the series was renamed while the new version was open:
 * the restored version's manifest is queued again (as on one node,
 * gen_backup_restore), so that a rebuild --meta puts it under its new
 * name. Before, nothing was queued: the old path stayed on BACKING. */
Test(catshared_durable, a_rewrite_rolled_back_queues_the_restored_versions_manifest)
{
	struct pt_cat a;
	pt_cat_open(&a, "drr", 30000, NULL, NULL);
	uint64_t run = ts_mk(a.cat, ROOT, "run", S_IFDIR | 0755, NULL);
	uint64_t series = ts_mk(a.cat, run, "ckpt", S_IFDIR | 0755, NULL);
	uint64_t root;
	uint64_t gen = ts_mkgen(a.cat, series, "step-1", 1, true, &root);
	ts_mk(a.cat, root, ".metadata", S_IFREG | 0644, NULL);
	OK(cat_gen_commit(a.cat, gen, "dcp-metadata"));
	struct cat_upload row;
	cr_assert(du_row(&a, UP_GEN_MANIFEST, &row, NULL));
	cr_assert_eq(row.version, 1);
	OK(cat_upload_done(a.cat, &row)); /* v1's manifest, naming run/ckpt, is on BACKING */
	cr_assert(du_durable(&a, gen));
	cr_assert_not(du_row(&a, UP_GEN_MANIFEST, &row, NULL));

	OK(cat_gen_reopen(a.cat, gen)); /* a rewrite: version 2, OPEN */
	OK(cat_rename(a.cat, ROOT, "run", ROOT, "run2", 0, NULL));
	OK(cat_gen_abort(a.cat, gen, "trainer", NULL, NULL)); /* back to version 1 */
	struct cat_gen g;
	OK(cat_gen_get(a.cat, gen, &g));
	cr_assert_eq(g.state, GEN_COMMITTED);
	cr_assert_eq(g.version, 1);
	/* the rename cleared the rewrite's mark too (pgns.h N13): before, the
	 * restored version was durable at once, and `wait` returned while
	 * BACKING's only manifest of it named run/ckpt */
	cr_assert_not(du_durable(&a, gen), "durable while BACKING's manifest names run/ckpt");
	cr_assert(du_row(&a, UP_GEN_MANIFEST, &row, NULL),
		  "the restored version's manifest is not queued again");
	cr_assert_eq(row.gen, gen);
	cr_assert_eq(row.version, 1);
	bool ready = false, stale = true;
	OK(cat_upload_ready(a.cat, &row, &ready, &stale));
	cr_assert(ready && !stale);
	du_assert_series(&a, gen, 1, "run2/ckpt");
	OK(cat_upload_done(a.cat, &row));
	cr_assert(du_durable(&a, gen));
	pt_cat_close(&a);
}

/* The same for a hold of the new version (a rewrite not proven complete):
 * it rolls back to the last version, whose manifest is queued again. */
Test(catshared_durable, a_rewrite_held_back_queues_the_restored_versions_manifest)
{
	struct pt_cat a;
	pt_cat_open(&a, "drh", 30000, NULL, NULL);
	uint64_t run = ts_mk(a.cat, ROOT, "run", S_IFDIR | 0755, NULL);
	uint64_t series = ts_mk(a.cat, run, "ckpt", S_IFDIR | 0755, NULL);
	uint64_t root;
	uint64_t gen = ts_mkgen(a.cat, series, "step-1", 1, true, &root);
	OK(cat_gen_commit(a.cat, gen, "dcp-metadata"));
	struct cat_upload row;
	cr_assert(du_row(&a, UP_GEN_MANIFEST, &row, NULL));
	OK(cat_upload_done(a.cat, &row));
	cr_assert(du_durable(&a, gen));

	OK(cat_gen_reopen(a.cat, gen));
	OK(cat_rename(a.cat, ROOT, "run", ROOT, "run3", 0, NULL));
	bool held = true;
	OK(cat_gen_hold(a.cat, gen, "dcp-metadata", "not proven complete", NULL, NULL, &held));
	cr_assert_not(held, "rolled back, not held");
	struct cat_gen g;
	OK(cat_gen_get(a.cat, gen, &g));
	cr_assert_eq(g.state, GEN_COMMITTED);
	cr_assert(du_row(&a, UP_GEN_MANIFEST, &row, NULL),
		  "the restored version's manifest is not queued again");
	cr_assert_eq(row.version, 1);
	du_assert_series(&a, gen, 1, "run3/ckpt");
	pt_cat_close(&a);
}

/* ---- S8, pgns.h N13: a directory renamed with committed saves in it ---- */

/* A durable save (one file of 2 chunks, written by n) series/name, step. */
static uint64_t du_save(struct pt_cat *n, struct pt_backing *bk, uint64_t series, const char *name,
			uint64_t step, uint8_t fill)
{
	uint64_t root;
	uint64_t gen = ts_mkgen(n->cat, series, name, step, true, &root);
	uint64_t f = ts_mk(n->cat, root, "rank0.pt", S_IFREG | 0644, NULL);
	ts_write_chunks(n->cat, f, fill, 0, 2, DU_LEN, NULL, NULL);
	cr_assert_eq(pt_cat_upload_chunks(n, NULL, NULL), 2);
	OK(cat_gen_commit(n->cat, gen, "dcp-metadata"));
	cr_assert_geq(pt_cat_put_manifests(n, bk), 1);
	cr_assert(du_durable(n, gen));
	return gen;
}

/* The extents of path on n equal want[0..2): the hashes of fill's chunks. */
static void du_expect_chunks(struct pt_cat *n, const char *path, uint8_t fill)
{
	struct cat_extent x[4];
	struct cat_inode f = du_lookup(n, path);
	cr_assert_eq(f.size, 2 * DU_LEN, "%s", path);
	cr_assert_eq(cat_extents(n->cat, f.ino, 0, x, 4), 2, "%s", path);
	for (int k = 0; k < 2; k++) {
		uint8_t want[CAT_HASH_LEN];
		ts_hash(want, fill, k);
		cr_assert_eq(x[k].off, (uint64_t)k * DU_LEN);
		cr_assert_eq(memcmp(x[k].hash, want, CAT_HASH_LEN), 0, "%s: chunk %d is not the"
			     " one written", path, k);
	}
}

/* run/ckpt holds a durable save; run is renamed run-old on A and a new run
 * started under run/ckpt with its own step-1 on B. Before, the rename
 * queued nothing: BACKING's manifest of the old save named run/ckpt, and
 * rebuild --meta put it back there, in conflict with the new run's step-1
 * (one of the two left out). A node lost after the rename, before its
 * queue was written, leaves the save not durable for the sweeper. */
Test(catshared_durable, a_renamed_series_is_rebuilt_under_its_new_name_beside_the_new_run)
{
	struct pt_backing bk;
	pt_backing_open(&bk, "dus");
	struct pt_cat a, b;
	pt_cat_open(&a, "dsa", 30000, NULL, NULL);
	pt_cat_open(&b, "dsb", 30000, NULL, NULL);
	uint64_t run = ts_mk(a.cat, ROOT, "run", S_IFDIR | 0755, NULL);
	uint64_t series = ts_mk(a.cat, run, "ckpt", S_IFDIR | 0755, NULL);
	uint64_t old1 = du_save(&a, &bk, series, "step-1", 1, 0x41);
	uint64_t old2 = du_save(&a, &bk, series, "step-2", 2, 0x42);

	OK(cat_rename(a.cat, ROOT, "run", ROOT, "run-old", 0, NULL));
	cr_expect_not(du_durable(&b, old1), "durable while BACKING's manifest names run/ckpt");
	cr_expect_not(du_durable(&b, old2));
	/* A's queue lost with A: B's sweep would queue them (not durable) */
	size_t queued = 0;
	OK(catshd_enqueue_undurable(b.cat, &queued));
	cr_expect_eq(queued, 2, "the sweeper of a lost renamer would not queue them");
	OK(cat_rename(b.cat, ROOT, "run-old", ROOT, "run-older", 0, NULL)); /* again, on B */

	/* a new run under the old name, on B */
	uint64_t run2 = ts_mk(b.cat, ROOT, "run", S_IFDIR | 0755, NULL);
	uint64_t series2 = ts_mk(b.cat, run2, "ckpt", S_IFDIR | 0755, NULL);
	uint64_t new1 = du_save(&b, &bk, series2, "step-1", 1, 0x43);
	pt_cat_put_manifests(&a, &bk);
	pt_cat_put_manifests(&b, &bk);
	cr_assert(du_durable(&a, old1) && du_durable(&a, old2));
	pt_cat_close(&b);
	pt_cat_close(&a);

	/* the database is lost: rebuild --meta from BACKING */
	du_drop_all();
	struct pt_cat c;
	pt_cat_open(&c, "dsc", 30000, NULL, NULL);
	struct rebuild_report rep;
	OK(rebuild_catalog(bk.b, c.cat, 0, NULL, NULL, &rep));
	cr_expect_eq(rep.manifests_rejected, 0, "%" PRIu64 " save(s) rejected by the rebuild",
		     rep.manifests_rejected);
	cr_expect_eq(rep.generations, 3);
	struct cat_gen g;
	OK(cat_gen_find(c.cat, du_lookup(&c, "run-older/ckpt").ino, "step-1", &g));
	cr_assert_eq(g.id, old1, "run-older/ckpt/step-1 is the old run's save");
	OK(cat_gen_find(c.cat, du_lookup(&c, "run-older/ckpt").ino, "step-2", &g));
	cr_assert_eq(g.id, old2);
	OK(cat_gen_find(c.cat, du_lookup(&c, "run/ckpt").ino, "step-1", &g));
	cr_assert_eq(g.id, new1, "run/ckpt/step-1 is the new run's save");
	du_expect_chunks(&c, "run-older/ckpt/step-1/rank0.pt", 0x41);
	du_expect_chunks(&c, "run-older/ckpt/step-2/rank0.pt", 0x42);
	du_expect_chunks(&c, "run/ckpt/step-1/rank0.pt", 0x43);
	OK(cat_gen_check(c.cat));
	pt_cat_close(&c);
	pt_backing_close(&bk);
}

/* ---- rebuild --meta: a save in conflict by its name comes back held ---- */

/* A save series/name, step: rank0.pt of fill's chunks 0 and 1, shared.pt of
 * chunk (0x50, 0), which every such save names; uploaded (objects on bk),
 * committed, its manifest on bk. */
static uint64_t du_save_shared(struct pt_cat *n, struct pt_backing *bk, uint64_t series,
			       const char *name, uint64_t step, uint8_t fill)
{
	uint64_t root;
	uint64_t gen = ts_mkgen(n->cat, series, name, step, true, &root);
	ts_write_chunks(n->cat, ts_mk(n->cat, root, "rank0.pt", S_IFREG | 0644, NULL), fill, 0, 2,
			DU_LEN, NULL, NULL);
	ts_write_chunks(n->cat, ts_mk(n->cat, root, "shared.pt", S_IFREG | 0644, NULL), 0x50, 0, 1,
			DU_LEN, NULL, NULL);
	pt_cat_upload_put(n, bk);
	OK(cat_gen_commit(n->cat, gen, "dcp-metadata"));
	cr_assert_geq(pt_cat_put_manifests(n, bk), 1);
	cr_assert(du_durable(n, gen));
	return gen;
}

static bool du_on(struct pt_backing *bk, uint8_t fill, int seed)
{
	uint8_t h[CAT_HASH_LEN];
	ts_hash(h, fill, seed);
	return pt_on_backing(bk, h);
}

static uint64_t du_refcount(struct pt_cat *n, uint8_t fill, int seed)
{
	uint8_t h[CAT_HASH_LEN];
	struct pgns_chunk_row row;
	ts_hash(h, fill, seed);
	OK(pgns_chunk_get(cat_shared_ns(n->cat), h, &row));
	return row.refcount;
}

static int du_list_one(void *arg, const struct cat_gen *g)
{
	struct cat_gen *out = arg;
	if (g->state == GEN_HELD)
		*out = *g;
	return 0;
}

/* rebuild.c invariant 7 on the shared engine (manifest.h M4): run/ckpt/step-1
 * was deleted on A while its manifest's removal waited for the reclaim
 * duty, and a new step-1 saved under the same name; the database is lost.
 * rebuild --meta applies the lower id at run/ckpt/step-1 and the newer save,
 * in conflict by its name, HELD as step-1.rebuild-ID (reason, rule
 * "rebuild"), its tree whole, its chunks counted: an rm of the other save
 * and the reclaim leave its objects on BACKING; an admin's commit shows it,
 * its manifest written again under that name, and a later rebuild brings it
 * back committed. Before, rebuild --meta left it out: lost, no rows, its
 * chunks free for the reclaim once the other save went. */
/* Two saves run/ckpt/step-1 on bk: *old (0x41's chunks) deleted on a node
 * before the reclaim duty removed its manifest, *gen (0x42's) saved after
 * it under the same name; both share (0x50, 0). *want (if not NULL) gets
 * ts_dump_from of *gen's tree. Then the database is lost and c is opened
 * on an empty one. */
static void du_conflict(struct pt_backing *bk, struct pt_cat *c, uint64_t *old, uint64_t *gen,
			char **want)
{
	struct pt_cat a;
	pt_cat_open(&a, "dha", 30000, NULL, NULL);
	uint64_t run = ts_mk(a.cat, ROOT, "run", S_IFDIR | 0755, NULL);
	uint64_t series = ts_mk(a.cat, run, "ckpt", S_IFDIR | 0755, NULL);
	*old = du_save_shared(&a, bk, series, "step-1", 1, 0x41);
	struct cat_id_vec gone = { 0 };
	OK(cat_gen_delete(a.cat, *old, "rm", cat_id_vec_add_ino, &gone));
	OK(cat_inodes_release(a.cat, gone.v, gone.n));
	cat_id_vec_free(&gone);
	*gen = du_save_shared(&a, bk, series, "step-1", 1, 0x42);
	cr_assert_gt(*gen, *old);
	struct cat_gen g;
	OK(cat_gen_get(a.cat, *gen, &g));
	if (want)
		*want = ts_dump_from(a.cat, g.root, "s", false);
	pt_cat_close(&a);
	du_drop_all();
	pt_cat_open(c, "dhc", 30000, NULL, NULL);
}

/* n's reclaim as the duty makes it: a turn that sees what is free, the
 * tree horizon past it, a turn that reclaims. */
static void du_reclaim(struct pt_cat *n, struct pt_backing *bk)
{
	struct cat_reclaim_report rr;
	OK(cat_reclaim_turn(n->cat, 30000, pt_backing_remove, bk->b, &rr));
	pt_cat_tree_described(n);
	OK(cat_reclaim_turn(n->cat, 30000, pt_backing_remove, bk->b, &rr));
	cr_assert(rr.held);
}

Test(catshared_durable, a_save_in_conflict_comes_back_held_from_rebuild_meta)
{
	struct pt_backing bk;
	pt_backing_open(&bk, "duh");
	struct pt_cat c;
	uint64_t old, gen;
	char *want = NULL;
	du_conflict(&bk, &c, &old, &gen, &want);
	struct cat_id_vec gone = { 0 };
	struct cat_gen g;
	struct rebuild_report rep;
	OK(rebuild_catalog(bk.b, c.cat, 0, NULL, NULL, &rep));
	cr_assert_eq(rep.manifests_rejected, 1, "run/ckpt/step-1 is taken");
	cr_assert_eq(rep.generations_held, 1, "the save in conflict was left out");
	cr_assert_eq(rep.generations, 1);
	cr_assert_eq(rep.generations_lost, 0);
	OK(cat_gen_check(c.cat));
	int violations = -1;
	OK(pgns_check(cat_shared_ns(c.cat), &violations));
	cr_assert_eq(violations, 0);

	char name[64], why[256];
	snprintf(name, sizeof(name), "step-1.rebuild-%" PRIu64, gen);
	OK(cat_gen_get(c.cat, gen, &g));
	cr_assert_eq(g.state, GEN_HELD);
	cr_assert_str_eq(g.name, name);
	cr_assert_eq(g.step, 1);
	cr_assert_eq(g.version, 1);
	cr_assert_str_eq(g.rule, "rebuild");
	snprintf(why, sizeof(why), "rebuild: manifests/gen/%" PRIu64 ".1.ckm conflicts with the"
		 " catalog at run/ckpt/step-1 (line 2: \"run/ckpt/step-1\" exists in the catalog as"
		 " inode ", gen);
	cr_assert(strncmp(g.held, why, strlen(why)) == 0, "held: %s", g.held);
	struct cat_gen listed = { 0 }; /* list --all */
	OK(cat_gen_list(c.cat, 0, true, du_list_one, &listed));
	cr_assert_eq(listed.id, gen, "list --all does not show the held save");
	struct cat_gen winner; /* the lower id's save keeps the name */
	OK(cat_gen_find(c.cat, du_lookup(&c, "run/ckpt").ino, "step-1", &winner));
	cr_assert_eq(winner.id, old);
	char path[128];
	snprintf(path, sizeof(path), "run/ckpt/%s", name);
	cr_assert_eq(du_lookup(&c, path).ino, g.root);
	char *got = ts_dump_from(c.cat, g.root, "s", false);
	cr_assert_str_eq(got, want);
	free(got);
	/* counted: the shared chunk by both saves, 0x42's by the held one */
	cr_assert_eq(du_refcount(&c, 0x50, 0), 2);
	cr_assert_eq(du_refcount(&c, 0x42, 0), 1);
	cr_assert_eq(du_refcount(&c, 0x42, 1), 1);

	/* the other save goes (rm), the reclaim duty takes what it alone named */
	OK(cat_gen_delete(c.cat, old, "admin", cat_id_vec_add_ino, &gone));
	OK(cat_inodes_release(c.cat, gone.v, gone.n));
	cat_id_vec_free(&gone);
	du_reclaim(&c, &bk);
	cr_assert_not(du_on(&bk, 0x41, 0), "the deleted save's own chunk was not reclaimed");
	cr_assert_not(du_on(&bk, 0x41, 1));
	cr_assert(du_on(&bk, 0x50, 0), "the held save's shared chunk was reclaimed");
	cr_assert(du_on(&bk, 0x42, 0));
	cr_assert(du_on(&bk, 0x42, 1));
	cr_assert_eq(du_refcount(&c, 0x50, 0), 1);

	/* an admin's commit decides: shown under its new name, its manifest
	 * written again with that name */
	OK(cat_gen_commit(c.cat, gen, "admin"));
	OK(cat_gen_get(c.cat, gen, &g));
	cr_assert_eq(g.state, GEN_COMMITTED);
	cr_assert_str_eq(g.name, name);
	cr_assert_eq(pt_cat_put_manifests(&c, &bk), 1);
	snprintf(path, sizeof(path), "run/ckpt/%s/rank0.pt", name);
	du_expect_chunks(&c, path, 0x42);
	got = ts_dump_from(c.cat, g.root, "s", false);
	cr_assert_str_eq(got, want);
	free(got);
	OK(cat_gen_check(c.cat));
	pt_cat_close(&c);

	/* lost again: it comes back committed under that name, in conflict
	 * with nothing */
	du_drop_all();
	pt_cat_open(&c, "dhd", 30000, NULL, NULL);
	OK(rebuild_catalog(bk.b, c.cat, 0, NULL, NULL, &rep));
	cr_assert_eq(rep.manifests_rejected, 0);
	cr_assert_eq(rep.generations_held, 0);
	cr_assert_eq(rep.generations, 1);
	OK(cat_gen_get(c.cat, gen, &g));
	cr_assert_eq(g.state, GEN_COMMITTED);
	cr_assert_str_eq(g.name, name);
	got = ts_dump_from(c.cat, g.root, "s", false);
	cr_assert_str_eq(got, want);
	free(got);
	free(want);
	OK(cat_gen_check(c.cat));
	pt_cat_close(&c);
	pt_backing_close(&bk);
}

/* An admin's rm of the save rebuild --meta held ends it on the shared
 * catalog: its tree and row go, the reclaim duty removes its own chunks'
 * objects and its manifest; the chunk the committed save shares stays. */
Test(catshared_durable, a_save_rebuild_meta_held_ends_by_an_rm)
{
	struct pt_backing bk;
	pt_backing_open(&bk, "dum");
	struct pt_cat c;
	uint64_t old, gen;
	du_conflict(&bk, &c, &old, &gen, NULL);
	struct rebuild_report rep;
	OK(rebuild_catalog(bk.b, c.cat, 0, NULL, NULL, &rep));
	cr_assert_eq(rep.generations_held, 1);
	struct cat_id_vec gone = { 0 };
	OK(cat_gen_delete(c.cat, gen, "admin", cat_id_vec_add_ino, &gone));
	OK(cat_inodes_release(c.cat, gone.v, gone.n));
	cat_id_vec_free(&gone);
	struct cat_gen g;
	OK(cat_gen_get(c.cat, gen, &g));
	cr_assert_eq(g.state, GEN_DELETED);
	char name[64];
	struct cat_inode in;
	snprintf(name, sizeof(name), "step-1.rebuild-%" PRIu64, gen);
	FAILS(cat_lookup(c.cat, du_lookup(&c, "run/ckpt").ino, name, &in), ENOENT);
	du_reclaim(&c, &bk);
	cr_assert_not(du_on(&bk, 0x42, 0), "the held save's own chunk was not reclaimed");
	cr_assert_not(du_on(&bk, 0x42, 1));
	cr_assert(du_on(&bk, 0x50, 0), "the committed save's chunk went");
	cr_assert(du_on(&bk, 0x41, 0));
	char mpath[MANIFEST_PATH_MAX];
	uint64_t size;
	manifest_gen_path(gen, 1, mpath, sizeof(mpath));
	FAILS(backing_stat(bk.b, mpath, &size), ENOENT);
	manifest_gen_path(old, 1, mpath, sizeof(mpath));
	OK(backing_stat(bk.b, mpath, &size));
	OK(cat_gen_check(c.cat));
	pt_cat_close(&c);
	pt_backing_close(&bk);
}

/* pgns.h N15: the store id is recorded once, whoever offers first, and
 * read the same on every node; cat_store_facts tells what the catalog
 * calls saved: a chunk uploaded, then a durable generation, its version. */
Test(catshared_durable, the_store_id_is_recorded_once_and_the_saves_are_told)
{
	struct pt_cat a, b;
	pt_cat_open(&a, "sia", 30000, NULL, NULL);
	pt_cat_open(&b, "sib", 30000, NULL, NULL);
	struct cat_store_facts f;
	OK(cat_store_facts(b.cat, &f));
	cr_assert_str_eq(f.id, "");
	cr_assert(f.durable == 0 && f.newest == 0 && f.version == 0 && !f.uploaded);

	const char *ida = "0123456789abcdef0123456789abcdef";
	const char *idb = "fedcba9876543210fedcba9876543210";
	char held[33] = "";
	cr_assert_eq(cat_store_id_offer(a.cat, "0123456789ABCDEF0123456789abcdef", held), -EINVAL);
	cr_assert_eq(cat_store_id_offer(a.cat, "0123", held), -EINVAL);
	OK(cat_store_facts(b.cat, &f));
	cr_assert_str_eq(f.id, "", "an id refused was recorded");
	OK(cat_store_id_offer(a.cat, ida, held));
	cr_assert_str_eq(held, ida);
	OK(cat_store_id_offer(b.cat, idb, held));
	cr_assert_str_eq(held, ida, "a second offer replaced the id");
	OK(cat_store_facts(b.cat, &f));
	cr_assert_str_eq(f.id, ida);
	cr_assert_not(f.marked);
	OK(cat_store_marked(a.cat));
	OK(cat_store_marked(b.cat)); /* idempotent */
	OK(cat_store_facts(b.cat, &f));
	cr_assert(f.marked);
	cr_assert_str_eq(f.id, ida);

	uint64_t series = ts_mk(a.cat, ROOT, "run", S_IFDIR | 0755, NULL);
	uint64_t root;
	uint64_t gen = ts_mkgen(a.cat, series, "step-1", 1, true, &root);
	uint64_t fa = ts_mk(a.cat, root, "rank0.pt", S_IFREG | 0644, NULL);
	ts_write_chunks(a.cat, fa, 0x41, 0, 2, DU_LEN, NULL, NULL);
	OK(cat_store_facts(b.cat, &f));
	cr_assert_not(f.uploaded, "a chunk not uploaded was told saved");
	cr_assert_eq(pt_cat_upload_chunks(&a, NULL, NULL), 2);
	OK(cat_store_facts(b.cat, &f));
	cr_assert(f.uploaded && f.durable == 0 && f.newest == 0);
	OK(cat_gen_commit(a.cat, gen, "test"));
	OK(cat_store_facts(b.cat, &f));
	cr_assert_eq(f.durable, 0, "committed, its manifest not put: told durable");
	struct pt_backing bk;
	pt_backing_open(&bk, "si");
	cr_assert_eq(pt_cat_put_manifests(&a, &bk), 1);
	OK(cat_store_facts(b.cat, &f));
	cr_assert_eq(f.durable, 1);
	cr_assert_eq(f.newest, gen);
	cr_assert_eq(f.version, 1);
	cr_assert_str_eq(f.id, ida);
	pt_backing_close(&bk);
	pt_cat_close(&b);
	pt_cat_close(&a);
}
