/* Unit tests for the reclaim horizon of the shared engine
 * (meta/catalog_shared_reclaim.c R7-R9, manifest_shared.h D6, pgns.h N12):
 * BACKING stays a valid description while the cluster reclaims. Nodes are
 * struct cat opened with cat_open_shared on one private PostgreSQL
 * (tests/unit/pgtest.h) over one BACKING directory; the test plays the
 * uploader (chunk objects, generation manifests, the tree manifest, as
 * fs/uploader.c writes them) and the reclaimer's turns.
 *
 * After every turn, what a rebuild would apply (the newest tree manifest and
 * each generation's highest version) names no chunk BACKING lacks:
 *  - a file outside generations overwritten: its old chunk stays while the
 *    tree manifest on BACKING still names it, and goes once the tree
 *    manifest written after the overwrite is there;
 *  - a committed generation rewritten: version 1's chunks stay until
 *    version 2's manifest is on BACKING;
 *  - a rewrite whose version 2 is lost with its node (pggen.h X2):
 *    version 1's chunks stay while the save lives, and go once a delete
 *    ends it;
 *  - a generation deleted: its manifests leave BACKING (once a tree
 *    manifest after the delete is there), then its chunks;
 *  - a save renamed out of its series: its manifest stays until the tree
 *    manifest names its files (upload.h U6);
 *  - a database of schema 1 (the horizon's columns dropped) upgrades at the
 *    next open, and removes the manifest of the generation it had ended;
 *  - the horizon (fs/uploader.c T4) moves while the tree is unchanged, and
 *    when its writer stops without a word, once another node's uploader
 *    takes duty "tree";
 *  - a generation manifest whose put lands after its save was deleted on
 *    another node and the reclaim removed that save's manifests does not
 *    stay on BACKING (fs/uploader.h B2), nor one whose row was left queued
 *    after its put (a restart) and is found stale at its next pick. */
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
#include "manifest.h"
#include "manifest_shared.h"
#include "pgtest.h"
#include "store.h"
#include "support.h"
#include "upload.h"
#include "uploader.h"

#define HZ_LEN 1000
#define HZ_TERM_MS 30000
#define ROOT ((uint64_t)CAT_ROOT_INO)

TestSuite(catshared_horizon, .init = pt_start, .fini = pt_stop, .timeout = 120);

/* ---- BACKING, and the uploader's part ---- */

static bool hz_path_on_backing(struct pt_backing *bk, const char *path)
{
	uint64_t size;
	int rc = backing_stat(bk->b, path, &size);
	cr_assert(rc == 0 || rc == -ENOENT, "backing_stat %s: %d", path, rc);
	return rc == 0;
}

struct hz_names {
	uint64_t id[64], seq[64];
	uint32_t version[64];
	int n;
};

static int hz_tree_fn(void *arg, const char *name)
{
	struct hz_names *l = arg;
	uint64_t seq;
	if (manifest_tree_name_parse(name, &seq) == 0 && l->n < 64)
		l->seq[l->n++] = seq;
	return 0;
}

static int hz_gen_fn(void *arg, const char *name)
{
	struct hz_names *l = arg;
	uint64_t id;
	uint32_t version;
	if (manifest_gen_name_parse(name, &id, &version) == 0 && l->n < 64) {
		l->id[l->n] = id;
		l->version[l->n++] = version;
	}
	return 0;
}

static struct hz_names hz_list(struct pt_backing *bk, bool gen)
{
	struct hz_names l = { .n = 0 };
	int rc = backing_list(bk->b, gen ? "manifests/gen" : "manifests/tree",
			      gen ? hz_gen_fn : hz_tree_fn, &l);
	cr_assert(rc == 0 || rc == -ENOENT, "backing_list: %d", rc);
	return l;
}

/* The tree manifest's writer (fs/uploader.c up_tree_shared, T1-T3): the
 * fingerprint (its server clock), the build, the put under a seq above every
 * one listed, the older ones removed, and the horizon recorded (D6). */
