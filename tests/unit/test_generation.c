/* Tests of meta/generation.c: generations created and renamed into place,
 * their trees' gen column, commit, sizes (files, logical, exclusive bytes),
 * find and list, the ends (rename away, replaced, rmdir/unlink, abort,
 * delete), rewrites of a committed generation (reopen, then commit or abort),
 * crash recovery at open (G4), migration of a version-1 catalog, file
 * generations, and hard links at generation boundaries. Every test works in
 * its own temporary directory and ends with cat_check (which runs G1–G3).
 *
 * CKPTFS_TEST_BENCH=1 adds gen_bench/list_200_generations_of_1000_files. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "catalog.h"
#include "generation.h"
#include "log.h"
#include "support.h"
#include "upload.h"

#define ROOT ((uint64_t)CAT_ROOT_INO)
#define HASH_FILL 0xa5 /* the fill of this file's chunk hashes (ts_hash) */
#define MAX_RECLAIMS 4096
#define MAX_INOS 4096

struct reclaims {
	int n;
	uint8_t hash[MAX_RECLAIMS][CAT_HASH_LEN];
};

/* The inodes an abort or delete passed to its callback. */
struct inos {
	int n;
	uint64_t ino[MAX_INOS];
};

static struct fixture {
	char dir[64];
	char path[128];
	struct cat *cat;
	struct reclaims rec;
} fx;

static int record_reclaim(void *arg, const uint8_t hash[CAT_HASH_LEN])
{
	struct reclaims *r = arg;
	cr_assert_lt(r->n, MAX_RECLAIMS);
	memcpy(r->hash[r->n++], hash, CAT_HASH_LEN);
	return 0;
}

static void record_ino(void *arg, uint64_t ino)
{
	struct inos *l = arg;
	cr_assert_lt(l->n, MAX_INOS);
	l->ino[l->n++] = ino;
}

static bool has_ino(const struct inos *l, uint64_t ino)
{
	for (int i = 0; i < l->n; i++)
		if (l->ino[i] == ino)
			return true;
	return false;
}

static void open_catalog(void)
{
	OK(cat_open(fx.path, 0, 0, record_reclaim, &fx.rec, &fx.cat));
}

static void setup(void)
{
	log_setup(stderr, LOG_LVL_WARN);
	ts_tmpdir_make(fx.dir, sizeof(fx.dir), "gen");
	snprintf(fx.path, sizeof(fx.path), "%s/catalog.db", fx.dir);
	memset(&fx.rec, 0, sizeof(fx.rec));
	open_catalog();
}

static void teardown(void)
{
	cat_close(fx.cat);
	fx.cat = NULL;
	ts_tmpdir_remove(fx.dir);
}

static void check_invariants(void)
{
	OK(cat_check(fx.cat));
}

static void reopen_catalog(void)
{
	cat_close(fx.cat);
	fx.cat = NULL;
	open_catalog();
}

static int times_reclaimed(int seed)
{
	uint8_t h[CAT_HASH_LEN];
	int n = 0;
	ts_hash(h, HASH_FILL, seed);
	for (int i = 0; i < fx.rec.n; i++)
		n += memcmp(fx.rec.hash[i], h, CAT_HASH_LEN) == 0;
	return n;
}

struct chunk_find {
	uint8_t hash[CAT_HASH_LEN];
	int64_t refcount; /* -1 if there is no row */
};

static int chunk_find_fn(void *arg, const uint8_t hash[CAT_HASH_LEN], uint64_t plain_len,
			 uint8_t codec, int64_t stored_len, uint64_t refcount)
{
	struct chunk_find *f = arg;
	if (memcmp(hash, f->hash, CAT_HASH_LEN) == 0)
		f->refcount = (int64_t)refcount;
	return 0;
}

static int64_t refcount(int seed)
{
	struct chunk_find f = { .refcount = -1 };
	ts_hash(f.hash, HASH_FILL, seed);
	OK(cat_chunks(fx.cat, chunk_find_fn, &f));
	return f.refcount;
}

static uint64_t mkdir_(uint64_t parent, const char *name)
{
	struct cat_inode in;
	OK(cat_create(fx.cat, parent, name, S_IFDIR | 0755, 1000, 1000, 0, NULL, &in));
	return in.ino;
}

/* A file created and not closed yet: its create marked it being written
 * in an OPEN generation (G7), which a commit by a rule refuses (G9). */
static uint64_t mkfile_unclosed(uint64_t parent, const char *name)
{
	struct cat_inode in;
	OK(cat_create(fx.cat, parent, name, S_IFREG | 0644, 1000, 1000, 0, NULL, &in));
	return in.ino;
}

/* A file created and its handle released (G7: the mark cleared); the
 * writes of a test to it come after, as a later writer's. */
static uint64_t mkfile(uint64_t parent, const char *name)
{
	uint64_t ino = mkfile_unclosed(parent, name);
	OK(cat_file_unmark(fx.cat, ino));
	return ino;
}

static uint64_t lookup(uint64_t parent, const char *name)
{
	struct cat_inode in;
	OK(cat_lookup(fx.cat, parent, name, &in));
	return in.ino;
}

static struct cat_inode attr(uint64_t ino)
{
	struct cat_inode in;
	OK(cat_getattr(fx.cat, ino, &in));
	return in;
}

static uint64_t gen_of(uint64_t ino)
{
	uint64_t gen = 99999;
	OK(cat_gen_of(fx.cat, ino, &gen));
	return gen;
}

static struct cat_gen gen_get(uint64_t id)
{
	struct cat_gen g;
	OK(cat_gen_get(fx.cat, id, &g));
	return g;
}

/* Creates a generation root (a directory, or a file) named name with step
 * step under series; *ino gets its inode. Returns the generation. */
static uint64_t mkgen_as(uint64_t series, const char *name, uint64_t step, bool dir,
			 bool closed, uint64_t *ino);

static uint64_t mkgen(uint64_t series, const char *name, uint64_t step, bool dir, uint64_t *ino)
{
	return mkgen_as(series, name, step, dir, true, ino);
}

/* closed false: a single file's create not released (G7: marked) */
static uint64_t mkgen_as(uint64_t series, const char *name, uint64_t step, bool dir,
			 bool closed, uint64_t *ino)
{
	struct cat_gen_spec spec = { .name = name, .step = step };
	struct cat_inode in;
	uint64_t id = 0;
	OK(cat_create_in_gen(fx.cat, series, name, (dir ? S_IFDIR | 0755 : S_IFREG | 0644), 1000,
			     1000, 0, NULL, &spec, &in, &id));
	cr_assert_neq(id, 0);
	if (!dir && closed) /* a single file's create marked it (G7); released */
		OK(cat_file_unmark(fx.cat, in.ino));
	if (ino)
		*ino = in.ino;
	return id;
}

/* Writes ino's content as n whole chunks of len bytes, seeds seed, seed+1…
 * (a writer's pending list, then a commit). */
static void write_chunks(uint64_t ino, int seed, int n, uint64_t len)
{
	ts_write_chunks(fx.cat, ino, HASH_FILL, seed, n, len, NULL, NULL);
}

static uint64_t put_file(uint64_t parent, const char *name, int seed, int n, uint64_t len)
{
	uint64_t ino = mkfile(parent, name);
	write_chunks(ino, seed, n, len);
	OK(cat_file_unmark(fx.cat, ino)); /* its last handle released (G7) */
	return ino;
}

static void write_sql(const char *path, const char *sql)
{
	sqlite3 *db;
	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	char *err = NULL;
	int src = sqlite3_exec(db, sql, NULL, NULL, &err);
	cr_assert_eq(src, SQLITE_OK, "%s: %s", sql, err ? err : "?");
	sqlite3_close(db);
}

/* ---- tree snapshots: names, types, sizes and extents, byte for byte ---- */

#define SNAP_MAX 64
#define SNAP_EXTENTS 8

struct snap_ent {
	char path[128];
	uint32_t mode;
	uint32_t nlink;
	uint64_t size;
	int n_ext;
	struct cat_extent ext[SNAP_EXTENTS];
};

struct snap {
	int n;
	struct snap_ent ent[SNAP_MAX];
};

struct snap_walk {
	char names[SNAP_MAX][CAT_NAME_MAX + 1];
	uint64_t inos[SNAP_MAX];
	int n;
};

static int snap_dirent(void *arg, const char *name, const struct cat_inode *a, uint64_t next)
{
	struct snap_walk *w = arg;
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return 0;
	cr_assert_lt(w->n, SNAP_MAX);
	strcpy(w->names[w->n], name);
	w->inos[w->n++] = a->ino;
	return 0;
}

static void snap_add(struct snap *s, const char *path, uint64_t ino)
{
	struct cat_inode a = attr(ino);
	cr_assert_lt(s->n, SNAP_MAX);
	struct snap_ent *e = &s->ent[s->n++];
	snprintf(e->path, sizeof(e->path), "%s", path);
	e->mode = a.mode;
	e->nlink = a.nlink;
	e->size = a.size;
	if (S_ISREG(a.mode)) {
		e->n_ext = cat_extents(fx.cat, ino, 0, e->ext, SNAP_EXTENTS);
		cr_assert_geq(e->n_ext, 0);
	}
	if (!S_ISDIR(a.mode))
		return;
	static struct snap_walk w; /* one level at a time: copied out before recursing */
	memset(&w, 0, sizeof(w));
	OK(cat_readdir(fx.cat, ino, 0, snap_dirent, &w));
	int n = w.n;
	char (*names)[CAT_NAME_MAX + 1] = malloc(sizeof(w.names));
	uint64_t *inos = malloc(sizeof(w.inos));
	memcpy(names, w.names, sizeof(w.names));
	memcpy(inos, w.inos, sizeof(w.inos));
	for (int i = 0; i < n; i++) {
		char child[256];
		snprintf(child, sizeof(child), "%s/%s", path, names[i]);
		snap_add(s, child, inos[i]);
	}
	free(names);
	free(inos);
}

static void snap_take(struct snap *s, uint64_t ino)
{
	memset(s, 0, sizeof(*s));
	snap_add(s, ".", ino);
}

static void snap_expect_same(const struct snap *a, const struct snap *b)
{
	cr_assert_eq(a->n, b->n, "%d entries, then %d", a->n, b->n);
	for (int i = 0; i < a->n; i++) {
		const struct snap_ent *x = &a->ent[i], *y = &b->ent[i];
		cr_assert_str_eq(x->path, y->path);
		cr_assert_eq(x->mode, y->mode, "%s: mode", x->path);
		cr_assert_eq(x->nlink, y->nlink, "%s: nlink", x->path);
		cr_assert_eq(x->size, y->size, "%s: size", x->path);
		cr_assert_eq(x->n_ext, y->n_ext, "%s: extents", x->path);
		for (int k = 0; k < x->n_ext; k++) {
			const struct cat_extent *p = &x->ext[k], *q = &y->ext[k];
			cr_assert(p->off == q->off && p->len == q->len &&
					  p->chunk_off == q->chunk_off && p->chunk_len == q->chunk_len &&
					  memcmp(p->hash, q->hash, CAT_HASH_LEN) == 0,
				  "%s: extent %d differs", x->path, k);
		}
	}
}

/* ---- listing ---- */

#define LIST_MAX 256

struct gen_listing {
	int n;
	int stop_after;
	struct cat_gen g[LIST_MAX];
};

static int listing_fn(void *arg, const struct cat_gen *g)
{
	struct gen_listing *l = arg;
	if (l->stop_after && l->n == l->stop_after)
		return 1;
	cr_assert_lt(l->n, LIST_MAX);
	l->g[l->n++] = *g;
	return 0;
}

/* G10: the HELD generation a rolled-back version of series/name was kept
 * as ("<name>.rewrite-<its id>"), 0 if none; *out gets its row. */
static uint64_t kept_of(uint64_t series, const char *name, struct cat_gen *out)
{
	static struct gen_listing l;
	memset(&l, 0, sizeof(l));
	OK(cat_gen_list(fx.cat, series, false, listing_fn, &l));
	for (int i = 0; i < l.n; i++) {
		char want[CAT_NAME_MAX + 1];
		cat_gen_suffixed_name(name, GEN_REWRITE_SUFFIX, l.g[i].id, want);
		if (l.g[i].state == GEN_HELD && strcmp(l.g[i].name, want) == 0) {
			if (out)
				*out = l.g[i];
			return l.g[i].id;
		}
	}
	return 0;
}

static const struct cat_gen *listed(const struct gen_listing *l, uint64_t id)
{
	for (int i = 0; i < l->n; i++)
		if (l->g[i].id == id)
			return &l->g[i];
	return NULL;
}

/* ---- creating and inheriting ---- */

Test(gen, create_roots_a_generation_that_its_tree_inherits, .init = setup, .fini = teardown)
{
	uint64_t series = mkdir_(ROOT, "run");
	uint64_t outside = mkfile(series, "latest");
	uint64_t root;
	int64_t before = ts_now_ns();
	uint64_t id = mkgen(series, "step-100", 100, true, &root);
	uint64_t sub = mkdir_(root, "model");
	uint64_t deep = mkdir_(sub, "layers");
	uint64_t f1 = mkfile(root, ".metadata");
	uint64_t f2 = mkfile(deep, "__0_0.distcp");

	cr_assert_eq(gen_of(root), id);
	cr_assert_eq(gen_of(sub), id);
	cr_assert_eq(gen_of(deep), id);
	cr_assert_eq(gen_of(f1), id);
	cr_assert_eq(gen_of(f2), id);
	cr_assert_eq(gen_of(series), 0);
	cr_assert_eq(gen_of(outside), 0);
	cr_assert_eq(gen_of(ROOT), 0);
	uint64_t gen;
	FAILS(cat_gen_of(fx.cat, 9999, &gen), ENOENT);

	struct cat_gen g = gen_get(id);
	cr_assert_eq(g.id, id);
	cr_assert_eq(g.series, series);
	cr_assert_eq(g.root, root);
	cr_assert_str_eq(g.name, "step-100");
	cr_assert_eq(g.step, 100);
	cr_assert_eq(g.state, GEN_OPEN);
	cr_assert_eq(g.version, 1);
	cr_assert(!g.pinned);
	cr_assert_geq(g.created_ns, before);
	cr_assert_eq(g.committed_ns, 0);
	cr_assert_eq(g.ended_ns, 0);
	cr_assert_str_eq(g.rule, "");
	cr_assert_eq(g.backup_root, 0);
	cr_assert_eq(g.files, 2, "files %llu", (unsigned long long)g.files);

	/* A plain create of the same kind of name is no generation: that is
	 * the caller's choice. A spec names what the entry is called. */
	uint64_t plain = mkdir_(series, "step-200");
	cr_assert_eq(gen_of(plain), 0);
	struct cat_gen_spec spec = { .name = NULL, .step = 300 };
	struct cat_inode in;
	uint64_t id2 = 0;
	OK(cat_create_in_gen(fx.cat, series, "step-300", S_IFDIR | 0755, 0, 0, 0, NULL, &spec, &in,
			     &id2));
	cr_assert_str_eq(gen_get(id2).name, "step-300");
	check_invariants();
}

