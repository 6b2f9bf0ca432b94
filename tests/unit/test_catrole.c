/* Tests of meta/catalog.c invariant 9: a catalog is opened in one role only,
 * alone (the namespace is its own) or as a node's local catalog beside a
 * shared one (cat_open_node). Opened the other way it is refused with
 * -EMEDIUMTYPE and nothing in it changes: a node's objects at count 0 (not
 * yet uploaded, or cache copies the cluster still names) are never swept by
 * a mount without meta=, and a catalog alone never hides its files behind a
 * node's mount. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "catalog.h"
#include "catalog_shared.h"
#include "support.h"

#define ROOT ((uint64_t)CAT_ROOT_INO)

static struct {
	char dir[64];
	char path[128];
} fx;

static void setup(void)
{
	ts_tmpdir_make(fx.dir, sizeof(fx.dir), "ckptfs-catrole");
	snprintf(fx.path, sizeof(fx.path), "%s/catalog.db", fx.dir);
}

static void teardown(void)
{
	ts_tmpdir_remove(fx.dir);
}

TestSuite(catrole, .init = setup, .fini = teardown);

static int reclaims;
static int count_reclaim(void *arg, const uint8_t hash[CAT_HASH_LEN])
{
	(void)arg, (void)hash;
	reclaims++;
	return 0;
}

/* The catalog's role row, read with sqlite3 directly ("" if none). */
static void role_of(char *out, size_t size)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	out[0] = '\0';
	cr_assert_eq(sqlite3_open_v2(fx.path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	cr_assert_eq(sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = 'role'", -1, &st, NULL),
		     SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW)
		snprintf(out, size, "%s", (const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	sqlite3_close(db);
}

static void drop_role(void)
{
	sqlite3 *db = NULL;
	cr_assert_eq(sqlite3_open(fx.path, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db, "DELETE FROM meta WHERE key = 'role'", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
}

Test(catrole, a_node_catalog_is_refused_alone_and_its_chunks_stay)
{
	struct cat *cat = NULL;
	cr_assert_eq(cat_open_node(fx.path, 0, 0, count_reclaim, NULL, &cat), 0);
	cat_close(cat);
	/* a stored chunk row at count 0: what a node's released writer leaves
	 * (uploaded or not: a catalog alone would sweep it at open) */
	sqlite3 *db = NULL;
	cr_assert_eq(sqlite3_open(fx.path, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db, "INSERT INTO chunks(hash, plain_len, stored_len, refcount, cached,"
				      " uploaded) VALUES(zeroblob(32), 4096, 4168, 0, 1, 1)",
				  NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	reclaims = 0;
	cr_assert_eq(cat_open_node(fx.path, 0, 0, count_reclaim, NULL, &cat), 0);
	cat_close(cat);
	cr_assert_eq(reclaims, 0, "a node's open sweeps nothing");
	char role[16];
	role_of(role, sizeof(role));
	cr_assert_str_eq(role, "node");

	cr_assert_eq(cat_open(fx.path, 0, 0, count_reclaim, NULL, &cat), -EMEDIUMTYPE);
	cr_assert_null(cat);
	cr_assert_eq(reclaims, 0, "nothing was swept by the refused open");
	cr_assert_eq(cat_open_node(fx.path, 0, 0, count_reclaim, NULL, &cat), 0, "still a node's");
	cat_close(cat);
}

Test(catrole, a_catalog_alone_is_refused_as_a_node)
{
	struct cat *cat = NULL;
	cr_assert_eq(cat_open(fx.path, 0, 0, count_reclaim, NULL, &cat), 0);
	ts_mk(cat, ROOT, "f", S_IFREG | 0644, NULL);
	cat_close(cat);
	cr_assert_eq(cat_open_node(fx.path, 0, 0, count_reclaim, NULL, &cat), -EMEDIUMTYPE);
	cr_assert_eq(cat_open(fx.path, 0, 0, count_reclaim, NULL, &cat), 0);
	struct cat_inode in;
	cr_assert_eq(cat_lookup(cat, ROOT, "f", &in), 0, "its file is there");
	cat_close(cat);
}

/* A read-only open checks no role (the daemon's own metrics read a node's
 * catalog so); cat_role_node tells the caller, which ckptfs-admin asks
 * before it reads a cache offline. */
Test(catrole, a_read_only_open_tells_a_node_catalog_from_one_alone)
{
	struct cat *cat = NULL, *ro = NULL;
	bool node = true;
	cr_assert_eq(cat_open(fx.path, 0, 0, count_reclaim, NULL, &cat), 0);
	cat_close(cat);
	cr_assert_eq(cat_open_readonly(fx.path, &ro), 0);
	cr_assert_eq(cat_role_node(ro, &node), 0);
	cr_assert(!node, "a catalog alone");
	cat_close(ro);
	drop_role();
	cr_assert_eq(cat_open_readonly(fx.path, &ro), 0);
	cr_assert_eq(cat_role_node(ro, &node), 0);
	cr_assert(!node, "no role row: not a node's");
	cat_close(ro);
	cr_assert_eq(cat_open_node(fx.path, 0, 0, count_reclaim, NULL, &cat), 0);
	cat_close(cat);
	cr_assert_eq(cat_open_readonly(fx.path, &ro), 0);
	cr_assert_eq(cat_role_node(ro, &node), 0);
	cr_assert(node, "a node's");
	cat_close(ro);
}

/* A catalog of an older version has no role row: it takes the role it is
 * opened with, except that one holding files never becomes a node's. */
Test(catrole, a_catalog_without_the_row_takes_its_first_role_unless_it_holds_files)
{
	struct cat *cat = NULL;
	char role[16];
	cr_assert_eq(cat_open(fx.path, 0, 0, count_reclaim, NULL, &cat), 0);
	cat_close(cat);
	drop_role();
	cr_assert_eq(cat_open_node(fx.path, 0, 0, count_reclaim, NULL, &cat), 0, "an empty one");
	cat_close(cat);
	role_of(role, sizeof(role));
	cr_assert_str_eq(role, "node");

	drop_role();
	cr_assert_eq(cat_open(fx.path, 0, 0, count_reclaim, NULL, &cat), 0);
	ts_mk(cat, ROOT, "f", S_IFREG | 0644, NULL);
	cat_close(cat);
	drop_role();
	cr_assert_eq(cat_open_node(fx.path, 0, 0, count_reclaim, NULL, &cat), -EMEDIUMTYPE);
	role_of(role, sizeof(role));
	cr_assert_str_eq(role, "", "a refused open writes no role");
	cr_assert_eq(cat_open(fx.path, 0, 0, count_reclaim, NULL, &cat), 0);
	cat_close(cat);
	role_of(role, sizeof(role));
	cr_assert_str_eq(role, "alone");
}
