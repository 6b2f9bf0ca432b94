/* Unit tests of the order in which BACKING changes (meta/upload.h U5, U6, U8):
 * whatever instant a node is lost at, the manifests on BACKING describe
 * every durable save and name no chunk BACKING lacks. A removal queued by a
 * change (a chunk no file names any more, the manifest of a generation that
 * ended) may start only once the manifests describing the state after the
 * change are on BACKING.
 *
 * Ported from the s27 review's repros (R1, R2, R7 of
 * tests/unit/test_review_repro.c on branch s27-review), which fail on the
 * code before U5/U6: each case is asserted on the queue (deterministic),
 * then watched on BACKING with the uploader at work, then drained to check
 * the removals still happen. A removal superseded by a later one of the same
 * chunk (upload.h U4, review 35 F6) is stale and waits for that one. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "backing.h"
#include "catalog.h"
#include "generation.h"
#include "hash.h"
#include "log.h"
#include "manifest.h"
#include "rebuild.h"
#include "store.h"
#include "support.h"
#include "upload.h"
#include "uploader.h"

#define UO_LEN (64u << 10)
#define UO_N 3

static struct {
	struct ts_stack w;
	struct uploader *u;
	uint8_t v1[UO_N][HASH_LEN]; /* version 1's chunks */
	int nv1;
} ox;

static void uo_setup(void)
{
	log_setup(stderr, LOG_LVL_OFF);
	memset(&ox, 0, sizeof(ox));
	ts_stack_open(&ox.w, "uporder");
}

static void uo_teardown(void)
{
	uploader_stop(ox.u, false);
	ox.u = NULL;
	ts_stack_close(&ox.w);
}

TestSuite(upload_order, .init = uo_setup, .fini = uo_teardown, .timeout = 60);

/* ---- helpers ---- */

static void uo_note_v1(void *arg, int k, const uint8_t hash[CAT_HASH_LEN])
{
	(void)arg;
	(void)k;
	memcpy(ox.v1[ox.nv1++], hash, HASH_LEN);
}

static void uo_note_one(void *arg, int k, const uint8_t hash[CAT_HASH_LEN])
{
	(void)k;
	memcpy(arg, hash, HASH_LEN);
}

static void uo_start_chunk_max(size_t chunk_max)
{
	struct uploader_config cfg = {
		.threads = 2, .deadline_s = 600, .copy_uploads = true, .chunk_max = chunk_max,
	};
	snprintf(cfg.cache_dir, sizeof(cfg.cache_dir), "%s", ox.w.cache);
	OK(uploader_start(&cfg, ox.w.cat, ox.w.st, ox.w.b, NULL, NULL, NULL, &ox.u));
}

static void uo_start(void)
{
	uo_start_chunk_max(256u << 10);
}

/* Lets the uploader empty the queue (and write the tree manifest). */
static void uo_drain(void)
{
	uploader_stop(ox.u, true);
	ox.u = NULL;
}

/* The node is lost: nothing more reaches BACKING. */
static void uo_lose_node(void)
{
	uploader_stop(ox.u, false);
	ox.u = NULL;
}

static bool uo_chunk_on_backing(const uint8_t hash[HASH_LEN])
{
	char rel[128];
	uint64_t size;
	store_object_relpath(hash, rel, sizeof(rel));
	return backing_stat(ox.w.b, rel, &size) == 0;
}

static bool uo_manifest_on_backing(uint64_t gen, uint32_t version)
{
	char rel[MANIFEST_PATH_MAX];
	uint64_t size;
	manifest_gen_path(gen, version, rel, sizeof(rel));
	return backing_stat(ox.w.b, rel, &size) == 0;
}

static int uo_tree_newest(void *arg, const char *name)
{
	uint64_t *newest = arg, seq;
	if (manifest_tree_name_parse(name, &seq) == 0 && seq > *newest)
		*newest = seq;
	return 0;
}