Test(gen, create_refuses_bad_generations, .init = setup, .fini = teardown)
{
	uint64_t series = mkdir_(ROOT, "run");
	uint64_t root;
	mkgen(series, "step-1", 1, true, &root);
	struct cat_inode in;
	uint64_t id = 77;
	struct cat_gen_spec nested = { .name = "step-2", .step = 2 };
	FAILS(cat_create_in_gen(fx.cat, root, "step-2", S_IFDIR | 0755, 0, 0, 0, NULL, &nested,
				&in, &id), EINVAL);
	cr_assert_eq(id, 0);
	struct cat_gen_spec other = { .name = "step-3", .step = 3 };
	FAILS(cat_create_in_gen(fx.cat, series, "step-4", S_IFDIR | 0755, 0, 0, 0, NULL, &other,
				&in, &id), EINVAL);
	struct cat_gen_spec link = { .name = "step-5", .step = 5 };
	FAILS(cat_create_in_gen(fx.cat, series, "step-5", S_IFLNK | 0777, 0, 0, 0, "step-1", &link,
				&in, &id), EINVAL);
	struct cat_gen_spec huge = { .name = "step-6", .step = UINT64_MAX };
	FAILS(cat_create_in_gen(fx.cat, series, "step-6", S_IFDIR | 0755, 0, 0, 0, NULL, &huge,
				&in, &id), EINVAL);
	struct cat_gen_spec again = { .name = "step-1", .step = 1 };
	FAILS(cat_create_in_gen(fx.cat, series, "step-1", S_IFDIR | 0755, 0, 0, 0, NULL, &again,
				&in, &id), EEXIST);
	struct gen_listing l = { 0 };
	OK(cat_gen_list(fx.cat, 0, true, listing_fn, &l));
	cr_assert_eq(l.n, 1, "failed creates leave no generation row");
	check_invariants();
}

/* ---- commit, sizes, find, list ---- */

Test(gen, commit_and_sizes_count_shared_chunks_as_not_exclusive, .init = setup,
     .fini = teardown)
{
	uint64_t series = mkdir_(ROOT, "run");
	uint64_t a_root, b_root;
	uint64_t a = mkgen(series, "step-100", 100, true, &a_root);
	uint64_t a_sub = mkdir_(a_root, "sub");
	put_file(a_root, "model.pt", 1, 3, 1000);    /* chunks 1 2 3 */
	put_file(a_sub, "optim.pt", 10, 2, 500);     /* chunks 10 11 */
	put_file(a_root, "dup.pt", 1, 1, 1000);      /* chunk 1 again, same generation */
	mkfile(a_root, "empty");
	OK(cat_gen_commit(fx.cat, a, "dcp-metadata"));

	uint64_t b = mkgen(series, "step-200", 200, true, &b_root);
	put_file(b_root, "model.pt", 2, 3, 1000);    /* chunks 2 3 4: 2 and 3 shared */
	put_file(ROOT, "outside", 11, 1, 500);        /* chunk 11 also outside generations */
	OK(cat_gen_commit(fx.cat, b, "keep"));

	struct cat_gen ga = gen_get(a), gb = gen_get(b);
	cr_assert_eq(ga.state, GEN_COMMITTED);
	cr_assert_str_eq(ga.rule, "dcp-metadata");
	cr_assert_geq(ga.committed_ns, ga.created_ns);
	cr_assert_eq(ga.files, 4);
	cr_assert_eq(ga.logical_bytes, 3000 + 1000 + 1000 + 0);
	cr_assert_eq(ga.exclusive_bytes, 1000 + 500, "chunks 1 and 10 only");
	cr_assert_eq(gb.files, 1);
	cr_assert_eq(gb.logical_bytes, 3000);
	cr_assert_eq(gb.exclusive_bytes, 1000, "chunk 4 only");
	FAILS(cat_gen_commit(fx.cat, a, "again"), EALREADY);
	FAILS(cat_gen_commit(fx.cat, 9999, "x"), ENOENT);
	char long_rule[GEN_RULE_MAX + 1];
	memset(long_rule, 'r', GEN_RULE_MAX);
	long_rule[GEN_RULE_MAX] = 0;
	FAILS(cat_gen_commit(fx.cat, b, long_rule), EINVAL);

	/* The list computes the same sizes, one generation at a time. */
	struct gen_listing l = { 0 };
	OK(cat_gen_list(fx.cat, series, false, listing_fn, &l));
	cr_assert_eq(l.n, 2);
	cr_assert_eq(l.g[0].id, a);
	cr_assert_eq(l.g[1].id, b);
	cr_assert_eq(l.g[0].files, ga.files);
	cr_assert_eq(l.g[0].logical_bytes, ga.logical_bytes);
	cr_assert_eq(l.g[0].exclusive_bytes, ga.exclusive_bytes);
	cr_assert_eq(l.g[1].exclusive_bytes, gb.exclusive_bytes);
	check_invariants();
}

Test(gen, list_of_many_generations_matches_get, .init = setup, .fini = teardown)
{
	/* Enough generations for the grouped pass of cat_gen_list. */
	uint64_t s1 = mkdir_(ROOT, "a"), s2 = mkdir_(ROOT, "b");
	uint64_t ids[40];
	char name[32];
	for (int i = 0; i < 40; i++) {
		uint64_t root;
		uint64_t series = i % 2 ? s2 : s1;
		snprintf(name, sizeof(name), "step-%d", 1000 - i); /* steps against id order */
		ids[i] = mkgen(series, name, (uint64_t)(1000 - i), true, &root);
		put_file(root, "w", 100 + 2 * i, 2, 64);   /* exclusive */
		put_file(root, "shared", 1, 1, 32);        /* in every generation */
		if (i % 3 == 0)
			OK(cat_gen_commit(fx.cat, ids[i], "test"));
	}
	OK(cat_gen_abort(fx.cat, ids[4], "abandoned", NULL, NULL));
	OK(cat_gen_reopen(fx.cat, ids[6])); /* a backup must not count */

	struct gen_listing l = { 0 };
	OK(cat_gen_list(fx.cat, 0, true, listing_fn, &l));
	cr_assert_eq(l.n, 40);
	for (int i = 1; i < l.n; i++) {
		const struct cat_gen *p = &l.g[i - 1], *q = &l.g[i];
		cr_assert(p->series < q->series || (p->series == q->series && p->step < q->step),
			  "ordered by series, step, id");
	}
	for (int i = 0; i < 40; i++) {
		struct cat_gen g = gen_get(ids[i]);
		const struct cat_gen *x = listed(&l, ids[i]);
		cr_assert_not_null(x);
		cr_assert_eq(x->files, g.files, "generation %d", i);
		cr_assert_eq(x->logical_bytes, g.logical_bytes, "generation %d", i);
		cr_assert_eq(x->exclusive_bytes, g.exclusive_bytes, "generation %d", i);
		cr_assert_eq(x->state, g.state);
		if (i == 4) {
			cr_assert_eq(g.files, 0);
			cr_assert_eq(g.exclusive_bytes, 0);
		} else {
			cr_assert_eq(g.files, 2, "generation %d", i);
			cr_assert_eq(g.logical_bytes, 2 * 64 + 32);
			cr_assert_eq(g.exclusive_bytes, 2 * 64, "generation %d: %lu", i, g.exclusive_bytes);
		}
	}
	/* The brief list: the same but for exclusive_bytes. */
	static struct gen_listing brief;
	OK(cat_gen_list_brief(fx.cat, 0, true, listing_fn, &brief));
	cr_assert_eq(brief.n, l.n);
	for (int i = 0; i < l.n; i++) {
		cr_assert_eq(brief.g[i].id, l.g[i].id);
		cr_assert_eq(brief.g[i].files, l.g[i].files);
		cr_assert_eq(brief.g[i].logical_bytes, l.g[i].logical_bytes);
		cr_assert_eq(brief.g[i].exclusive_bytes, 0);
		struct cat_gen g;
		OK(cat_gen_get_brief(fx.cat, l.g[i].id, &g));
		cr_assert_eq(g.files, l.g[i].files);
		cr_assert_eq(g.logical_bytes, l.g[i].logical_bytes);
		cr_assert_eq(g.exclusive_bytes, 0);
		cr_assert_eq(g.state, l.g[i].state);
	}
	memset(&l, 0, sizeof(l));
	OK(cat_gen_list(fx.cat, 0, false, listing_fn, &l));
	cr_assert_eq(l.n, 39, "the aborted one only with all");
	cr_assert_null(listed(&l, ids[4]));
	memset(&l, 0, sizeof(l));
	OK(cat_gen_list(fx.cat, s2, true, listing_fn, &l));
	cr_assert_eq(l.n, 20);
	cr_assert_eq(l.g[0].step, 1000 - 39, "lowest step first");
	memset(&l, 0, sizeof(l));
	l.stop_after = 5;
	OK(cat_gen_list(fx.cat, 0, true, listing_fn, &l));
	cr_assert_eq(l.n, 5, "a non-zero return stops");
	check_invariants();
}

Test(gen, find_by_name_and_by_step, .init = setup, .fini = teardown)
{
	uint64_t series = mkdir_(ROOT, "run"), other = mkdir_(ROOT, "other");
	struct cat_gen g;
	uint64_t a = mkgen(series, "step-100", 100, true, NULL);
	uint64_t b = mkgen(series, "checkpoint-100", 100, true, NULL); /* same step, newer */
	uint64_t c = mkgen(series, "step-200", 200, true, NULL);
	mkgen(other, "step-300", 300, true, NULL);
	OK(cat_gen_commit(fx.cat, a, "test"));

	OK(cat_gen_find(fx.cat, series, "step-100", &g));
	cr_assert_eq(g.id, a);
	cr_assert_eq(g.state, GEN_COMMITTED);
	OK(cat_gen_find(fx.cat, series, "step-200", &g));
	cr_assert_eq(g.id, c);
	FAILS(cat_gen_find(fx.cat, series, "step-300", &g), ENOENT);
	FAILS(cat_gen_find(fx.cat, other, "step-100", &g), ENOENT);
	OK(cat_gen_find_step(fx.cat, series, 100, &g));
	cr_assert_eq(g.id, b, "the newest of two with one step");
	OK(cat_gen_find_step(fx.cat, series, 200, &g));
	cr_assert_eq(g.id, c);
	FAILS(cat_gen_find_step(fx.cat, series, 300, &g), ENOENT);

	/* Ended generations are not found. */
	OK(cat_gen_abort(fx.cat, b, "abandoned", NULL, NULL));
	OK(cat_gen_find_step(fx.cat, series, 100, &g));
	cr_assert_eq(g.id, a);
	FAILS(cat_gen_find(fx.cat, series, "checkpoint-100", &g), ENOENT);
	OK(cat_gen_delete(fx.cat, a, "keep", NULL, NULL));
	FAILS(cat_gen_find_step(fx.cat, series, 100, &g), ENOENT);
	check_invariants();
}

/* ---- renames ---- */

Test(gen, rename_tmp_dir_into_a_generation_name_starts_one, .init = setup, .fini = teardown)
{
	uint64_t series = mkdir_(ROOT, "run");
	uint64_t tmp = mkdir_(series, "tmp-save");
	uint64_t sub = mkdir_(tmp, "sub");
	uint64_t f = put_file(sub, "w.pt", 1, 2, 100);
	uint64_t g_file = mkfile(tmp, "config.json");
	cr_assert_eq(gen_of(f), 0);

	struct cat_gen_spec spec = { .name = "step-500", .step = 500 };
	uint64_t replaced = 1, id = 0;
	OK(cat_rename_gen(fx.cat, series, "tmp-save", series, "step-500", 0, &spec, &replaced,
			  &id, NULL));
	cr_assert_eq(replaced, 0);
	cr_assert_neq(id, 0);
	struct cat_gen g = gen_get(id);
	cr_assert_eq(g.state, GEN_OPEN);
	cr_assert_eq(g.root, tmp);
	cr_assert_eq(g.series, series);
	cr_assert_eq(g.step, 500);
	cr_assert_eq(g.files, 2, "files %llu", (unsigned long long)g.files);
	cr_assert_eq(g.logical_bytes, 200);
	cr_assert_eq(gen_of(tmp), id);
	cr_assert_eq(gen_of(sub), id);
	cr_assert_eq(gen_of(f), id);
	cr_assert_eq(gen_of(g_file), id);

	/* A rename inside the generation changes nothing. */
	OK(cat_rename_gen(fx.cat, sub, "w.pt", tmp, "w2.pt", 0, NULL, NULL, &id, NULL));
	cr_assert_eq(id, 0);
	cr_assert_eq(gen_of(f), g.id);

	/* A spec where the new parent is in a generation is refused. */
	uint64_t loose = mkdir_(series, "loose");
	struct cat_gen_spec inner = { .name = "step-9", .step = 9 };
	FAILS(cat_rename_gen(fx.cat, series, "loose", tmp, "step-9", 0, &inner, NULL, NULL, NULL), EINVAL);
	cr_assert_eq(gen_of(loose), 0, "rolled back");
	check_invariants();
}

Test(gen, rename_root_away_deletes_the_generation_renamed, .init = setup, .fini = teardown)
{
	uint64_t series = mkdir_(ROOT, "run");
	uint64_t root, other_root;
	uint64_t id = mkgen(series, "step-100", 100, true, &root);
	uint64_t f = put_file(root, "w.pt", 1, 1, 100);
	OK(cat_gen_commit(fx.cat, id, "test"));
	uint64_t other = mkgen(series, "step-200", 200, true, &other_root);

	/* Out of the generation names: its subtree is nobody's now. */
	OK(cat_rename(fx.cat, series, "step-100", series, "old-step", 0, NULL));
	struct cat_gen g = gen_get(id);
	cr_assert_eq(g.state, GEN_DELETED);
	cr_assert_str_eq(g.rule, "renamed");
	cr_assert_eq(g.root, 0);
	cr_assert_gt(g.ended_ns, 0);
	cr_assert_eq(gen_of(root), 0);
	cr_assert_eq(gen_of(f), 0);
	cr_assert_eq(refcount(1), 1, "the files stay, only the generation ended");

	/* Into another generation: the subtree joins it. */
	OK(cat_rename(fx.cat, series, "old-step", other_root, "moved", 0, NULL));
	cr_assert_eq(gen_of(root), other);
	cr_assert_eq(gen_of(f), other);
	cr_assert_eq(gen_get(other).files, 1);

	/* And out again, as a new generation of its own. */
	struct cat_gen_spec spec = { .name = "step-300", .step = 300 };
	uint64_t third = 0;
	OK(cat_rename_gen(fx.cat, other_root, "moved", series, "step-300", 0, &spec, NULL, &third, NULL));
	cr_assert_eq(gen_of(f), third);
	cr_assert_eq(gen_get(other).files, 0);
	check_invariants();
}

/* G8: a rewrite's root does not move (its backup is the only copy of the
 * committed version); a held root renamed to a step name stays held. */
Test(gen, rename_refuses_a_rewrites_root_and_keeps_a_held_one, .init = setup,
     .fini = teardown)
{
	uint64_t series = mkdir_(ROOT, "run");
	uint64_t other = mkdir_(ROOT, "other");
	uint64_t root, held_root;
	uint64_t id = mkgen(series, "step-100", 100, true, &root);
	uint64_t f = put_file(root, "a.bin", 1, 1, 100);
	OK(cat_gen_commit(fx.cat, id, "test"));
	OK(cat_gen_reopen(fx.cat, id));
	struct cat_gen before = gen_get(id);
	cr_assert_eq(before.state, GEN_OPEN);
	cr_assert_neq(before.backup_root, 0);
	struct cat_gen_spec spec = { .name = "step-150", .step = 150 };
	uint64_t nid = 7;
	FAILS(cat_rename_gen(fx.cat, series, "step-100", series, "step-150", 0, &spec, NULL, &nid, NULL),
	      EBUSY);
	FAILS(cat_rename(fx.cat, series, "step-100", series, "step-100.old", 0, NULL), EBUSY);
	/* nor with its series, moved into another save */
	uint64_t outer_root;
	mkgen(other, "step-1", 1, true, &outer_root);
	FAILS(cat_rename(fx.cat, ROOT, "run", outer_root, "run", 0, NULL), EBUSY);
	cr_assert_eq(lookup(ROOT, "run"), series, "rolled back");
	struct cat_gen after = gen_get(id);
	cr_assert_eq(after.state, GEN_OPEN);
	cr_assert_eq(after.backup_root, before.backup_root, "the backup is kept");
	cr_assert_eq(lookup(series, "step-100"), root);
	cr_assert_eq(gen_of(f), id);

	uint64_t held = mkgen(series, "step-8", 8, true, &held_root);
	uint64_t h = put_file(held_root, "x.distcp", 2, 1, 100);
	bool was_held = false;
	OK(cat_gen_hold(fx.cat, held, "unmount", "no .metadata", NULL, NULL, &was_held));
	cr_assert(was_held);
	struct cat_gen_spec spec9 = { .name = "step-9", .step = 9 };
	nid = 7;
	OK(cat_rename_gen(fx.cat, series, "step-8", series, "step-9", 0, &spec9, NULL, &nid, NULL));
	cr_assert_eq(nid, 0, "no new generation: nothing for rule rename to commit");
	struct cat_gen g = gen_get(held);
	cr_assert_eq(g.state, GEN_HELD);
	cr_assert_str_eq(g.name, "step-9");
	cr_assert_eq(g.step, 9);
	cr_assert_eq(g.root, held_root);
	cr_assert_str_eq(g.held, "no .metadata");
	cr_assert_eq(gen_of(h), held);
	check_invariants();
}

