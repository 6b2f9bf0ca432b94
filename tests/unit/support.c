/* Test support shared by the unit test files (support.h says what): no Test
 * lives here. Failures are criterion assertions, so a helper that cannot do
 * its job fails the test that called it. */
#define _GNU_SOURCE
#include "support.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>

#include "generation.h"
#include "backing.h"
#include "hash.h"
#include "store.h"
#include "upload.h"

/* ---- temporary directories ---- */

void ts_tmpdir_make(char *dir, size_t size, const char *name)
{
	int n = snprintf(dir, size, "/tmp/ckptfs-%s-XXXXXX", name);
	cr_assert(n > 0 && (size_t)n < size, "temporary directory name for %s too long", name);
	cr_assert_not_null(mkdtemp(dir));
}

static int ts_remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

void ts_tmpdir_remove(const char *dir)
{
	nftw(dir, ts_remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* ---- catalog builders ---- */

void ts_cat_open_in(const char *dir, const char *name, char *path, size_t size, struct cat **cat)
{
	int n = snprintf(path, size, "%s/%s", dir, name);
	cr_assert(n > 0 && (size_t)n < size, "catalog path %s/%s too long", dir, name);
	OK(cat_open(path, 0, 0, NULL, NULL, cat));
}

void ts_cat_close_checked(struct cat **cat)
{
	if (*cat)
		OK(cat_check(*cat));
	cat_close(*cat);
	*cat = NULL;
}

int64_t ts_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void ts_hash(uint8_t out[CAT_HASH_LEN], uint8_t fill, int seed)
{
	memset(out, fill, CAT_HASH_LEN);
	out[0] = (uint8_t)(seed >> 8);
	out[1] = (uint8_t)seed;
}

uint64_t ts_mk(struct cat *cat, uint64_t parent, const char *name, uint32_t mode,
	       const char *target)
{
	struct cat_inode in;
	OK(cat_create(cat, parent, name, mode, 1000, 1001, S_ISCHR(mode) ? makedev(1, 3) : 0,
		      target, &in));
	if (S_ISREG(mode)) /* created and closed: the create's mark cleared (generation.h G7, G9) */
		OK(cat_file_unmark(cat, in.ino));
	return in.ino;
}

uint64_t ts_mkgen(struct cat *cat, uint64_t series, const char *name, uint64_t step, bool dir,
		  uint64_t *ino)
{
	struct cat_gen_spec spec = { .name = name, .step = step };
	struct cat_inode in;
	uint64_t id = 0;
	OK(cat_create_in_gen(cat, series, name, dir ? S_IFDIR | 0750 : S_IFREG | 0640, 1000, 1001,
			     0, NULL, &spec, &in, &id));
	cr_assert_neq(id, 0);
	if (!dir) /* created and closed (generation.h G7, G9) */
		OK(cat_file_unmark(cat, in.ino));
	*ino = in.ino;
	return id;
}

void ts_write_chunks(struct cat *cat, uint64_t ino, uint8_t fill, int seed, int n, uint64_t len,
		     ts_chunk_stored_fn *stored, void *arg)
{
	OK(cat_pending_drop(cat, ino));
	for (int i = 0; i < n; i++) {
		struct cat_extent e = { .off = (uint64_t)i * len, .len = len, .chunk_len = len };
		bool must = false;
		ts_hash(e.hash, fill, seed + i);
		OK(cat_pending_add(cat, ino, &e, &must));
		if (must) {
			OK(cat_chunk_stored(cat, e.hash, 1, len / 2 + 1));
			if (stored)
				stored(arg, e.hash, len / 2 + 1);
		}
	}
	OK(cat_file_commit(cat, ino, (uint64_t)n * len, ts_now_ns(), false));
	OK(cat_pending_drop(cat, ino)); /* the writer closes */
}

/* ---- a canonical dump of a catalog ---- */

struct ts_dump {
	char *p;
	size_t len;
	FILE *f;
	/* inodes seen, for hard links: catalog inode → first path */
	int n_seen;
	uint64_t seen_ino[1024];
	char *seen_path[1024];
};

struct ts_child {
	char name[CAT_NAME_MAX + 1];
	uint64_t ino;
};

struct ts_children {
	int n;
	struct ts_child c[256];
};

static int ts_collect(void *arg, const char *name, const struct cat_inode *a, uint64_t next)
{
	struct ts_children *l = arg;
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return 0;
	cr_assert_lt(l->n, 256);
	strcpy(l->c[l->n].name, name);
	l->c[l->n++].ino = a->ino;
	return 0;
}

static int ts_child_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ts_child *)a)->name, ((const struct ts_child *)b)->name);
}

