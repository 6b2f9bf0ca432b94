/* Unit tests for meta/catalog_shared_admin.c (A1-A3): ckptfs-admin's list
 * and show figures from the shared tables. The same generations, files and
 * chunks are written into a lone SQLite catalog and, through two nodes A and
 * B, into the shared one on a private PostgreSQL (tests/unit/pgtest.h); the
 * shared calls must give what admin_query.h gives on the lone catalog:
 * usage (what each generation holds alone, its distinct chunks and their
 * bytes), each file with its size, extents, chunks and path, and the other
 * generations it shares chunks with. The usage of a whole list is one round
 * trip; a lone catalog is refused. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "admin_query.h"
#include "catalog.h"
#include "catalog_shared_admin.h"
#include "generation.h"
#include "pg.h"
#include "pgtest.h"
#include "support.h"

#define ROOT ((uint64_t)CAT_ROOT_INO)
#define SA_LEN 1000
#define SA_GENS 4

static const char *const sa_names[SA_GENS] = { "step-1", "step-2", "step-3", "step-4" };

/* The data both catalogs get: wa writes through one node, wb through
 * another (the same catalog when alone). ids[i] is generation sa_names[i]. */
static void sa_fill(struct cat *wa, struct cat *wb, uint64_t ids[SA_GENS])
{
	uint64_t run = ts_mk(wa, ROOT, "run", S_IFDIR | 0755, NULL), root[SA_GENS];
	for (int i = 0; i < SA_GENS; i++)
		ids[i] = ts_mkgen(wa, run, sa_names[i], (uint64_t)i + 1, true, &root[i]);
	/* step-1: a.pt 3 chunks, sub/b.pt 2 (B's) */
	uint64_t f = ts_mk(wa, root[0], "a.pt", S_IFREG | 0644, NULL);
	ts_write_chunks(wa, f, 0x41, 0, 3, SA_LEN, NULL, NULL);
	uint64_t sub = ts_mk(wb, root[0], "sub", S_IFDIR | 0755, NULL);
	f = ts_mk(wb, sub, "b.pt", S_IFREG | 0644, NULL);
	ts_write_chunks(wb, f, 0x42, 0, 2, SA_LEN, NULL, NULL);
	/* step-2: two of step-1's a.pt chunks and a new one, and the same b.pt */
	f = ts_mk(wa, root[1], "a.pt", S_IFREG | 0644, NULL);
	ts_write_chunks(wa, f, 0x41, 1, 3, SA_LEN, NULL, NULL);
	f = ts_mk(wb, root[1], "b.pt", S_IFREG | 0644, NULL);
	ts_write_chunks(wb, f, 0x42, 0, 2, SA_LEN, NULL, NULL);
	/* step-3: an empty file only; step-4: a replica of its own chunks twice */
	ts_mk(wa, root[2], "empty", S_IFREG | 0644, NULL);
	f = ts_mk(wb, root[3], "x.pt", S_IFREG | 0644, NULL);
	ts_write_chunks(wb, f, 0x44, 0, 2, SA_LEN, NULL, NULL);
	f = ts_mk(wa, root[3], "y.pt", S_IFREG | 0644, NULL);
	ts_write_chunks(wa, f, 0x44, 0, 2, SA_LEN, NULL, NULL);
	/* outside generations: a file naming one of step-1's chunks */
	f = ts_mk(wa, ROOT, "loose.bin", S_IFREG | 0644, NULL);
	ts_write_chunks(wa, f, 0x41, 0, 1, SA_LEN, NULL, NULL);
	for (int i = 0; i < SA_GENS; i++)
		OK(cat_gen_commit(wa, ids[i], "test"));
}

struct sa_usages {
	uint64_t id[SA_GENS];
	struct aq_gen_usage u[SA_GENS];
	int calls;
};

static int sa_usage_cb(void *arg, uint64_t gen_id, const struct aq_gen_usage *u)
{
	struct sa_usages *s = arg;
	s->calls++;
	for (int i = 0; i < SA_GENS; i++)
		if (s->id[i] == gen_id) {
			s->u[i] = *u;
			return 0;
		}
	cr_assert_fail("usage of generation %" PRIu64 ", which was not asked for", gen_id);
	return -EINVAL;
}

struct sa_file {
	char path[256];
	struct aq_file f;
};

struct sa_files {
	struct sa_file v[16];
	int n;
};

static int sa_file_cb(void *arg, const struct aq_file *f, const char *relpath)
{
	struct sa_files *l = arg;
	cr_assert_lt(l->n, 16);
	l->v[l->n].f = *f;
	snprintf(l->v[l->n].path, sizeof(l->v[0].path), "%s", relpath);
	l->n++;
	return 0;
}