/* The seq of BACKING's newest tree manifest, 0 if none. */
static uint64_t uo_tree_seq(void)
{
	uint64_t newest = 0;
	backing_list(ox.w.b, "manifests/tree", uo_tree_newest, &newest);
	return newest;
}

static double uo_mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Whether the queued row of kind about hash (chunk kinds) or gen (manifest
 * kinds) may start now; asserts there is one. */
static bool uo_row_ready(int kind, const uint8_t *hash, uint64_t gen)
{
	struct cat_upload rows[64];
	int n = cat_upload_list(ox.w.cat, 0, rows, 64);
	cr_assert_geq(n, 0);
	for (int i = 0; i < n; i++) {
		if (rows[i].kind != kind)
			continue;
		if (hash ? memcmp(rows[i].hash, hash, HASH_LEN) != 0 : rows[i].gen != gen)
			continue;
		bool ready = false, stale = false;
		OK(cat_upload_ready(ox.w.cat, &rows[i], &ready, &stale));
		return ready && !stale;
	}
	cr_assert_fail("no row of kind %d queued for it", kind);
	return false;
}

/* What a fresh node (its cache disk and catalog lost) rebuilds from BACKING. */
static void uo_rebuild_fresh(struct cat **fresh, struct rebuild_report *rep)
{
	char path[256];
	ts_cat_open_in(ox.w.dir, "fresh.db", path, sizeof(path), fresh);
	memset(rep, 0, sizeof(*rep));
	OK(rebuild_catalog(ox.w.b, *fresh, REBUILD_CHECK_CHUNKS, NULL, NULL, rep));
}

/* step-100 committed and durable at version 1 (UO_N chunks), then saved
 * again in place with n2 chunks of len2 bytes and committed: version 2.
 * Returns the generation. */