static void ts_dump_escaped(FILE *f, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c <= 0x20 || c >= 0x7f || c == '\\')
			fprintf(f, "\\x%02x", c);
		else
			fputc(c, f);
	}
}

static void ts_dump_inode(struct cat *cat, struct ts_dump *d, const char *path, uint64_t ino)
{
	for (int i = 0; i < d->n_seen; i++)
		if (d->seen_ino[i] == ino) {
			fprintf(d->f, "%s => link to %s\n", path, d->seen_path[i]);
			return;
		}
	cr_assert_lt(d->n_seen, 1024);
	d->seen_ino[d->n_seen] = ino;
	d->seen_path[d->n_seen++] = strdup(path);

	struct cat_inode a;
	uint64_t gen = 0;
	OK(cat_getattr(cat, ino, &a));
	OK(cat_gen_of(cat, ino, &gen));
	fprintf(d->f, "%s mode %o uid %u gid %u nlink %u size %llu rdev %llu a %lld m %lld c %lld gen %llu",
		path, a.mode, a.uid, a.gid, a.nlink, (unsigned long long)a.size,
		(unsigned long long)a.rdev, (long long)a.atime_ns, (long long)a.mtime_ns,
		(long long)a.ctime_ns, (unsigned long long)gen);
	if (S_ISLNK(a.mode)) {
		char target[4096];
		OK(cat_readlink(cat, ino, target, sizeof(target)));
		fprintf(d->f, " -> ");
		ts_dump_escaped(d->f, target);
	}
	fputc('\n', d->f);
	if (S_ISREG(a.mode)) {
		struct cat_extent e[64];
		int n = cat_extents(cat, ino, 0, e, 64);
		cr_assert_geq(n, 0);
		cr_assert_lt(n, 64);
		for (int i = 0; i < n; i++) {
			char hex[HASH_HEX_LEN + 1];
			hash_to_hex(e[i].hash, hex);
			fprintf(d->f, "  ext %llu +%llu %s@%llu/%llu\n", (unsigned long long)e[i].off,
				(unsigned long long)e[i].len, hex, (unsigned long long)e[i].chunk_off,
				(unsigned long long)e[i].chunk_len);
		}
	}
	if (!S_ISDIR(a.mode))
		return;
	struct ts_children *l = calloc(1, sizeof(*l));
	OK(cat_readdir(cat, ino, 0, ts_collect, l));
	qsort(l->c, (size_t)l->n, sizeof(l->c[0]), ts_child_cmp);
	for (int i = 0; i < l->n; i++) {
		char *child = NULL;
		char name[4 * CAT_NAME_MAX + 1];
		FILE *nf = fmemopen(name, sizeof(name), "w");
		ts_dump_escaped(nf, l->c[i].name);
		fclose(nf);
		cr_assert_gt(asprintf(&child, "%s/%s", path, name), 0);
		ts_dump_inode(cat, d, child, l->c[i].ino);
		free(child);
	}
	free(l);
}

static int ts_dump_gen(void *arg, const struct cat_gen *g)
{
	struct ts_dump *d = arg;
	fprintf(d->f, "gen %llu name ", (unsigned long long)g->id);
	ts_dump_escaped(d->f, g->name);
	fprintf(d->f, " step %llu state %d version %u pinned %d created %lld committed %lld"
		" ended %lld rule %s backup %llu files %llu logical %llu exclusive %llu\n",
		(unsigned long long)g->step, g->state, g->version, g->pinned,
		(long long)g->created_ns, (long long)g->committed_ns, (long long)g->ended_ns,
		g->rule, (unsigned long long)g->backup_root, (unsigned long long)g->files,
		(unsigned long long)g->logical_bytes, (unsigned long long)g->exclusive_bytes);
	return 0;
}

char *ts_dump_from(struct cat *cat, uint64_t ino, const char *path, bool gens)
{
	struct ts_dump *d = calloc(1, sizeof(*d));
	d->f = open_memstream(&d->p, &d->len);
	ts_dump_inode(cat, d, path, ino);
	if (gens)
		OK(cat_gen_list(cat, 0, false, ts_dump_gen, d));
	fclose(d->f);
	for (int i = 0; i < d->n_seen; i++)
		free(d->seen_path[i]);
	char *out = d->p;
	free(d);
	return out;
}