/* The lone catalog's files of generation id, paths relative to its root. */
static void sa_local_files(struct aq *q, uint64_t id, const char *name, struct sa_files *out)
{
	struct aq_file *files = NULL;
	size_t n = 0;
	char prefix[64];
	snprintf(prefix, sizeof(prefix), "/run/%s", name);
	OK(aq_gen_files(q, id, &files, &n));
	out->n = 0;
	for (size_t i = 0; i < n; i++) {
		char path[256];
		OK(aq_path(q, files[i].ino, path, sizeof(path)));
		cr_assert_eq(strncmp(path, prefix, strlen(prefix)), 0, "%s", path);
		snprintf(out->v[out->n].path, sizeof(out->v[0].path), "%s", path + strlen(prefix));
		out->v[out->n++].f = files[i];
	}
	free(files);
}

static const struct sa_file *sa_find(const struct sa_files *l, const char *path)
{
	for (int i = 0; i < l->n; i++)
		if (strcmp(l->v[i].path, path) == 0)
			return &l->v[i];
	return NULL;
}

/* The name of generation id among ids (the share rows' other side), or
 * "(none)" for 0: files outside generations. */
static const char *sa_name_of(const uint64_t ids[SA_GENS], uint64_t id)
{
	for (int i = 0; i < SA_GENS; i++)
		if (ids[i] == id)
			return sa_names[i];
	return id == 0 ? "(none)" : "?";
}

TestSuite(catshared_admin, .init = pt_start, .fini = pt_stop, .timeout = 120);

Test(catshared_admin, list_and_show_figures_match_a_lone_catalog_of_the_same_data)
{
	/* alone */
	char dir[64], path[128];
	ts_tmpdir_make(dir, sizeof(dir), "catshared-admin");
	snprintf(path, sizeof(path), "%s/catalog.db", dir);
	struct cat *lone;
	struct aq *q;
	OK(cat_open(path, 0, 0, NULL, NULL, &lone));
	OK(aq_open(lone, &q));
	uint64_t lid[SA_GENS], sid[SA_GENS];
	sa_fill(lone, lone, lid);
	/* shared, written through two nodes */
	struct pt_cat a, b;
	pt_cat_open(&a, "saa", 30000, NULL, NULL);
	pt_cat_open(&b, "sab", 30000, NULL, NULL);
	sa_fill(a.cat, b.cat, sid);

	/* usage: every generation in one statement, one round trip once it is
	 * prepared (pg.h P1: the first use on a connection prepares it) */
	struct sa_usages su = { 0 };
	memcpy(su.id, sid, sizeof(sid));
	OK(cat_shared_gen_usage(b.cat, sid, 1, sa_usage_cb, &su));
	su.calls = 0;
	struct pg_stats before, after;
	cr_assert(cat_pg_stats(b.cat, &before));
	OK(cat_shared_gen_usage(b.cat, sid, SA_GENS, sa_usage_cb, &su));
	cr_assert(cat_pg_stats(b.cat, &after));
	cr_assert_eq(after.round_trips - before.round_trips, 1, "%" PRIu64 " round trips",
		     after.round_trips - before.round_trips);
	cr_assert_eq(su.calls, SA_GENS - 1, "step-3 names no chunk: no row");
	for (int i = 0; i < SA_GENS; i++) {
		struct aq_gen_usage lu;
		OK(aq_gen_usage(q, lid[i], &lu));
		const struct aq_gen_usage *s = &su.u[i];
		cr_assert_eq(s->extents, lu.extents, "%s extents", sa_names[i]);
		cr_assert_eq(s->chunks, lu.chunks, "%s chunks", sa_names[i]);
		cr_assert_eq(s->unique_bytes, lu.unique_bytes, "%s unique", sa_names[i]);
		cr_assert_eq(s->exclusive_chunks, lu.exclusive_chunks, "%s alone", sa_names[i]);
		cr_assert_eq(s->exclusive_bytes, lu.exclusive_bytes, "%s alone bytes", sa_names[i]);
		cr_assert_eq(s->exclusive_stored, lu.exclusive_stored, "%s alone stored",
			     sa_names[i]);
	}
	/* and what those are, worked out from the data written (stored: len/2 + 1) */
	cr_assert_eq(su.u[0].chunks, 5);
	cr_assert_eq(su.u[0].exclusive_chunks, 0, "a.pt's 0..2 and b.pt's in step-2 or loose");
	cr_assert_eq(su.u[1].chunks, 5);
	cr_assert_eq(su.u[1].exclusive_chunks, 1, "only 0x41 seed 3 is step-2's alone");
	cr_assert_eq(su.u[1].exclusive_stored, SA_LEN / 2 + 1);
	cr_assert_eq(su.u[3].extents, 4);
	cr_assert_eq(su.u[3].chunks, 2);
	cr_assert_eq(su.u[3].exclusive_chunks, 2, "named twice, both times by step-4");
	cr_assert_eq(su.u[3].unique_bytes, 2 * SA_LEN);

	/* files, with their paths in the tree */
	for (int i = 0; i < SA_GENS; i++) {
		struct sa_files lf, sf = { .n = 0 };
		sa_local_files(q, lid[i], sa_names[i], &lf);
		OK(cat_shared_gen_files(a.cat, sid[i], sa_file_cb, &sf));
		cr_assert_eq(sf.n, lf.n, "%s: %d files, alone %d", sa_names[i], sf.n, lf.n);
		for (int k = 0; k < lf.n; k++) {
			const struct sa_file *s = sa_find(&sf, lf.v[k].path);
			cr_assert_not_null(s, "%s%s not listed", sa_names[i], lf.v[k].path);
			cr_assert_eq(s->f.size, lf.v[k].f.size, "%s", s->path);
			cr_assert_eq(s->f.extents, lf.v[k].f.extents, "%s", s->path);
			cr_assert_eq(s->f.chunks, lf.v[k].f.chunks, "%s", s->path);
		}
	}
	struct sa_files f1 = { .n = 0 };
	OK(cat_shared_gen_files(b.cat, sid[0], sa_file_cb, &f1));
	cr_assert_not_null(sa_find(&f1, "/a.pt"));
	cr_assert_not_null(sa_find(&f1, "/sub/b.pt"), "B's file, in a directory B made");
	cr_assert_eq(sa_find(&f1, "/sub/b.pt")->f.size, 2 * SA_LEN);

	/* shares */
	for (int i = 0; i < SA_GENS; i++) {
		struct aq_share *ls = NULL, *ss = NULL;
		size_t ln = 0, sn = 0;
		OK(aq_gen_shares(q, lid[i], &ls, &ln));
		OK(cat_shared_gen_shares(a.cat, sid[i], &ss, &sn));
		cr_assert_eq(sn, ln, "%s shares with %zu, alone %zu", sa_names[i], sn, ln);
		for (size_t k = 0; k < ln; k++) {
			cr_assert_str_eq(sa_name_of(sid, ss[k].gen_id), sa_name_of(lid, ls[k].gen_id));
			cr_assert_eq(ss[k].chunks, ls[k].chunks);
			cr_assert_eq(ss[k].bytes, ls[k].bytes);
		}
		free(ls);
		free(ss);
	}
	struct aq_share *s1 = NULL;
	size_t n1 = 0;
	OK(cat_shared_gen_shares(b.cat, sid[0], &s1, &n1));
	cr_assert_eq(n1, 2, "step-2 and the loose file");
	cr_assert_eq(s1[0].gen_id, 0);
	cr_assert_eq(s1[0].chunks, 1);
	cr_assert_eq(s1[1].gen_id, sid[1]);
	cr_assert_eq(s1[1].chunks, 4);
	cr_assert_eq(s1[1].bytes, 4 * SA_LEN);
	free(s1);

	/* a lone catalog answers through admin_query.h, not these */
	struct aq_share *none = NULL;
	size_t nn = 0;
	cr_assert_eq(cat_shared_gen_shares(lone, lid[0], &none, &nn), -EINVAL);
	cr_assert_eq(cat_shared_gen_usage(lone, lid, SA_GENS, sa_usage_cb, &su), -EINVAL);
	pt_cat_close(&b);
	pt_cat_close(&a);
	aq_close(q);
	cat_close(lone);
	ts_tmpdir_remove(dir);
}

