/* Unit tests of cat_gen_durable's answer for one generation (upload.h U3,
 * review 33 F4), on both engines: "durable" means COMMITTED at a version
 * whose manifest and chunks are on BACKING (durable_version = version) and,
 * in the shared engine, not lost (pggen.h X10; test_pggen.c's lost test).
 * A HELD, deleted or absent generation is not durable: before, each was
 * answered durable (nothing of it counted as "not durable"), so keep-latest-k
 * could take a save held or lost after its listing as the owner's newest
 * durable one (fs/gen.c gen_keep_owner). Gen 0 (every generation) is as
 * before: no OPEN or COMMITTED one left to make durable. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "catalog.h"
#include "generation.h"
#include "log.h"
#include "pgtest.h"
#include "support.h"
#include "upload.h"

#define ROOT ((uint64_t)CAT_ROOT_INO)
#define GD_LEN 1000
#define GD_ABSENT ((uint64_t)987654321)

static bool gd_durable(struct cat *cat, uint64_t gen)
{
	bool d = true; /* the answer must clear it */
	OK(cat_gen_durable(cat, gen, &d));
	return d;
}

/* Every queued upload done as the uploader ends it (no BACKING: the
 * catalog's side alone), manifests too. */
static void gd_upload_all(struct cat *cat)
{
	for (int pass = 0; pass < 2; pass++) { /* chunks first, then the manifests */
		struct cat_upload rows[64];
		int got = cat_upload_list(cat, 0, rows, 64);
		cr_assert_geq(got, 0);
		for (int i = 0; i < got; i++) {
			bool ready = false, stale = false;
			OK(cat_upload_ready(cat, &rows[i], &ready, &stale));
			if (ready || stale)
				OK(cat_upload_done(cat, &rows[i]));
		}
	}
}

/* A save name of series, one file of two chunks of fill, committed if
 * commit says so (else left OPEN). */
static uint64_t gd_save(struct cat *cat, uint64_t series, const char *name, uint64_t step,
			uint8_t fill, bool commit)
{
	uint64_t root;
	uint64_t gen = ts_mkgen(cat, series, name, step, true, &root);
	uint64_t f = ts_mk(cat, root, "rank0.pt", S_IFREG | 0644, NULL);
	ts_write_chunks(cat, f, fill, 0, 2, GD_LEN, NULL, NULL);
	OK(cat_file_unmark(cat, f)); /* released (generation.h G7, G9) */
	if (commit)
		OK(cat_gen_commit(cat, gen, "dcp-metadata"));
	return gen;
}

/* step-1 and step-3 committed and made durable (upload(arg) does the
 * queued uploads as the engine's uploader would), step-2 held; then step-3
 * deleted: only step-1 is durable, and not an id no generation has. */
static void gd_states(struct cat *cat, void (*upload)(void *arg), void *arg)
{
	uint64_t series = ts_mk(cat, ROOT, "run", S_IFDIR | 0755, NULL);
	uint64_t g[3];
	for (int i = 0; i < 3; i++) {
		char name[16];
		snprintf(name, sizeof(name), "step-%d", i + 1);
		g[i] = gd_save(cat, series, name, (uint64_t)i + 1, (uint8_t)(0x31 + i), i != 1);
		cr_assert_not(gd_durable(cat, g[i]), "step-%d is not committed, or its manifest is"
			      " not on BACKING yet", i + 1);
	}
	bool held = false;
	OK(cat_gen_hold(cat, g[1], "abandoned", "a test holds it", NULL, NULL, &held));
	cr_assert(held);
	upload(arg);
	cr_assert(gd_durable(cat, g[0]) && gd_durable(cat, g[2]), "a committed save is not durable");
	cr_assert(gd_durable(cat, 0), "gen 0: a HELD one counted as to be made durable");
	struct cat_gen gen;
	OK(cat_gen_get(cat, g[1], &gen));
	cr_assert_eq(gen.state, GEN_HELD);
	cr_assert_not(gd_durable(cat, g[1]), "a HELD save answered durable");

	struct cat_id_vec ids = { 0 };
	OK(cat_gen_delete(cat, g[2], "trainer", cat_id_vec_add_ino, &ids));
	for (size_t i = 0; i < ids.n; i++)
		OK(cat_inode_release(cat, ids.v[i]));
	cat_id_vec_free(&ids);
	cr_assert_not(gd_durable(cat, g[2]), "a deleted save answered durable");
	cr_assert_not(gd_durable(cat, GD_ABSENT), "an id no generation has answered durable");

	cr_assert(gd_durable(cat, g[0]), "the COMMITTED one is durable no more");
	cr_assert(gd_durable(cat, 0), "gen 0: a HELD or deleted one counted as to be made durable");
	(void)gd_save(cat, series, "step-4", 4, 0x41, true);
	cr_assert_not(gd_durable(cat, 0), "gen 0: a COMMITTED one not durable left out");
	OK(cat_check(cat));
}

/* ---- the one-node engine (upload.c U_GEN_NOT_DURABLE) ---- */

static struct {
	char dir[128], path[192];
	struct cat *cat;
} gx;

static void gd_setup(void)
{
	log_setup(stderr, LOG_LVL_WARN);
	ts_tmpdir_make(gx.dir, sizeof(gx.dir), "gendurable");
	ts_cat_open_in(gx.dir, "catalog.db", gx.path, sizeof(gx.path), &gx.cat);
}

static void gd_teardown(void)
{
	cat_close(gx.cat);
	ts_tmpdir_remove(gx.dir);
}

TestSuite(gen_durable, .init = gd_setup, .fini = gd_teardown);

static void gd_upload_local(void *arg)
{
	gd_upload_all(arg);
}

Test(gen_durable, only_a_committed_generation_at_its_durable_version_is_durable)
{
	gd_states(gx.cat, gd_upload_local, gx.cat);
}

/* ---- the shared engine (pggen.c G_NOT_DURABLE) ---- */

TestSuite(catshared_gen_durable, .init = pt_start, .fini = pt_stop, .timeout = 90);

struct gd_shared {
	struct pt_cat a;
	struct pt_backing bk;
};

static void gd_upload_shared(void *arg)
{
	struct gd_shared *s = arg;
	pt_cat_upload_put(&s->a, &s->bk);
	cr_assert_eq(pt_cat_put_manifests(&s->a, &s->bk), 2);
}

Test(catshared_gen_durable, only_a_committed_generation_at_its_durable_version_is_durable)
{
	struct gd_shared s;
	pt_backing_open(&s.bk, "gdur");
	pt_cat_open(&s.a, "gdur", 30000, NULL, NULL);
	gd_states(s.a.cat, gd_upload_shared, &s);
	OK(cat_gen_check(s.a.cat));
	pt_cat_close(&s.a);
	pt_backing_close(&s.bk);
}