Test(gen, rename_over_a_root_deletes_it_replaced, .init = setup, .fini = teardown)
{
	uint64_t series = mkdir_(ROOT, "run");
	uint64_t old_root;
	uint64_t old = mkgen(series, "epoch=1-step=30.ckpt", 30, false, &old_root);
	write_chunks(old_root, 1, 1, 100);
	OK(cat_gen_commit(fx.cat, old, "closed"));
	uint64_t tmp = put_file(series, "tmp.ckpt", 2, 1, 100);

	struct cat_gen_spec spec = { .name = "epoch=1-step=30.ckpt", .step = 30 };
	uint64_t replaced = 0, id = 0;
	OK(cat_rename_gen(fx.cat, series, "tmp.ckpt", series, "epoch=1-step=30.ckpt", 0, &spec,
			  &replaced, &id, NULL));
	cr_assert_eq(replaced, old_root);
	struct cat_gen g = gen_get(old);
	cr_assert_eq(g.state, GEN_DELETED);
	cr_assert_str_eq(g.rule, "replaced");
	cr_assert_eq(attr(old_root).nlink, 0);
	cr_assert_eq(gen_of(old_root), 0);
	struct cat_gen n = gen_get(id);
	cr_assert_eq(n.state, GEN_OPEN);
	cr_assert_eq(n.root, tmp);
	cr_assert_eq(n.files, 1);
	OK(cat_inode_release(fx.cat, old_root));
	cr_assert_eq(times_reclaimed(1), 1);
	check_invariants();
}

Test(gen, exchange_ends_roots_and_swaps_generations, .init = setup, .fini = teardown)
{
	uint64_t series = mkdir_(ROOT, "run");
	uint64_t root;
	uint64_t id = mkgen(series, "step-1", 1, true, &root);
	uint64_t in_gen = mkfile(root, "f");
	uint64_t tmp = mkdir_(series, "tmp");
	uint64_t in_tmp = mkfile(tmp, "g");
	struct cat_gen_spec spec = { .name = "step-1", .step = 1 };
	uint64_t id2 = 0;
	OK(cat_rename_gen(fx.cat, series, "tmp", series, "step-1", CAT_RENAME_EXCHANGE, &spec, NULL,
			  &id2, NULL));
	cr_assert_eq(gen_get(id).state, GEN_DELETED);
	cr_assert_str_eq(gen_get(id).rule, "renamed");
	cr_assert_eq(gen_of(in_tmp), id2);
	cr_assert_eq(gen_of(tmp), id2);
	cr_assert_eq(gen_of(root), 0);
	cr_assert_eq(gen_of(in_gen), 0);
	cr_assert_eq(lookup(series, "step-1"), tmp);
	check_invariants();
}

/* Review 41 F5: cat_rename_gen reports the inode it moved, read in its own
 * transaction, so ns_rename never looks the new name up again (on -o meta=
 * another node could have renamed its file onto it since: fs/gen.h 12). */
Test(gen, a_rename_reports_the_inode_it_moved, .init = setup, .fini = teardown)
{
	uint64_t run = mkdir_(ROOT, "run");
	uint64_t old = mkfile(run, "latest");
	uint64_t tmp = mkfile(run, "latest.tmp");
	uint64_t replaced = 0, moved = 0;
	OK(cat_rename_gen(fx.cat, run, "latest.tmp", run, "latest", 0, NULL, &replaced, NULL,
			  &moved));
	cr_assert_eq(moved, tmp, "the moved inode %llu, not %llu", (unsigned long long)moved,
		     (unsigned long long)tmp);
	cr_assert_eq(replaced, old, "the replaced one is reported as replaced, not moved");
	/* an exchange: the inode that was at name, now at newname */
	uint64_t other = mkfile(run, "other");
	OK(cat_rename_gen(fx.cat, run, "other", run, "latest", CAT_RENAME_EXCHANGE, NULL, NULL,
			  NULL, &moved));
	cr_assert_eq(moved, other);
	cr_assert_eq(lookup(run, "latest"), other);
	/* a name renamed onto its own inode: nothing moves, newname names it */
	struct cat_inode link;
	OK(cat_link(fx.cat, other, run, "again", &link));
	OK(cat_rename_gen(fx.cat, run, "again", run, "latest", 0, NULL, NULL, NULL, &moved));
	cr_assert_eq(moved, other);
	/* a failed rename reports none */
	moved = 7;
	FAILS(cat_rename_gen(fx.cat, run, "absent", run, "latest", 0, NULL, NULL, NULL, &moved),
	      ENOENT);
	cr_assert_eq(moved, 0);
	check_invariants();
}

Test(gen, series_moved_into_a_generation_ends_its_generations, .init = setup, .fini = teardown)
{
	uint64_t run = mkdir_(ROOT, "run");
	uint64_t inner_root, outer_root;
	uint64_t inner = mkgen(run, "step-1", 1, true, &inner_root);
	uint64_t f = mkfile(inner_root, "f");
	uint64_t series = mkdir_(ROOT, "top");
	uint64_t outer = mkgen(series, "step-9", 9, true, &outer_root);
	OK(cat_rename(fx.cat, ROOT, "run", outer_root, "run", 0, NULL));
	cr_assert_eq(gen_get(inner).state, GEN_DELETED);
	cr_assert_str_eq(gen_get(inner).rule, "renamed");
	cr_assert_eq(gen_of(run), outer);
	cr_assert_eq(gen_of(inner_root), outer);
	cr_assert_eq(gen_of(f), outer);
	/* A series moved around outside generations keeps its generations. */
	uint64_t run2 = mkdir_(ROOT, "run2");
	uint64_t kept = mkgen(run2, "step-2", 2, true, NULL);
	mkdir_(ROOT, "elsewhere");
	OK(cat_rename(fx.cat, ROOT, "run2", lookup(ROOT, "elsewhere"), "run2", 0, NULL));
	cr_assert_eq(gen_get(kept).state, GEN_OPEN);
	check_invariants();
}

Test(gen, hard_links_never_cross_a_generation, .init = setup, .fini = teardown)
{
	uint64_t series = mkdir_(ROOT, "run");
	uint64_t root, root2;
	mkgen(series, "step-1", 1, true, &root);
	mkgen(series, "step-2", 2, true, &root2);
	uint64_t f = mkfile(root, "f");
	uint64_t out = mkfile(series, "out");
	struct cat_inode in;
	FAILS(cat_link(fx.cat, f, series, "f-link", &in), EXDEV);
	FAILS(cat_link(fx.cat, out, root, "out-link", &in), EXDEV);
	FAILS(cat_link(fx.cat, f, root2, "f-link", &in), EXDEV);
	OK(cat_link(fx.cat, f, root, "f-link", &in)); /* inside one generation */
	FAILS(cat_rename(fx.cat, root, "f-link", root2, "f", 0, NULL), EXDEV);
	uint64_t sub = mkdir_(root, "sub");
	OK(cat_link(fx.cat, f, sub, "f-link2", &in));
	FAILS(cat_rename(fx.cat, root, "sub", root2, "sub", 0, NULL), EXDEV);
	OK(cat_unlink(fx.cat, sub, "f-link2", NULL));
	OK(cat_rename(fx.cat, root, "sub", root2, "sub", 0, NULL));
	cr_assert_eq(attr(f).nlink, 2);
	check_invariants();
}

/* ---- removal by the trainer ---- */

Test(gen, rmdir_or_unlink_of_a_root_deletes_it_trainer, .init = setup, .fini = teardown)
{
	uint64_t series = mkdir_(ROOT, "run");
	uint64_t root, froot, ino;
	uint64_t dir = mkgen(series, "step-1", 1, true, &root);
	uint64_t f = mkfile(root, "w.pt");
	OK(cat_gen_commit(fx.cat, dir, "test"));
	uint64_t file = mkgen(series, "epoch=1-step=30.ckpt", 30, false, &froot);
	write_chunks(froot, 1, 2, 100);

	/* The trainer's rmtree: files first, the root last. */
	OK(cat_unlink(fx.cat, root, "w.pt", &ino));
	cr_assert_eq(ino, f);
	cr_assert_eq(gen_of(f), 0, "an unlinked inode leaves its generation");
	cr_assert_eq(gen_get(dir).state, GEN_COMMITTED);
	OK(cat_rmdir(fx.cat, series, "step-1", &ino));
	struct cat_gen g = gen_get(dir);
	cr_assert_eq(g.state, GEN_DELETED);
	cr_assert_str_eq(g.rule, "trainer");
	cr_assert_eq(g.root, 0);

	OK(cat_unlink(fx.cat, series, "epoch=1-step=30.ckpt", &ino));
	cr_assert_eq(ino, froot);
	g = gen_get(file);
	cr_assert_eq(g.state, GEN_DELETED);
	cr_assert_str_eq(g.rule, "trainer");
	OK(cat_inode_release(fx.cat, froot));
	cr_assert_eq(times_reclaimed(1), 1);
	cr_assert_eq(times_reclaimed(2), 1);
	check_invariants();
}

/* ---- abort and delete ---- */

Test(gen, abort_removes_the_tree_and_its_chunks, .init = setup, .fini = teardown)
{
	static struct inos removed;
	memset(&removed, 0, sizeof(removed));
	uint64_t series = mkdir_(ROOT, "run");
	uint64_t root, keep_root;
	uint64_t keep = mkgen(series, "step-1", 1, true, &keep_root);
	put_file(keep_root, "shared.pt", 1, 1, 100);
	OK(cat_gen_commit(fx.cat, keep, "test"));

	uint64_t id = mkgen(series, "step-2", 2, true, &root);
	uint64_t sub = mkdir_(root, "sub");
	uint64_t tree[6] = { root, sub };
	tree[2] = put_file(root, "a.pt", 1, 2, 100); /* chunk 1 shared with step-1 */
	tree[3] = put_file(sub, "b.pt", 10, 2, 100);
	tree[4] = mkfile(sub, "empty");
	struct cat_inode in;
	OK(cat_link(fx.cat, tree[3], root, "b-link", &in));
	tree[5] = mkdir_(sub, "deeper");
	uint32_t series_nlink = attr(series).nlink;

	OK(cat_gen_abort(fx.cat, id, "abandoned", record_ino, &removed));
	struct cat_gen g = gen_get(id);
	cr_assert_eq(g.state, GEN_ABORTED);
	cr_assert_str_eq(g.rule, "abandoned");
	cr_assert_eq(g.root, 0);
	cr_assert_gt(g.ended_ns, 0);
	cr_assert_eq(g.files, 0);
	FAILS(cat_lookup(fx.cat, series, "step-2", &in), ENOENT);
	cr_assert_eq(attr(series).nlink, series_nlink - 1);
	cr_assert_eq(removed.n, 6, "every inode once, the hard-linked one too");
	for (int i = 0; i < 6; i++) {
		cr_assert(has_ino(&removed, tree[i]), "inode %lu passed to fn", tree[i]);
		cr_assert_eq(attr(tree[i]).nlink, 0);
		cr_assert_eq(gen_of(tree[i]), 0);
	}
	cr_assert_eq(fx.rec.n, 0, "the kernel may still hold them");
	FAILS(cat_gen_abort(fx.cat, id, "again", NULL, NULL), EALREADY);
	FAILS(cat_gen_abort(fx.cat, keep, "committed", NULL, NULL), EINVAL);
	check_invariants();

	for (int i = 0; i < removed.n; i++)
		OK(cat_inode_release(fx.cat, removed.ino[i]));
	cr_assert_eq(times_reclaimed(1), 0, "still in step-1");
	cr_assert_eq(times_reclaimed(2), 1);
	cr_assert_eq(times_reclaimed(10), 1);
	cr_assert_eq(times_reclaimed(11), 1);
	cr_assert_eq(refcount(1), 1);
	check_invariants();
}

struct ino_count {
	size_t n;
	uint64_t min, max;
};

static void count_ino(void *arg, uint64_t ino)
{
	struct ino_count *c = arg;
	c->n++;
	c->min = c->n == 1 || ino < c->min ? ino : c->min;
	c->max = ino > c->max ? ino : c->max;
}

Test(gen, abort_of_ten_thousand_files_reports_them_all, .init = setup, .fini = teardown)
{
	uint64_t series = mkdir_(ROOT, "run");
	uint64_t root;
	uint64_t id = mkgen(series, "step-1", 1, true, &root);
	uint64_t sub = mkdir_(root, "sub");
	uint64_t last = 0;
	char name[32];
	for (int i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		last = mkfile(sub, name);
	}
	/* 10 directories of 1000 files more, written directly (by another
	 * connection: closing would roll the open generation back): quicker
	 * than 10 000 calls, and the same rows. */
	char *sql = sqlite3_mprintf(
		"BEGIN;"
		"INSERT INTO inodes(mode, uid, gid, nlink, size, atime_ns, mtime_ns, ctime_ns, gen)"
		" WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 9)"
		" SELECT %d, 0, 0, 2, 0, 1, 1, 1, %llu FROM n;"
		"INSERT INTO dirents(parent, name, ino) SELECT %llu, 'd' || ino, ino FROM inodes"
		" WHERE ino > %llu;"
		"UPDATE inodes SET nlink = nlink + 10 WHERE ino = %llu;"
		"INSERT INTO inodes(mode, uid, gid, nlink, size, atime_ns, mtime_ns, ctime_ns, gen)"
		" WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 9999)"
		" SELECT %d, 0, 0, 1, 0, 1, 1, 1, %llu FROM n;"
		"INSERT INTO dirents(parent, name, ino) SELECT %llu + 1 + ino %% 10, 'f' || ino, ino"
		" FROM inodes WHERE ino > %llu + 10;"
		"COMMIT;",
		S_IFDIR | 0755, (unsigned long long)id, (unsigned long long)root,
		(unsigned long long)last, (unsigned long long)root, S_IFREG | 0644,
		(unsigned long long)id, (unsigned long long)last, (unsigned long long)last);
	OK(cat_defer_commit(fx.cat)); /* the creates above are deferred (catalog_defer.c) */
	write_sql(fx.path, sql);
	sqlite3_free(sql);
	check_invariants();
	struct cat_gen g = gen_get(id);
	cr_assert_eq(g.files, 10300, "%lu files", g.files);

	struct ino_count seen = { 0 };
	OK(cat_gen_abort(fx.cat, id, "abandoned", count_ino, &seen));
	cr_assert_eq(seen.n, 1 + 1 + 300 + 10 + 10000);
	cr_assert_eq(seen.min, root);
	cr_assert_eq(seen.max, last + 10010);
	check_invariants();
	reopen_catalog(); /* nothing was released: recovery deletes them all */
	struct cat_stats st;
	OK(cat_stats(fx.cat, &st));
	cr_assert_eq(st.inodes, 2);
	check_invariants();
}