static void hz_tree(struct pt_cat *n, struct pt_backing *bk)
{
	char fp[128], built_fp[128], *text = NULL, path[MANIFEST_PATH_MAX];
	bool all = false;
	int64_t clock_ns = 0, now_ns = 0;
	size_t len = 0;
	OK(manifest_shared_tree_fingerprint(n->cat, fp, sizeof(fp), &all, &clock_ns));
	cr_assert(all, "a chunk outside generations is not uploaded");
	OK(manifest_shared_tree_build(n->cat, &text, &len, built_fp, sizeof(built_fp), &now_ns));
	struct hz_names l = hz_list(bk, false);
	uint64_t seq = (uint64_t)now_ns;
	for (int i = 0; i < l.n; i++)
		if (l.seq[i] >= seq)
			seq = l.seq[i] + 1;
	manifest_tree_path(seq, path, sizeof(path));
	OK(backing_put(bk->b, path, text, len));
	free(text);
	OK(manifest_shared_tree_described(n->cat, clock_ns));
	for (int i = 0; i < l.n; i++) {
		manifest_tree_path(l.seq[i], path, sizeof(path));
		OK(backing_remove(bk->b, path));
	}
}

/* How many chunks the manifest at path names that BACKING lacks. */
static int hz_missing_in(struct pt_backing *bk, const char *path, const char *what)
{
	uint64_t size = 0;
	OK(backing_stat(bk->b, path, &size));
	char *buf = malloc(size + 1);
	size_t len = 0;
	cr_assert(buf);
	OK(backing_get(bk->b, path, buf, size, &len));
	struct manifest *m = NULL;
	char err[MANIFEST_ERR_MAX];
	cr_assert_eq(manifest_parse(buf, len, &m, err, sizeof(err)), 0, "%s: %s", path, err);
	int missing = 0;
	for (size_t i = 0; i < m->n_chunks; i++)
		if (!pt_on_backing(bk, m->chunks[i].hash)) {
			char hex[2 * CAT_HASH_LEN + 1];
			cat_hex(m->chunks[i].hash, hex);
			cr_log_warn("%s (%s) names chunk %s, which BACKING lacks", path, what, hex);
			missing++;
		}
	manifest_free(m);
	free(buf);
	return missing;
}

/* What a rebuild applies (fs/rebuild.c): the newest tree manifest and the
 * highest version of each generation's. How many chunks they name that
 * BACKING lacks. */
static int hz_missing(struct pt_backing *bk)
{
	char path[MANIFEST_PATH_MAX];
	int missing = 0;
	struct hz_names t = hz_list(bk, false);
	uint64_t newest = 0;
	for (int i = 0; i < t.n; i++)
		newest = t.seq[i] > newest ? t.seq[i] : newest;
	if (t.n > 0) {
		manifest_tree_path(newest, path, sizeof(path));
		missing += hz_missing_in(bk, path, "the tree manifest");
	}
	struct hz_names g = hz_list(bk, true);
	for (int i = 0; i < g.n; i++) {
		bool highest = true;
		for (int k = 0; k < g.n; k++)
			if (g.id[k] == g.id[i] && g.version[k] > g.version[i])
				highest = false;
		if (!highest)
			continue;
		manifest_gen_path(g.id[i], g.version[i], path, sizeof(path));
		missing += hz_missing_in(bk, path, "a generation's newest manifest");
	}
	return missing;
}

/* count reclaim turns on n, as fs/reclaimer.c makes them; after each, what a
 * rebuild would apply names nothing BACKING lacks. Their reports summed. */
static struct cat_reclaim_report hz_turns(struct pt_cat *n, struct pt_backing *bk, int count)
{
	struct cat_reclaim_report sum = { 0 };
	for (int i = 0; i < count; i++) {
		struct cat_reclaim_report rep;
		OK(cat_reclaim_turn(n->cat, HZ_TERM_MS, pt_backing_remove, bk->b, &rep));
		cr_assert(rep.held);
		cr_assert_eq(hz_missing(bk), 0, "turn %d removed a chunk a manifest on BACKING names",
			     i + 1);
		int violations = -1;
		OK(pgns_check(cat_shared_ns(n->cat), &violations)); /* N1, N2, N12 */
		cr_assert_eq(violations, 0);
		sum.chunks += rep.chunks;
		sum.removed += rep.removed;
		sum.manifests += rep.manifests;
	}
	return sum;
}

static void hz_hash(uint8_t out[CAT_HASH_LEN], uint8_t fill, int seed)
{
	ts_hash(out, fill, seed);
}

/* ino's content replaced by n chunks (fill, seed..), committed, its writer
 * closed, its chunks put on BACKING. */
static void hz_write(struct pt_cat *n, struct pt_backing *bk, uint64_t ino, uint8_t fill,
		     int seed, int count)
{
	ts_write_chunks(n->cat, ino, fill, seed, count, HZ_LEN, NULL, NULL);
	pt_cat_upload_put(n, bk);
}