char *ts_dump(struct cat *cat)
{
	return ts_dump_from(cat, CAT_ROOT_INO, "", true);
}

void ts_expect_same(struct cat *a, struct cat *b)
{
	char *x = ts_dump(a), *y = ts_dump(b);
	cr_assert_str_eq(x, y, "catalogs differ:\n--- source\n%s--- rebuilt\n%s", x, y);
	free(x);
	free(y);
}

void ts_fill(uint8_t *buf, size_t len, int seed)
{
	uint32_t x = 0x9E3779B9u * (uint32_t)(seed + 1);
	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		buf[i] = (uint8_t)x;
	}
}

void ts_store_file(struct cat *cat, struct store *store, uint64_t ino, int seed, int n, size_t len,
		   ts_file_chunk_fn *each, void *arg)
{
	uint8_t *buf = malloc(len);
	cr_assert_not_null(buf);
	for (int k = 0; k < n; k++) {
		struct cat_extent e = { .off = (uint64_t)k * len, .len = len, .chunk_len = len };
		ts_fill(buf, len, seed + k);
		hash_sha256(buf, len, e.hash);
		bool must = false;
		OK(cat_pending_add(cat, ino, &e, &must));
		cr_assert(must, "chunk %d of seed %d is not new", k, seed);
		struct store_object_info info;
		OK(store_put(store, e.hash, buf, len, STORE_SYNC, &info));
		OK(cat_chunk_stored(cat, e.hash, info.codec, info.stored_len));
		if (each)
			each(arg, k, e.hash);
	}
	free(buf);
	OK(cat_file_commit(cat, ino, (uint64_t)n * len, ts_now_ns(), false));
	OK(cat_pending_drop(cat, ino));
}

void ts_float_fill(void *buf, size_t len)
{
	uint8_t *out = buf;
	uint32_t x = 0x9E3779B9u;
	for (size_t off = 0; off + 4 <= len; off += 4) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		float v = (float)(x >> 8) / (float)(1u << 24) * 0.05f * ((x & 1) ? -1.0f : 1.0f);
		memcpy(out + off, &v, 4);
	}
}

uint8_t *ts_random(size_t len, uint64_t seed)
{
	uint8_t *b = malloc(len ? len : 1);
	cr_assert_not_null(b);
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + 12345;
	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		b[i] = (uint8_t)(x >> 11);
	}
	return b;
}

void ts_stack_open(struct ts_stack *s, const char *name)
{
	memset(s, 0, sizeof(*s));
	ts_tmpdir_make(s->dir, sizeof(s->dir), name);
	snprintf(s->cache, sizeof(s->cache), "%s/cache", s->dir);
	snprintf(s->backing, sizeof(s->backing), "%s/backing", s->dir);
	cr_assert_eq(mkdir(s->cache, 0700), 0);
	cr_assert_eq(mkdir(s->backing, 0700), 0);
	OK(store_open(s->cache, &s->st));
	OK(backing_open(s->backing, 2000, &s->b));
	ts_cat_open_in(s->cache, "catalog.db", s->cat_path, sizeof(s->cat_path), &s->cat);
}

void ts_stack_close(struct ts_stack *s)
{
	ts_cat_close_checked(&s->cat);
	backing_close(s->b);
	store_close(s->st);
	ts_tmpdir_remove(s->dir);
}

/* ---- an uploader's worker held at a test hook ---- */

void ts_gate_hold(void *arg, const struct cat_upload *row)
{
	struct ts_gate *g = arg;
	pthread_mutex_lock(&g->lock);
	if (row->gen == g->gen && !g->reached) {
		g->reached = true;
		pthread_cond_broadcast(&g->cond);
		while (!g->go)
			pthread_cond_wait(&g->cond, &g->lock);
	}
	pthread_mutex_unlock(&g->lock);
}

bool ts_gate_reached(struct ts_gate *g)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 60;
	pthread_mutex_lock(&g->lock);
	while (!g->reached && pthread_cond_timedwait(&g->cond, &g->lock, &until) == 0)
		;
	bool reached = g->reached;
	pthread_mutex_unlock(&g->lock);
	return reached;
}

void ts_gate_open(struct ts_gate *g)
{
	pthread_mutex_lock(&g->lock);
	g->go = true;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
}