Test(gen, delete_ignores_pins_and_removes_tree_and_backup, .init = setup, .fini = teardown)
{
	static struct inos removed;
	memset(&removed, 0, sizeof(removed));
	uint64_t series = mkdir_(ROOT, "run");
	uint64_t root;
	uint64_t id = mkgen(series, "step-1", 1, true, &root);
	uint64_t f = put_file(root, "w.pt", 1, 2, 100);
	OK(cat_gen_commit(fx.cat, id, "test"));
	OK(cat_gen_pin(fx.cat, id, true));
	cr_assert(gen_get(id).pinned);
	OK(cat_gen_reopen(fx.cat, id));
	cr_assert_eq(refcount(1), 2, "live and backup");

	OK(cat_gen_delete(fx.cat, id, "admin", record_ino, &removed));
	struct cat_gen g = gen_get(id);
	cr_assert_eq(g.state, GEN_DELETED);
	cr_assert_str_eq(g.rule, "admin");
	cr_assert(g.pinned, "the flag stays; the policy is the caller's");
	cr_assert_eq(g.backup_root, 0);
	cr_assert_eq(removed.n, 2);
	cr_assert(has_ino(&removed, root) && has_ino(&removed, f));
	cr_assert_eq(refcount(1), 1, "the backup's copy is gone at once");
	FAILS(cat_gen_delete(fx.cat, id, "again", NULL, NULL), ENOENT);
	FAILS(cat_gen_pin(fx.cat, 9999, true), ENOENT);
	check_invariants();
	OK(cat_inode_release(fx.cat, f));
	cr_assert_eq(times_reclaimed(1), 1);
	cr_assert_eq(times_reclaimed(2), 1);
	check_invariants();
}

/* keep-latest-k decides, then deletes on another thread: what changed in
 * between (a rewrite, a pin) must win. */
Test(gen, expire_refuses_a_generation_reopened_or_pinned_since, .init = setup, .fini = teardown)
{
	uint64_t series = mkdir_(ROOT, "run");
	uint64_t root;
	uint64_t id = mkgen(series, "step-1", 1, true, &root);
	put_file(root, "w.pt", 1, 2, 100);
	FAILS(cat_gen_expire(fx.cat, id, 0, "keep", NULL, NULL), EBUSY); /* OPEN */
	OK(cat_gen_commit(fx.cat, id, "test"));
	OK(cat_gen_pin(fx.cat, id, true));
	FAILS(cat_gen_expire(fx.cat, id, 0, "keep", NULL, NULL), EBUSY);
	cr_assert_eq(gen_get(id).state, GEN_COMMITTED);
	OK(cat_gen_pin(fx.cat, id, false));
	OK(cat_gen_reopen(fx.cat, id));
	FAILS(cat_gen_expire(fx.cat, id, 0, "keep", NULL, NULL), EBUSY);
	cr_assert_eq(gen_get(id).state, GEN_OPEN);
	cr_assert_eq(lookup(series, "step-1"), root);
	OK(cat_gen_commit(fx.cat, id, "test"));
	OK(cat_gen_expire(fx.cat, id, 0, "keep", NULL, NULL));
	struct cat_gen g = gen_get(id);
	cr_assert_eq(g.state, GEN_DELETED);
	cr_assert_str_eq(g.rule, "keep");
	FAILS(cat_gen_expire(fx.cat, id, 0, "keep", NULL, NULL), ENOENT);
	check_invariants();
}

/* G11: a fake node table for cat_gen_expire_if: the inodes "open for
 * writing", or an error; counts the calls. */
struct writing_fake {
	uint64_t inos[4];
	size_t n;
	int rc;
	int calls;
};

static int writing_fake(void *arg, struct cat_id_vec *inos)
{
	struct writing_fake *w = arg;
	w->calls++;
	for (size_t i = 0; w->rc == 0 && i < w->n; i++)
		OK(cat_id_vec_push(inos, w->inos[i]));
	return w->rc;
}

/* generation.h G11 (review 42 F5): keep-latest-k's expire leaves a
 * COMMITTED save alone while a file of it (or a directory a create is
 * registered on) is open for writing, in its own transaction; a handle on
 * another save's file, or on one that left the save, keeps nothing; a HELD
 * one goes as before (pggen.h X12); an admin's delete never asks. */
Test(gen, expire_keeps_a_committed_save_with_a_file_open_for_writing, .init = setup,
     .fini = teardown)
{
	uint64_t series = mkdir_(ROOT, "run");
	uint64_t root1, root2, root3;
	uint64_t id1 = mkgen(series, "step-1", 1, true, &root1);
	uint64_t sub = mkdir_(root1, "shards");
	uint64_t f1 = put_file(sub, "w.pt", 1, 2, 100);
	OK(cat_gen_commit(fx.cat, id1, "marker"));
	uint64_t id2 = mkgen(series, "step-2", 2, true, &root2);
	uint64_t f2 = put_file(root2, "w.pt", 5, 1, 100);
	OK(cat_gen_commit(fx.cat, id2, "marker"));
	uint64_t id3 = mkgen(series, "step-3", 3, true, &root3);
	put_file(root3, "w.pt", 7, 1, 100);
	OK(cat_gen_commit(fx.cat, id3, "marker"));

	struct writing_fake w = { .inos = { f2, f1 }, .n = 2 };
	FAILS(cat_gen_expire_if(fx.cat, id1, 1, "keep", writing_fake, &w, NULL, NULL), ETXTBSY);
	cr_assert_eq(w.calls, 1);
	cr_assert_eq(gen_get(id1).state, GEN_COMMITTED);
	cr_assert_eq(lookup(series, "step-1"), root1);
	w.inos[1] = sub; /* a create registered on a directory of it */
	FAILS(cat_gen_expire_if(fx.cat, id1, 1, "keep", writing_fake, &w, NULL, NULL), ETXTBSY);
	w.rc = -ENOMEM; /* cannot tell: kept */
	FAILS(cat_gen_expire_if(fx.cat, id1, 1, "keep", writing_fake, &w, NULL, NULL), ENOMEM);
	cr_assert_eq(gen_get(id1).state, GEN_COMMITTED);
	/* G6 first: step-3 is its owner's latest commit, never asked about */
	w = (struct writing_fake){ .inos = { f2 }, .n = 1 };
	FAILS(cat_gen_expire_if(fx.cat, id3, 1, "keep", writing_fake, &w, NULL, NULL), EBUSY);
	cr_assert_eq(w.calls, 0);
	/* the file moved out of the save: it holds the save no more */
	OK(cat_rename(fx.cat, sub, "w.pt", series, "moved.pt", 0, NULL));
	w = (struct writing_fake){ .inos = { f2, f1, 999999 }, .n = 3 };
	struct inos removed = { 0 };
	OK(cat_gen_expire_if(fx.cat, id1, 1, "keep", writing_fake, &w, record_ino, &removed));
	cr_assert_eq(w.calls, 1);
	cr_assert_eq(gen_get(id1).state, GEN_DELETED);
	cr_assert(has_ino(&removed, root1) && has_ino(&removed, sub) && !has_ino(&removed, f1));
	/* the shared engine's X12 spares a HELD one: so does G11 */
	uint64_t root4;
	uint64_t id4 = mkgen(series, "step-0", 0, true, &root4);
	uint64_t f4 = put_file(root4, "w.pt", 9, 1, 100);
	bool held = false;
	OK(cat_gen_hold(fx.cat, id4, "abandoned", "no writer", NULL, NULL, &held));
	cr_assert(held);
	w = (struct writing_fake){ .inos = { f4 }, .n = 1 };
	OK(cat_gen_expire_if(fx.cat, id4, 1, "keep-held", writing_fake, &w, NULL, NULL));
	cr_assert_eq(gen_get(id4).state, GEN_DELETED);
	/* an admin's delete is a decision: it never asks */
	w = (struct writing_fake){ .inos = { f2 }, .n = 1 };
	OK(cat_gen_delete(fx.cat, id2, "admin", NULL, NULL));
	cr_assert_eq(w.calls, 0);
	check_invariants();
}

#define BATCH_FILES 300 /* several of catalog.c's release batches */

/* A file of two 64-byte chunks: seeds a, then b. */
static void write_two_chunks(uint64_t ino, int a, int b)
{
	for (int i = 0; i < 2; i++) {
		struct cat_extent e = { .off = (uint64_t)i * 64, .len = 64, .chunk_len = 64 };
		bool must = false;
		ts_hash(e.hash, HASH_FILL, i ? b : a);
		OK(cat_pending_add(fx.cat, ino, &e, &must));
		if (must)
			OK(cat_chunk_stored(fx.cat, e.hash, 1, 33));
	}
	OK(cat_file_commit(fx.cat, ino, 128, ts_now_ns(), false));
	OK(cat_pending_drop(fx.cat, ino));
}

/* A committed generation of BATCH_FILES files: file i holds chunk 100 + i
 * (its own) and chunk 1 + i % 3 (shared by a third of them); a file outside
 * it shares chunk 1. Returns the generation. */
static uint64_t many_files_gen(uint64_t series, uint64_t *root, uint64_t *outside)
{
	uint64_t id = mkgen(series, "step-1", 1, true, root);
	uint64_t sub = mkdir_(*root, "sub");
	char name[32];
	for (int i = 0; i < BATCH_FILES; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		write_two_chunks(mkfile(sub, name), 100 + i, 1 + i % 3);
	}
	OK(cat_gen_commit(fx.cat, id, "test"));
	*outside = put_file(ROOT, "outside", 1, 1, 64);
	return id;
}

Test(gen, batched_release_of_a_deleted_generation_frees_each_chunk_once, .init = setup,
     .fini = teardown)
{
	static struct inos removed;
	memset(&removed, 0, sizeof(removed));
	uint64_t series = mkdir_(ROOT, "run");
	uint64_t root, outside;
	uint64_t id = many_files_gen(series, &root, &outside);
	cr_assert_eq(refcount(1), BATCH_FILES / 3 + 1);
	OK(cat_gen_delete(fx.cat, id, "keep", record_ino, &removed));
	cr_assert_eq(removed.n, BATCH_FILES + 2);
	cr_assert_eq(fx.rec.n, 0, "nothing goes before the release");
	/* with a still-linked inode and a missing one in the list: skipped */
	removed.ino[removed.n++] = outside;
	removed.ino[removed.n++] = 999999;
	OK(cat_inodes_release(fx.cat, removed.ino, (size_t)removed.n));
	cr_assert_eq(fx.rec.n, BATCH_FILES + 2, "own chunks and two of the shared ones");
	for (int i = 0; i < BATCH_FILES; i++)
		cr_assert_eq(times_reclaimed(100 + i), 1);
	cr_assert_eq(times_reclaimed(1), 0);
	cr_assert_eq(refcount(1), 1, "the file outside keeps it");
	cr_assert_eq(times_reclaimed(2), 1);
	cr_assert_eq(times_reclaimed(3), 1);
	cr_assert_eq(attr(outside).nlink, 1);
	struct cat_stats st;
	OK(cat_stats(fx.cat, &st));
	cr_assert_eq(st.inodes, 3, "root, run, outside");
	OK(cat_inodes_release(fx.cat, removed.ino, (size_t)removed.n)); /* again: nothing left to do */
	cr_assert_eq(fx.rec.n, BATCH_FILES + 2);
	check_invariants();
}

Test(gen, release_cut_short_is_finished_at_the_next_open, .init = setup, .fini = teardown)
{
	static struct inos removed;
	memset(&removed, 0, sizeof(removed));
	uint64_t series = mkdir_(ROOT, "run");
	uint64_t root, outside;
	uint64_t id = many_files_gen(series, &root, &outside);
	OK(cat_gen_delete(fx.cat, id, "keep", record_ino, &removed));
	OK(cat_inodes_release(fx.cat, removed.ino, removed.n / 2)); /* then "a crash" */
	check_invariants();
	reopen_catalog();
	struct cat_stats st;
	OK(cat_stats(fx.cat, &st));
	cr_assert_eq(st.inodes, 3, "root, run, outside");
	cr_assert_eq(refcount(1), 1);
	for (int i = 0; i < BATCH_FILES; i++)
		cr_assert_eq(refcount(100 + i), -1, "chunk %d leaked", 100 + i);
	for (int i = 0; i < BATCH_FILES; i++)
		cr_assert_eq(times_reclaimed(100 + i), 1, "chunk %d reclaimed once", 100 + i);
	check_invariants();
}

Test(gen, drop_data_empties_unlinked_files_and_keeps_their_rows, .init = setup, .fini = teardown)
{
	static struct inos removed;
	memset(&removed, 0, sizeof(removed));
	struct cat_extent ext[2];
	uint64_t series = mkdir_(ROOT, "run");
	uint64_t root, outside;
	uint64_t id = many_files_gen(series, &root, &outside);
	OK(cat_gen_delete(fx.cat, id, "keep", record_ino, &removed));
	removed.ino[removed.n++] = outside;
	OK(cat_inodes_drop_data(fx.cat, removed.ino, (size_t)removed.n));
	cr_assert_eq(fx.rec.n, BATCH_FILES + 2);
	cr_assert_eq(attr(outside).size, 64, "a linked file keeps its data");
	cr_assert_eq(cat_extents(fx.cat, outside, 0, ext, 2), 1);
	for (int i = 0; i + 1 < removed.n; i++) {
		struct cat_inode in = attr(removed.ino[i]); /* the row stays, for the kernel */
		cr_assert_eq(in.nlink, 0);
		cr_assert_eq(in.size, 0);
		if (S_ISREG(in.mode))
			cr_assert_eq(cat_extents(fx.cat, removed.ino[i], 0, ext, 2), 0);
	}
	check_invariants();
	OK(cat_inodes_release(fx.cat, removed.ino, (size_t)removed.n)); /* at FORGET */
	struct cat_stats st;
	OK(cat_stats(fx.cat, &st));
	cr_assert_eq(st.inodes, 3);
	cr_assert_eq(fx.rec.n, BATCH_FILES + 2);
	check_invariants();
}

/* ---- rewriting a committed generation ---- */

/* step-1 with sub/, two files and a hard link; returns the generation. */
static uint64_t committed_tree(uint64_t series, uint64_t *root, uint64_t *a, uint64_t *b)
{
	uint64_t id = mkgen(series, "step-1", 1, true, root);
	uint64_t sub = mkdir_(*root, "sub");
	*a = put_file(*root, "a.pt", 1, 3, 100);
	*b = put_file(sub, "b.pt", 10, 2, 50);
	struct cat_inode in;
	OK(cat_link(fx.cat, *b, *root, "b-link", &in));
	mkfile(sub, "empty");
	OK(cat_gen_commit(fx.cat, id, "dcp-metadata"));
	return id;
}

Test(gen, reopen_then_commit_drops_the_backup, .init = setup, .fini = teardown)
{
	uint64_t series = mkdir_(ROOT, "run");
	uint64_t root, a, b;
	uint64_t id = committed_tree(series, &root, &a, &b);
	struct cat_gen before = gen_get(id);
	struct cat_stats st0, st1;
	OK(cat_stats(fx.cat, &st0));

	OK(cat_gen_reopen(fx.cat, id));
	struct cat_gen g = gen_get(id);
	cr_assert_eq(g.state, GEN_OPEN);
	cr_assert_eq(g.version, 2);
	cr_assert_eq(g.root, root, "the live tree keeps its inode numbers");
	cr_assert_gt(g.backup_root, st0.inodes, "a new number");
	cr_assert_eq(gen_of(g.backup_root), id);
	cr_assert_eq(g.files, before.files, "the backup is not counted");
	cr_assert_eq(g.logical_bytes, before.logical_bytes);
	cr_assert_eq(refcount(1), 2);
	cr_assert_eq(refcount(10), 2, "the hard link is one inode, copied once");
	OK(cat_stats(fx.cat, &st1));
	cr_assert_eq(st1.inodes, st0.inodes + 5);
	FAILS(cat_gen_reopen(fx.cat, id), EALREADY);
	check_invariants();

	/* The trainer rewrites a.pt: chunks 1 2 3 become 1 4. */
	write_chunks(a, 1, 1, 100);
	OK(cat_pending_from_committed(fx.cat, a));
	struct cat_extent e = { .off = 100, .len = 100, .chunk_len = 100 };
	bool must;
	ts_hash(e.hash, HASH_FILL, 4);
	OK(cat_pending_add(fx.cat, a, &e, &must));
	OK(cat_chunk_stored(fx.cat, e.hash, 1, 51));
	OK(cat_file_commit(fx.cat, a, 200, ts_now_ns(), false));
	OK(cat_pending_drop_unmark(fx.cat, a)); /* its last release (G7, G9) */
	cr_assert_eq(fx.rec.n, 0, "the backup holds chunks 2 and 3");
	check_invariants();

	OK(cat_gen_commit(fx.cat, id, "dcp-metadata"));
	g = gen_get(id);
	cr_assert_eq(g.state, GEN_COMMITTED);
	cr_assert_eq(g.version, 2);
	cr_assert_eq(g.backup_root, 0);
	cr_assert_eq(times_reclaimed(2), 1);
	cr_assert_eq(times_reclaimed(3), 1);
	cr_assert_eq(fx.rec.n, 2);
	cr_assert_eq(refcount(1), 1);
	cr_assert_eq(refcount(10), 1);
	OK(cat_stats(fx.cat, &st1));
	cr_assert_eq(st1.inodes, st0.inodes, "the backup's inodes are gone");
	cr_assert_eq(g.logical_bytes, before.logical_bytes - 100);
	check_invariants();
}