/* ---- the tree manifest (R7 a) ---- */

Test(catshared_horizon, a_chunk_the_tree_manifest_names_stays_until_the_one_after_its_overwrite)
{
	struct pt_cat a;
	struct pt_backing bk;
	pt_cat_open(&a, "hza", 30000, NULL, NULL);
	pt_backing_open(&bk, "horizon-backing");
	uint64_t run = ts_mk(a.cat, ROOT, "run", S_IFDIR | 0755, NULL);
	uint64_t latest = ts_mk(a.cat, run, "latest", S_IFREG | 0644, NULL);
	hz_write(&a, &bk, latest, 0x61, 1, 1);
	hz_tree(&a, &bk);
	uint8_t old[CAT_HASH_LEN], now[CAT_HASH_LEN];
	hz_hash(old, 0x61, 1);
	hz_hash(now, 0x62, 2);

	/* `latest` rewritten: the tree manifest on BACKING still names chunk 1 */
	hz_write(&a, &bk, latest, 0x62, 2, 1);
	struct cat_reclaim_report rep = hz_turns(&a, &bk, 3);
	cr_assert_eq(rep.removed, 0, "removed before the tree manifest after the change");
	cr_assert(pt_on_backing(&bk, old));

	/* the tree manifest after the change is on BACKING: it goes */
	hz_tree(&a, &bk);
	rep = hz_turns(&a, &bk, 2);
	cr_assert_eq(rep.removed, 1);
	cr_assert_not(pt_on_backing(&bk, old));
	cr_assert(pt_on_backing(&bk, now));
	pt_backing_close(&bk);
	pt_cat_close(&a);
}

/* A chunk freed, referenced again, and freed again between two tree
 * manifests is judged by its last freeing (pgns.h N12). */
Test(catshared_horizon, a_chunk_named_again_after_it_was_seen_free_waits_for_its_last_freeing)
{
	struct pt_cat a;
	struct pt_backing bk;
	pt_cat_open(&a, "hzr", 30000, NULL, NULL);
	pt_backing_open(&bk, "horizon-backing");
	uint64_t f = ts_mk(a.cat, ROOT, "f", S_IFREG | 0644, NULL);
	uint64_t g = ts_mk(a.cat, ROOT, "g", S_IFREG | 0644, NULL);
	hz_write(&a, &bk, f, 0x63, 1, 1);
	hz_write(&a, &bk, f, 0x64, 2, 1); /* chunk 0x63 free */
	(void)hz_turns(&a, &bk, 1); /* seen free */
	hz_write(&a, &bk, g, 0x63, 1, 1); /* named again, by g */
	hz_tree(&a, &bk); /* a tree manifest naming it, newer than when it was seen free */
	hz_write(&a, &bk, g, 0x65, 3, 1); /* free again */
	struct cat_reclaim_report rep = hz_turns(&a, &bk, 3);
	cr_assert_eq(rep.removed, 0, "a chunk the tree manifest on BACKING names was removed");
	hz_tree(&a, &bk);
	rep = hz_turns(&a, &bk, 2);
	cr_assert_eq(rep.removed, 1, "the chunk g no longer names: %" PRIu64, rep.removed);
	pt_backing_close(&bk);
	pt_cat_close(&a);
}

/* ---- generation manifests (R7 b, c; R8) ---- */

/* run/ckpt/step-1 committed on a with file rank0 of chunks (0x71, 1..2),
 * uploaded, its manifest and the tree manifest on BACKING. */
static uint64_t hz_saved(struct pt_cat *a, struct pt_backing *bk, uint64_t *series,
			 uint64_t *file)
{
	uint64_t run = ts_mk(a->cat, ROOT, "run", S_IFDIR | 0755, NULL);
	*series = ts_mk(a->cat, run, "ckpt", S_IFDIR | 0755, NULL);
	uint64_t root;
	uint64_t gen = pt_cat_mkgen(a, *series, "step-1", 1, &root);
	*file = ts_mk(a->cat, root, "rank0", S_IFREG | 0644, NULL);
	ts_write_chunks(a->cat, *file, 0x71, 1, 2, HZ_LEN, NULL, NULL);
	pt_cat_upload_put(a, bk);
	OK(cat_gen_commit(a->cat, gen, "test"));
	cr_assert_eq(pt_cat_put_manifests(a, bk), 1);
	hz_tree(a, bk);
	return gen;
}