static uint64_t uo_rewrite(int n2, size_t len2)
{
	uint64_t series = ts_mk(ox.w.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	uint64_t root;
	uint64_t gen = ts_mkgen(ox.w.cat, series, "step-100", 100, true, &root);
	uint64_t ino = ts_mk(ox.w.cat, root, "weights", S_IFREG | 0644, NULL);
	ts_store_file(ox.w.cat, ox.w.st, ino, 100, UO_N, UO_LEN, uo_note_v1, NULL);
	OK(cat_gen_commit(ox.w.cat, gen, "explicit"));
	uo_start();
	uo_drain();
	bool durable = false;
	OK(cat_gen_durable(ox.w.cat, gen, &durable));
	cr_assert(durable && uo_manifest_on_backing(gen, 1));
	for (int j = 0; j < UO_N; j++)
		cr_assert(uo_chunk_on_backing(ox.v1[j]));
	OK(cat_gen_reopen(ox.w.cat, gen));
	ts_store_file(ox.w.cat, ox.w.st, ino, 900, n2, len2, NULL, NULL);
	OK(cat_gen_commit(ox.w.cat, gen, "explicit"));
	return gen;
}

/* A durable generation series/name with one chunk; returns it. */
static uint64_t uo_durable_gen(uint64_t series, const char *name, uint64_t step, int seed)
{
	uint64_t root;
	uint64_t gen = ts_mkgen(ox.w.cat, series, name, step, true, &root);
	uint64_t ino = ts_mk(ox.w.cat, root, "weights", S_IFREG | 0644, NULL);
	ts_store_file(ox.w.cat, ox.w.st, ino, seed, 1, UO_LEN, NULL, NULL);
	OK(cat_gen_commit(ox.w.cat, gen, "explicit"));
	uo_start();
	uo_drain();
	bool durable = false;
	OK(cat_gen_durable(ox.w.cat, gen, &durable));
	cr_assert(durable);
	return gen;
}

/* ---- R1: a rewrite of a durable generation ---- */

Test(upload_order, a_rewrite_keeps_version_1s_chunks_until_version_2s_manifest_replaces_it)
{
	uint64_t gen = uo_rewrite(UO_N, UO_LEN);
	cr_assert(!uo_row_ready(UP_GEN_MANIFEST, NULL, gen), "version 2 waits for its chunks");
	for (int j = 0; j < UO_N; j++)
		cr_expect(!uo_row_ready(UP_DELETE_CHUNK, ox.v1[j], 0),
			  "version 1's chunk %d may leave BACKING while version 1's manifest,"
			  " BACKING's only one of step-100, names it", j);

	uo_start();
	uo_drain();
	cr_assert(uo_manifest_on_backing(gen, 2) && !uo_manifest_on_backing(gen, 1));
	for (int j = 0; j < UO_N; j++)
		cr_expect(!uo_chunk_on_backing(ox.v1[j]), "version 1's chunk %d is removed in the"
			  " end", j);
}

Test(upload_order, a_fresh_node_never_rebuilds_a_rewritten_step_naming_missing_chunks)
{
	uint64_t gen = uo_rewrite(16, 1u << 20);
	uo_start_chunk_max(4u << 20);
	/* BACKING as a fresh node would find it at any instant */
	double until = uo_mono() + 10;
	bool window = false;
	while (!window && uo_mono() < until && !uo_manifest_on_backing(gen, 2)) {
		bool gone = false;
		for (int j = 0; j < UO_N; j++)
			gone |= !uo_chunk_on_backing(ox.v1[j]);
		window = gone && uo_manifest_on_backing(gen, 1) && !uo_manifest_on_backing(gen, 2);
	}
	uo_lose_node();
	cr_expect(!window, "BACKING held version 1's manifest after a chunk it names was removed");
	struct cat *fresh = NULL;
	struct rebuild_report rep;
	uo_rebuild_fresh(&fresh, &rep);
	cr_expect_eq(rep.chunks_missing, 0, "the fresh node rebuilt step-100 naming %llu chunk(s)"
		     " missing from BACKING", (unsigned long long)rep.chunks_missing);
	cr_expect_eq(rep.generations, 1);
	ts_cat_close_checked(&fresh);
}

/* ---- R2: a file outside generations rewritten in place ---- */

Test(upload_order, a_rewritten_file_outside_generations_keeps_its_old_chunk_until_a_new_tree_manifest)
{
	uint8_t old[HASH_LEN];
	uint64_t ino = ts_mk(ox.w.cat, CAT_ROOT_INO, "latest", S_IFREG | 0644, NULL);
	ts_store_file(ox.w.cat, ox.w.st, ino, 4242, 1, 4096, uo_note_one, old);
	uo_start();
	uo_drain();
	uint64_t seq = uo_tree_seq();
	cr_assert_neq(seq, 0, "the tree manifest is on BACKING");
	cr_assert(uo_chunk_on_backing(old));

	/* DeepSpeed rewrites `latest` in place with the next tag */
	ts_store_file(ox.w.cat, ox.w.st, ino, 4343, 1, 4096, NULL, NULL);
	cr_expect(!uo_row_ready(UP_DELETE_CHUNK, old, 0),
		  "the old chunk of `latest` may leave BACKING while the tree manifest names it");

	uo_start();
	double until = uo_mono() + 5;
	bool window = false;
	while (!window && uo_mono() < until && uo_tree_seq() == seq)
		window = !uo_chunk_on_backing(old) && uo_tree_seq() == seq;
	uo_lose_node();
	cr_expect(!window, "the chunk BACKING's newest tree manifest names was removed before a"
			   " new tree manifest was written");
	struct cat *fresh = NULL;
	struct rebuild_report rep;
	uo_rebuild_fresh(&fresh, &rep);
	cr_expect_eq(rep.chunks_missing, 0, "the fresh node rebuilt `latest` naming %llu missing"
		     " chunk(s)", (unsigned long long)rep.chunks_missing);
	ts_cat_close_checked(&fresh);

	uo_start();
	uo_drain();
	cr_expect(uo_tree_seq() != seq && !uo_chunk_on_backing(old),
		  "a new tree manifest is written and the old chunk removed in the end");
}

/* ---- R7: a durable save renamed out of its series ---- */

Test(upload_order, a_save_moved_out_of_its_series_keeps_its_manifest_until_a_tree_manifest_names_it)
{
	uint64_t run = ts_mk(ox.w.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	uint64_t gen = uo_durable_gen(run, "step-100", 100, 7700);
	uint64_t seq = uo_tree_seq();
	cr_assert_neq(seq, 0);
	uint64_t replaced = 0;
	OK(cat_rename(ox.w.cat, run, "step-100", CAT_ROOT_INO, "best", 0, &replaced));
	cr_expect(!uo_row_ready(UP_DELETE_GEN_MANIFEST, NULL, gen),
		  "step-100's manifest may leave BACKING before a tree manifest names best/");

	uo_start();
	double until = uo_mono() + 5;
	bool window = false;
	while (!window && uo_mono() < until && uo_tree_seq() == seq)
		window = !uo_manifest_on_backing(gen, 1) && uo_tree_seq() == seq;
	uo_lose_node();
	cr_expect(!window, "step-100's manifest was removed before a tree manifest naming best/"
			   " was written");
	struct cat *fresh = NULL;
	struct rebuild_report rep;
	uo_rebuild_fresh(&fresh, &rep);
	struct cat_inode best, weights;
	cr_expect(cat_lookup(fresh, CAT_ROOT_INO, "best", &best) == 0 &&
		  cat_lookup(fresh, best.ino, "weights", &weights) == 0,
		  "a fresh node rebuilds without best/weights (the durable save moved there)");
	ts_cat_close_checked(&fresh);

	uo_start();
	uo_drain();
	cr_expect(!uo_manifest_on_backing(gen, 1), "step-100's manifest is removed in the end");
}

/* ---- R4: a series renamed, and a new run under the old name ---- */

Test(upload_order, a_renamed_series_is_rebuilt_under_its_new_name_beside_the_new_run)
{
	uint64_t run = ts_mk(ox.w.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	uint64_t old_gen = uo_durable_gen(run, "step-100", 100, 7100);
	uint64_t replaced = 0;
	OK(cat_rename(ox.w.cat, CAT_ROOT_INO, "run", CAT_ROOT_INO, "run-old", 0, &replaced));
	cr_expect(uo_row_ready(UP_GEN_MANIFEST, NULL, old_gen),
		  "step-100's manifest is written again, naming run-old");
	uint64_t run2 = ts_mk(ox.w.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	uo_durable_gen(run2, "step-50", 50, 7200);
	uint64_t new_gen = uo_durable_gen(run2, "step-100", 100, 7300);

	struct cat *fresh = NULL;
	struct rebuild_report rep;
	uo_rebuild_fresh(&fresh, &rep);
	cr_expect_eq(rep.manifests_rejected, 0, "%llu durable save(s) rejected by the rebuild",
		     (unsigned long long)rep.manifests_rejected);
	cr_expect_eq(rep.generations, 3);
	struct cat_inode old_dir, new_dir;
	struct cat_gen g;
	OK(cat_lookup(fresh, CAT_ROOT_INO, "run-old", &old_dir));
	OK(cat_lookup(fresh, CAT_ROOT_INO, "run", &new_dir));
	OK(cat_gen_find(fresh, old_dir.ino, "step-100", &g));
	cr_expect_eq(g.id, old_gen, "run-old/step-100 is the old run's save");
	OK(cat_gen_find(fresh, new_dir.ino, "step-100", &g));
	cr_expect_eq(g.id, new_gen, "run/step-100 is the new run's save");
	ts_cat_close_checked(&fresh);
}

/* R4 with a rewrite in progress: the rename finds step-100 OPEN (version 2
 * being written), so its durable version 1's manifest, naming run/, is not
 * queued again then; the rewrite rolled back restores version 1, whose
 * manifest must then be written again naming run-old/. */
Test(upload_order, a_rewrite_rolled_back_after_its_series_was_renamed_is_rebuilt_under_the_new_name)
{
	uint64_t run = ts_mk(ox.w.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	uint64_t old_gen = uo_durable_gen(run, "step-100", 100, 7100);
	OK(cat_gen_reopen(ox.w.cat, old_gen));
	uint64_t replaced = 0;
	OK(cat_rename(ox.w.cat, CAT_ROOT_INO, "run", CAT_ROOT_INO, "run-old", 0, &replaced));
	struct cat_id_vec gone = { 0 };
	OK(cat_gen_abort(ox.w.cat, old_gen, "abandoned", cat_id_vec_add_ino, &gone));
	cat_id_vec_free(&gone);
	struct cat_gen g;
	OK(cat_gen_get_brief(ox.w.cat, old_gen, &g));
	cr_assert_eq(g.state, GEN_COMMITTED);
	cr_assert_eq(g.version, 1, "version 1 restored");
	cr_expect(uo_row_ready(UP_GEN_MANIFEST, NULL, old_gen),
		  "step-100's version 1 manifest is written again, naming run-old");
	uint64_t run2 = ts_mk(ox.w.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	uint64_t new_gen = uo_durable_gen(run2, "step-100", 100, 7300);

	struct cat *fresh = NULL;
	struct rebuild_report rep;
	uo_rebuild_fresh(&fresh, &rep);
	cr_expect_eq(rep.manifests_rejected, 0, "%llu durable save(s) rejected by the rebuild",
		     (unsigned long long)rep.manifests_rejected);
	cr_expect_eq(rep.generations, 2);
	struct cat_inode old_dir, new_dir;
	OK(cat_lookup(fresh, CAT_ROOT_INO, "run-old", &old_dir));
	OK(cat_lookup(fresh, CAT_ROOT_INO, "run", &new_dir));
	OK(cat_gen_find(fresh, old_dir.ino, "step-100", &g));
	cr_expect_eq(g.id, old_gen, "run-old/step-100 is the old run's save");
	OK(cat_gen_find(fresh, new_dir.ino, "step-100", &g));
	cr_expect_eq(g.id, new_gen, "run/step-100 is the new run's save");
	ts_cat_close_checked(&fresh);
}

/* ---- U8: a series moved into an open generation ---- */

/* Asserts that file path (components under the root) of catalog c holds
 * n chunks of UO_LEN bytes, ts_fill(seed + k) for chunk k, each read back
 * from BACKING's object and decoded: the bytes a trainer wrote. */
static void uo_expect_bytes_on_backing(struct cat *c, const char *const *path, int seed, int n)
{
	struct cat_inode in = { .ino = CAT_ROOT_INO };
	for (int i = 0; path[i]; i++)
		cr_assert_eq(cat_lookup(c, in.ino, path[i], &in), 0, "no %s in the rebuilt catalog",
			     path[i]);
	cr_assert_eq(in.size, (uint64_t)n * UO_LEN);
	struct cat_extent x[8];
	cr_assert_eq(cat_extents(c, in.ino, 0, x, 8), n);
	size_t cap = UO_LEN + STORE_HEADER_LEN + 4096;
	uint8_t *obj = malloc(cap), *plain = malloc(UO_LEN), *want = malloc(UO_LEN);
	cr_assert(obj && plain && want);
	for (int k = 0; k < n; k++) {
		char rel[128];
		size_t len = 0, plain_len = 0;
		const char *why = NULL;
		store_object_relpath(x[k].hash, rel, sizeof(rel));
		OK(backing_get(ox.w.b, rel, obj, cap, &len));
		OK(store_object_check(x[k].hash, obj, len, plain, UO_LEN, &plain_len, &why));
		ts_fill(want, UO_LEN, seed + k);
		cr_expect(plain_len == UO_LEN && memcmp(plain, want, UO_LEN) == 0,
			  "chunk %d of %s differs from what was written", k, path[0]);
	}
	free(obj);
	free(plain);
	free(want);
}

/* A durable save's series moved into a save being written: the moved save
 * ends ("renamed"), its files are the open generation's, whose manifest
 * comes only once it commits; the tree manifest no longer names them. */
Test(upload_order, a_series_moved_into_an_open_save_keeps_its_manifest_until_that_save_is_durable)
{
	uint64_t run = ts_mk(ox.w.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	uint64_t moved = uo_durable_gen(run, "step-100", 100, 7600);
	uint64_t run2 = ts_mk(ox.w.cat, CAT_ROOT_INO, "run2", S_IFDIR | 0755, NULL);
	uint64_t root2;
	uint64_t open = ts_mkgen(ox.w.cat, run2, "step-200", 200, true, &root2);
	uint64_t ino2 = ts_mk(ox.w.cat, root2, "weights", S_IFREG | 0644, NULL);
	ts_store_file(ox.w.cat, ox.w.st, ino2, 7700, 1, UO_LEN, NULL, NULL);
	uint64_t replaced = 0;
	OK(cat_rename(ox.w.cat, CAT_ROOT_INO, "run", root2, "old", 0, &replaced));
	struct cat_gen g;
	OK(cat_gen_get_brief(ox.w.cat, moved, &g));
	cr_assert_eq(g.state, GEN_DELETED, "the moved save ends");

	/* the uploader writes the tree manifest (without run/) and does what may run */
	uo_start();
	uo_drain();
	cr_expect(uo_manifest_on_backing(moved, 1), "step-100's manifest, the only description of"
		  " its files on BACKING, was removed while run2/step-200 was open");
	struct cat *fresh = NULL;
	struct rebuild_report rep;
	uo_rebuild_fresh(&fresh, &rep);
	cr_expect_eq(rep.chunks_missing, 0);
	const char *at_old[] = { "run", "step-100", "weights", NULL };
	uo_expect_bytes_on_backing(fresh, at_old, 7600, 1);
	ts_cat_close_checked(&fresh);

	/* committed and durable: its manifest names them, the old one goes */
	OK(cat_gen_commit(ox.w.cat, open, "explicit"));
	uo_start();
	uo_drain();
	cr_expect(!uo_manifest_on_backing(moved, 1), "step-100's manifest is removed in the end");
	uo_rebuild_fresh(&fresh, &rep);
	cr_expect_eq(rep.chunks_missing, 0);
	cr_expect_eq(rep.generations, 1);
	const char *at_new[] = { "run2", "step-200", "old", "step-100", "weights", NULL };
	uo_expect_bytes_on_backing(fresh, at_new, 7600, 1);
	const char *own[] = { "run2", "step-200", "weights", NULL };
	uo_expect_bytes_on_backing(fresh, own, 7700, 1);
	ts_cat_close_checked(&fresh);
}

/* ---- removals that wait never hide the rows they wait for ---- */

static void uo_note_many(void *arg, int k, const uint8_t hash[CAT_HASH_LEN])
{
	memcpy(((uint8_t(*)[HASH_LEN])arg)[k], hash, HASH_LEN);
}

Test(upload_order, a_page_of_waiting_removals_does_not_hide_the_uploads_behind_it)
{
	enum { BIG = 80 }; /* more rows than the uploader looks at in one page */
	static uint8_t big[BIG][HASH_LEN];
	uint8_t fresh_chunk[HASH_LEN];
	uint64_t ino = ts_mk(ox.w.cat, CAT_ROOT_INO, "last.ckpt", S_IFREG | 0644, NULL);
	ts_store_file(ox.w.cat, ox.w.st, ino, 5000, BIG, 4096, uo_note_many, big);
	uo_start();
	uo_drain();
	cr_assert(uo_chunk_on_backing(big[0]) && uo_chunk_on_backing(big[BIG - 1]));

	/* the file goes (BIG removals, waiting for a tree manifest without
	 * it), then a new one comes, whose upload that tree manifest needs */
	uint64_t gone = 0;
	OK(cat_unlink(ox.w.cat, CAT_ROOT_INO, "last.ckpt", &gone));
	OK(cat_inode_release(ox.w.cat, gone));
	uint64_t ino2 = ts_mk(ox.w.cat, CAT_ROOT_INO, "last-v2.ckpt", S_IFREG | 0644, NULL);
	ts_store_file(ox.w.cat, ox.w.st, ino2, 6000, 1, 4096, uo_note_one, fresh_chunk);
	uo_start();
	uo_drain();
	struct cat_cache_stats cs;
	OK(cat_cache_stats(ox.w.cat, &cs));
	cr_expect_eq(cs.queued, 0, "%llu rows are still queued: the removals hid the upload the"
		     " tree manifest they wait for needs", (unsigned long long)cs.queued);
	cr_expect(uo_chunk_on_backing(fresh_chunk), "the new file's chunk is on BACKING");
	int left = 0;
	for (int k = 0; k < BIG; k++)
		left += uo_chunk_on_backing(big[k]);
	cr_expect_eq(left, 0, "%d of the removed file's chunks are still on BACKING", left);
}

/* ---- review 35 F6: a removal superseded by a later one (upload.h U4) ---- */

/* `latest` names chunk X; rewritten, X's removal is queued (r1). Before r1
 * runs, `best` stores X again, a tree manifest naming `best` is written,
 * and `best` is rewritten: X's removal is queued again (r2). r1 must not
 * remove X: BACKING's tree manifest names it until one after r2 is there. */
Test(upload_order, a_removal_superseded_by_a_later_one_of_the_same_chunk_waits_for_it)
{
	uint8_t x[HASH_LEN];
	uint64_t latest = ts_mk(ox.w.cat, CAT_ROOT_INO, "latest", S_IFREG | 0644, NULL);
	ts_store_file(ox.w.cat, ox.w.st, latest, 5151, 1, 4096, uo_note_one, x);
	uo_start();
	uo_drain();
	cr_assert(uo_chunk_on_backing(x));
	ts_store_file(ox.w.cat, ox.w.st, latest, 5252, 1, 4096, NULL, NULL); /* r1: X freed */
	uint64_t best = ts_mk(ox.w.cat, CAT_ROOT_INO, "best", S_IFREG | 0644, NULL);
	ts_store_file(ox.w.cat, ox.w.st, best, 5151, 1, 4096, NULL, NULL); /* X stored again */
	uint64_t horizon = 0;
	OK(cat_tree_horizon(ox.w.cat, &horizon));
	cat_tree_described(ox.w.cat, horizon); /* a tree manifest naming `best` is on BACKING */
	ts_store_file(ox.w.cat, ox.w.st, best, 5353, 1, 4096, NULL, NULL); /* r2: X freed again */

	struct cat_upload rows[64];
	int n = cat_upload_list(ox.w.cat, 0, rows, 64), removals = 0;
	for (int i = 0; i < n; i++) {
		if (rows[i].kind != UP_DELETE_CHUNK || memcmp(rows[i].hash, x, HASH_LEN) != 0)
			continue;
		bool ready = false, stale = false, superseded = false;
		OK(cat_upload_ready(ox.w.cat, &rows[i], &ready, &stale));
		OK(cat_upload_removal_superseded(ox.w.cat, &rows[i], &superseded));
		if (removals++ == 0)
			cr_expect(!ready && stale && superseded, "the first removal of X may run (ready"
				  " %d, stale %d) while the tree manifest on BACKING names `best`",
				  ready, stale);
		else
			cr_expect(!ready && !stale && !superseded, "the later removal waits for a tree"
				  " manifest after it (ready %d, stale %d)", ready, stale);
	}
	cr_assert_eq(removals, 2, "two removals of X queued");

	uo_start();
	uo_drain();
	cr_expect(!uo_chunk_on_backing(x), "X is removed in the end");
	struct cat *fresh = NULL;
	struct rebuild_report rep;
	uo_rebuild_fresh(&fresh, &rep);
	cr_expect_eq(rep.chunks_missing, 0);
	ts_cat_close_checked(&fresh);
}
