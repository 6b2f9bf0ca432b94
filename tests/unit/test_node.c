/* Unit tests for fs/node.c with a real catalog: the kernel's lookup counts
 * keep a node until the matching forgets, open handles and write handles
 * are counted and listed, and an inode unlinked while open keeps its row
 * until the last handle closes (node.h invariant 1). */
#include <criterion/criterion.h>

#include <errno.h>
#include <sys/stat.h>

#include "catalog.h"
#include "node.h"
#include "support.h"

static struct {
	char dir[128];
	char cat_path[192];
	struct cat *cat;
	struct node_table *t;
} tn;

static void tn_setup(void)
{
	memset(&tn, 0, sizeof(tn));
	ts_tmpdir_make(tn.dir, sizeof(tn.dir), "node");
	ts_cat_open_in(tn.dir, "catalog.db", tn.cat_path, sizeof(tn.cat_path), &tn.cat);
	OK(node_table_new(tn.cat, &tn.t));
}

static void tn_teardown(void)
{
	node_table_free(tn.t);
	ts_cat_close_checked(&tn.cat);
	ts_tmpdir_remove(tn.dir);
}

TestSuite(node, .init = tn_setup, .fini = tn_teardown);

Test(node, test_a_node_lives_until_forgets_match_its_lookups)
{
	uint64_t ino = ts_mk(tn.cat, CAT_ROOT_INO, "f", S_IFREG | 0644, NULL);
	node_lookup_add(tn.t, ino);
	node_lookup_add(tn.t, ino);
	node_lookup_add(tn.t, ino);
	cr_assert_eq(node_count(tn.t), 1);
	node_forget(tn.t, ino, 2);
	cr_assert_eq(node_count(tn.t), 1, "one lookup is still held");
	struct node *n = node_peek(tn.t, ino);
	cr_assert_not_null(n);
	cr_assert_eq(n->nlookup, 1);
	node_put(tn.t, n);
	node_forget(tn.t, ino, 1);
	cr_assert_eq(node_count(tn.t), 0);
	cr_assert_null(node_peek(tn.t, ino), "a forgotten node is not handed out");
	struct cat_inode in;
	OK(cat_getattr(tn.cat, ino, &in)); /* still linked: the catalog keeps it */
}

Test(node, test_the_root_is_never_counted)
{
	node_lookup_add(tn.t, CAT_ROOT_INO);
	cr_assert_eq(node_count(tn.t), 0);
	node_forget(tn.t, CAT_ROOT_INO, 1);
	cr_assert_eq(node_count(tn.t), 0);
}

Test(node, test_open_and_write_handles_are_counted_and_listed)
{
	uint64_t a = ts_mk(tn.cat, CAT_ROOT_INO, "a", S_IFREG | 0644, NULL);
	uint64_t b = ts_mk(tn.cat, CAT_ROOT_INO, "b", S_IFREG | 0644, NULL);
	uint64_t inos[8];
	struct node *na1, *na2, *nb;
	OK(node_open(tn.t, a, &na1));
	OK(node_open(tn.t, a, &na2));
	OK(node_open(tn.t, b, &nb));
	cr_assert(na1 == na2, "one node per inode");
	node_writers_add(tn.t, na1, 1);
	cr_assert_eq(node_writing(tn.t, inos, 8), 1);
	cr_assert_eq(inos[0], a);
	cr_assert_eq(node_opened(tn.t, inos, 8), 2);

	cr_assert_eq(node_close(tn.t, na2), 1, "one handle of a is left");
	node_put(tn.t, na2);
	node_writers_add(tn.t, na1, -1);
	cr_assert_eq(node_writing(tn.t, inos, 8), 0);
	cr_assert_eq(node_close(tn.t, na1), 0);
	node_put(tn.t, na1);
	cr_assert_eq(node_close(tn.t, nb), 0);
	node_put(tn.t, nb);
	cr_assert_eq(node_opened(tn.t, inos, 8), 0);
	cr_assert_eq(node_count(tn.t), 0, "no lookup, no handle: freed");
}

Test(node, test_an_inode_unlinked_while_open_is_released_at_the_last_close)
{
	uint64_t ino = ts_mk(tn.cat, CAT_ROOT_INO, "f", S_IFREG | 0644, NULL), gone = 0;
	struct cat_inode in;
	node_lookup_add(tn.t, ino);
	struct node *n;
	OK(node_open(tn.t, ino, &n));
	OK(cat_unlink(tn.cat, CAT_ROOT_INO, "f", &gone));
	cr_assert_eq(gone, ino);
	node_unlinked(tn.t, ino);
	node_forget(tn.t, ino, 1);
	OK(cat_getattr(tn.cat, ino, &in)); /* readable through the open handle */
	cr_assert_eq(in.nlink, 0);
	cr_assert_eq(node_close(tn.t, n), 0);
	node_put(tn.t, n); /* the last holder: released (no reaper: at once) */
	cr_assert_eq(node_count(tn.t), 0);
	FAILS(cat_getattr(tn.cat, ino, &in), ENOENT);
}

Test(node, test_an_inode_queued_for_the_reaper_is_released_by_a_flush)
{
	OK(node_table_start(tn.t));
	uint64_t ino = ts_mk(tn.cat, CAT_ROOT_INO, "f", S_IFREG | 0644, NULL), gone = 0;
	struct cat_inode in;
	OK(cat_unlink(tn.cat, CAT_ROOT_INO, "f", &gone));
	node_unlinked(tn.t, ino); /* no node: queued for the reaper */
	node_release_flush(tn.t);
	FAILS(cat_getattr(tn.cat, ino, &in), ENOENT);
	node_table_stop(tn.t);
}