Test(catshared_horizon, a_rewritten_generations_old_chunks_stay_until_the_new_manifest_is_there)
{
	struct pt_cat a, b;
	struct pt_backing bk;
	pt_cat_open(&a, "hzga", 30000, NULL, NULL);
	pt_cat_open(&b, "hzgb", 30000, NULL, NULL);
	pt_backing_open(&bk, "horizon-backing");
	uint64_t series, file;
	uint64_t gen = hz_saved(&a, &bk, &series, &file);
	char v1[MANIFEST_PATH_MAX];
	manifest_gen_path(gen, 1, v1, sizeof(v1));
	cr_assert(hz_path_on_backing(&bk, v1));

	/* step-1 saved again on B: version 2, committed; its chunk not uploaded */
	OK(cat_gen_reopen(b.cat, gen));
	ts_write_chunks(b.cat, file, 0x72, 1, 1, HZ_LEN, NULL, NULL);
	OK(cat_gen_commit(b.cat, gen, "test"));
	hz_tree(&a, &bk);
	struct cat_reclaim_report rep = hz_turns(&a, &bk, 3);
	cr_assert_eq(rep.removed, 0, "version 1's chunks went while its manifest is the newest");

	hz_tree(&a, &bk); /* a horizon past the turns that saw them free */
	rep = hz_turns(&a, &bk, 2);
	cr_assert_eq(rep.removed, 0, "version 1's chunks went while its manifest is the newest");

	/* B uploads; version 2's manifest replaces version 1's: they go */
	pt_cat_upload_put(&b, &bk);
	cr_assert_eq(pt_cat_put_manifests(&b, &bk), 1, "version 2's manifest, queued on B");
	cr_assert_not(hz_path_on_backing(&bk, v1));
	rep = hz_turns(&a, &bk, 2);
	cr_assert_eq(rep.removed, 2, "version 1's two chunks");
	pt_backing_close(&bk);
	pt_cat_close(&a);
	pt_cat_close(&b);
}

/* pgns.c R7 b (review 34 A1): B rewrites a durable save and dies before
 * uploading version 2, which the sweep marks lost (pggen.h X2). Version 1's
 * manifest on BACKING is then the save's only recoverable form: its chunks
 * stay while the lost row lives, and go once a delete ends it. */
Test(catshared_horizon, a_lost_rewrites_old_chunks_stay_while_its_old_manifest_is_the_only_form)
{
	struct pt_cat a, b;
	struct pt_backing bk;
	pt_cat_open(&a, "hzla", 30000, NULL, NULL);
	pt_cat_open(&b, "hzlb", 1000, NULL, NULL);
	pt_backing_open(&bk, "horizon-backing");
	uint64_t series, file;
	uint64_t gen = hz_saved(&a, &bk, &series, &file);
	char v1[MANIFEST_PATH_MAX];
	manifest_gen_path(gen, 1, v1, sizeof(v1));
	uint8_t old[CAT_HASH_LEN];
	hz_hash(old, 0x71, 1);

	/* version 2 committed on B, its chunk only in B's cache; B stops */
	OK(cat_gen_reopen(b.cat, gen));
	ts_write_chunks(b.cat, file, 0x72, 1, 1, HZ_LEN, NULL, NULL);
	OK(cat_gen_commit(b.cat, gen, "test"));
	usleep(2300 * 1000); /* B's lease runs out, and its grace (lease.h L4) */
	size_t swept = 0;
	OK(cat_lease_sweep(a.cat, &swept));
	cr_assert_eq(swept, 1);
	struct cat_gen g;
	OK(cat_gen_get(a.cat, gen, &g));
	cr_assert_eq(g.state, GEN_HELD, "version 2 lost, shown held (pggen.h X5): %d", g.state);

	/* turns with the horizon past them: version 1's chunks stay */
	hz_tree(&a, &bk);
	struct cat_reclaim_report rep = hz_turns(&a, &bk, 3);
	hz_tree(&a, &bk);
	rep = hz_turns(&a, &bk, 3);
	cr_assert_eq(rep.removed, 0, "version 1's chunks went while the lost save lives");
	cr_assert(hz_path_on_backing(&bk, v1));
	cr_assert(pt_on_backing(&bk, old));

	/* a decision ends it: its manifests leave BACKING, then every chunk */
	struct cat_id_vec ids = { 0 };
	OK(cat_gen_delete(a.cat, gen, "admin", cat_id_vec_add_ino, &ids));
	for (size_t i = 0; i < ids.n; i++)
		OK(cat_inode_release(a.cat, ids.v[i]));
	cat_id_vec_free(&ids);
	rep = hz_turns(&a, &bk, 1); /* sees it ended (R8) */
	cr_assert_eq(rep.removed, 0);
	hz_tree(&a, &bk);
	rep = hz_turns(&a, &bk, 3);
	cr_assert_not(hz_path_on_backing(&bk, v1), "an ended save's manifest is left on BACKING");
	cr_assert_eq(rep.manifests, 1);
	cr_assert_not(pt_on_backing(&bk, old), "version 1's chunk is left on BACKING");
	pt_backing_close(&bk);
	pt_cat_close(&a);
	pt_cat_close(&b);
}