Test(gen, reopen_then_abort_restores_the_backup_byte_for_byte, .init = setup, .fini = teardown)
{
	static struct snap before, after;
	static struct inos removed;
	memset(&removed, 0, sizeof(removed));
	uint64_t series = mkdir_(ROOT, "run");
	uint64_t root, a, b;
	uint64_t id = committed_tree(series, &root, &a, &b);
	snap_take(&before, root);
	struct cat_gen committed = gen_get(id);
	uint32_t series_nlink = attr(series).nlink;

	OK(cat_gen_reopen(fx.cat, id));
	write_chunks(a, 20, 2, 100);                  /* rewritten */
	OK(cat_unlink(fx.cat, root, "b-link", NULL)); /* unlinked */
	uint64_t added = put_file(root, "new.pt", 30, 1, 100);
	OK(cat_rename(fx.cat, root, "sub", root, "sub2", 0, NULL));
	check_invariants();

	OK(cat_gen_abort(fx.cat, id, "abandoned", record_ino, &removed));
	struct cat_gen g = gen_get(id);
	cr_assert_eq(g.state, GEN_COMMITTED);
	cr_assert_eq(g.version, 1);
	cr_assert_str_eq(g.rule, "abandoned-restored");
	cr_assert_eq(g.backup_root, 0);
	cr_assert_neq(g.root, root, "the backup's root is the root now");
	cr_assert_eq(g.committed_ns, committed.committed_ns);
	cr_assert_eq(lookup(series, "step-1"), g.root);
	cr_assert_eq(attr(series).nlink, series_nlink);
	cr_assert_eq(g.files, committed.files);
	cr_assert_eq(g.logical_bytes, committed.logical_bytes);
	snap_take(&after, g.root);
	snap_expect_same(&before, &after);
	cr_assert(has_ino(&removed, root) && has_ino(&removed, a) && has_ino(&removed, b) &&
		  has_ino(&removed, added));
	cr_assert_eq(removed.n, 6);
	check_invariants();

	for (int i = 0; i < removed.n; i++)
		OK(cat_inode_release(fx.cat, removed.ino[i]));
	cr_assert_eq(times_reclaimed(20), 1);
	cr_assert_eq(times_reclaimed(21), 1);
	cr_assert_eq(times_reclaimed(30), 1);
	cr_assert_eq(fx.rec.n, 3, "the old version's chunks live on in the restored tree");
	cr_assert_eq(gen_get(id).exclusive_bytes, committed.exclusive_bytes,
		     "once the removed inodes are released");
	cr_assert_eq(refcount(1), 1);
	cr_assert_eq(refcount(10), 1);
	check_invariants();

	/* It can be rewritten again. */
	OK(cat_gen_reopen(fx.cat, id));
	OK(cat_gen_commit(fx.cat, id, "dcp-metadata"));
	cr_assert_eq(gen_get(id).version, 2);
	check_invariants();
}

/* ---- crash recovery ---- */

Test(gen, crash_recovery_rolls_back_open_generations, .init = setup, .fini = teardown)
{
	static struct snap before, after;
	uint64_t series = mkdir_(ROOT, "run");
	uint64_t root, a, b, open_root;
	uint64_t rewritten = committed_tree(series, &root, &a, &b);
	snap_take(&before, root);
	uint64_t open = mkgen(series, "step-2", 2, true, &open_root);
	put_file(open_root, "half.pt", 40, 2, 100);
	put_file(open_root, "shared.pt", 1, 1, 100);
	uint64_t done_root;
	uint64_t done = mkgen(series, "step-3", 3, true, &done_root);
	put_file(done_root, "w.pt", 50, 1, 100);
	OK(cat_gen_commit(fx.cat, done, "keep"));

	OK(cat_gen_reopen(fx.cat, rewritten));
	write_chunks(a, 60, 1, 100);
	OK(cat_unlink(fx.cat, lookup(root, "sub"), "empty", NULL));
	put_file(root, "extra", 61, 1, 100);
	uint64_t half = mkfile(root, "being-written");
	struct cat_extent e = { .off = 0, .len = 100, .chunk_len = 100 };
	bool must;
	ts_hash(e.hash, HASH_FILL, 62);
	OK(cat_pending_add(fx.cat, half, &e, &must)); /* a writer when the daemon died */

	reopen_catalog();
	/* An open save is held, not deleted: a crash proves nothing about it. */
	struct cat_gen g = gen_get(open);
	cr_assert_eq(g.state, GEN_HELD);
	cr_assert_str_eq(g.rule, "crash");
	cr_assert(strncmp(g.held, GEN_CRASH_REASON, strlen(GEN_CRASH_REASON)) == 0, "%s", g.held);
	cr_assert_eq(g.root, open_root);
	cr_assert_eq(lookup(series, "step-2"), open_root);
	cr_assert_eq(g.files, 2, "files %llu", (unsigned long long)g.files);
	struct cat_inode in;
	OK(cat_lookup(fx.cat, open_root, "half.pt", &in));
	cr_assert_eq(in.size, 200);

	g = gen_get(rewritten);
	cr_assert_eq(g.state, GEN_COMMITTED);
	cr_assert_eq(g.version, 1);
	cr_assert_str_eq(g.rule, "crash-restored");
	cr_assert_eq(g.backup_root, 0);
	snap_take(&after, g.root);
	snap_expect_same(&before, &after);
	/* G10: version 2 is kept HELD beside it, its tree as the crash left it
	 * (the file a writer had open is as of its last recorded change) */
	struct cat_gen kept;
	uint64_t kept_id = kept_of(series, "step-1", &kept);
	cr_assert_neq(kept_id, 0, "the rolled-back version 2 is kept");
	cr_assert_neq(kept_id, rewritten);
	cr_assert_eq(kept.root, root, "its tree, not a copy");
	cr_assert_eq(kept.step, 1);
	cr_assert_eq(kept.version, 1);
	cr_assert_str_eq(kept.rule, "crash");
	cr_assert(strstr(kept.held, "version 2 of step-1, rolled back (" GEN_CRASH_REASON) == kept.held,
		  "%s", kept.held);
	cr_assert_eq(lookup(series, kept.name), root);
	OK(cat_getattr(fx.cat, a, &in));
	OK(cat_lookup(fx.cat, root, "extra", &in));
	struct cat_inode gone;
	FAILS(cat_lookup(fx.cat, lookup(root, "sub"), "empty", &gone), ENOENT);
	uint64_t kept_gen = 0;
	OK(cat_gen_of(fx.cat, a, &kept_gen));
	cr_assert_eq(kept_gen, kept_id, "its inodes carry its id");

	g = gen_get(done);
	cr_assert_eq(g.state, GEN_COMMITTED);
	cr_assert_str_eq(g.rule, "keep");
	cr_assert_eq(lookup(series, "step-3"), done_root);

	/* The held saves' chunks stay (the kept version's too); only the
	 * pending row of the file being written goes. */
	cr_assert_eq(times_reclaimed(40), 0);
	cr_assert_eq(times_reclaimed(41), 0);
	cr_assert_eq(times_reclaimed(60), 0);
	cr_assert_eq(times_reclaimed(61), 0);
	cr_assert_eq(times_reclaimed(62), 1);
	cr_assert_eq(times_reclaimed(1), 0);
	cr_assert_eq(fx.rec.n, 1);
	struct gen_listing l = { 0 };
	OK(cat_gen_list(fx.cat, 0, true, listing_fn, &l));
	for (int i = 0; i < l.n; i++)
		cr_assert_neq(l.g[i].state, GEN_OPEN, "G4");
	check_invariants();
}

/* ---- held generations ---- */

Test(gen, a_held_generation_keeps_its_tree_until_a_decision, .init = setup, .fini = teardown)
{
	uint64_t series = mkdir_(ROOT, "run"), root;
	uint64_t id = mkgen(series, "step-5", 5, true, &root);
	put_file(root, "model.pt", 70, 2, 100);
	bool held = false;
	OK(cat_gen_hold(fx.cat, id, "abandoned", "model.pt: truncated", NULL, NULL, &held));
	cr_assert(held);
	struct cat_gen g = gen_get(id);
	cr_assert_eq(g.state, GEN_HELD);
	cr_assert_str_eq(g.rule, "abandoned");
	cr_assert_str_eq(g.held, "model.pt: truncated");
	cr_assert_eq(g.root, root, "kept in place");
	cr_assert_eq(g.files, 1);
	cr_assert_eq(lookup(series, "step-5"), root);
	FAILS(cat_gen_hold(fx.cat, id, "abandoned", "again", NULL, NULL, NULL), EALREADY);
	check_invariants();
	/* a crash keeps it held */
	reopen_catalog();
	cr_assert_eq(gen_get(id).state, GEN_HELD);
	/* an explicit decision promotes it, and the reason goes */
	OK(cat_gen_commit(fx.cat, id, "admin"));
	g = gen_get(id);
	cr_assert_eq(g.state, GEN_COMMITTED);
	cr_assert_str_eq(g.held, "");
	cr_assert_eq(times_reclaimed(70), 0);
	check_invariants();
}

/* fs/gen.h invariant 11: a crash-held save found with an object missing
 * keeps its state, rule and tree, its reason naming the chunk. */
Test(gen, held_reason_replaces_the_reason_of_a_held_generation_only, .init = setup,
     .fini = teardown)
{
	uint64_t series = mkdir_(ROOT, "run"), root;
	uint64_t id = mkgen(series, "step-5", 5, true, &root);
	put_file(root, "model.pt", 70, 2, 100);
	FAILS(cat_gen_held_reason(fx.cat, id, "chunk 46… of \"model.pt\" is missing"), EINVAL);
	cr_assert_eq(gen_get(id).state, GEN_OPEN, "an open one is not held by it");
	OK(cat_gen_hold(fx.cat, id, "crash", GEN_CRASH_REASON " (crash or kill)", NULL, NULL, NULL));
	FAILS(cat_gen_held_reason(fx.cat, id, ""), EINVAL);
	OK(cat_gen_held_reason(fx.cat, id, GEN_CRASH_REASON "; chunk 46… of \"model.pt\" is missing"));
	reopen_catalog(); /* it was made durable */
	struct cat_gen g = gen_get(id);
	cr_assert_eq(g.state, GEN_HELD);
	cr_assert_str_eq(g.rule, "crash");
	cr_assert_str_eq(g.held, GEN_CRASH_REASON "; chunk 46… of \"model.pt\" is missing");
	cr_assert_eq(g.root, root);
	cr_assert_eq(g.files, 1);
	cr_assert_eq(lookup(series, "step-5"), root);
	check_invariants();
	OK(cat_gen_commit(fx.cat, id, "admin"));
	FAILS(cat_gen_held_reason(fx.cat, id, "again"), EINVAL);
	cr_assert_str_eq(gen_get(id).held, "");
}

Test(gen, a_rewrite_of_a_held_generation_gives_it_back_held_when_it_ends_unproven,
     .init = setup, .fini = teardown)
{
	uint64_t series = mkdir_(ROOT, "run"), root;
	uint64_t id = mkgen(series, "step-5", 5, true, &root);
	put_file(root, "model.pt", 70, 1, 100);
	OK(cat_gen_hold(fx.cat, id, "crash", "open when the daemon stopped", NULL, NULL, NULL));
	/* a resumed job writes step-5 again: a new version over the held one */
	OK(cat_gen_reopen(fx.cat, id));
	struct cat_gen g = gen_get(id);
	cr_assert_eq(g.state, GEN_OPEN);
	cr_assert_eq(g.version, 2);
	cr_assert_str_eq(g.held, "open when the daemon stopped", "kept for a rollback");
	write_chunks(lookup(root, "model.pt"), 71, 1, 100);
	check_invariants();
	/* the rewrite is abandoned in turn: the held version 1 is back, held */
	bool held = true;
	OK(cat_gen_hold(fx.cat, id, "abandoned", "no writer", NULL, NULL, &held));
	cr_assert(!held, "rolled back, not held as version 2");
	g = gen_get(id);
	cr_assert_eq(g.state, GEN_HELD);
	cr_assert_eq(g.version, 1);
	cr_assert_str_eq(g.rule, "abandoned-restored");
	cr_assert_str_eq(g.held, "open when the daemon stopped");
	struct cat_gen kept; /* G10: version 2 kept beside it, held too */
	cr_assert_neq(kept_of(series, "step-5", &kept), 0);
	cr_assert_str_eq(kept.rule, "abandoned");
	cr_assert(strstr(kept.held, "version 2 of step-5, rolled back (no writer)") == kept.held,
		  "%s", kept.held);
	check_invariants();
	/* reopened again and committed: the decision is made, the reason goes */
	OK(cat_gen_reopen(fx.cat, id));
	OK(cat_gen_commit(fx.cat, id, "dcp-metadata"));
	g = gen_get(id);
	cr_assert_eq(g.state, GEN_COMMITTED);
	cr_assert_str_eq(g.held, "");
	check_invariants();
}

Test(gen, a_held_generation_is_deleted_by_rm_or_expired_by_keep, .init = setup, .fini = teardown)
{
	uint64_t series = mkdir_(ROOT, "run"), a, b;
	uint64_t ida = mkgen(series, "step-1", 1, true, &a);
	uint64_t idb = mkgen(series, "step-2", 2, true, &b);
	put_file(a, "x", 80, 1, 100);
	put_file(b, "y", 81, 1, 100);
	OK(cat_gen_hold(fx.cat, ida, "unmount", "empty", NULL, NULL, NULL));
	OK(cat_gen_hold(fx.cat, idb, "unmount", "empty", NULL, NULL, NULL));
	OK(cat_gen_expire(fx.cat, ida, 0, "keep-held", NULL, NULL));
	cr_assert_eq(gen_get(ida).state, GEN_DELETED);
	OK(cat_gen_pin(fx.cat, idb, true));
	FAILS(cat_gen_expire(fx.cat, idb, 0, "keep-held", NULL, NULL), EBUSY);
	OK(cat_gen_delete(fx.cat, idb, "admin", NULL, NULL));
	cr_assert_eq(gen_get(idb).state, GEN_DELETED);
	struct cat_inode in;
	FAILS(cat_lookup(fx.cat, series, "step-1", &in), ENOENT);
	FAILS(cat_lookup(fx.cat, series, "step-2", &in), ENOENT);
	reopen_catalog(); /* releases the unlinked inodes */
	cr_assert_eq(times_reclaimed(80), 1);
	cr_assert_eq(times_reclaimed(81), 1);
	check_invariants();
}

/* ---- file generations ---- */