Test(catshared_admin, a_file_root_and_a_hard_link_are_named_once)
{
	struct pt_cat a;
	pt_cat_open(&a, "sac", 30000, NULL, NULL);
	uint64_t run = ts_mk(a.cat, ROOT, "run", S_IFDIR | 0755, NULL), root, froot;
	uint64_t dir_gen = ts_mkgen(a.cat, run, "step-1", 1, true, &root);
	uint64_t file_gen = ts_mkgen(a.cat, run, "step-2", 2, false, &froot);
	ts_write_chunks(a.cat, froot, 0x51, 0, 2, SA_LEN, NULL, NULL);
	uint64_t f = ts_mk(a.cat, root, "m.pt", S_IFREG | 0644, NULL);
	ts_write_chunks(a.cat, f, 0x52, 0, 1, SA_LEN, NULL, NULL);
	struct cat_inode in;
	OK(cat_link(a.cat, f, root, "also.pt", &in));
	struct sa_files l = { .n = 0 };
	OK(cat_shared_gen_files(a.cat, dir_gen, sa_file_cb, &l));
	cr_assert_eq(l.n, 1, "one file, linked twice");
	cr_assert_str_eq(l.v[0].path, "/m.pt", "the entry made first");
	l.n = 0;
	OK(cat_shared_gen_files(a.cat, file_gen, sa_file_cb, &l));
	cr_assert_eq(l.n, 1);
	cr_assert_str_eq(l.v[0].path, "", "the root is the file");
	cr_assert_eq(l.v[0].f.size, 2 * SA_LEN);
	cr_assert_eq(l.v[0].f.extents, 2);
	pt_cat_close(&a);
}