Test(catshared_horizon, a_deleted_generations_manifests_leave_backing_then_its_chunks)
{
	struct pt_cat a;
	struct pt_backing bk;
	pt_cat_open(&a, "hzd", 30000, NULL, NULL);
	pt_backing_open(&bk, "horizon-backing");
	uint64_t series, file;
	uint64_t gen = hz_saved(&a, &bk, &series, &file);
	char v1[MANIFEST_PATH_MAX];
	manifest_gen_path(gen, 1, v1, sizeof(v1));
	struct cat_id_vec ids = { 0 };
	OK(cat_gen_delete(a.cat, gen, "trainer", cat_id_vec_add_ino, &ids));
	for (size_t i = 0; i < ids.n; i++)
		OK(cat_inode_release(a.cat, ids.v[i]));
	cat_id_vec_free(&ids);

	/* U6: not before a tree manifest after the delete is on BACKING */
	struct cat_reclaim_report rep = hz_turns(&a, &bk, 3);
	cr_assert_eq(rep.removed, 0);
	cr_assert(hz_path_on_backing(&bk, v1), "its manifest left before the tree manifest after it");
	hz_tree(&a, &bk);
	rep = hz_turns(&a, &bk, 3);
	cr_assert_not(hz_path_on_backing(&bk, v1), "a deleted generation's manifest is left on BACKING");
	cr_assert_eq(rep.manifests, 1);
	cr_assert_eq(rep.removed, 2, "its two chunks");
	pt_backing_close(&bk);
	pt_cat_close(&a);
}

/* U6 in shared mode: a save renamed out of its series is outside
 * generations from then on; its manifest stays until the tree manifest that
 * names its files is on BACKING, then goes. */
Test(catshared_horizon, a_save_renamed_out_of_its_series_keeps_its_manifest_until_the_tree_names_it)
{
	struct pt_cat a;
	struct pt_backing bk;
	pt_cat_open(&a, "hzm", 30000, NULL, NULL);
	pt_backing_open(&bk, "horizon-backing");
	uint64_t series, file;
	uint64_t gen = hz_saved(&a, &bk, &series, &file);
	char v1[MANIFEST_PATH_MAX];
	manifest_gen_path(gen, 1, v1, sizeof(v1));
	struct cat_inode run;
	OK(cat_lookup(a.cat, ROOT, "run", &run));
	uint64_t replaced = 0;
	OK(cat_rename(a.cat, series, "step-1", run.ino, "kept", 0, &replaced));
	struct cat_gen g;
	OK(cat_gen_get(a.cat, gen, &g));
	cr_assert_eq(g.state, GEN_DELETED, "the rename ended it");

	struct cat_reclaim_report rep = hz_turns(&a, &bk, 3);
	cr_assert(hz_path_on_backing(&bk, v1), "its manifest left while no tree manifest names its files");
	cr_assert_eq(rep.manifests, 0);
	hz_tree(&a, &bk);
	rep = hz_turns(&a, &bk, 2);
	cr_assert_not(hz_path_on_backing(&bk, v1), "an ended generation's manifest is left on BACKING");
	cr_assert_eq(rep.manifests, 1);
	cr_assert_eq(rep.removed, 0, "its chunks are kept/rank0's");
	pt_backing_close(&bk);
	pt_cat_close(&a);
}

/* The schema before the horizon (schema 1): its columns and its key gone,
 * schema 3's failed flag (pggen.h X14), schema 4's parked mark (X15) and
 * schema 5's lost_by (X16). */