Test(gen, a_file_is_a_generation_too, .init = setup, .fini = teardown)
{
	static struct inos removed;
	memset(&removed, 0, sizeof(removed));
	uint64_t series = mkdir_(ROOT, "lightning");
	uint64_t ino;
	uint64_t id = mkgen(series, "epoch=1-step=30.ckpt", 30, false, &ino);
	write_chunks(ino, 1, 3, 1000);
	OK(cat_gen_commit(fx.cat, id, "closed"));
	struct cat_gen g = gen_get(id);
	cr_assert_eq(g.root, ino);
	cr_assert_eq(g.files, 1);
	cr_assert_eq(g.logical_bytes, 3000);
	cr_assert_eq(g.exclusive_bytes, 3000);
	cr_assert_eq(gen_of(ino), id);

	struct cat_extent before[4], after[4];
	int n = cat_extents(fx.cat, ino, 0, before, 4);
	cr_assert_eq(n, 3);
	OK(cat_gen_reopen(fx.cat, id));
	g = gen_get(id);
	cr_assert_eq(attr(g.backup_root).nlink, 1);
	cr_assert_eq(g.files, 1);
	check_invariants();
	write_chunks(ino, 7, 1, 500); /* shutil.move's O_TRUNC rewrite */
	OK(cat_gen_abort(fx.cat, id, "abandoned", record_ino, &removed));
	cr_assert_eq(removed.n, 1);
	cr_assert_eq(removed.ino[0], ino);
	g = gen_get(id);
	uint64_t restored = lookup(series, "epoch=1-step=30.ckpt");
	cr_assert_eq(g.root, restored);
	cr_assert_eq(attr(restored).size, 3000);
	cr_assert_eq(cat_extents(fx.cat, restored, 0, after, 4), 3);
	cr_assert_eq(memcmp(before, after, sizeof(before[0]) * 3), 0);
	OK(cat_inode_release(fx.cat, ino));
	cr_assert_eq(times_reclaimed(7), 1);
	check_invariants();

	OK(cat_gen_delete(fx.cat, id, "keep", record_ino, &removed));
	cr_assert_eq(removed.n, 2);
	cr_assert_eq(removed.ino[1], restored);
	check_invariants();
}

/* ---- reference counts through every generation path ---- */

/* cat_check after one step (catalog invariant 1 among the rest), naming it. */
static void counts_hold(const char *after)
{
	int rc = cat_check(fx.cat);
	cr_assert_eq(rc, 0, "cat_check after %s returned %d", after, rc);
}
#define STEP(expr)                  \
	do {                        \
		OK(expr);           \
		counts_hold(#expr); \
	} while (0)

/* A writer's pending row of chunk seed at off, never committed. */
static void add_pending(uint64_t ino, uint64_t off, int seed)
{
	struct cat_extent e = { .off = off, .len = 100, .chunk_len = 100 };
	bool must = false;
	ts_hash(e.hash, HASH_FILL, seed);
	OK(cat_pending_add(fx.cat, ino, &e, &must));
	if (must)
		OK(cat_chunk_stored(fx.cat, e.hash, 1, 51));
	counts_hold("a pending add");
}

/* Releases what an abort, hold or delete unlinked (as the daemon does for
 * inodes the kernel does not hold), then empties the list. */
static void release(struct inos *l)
{
	STEP(cat_inodes_release(fx.cat, l->ino, (size_t)l->n));
	l->n = 0;
}

/* Commit, reopen (the backup copy takes references), commit and abort of a
 * new version (the backup dropped, or restored), hold and its rollback,
 * expire, delete with a backup and with a writer's pending rows, and the
 * crash recovery at open: each followed by cat_check, with the counts. */
Test(gen, every_generation_path_keeps_refcounts_equal_to_rows, .init = setup, .fini = teardown)
{
	static struct inos removed;
	memset(&removed, 0, sizeof(removed));
	bool held = false;
	uint64_t series = mkdir_(ROOT, "run");
	uint64_t r1, r2, r3;
	uint64_t id1 = mkgen(series, "step-1", 1, true, &r1);
	uint64_t a = mkfile(r1, "a.pt");
	write_chunks(a, 1, 3, 100);
	counts_hold("a write inside an OPEN generation");
	STEP(cat_gen_commit(fx.cat, id1, "trainer"));
	cr_assert_eq(refcount(1), 1);

	/* reopen: the backup's extents take references (R_X_TREE_TAKE) */
	STEP(cat_gen_reopen(fx.cat, id1));
	cr_assert_eq(refcount(1), 2);
	write_chunks(a, 4, 1, 100);
	counts_hold("a rewrite of the new version");
	add_pending(a, 100, 5);
	/* abort: the live tree is unlinked (its rows go at the release), the backup linked back */
	STEP(cat_gen_abort(fx.cat, id1, "crash", record_ino, &removed));
	cr_assert_eq(refcount(5), 1, "until the release");
	release(&removed);
	cr_assert_eq(refcount(5), -1);
	cr_assert_eq(refcount(4), -1);
	cr_assert_eq(refcount(1), 1);
	a = lookup(lookup(series, "step-1"), "a.pt");

	/* reopen then commit: the backup is dropped (R_X_TREE_DROP, R_P_TREE_DROP) */
	STEP(cat_gen_reopen(fx.cat, id1));
	write_chunks(a, 6, 2, 100);
	counts_hold("a rewrite of the new version");
	/* no writer reaches a backup's numbers; its pending rows are dropped all the same */
	add_pending(lookup(gen_get(id1).backup_root, "a.pt"), 300, 17);
	STEP(cat_gen_commit(fx.cat, id1, "trainer"));
	cr_assert_eq(refcount(2), -1, "only the backup named it");
	cr_assert_eq(refcount(17), -1);
	cr_assert_eq(refcount(6), 1);

	/* hold, promote; a new version held is rolled back to its backup */
	uint64_t id2 = mkgen(series, "step-2", 2, true, &r2);
	uint64_t b = mkfile(r2, "b.pt");
	write_chunks(b, 6, 2, 100);
	STEP(cat_gen_hold(fx.cat, id2, "unmount", "test", NULL, NULL, &held));
	cr_assert(held);
	STEP(cat_gen_commit(fx.cat, id2, "proven"));
	STEP(cat_gen_reopen(fx.cat, id2));
	cr_assert_eq(refcount(7), 3, "step-1, step-2 and its backup");
	write_chunks(b, 8, 1, 100);
	STEP(cat_gen_hold(fx.cat, id2, "unmount", "test", record_ino, &removed, &held));
	cr_assert(!held, "rolled back");
	release(&removed);
	/* G10: the new version is kept HELD beside it, until rm */
	uint64_t kept2 = kept_of(series, "step-2", NULL);
	cr_assert_neq(kept2, 0);
	cr_assert_eq(refcount(8), 1, "the kept version names it");
	cr_assert_eq(refcount(7), 2, "step-1 and step-2 (the kept b.pt is chunk 8 alone)");
	STEP(cat_gen_delete(fx.cat, kept2, "admin", record_ino, &removed));
	release(&removed);
	cr_assert_eq(refcount(8), -1);
	cr_assert_eq(refcount(7), 2);

	/* expire (keep-latest-k) */
	STEP(cat_gen_expire(fx.cat, id2, 0, "keep", record_ino, &removed));
	release(&removed);
	cr_assert_eq(refcount(7), 1);

	/* delete of a new version (its backup too), and of an OPEN one with a writer */
	STEP(cat_gen_reopen(fx.cat, id1));
	STEP(cat_gen_delete(fx.cat, id1, "trainer", record_ino, &removed));
	release(&removed);
	cr_assert_eq(refcount(6), -1);
	cr_assert_eq(refcount(7), -1);
	uint64_t id3 = mkgen(series, "step-3", 3, true, &r3);
	uint64_t c = mkfile(r3, "c.pt");
	write_chunks(c, 9, 2, 100);
	add_pending(c, 200, 11);
	STEP(cat_gen_delete(fx.cat, id3, "trainer", record_ino, &removed));
	release(&removed);
	cr_assert_eq(refcount(9), -1);
	cr_assert_eq(refcount(11), -1);

	/* crash recovery (G4): a reopened generation rolls back, an OPEN first
	 * version is held with its files; every pending row is dropped */
	uint64_t id4 = mkgen(series, "step-4", 4, true, &r1);
	write_chunks(mkfile(r1, "d.pt"), 12, 2, 100);
	STEP(cat_gen_commit(fx.cat, id4, "trainer"));
	STEP(cat_gen_reopen(fx.cat, id4));
	write_chunks(lookup(r1, "d.pt"), 14, 1, 100);
	uint64_t r5;
	mkgen(series, "step-5", 5, true, &r5);
	write_chunks(mkfile(r5, "e.pt"), 15, 1, 100);
	add_pending(lookup(r5, "e.pt"), 100, 16);
	reopen_catalog();
	counts_hold("the crash recovery at open");
	cr_assert_eq(refcount(12), 1);
	cr_assert_eq(refcount(14), 1, "G10: the rolled-back version kept");
	cr_assert_eq(refcount(15), 1, "held, kept");
	STEP(cat_gen_delete(fx.cat, kept_of(series, "step-4", NULL), "admin", record_ino, &removed));
	release(&removed);
	cr_assert_eq(refcount(14), -1);
	cr_assert_eq(refcount(16), -1);
	check_invariants();
}

/* ---- checks ---- */

Test(gen, check_reports_broken_generations, .init = setup, .fini = teardown)
{
	uint64_t series = mkdir_(ROOT, "run");
	uint64_t root;
	uint64_t id = mkgen(series, "step-1", 1, true, &root);
	uint64_t f = mkfile(root, "f");
	OK(cat_gen_check(fx.cat));
	cat_close(fx.cat);
	fx.cat = NULL;
	char sql[256];
	snprintf(sql, sizeof(sql), "UPDATE inodes SET gen = NULL WHERE ino = %llu;"
		 "UPDATE generations SET state = 1 WHERE id = %llu;", (unsigned long long)f,
		 (unsigned long long)id);
	write_sql(fx.path, sql);
	open_catalog();
	FAILS(cat_gen_check(fx.cat), EUCLEAN);
	FAILS(cat_check(fx.cat), EUCLEAN);
	cat_close(fx.cat);
	fx.cat = NULL;
	snprintf(sql, sizeof(sql), "UPDATE inodes SET gen = %llu WHERE ino = %llu;"
		 "UPDATE generations SET backup_root = %llu WHERE id = %llu;", (unsigned long long)id,
		 (unsigned long long)f, (unsigned long long)f, (unsigned long long)id);
	write_sql(fx.path, sql);
	open_catalog();
	FAILS(cat_gen_check(fx.cat), EUCLEAN); /* a backup on a committed one, and linked */
	cat_close(fx.cat);
	fx.cat = NULL;
	write_sql(fx.path, "UPDATE generations SET backup_root = 0;");
	open_catalog();
	OK(cat_gen_check(fx.cat));
	check_invariants();
}

/* ---- migration ---- */

/* The version-1 schema, as ckptfs wrote it before generations. */
static const char v1_schema[] =
	"CREATE TABLE meta(key TEXT PRIMARY KEY, value);"
	"CREATE TABLE inodes(ino INTEGER PRIMARY KEY AUTOINCREMENT, mode INTEGER NOT NULL,"
	" uid INTEGER NOT NULL, gid INTEGER NOT NULL, nlink INTEGER NOT NULL,"
	" size INTEGER NOT NULL DEFAULT 0, rdev INTEGER NOT NULL DEFAULT 0,"
	" atime_ns INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, ctime_ns INTEGER NOT NULL,"
	" target TEXT);"
	"CREATE TABLE dirents(id INTEGER PRIMARY KEY AUTOINCREMENT, parent INTEGER NOT NULL,"
	" name TEXT NOT NULL, ino INTEGER NOT NULL, UNIQUE(parent, name));"
	"CREATE INDEX dirents_by_parent ON dirents(parent, id);"
	"CREATE INDEX dirents_by_ino ON dirents(ino);"
	"CREATE TABLE chunks(hash BLOB PRIMARY KEY, plain_len INTEGER NOT NULL,"
	" codec INTEGER NOT NULL DEFAULT 0, stored_len INTEGER, refcount INTEGER NOT NULL)"
	" WITHOUT ROWID;"
	"CREATE INDEX chunks_unreferenced ON chunks(hash) WHERE refcount = 0;"
	"CREATE TABLE extents(ino INTEGER NOT NULL, off INTEGER NOT NULL, len INTEGER NOT NULL,"
	" hash BLOB NOT NULL, chunk_off INTEGER NOT NULL, PRIMARY KEY(ino, off)) WITHOUT ROWID;"
	"CREATE TABLE pending(ino INTEGER NOT NULL, off INTEGER NOT NULL, len INTEGER NOT NULL,"
	" hash BLOB NOT NULL, chunk_off INTEGER NOT NULL, PRIMARY KEY(ino, off)) WITHOUT ROWID;"
	"PRAGMA application_id=1667985524;PRAGMA user_version=1;"
	"INSERT INTO meta VALUES('schema_version', 1), ('created_ns', 1), ('application', 'ckptfs');"
	"INSERT INTO inodes VALUES(1, 16877, 0, 0, 3, 0, 0, 1, 1, 1, NULL);"
	"INSERT INTO inodes VALUES(2, 16877, 1000, 1000, 2, 0, 0, 1, 1, 1, NULL);"
	"INSERT INTO inodes VALUES(3, 33188, 1000, 1000, 1, 300, 0, 1, 1, 1, NULL);"
	"INSERT INTO dirents(parent, name, ino) VALUES(1, 'run', 2), (2, 'model.pt', 3);"
	"INSERT INTO chunks VALUES(x'01a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5',"
	" 200, 1, 101, 1);"
	"INSERT INTO chunks VALUES(x'02a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5',"
	" 100, 1, 51, 1);"
	"INSERT INTO extents VALUES(3, 0, 200,"
	" x'01a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5', 0);"
	"INSERT INTO extents VALUES(3, 200, 100,"
	" x'02a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5', 0);";

static int64_t read_int(const char *path, const char *sql)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK, "%s", sql);
	cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
	int64_t v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return v;
}

/* generation.h G7 (review A F1): after a crash, a save with a file whose
 * last close the catalog does not record — marked by its create or by a
 * writer's start, cleared only by the release of its last handle — is held
 * with a reason of its own (naming the file), which fs/gen.c's content rule
 * never re-judges; a save whose files were all released keeps the crash
 * reason, for the content rule. No mark outlives the recovery. */
Test(gen, crash_holds_a_save_with_a_file_being_written_for_a_decision, .init = setup,
     .fini = teardown)
{
	uint64_t series = mkdir_(ROOT, "run");
	uint64_t r1, r2, r3, r4;
	uint64_t created = mkgen(series, "step-1", 1, true, &r1);
	put_file(r1, "a.pt", 10, 1, 100);
	uint64_t cfg = mkfile_unclosed(r1, "b.cfg"); /* created, its close never recorded */
	write_chunks(cfg, 11, 1, 100);
	uint64_t settled = mkgen(series, "step-2", 2, true, &r2);
	put_file(r2, "a.pt", 20, 1, 100);
	put_file(r2, "b.cfg", 21, 1, 100);
	uint64_t rewritten = mkgen(series, "step-3", 3, true, &r3);
	uint64_t again = put_file(r3, "c.json", 30, 1, 100);
	OK(cat_pending_from_committed(fx.cat, again)); /* a writer starts again */
	uint64_t single = mkgen_as(series, "step-4.pt", 4, false, false, &r4); /* a single file */
	uint64_t r5;
	uint64_t cut = mkgen(series, "step-5", 5, true, &r5);
	uint64_t json = put_file(r5, "d.json", 50, 1, 100);
	OK(cat_file_truncate(fx.cat, json, 0)); /* an O_TRUNC open, no writer yet */

	reopen_catalog();
	struct cat_gen g = gen_get(created);
	cr_assert_eq(g.state, GEN_HELD);
	cr_assert_str_eq(g.rule, "crash");
	cr_assert(strncmp(g.held, GEN_UNCLOSED_REASON, strlen(GEN_UNCLOSED_REASON)) == 0, "%s", g.held);
	cr_assert(strstr(g.held, "\"b.cfg\"") != NULL, "the file is named: %s", g.held);
	cr_assert(strncmp(g.held, GEN_CRASH_REASON, strlen(GEN_CRASH_REASON)) != 0);
	g = gen_get(rewritten);
	cr_assert(strncmp(g.held, GEN_UNCLOSED_REASON, strlen(GEN_UNCLOSED_REASON)) == 0, "%s", g.held);
	cr_assert(strstr(g.held, "\"c.json\"") != NULL, "%s", g.held);
	g = gen_get(single);
	cr_assert(strncmp(g.held, GEN_UNCLOSED_REASON, strlen(GEN_UNCLOSED_REASON)) == 0, "%s", g.held);
	g = gen_get(cut);
	cr_assert(strstr(g.held, "\"d.json\"") != NULL, "%s", g.held);
	g = gen_get(settled);
	cr_assert_eq(g.state, GEN_HELD);
	cr_assert(strncmp(g.held, GEN_CRASH_REASON, strlen(GEN_CRASH_REASON)) == 0, "%s", g.held);
	cr_assert_eq(attr(cfg).size, 100, "its bytes kept as the catalog had them");
	OK(cat_check(fx.cat));
	cr_assert_eq(read_int(fx.path, "SELECT count(*) FROM inodes WHERE writing != 0"), 0,
		     "no mark outlives the recovery");

	/* an explicit decision still commits it */
	OK(cat_gen_commit(fx.cat, created, "explicit"));
	cr_assert_eq(gen_get(created).state, GEN_COMMITTED);
}