Test(node, test_a_trigger_name_is_remembered_only_for_a_held_node)
{
	uint64_t ino = ts_mk(tn.cat, CAT_ROOT_INO, "latest", S_IFREG | 0644, NULL), parent;
	char name[40];
	node_note_name(tn.t, ino, CAT_ROOT_INO, "latest"); /* no node: nothing to note on */
	struct node *n;
	OK(node_open(tn.t, ino, &n));
	cr_assert_not(node_trigger(tn.t, n, &parent, name, sizeof(name)));
	node_note_name(tn.t, ino, CAT_ROOT_INO, "latest");
	cr_assert(node_trigger(tn.t, n, &parent, name, sizeof(name)));
	cr_assert_eq(parent, CAT_ROOT_INO);
	cr_assert_str_eq(name, "latest");
	node_close(tn.t, n);
	node_put(tn.t, n);
	cr_assert_eq(node_count(tn.t), 0);
}

/* node.h invariant 5: once node_unlinked_many found a removed inode idle and
 * dropped its data, no handle opens it (its reads would be zeros, its
 * writes lost); one already open keeps it, and a second handle then too. */
Test(node, test_a_removed_idle_inode_whose_data_went_is_not_opened_again)
{
	uint64_t idle = ts_mk(tn.cat, CAT_ROOT_INO, "idle", S_IFREG | 0644, NULL), gone = 0;
	uint64_t open = ts_mk(tn.cat, CAT_ROOT_INO, "open", S_IFREG | 0644, NULL);
	node_lookup_add(tn.t, idle); /* the kernel still caches both names */
	node_lookup_add(tn.t, open);
	struct node *held, *n = NULL;
	OK(node_open(tn.t, open, &held));
	OK(cat_unlink(tn.cat, CAT_ROOT_INO, "idle", &gone));
	OK(cat_unlink(tn.cat, CAT_ROOT_INO, "open", &gone));
	const uint64_t inos[2] = { idle, open };
	node_unlinked_many(tn.t, inos, 2);
	FAILS(node_open(tn.t, idle, &n), ENOENT);
	cr_assert_null(n);
	OK(node_open(tn.t, open, &n)); /* a handle was open: its data stays */
	cr_assert(n == held);
	cr_assert_eq(node_close(tn.t, n), 1);
	node_put(tn.t, n);
	cr_assert_eq(node_close(tn.t, held), 0);
	node_put(tn.t, held);
	node_forget(tn.t, idle, 1);
	node_forget(tn.t, open, 1);
	cr_assert_eq(node_count(tn.t), 0);
}

/* node.h invariant 6: the kernel sends no FORGET once its session is over,
 * so node_session_end drops its lookups: an unlinked inode only they held
 * is released (a linked one stays), and one a handle still has open keeps
 * its row until the handle goes. */
Test(node, test_the_kernels_lookups_end_with_its_session)
{
	OK(node_table_start(tn.t)); /* as mounted: releases go through the reaper */
	uint64_t held = ts_mk(tn.cat, CAT_ROOT_INO, "held", S_IFREG | 0644, NULL), gone = 0;
	uint64_t linked = ts_mk(tn.cat, CAT_ROOT_INO, "linked", S_IFREG | 0644, NULL);
	uint64_t open = ts_mk(tn.cat, CAT_ROOT_INO, "open", S_IFREG | 0644, NULL);
	uint64_t dir = ts_mk(tn.cat, CAT_ROOT_INO, "d", S_IFDIR | 0755, NULL);
	node_lookup_add(tn.t, held);
	node_lookup_add(tn.t, linked);
	node_lookup_add(tn.t, open);
	node_lookup_add(tn.t, dir);
	node_lookup_add(tn.t, dir);
	struct node *n;
	OK(node_open(tn.t, open, &n));
	OK(cat_unlink(tn.cat, CAT_ROOT_INO, "held", &gone));
	OK(cat_unlink(tn.cat, CAT_ROOT_INO, "open", &gone));
	OK(cat_rmdir(tn.cat, CAT_ROOT_INO, "d", &gone));
	const uint64_t removed[] = { held, open, dir };
	node_unlinked_many(tn.t, removed, 3); /* as a generation's removal: rows at FORGET */
	node_release_flush(tn.t);
	struct cat_inode in;
	OK(cat_getattr(tn.cat, held, &in));
	cr_assert_eq(in.nlink, 0, "the kernel holds it: its row waits for FORGET");
	OK(cat_getattr(tn.cat, dir, &in));
	cr_assert_eq(node_count(tn.t), 4);

	node_session_end(tn.t);
	cr_assert_eq(node_count(tn.t), 1, "only the node with a handle open is left");
	FAILS(cat_getattr(tn.cat, held, &in), ENOENT);
	FAILS(cat_getattr(tn.cat, dir, &in), ENOENT);
	OK(cat_getattr(tn.cat, linked, &in)); /* still linked: the catalog keeps it */
	cr_assert_eq(in.nlink, 1);
	OK(cat_getattr(tn.cat, open, &in)); /* readable through the open handle */
	cr_assert_eq(in.nlink, 0);
	cr_assert_null(node_peek(tn.t, held), "a freed node is not handed out");
	cr_assert_eq(node_close(tn.t, n), 0);
	node_put(tn.t, n); /* the last holder: released */
	node_table_stop(tn.t);
	cr_assert_eq(node_count(tn.t), 0);
	FAILS(cat_getattr(tn.cat, open, &in), ENOENT);
}
