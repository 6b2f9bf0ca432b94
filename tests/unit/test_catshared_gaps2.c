/* Unit tests for the second part of issue 18's generation gaps
 * (docs/MULTINODE.md): two struct cat opened with cat_open_shared on one
 * private PostgreSQL (tests/unit/pgtest.h) are nodes A and B.
 *
 * A generation's root removed (rm -rf: unlink of its files, then rmdir of
 * the root; or unlink of a file root) ends the generation in the removal's
 * transaction, on every node, as on one node (pggen.h X7): DELETED, rule
 * "trainer"; removing a file inside it does not. The path of a series, as
 * the daemon names it to ckptfs-admin on a node (cat_shared_path), is read
 * from the shared tree. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "catalog.h"
#include "generation.h"
#include "pgtest.h"
#include "support.h"

TestSuite(catshared_gaps2, .init = pt_start, .fini = pt_stop, .timeout = 90);

#define ROOT ((uint64_t)CAT_ROOT_INO)

static struct pt_cat g2_a, g2_b;

static void g2_open(void)
{
	pt_cat_open(&g2_a, "gaps2-a", 30000, NULL, NULL);
	pt_cat_open(&g2_b, "gaps2-b", 30000, NULL, NULL);
}

static void g2_close(void)
{
	pt_cat_close(&g2_b);
	pt_cat_close(&g2_a);
}

/* A series directory name under the root, made on A. */
static uint64_t g2_series(const char *name)
{
	struct cat_inode in;
	OK(cat_create(g2_a.cat, ROOT, name, S_IFDIR | 0755, 0, 0, 0, NULL, &in));
	return in.ino;
}

static uint64_t g2_file(struct pt_cat *n, uint64_t dir, const char *name)
{
	struct cat_inode in;
	OK(cat_create(n->cat, dir, name, S_IFREG | 0644, 0, 0, 0, NULL, &in));
	return in.ino;
}

static void g2_assert_ended(struct pt_cat *n, uint64_t id, const char *what)
{
	struct cat_gen g;
	OK(cat_gen_get_brief(n->cat, id, &g));
	cr_assert_eq(g.state, GEN_DELETED, "%s: state %d", what, g.state);
	cr_assert_str_eq(g.rule, "trainer", "%s", what);
	cr_assert_eq(g.root, 0, "%s: owns no root", what);
}

static int g2_count(void *arg, const struct cat_gen *g)
{
	(void)g;
	(*(int *)arg)++;
	return 0;
}

Test(catshared_gaps2, rm_rf_of_a_committed_root_on_another_node_ends_its_generation)
{
	g2_open();
	uint64_t series = g2_series("run"), root = 0, ino = 0;
	uint64_t id = pt_cat_mkgen(&g2_a, series, "step-10", 10, &root);
	g2_file(&g2_a, root, "model.bin");
	OK(cat_gen_commit(g2_a.cat, id, "test"));
	/* B removes it as rm -rf does: the file, then the directory */
	OK(cat_unlink(g2_b.cat, root, "model.bin", &ino));
	struct cat_gen g;
	OK(cat_gen_get_brief(g2_a.cat, id, &g));
	cr_assert_eq(g.state, GEN_COMMITTED, "a file removed from it does not end it");
	OK(cat_rmdir(g2_b.cat, series, "step-10", &ino));
	cr_assert_eq(ino, root);
	g2_assert_ended(&g2_a, id, "seen on A");
	g2_assert_ended(&g2_b, id, "seen on B");
	int n = 0;
	OK(cat_gen_list_brief(g2_a.cat, series, false, g2_count, &n));
	cr_assert_eq(n, 0, "not listed in its series any more");
	cr_assert_eq(cat_gen_find(g2_a.cat, series, "step-10", &g), -ENOENT);
	/* the name is free for a new save of the same step */
	uint64_t again = pt_cat_mkgen(&g2_b, series, "step-10", 10, NULL);
	cr_assert_neq(again, id);
	OK(cat_check(g2_a.cat));
	g2_close();
}

Test(catshared_gaps2, rmdir_of_an_open_root_ends_it_and_unlink_of_a_file_root_too)
{
	g2_open();
	uint64_t series = g2_series("run2"), root = 0, ino = 0;
	uint64_t open_id = pt_cat_mkgen(&g2_a, series, "step-1", 1, &root);
	OK(cat_rmdir(g2_b.cat, series, "step-1", &ino));
	g2_assert_ended(&g2_a, open_id, "an empty OPEN root removed");
	/* a generation whose root is one file */
	struct cat_gen_spec spec = { "step-2.pt", 2 };
	struct cat_inode in;
	uint64_t file_id = 0;
	OK(cat_create_in_gen(g2_a.cat, series, "step-2.pt", S_IFREG | 0644, 0, 0, 0, NULL, &spec,
			     &in, &file_id));
	cr_assert_neq(file_id, 0);
	OK(cat_gen_commit(g2_a.cat, file_id, "test"));
	OK(cat_unlink(g2_b.cat, series, "step-2.pt", &ino));
	cr_assert_eq(ino, in.ino);
	g2_assert_ended(&g2_b, file_id, "a file root unlinked");
	uint64_t gen_of = 1;
	int rc = cat_gen_of(g2_a.cat, in.ino, &gen_of);
	cr_assert(rc == -ENOENT || (rc == 0 && gen_of == 0), "the unlinked root left it: %d %lu", rc,
		  (unsigned long)gen_of);
	OK(cat_check(g2_a.cat));
	g2_close();
}

Test(catshared_gaps2, a_refused_removal_changes_no_generation)
{
	g2_open();
	uint64_t series = g2_series("run3"), root = 0;
	uint64_t id = pt_cat_mkgen(&g2_a, series, "step-5", 5, &root);
	g2_file(&g2_a, root, "model.bin");
	OK(cat_gen_commit(g2_a.cat, id, "test"));
	uint64_t ino = 0;
	cr_assert_eq(cat_rmdir(g2_b.cat, series, "step-5", &ino), -ENOTEMPTY);
	cr_assert_eq(cat_unlink(g2_b.cat, series, "step-5", &ino), -EISDIR);
	struct cat_gen g;
	OK(cat_gen_get_brief(g2_a.cat, id, &g));
	cr_assert_eq(g.state, GEN_COMMITTED, "still committed: the removal was refused");
	cr_assert_eq(g.root, root);
	g2_close();
}

Test(catshared_gaps2, cat_shared_path_names_a_series_from_the_root)
{
	g2_open();
	uint64_t top = g2_series("jobs"), series;
	struct cat_inode in;
	OK(cat_create(g2_a.cat, top, "run 1", S_IFDIR | 0755, 0, 0, 0, NULL, &in));
	series = in.ino;
	char path[256];
	OK(cat_shared_path(g2_b.cat, series, path, sizeof(path)));
	cr_assert_str_eq(path, "/jobs/run 1");
	OK(cat_shared_path(g2_b.cat, ROOT, path, sizeof(path)));
	cr_assert_str_eq(path, "/");
	cr_assert_eq(cat_shared_path(g2_b.cat, series, path, 8), -ENAMETOOLONG);
	uint64_t gone = 0;
	OK(cat_rmdir(g2_a.cat, top, "run 1", &gone));
	cr_assert_eq(cat_shared_path(g2_b.cat, series, path, sizeof(path)), -ENOENT,
		     "an unlinked directory has no path");
	g2_close();
}