Test(gen, migrates_a_version_1_catalog, .init = setup, .fini = teardown)
{
	struct cat *ro = NULL;
	char path[192];
	snprintf(path, sizeof(path), "%s/v1.db", fx.dir);
	write_sql(path, v1_schema);

	/* Read-only cannot migrate, and leaves the file alone. */
	FAILS(cat_open_readonly(path, &ro), EPROTO);
	cr_assert_null(ro);
	cr_assert_eq(read_int(path, "PRAGMA user_version"), 1);

	struct cat *cat = NULL;
	OK(cat_open(path, 0, 0, NULL, NULL, &cat));
	cr_assert_eq(cat_schema_version(cat), 7);
	cr_assert_eq(CAT_SCHEMA_VERSION, 7);
	struct cat_inode in;
	OK(cat_lookup(cat, 2, "model.pt", &in));
	cr_assert_eq(in.ino, 3);
	cr_assert_eq(in.size, 300);
	cr_assert_eq(in.uid, 1000);
	struct cat_extent e[4];
	cr_assert_eq(cat_extents(cat, 3, 0, e, 4), 2);
	cr_assert_eq(e[1].off, 200);
	cr_assert_eq(e[1].chunk_len, 100);
	uint64_t gen = 1;
	OK(cat_gen_of(cat, 3, &gen));
	cr_assert_eq(gen, 0);
	OK(cat_check(cat));

	/* Generations work in the migrated file, numbers going on from v1's. */
	struct cat_gen_spec spec = { .name = "step-1", .step = 1 };
	uint64_t id;
	OK(cat_create_in_gen(cat, 2, "step-1", S_IFDIR | 0755, 0, 0, 0, NULL, &spec, &in, &id));
	cr_assert_eq(in.ino, 4);
	OK(cat_gen_commit(cat, id, "test"));
	OK(cat_check(cat));
	cat_close(cat);

	cr_assert_eq(read_int(path, "PRAGMA user_version"), 7);
	cr_assert_eq(read_int(path, "SELECT value FROM meta WHERE key = 'schema_version'"), 7);
	/* version 7: the chunks of a migrated catalog are loose objects */
	cr_assert_eq(read_int(path, "SELECT COUNT(*) FROM chunks WHERE pack IS NOT NULL"), 0);
	cr_assert_eq(read_int(path, "SELECT COUNT(*) FROM packs"), 0);
	/* version 4: a migrated catalog gets its random id */
	cr_assert_eq(read_int(path, "SELECT length(value) FROM meta WHERE key = 'catalog_id'"), 32);
	/* v1/v2 objects were written straight to BACKING: uploaded, not cached;
	 * the committed generation waits for its manifest. */
	cr_assert_eq(read_int(path, "SELECT COUNT(*) FROM chunks WHERE cached = 0 AND uploaded = 1"),
		     read_int(path, "SELECT COUNT(*) FROM chunks"));
	cr_assert_eq(read_int(path, "SELECT COUNT(*) FROM uploads WHERE kind = 2"), 1);
	cr_assert_eq(read_int(path, "SELECT COUNT(*) FROM sqlite_master WHERE name IN"
				    " ('inodes_by_gen', 'generations_by_series', 'generations_by_root')"),
		     3);

	/* Opening again migrates nothing; read-only works now. */
	OK(cat_open(path, 0, 0, NULL, NULL, &cat));
	cr_assert_eq(cat_schema_version(cat), 7);
	cat_close(cat);
	OK(cat_open_readonly(path, &ro));
	struct cat_gen g;
	OK(cat_gen_get(ro, id, &g));
	cr_assert_eq(g.state, GEN_COMMITTED);
	OK(cat_check(ro));
	cat_close(ro);
	check_invariants();
}

/* ---- scale (CKPTFS_TEST_BENCH=1) ---- */

static double seconds_since(const struct timespec *t0)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

static int count_fn(void *arg, const struct cat_gen *g)
{
	(*(int *)arg)++;
	return 0;
}

/* setup() only once the test runs: a skipped test does not get its .fini. */
Test(gen_bench, list_200_generations_of_1000_files, .fini = teardown, .timeout = 120)
{
	if (getenv("CKPTFS_TEST_BENCH") == NULL)
		cr_skip_test("set CKPTFS_TEST_BENCH=1 to run");
	setup();
	enum { GENS = 200, FILES = 1000, CHUNKS = 4 };
	uint64_t series = mkdir_(ROOT, "run");
	cat_close(fx.cat);
	fx.cat = NULL;
	/* Built with SQL in one transaction: the shape of what the daemon makes.
	 * Each file has 4 chunks: 3 of its own, 1 shared by the same file of
	 * every generation (a tensor that never changes). */
	char *sql = sqlite3_mprintf(
		"BEGIN;"
		"INSERT INTO generations(id, series, root, name, step, state, version, created_ns)"
		" WITH RECURSIVE n(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM n WHERE g < %d)"
		" SELECT g, %llu, 0, 'step-' || g, g, 1, 1, 1 FROM n;"
		"INSERT INTO inodes(mode, uid, gid, nlink, size, atime_ns, mtime_ns, ctime_ns, gen)"
		" SELECT %d, 0, 0, 2, 0, 1, 1, 1, id FROM generations;"
		"UPDATE generations SET root = (SELECT ino FROM inodes WHERE gen = generations.id);"
		"INSERT INTO dirents(parent, name, ino) SELECT series, name, root FROM generations;"
		"UPDATE inodes SET nlink = 2 + %d WHERE ino = %llu;"
		"INSERT INTO inodes(mode, uid, gid, nlink, size, atime_ns, mtime_ns, ctime_ns, gen)"
		" WITH RECURSIVE f(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM f WHERE i < %d - 1)"
		" SELECT %d, 0, 0, 1, %d * 1048576, 1, 1, 1, g.id FROM generations g, f"
		" ORDER BY g.id, f.i;"
		"INSERT INTO dirents(parent, name, ino) SELECT g.root, 'f' || i.ino, i.ino"
		" FROM inodes i JOIN generations g ON g.id = i.gen WHERE i.ino != g.root;"
		"INSERT INTO extents(ino, off, len, hash, chunk_off)"
		" WITH RECURSIVE c(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM c WHERE k < %d - 1)"
		" SELECT i.ino, c.k * 1048576, 1048576, CASE WHEN c.k = 0 THEN CAST(printf('%%032d',"
		" (i.ino - (SELECT MIN(ino) FROM inodes WHERE mode = %d)) %% %d) AS BLOB)"
		" ELSE randomblob(32) END, 0 FROM inodes i, c WHERE i.mode = %d;"
		"INSERT INTO chunks(hash, plain_len, codec, stored_len, refcount)"
		" SELECT hash, 1048576, 1, 1048576, COUNT(*) FROM extents GROUP BY hash;"
		"COMMIT;",
		GENS, (unsigned long long)series, S_IFDIR | 0755, GENS, (unsigned long long)series,
		FILES, S_IFREG | 0644, CHUNKS, CHUNKS, S_IFREG | 0644, FILES, S_IFREG | 0644);
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	write_sql(fx.path, sql);
	sqlite3_free(sql);
	fprintf(stderr, "gen_bench: built %d generations x %d files x %d chunks in %.2f s\n", GENS,
		FILES, CHUNKS, seconds_since(&t0));
	open_catalog();

	clock_gettime(CLOCK_MONOTONIC, &t0);
	check_invariants();
	fprintf(stderr, "gen_bench: cat_check %.3f s\n", seconds_since(&t0));

	double best = 1e9;
	for (int run = 0; run < 3; run++) {
		int n = 0;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		OK(cat_gen_list(fx.cat, series, false, count_fn, &n));
		double t = seconds_since(&t0);
		best = t < best ? t : best;
		cr_assert_eq(n, GENS);
	}
	fprintf(stderr, "gen_bench: cat_gen_list of %d generations: %.3f s\n", GENS, best);
	best = 1e9;
	for (int run = 0; run < 3; run++) {
		int n = 0;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		OK(cat_gen_list_brief(fx.cat, series, false, count_fn, &n));
		double t = seconds_since(&t0);
		best = t < best ? t : best;
		cr_assert_eq(n, GENS);
	}
	fprintf(stderr, "gen_bench: cat_gen_list_brief of %d generations: %.3f s\n", GENS, best);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int id = 1; id <= 20; id++) {
		struct cat_gen g;
		OK(cat_gen_get_brief(fx.cat, (uint64_t)id, &g));
		cr_assert_eq(g.files, FILES);
	}
	fprintf(stderr, "gen_bench: cat_gen_get_brief: %.4f s each\n", seconds_since(&t0) / 20);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int id = 1; id <= 20; id++) {
		struct cat_gen g = gen_get((uint64_t)id);
		cr_assert_eq(g.files, FILES);
		cr_assert_eq(g.logical_bytes, (uint64_t)FILES * CHUNKS * 1048576);
		cr_assert_eq(g.exclusive_bytes, (uint64_t)FILES * (CHUNKS - 1) * 1048576);
	}
	fprintf(stderr, "gen_bench: cat_gen_get: %.4f s each\n", seconds_since(&t0) / 20);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	OK(cat_gen_reopen(fx.cat, 7));
	fprintf(stderr, "gen_bench: cat_gen_reopen of %d files: %.3f s\n", FILES,
		seconds_since(&t0));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	OK(cat_gen_abort(fx.cat, 7, "abandoned", NULL, NULL));
	fprintf(stderr, "gen_bench: cat_gen_abort with restore: %.3f s\n", seconds_since(&t0));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	OK(cat_gen_delete(fx.cat, 8, "keep", NULL, NULL));
	fprintf(stderr, "gen_bench: cat_gen_delete: %.3f s\n", seconds_since(&t0));
	check_invariants();
}

/* A committed save of series under a root owned by uid. */
static uint64_t committed_save_of(uint64_t series, const char *name, uint64_t step, uint32_t uid)
{
	uint64_t root;
	uint64_t id = mkgen(series, name, step, true, &root);
	put_file(root, "w.pt", (int)step * 3 + 200, 1, 100);
	struct cat_inode owner = { .uid = uid };
	OK(cat_setattr(fx.cat, root, CAT_SET_UID, &owner, NULL));
	OK(cat_gen_commit(fx.cat, id, "test"));
	return id;
}

/* generation.h G6: keep-latest-k lists, then expires; a newer save removed
 * (or rolled back) in between must keep the old one, and another owner's
 * newer save never counts for it. */
Test(gen, expire_from_a_stale_listing_keeps_a_save_whose_newer_ones_are_gone, .init = setup,
     .fini = teardown)
{
	uint64_t series = mkdir_(ROOT, "run");
	uint64_t id1 = committed_save_of(series, "step-1", 1, 1000);
	uint64_t id2 = committed_save_of(series, "step-2", 2, 1000);
	uint64_t id3 = committed_save_of(series, "step-3", 3, 1000);
	/* keep 2: the listing chose step-1; then step-3 goes (an admin's rm) */
	OK(cat_gen_delete(fx.cat, id3, "admin", NULL, NULL));
	FAILS(cat_gen_expire(fx.cat, id1, 2, "keep", NULL, NULL), EBUSY);
	cr_assert_eq(gen_get(id1).state, GEN_COMMITTED);
	/* another user's newer save is no save of step-1's owner (gen.h 6) */
	committed_save_of(series, "step-4", 4, 2000);
	FAILS(cat_gen_expire(fx.cat, id1, 2, "keep", NULL, NULL), EBUSY);
	/* a newer one reopened (a rewrite) is not complete either */
	uint64_t id5 = committed_save_of(series, "step-5", 5, 1000);
	OK(cat_gen_reopen(fx.cat, id5));
	FAILS(cat_gen_expire(fx.cat, id1, 2, "keep", NULL, NULL), EBUSY);
	cr_assert_eq(lookup(series, "step-1"), gen_get(id1).root);
	OK(cat_gen_commit(fx.cat, id5, "test"));
	OK(cat_gen_expire(fx.cat, id1, 2, "keep", NULL, NULL));
	cr_assert_eq(gen_get(id1).state, GEN_DELETED);
	/* a held one: steps 2 and 5 of uid 1000 are newer, two and no more */
	uint64_t root0;
	uint64_t id0 = mkgen(series, "step-0", 0, true, &root0);
	put_file(root0, "w.pt", 199, 1, 100);
	OK(cat_gen_hold(fx.cat, id0, "unmount", "empty", NULL, NULL, NULL));
	FAILS(cat_gen_expire(fx.cat, id0, 3, "keep-held", NULL, NULL), EBUSY);
	cr_assert_eq(gen_get(id2).state, GEN_COMMITTED);
	OK(cat_gen_expire(fx.cat, id0, 2, "keep-held", NULL, NULL));
	cr_assert_eq(gen_get(id0).state, GEN_DELETED);
	check_invariants();
}

/* A committed save of series under a root owned by uid 1000, by rule. */
static uint64_t committed_save_by(uint64_t series, const char *name, uint64_t step,
				  const char *rule)
{
	uint64_t root;
	uint64_t id = mkgen(series, name, step, true, &root);
	put_file(root, "w.pt", (int)step * 3 + 200, 1, 100);
	struct cat_inode owner = { .uid = 1000 };
	OK(cat_setattr(fx.cat, root, CAT_SET_UID, &owner, NULL));
	OK(cat_gen_commit(fx.cat, id, rule));
	return id;
}

/* generation.h G6 (review 42 F1): a newer save committed by a weak rule
 * without proof (unmount, next-gen) never makes an older one go; it goes
 * itself once `keep` strongly committed newer ones exist. */
Test(gen, expire_never_counts_a_weak_commit_among_the_newer_saves, .init = setup,
     .fini = teardown)
{
	uint64_t series = mkdir_(ROOT, "run");
	uint64_t id1 = committed_save_by(series, "step-1", 1, "marker");
	uint64_t id2 = committed_save_by(series, "step-2", 2, "unmount");
	uint64_t id3 = committed_save_by(series, "step-3", 3, "next-gen");
	FAILS(cat_gen_expire(fx.cat, id1, 1, "keep", NULL, NULL), EBUSY);
	cr_assert_eq(gen_get(id1).state, GEN_COMMITTED);
	FAILS(cat_gen_expire(fx.cat, id2, 1, "keep", NULL, NULL), EBUSY);
	/* a save proven by its content counts */
	uint64_t id4 = committed_save_by(series, "step-4", 4, "content");
	OK(cat_gen_expire(fx.cat, id1, 1, "keep", NULL, NULL));
	OK(cat_gen_expire(fx.cat, id2, 1, "keep", NULL, NULL));
	OK(cat_gen_expire(fx.cat, id3, 1, "keep", NULL, NULL));
	cr_assert_eq(gen_get(id1).state, GEN_DELETED);
	cr_assert_eq(gen_get(id2).state, GEN_DELETED);
	cr_assert_eq(gen_get(id3).state, GEN_DELETED);
	cr_assert_eq(gen_get(id4).state, GEN_COMMITTED);
	check_invariants();
}