static void hz_schema_1(void)
{
	PGconn *c = PQconnectdb(pt_url);
	cr_assert_eq(PQstatus(c), CONNECTION_OK, "%s", PQerrorMessage(c));
	PGresult *r = PQexec(c, "ALTER TABLE ns_chunks DROP COLUMN free_seen_ns;"
			     " ALTER TABLE ns_generations DROP COLUMN gone_seen_ns,"
			     " DROP COLUMN manifests_gone;"
			     " DROP INDEX IF EXISTS ns_generations_rewritten;"
			     " ALTER TABLE ns_inodes DROP COLUMN failed;"
			     " ALTER TABLE ns_open DROP COLUMN parked;"
			     " ALTER TABLE ns_chunks DROP COLUMN lost_by;"
			     " DELETE FROM ns_meta WHERE key IN ('schema', 'tree_horizon')");
	cr_assert_eq(PQresultStatus(r), PGRES_COMMAND_OK, "%s", PQerrorMessage(c));
	PQclear(r);
	PQfinish(c);
}

static char *hz_meta(const char *key)
{
	PGconn *c = PQconnectdb(pt_url);
	cr_assert_eq(PQstatus(c), CONNECTION_OK, "%s", PQerrorMessage(c));
	const char *params[] = { key };
	PGresult *r = PQexecParams(c, "SELECT value FROM ns_meta WHERE key = $1", 1, NULL, params,
				   NULL, NULL, 0);
	cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s", PQerrorMessage(c));
	char *v = PQntuples(r) ? strdup(PQgetvalue(r, 0, 0)) : NULL;
	PQclear(r);
	PQfinish(c);
	return v;
}

Test(catshared_horizon, a_database_of_schema_1_upgrades_and_clears_what_it_left_on_backing)
{
	struct pt_cat a;
	struct pt_backing bk;
	pt_cat_open(&a, "hzu", 30000, NULL, NULL);
	pt_backing_open(&bk, "horizon-backing");
	char *v = hz_meta("schema");
	cr_assert_str_eq(v, PGNS_SCHEMA_TEXT);
	free(v);
	/* schema 1 ended a generation and left its manifest on BACKING */
	uint64_t series, file;
	uint64_t gen = hz_saved(&a, &bk, &series, &file);
	char v1[MANIFEST_PATH_MAX];
	manifest_gen_path(gen, 1, v1, sizeof(v1));
	struct cat_id_vec ids = { 0 };
	OK(cat_gen_delete(a.cat, gen, "keep", cat_id_vec_add_ino, &ids));
	for (size_t i = 0; i < ids.n; i++)
		OK(cat_inode_release(a.cat, ids.v[i]));
	cat_id_vec_free(&ids);
	pt_cat_close(&a);
	hz_schema_1();

	pt_cat_open(&a, "hzu2", 30000, NULL, NULL);
	v = hz_meta("schema");
	cr_assert(v && strcmp(v, PGNS_SCHEMA_TEXT) == 0, "schema %s after the upgrade", v ? v : "none");
	free(v);
	struct cat_reclaim_report rep = hz_turns(&a, &bk, 2);
	cr_assert_eq(rep.removed, 0, "before any tree manifest of the upgraded catalog");
	hz_tree(&a, &bk);
	rep = hz_turns(&a, &bk, 2);
	cr_assert_eq(rep.manifests, 1, "the manifest schema 1 left");
	cr_assert_not(hz_path_on_backing(&bk, v1));
	cr_assert_eq(rep.removed, 2);
	pt_backing_close(&bk);
	pt_cat_close(&a);
}

/* ---- the horizon's progress (R9, fs/uploader.c T4) ---- */

static int64_t hz_horizon(void)
{
	char *v = hz_meta("tree_horizon");
	int64_t h = v ? strtoll(v, NULL, 10) : 0;
	free(v);
	return h;
}

/* Polls up to s seconds for the recorded horizon to pass above. */
static int64_t hz_horizon_past(int64_t above, int s)
{
	int64_t h = hz_horizon();
	for (int i = 0; i < 10 * s && h <= above; i++) {
		usleep(100 * 1000);
		h = hz_horizon();
	}
	return h;
}

static void hz_uploader(struct pt_cat *n, struct store *st, struct backing *bk, struct uploader **u)
{
	struct uploader_config cfg = { .threads = 1, .deadline_s = 600, .chunk_max = 256u << 10 };
	snprintf(cfg.cache_dir, sizeof(cfg.cache_dir), "%s", n->dir);
	OK(uploader_start(&cfg, n->cat, st, bk, NULL, NULL, NULL, u));
}

Test(catshared_horizon, the_horizon_moves_with_the_tree_unchanged_and_when_its_writer_stops)
{
	struct pt_cat a, b;
	struct pt_backing bk;
	struct store *sa, *sb;
	struct uploader *ua, *ub;
	pt_cat_open(&a, "hzpa", 30000, NULL, NULL);
	pt_cat_open(&b, "hzpb", 30000, NULL, NULL);
	pt_backing_open(&bk, "horizon-backing");
	OK(store_open(a.dir, &sa));
	OK(store_open(b.dir, &sb));
	ts_mk(a.cat, ROOT, "run", S_IFDIR | 0755, NULL);
	hz_uploader(&a, sa, bk.b, &ua);
	int64_t first = hz_horizon_past(0, 10);
	cr_assert_gt(first, 0, "no horizon recorded after the first tree manifest");
	/* nothing changes: the one on BACKING is found current, every 2 s */
	int64_t later = hz_horizon_past(first + 1000000000LL, 10);
	cr_assert_gt(later, first + 1000000000LL, "the horizon stood still with the tree unchanged");

	/* A stops without a drain (as if it died): B writes once A's duty ran out */
	hz_uploader(&b, sb, bk.b, &ub);
	uploader_stop(ua, false);
	int64_t stopped = hz_horizon();
	int64_t after = hz_horizon_past(stopped, 15);
	cr_assert_gt(after, stopped, "no horizon recorded after the tree's writer stopped");
	struct uploader_stats stb;
	uploader_get_stats(ub, &stb);
	cr_assert_geq(stb.manifests, 1, "B wrote no tree manifest");
	uploader_stop(ub, true);
	store_close(sa);
	store_close(sb);
	pt_backing_close(&bk);
	pt_cat_close(&b);
	pt_cat_close(&a);
}

/* ---- a manifest put that lands after its save ended (fs/uploader.h B2) ---- */

static int hz_gen_versions(struct pt_backing *bk, uint64_t gen)
{
	struct hz_names l = hz_list(bk, true);
	int n = 0;
	for (int i = 0; i < l.n; i++)
		n += l.id[i] == gen;
	return n;
}

/* run/ckpt/step-1 on a, not committed yet, with file rank0 of chunks (fill,
 * 1..2) uploaded (the chunk rows done). */
static uint64_t hz_unsaved(struct pt_cat *a, struct pt_backing *bk, uint8_t fill)
{
	uint64_t run = ts_mk(a->cat, ROOT, "run", S_IFDIR | 0755, NULL);
	uint64_t series = ts_mk(a->cat, run, "ckpt", S_IFDIR | 0755, NULL), root;
	uint64_t gen = pt_cat_mkgen(a, series, "step-1", 1, &root);
	uint64_t file = ts_mk(a->cat, root, "rank0", S_IFREG | 0644, NULL);
	ts_write_chunks(a->cat, file, fill, 1, 2, HZ_LEN, NULL, NULL);
	pt_cat_upload_put(a, bk);
	return gen;
}

/* gen deleted on b, then reclaim turns on b until R8 marked its manifests
 * gone (a tree manifest past the turn that saw it ended). */
static void hz_deleted_reclaimed(struct pt_cat *b, struct pt_backing *bk, uint64_t gen)
{
	struct cat_id_vec ids = { 0 };
	OK(cat_gen_delete(b->cat, gen, "trainer", cat_id_vec_add_ino, &ids));
	for (size_t i = 0; i < ids.n; i++)
		OK(cat_inode_release(b->cat, ids.v[i]));
	cat_id_vec_free(&ids);
	(void)hz_turns(b, bk, 1); /* sees it ended */
	hz_tree(b, bk);
	struct cat_reclaim_report rep = hz_turns(b, bk, 2);
	cr_assert_eq(rep.manifests, 1, "R8 did not mark generation %" PRIu64 "'s manifests gone", gen);
}

/* Nodes A and B, one BACKING, A's cache store (for its uploader). */
struct hz_two {
	struct pt_cat a, b;
	struct pt_backing bk;
	struct store *sa;
};