/* generation.h G6 (review 42 F3): the owner's most recently committed save
 * is never expired, whatever its step; the next commit lets it go. */
Test(gen, expire_keeps_the_owners_most_recent_commit, .init = setup, .fini = teardown)
{
	uint64_t series = mkdir_(ROOT, "run");
	committed_save_by(series, "step-100", 100, "marker");
	committed_save_by(series, "step-200", 200, "marker");
	uint64_t id150 = committed_save_by(series, "step-150", 150, "marker");
	FAILS(cat_gen_expire(fx.cat, id150, 1, "keep", NULL, NULL), EBUSY);
	cr_assert_eq(gen_get(id150).state, GEN_COMMITTED);
	/* another owner's later commit does not make it go */
	committed_save_of(series, "step-1", 1, 2000);
	FAILS(cat_gen_expire(fx.cat, id150, 1, "keep", NULL, NULL), EBUSY);
	committed_save_by(series, "step-160", 160, "marker");
	OK(cat_gen_expire(fx.cat, id150, 1, "keep", NULL, NULL));
	cr_assert_eq(gen_get(id150).state, GEN_DELETED);
	check_invariants();
}

/* The uploader's word that generation id's manifest, at its current
 * version, is on BACKING (upload.h U3): its queued manifest row done. */
static void make_durable(uint64_t id)
{
	uint32_t version = gen_get(id).version;
	struct cat_upload rows[64];
	int n = cat_upload_list(fx.cat, 0, rows, 64);
	cr_assert_geq(n, 0);
	bool found = false;
	for (int i = 0; i < n && !found; i++)
		if (rows[i].kind == UP_GEN_MANIFEST && rows[i].gen == id &&
		    rows[i].version == version) {
			OK(cat_upload_done(fx.cat, &rows[i]));
			found = true;
		}
	cr_assert(found, "generation %llu version %u has a manifest row",
		  (unsigned long long)id, version);
	bool durable = false;
	OK(cat_gen_durable(fx.cat, id, &durable));
	cr_assert(durable);
}

/* generation.h G6, its durable part: keep 1 listed step-20 as durable and
 * chose step-10, the owner's only other durable save; step-20 is not (yet)
 * on BACKING, or a rewrite made it v2, not durable, before the expire. The
 * expire keeps step-10 in its transaction; once step-20 is durable it goes.
 * A save that is not durable goes as before, and another owner's durable
 * save never counts for it. */
Test(gen, expire_keeps_the_owners_newest_durable_save_until_a_newer_one_is_durable,
     .init = setup, .fini = teardown)
{
	uint64_t series = mkdir_(ROOT, "run");
	uint64_t id5 = committed_save_of(series, "step-5", 5, 1000);
	uint64_t id10 = committed_save_of(series, "step-10", 10, 1000);
	make_durable(id10);
	uint64_t id20 = committed_save_of(series, "step-20", 20, 1000);
	FAILS(cat_gen_expire(fx.cat, id10, 1, "keep", NULL, NULL), EBUSY);
	cr_assert_eq(gen_get(id10).state, GEN_COMMITTED);
	/* step-5 is not durable: two newer saves, it goes */
	OK(cat_gen_expire(fx.cat, id5, 1, "keep", NULL, NULL));
	cr_assert_eq(gen_get(id5).state, GEN_DELETED);
	/* another owner's newer durable save is no durable save of uid 1000 */
	uint64_t id30 = committed_save_of(series, "step-30", 30, 2000);
	make_durable(id30);
	FAILS(cat_gen_expire(fx.cat, id10, 1, "keep", NULL, NULL), EBUSY);
	/* step-20 durable (v1), then rewritten: v2 is not durable */
	make_durable(id20);
	OK(cat_gen_reopen(fx.cat, id20));
	FAILS(cat_gen_expire(fx.cat, id10, 1, "keep", NULL, NULL), EBUSY);
	uint64_t ino = mkfile(gen_get(id20).root, "late.pt");
	write_chunks(ino, 777, 1, 100);
	OK(cat_file_unmark(fx.cat, ino));
	OK(cat_gen_commit(fx.cat, id20, "test"));
	cr_assert_eq(gen_get(id20).version, 2);
	bool durable = true;
	OK(cat_gen_durable(fx.cat, id20, &durable));
	cr_assert_not(durable, "the rewrite's v2 is not on BACKING yet");
	FAILS(cat_gen_expire(fx.cat, id10, 1, "keep", NULL, NULL), EBUSY);
	cr_assert_eq(gen_get(id10).state, GEN_COMMITTED);
	cr_assert_eq(lookup(series, "step-10"), gen_get(id10).root);
	/* v2 on BACKING: the next pass (gen.h: a save becoming durable) deletes it */
	make_durable(id20);
	OK(cat_gen_expire(fx.cat, id10, 1, "keep", NULL, NULL));
	cr_assert_eq(gen_get(id10).state, GEN_DELETED);
	check_invariants();
}

/* generation.h G6 (review 42, a suspicion): a HELD save whose manifest is on
 * BACKING (a rebuild's conflict: manifest.c mf_gen_insert_held sets
 * durable_version = version) is durable: keep-held ends it only once one
 * of the newer saves of its owner is durable too, as a committed one. A
 * HELD one not on BACKING goes by step alone, as before. */
Test(gen, expire_keeps_a_durable_held_save_until_a_newer_one_is_durable, .init = setup,
     .fini = teardown)
{
	uint64_t series = mkdir_(ROOT, "run");
	uint64_t root0, root1;
	uint64_t id0 = mkgen(series, "step-0", 0, true, &root0);
	put_file(root0, "w.pt", 301, 1, 100);
	OK(cat_gen_hold(fx.cat, id0, "unmount", "empty", NULL, NULL, NULL));
	uint64_t id1 = mkgen(series, "step-1", 1, true, &root1);
	put_file(root1, "w.pt", 302, 1, 100);
	OK(cat_gen_hold(fx.cat, id1, "rebuild", "rebuild: conflicts", NULL, NULL, NULL));
	char sql[128];
	snprintf(sql, sizeof(sql), "UPDATE generations SET durable_version = version WHERE id = %llu",
		 (unsigned long long)id1);
	OK(cat_defer_commit(fx.cat)); /* the holds above may be deferred (catalog_defer.c) */
	write_sql(fx.path, sql);
	uint64_t id2 = committed_save_of(series, "step-2", 2, 1000);
	uint64_t id3 = committed_save_of(series, "step-3", 3, 1000);
	struct cat_inode owner = { .uid = 1000 };
	OK(cat_setattr(fx.cat, root0, CAT_SET_UID, &owner, NULL));
	OK(cat_setattr(fx.cat, root1, CAT_SET_UID, &owner, NULL));
	FAILS(cat_gen_expire(fx.cat, id1, 1, "keep-held", NULL, NULL), EBUSY);
	cr_assert_eq(gen_get(id1).state, GEN_HELD);
	OK(cat_gen_expire(fx.cat, id0, 1, "keep-held", NULL, NULL)); /* not durable */
	make_durable(id3);
	OK(cat_gen_expire(fx.cat, id1, 1, "keep-held", NULL, NULL));
	cr_assert_eq(gen_get(id1).state, GEN_DELETED);
	cr_assert_eq(gen_get(id2).state, GEN_COMMITTED);
	check_invariants();
}

/* G9 (review 38 F1): a file whose last close failed keeps its mark; every
 * rule but an explicit decision is refused, nothing changed, and
 * cat_gen_unsettled names the file; a retried close that succeeds clears
 * the mark, and so does an explicit commit of the save as it is. */
Test(gen, a_save_with_a_failed_close_is_committed_by_an_explicit_decision_only, .init = setup,
     .fini = teardown)
{
	uint64_t series = mkdir_(ROOT, "run");
	uint64_t root;
	uint64_t id = mkgen(series, "step-100", 100, true, &root);
	put_file(root, "rank0.pt", 1, 1, 100);
	uint64_t bad = mkfile_unclosed(root, "rank1.pt"); /* its last close failed */
	write_chunks(bad, 2, 1, 100);
	static const char *const rules[] = { "marker", "dcp-metadata", "tracker", "next-gen",
					     "content", "unmount", NULL };
	for (int i = 0; rules[i]; i++)
		FAILS(cat_gen_commit(fx.cat, id, rules[i]), ENOTRECOVERABLE);
	struct cat_gen g = gen_get(id);
	cr_assert_eq(g.state, GEN_OPEN, "nothing changed");
	char why[GEN_HELD_MAX];
	OK(cat_gen_unsettled(fx.cat, id, why, sizeof(why)));
	cr_assert(strncmp(why, GEN_FAILED_REASON, strlen(GEN_FAILED_REASON)) == 0, "%s", why);
	cr_assert(strstr(why, "\"rank1.pt\"") != NULL, "the file is named: %s", why);
	/* held for it, a marker still does not commit it */
	OK(cat_gen_hold(fx.cat, id, "marker", why, NULL, NULL, NULL));
	FAILS(cat_gen_commit(fx.cat, id, "marker"), ENOTRECOVERABLE);
	cr_assert_eq(gen_get(id).state, GEN_HELD);
	OK(cat_gen_commit(fx.cat, id, "admin"));
	cr_assert_eq(gen_get(id).state, GEN_COMMITTED);
	cr_assert_eq(read_int(fx.path, "SELECT count(*) FROM inodes WHERE writing != 0"), 0,
		     "the explicit commit takes the save as it is");

	/* a retried close that succeeds clears the mark: a rule commits */
	uint64_t r2;
	uint64_t id2 = mkgen(series, "step-200", 200, true, &r2);
	uint64_t again = mkfile_unclosed(r2, "rank1.pt");
	write_chunks(again, 3, 1, 100);
	FAILS(cat_gen_commit(fx.cat, id2, "marker"), ENOTRECOVERABLE);
	OK(cat_file_unmark(fx.cat, again));
	OK(cat_gen_unsettled(fx.cat, id2, why, sizeof(why)));
	cr_assert_str_eq(why, "");
	OK(cat_gen_commit(fx.cat, id2, "marker"));
	check_invariants();
}

/* G12 (review 47 F3): a chunk lost before its upload holds every COMMITTED
 * save naming it, with a reason naming the chunk and a file; an OPEN one and
 * one not naming it stay as they are; a second call holds nothing more. */
Test(gen, a_chunk_lost_before_its_upload_holds_the_committed_saves_naming_it, .init = setup,
     .fini = teardown)
{
	uint64_t series = mkdir_(ROOT, "run"), r1, r2, r3;
	uint64_t a = mkgen(series, "step-1", 1, true, &r1);
	put_file(r1, "model.pt", 10, 2, 100);
	OK(cat_gen_commit(fx.cat, a, "explicit"));
	uint64_t b = mkgen(series, "step-2", 2, true, &r2);
	put_file(r2, "model.pt", 20, 2, 100);
	OK(cat_gen_commit(fx.cat, b, "explicit"));
	uint64_t c = mkgen(series, "step-3", 3, true, &r3);
	put_file(r3, "optim.pt", 20, 1, 100); /* names the same chunk, still open */
	uint8_t h[CAT_HASH_LEN];
	ts_hash(h, HASH_FILL, 20);
	cr_assert_eq(cat_gen_hold_lost_chunk(fx.cat, h), 1);
	struct cat_gen g = gen_get(b);
	cr_assert_eq(g.state, GEN_HELD);
	cr_assert_str_eq(g.rule, GEN_LOST_CHUNK_RULE);
	cr_assert(strncmp(g.held, GEN_LOST_CHUNK_REASON " 0014a5a5", 20) == 0, "%s", g.held);
	cr_assert(strstr(g.held, "\"model.pt\"") != NULL, "%s", g.held);
	cr_assert_eq(g.root, r2, "kept in place");
	cr_assert_eq(g.files, 1);
	cr_assert_eq(gen_get(a).state, GEN_COMMITTED, "a save not naming it stays");
	cr_assert_eq(gen_get(c).state, GEN_OPEN, "an open one is not held by it");
	cr_assert_eq(cat_gen_hold_lost_chunk(fx.cat, h), 0, "nothing more to hold");
	check_invariants();
	reopen_catalog();
	cr_assert_eq(gen_get(b).state, GEN_HELD);
	check_invariants();
}

/* G13: a save still OPEN when a chunk of it is found lost before its upload
 * (its UP_CHUNK row's error UP_LOST_ERROR, upload.h U14) is never committed
 * naming it: every rule but the admin's is refused (-ENOTRECOVERABLE, the
 * commit xattr's "explicit" too), cat_gen_unsettled names the chunk and the
 * file for the hold; the admin's commit decides. */
Test(gen, a_save_open_when_its_chunk_is_lost_is_never_committed_but_by_the_admin,
     .init = setup, .fini = teardown)
{
	uint64_t series = mkdir_(ROOT, "run"), r1, r2;
	uint64_t a = mkgen(series, "step-1", 1, true, &r1);
	put_file(r1, "model.pt", 30, 1, 100);
	uint64_t b = mkgen(series, "step-2", 2, true, &r2);
	put_file(r2, "model.pt", 40, 2, 100);
	uint8_t h[CAT_HASH_LEN];
	ts_hash(h, HASH_FILL, 41);
	OK(cat_defer_commit(fx.cat)); /* the writes above are deferred (catalog_defer.c) */
	struct cat_upload rows[16];
	int n = cat_upload_list(fx.cat, 0, rows, 16);
	uint64_t seq = 0;
	for (int i = 0; i < n; i++)
		if (rows[i].kind == UP_CHUNK && memcmp(rows[i].hash, h, CAT_HASH_LEN) == 0)
			seq = rows[i].seq;
	cr_assert_neq(seq, 0, "the chunk's upload row (of %d)", n);
	char why[GEN_HELD_MAX];
	OK(cat_gen_unsettled(fx.cat, b, why, sizeof(why)));
	cr_assert_str_eq(why, "", "nothing lost yet");
	OK(cat_upload_failed(fx.cat, seq, "BACKING: Input/output error")); /* not a loss */
	OK(cat_gen_unsettled(fx.cat, b, why, sizeof(why)));
	cr_assert_str_eq(why, "");
	OK(cat_upload_failed(fx.cat, seq, UP_LOST_ERROR " the cache copy is damaged"));
	FAILS(cat_gen_commit(fx.cat, b, "explicit"), ENOTRECOVERABLE);
	FAILS(cat_gen_commit(fx.cat, b, "dcp-metadata"), ENOTRECOVERABLE);
	cr_assert_eq(gen_get(b).state, GEN_OPEN);
	OK(cat_gen_unsettled(fx.cat, b, why, sizeof(why)));
	cr_assert(strncmp(why, GEN_LOST_CHUNK_REASON " ", strlen(GEN_LOST_CHUNK_REASON) + 1) == 0 &&
		  strstr(why, "\"model.pt\"") != NULL, "%s", why);
	uint8_t lost[4][CAT_HASH_LEN];
	size_t nl = 0;
	OK(cat_upload_lost_hashes(fx.cat, lost, 4, &nl));
	cr_assert_eq(nl, 1);
	cr_assert(memcmp(lost[0], h, CAT_HASH_LEN) == 0);
	OK(cat_gen_commit(fx.cat, a, "explicit")); /* a save not naming it commits */
	OK(cat_gen_commit(fx.cat, b, "admin"));    /* the decision takes it as it is */
	cr_assert_eq(gen_get(b).state, GEN_COMMITTED);
	check_invariants();
}