/* hz_two opened (node names tag+"a", tag+"b"), and A's hz_unsaved (fill). */
static uint64_t hz_two_open(struct hz_two *t, const char *tag, uint8_t fill)
{
	char name[32];
	snprintf(name, sizeof(name), "%sa", tag);
	pt_cat_open(&t->a, name, 30000, NULL, NULL);
	snprintf(name, sizeof(name), "%sb", tag);
	pt_cat_open(&t->b, name, 30000, NULL, NULL);
	pt_backing_open(&t->bk, "horizon-backing");
	OK(store_open(t->a.dir, &t->sa));
	return hz_unsaved(&t->a, &t->bk, fill);
}

static void hz_two_close(struct hz_two *t)
{
	store_close(t->sa);
	pt_backing_close(&t->bk);
	pt_cat_close(&t->b);
	pt_cat_close(&t->a);
}

/* Review 34 A2: A built step-1's manifest while it was COMMITTED; before its
 * put lands (a put may take backing_timeout), B deletes the save and the
 * reclaim duty's R8 removes its manifests (none there yet) and marks them
 * gone. The late put then left step-1.1.ckm on BACKING for ever: a rebuild
 * --meta would bring the deleted save back, naming chunks the reclaim then
 * removes. Now A reads the row again after its put and removes it. */
Test(catshared_horizon, a_manifest_put_that_lands_after_its_save_was_deleted_and_reclaimed_is_removed)
{
	struct hz_two t;
	uint64_t gen = hz_two_open(&t, "hzl", 0x73); /* A's queue empty */
	struct pt_cat *a = &t.a, *b = &t.b;
	struct pt_backing *bk = &t.bk;
	struct uploader *ua;
	hz_tree(a, bk);

	struct ts_gate gate = TS_GATE_INIT(gen);
	hz_uploader(a, t.sa, bk->b, &ua);
	uploader_set_before_put(ua, ts_gate_hold, &gate);
	OK(cat_gen_commit(a->cat, gen, "test")); /* its manifest row, ready at once */
	cr_assert(ts_gate_reached(&gate), "A's uploader never came to step-1's manifest");

	/* while A's put is in flight: B deletes step-1, R8 runs after a tree
	 * manifest past the end */
	hz_deleted_reclaimed(b, bk, gen);
	cr_assert_eq(hz_gen_versions(bk, gen), 0);

	ts_gate_open(&gate); /* the put lands */
	uploader_stop(ua, true);
	(void)hz_turns(b, bk, 2); /* no later turn looks at step-1 again */
	cr_assert_eq(hz_gen_versions(bk, gen), 0,
		     "the manifest of a deleted save is left on BACKING after its late put");
	cr_assert_eq(pt_cat_local_rows(a, "uploads", NULL), 0, "A's manifest row is still queued");
	hz_two_close(&t);
}

/* B2 (b): A's put of step-1's manifest landed, but A stopped before it read
 * the row again (or the read or the removal failed), after B deleted the
 * save and R8 ran. The row is still queued on A; at the next start its
 * pick finds it stale. It used to end there, the late object left on
 * BACKING; now a worker removes it first. */
Test(catshared_horizon, a_stale_manifest_row_removes_what_an_earlier_put_of_it_left_after_r8)
{
	struct hz_two t;
	uint64_t gen = hz_two_open(&t, "hzs", 0x74);
	struct pt_cat *a = &t.a, *b = &t.b;
	struct pt_backing *bk = &t.bk;
	struct uploader *ua;
	OK(cat_gen_commit(a->cat, gen, "test"));
	char *text = NULL, path[MANIFEST_PATH_MAX];
	size_t len = 0;
	OK(manifest_gen_build(a->cat, gen, 1, &text, &len)); /* A's attempt, built */
	hz_tree(a, bk);

	hz_deleted_reclaimed(b, bk, gen);
	manifest_gen_path(gen, 1, path, sizeof(path));
	OK(backing_put(bk->b, path, text, len)); /* its put lands; A stops before the re-read */
	free(text);
	cr_assert_eq(pt_cat_local_rows(a, "uploads", NULL), 1, "A's manifest row is not queued");

	hz_uploader(a, t.sa, bk->b, &ua); /* A starts again */
	uploader_stop(ua, true);
	cr_assert_eq(pt_cat_local_rows(a, "uploads", NULL), 0, "A's manifest row is still queued");
	cr_assert_eq(hz_gen_versions(bk, gen), 0,
		     "a stale row ended with its earlier put of a deleted save left on BACKING");
	(void)hz_turns(b, bk, 2);
	hz_two_close(&t);
}
